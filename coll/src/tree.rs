//! Spanning trees over ranks: every tree-based schedule is a tree plus a data layout.
//!
//! Children are kept in send order: a parent sends to `children[0]` first (the largest
//! subtree for binomial trees, the slowest level for hierarchical ones) and receives in
//! the reverse order.

use std::collections::HashMap;

use crate::step::Algorithm;
use crate::topology::{LinkCost, Topology};

/// A rooted spanning tree over ranks `0..P`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Tree {
    pub root: usize,
    pub parent: Vec<Option<usize>>,
    pub children: Vec<Vec<usize>>,
    /// Ranks in preorder (own rank, then the children's subtrees in `children` order).
    pub preorder: Vec<usize>,
    /// Index of each rank in `preorder`; its subtree is `preorder[start..start + size]`.
    pub start: Vec<usize>,
    /// Number of ranks in each subtree.
    pub size: Vec<usize>,
}

impl Tree {
    fn from_edges(p: usize, root: usize, edges: &[(usize, usize)]) -> Tree {
        Tree::forest(p, &[root], edges)
    }

    /// Several trees over ranks `0..P` (`roots` are their roots; `root` is the first).
    pub fn forest(p: usize, roots: &[usize], edges: &[(usize, usize)]) -> Tree {
        let root = roots.first().copied().unwrap_or(0);
        let mut parent = vec![None; p];
        let mut children = vec![Vec::new(); p];
        for &(a, b) in edges {
            parent[b] = Some(a);
            children[a].push(b);
        }
        let mut preorder = Vec::with_capacity(p);
        let mut stack: Vec<usize> = roots.iter().rev().copied().collect();
        while let Some(v) = stack.pop() {
            preorder.push(v);
            stack.extend(children[v].iter().rev());
        }
        debug_assert_eq!(preorder.len(), p, "edges must span all ranks");
        let mut start = vec![0; p];
        for (i, &v) in preorder.iter().enumerate() {
            start[v] = i;
        }
        let mut size = vec![1; p];
        for &v in preorder.iter().rev() {
            if let Some(u) = parent[v] {
                size[u] += size[v];
            }
        }
        Tree {
            root,
            parent,
            children,
            preorder,
            start,
            size,
        }
    }

    /// The ranks of `v`'s subtree, in preorder.
    pub fn subtree(&self, v: usize) -> &[usize] {
        &self.preorder[self.start[v]..self.start[v] + self.size[v]]
    }

    /// For each rank, the maximal runs of consecutive ranks in its subtree, sorted
    /// (`[lo, hi)` intervals). Computed bottom-up by merging the children's runs.
    pub fn runs(&self) -> Vec<Vec<(usize, usize)>> {
        let mut runs: Vec<Vec<(usize, usize)>> = vec![Vec::new(); self.parent.len()];
        for &v in self.preorder.iter().rev() {
            let mut all = vec![(v, v + 1)];
            for &c in &self.children[v] {
                all.extend_from_slice(&runs[c]);
            }
            all.sort_unstable();
            let mut merged: Vec<(usize, usize)> = Vec::with_capacity(all.len());
            for (lo, hi) in all {
                match merged.last_mut() {
                    Some(last) if last.1 == lo => last.1 = hi,
                    _ => merged.push((lo, hi)),
                }
            }
            runs[v] = merged;
        }
        runs
    }
}

/// Edges of a binomial tree (by recursive halving) over `items[lo..hi]` rooted at index
/// `root`: every subtree is a contiguous range of `items`.
fn halving(lo: usize, hi: usize, root: usize, edges: &mut Vec<(usize, usize)>) {
    // Iterative on the root's own half, recursive on the other half (depth ≤ log2 n).
    let (mut lo, mut hi) = (lo, hi);
    while hi - lo > 1 {
        let mid = lo + (hi - lo).div_ceil(2);
        if root < mid {
            edges.push((root, mid));
            halving(mid, hi, mid, edges);
            hi = mid;
        } else {
            edges.push((root, lo));
            halving(lo, mid, lo, edges);
            lo = mid;
        }
    }
}

fn binomial_edges(items: &[usize], root_idx: usize, edges: &mut Vec<(usize, usize)>) {
    let mut idx = Vec::new();
    halving(0, items.len(), root_idx, &mut idx);
    edges.extend(idx.into_iter().map(|(a, b)| (items[a], items[b])));
}

/// The ranks sorted so that the root comes first, then the rest of its leaf group, then
/// the rest of each enclosing group in turn (a chain in this order crosses each level as
/// few times as possible).
fn topology_order(topo: &Topology, root: usize) -> Vec<usize> {
    let d = topo.depth();
    let mut ranks: Vec<usize> = (0..topo.size()).collect();
    ranks.sort_by_cached_key(|&r| {
        let mut key: Vec<(bool, u32)> = (0..d)
            .map(|l| (topo.group(l, r) != topo.group(l, root), topo.group(l, r)))
            .collect();
        key.push((r != root, r as u32));
        key
    });
    ranks
}

/// Whether `g` representatives talking across a level of cost `c` should form a flat
/// tree (the first sends to each other) rather than a binomial one, for `k` flits of
/// `s` bytes: the flat tree pays one latency and `g − 1` sends per flit at its root
/// (one on a mesh, where each goes over its own link); the binomial tree `⌈log₂ g⌉`
/// latencies and as many sends per flit.
pub(crate) fn flat_is_faster(c: LinkCost, g: usize, (s, k): (usize, usize)) -> bool {
    if g <= 2 {
        return false;
    }
    let h = (usize::BITS - (g - 1).leading_zeros()) as f64;
    // On a mesh every representative has a link of its own (for flits the sender
    // hands over without waiting: see `Topology::out_port`).
    let mesh = c.mesh && s <= crate::topology::SEND_WINDOW;
    let shared = if mesh { 1.0 } else { (g - 1) as f64 };
    let k = k.max(1) as f64;
    let flat = c.time(s) + (shared - 1.0) * c.busy(s) + (k - 1.0) * shared * c.busy(s);
    let binomial = h * c.time(s) + (k - 1.0) * if mesh { 1.0 } else { h } * c.busy(s);
    flat < binomial
}

fn hierarchical_edges(
    topo: &Topology,
    level: usize,
    members: &[usize],
    rep: usize,
    piece: (usize, usize),
    edges: &mut Vec<(usize, usize)>,
) {
    if level == topo.depth() {
        let pos = members.iter().position(|&r| r == rep).unwrap_or(0);
        if flat_is_faster(topo.costs()[level], members.len(), piece) {
            edges.extend(members.iter().filter(|&&r| r != rep).map(|&r| (rep, r)));
        } else {
            binomial_edges(members, pos, edges);
        }
        return;
    }
    // Subgroups at this level in order of their smallest rank (members are sorted).
    let mut index: HashMap<u32, usize> = HashMap::new();
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for &r in members {
        let i = *index.entry(topo.group(level, r)).or_insert_with(|| {
            groups.push(Vec::new());
            groups.len() - 1
        });
        groups[i].push(r);
    }
    let rep_group = index.get(&topo.group(level, rep)).copied().unwrap_or(0);
    let reps: Vec<usize> = groups
        .iter()
        .enumerate()
        .map(|(i, m)| if i == rep_group { rep } else { m[0] })
        .collect();
    if flat_is_faster(topo.costs()[level], reps.len(), piece) {
        edges.extend(reps.iter().filter(|&&r| r != rep).map(|&r| (rep, r)));
    } else {
        binomial_edges(&reps, rep_group, edges);
    }
    for (m, &r) in groups.iter().zip(&reps) {
        hierarchical_edges(topo, level + 1, m, r, piece, edges);
    }
}

/// The tree `alg` uses on `topo` towards/from `root`. `ordered` asks for subtrees that
/// are contiguous rank ranges where the algorithm allows it (the chain). `piece` is
/// (flit bytes, flits): the hierarchy picks a flat or binomial tree per level from it.
pub(crate) fn build(
    topo: &Topology,
    alg: Algorithm,
    root: usize,
    ordered: bool,
    piece: (usize, usize),
) -> Tree {
    let p = topo.size();
    let mut edges = Vec::with_capacity(p.saturating_sub(1));
    match alg {
        Algorithm::Hierarchical => {
            let all: Vec<usize> = (0..p).collect();
            hierarchical_edges(topo, 0, &all, root, piece, &mut edges);
        }
        Algorithm::FlatBinomial => {
            let all: Vec<usize> = (0..p).collect();
            binomial_edges(&all, root, &mut edges);
        }
        Algorithm::FlatLinear => edges.extend((0..p).filter(|&r| r != root).map(|r| (root, r))),
        Algorithm::Chain if ordered => {
            // Two chains from the root; the longer one first.
            let up: Vec<usize> = (root..p).collect();
            let down: Vec<usize> = (0..=root).rev().collect();
            let (first, second) = if up.len() >= down.len() {
                (up, down)
            } else {
                (down, up)
            };
            for chain in [first, second] {
                edges.extend(chain.windows(2).map(|w| (w[0], w[1])));
            }
        }
        Algorithm::Chain => {
            let order = topology_order(topo, root);
            edges.extend(order.windows(2).map(|w| (w[0], w[1])));
        }
    }
    Tree::from_edges(p, root, &edges)
}

/// Most ranks of a node whose allreduce may split its vector between all of them:
/// each rank sends 2·(P − 1) messages, and pricing the exchange costs O(P²).
pub(crate) const MAX_NODE_SPLIT: usize = 64;

/// Every rank a tree of its own, when all ranks share one leaf group (one node): the
/// ranks themselves are then the representatives an allreduce's split exchange runs
/// between (a reduce-scatter and an allgather inside the node). Returns the forest and
/// the ranks in order, or `None` for fewer than two ranks or more than
/// [`MAX_NODE_SPLIT`], ranks on several nodes, or a flat topology (which says
/// nothing of where the ranks are).
pub(crate) fn node_forest(topo: &Topology) -> Option<(Tree, Vec<usize>)> {
    let p = topo.size();
    if !(2..=MAX_NODE_SPLIT).contains(&p)
        || topo.depth() == 0
        || (1..p).any(|r| topo.level(0, r) < topo.depth())
    {
        return None;
    }
    let reps: Vec<usize> = (0..p).collect();
    Some((Tree::forest(p, &reps, &[]), reps))
}

/// The hierarchical tree of [`build`] cut at the top level: one tree per site, rooted
/// at the site's representative. Returns the forest and the representatives in site
/// order (by smallest rank), or `None` when the topology has a single site.
pub(crate) fn site_forest(
    topo: &Topology,
    root: usize,
    piece: (usize, usize),
) -> Option<(Tree, Vec<usize>)> {
    if topo.depth() == 0 {
        return None;
    }
    let p = topo.size();
    let t = build(topo, Algorithm::Hierarchical, root, false, piece);
    let mut reps: Vec<usize> = (0..p)
        .filter(|&v| t.parent[v].is_none_or(|u| topo.level(u, v) == 0))
        .collect();
    if reps.len() < 2 {
        return None;
    }
    let mut first: HashMap<u32, usize> = HashMap::new();
    for r in (0..p).rev() {
        first.insert(topo.group(0, r), r);
    }
    reps.sort_by_key(|&r| first.get(&topo.group(0, r)).copied().unwrap_or(r));
    // Edges inside sites, children in the order the full tree gave them.
    let mut edges = Vec::with_capacity(p);
    for &u in &t.preorder {
        for &c in &t.children[u] {
            if topo.level(u, c) > 0 {
                edges.push((u, c));
            }
        }
    }
    Some((Tree::forest(p, &reps, &edges), reps))
}
