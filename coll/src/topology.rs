//! The machine hierarchy a collective runs on: a tree whose leaves are ranks.
//!
//! Every rank has a path of the same length `depth` (for example
//! `["orsay", "node3"]`, depth 2). Two ranks are in the same group at level `l`
//! when the first `l + 1` components of their paths are equal, so groups are named
//! by path prefixes: `orsay/node3` and `bordeaux/node3` are different nodes.
//!
//! A message between ranks `a` and `b` *crosses level* `l`, where `l` is the length
//! of the common prefix of their paths: level 0 is the top (between sites), level
//! `depth` is inside one leaf group (between processes of one node). Each of these
//! `depth + 1` levels has a [`LinkCost`].

use std::collections::HashMap;
use std::fmt;

/// Longest time a sender is busy with one message beyond its bytes' time on the wire
/// (the per-message software overhead, LogP's `o`): 10 µs.
pub const SEND_OVERHEAD: f64 = 10e-6;

/// Bytes of a message a sender hands over without waiting (a socket's send buffer).
/// Messages up to this size go out over a mesh level's links in parallel; a longer one
/// holds the sender's writer until it has left, so its sends share one port.
pub const SEND_WINDOW: usize = 128 << 10;

/// Cost of one message crossing a level: it arrives `alpha + beta * bytes` seconds after
/// it is sent, and keeps its sender busy for `min(alpha, SEND_OVERHEAD) + beta * bytes`
/// ([`LinkCost::busy`]): the rest of a long latency is propagation, during which the
/// sender already sends its next message.
///
/// A rank's messages across a level share one port each way (a node's uplink), unless
/// the level is a `mesh`: every pair of groups across it has a link of its own (sites
/// joined pairwise, each pair with its own path and bandwidth), and messages to
/// different groups do not wait for one another.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkCost {
    /// Latency in seconds.
    pub alpha: f64,
    /// Inverse bandwidth in seconds per byte.
    pub beta: f64,
    /// Whether every pair of groups across the level has its own link.
    pub mesh: bool,
    /// Whether the level's ranks outnumber their cores (a crowded node): its latency
    /// is a wait for a core, not time on a wire (see [`crate::auto`]).
    pub crowded: bool,
}

impl LinkCost {
    /// A cost from latency (seconds) and inverse bandwidth (seconds per byte).
    pub fn new(alpha: f64, beta: f64) -> Self {
        LinkCost {
            alpha,
            beta,
            mesh: false,
            crowded: false,
        }
    }

    /// A cost from latency (seconds) and bandwidth (bits per second).
    pub fn from_bandwidth(latency_s: f64, bits_per_s: f64) -> Self {
        LinkCost::new(latency_s, 8.0 / bits_per_s)
    }

    /// The same cost on a level whose pairs of groups have links of their own.
    pub fn meshed(self) -> Self {
        LinkCost { mesh: true, ..self }
    }

    /// The same cost on a node with more ranks than cores (see [`LinkCost::crowded`]).
    pub fn on_crowded_node(self) -> Self {
        LinkCost {
            crowded: true,
            ..self
        }
    }

    /// Time for one message of `bytes` bytes, from send to arrival.
    pub fn time(&self, bytes: usize) -> f64 {
        self.alpha + self.beta * bytes as f64
    }

    /// How long sending one message of `bytes` bytes keeps the sender's port busy.
    pub fn busy(&self, bytes: usize) -> f64 {
        self.alpha.min(SEND_OVERHEAD) + self.beta * bytes as f64
    }
}

/// Why a topology could not be built.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TopologyError {
    /// No ranks.
    Empty,
    /// Rank `rank` has a path of length `len`, rank 0 has `expected`.
    UnevenDepth {
        /// The offending rank.
        rank: usize,
        /// Its path length.
        len: usize,
        /// The path length of rank 0.
        expected: usize,
    },
    /// `costs` must have `depth + 1` entries.
    CostCount {
        /// Entries needed.
        expected: usize,
        /// Entries given.
        got: usize,
    },
    /// A cost is negative or not finite.
    BadCost {
        /// The level of the bad cost.
        level: usize,
    },
    /// A subset named a rank twice or a rank that does not exist.
    BadSubset {
        /// The offending rank.
        rank: usize,
    },
}

impl fmt::Display for TopologyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TopologyError::Empty => write!(f, "topology has no ranks"),
            TopologyError::UnevenDepth {
                rank,
                len,
                expected,
            } => write!(
                f,
                "rank {rank} has a path of {len} components, rank 0 has {expected}"
            ),
            TopologyError::CostCount { expected, got } => {
                write!(f, "topology needs {expected} level costs, got {got}")
            }
            TopologyError::BadCost { level } => {
                write!(f, "cost of level {level} is negative or not finite")
            }
            TopologyError::BadSubset { rank } => {
                write!(f, "subset names rank {rank} twice or it does not exist")
            }
        }
    }
}

impl std::error::Error for TopologyError {}

/// A hierarchy of groups with ranks `0..size()` as leaves, and a cost per level.
#[derive(Clone, Debug, PartialEq)]
pub struct Topology {
    paths: Vec<Vec<String>>,
    /// `group[l][r]`: id of the group of rank `r` at level `l` (unique across the level).
    group: Vec<Vec<u32>>,
    costs: Vec<LinkCost>,
}

impl Topology {
    /// Builds a topology from one path per rank (index = rank) and `depth + 1` level costs
    /// (`costs[0]` between top-level groups, `costs[depth]` inside a leaf group).
    pub fn from_paths<S: AsRef<str>>(
        paths: &[Vec<S>],
        costs: Vec<LinkCost>,
    ) -> Result<Self, TopologyError> {
        let first = paths.first().ok_or(TopologyError::Empty)?;
        let depth = first.len();
        if costs.len() != depth + 1 {
            return Err(TopologyError::CostCount {
                expected: depth + 1,
                got: costs.len(),
            });
        }
        for (level, c) in costs.iter().enumerate() {
            let ok = c.alpha.is_finite() && c.beta.is_finite() && c.alpha >= 0.0 && c.beta >= 0.0;
            if !ok {
                return Err(TopologyError::BadCost { level });
            }
        }
        let mut owned = Vec::with_capacity(paths.len());
        for (rank, p) in paths.iter().enumerate() {
            if p.len() != depth {
                return Err(TopologyError::UnevenDepth {
                    rank,
                    len: p.len(),
                    expected: depth,
                });
            }
            owned.push(p.iter().map(|s| s.as_ref().to_string()).collect::<Vec<_>>());
        }
        let mut group = Vec::with_capacity(depth);
        for l in 0..depth {
            let mut ids: HashMap<&[String], u32> = HashMap::new();
            let mut row = Vec::with_capacity(owned.len());
            for p in &owned {
                let next = ids.len() as u32;
                row.push(*ids.entry(&p[..=l]).or_insert(next));
            }
            group.push(row);
        }
        Ok(Topology {
            paths: owned,
            group,
            costs,
        })
    }

    /// `clusters` sites of `nodes_per_cluster` nodes of `procs_per_node` processes, ranks
    /// numbered site by site, node by node (depth 2), with [`Topology::grid5000_costs`].
    /// Zero in any argument is treated as one.
    pub fn uniform(clusters: usize, nodes_per_cluster: usize, procs_per_node: usize) -> Self {
        let (c, n, p) = (
            clusters.max(1),
            nodes_per_cluster.max(1),
            procs_per_node.max(1),
        );
        let mut paths = Vec::with_capacity(c * n * p);
        for ci in 0..c {
            for ni in 0..n {
                for _ in 0..p {
                    paths.push(vec![format!("site{ci}"), format!("node{ni}")]);
                }
            }
        }
        Topology::from_paths(&paths, Self::grid5000_costs().to_vec())
            .unwrap_or_else(|_| unreachable!("uniform paths are well formed"))
    }

    /// The costs measured in the QCG-OMPI paper (Table 3): WAN Orsay–Bordeaux 7.8 ms and
    /// 136 Mb/s, intra-cluster 0.1 ms and 894 Mb/s, shared memory 0.02 ms and 3979 Mb/s.
    pub fn grid5000_costs() -> [LinkCost; 3] {
        [
            LinkCost::from_bandwidth(7.8e-3, 136.08e6),
            LinkCost::from_bandwidth(0.1e-3, 894.39e6),
            LinkCost::from_bandwidth(0.02e-3, 3979.46e6),
        ]
    }

    /// The same hierarchy with other level costs (`depth + 1` of them).
    pub fn with_costs(self, costs: Vec<LinkCost>) -> Result<Self, TopologyError> {
        Topology::from_paths(&self.paths, costs)
    }

    /// The sub-topology of `ranks`; rank `i` of the result is `ranks[i]` of `self`.
    pub fn subset(&self, ranks: &[usize]) -> Result<Self, TopologyError> {
        let mut seen = vec![false; self.size()];
        let mut paths = Vec::with_capacity(ranks.len());
        for &r in ranks {
            match seen.get_mut(r) {
                Some(s) if !*s => *s = true,
                _ => return Err(TopologyError::BadSubset { rank: r }),
            }
            paths.push(self.paths[r].clone());
        }
        Topology::from_paths(&paths, self.costs.clone())
    }

    /// Number of ranks.
    pub fn size(&self) -> usize {
        self.paths.len()
    }

    /// Length of every rank's path; levels are `0..=depth`.
    pub fn depth(&self) -> usize {
        self.group.len()
    }

    /// The path of `rank`.
    pub fn path(&self, rank: usize) -> &[String] {
        &self.paths[rank]
    }

    /// Cost of each level, `depth + 1` entries.
    pub fn costs(&self) -> &[LinkCost] {
        &self.costs
    }

    /// Id of the group of `rank` at `level < depth` (ids are unique within a level).
    pub fn group(&self, level: usize, rank: usize) -> u32 {
        self.group[level][rank]
    }

    /// The level a message between `a` and `b` crosses: the length of the common prefix
    /// of their paths (`depth` when they share a leaf group, including `a == b`).
    pub fn level(&self, a: usize, b: usize) -> usize {
        (0..self.depth())
            .find(|&l| self.group[l][a] != self.group[l][b])
            .unwrap_or(self.depth())
    }

    /// Cost of a message between `a` and `b`.
    pub fn cost(&self, a: usize, b: usize) -> LinkCost {
        self.costs[self.level(a, b)]
    }

    /// The port a rank sends a message of `bytes` bytes to `peer` across `level` on:
    /// [`Topology::port`] for messages up to [`SEND_WINDOW`], else the level's one port
    /// (the sender writes a long message to one link at a time).
    pub fn out_port(&self, level: usize, peer: usize, bytes: usize) -> usize {
        if bytes <= SEND_WINDOW {
            self.port(level, peer)
        } else {
            level
        }
    }

    /// The port a rank uses for messages to or from `peer` across `level`: `level`
    /// itself (one port per level), or, on a mesh level, one per peer group (per peer
    /// rank inside a leaf group), numbered from `depth + 1`.
    pub fn port(&self, level: usize, peer: usize) -> usize {
        if !self.costs[level].mesh {
            return level;
        }
        let id = if level < self.depth() {
            self.group[level][peer] as usize
        } else {
            peer
        };
        self.depth() + 1 + id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_follow_prefixes() {
        let paths = vec![
            vec!["a", "n1"],
            vec!["b", "n1"],
            vec!["a", "n1"],
            vec!["a", "n2"],
        ];
        let c = LinkCost::new(1.0, 0.0);
        let t = Topology::from_paths(&paths, vec![c, c, c]).unwrap();
        assert_eq!(t.level(0, 1), 0);
        assert_eq!(t.level(0, 2), 2);
        assert_eq!(t.level(0, 3), 1);
        assert_ne!(t.group(1, 1), t.group(1, 0));
        let s = t.subset(&[3, 0]).unwrap();
        assert_eq!(s.level(0, 1), 1);
        assert!(t.subset(&[0, 0]).is_err());
        assert!(Topology::from_paths(&paths, vec![c]).is_err());
        assert_eq!(Topology::uniform(2, 3, 4).size(), 24);
    }
}
