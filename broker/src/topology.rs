//! The resource topology the broker schedules on: a pure book of what frontals
//! reported (nodes, internal link) and what their probes measured, and the choice of
//! who probes whom and when.
//!
//! Every pair of clusters is measured by one of its frontals (the one whose name
//! sorts first), through a `ProbePeer` request: a light QUIC exchange between the
//! two gateways (three empty echoes, then one of 256 KiB). A pair is measured when
//! both frontals are connected and its last measurement is older than the probe
//! interval; a failed probe is tried again after a tenth of it. The topology offers
//! a link between two clusters only when it was measured and the broker knows a
//! technique that links processes both ways ([`crate::plan::choose`]); relaying
//! counts only while a relay proxy is alive.
//!
//! A probe cannot cross every pair of gateways (a NAT that changes ports, a
//! firewall that keeps state): processes still link there (reversed, punched,
//! relayed). So a failed probe leaves an estimate in place of a measurement: the
//! two frontals' round trips to the broker for the latency (the path through the
//! broker is at least as long as theirs), and [`ESTIMATED_MBPS`] for the bandwidth,
//! until a probe succeeds. The failure is logged once per pair, not at every retry.
//! Processes' links measure such a pair better: each link's handshake times a round
//! trip over the path the processes really use (direct, punched, relayed...), and
//! the shortest seen replaces the estimate's latency ([`TopoBook::observed`]); the
//! bandwidth stays estimated.

use qcg_jobprofile::topology::{Cluster, InterLink, ResourceTopology};
use qcg_proto::{ClusterConfig, LinkQuality, NodeSpec};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

#[derive(Clone, Debug)]
struct Probe {
    at: Instant,
    in_flight: bool,
    failed: bool,
}

/// Bandwidth assumed for a pair of clusters whose gateways cannot probe each
/// other, in Mbit/s: a modest WAN, so that the scheduler prefers measured links.
pub const ESTIMATED_MBPS: f64 = 100.0;

/// What a failed probe leaves: `rtt_a` and `rtt_b` are the two frontals' round
/// trips to the broker; half their sum is the one-way latency through the broker.
pub fn estimate(rtt_a: Duration, rtt_b: Duration) -> LinkQuality {
    LinkQuality {
        latency_ms: (rtt_a + rtt_b).as_secs_f64() * 1e3 / 2.0,
        bandwidth_mbps: ESTIMATED_MBPS,
    }
}

/// What is known of the grid's resources.
#[derive(Clone, Debug, Default)]
pub struct TopoBook {
    nodes: BTreeMap<String, (Vec<NodeSpec>, LinkQuality)>,
    links: BTreeMap<(String, String), LinkQuality>,
    probes: BTreeMap<(String, String), Probe>,
    /// Pairs whose link is an estimate (their last probe failed).
    estimated: std::collections::BTreeSet<(String, String)>,
    /// The shortest one-way latency processes' links measured per pair, ms.
    observed: BTreeMap<(String, String), f64>,
}

fn pair(a: &str, b: &str) -> (String, String) {
    if a <= b {
        (a.to_string(), b.to_string())
    } else {
        (b.to_string(), a.to_string())
    }
}

impl TopoBook {
    /// A frontal reported its cluster's nodes.
    pub fn set_nodes(&mut self, cluster: &str, nodes: Vec<NodeSpec>, internal: LinkQuality) {
        self.nodes.insert(cluster.to_string(), (nodes, internal));
    }

    /// The outcome of a probe of the pair `a`–`b`. A failure keeps the last
    /// measurement, or else puts `fallback` (an [`estimate`]) in its place; it returns
    /// whether this failure is news (the first since a success), to be logged.
    pub fn record(
        &mut self,
        a: &str,
        b: &str,
        outcome: Result<LinkQuality, String>,
        fallback: LinkQuality,
        now: Instant,
    ) -> bool {
        let key = pair(a, b);
        let failed = outcome.is_err();
        let mut news = false;
        match outcome {
            Ok(q) => {
                self.links.insert(key.clone(), q);
                self.estimated.remove(&key);
            }
            Err(_) => {
                news = !self.probes.get(&key).is_some_and(|p| p.failed);
                if !self.links.contains_key(&key) || self.estimated.contains(&key) {
                    let mut q = fallback;
                    if let Some(&ms) = self.observed.get(&key) {
                        q.latency_ms = ms;
                    }
                    self.links.insert(key.clone(), q);
                    self.estimated.insert(key.clone());
                }
            }
        }
        self.probes.insert(
            key,
            Probe {
                at: now,
                in_flight: false,
                failed,
            },
        );
        news
    }

    /// Processes of `a` and `b` made a link with a round trip of `rtt`. Where the
    /// pair's link is an estimate (or not known yet), the shortest such latency
    /// replaces the estimated one. Returns whether the pair's latency changed.
    pub fn observed(&mut self, a: &str, b: &str, rtt: Duration) -> bool {
        let key = pair(a, b);
        let ms = rtt.as_secs_f64() * 1e3 / 2.0;
        let best = self.observed.entry(key.clone()).or_insert(f64::INFINITY);
        if ms >= *best {
            return false;
        }
        *best = ms;
        if self.links.contains_key(&key) && !self.estimated.contains(&key) {
            return false;
        }
        let q = self.links.entry(key.clone()).or_insert(LinkQuality {
            latency_ms: ms,
            bandwidth_mbps: ESTIMATED_MBPS,
        });
        q.latency_ms = ms;
        self.estimated.insert(key);
        true
    }

    /// A node of `cluster` (the first by name), if it reported any.
    pub fn first_node(&self, cluster: &str) -> Option<String> {
        self.nodes
            .get(cluster)
            .and_then(|(nodes, _)| nodes.iter().map(|n| n.name.clone()).min())
    }

    /// Whether the link `a`–`b` is an estimate rather than a measurement.
    pub fn is_estimated(&self, a: &str, b: &str) -> bool {
        self.estimated.contains(&pair(a, b))
    }

    /// The probes to make now among the `connected` clusters, as (measurer, target);
    /// they are marked in flight.
    pub fn due(
        &mut self,
        connected: &[String],
        now: Instant,
        interval: Duration,
    ) -> Vec<(String, String)> {
        let mut names = connected.to_vec();
        names.sort();
        names.dedup();
        let mut out = Vec::new();
        for (i, a) in names.iter().enumerate() {
            for b in &names[i + 1..] {
                let key = pair(a, b);
                let wait = |p: &Probe| if p.failed { interval / 10 } else { interval };
                let due = match self.probes.get(&key) {
                    None => true,
                    Some(p) => !p.in_flight && now.saturating_duration_since(p.at) >= wait(p),
                };
                if due {
                    let failed = self.probes.get(&key).is_some_and(|p| p.failed);
                    self.probes.insert(
                        key,
                        Probe {
                            at: now,
                            in_flight: true,
                            failed,
                        },
                    );
                    out.push((a.clone(), b.clone()));
                }
            }
        }
        out
    }

    /// The topology to schedule on: clusters with nodes, in name order, and the
    /// measured links that processes can use both ways. `relay`: whether a relay
    /// proxy is alive, so that relaying can link any two clusters.
    pub fn topology(&self, configs: &[ClusterConfig], relay: bool) -> ResourceTopology {
        let config = |n: &str| configs.iter().find(|c| c.name == n);
        let clusters: Vec<Cluster> = self
            .nodes
            .iter()
            .filter(|(name, (nodes, _))| !nodes.is_empty() && config(name).is_some())
            .map(|(name, (nodes, internal))| Cluster {
                name: name.clone(),
                nodes: nodes.clone(),
                internal: *internal,
            })
            .collect();
        let has = |n: &str| clusters.iter().any(|c| c.name == n);
        let links = self
            .links
            .iter()
            .filter(|((a, b), _)| has(a) && has(b))
            .filter(|((a, b), _)| match (config(a), config(b)) {
                (Some(ca), Some(cb)) => {
                    let usable = |src, dst| {
                        crate::plan::choose(src, dst)
                            .into_iter()
                            .any(|t| relay || t != qcg_proto::Technique::Relayed)
                    };
                    usable(ca, cb) && usable(cb, ca)
                }
                _ => false,
            })
            .map(|((a, b), q)| InterLink {
                a: a.clone(),
                b: b.clone(),
                quality: *q,
            })
            .collect();
        ResourceTopology { clusters, links }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use qcg_proto::Policy;

    fn cfg(name: &str, policy: Policy) -> ClusterConfig {
        ClusterConfig {
            name: name.into(),
            policy,
            nat: qcg_proto::Nat::None,
            public_address: None,
        }
    }

    fn cfg_nat(name: &str, policy: Policy, nat: qcg_proto::Nat) -> ClusterConfig {
        ClusterConfig {
            nat,
            public_address: Some([198, 51, 100, 1].into()),
            ..cfg(name, policy)
        }
    }

    fn q(ms: f64) -> LinkQuality {
        LinkQuality {
            latency_ms: ms,
            bandwidth_mbps: 100.0,
        }
    }

    fn node(n: &str) -> Vec<NodeSpec> {
        vec![NodeSpec {
            name: n.into(),
            slots: 2,
            cpu_speed_mhz: 1000.0,
            memory_mib: 1024.0,
            submitters: None,
        }]
    }

    #[test]
    fn each_pair_is_probed_once_per_interval_by_its_first_cluster() {
        let mut b = TopoBook::default();
        let t0 = Instant::now();
        let iv = Duration::from_secs(60);
        let names = vec!["c".to_string(), "a".to_string(), "b".to_string()];
        let due = b.due(&names, t0, iv);
        assert_eq!(
            due,
            [("a", "b"), ("a", "c"), ("b", "c")].map(|(x, y)| (x.to_string(), y.to_string()))
        );
        // In flight: not again.
        assert!(b.due(&names, t0 + iv * 2, iv).is_empty());
        b.record("b", "a", Ok(q(1.0)), q(9.0), t0);
        b.record("a", "c", Err("down".into()), q(9.0), t0);
        b.record("c", "b", Ok(q(2.0)), q(9.0), t0);
        // A failure is retried sooner than a success.
        assert_eq!(
            b.due(&names, t0 + iv / 10, iv),
            [("a".to_string(), "c".to_string())]
        );
        assert_eq!(b.due(&names, t0 + iv, iv).len(), 2);
    }

    /// Issue 12, item 6: gateways that cannot probe each other (a NAT, a stateful
    /// firewall) left their pair out of the topology, so jobs could not be placed
    /// across it, with a WARN at every retry.
    #[test]
    fn a_pair_that_cannot_be_probed_gets_an_estimate_and_one_warning() {
        let mut b = TopoBook::default();
        let t0 = Instant::now();
        for c in ["a", "b"] {
            b.set_nodes(c, node(&format!("{c}1")), q(0.1));
        }
        let configs = [cfg("a", Policy::Open), cfg("b", Policy::Open)];
        let est = estimate(Duration::from_millis(10), Duration::from_millis(30));
        assert_eq!(est.latency_ms, 20.0);
        assert_eq!(est.bandwidth_mbps, ESTIMATED_MBPS);
        let names = vec!["a".to_string(), "b".to_string()];
        let iv = Duration::from_secs(60);
        b.due(&names, t0, iv);
        assert!(b.record("a", "b", Err("no route".into()), est, t0));
        assert_eq!(b.topology(&configs, false).links[0].quality, est);
        assert!(b.is_estimated("b", "a"));
        // Retries that fail again are not news.
        b.due(&names, t0 + iv / 10, iv);
        assert!(!b.record("a", "b", Err("no route".into()), est, t0 + iv / 10));
        // A measurement replaces the estimate, and a later failure keeps it.
        b.record("a", "b", Ok(q(5.0)), est, t0 + iv);
        assert!(!b.is_estimated("a", "b"));
        assert!(b.record("a", "b", Err("down".into()), est, t0 + iv * 2));
        assert_eq!(b.topology(&configs, false).links[0].quality, q(5.0));
    }

    /// Issue 12, item 6: a pair whose gateways cannot probe each other is measured
    /// by its processes' links (their handshakes' round trips): the shortest seen
    /// replaces the estimated latency, and keeps it through the failed probes after.
    #[test]
    fn processes_links_measure_a_pair_the_gateways_cannot_probe() {
        let mut b = TopoBook::default();
        let t0 = Instant::now();
        for c in ["a", "b"] {
            b.set_nodes(c, node(&format!("{c}1")), q(0.1));
        }
        let configs = [cfg("a", Policy::Open), cfg("b", Policy::Open)];
        let est = estimate(Duration::from_millis(40), Duration::from_millis(40));
        b.record("a", "b", Err("no route".into()), est, t0);
        assert_eq!(
            b.topology(&configs, false).links[0].quality.latency_ms,
            40.0
        );
        assert!(b.observed("b", "a", Duration::from_millis(24)));
        assert!(!b.observed("a", "b", Duration::from_millis(30)), "longer");
        assert!(b.observed("a", "b", Duration::from_millis(22)));
        let got = b.topology(&configs, false).links[0].quality;
        assert_eq!((got.latency_ms, got.bandwidth_mbps), (11.0, ESTIMATED_MBPS));
        b.record(
            "a",
            "b",
            Err("no route".into()),
            est,
            t0 + Duration::from_secs(6),
        );
        assert_eq!(
            b.topology(&configs, false).links[0].quality.latency_ms,
            11.0
        );
        // A real probe wins over the processes' figure.
        b.record("a", "b", Ok(q(5.0)), est, t0 + Duration::from_secs(60));
        assert!(!b.observed("a", "b", Duration::from_millis(2)));
        assert_eq!(b.topology(&configs, false).links[0].quality, q(5.0));
    }

    #[test]
    fn topology_keeps_usable_links_between_clusters_with_nodes() {
        let mut b = TopoBook::default();
        let now = Instant::now();
        for c in ["a", "b", "y", "z"] {
            b.set_nodes(c, node(&format!("{c}1")), q(0.1));
        }
        b.set_nodes("empty", vec![], q(0.1));
        b.record("a", "b", Ok(q(5.0)), q(9.0), now);
        b.record("a", "z", Ok(q(5.0)), q(9.0), now);
        b.record("y", "z", Ok(q(5.0)), q(9.0), now);
        b.record("a", "empty", Ok(q(5.0)), q(9.0), now);
        let random = qcg_proto::Nat::RandomPort;
        let configs = [
            cfg("a", Policy::Open),
            cfg("b", Policy::Open),
            cfg_nat("y", Policy::Closed, random),
            cfg_nat("z", Policy::Closed, random),
            cfg("empty", Policy::Open),
        ];
        let pairs = |t: &ResourceTopology| -> Vec<(String, String)> {
            t.links.iter().map(|l| (l.a.clone(), l.b.clone())).collect()
        };
        let s = |a: &str, b: &str| (a.to_string(), b.to_string());
        let t = b.topology(&configs, false);
        t.validate().unwrap();
        let names: Vec<_> = t.clusters.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "y", "z"]);
        // z is closed but a accepts connections: z's processes are reached in
        // reverse. y and z are both closed behind random-port NATs: without a relay
        // proxy no technique links them.
        assert_eq!(pairs(&t), [s("a", "b"), s("a", "z")]);
        // With a proxy alive, relaying links them.
        let t = b.topology(&configs, true);
        t.validate().unwrap();
        assert_eq!(pairs(&t), [s("a", "b"), s("a", "z"), s("y", "z")]);
    }
}
