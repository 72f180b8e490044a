//! The scheduling problem in index form: groups with their eligible nodes,
//! per-cluster capacities, candidate cluster sets ("options") and the
//! network requirements between groups.

use std::collections::HashSet;

use super::{latency_level, FreeSlots, ScheduleError};
use crate::profile::{Bounds, ComputingTemplate, JobProfile, NetworkTemplate};
use crate::topology::{LinkQuality, Node, ResourceTopology};

/// A network requirement taken from a template.
#[derive(Debug, Clone)]
pub(crate) struct NetReq {
    pub latency: Bounds,
    pub bandwidth: Bounds,
}

impl NetReq {
    fn from_template(t: &NetworkTemplate) -> Self {
        Self {
            latency: t.latency.unwrap_or_default(),
            bandwidth: t.bandwidth.unwrap_or_default(),
        }
    }

    pub fn accepts(&self, q: &LinkQuality) -> bool {
        self.latency.contains(q.latency_ms) && self.bandwidth.contains(q.bandwidth_mbps)
    }
}

/// True when `node`, with `free` free slots, may run processes of a group
/// that uses computing template `t`.
pub(crate) fn node_fits(t: &ComputingTemplate, node: &Node, free: u32) -> bool {
    let count_ok = t.cpucount.is_none_or(|b| {
        b.min.is_none_or(|m| f64::from(free) >= m)
            && b.max.is_none_or(|m| f64::from(node.slots) <= m)
    });
    count_ok
        && t.cpuspeed.is_none_or(|b| b.contains(node.cpu_speed_mhz))
        && t.memory.is_none_or(|b| b.contains(node.memory_mib))
}

/// A candidate set of clusters for one group, in filling order.
#[derive(Debug, Clone)]
pub(crate) struct Opt {
    pub clusters: Vec<usize>,
    /// Worst latency among the links the group may use (0 for one process).
    pub intra_ms: f64,
    pub level: u32,
}

#[derive(Debug, Clone)]
pub(crate) struct GroupReq {
    pub id: String,
    pub n: u32,
    pub computing: Option<ComputingTemplate>,
    pub intra: Option<NetReq>,
    /// Eligible node indices per cluster.
    pub eligible: Vec<Vec<usize>>,
    /// Eligible free slots per cluster.
    pub cap: Vec<u64>,
    pub options: Vec<Opt>,
    /// Largest capacity reached by a set of mutually compatible clusters.
    pub best_split: (u64, Vec<usize>),
}

/// A declared connection requirement between two groups.
#[derive(Debug, Clone)]
pub(crate) struct Conn {
    pub from: usize,
    pub to: usize,
    pub req: NetReq,
}

pub(crate) struct Problem<'a> {
    pub topo: &'a ResourceTopology,
    pub links: Vec<Option<LinkQuality>>,
    pub nc: usize,
    pub groups: Vec<GroupReq>,
    pub conns: Vec<Conn>,
    /// Unordered pairs of connected groups, for the cost.
    pub pairs: Vec<(usize, usize)>,
    /// Smallest latency of any link (lower bound for a connection).
    pub min_latency: f64,
    /// Free slots per cluster, all nodes counted.
    pub cluster_free: Vec<u64>,
}

impl<'a> Problem<'a> {
    pub fn link(&self, a: usize, b: usize) -> Option<&LinkQuality> {
        self.links[a * self.nc + b].as_ref()
    }

    pub fn new(
        profile: &JobProfile,
        topo: &'a ResourceTopology,
        free: &FreeSlots,
    ) -> Result<Self, ScheduleError> {
        topo.validate()?;
        free.check(topo)?;
        let links = topo.link_matrix()?;
        let nc = topo.clusters.len();
        let net = |id: &str| {
            profile
                .network_template(id)
                .map(NetReq::from_template)
                .ok_or_else(|| {
                    ScheduleError::Profile(format!("network template \"{id}\" is not defined"))
                })
        };
        let mut groups = Vec::new();
        for g in &profile.task.groups {
            let computing = match &g.computing_template {
                Some(id) => Some(profile.computing_template(id).cloned().ok_or_else(|| {
                    ScheduleError::Profile(format!("computing template \"{id}\" is not defined"))
                })?),
                None => None,
            };
            let intra = g.network_template.as_deref().map(net).transpose()?;
            let mut eligible = Vec::with_capacity(nc);
            let mut cap = Vec::with_capacity(nc);
            for (c, cluster) in topo.clusters.iter().enumerate() {
                let nodes: Vec<usize> = cluster
                    .nodes
                    .iter()
                    .enumerate()
                    .filter(|&(i, node)| {
                        let f = free.get(c, i);
                        f > 0 && computing.as_ref().is_none_or(|t| node_fits(t, node, f))
                    })
                    .map(|(i, _)| i)
                    .collect();
                cap.push(nodes.iter().map(|&i| u64::from(free.get(c, i))).sum());
                eligible.push(nodes);
            }
            groups.push(GroupReq {
                id: g.id.clone(),
                n: g.processes,
                computing,
                intra,
                eligible,
                cap,
                options: Vec::new(),
                best_split: (0, Vec::new()),
            });
        }
        let mut conns = Vec::new();
        let mut seen = HashSet::new();
        let mut pairs = Vec::new();
        for (i, g) in profile.task.groups.iter().enumerate() {
            for c in &g.connections {
                let j = profile
                    .task
                    .groups
                    .iter()
                    .position(|h| h.id == c.endpoint)
                    .ok_or_else(|| {
                        ScheduleError::Profile(format!("group \"{}\" is not defined", c.endpoint))
                    })?;
                if i == j {
                    return Err(ScheduleError::Profile(format!(
                        "group \"{}\" connects to itself",
                        g.id
                    )));
                }
                conns.push(Conn {
                    from: i,
                    to: j,
                    req: net(&c.network_template)?,
                });
                if seen.insert((i.min(j), i.max(j))) {
                    pairs.push((i.min(j), i.max(j)));
                }
            }
        }
        let min_latency = links
            .iter()
            .flatten()
            .map(|q| q.latency_ms)
            .fold(f64::INFINITY, f64::min);
        let mut p = Problem {
            topo,
            links,
            nc,
            groups,
            conns,
            pairs,
            min_latency: if min_latency.is_finite() {
                min_latency
            } else {
                0.0
            },
            cluster_free: (0..nc)
                .map(|c| {
                    (0..topo.clusters[c].nodes.len())
                        .map(|i| u64::from(free.get(c, i)))
                        .sum()
                })
                .collect(),
        };
        for gi in 0..p.groups.len() {
            let (options, best_split) = p.options_for(&p.groups[gi]);
            p.groups[gi].options = options;
            p.groups[gi].best_split = best_split;
        }
        Ok(p)
    }

    /// Can clusters `a` and `b` both host processes of group `g`?
    fn compatible(&self, g: &GroupReq, a: usize, b: usize) -> bool {
        self.link(a, b)
            .is_some_and(|q| g.intra.as_ref().is_none_or(|r| r.accepts(q)))
    }

    /// Single clusters that can hold the whole group, and, for anchors that
    /// are too small, one split over the nearest compatible clusters.
    fn options_for(&self, g: &GroupReq) -> (Vec<Opt>, (u64, Vec<usize>)) {
        let n = u64::from(g.n);
        let mut opts = Vec::new();
        let mut seen = HashSet::new();
        let mut best_split = (0, Vec::new());
        let usable = |c: usize| g.cap[c] > 0 && (n == 1 || self.compatible(g, c, c));
        for c in (0..self.nc).filter(|&c| usable(c)) {
            if g.cap[c] >= n {
                let intra_ms = if n == 1 {
                    0.0
                } else {
                    self.link(c, c).map_or(0.0, |q| q.latency_ms)
                };
                opts.push(self.opt(vec![c], intra_ms));
                continue;
            }
            let mut near: Vec<(f64, usize)> = (0..self.nc)
                .filter(|&d| d != c && usable(d) && self.compatible(g, c, d))
                .filter_map(|d| self.link(c, d).map(|q| (q.latency_ms, d)))
                .collect();
            near.sort_by(|x, y| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1)));
            let mut chosen = vec![c];
            let mut total = g.cap[c];
            for (_, d) in near {
                if total >= n {
                    break;
                }
                if chosen.iter().all(|&e| self.compatible(g, e, d)) {
                    chosen.push(d);
                    total += g.cap[d];
                }
            }
            if total > best_split.0 {
                best_split = (total, chosen.clone());
            }
            let mut key = chosen.clone();
            key.sort_unstable();
            if total >= n && seen.insert(key) {
                let mut worst: f64 = 0.0;
                for &a in &chosen {
                    for &b in &chosen {
                        worst = worst.max(self.link(a, b).map_or(0.0, |q| q.latency_ms));
                    }
                }
                opts.push(self.opt(chosen, worst));
            }
        }
        (opts, best_split)
    }

    fn opt(&self, clusters: Vec<usize>, intra_ms: f64) -> Opt {
        Opt {
            clusters,
            intra_ms,
            level: latency_level(intra_ms),
        }
    }
}
