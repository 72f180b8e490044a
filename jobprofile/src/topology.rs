//! The resource topology offered to the scheduler: clusters of nodes and the
//! measured quality of the links inside and between clusters.
//!
//! Serialisable with serde so that the broker can serve it as JSON.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use thiserror::Error;

pub use qcg_wire::topo::{LinkQuality, Node};

/// A set of nodes sharing one local network.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cluster {
    /// Cluster name, unique in the topology.
    pub name: String,
    /// Its nodes.
    pub nodes: Vec<Node>,
    /// Quality of the links between two nodes of the cluster.
    pub internal: LinkQuality,
}

/// The measured link between two clusters (the same in both directions).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InterLink {
    /// One end (a cluster name).
    pub a: String,
    /// The other end (a cluster name).
    pub b: String,
    /// Measured quality.
    pub quality: LinkQuality,
}

/// Clusters and links; a pair of clusters without an [`InterLink`] is
/// considered unreachable.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ResourceTopology {
    /// The clusters.
    pub clusters: Vec<Cluster>,
    /// Links between pairs of distinct clusters.
    pub links: Vec<InterLink>,
}

/// A topology that cannot be used as it is.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum TopologyError {
    /// Two clusters share a name, or two nodes of a cluster do.
    #[error("duplicate {what} \"{name}\"")]
    Duplicate {
        /// `cluster` or `node in cluster "x"`.
        what: String,
        /// The duplicated name.
        name: String,
    },
    /// A link names a cluster that does not exist.
    #[error("link {a:?} - {b:?} names unknown cluster \"{unknown}\"")]
    UnknownCluster {
        /// One end.
        a: String,
        /// The other end.
        b: String,
        /// The unknown name.
        unknown: String,
    },
    /// A link from a cluster to itself (use `internal`), or a pair given twice.
    #[error("link {a:?} - {b:?}: {reason}")]
    BadLink {
        /// One end.
        a: String,
        /// The other end.
        b: String,
        /// Why it is rejected.
        reason: String,
    },
    /// A measurement that is negative, infinite or not a number.
    #[error("{what} is {value}; expected a finite number >= 0")]
    BadFigure {
        /// Which figure.
        what: String,
        /// Its value.
        value: f64,
    },
}

fn check(what: impl FnOnce() -> String, value: f64) -> Result<(), TopologyError> {
    if value.is_finite() && value >= 0.0 {
        Ok(())
    } else {
        Err(TopologyError::BadFigure {
            what: what(),
            value,
        })
    }
}

fn check_link(what: &str, q: &LinkQuality) -> Result<(), TopologyError> {
    check(|| format!("latency of {what}"), q.latency_ms)?;
    check(|| format!("bandwidth of {what}"), q.bandwidth_mbps)
}

impl ResourceTopology {
    /// Index of the cluster with this name.
    pub fn cluster_index(&self, name: &str) -> Option<usize> {
        self.clusters.iter().position(|c| c.name == name)
    }

    /// Total number of nodes.
    pub fn node_count(&self) -> usize {
        self.clusters.iter().map(|c| c.nodes.len()).sum()
    }

    /// Checks names, figures and link ends.
    pub fn validate(&self) -> Result<(), TopologyError> {
        let mut names = HashMap::new();
        for c in &self.clusters {
            if names.insert(c.name.as_str(), ()).is_some() {
                return Err(TopologyError::Duplicate {
                    what: "cluster".into(),
                    name: c.name.clone(),
                });
            }
            check_link(&format!("cluster \"{}\"", c.name), &c.internal)?;
            let mut nodes = HashMap::new();
            for n in &c.nodes {
                if nodes.insert(n.name.as_str(), ()).is_some() {
                    return Err(TopologyError::Duplicate {
                        what: format!("node in cluster \"{}\"", c.name),
                        name: n.name.clone(),
                    });
                }
                check(
                    || format!("cpu speed of node \"{}\"", n.name),
                    n.cpu_speed_mhz,
                )?;
                check(|| format!("memory of node \"{}\"", n.name), n.memory_mib)?;
            }
        }
        self.link_matrix().map(|_| ())
    }

    /// The dense matrix of link qualities indexed `[i * n + j]`: the
    /// diagonal holds each cluster's internal link, missing pairs are `None`.
    pub fn link_matrix(&self) -> Result<Vec<Option<LinkQuality>>, TopologyError> {
        let n = self.clusters.len();
        let index: HashMap<&str, usize> = self
            .clusters
            .iter()
            .enumerate()
            .map(|(i, c)| (c.name.as_str(), i))
            .collect();
        let mut m = vec![None; n * n];
        for (i, c) in self.clusters.iter().enumerate() {
            m[i * n + i] = Some(c.internal);
        }
        for l in &self.links {
            let find = |name: &String| {
                index
                    .get(name.as_str())
                    .copied()
                    .ok_or_else(|| TopologyError::UnknownCluster {
                        a: l.a.clone(),
                        b: l.b.clone(),
                        unknown: name.clone(),
                    })
            };
            let (i, j) = (find(&l.a)?, find(&l.b)?);
            let bad = |reason: &str| TopologyError::BadLink {
                a: l.a.clone(),
                b: l.b.clone(),
                reason: reason.into(),
            };
            if i == j {
                return Err(bad("a cluster's own link is its `internal` field"));
            }
            if m[i * n + j].is_some() {
                return Err(bad("this pair of clusters is given twice"));
            }
            check_link(&format!("link \"{}\" - \"{}\"", l.a, l.b), &l.quality)?;
            m[i * n + j] = Some(l.quality);
            m[j * n + i] = Some(l.quality);
        }
        Ok(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(latency_ms: f64, bandwidth_mbps: f64) -> LinkQuality {
        LinkQuality {
            latency_ms,
            bandwidth_mbps,
        }
    }

    fn sample() -> ResourceTopology {
        let node = |name: &str| Node {
            name: name.into(),
            slots: 4,
            cpu_speed_mhz: 2400.0,
            memory_mib: 8192.0,
            submitters: None,
        };
        ResourceTopology {
            clusters: vec![
                Cluster {
                    name: "nancy".into(),
                    nodes: vec![node("n1"), node("n2")],
                    internal: q(0.05, 1000.0),
                },
                Cluster {
                    name: "rennes".into(),
                    nodes: vec![node("r1")],
                    internal: q(0.1, 1000.0),
                },
            ],
            links: vec![InterLink {
                a: "nancy".into(),
                b: "rennes".into(),
                quality: q(12.4, 100.0),
            }],
        }
    }

    #[test]
    fn json_round_trip() {
        let t = sample();
        let json = serde_json::to_string(&t).unwrap();
        assert!(json.contains("\"latency_ms\":12.4"));
        let back: ResourceTopology = serde_json::from_str(&json).unwrap();
        assert_eq!(back, t);
    }

    #[test]
    fn matrix_is_symmetric_with_internal_diagonal() {
        let t = sample();
        t.validate().unwrap();
        let m = t.link_matrix().unwrap();
        assert_eq!(m[1].unwrap().latency_ms, 12.4);
        assert_eq!(m[2].unwrap().latency_ms, 12.4);
        assert_eq!(m[3].unwrap().latency_ms, 0.1);
        assert_eq!(t.node_count(), 3);
        assert_eq!(t.cluster_index("rennes"), Some(1));
    }

    #[test]
    fn invalid_topologies_are_rejected() {
        let mut t = sample();
        t.links[0].b = "lyon".into();
        assert!(matches!(
            t.validate(),
            Err(TopologyError::UnknownCluster { .. })
        ));
        let mut t = sample();
        t.links.push(t.links[0].clone());
        assert!(matches!(t.validate(), Err(TopologyError::BadLink { .. })));
        let mut t = sample();
        t.clusters[1].name = "nancy".into();
        assert!(matches!(t.validate(), Err(TopologyError::Duplicate { .. })));
        let mut t = sample();
        t.clusters[0].nodes[0].memory_mib = -1.0;
        assert!(matches!(t.validate(), Err(TopologyError::BadFigure { .. })));
        let mut t = sample();
        t.links[0].quality.latency_ms = f64::NAN;
        assert!(t.validate().unwrap_err().to_string().contains("latency"));
    }
}
