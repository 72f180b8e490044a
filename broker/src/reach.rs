//! Active reachability checks: what a cluster announced is tried, not only
//! believed. Where it is announced reachable from outside (open, or an open port
//! range), a helper of the cluster listens on a fresh port as a process would
//! (`OpenCheck`, within the cluster's range when it has one) and a relay proxy,
//! outside every cluster, dials it (`DialCheck`). A dial that fails while no process
//! of another cluster ever got in makes the cluster planned as closed. For every
//! cluster, a helper connects to the proxy and asks from which address it is seen
//! (`NatCheck`): the NAT its processes' connections really go through
//! ([`nat_seen`]), which the broker plans with when it is not the announced one. The
//! reasons show in `/v1/clusters` ([`crate::registry::Registry::checked`]).
//!
//! This module only decides when: a cluster is checked as soon as it can be (a
//! helper and a live proxy), again every [`CHECK_INTERVAL`], and at once when its
//! config changes; a check that could not run (no answer from the frontal, the
//! helper or the proxy) is tried again after [`RETRY`]. Pure: time is an input.

use qcg_proto::{ClusterConfig, Nat};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// Between two checks of a cluster.
pub const CHECK_INTERVAL: Duration = Duration::from_secs(600);
/// After a check that could not run.
pub const RETRY: Duration = Duration::from_secs(5);

#[derive(Clone, Debug)]
struct Last {
    config: ClusterConfig,
    at: Instant,
    in_flight: bool,
    ran: bool,
}

/// When each cluster was last checked.
#[derive(Clone, Debug, Default)]
pub struct Checks {
    last: BTreeMap<String, Last>,
}

impl Checks {
    /// The checks to start now, among `clusters` (each with a node whose helper can
    /// take part, if any), when a relay proxy is alive (`proxy`): (config, node).
    /// They are marked in flight.
    pub fn due(
        &mut self,
        clusters: &[(ClusterConfig, Option<String>)],
        proxy: bool,
        now: Instant,
    ) -> Vec<(ClusterConfig, String)> {
        if !proxy {
            return Vec::new();
        }
        let mut out = Vec::new();
        for (config, node) in clusters {
            let Some(node) = node else { continue };
            let due = match self.last.get(&config.name) {
                None => true,
                Some(l) if l.config != *config => true,
                Some(l) => {
                    let wait = if l.ran { CHECK_INTERVAL } else { RETRY };
                    !l.in_flight && now.saturating_duration_since(l.at) >= wait
                }
            };
            if due {
                self.last.insert(
                    config.name.clone(),
                    Last {
                        config: config.clone(),
                        at: now,
                        in_flight: true,
                        ran: false,
                    },
                );
                out.push((config.clone(), node.clone()));
            }
        }
        out
    }

    /// The check of `config` ended at `now`; `ran`: whether it gave a verdict.
    pub fn done(&mut self, config: &ClusterConfig, ran: bool, now: Instant) {
        if let Some(l) = self.last.get_mut(&config.name) {
            if l.config == *config {
                *l = Last {
                    config: config.clone(),
                    at: now,
                    in_flight: false,
                    ran,
                };
            }
        }
    }
}

/// The address translation between a connection's address on its node (`local`)
/// and the one a host outside saw (`seen`): none when the address is kept; a NAT
/// that keeps the port (what simultaneous open needs); or one that changes it.
pub fn nat_seen(local: SocketAddr, seen: SocketAddr) -> Nat {
    if local.ip() == seen.ip() {
        Nat::None
    } else if local.port() == seen.port() {
        Nat::PortPreserving
    } else {
        Nat::RandomPort
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use qcg_proto::{Nat, Policy};

    fn cfg(name: &str, policy: Policy) -> ClusterConfig {
        ClusterConfig {
            name: name.into(),
            policy,
            nat: Nat::None,
            public_address: None,
        }
    }

    #[test]
    fn the_nat_seen_is_what_the_addresses_show() {
        let at = |s: &str| s.parse::<SocketAddr>().unwrap();
        assert_eq!(
            nat_seen(at("10.0.0.2:4000"), at("10.0.0.2:4000")),
            Nat::None
        );
        assert_eq!(
            nat_seen(at("10.0.0.2:4000"), at("198.51.100.1:4000")),
            Nat::PortPreserving
        );
        assert_eq!(
            nat_seen(at("10.0.0.2:4000"), at("198.51.100.1:61234")),
            Nat::RandomPort
        );
    }

    #[test]
    fn clusters_are_checked_once_they_can_be_then_every_interval() {
        let mut c = Checks::default();
        let t0 = Instant::now();
        let open = cfg("a", Policy::Open);
        let closed = cfg("b", Policy::Closed);
        let range = cfg("c", Policy::PortRange { lo: 1, hi: 9 });
        let all = vec![
            (open.clone(), Some("a1".to_string())),
            (closed.clone(), Some("b1".to_string())),
            (range.clone(), None),
        ];
        // No proxy to dial from: nothing.
        assert!(c.due(&all, false, t0).is_empty());
        // A cluster without a helper cannot be checked.
        assert_eq!(
            c.due(&all, true, t0),
            vec![(open.clone(), "a1".into()), (closed.clone(), "b1".into())]
        );
        c.done(&closed, true, t0);
        let all = vec![(open.clone(), Some("a1".to_string()))];
        // In flight: not again.
        assert!(c.due(&all, true, t0 + CHECK_INTERVAL * 2).is_empty());
        c.done(&open, true, t0 + Duration::from_secs(1));
        assert!(c.due(&all, true, t0 + CHECK_INTERVAL).is_empty());
        let later = t0 + Duration::from_secs(1) + CHECK_INTERVAL;
        assert_eq!(c.due(&all, true, later).len(), 1);
        // A check that could not run is tried again sooner.
        c.done(&open, false, later);
        assert!(c.due(&all, true, later + RETRY / 2).is_empty());
        assert_eq!(c.due(&all, true, later + RETRY).len(), 1);
        // A new config is checked at once, in flight or not; the old check's end
        // does not count for it.
        let now_closed_range = cfg("a", Policy::PortRange { lo: 5, hi: 6 });
        let all = vec![(now_closed_range.clone(), Some("a1".to_string()))];
        assert_eq!(c.due(&all, true, later + RETRY).len(), 1);
        c.done(&open, true, later + RETRY);
        assert!(c.due(&all, true, later + RETRY * 100).is_empty());
    }
}
