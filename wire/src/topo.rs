//! The resource types that both the wire messages and the scheduler's topology use:
//! a node's figures and a link's quality (the JobProfile crate re-exports them).

use serde::{Deserialize, Serialize};

/// Measured latency and bandwidth of a link.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LinkQuality {
    /// One-way latency in ms.
    pub latency_ms: f64,
    /// Bandwidth in Mbit/s.
    pub bandwidth_mbps: f64,
}

/// A host able to run processes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Node {
    /// Host name, unique within its cluster.
    pub name: String,
    /// Number of process slots (cores) of the host.
    pub slots: u32,
    /// CPU speed in MHz.
    pub cpu_speed_mhz: f64,
    /// Memory in MiB.
    pub memory_mib: f64,
    /// Whose jobs the node runs: the submitters (client identities) its helper maps
    /// to a local account. Absent: anyone's (the helper has a default account).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submitters: Option<Vec<String>>,
}

impl Node {
    /// Whether the node runs jobs submitted by `owner`.
    pub fn runs_jobs_of(&self, owner: &str) -> bool {
        self.submitters
            .as_ref()
            .is_none_or(|s| s.iter().any(|o| o == owner))
    }
}
