//! Depth-first branch and bound over group -> cluster-set assignments.
//!
//! Groups are taken in a fixed order (most constrained first, then groups
//! connected to those already placed). For the next group every candidate
//! cluster set is checked against the connection requirements towards the
//! groups already placed and given a lower bound on the final cost; the
//! candidates are tried in increasing bound order and the loop stops as soon
//! as a bound reaches the best complete mapping found so far. Every attempted
//! placement counts against the budget; when it runs out the best mapping
//! found so far is returned, marked as not proven optimal.

use std::cmp::Ordering;

use super::place::place;
use super::problem::Problem;
use super::{Cost, Strategy};

/// A group placed during the search.
#[derive(Debug, Clone)]
pub(crate) struct Placed {
    /// Clusters used, each with its process count, in filling order.
    pub used: Vec<(usize, u32)>,
    /// (cluster, node) of every process of the group, in rank order.
    pub seq: Vec<(usize, usize)>,
}

pub(crate) struct Outcome {
    pub best: Option<(Cost, Vec<Placed>)>,
    pub explored: u64,
    pub exhaustive: bool,
}

fn cmp_cost(a: &Cost, b: &Cost) -> Ordering {
    a.intra_level
        .cmp(&b.intra_level)
        .then(a.inter_max_ms.total_cmp(&b.inter_max_ms))
        .then(a.inter_mean_ms.total_cmp(&b.inter_mean_ms))
        .then(a.intra_max_ms.total_cmp(&b.intra_max_ms))
}

/// Partial cost of the groups placed so far.
#[derive(Debug, Clone, Copy, Default)]
struct Partial {
    level: u32,
    intra_ms: f64,
    inter_max: f64,
    inter_sum: f64,
    pairs: usize,
}

struct Search<'p, 'a> {
    p: &'p Problem<'a>,
    strategy: Strategy,
    order: Vec<usize>,
    free: Vec<Vec<u32>>,
    slots: Vec<Vec<u32>>,
    cluster_free: Vec<u64>,
    placed: Vec<Option<Placed>>,
    /// Per group: indices of connection requirements it takes part in.
    conns_of: Vec<Vec<usize>>,
    /// Per group: neighbour groups (unordered pairs).
    pairs_of: Vec<Vec<usize>>,
    lb_level: u32,
    lb_intra_ms: f64,
    best: Option<(Cost, Vec<Placed>)>,
    explored: u64,
    budget: u64,
    out_of_budget: bool,
}

pub(crate) fn run(
    p: &Problem<'_>,
    free: Vec<Vec<u32>>,
    strategy: Strategy,
    budget: u64,
) -> Outcome {
    let ng = p.groups.len();
    let mut conns_of = vec![Vec::new(); ng];
    for (k, c) in p.conns.iter().enumerate() {
        conns_of[c.from].push(k);
        conns_of[c.to].push(k);
    }
    let mut pairs_of = vec![Vec::new(); ng];
    for &(a, b) in &p.pairs {
        pairs_of[a].push(b);
        pairs_of[b].push(a);
    }
    let min_of = |g: usize| {
        let o = &p.groups[g].options;
        (
            o.iter().map(|o| o.level).min().unwrap_or(0),
            o.iter().map(|o| o.intra_ms).fold(f64::INFINITY, f64::min),
        )
    };
    let lb_level = (0..ng).map(|g| min_of(g).0).max().unwrap_or(0);
    let lb_intra_ms = (0..ng)
        .map(|g| min_of(g).1)
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    let slots: Vec<Vec<u32>> = p
        .topo
        .clusters
        .iter()
        .map(|c| c.nodes.iter().map(|n| n.slots).collect())
        .collect();
    let cluster_free = free
        .iter()
        .map(|f| f.iter().map(|&v| u64::from(v)).sum())
        .collect();
    let mut s = Search {
        p,
        strategy,
        order: search_order(p, &pairs_of),
        free,
        slots,
        cluster_free,
        placed: vec![None; ng],
        conns_of,
        pairs_of,
        lb_level,
        lb_intra_ms,
        best: None,
        explored: 0,
        budget,
        out_of_budget: false,
    };
    s.dfs(0, Partial::default());
    Outcome {
        best: s.best,
        explored: s.explored,
        exhaustive: !s.out_of_budget,
    }
}

/// Most constrained group first, then repeatedly the group with the most
/// neighbours already ordered (ties: fewer options, more processes).
fn search_order(p: &Problem<'_>, pairs_of: &[Vec<usize>]) -> Vec<usize> {
    let ng = p.groups.len();
    let mut order = Vec::with_capacity(ng);
    let mut done = vec![false; ng];
    while order.len() < ng {
        let pick = (0..ng)
            .filter(|&g| !done[g])
            .min_by_key(|&g| {
                let linked = pairs_of[g].iter().filter(|&&h| done[h]).count();
                let gr = &p.groups[g];
                (
                    std::cmp::Reverse(linked),
                    gr.options.len(),
                    std::cmp::Reverse(gr.n),
                    std::cmp::Reverse(pairs_of[g].len()),
                    g,
                )
            })
            .unwrap_or(0);
        done[pick] = true;
        order.push(pick);
    }
    order
}

impl Search<'_, '_> {
    /// Worst latency between the clusters of two groups.
    fn between(&self, a: &[usize], b: &[usize]) -> f64 {
        let mut worst: f64 = 0.0;
        for &c in a {
            for &d in b {
                worst = worst.max(self.p.link(c, d).map_or(f64::INFINITY, |q| q.latency_ms));
            }
        }
        worst
    }

    /// Partial cost after placing group `g` on `clusters`, or `None` when a
    /// connection requirement towards a placed group fails.
    fn extend(
        &self,
        g: usize,
        clusters: &[usize],
        level: u32,
        intra_ms: f64,
        part: Partial,
    ) -> Option<Partial> {
        for &k in &self.conns_of[g] {
            let c = &self.p.conns[k];
            let other = if c.from == g { c.to } else { c.from };
            let Some(o) = &self.placed[other] else {
                continue;
            };
            for &(d, _) in &o.used {
                for &e in clusters {
                    if !self.p.link(d, e).is_some_and(|q| c.req.accepts(q)) {
                        return None;
                    }
                }
            }
        }
        let mut next = Partial {
            level: part.level.max(level),
            intra_ms: part.intra_ms.max(intra_ms),
            ..part
        };
        for &h in &self.pairs_of[g] {
            if let Some(o) = &self.placed[h] {
                let ocl: Vec<usize> = o.used.iter().map(|u| u.0).collect();
                let lat = self.between(clusters, &ocl);
                next.inter_max = next.inter_max.max(lat);
                next.inter_sum += lat;
                next.pairs += 1;
            }
        }
        Some(next)
    }

    /// Lower bound on the cost of any completion of `part` (exact when
    /// every group is placed).
    fn bound(&self, part: &Partial) -> Cost {
        let total = self.p.pairs.len();
        let left = total - part.pairs;
        let min = self.p.min_latency;
        Cost {
            intra_level: part.level.max(self.lb_level),
            inter_max_ms: if left > 0 {
                part.inter_max.max(min)
            } else {
                part.inter_max
            },
            inter_mean_ms: if total == 0 {
                0.0
            } else {
                (part.inter_sum + left as f64 * min) / total as f64
            },
            intra_max_ms: part.intra_ms.max(self.lb_intra_ms),
        }
    }

    fn dfs(&mut self, depth: usize, part: Partial) {
        if depth == self.order.len() {
            let cost = self.bound(&part);
            if self
                .best
                .as_ref()
                .is_none_or(|(b, _)| cmp_cost(&cost, b).is_lt())
            {
                let placed: Option<Vec<Placed>> = self.placed.iter().cloned().collect();
                if let Some(placed) = placed {
                    self.best = Some((cost, placed));
                }
            }
            return;
        }
        let g = self.order[depth];
        let gr = &self.p.groups[g];
        let n = u64::from(gr.n);
        let mut cands: Vec<(Cost, usize, Partial)> = Vec::new();
        for (i, o) in gr.options.iter().enumerate() {
            let room: u64 = o.clusters.iter().map(|&c| self.cluster_free[c]).sum();
            if room < n {
                continue;
            }
            if let Some(next) = self.extend(g, &o.clusters, o.level, o.intra_ms, part) {
                let lb = self.bound(&next);
                if self
                    .best
                    .as_ref()
                    .is_none_or(|(b, _)| cmp_cost(&lb, b).is_lt())
                {
                    cands.push((lb, i, next));
                }
            }
        }
        cands.sort_by(|a, b| cmp_cost(&a.0, &b.0).then(a.1.cmp(&b.1)));
        for (lb, i, next) in cands {
            if self
                .best
                .as_ref()
                .is_some_and(|(b, _)| !cmp_cost(&lb, b).is_lt())
            {
                break;
            }
            if self.explored >= self.budget {
                self.out_of_budget = true;
                return;
            }
            self.explored += 1;
            let Some(placed) = self.try_place(g, i) else {
                continue;
            };
            self.placed[g] = Some(placed);
            self.dfs(depth + 1, next);
            if let Some(done) = self.placed[g].take() {
                self.undo(&done);
            }
            if self.out_of_budget {
                return;
            }
        }
    }

    fn try_place(&mut self, g: usize, opt: usize) -> Option<Placed> {
        let gr = &self.p.groups[g];
        let mut placed = Placed {
            used: Vec::new(),
            seq: Vec::with_capacity(gr.n as usize),
        };
        let mut left = gr.n;
        for &c in &gr.options[opt].clusters {
            if left == 0 {
                break;
            }
            let eligible = &gr.eligible[c];
            let room: u64 = eligible.iter().map(|&i| u64::from(self.free[c][i])).sum();
            let k = u32::try_from(room.min(u64::from(left))).unwrap_or(left);
            if k == 0 {
                continue;
            }
            match place(
                &mut self.free[c],
                &self.slots[c],
                eligible,
                k,
                self.strategy,
            ) {
                Some(seq) => {
                    self.cluster_free[c] -= u64::from(k);
                    placed.used.push((c, k));
                    placed.seq.extend(seq.into_iter().map(|i| (c, i)));
                    left -= k;
                }
                None => break,
            }
        }
        if left > 0 {
            self.undo(&placed);
            return None;
        }
        Some(placed)
    }

    fn undo(&mut self, placed: &Placed) {
        for &(c, i) in &placed.seq {
            self.free[c][i] += 1;
        }
        for &(c, k) in &placed.used {
            self.cluster_free[c] += u64::from(k);
        }
    }
}
