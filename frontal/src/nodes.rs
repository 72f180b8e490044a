//! What the cluster offers the scheduler: a pure merge of the frontal's config and
//! the helpers that are connected.
//!
//! A node is offered while its helper is connected. Its figures are those of the
//! config's `[[nodes]]` entry of the same name, field by field, and otherwise those
//! the helper reported (cores, memory and clock of its machine). The cluster's
//! internal link is the config's figures when given; otherwise the latency is half
//! the largest QUIC round-trip time to a helper, and the bandwidth 1000 Mbit/s.

use qcg_proto::{LinkQuality, NodeSpec};
use serde::Deserialize;
use std::time::Duration;

/// One `[[nodes]]` entry of the frontal's config: figures that override what the
/// node's helper reports.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeOverride {
    /// Node name (as in the helper's config).
    pub name: String,
    /// Process slots.
    pub slots: Option<u32>,
    /// CPU speed, MHz.
    pub cpu_speed_mhz: Option<f64>,
    /// Memory, MiB.
    pub memory_mib: Option<f64>,
}

/// How the frontal describes its cluster beyond the firewall policy.
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    /// Per-node overrides.
    pub nodes: Vec<NodeOverride>,
    /// Latency inside the cluster, ms (measured when absent).
    pub internal_latency_ms: Option<f64>,
    /// Bandwidth inside the cluster, Mbit/s.
    pub internal_bandwidth_mbps: f64,
    /// Launch ranks through Slurm ([`crate::slurm`]) instead of the nodes' helpers.
    pub slurm: Option<crate::slurm::SlurmConfig>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            nodes: Vec::new(),
            internal_latency_ms: None,
            internal_bandwidth_mbps: 1000.0,
            slurm: None,
        }
    }
}

/// The nodes to offer, in name order: every connected helper's node, with the
/// config's figures where it gives them.
pub fn offer(settings: &Settings, connected: &[NodeSpec]) -> Vec<NodeSpec> {
    let mut out: Vec<NodeSpec> = connected
        .iter()
        .map(|n| {
            let o = settings.nodes.iter().find(|o| o.name == n.name);
            NodeSpec {
                name: n.name.clone(),
                slots: o.and_then(|o| o.slots).unwrap_or(n.slots),
                cpu_speed_mhz: o.and_then(|o| o.cpu_speed_mhz).unwrap_or(n.cpu_speed_mhz),
                memory_mib: o.and_then(|o| o.memory_mib).unwrap_or(n.memory_mib),
                submitters: n.submitters.clone(),
            }
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// The cluster's internal link, from the settings and the round-trip times to the
/// connected helpers.
pub fn internal(settings: &Settings, rtts: &[Duration]) -> LinkQuality {
    let measured = rtts
        .iter()
        .map(|r| r.as_secs_f64() * 1000.0 / 2.0)
        .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
    LinkQuality {
        latency_ms: settings.internal_latency_ms.or(measured).unwrap_or(0.05),
        bandwidth_mbps: settings.internal_bandwidth_mbps,
    }
}

/// Link quality from a probe: `rtt` of an empty echo and `elapsed` for an echo
/// carrying `bytes`. The latency is half the round trip; the bandwidth is the bytes
/// over the extra time they took (at least a microsecond).
pub fn measured(rtt: Duration, elapsed: Duration, bytes: usize) -> LinkQuality {
    let extra = elapsed.saturating_sub(rtt).max(Duration::from_micros(1));
    LinkQuality {
        latency_ms: rtt.as_secs_f64() * 1000.0 / 2.0,
        bandwidth_mbps: bytes as f64 * 8.0 / extra.as_secs_f64() / 1e6,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, slots: u32) -> NodeSpec {
        NodeSpec {
            name: name.into(),
            slots,
            cpu_speed_mhz: 2000.0,
            memory_mib: 4096.0,
            submitters: None,
        }
    }

    #[test]
    fn config_overrides_what_helpers_report_and_only_connected_nodes_count() {
        let settings = Settings {
            nodes: vec![
                NodeOverride {
                    name: "b".into(),
                    slots: Some(8),
                    ..Default::default()
                },
                NodeOverride {
                    name: "offline".into(),
                    slots: Some(64),
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        let got = offer(&settings, &[node("b", 2), node("a", 2)]);
        assert_eq!(got.len(), 2);
        assert_eq!((got[0].name.as_str(), got[0].slots), ("a", 2));
        assert_eq!((got[1].name.as_str(), got[1].slots), ("b", 8));
        assert_eq!(got[1].memory_mib, 4096.0);
    }

    #[test]
    fn internal_link_and_probe_figures() {
        let s = Settings::default();
        let q = internal(&s, &[Duration::from_millis(2), Duration::from_millis(4)]);
        assert_eq!(q.latency_ms, 2.0);
        assert_eq!(internal(&s, &[]).latency_ms, 0.05);
        let s = Settings {
            internal_latency_ms: Some(0.5),
            internal_bandwidth_mbps: 10_000.0,
            ..Default::default()
        };
        assert_eq!(internal(&s, &[Duration::from_millis(9)]).latency_ms, 0.5);
        let q = measured(
            Duration::from_millis(2),
            Duration::from_millis(12),
            1_250_000,
        );
        assert_eq!(q.latency_ms, 1.0);
        assert!((q.bandwidth_mbps - 1000.0).abs() < 1e-6, "{q:?}");
        // A transfer quicker than the round trip does not divide by zero.
        assert!(
            measured(Duration::from_millis(2), Duration::from_millis(1), 10)
                .bandwidth_mbps
                .is_finite()
        );
    }
}
