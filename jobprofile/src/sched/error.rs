//! Why a job could not be scheduled.

use thiserror::Error;

use crate::topology::TopologyError;

/// Reasons for [`schedule`](super::schedule) to fail. The messages name the
/// group, the requirement that failed and the best figure on offer.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ScheduleError {
    /// The topology is inconsistent.
    #[error("invalid topology: {0}")]
    Topology(#[from] TopologyError),
    /// The free-slot table does not match the topology.
    #[error("invalid free slots: {0}")]
    FreeSlots(String),
    /// The profile refers to something it does not define (only possible
    /// for models built in code, since parsing checks references).
    #[error("invalid profile: {0}")]
    Profile(String),
    /// No node with free slots meets a computing requirement.
    #[error("group \"{group}\" needs {requirement} (template \"{template}\"); {offer}")]
    Computing {
        /// The group.
        group: String,
        /// The computing template.
        template: String,
        /// The failing requirement, e.g. `memory >= 4096 MiB`.
        requirement: String,
        /// What the best node offers, e.g. `the best node offers 2048 MiB (node "n1" in cluster "c")`.
        offer: String,
    },
    /// Not enough free slots on nodes that the group may use.
    #[error("group \"{group}\" needs {needed} processes; {offer}")]
    Slots {
        /// The group.
        group: String,
        /// Processes of the group.
        needed: u32,
        /// What is available, e.g. `only 4 free slots on nodes matching template "t"`.
        offer: String,
    },
    /// No cluster or set of clusters meets the group's internal network requirement.
    #[error("group \"{group}\" needs {requirement} inside the group; {offer}")]
    IntraGroup {
        /// The group.
        group: String,
        /// The failing requirement, e.g. `latency <= 5 ms`.
        requirement: String,
        /// The best offer, e.g. `the best cluster with 6 free slots offers 12.4 ms (cluster "rennes")`.
        offer: String,
    },
    /// No placement of two connected groups meets their connection requirement.
    #[error("groups \"{from}\" and \"{to}\" need {requirement} between them; {offer}")]
    Connection {
        /// The group declaring the connection.
        from: String,
        /// Its endpoint.
        to: String,
        /// The failing requirement.
        requirement: String,
        /// The best offer.
        offer: String,
    },
    /// Every requirement can be met on its own, but not all together.
    #[error("no mapping meets all requirements together ({detail}; {explored} placements tried)")]
    Unsatisfiable {
        /// What was found about the conflict.
        detail: String,
        /// Search nodes explored.
        explored: u64,
    },
    /// The search budget ran out before any mapping was found.
    #[error("no mapping found within the search budget of {explored} placements")]
    BudgetExhausted {
        /// Search nodes explored.
        explored: u64,
    },
}
