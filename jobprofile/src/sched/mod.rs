//! The topology-aware scheduler: maps the process groups of a
//! [`JobProfile`] onto the clusters and nodes of a [`ResourceTopology`].
//!
//! # Rules
//!
//! * **Computing requirements.** A group may only use nodes that satisfy its
//!   computing template: `cpuspeed` and `memory` are compared with the node's
//!   figures; `cpucount` is the per-node slot requirement: its `min` is
//!   compared with the node's *free* slots and its `max` with the node's
//!   total slots.
//! * **Inside a group.** A group with two or more processes must use
//!   clusters whose internal link satisfies the group's network template.
//!   A group is split over several clusters only when no single cluster has
//!   room for it; it is then spread over an anchor cluster and the clusters
//!   nearest to it, and every link between two clusters of the split must
//!   exist and satisfy the template too (without a template, the links must
//!   merely exist). The split fills clusters in order, anchor first.
//! * **Between groups.** For each `groupConnection`, every link between a
//!   cluster of one group and a cluster of the other (the internal link when
//!   they share a cluster) must exist and satisfy the template. Groups
//!   without a declared connection may be placed anywhere.
//! * **Capacity.** A node never receives more processes than its free slots.
//!
//! # Cost
//!
//! Among feasible mappings the scheduler minimises, lexicographically, the
//! [`Cost`] in the spirit of TAAG: first the highest latency *level* (order
//! of magnitude, see [`latency_level`]) used inside a group, then the highest
//! latency between connected groups, then the mean latency over connected
//! pairs of groups, then the highest latency inside a group.
//!
//! # Search
//!
//! Depth-first branch and bound over group → cluster-set assignments (see
//! the `search` module): most constrained groups first, candidates in
//! increasing lower-bound order, pruning as soon as a bound reaches the best
//! complete mapping. The search is bounded by [`Limits::max_placements`];
//! when the budget runs out the best mapping found is returned with
//! [`Mapping::exhaustive`] set to `false`.
//!
//! # Placement inside a cluster
//!
//! [`Strategy::Spread`] gives each process to the eligible node with the
//! fewest used slots (round-robin); [`Strategy::Concentrate`] fills the
//! eligible nodes in order, as P2P-MPI describes.

mod diagnose;
mod error;
mod place;
mod problem;
mod search;
#[cfg(test)]
mod tests;

use serde::{Deserialize, Serialize};

use crate::profile::JobProfile;
use crate::topology::ResourceTopology;
pub use error::ScheduleError;

/// How processes are placed on the nodes of a cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Strategy {
    /// As few processes per node as possible (round-robin, fewest used first).
    Spread,
    /// Fill each node before using the next one.
    Concentrate,
}

/// Free slots of every node, indexed `[cluster][node]` like the topology.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FreeSlots {
    free: Vec<Vec<u32>>,
}

impl FreeSlots {
    /// Every slot of every node is free.
    pub fn all(topo: &ResourceTopology) -> Self {
        Self {
            free: topo
                .clusters
                .iter()
                .map(|c| c.nodes.iter().map(|n| n.slots).collect())
                .collect(),
        }
    }

    /// Free counts given per cluster and node, checked against the topology.
    pub fn from_counts(
        topo: &ResourceTopology,
        free: Vec<Vec<u32>>,
    ) -> Result<Self, ScheduleError> {
        let s = Self { free };
        s.check(topo)?;
        Ok(s)
    }

    /// Free slots of node `node` of cluster `cluster` (0 when out of range).
    pub fn get(&self, cluster: usize, node: usize) -> u32 {
        self.free
            .get(cluster)
            .and_then(|c| c.get(node))
            .copied()
            .unwrap_or(0)
    }

    /// Sets the free slots of a node; out-of-range indices are ignored.
    pub fn set(&mut self, cluster: usize, node: usize, free: u32) {
        if let Some(v) = self.free.get_mut(cluster).and_then(|c| c.get_mut(node)) {
            *v = free;
        }
    }

    /// Takes the slots used by `mapping` (saturating at zero).
    pub fn reserve(&mut self, mapping: &Mapping) {
        for r in &mapping.ranks {
            if let Some(v) = self
                .free
                .get_mut(r.cluster_index)
                .and_then(|c| c.get_mut(r.node_index))
            {
                *v = v.saturating_sub(1);
            }
        }
    }

    /// Total free slots.
    pub fn total(&self) -> u64 {
        self.free.iter().flatten().map(|&v| u64::from(v)).sum()
    }

    fn check(&self, topo: &ResourceTopology) -> Result<(), ScheduleError> {
        if self.free.len() != topo.clusters.len() {
            return Err(ScheduleError::FreeSlots(format!(
                "{} clusters given, the topology has {}",
                self.free.len(),
                topo.clusters.len()
            )));
        }
        for (c, f) in topo.clusters.iter().zip(&self.free) {
            if f.len() != c.nodes.len() {
                return Err(ScheduleError::FreeSlots(format!(
                    "cluster \"{}\": {} nodes given, it has {}",
                    c.name,
                    f.len(),
                    c.nodes.len()
                )));
            }
            if let Some((n, v)) = c.nodes.iter().zip(f).find(|(n, &v)| v > n.slots) {
                return Err(ScheduleError::FreeSlots(format!(
                    "node \"{}\" of cluster \"{}\" has {} slots but {v} are said to be free",
                    n.name, c.name, n.slots
                )));
            }
        }
        Ok(())
    }
}

/// Bounds on the search effort.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Maximum number of group placements attempted by the search.
    pub max_placements: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_placements: 20_000,
        }
    }
}

/// The cost of a mapping, compared lexicographically in field order.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Cost {
    /// Highest latency level used inside a group (see [`latency_level`]).
    pub intra_level: u32,
    /// Highest latency between two connected groups, in ms.
    pub inter_max_ms: f64,
    /// Mean latency over connected pairs of groups, in ms (0 without any).
    pub inter_mean_ms: f64,
    /// Highest latency used inside a group, in ms.
    pub intra_max_ms: f64,
}

/// Where one process runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RankPlacement {
    /// The rank (numbered group by group, in document order).
    pub rank: usize,
    /// Id of the rank's group.
    pub group: String,
    /// Index of the group in the profile.
    pub group_index: usize,
    /// Name of the cluster.
    pub cluster: String,
    /// Index of the cluster in the topology.
    pub cluster_index: usize,
    /// Name of the node.
    pub node: String,
    /// Index of the node in its cluster.
    pub node_index: usize,
}

/// The clusters a group uses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupPlacement {
    /// Id of the group.
    pub group: String,
    /// Clusters used, with the number of processes in each, in filling order.
    pub clusters: Vec<(String, u32)>,
}

/// The result of scheduling.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Mapping {
    /// One entry per process, ordered by rank.
    pub ranks: Vec<RankPlacement>,
    /// One entry per group, in document order.
    pub groups: Vec<GroupPlacement>,
    /// Cost of this mapping.
    pub cost: Cost,
    /// Placements attempted by the search.
    pub explored: u64,
    /// True when the search completed, so the mapping has minimal cost.
    pub exhaustive: bool,
}

/// Latency level of a latency in ms: its order of magnitude, with level 0
/// below 0.01 ms, 1 for [0.01, 0.1), 2 for [0.1, 1), 3 for [1, 10),
/// 4 for [10, 100), 5 for [100, 1000) and 6 from 1000 ms on.
pub fn latency_level(ms: f64) -> u32 {
    [0.01, 0.1, 1.0, 10.0, 100.0, 1000.0]
        .iter()
        .filter(|&&edge| ms >= edge)
        .count() as u32
}

/// Schedules `profile` on `topo` with the default [`Limits`].
pub fn schedule(
    profile: &JobProfile,
    topo: &ResourceTopology,
    free: &FreeSlots,
    strategy: Strategy,
) -> Result<Mapping, ScheduleError> {
    schedule_with_limits(profile, topo, free, strategy, Limits::default())
}

/// Schedules `profile` on `topo`, giving up after `limits.max_placements`
/// placements (returning the best mapping found by then, if any).
pub fn schedule_with_limits(
    profile: &JobProfile,
    topo: &ResourceTopology,
    free: &FreeSlots,
    strategy: Strategy,
    limits: Limits,
) -> Result<Mapping, ScheduleError> {
    let problem = problem::Problem::new(profile, topo, free)?;
    if let Some(e) = diagnose::diagnose(&problem, free) {
        return Err(e);
    }
    let outcome = search::run(&problem, free.free.clone(), strategy, limits.max_placements);
    let Some((cost, placed)) = outcome.best else {
        if !outcome.exhaustive {
            return Err(ScheduleError::BudgetExhausted {
                explored: outcome.explored,
            });
        }
        return Err(ScheduleError::Unsatisfiable {
            detail: format!(
                "{} processes requested, {} free slots; groups compete for the same nodes \
                 or connected groups cannot be placed together",
                profile.total_processes(),
                free.total()
            ),
            explored: outcome.explored,
        });
    };
    let mut ranks = Vec::new();
    let mut groups = Vec::new();
    for (gi, (g, p)) in problem.groups.iter().zip(&placed).enumerate() {
        for &(c, n) in &p.seq {
            let cluster = &topo.clusters[c];
            ranks.push(RankPlacement {
                rank: ranks.len(),
                group: g.id.clone(),
                group_index: gi,
                cluster: cluster.name.clone(),
                cluster_index: c,
                node: cluster.nodes[n].name.clone(),
                node_index: n,
            });
        }
        groups.push(GroupPlacement {
            group: g.id.clone(),
            clusters: p
                .used
                .iter()
                .map(|&(c, k)| (topo.clusters[c].name.clone(), k))
                .collect(),
        });
    }
    Ok(Mapping {
        ranks,
        groups,
        cost,
        explored: outcome.explored,
        exhaustive: outcome.exhaustive,
    })
}
