//! Closed-form time of a schedule, cheap enough to run on every call.
//!
//! It prices the same α/β stage model as [`crate::sim`] without building step lists:
//! one pass over the tree computes the time `T₁` of one flit going through (exactly what
//! the simulator finds for a one-flit schedule) and the per-flit load `B` of the busiest
//! port (a sending port is busy `min(α, o) + β·b` per message, a receiving port `β·b`;
//! a rank has one port per level and direction, or on a mesh level one per peer group:
//! see [`Topology::port`] and [`Topology::out_port`]). With `k`
//! flits a tree pass costs `T₁ + (k − 1)·B`: the pipelining model of the references. Two
//! phase operations (allreduce, allgather, barrier) add an up pass and a down pass.
//! Alltoall is priced phase by phase and round by round (a rougher estimate: within a
//! factor of 2.5 of the simulator on the tested grids).
//!
//! Cost: one tree construction (O(P log P); O(P·depth) for the hierarchy) and O(P) per
//! pass.

use crate::schedule::{pieces, validate};
use crate::step::{Algorithm, Collective, Op, ScheduleError};
use crate::topology::{Topology, SEND_OVERHEAD, SEND_WINDOW};
use crate::tree::{self, Tree};
use std::collections::HashMap;

/// First-flit time, per-rank times (arrival going down, completion going up) and
/// per-port loads of one pass over a tree.
struct Pass {
    first: f64,
    times: Vec<f64>,
    load: Load,
}

impl Pass {
    fn total(&self, k: usize) -> f64 {
        self.first + k.saturating_sub(1) as f64 * self.load.max()
    }
}

/// Per-port loads, by (rank, port) (see [`Topology::port`]), each direction.
#[derive(Default)]
struct Load {
    out: HashMap<(usize, usize), f64>,
    inn: HashMap<(usize, usize), f64>,
}

impl Load {
    fn max(&self) -> f64 {
        self.out
            .values()
            .chain(self.inn.values())
            .copied()
            .fold(0.0, f64::max)
    }
}

/// One flit going from the root to the leaves; `bytes(c)` is the message to child `c`.
fn down(topo: &Topology, t: &Tree, bytes: impl Fn(usize) -> usize) -> Pass {
    down_from(topo, t, bytes, None)
}

/// [`down`] where the roots of a forest start at `start[root]` (else 0).
fn down_from(
    topo: &Topology,
    t: &Tree,
    bytes: impl Fn(usize) -> usize,
    start: Option<&[f64]>,
) -> Pass {
    let p = topo.size();
    let costs = topo.costs();
    let mut load = Load::default();
    let mut at = start.map_or_else(|| vec![0.0f64; p], <[f64]>::to_vec);
    let mut free: HashMap<usize, f64> = HashMap::new();
    for &v in &t.preorder {
        free.clear();
        for &c in &t.children[v] {
            let (l, b) = (topo.level(v, c), bytes(c));
            let f = free.entry(topo.out_port(l, c, b)).or_insert(at[v]);
            at[c] = *f + costs[l].time(b);
            *f += costs[l].busy(b);
            *load.out.entry((v, topo.out_port(l, c, b))).or_default() += costs[l].busy(b);
            *load.inn.entry((c, topo.port(l, v))).or_default() += costs[l].beta * b as f64;
        }
    }
    Pass {
        first: at.iter().copied().fold(0.0, f64::max),
        times: at,
        load,
    }
}

/// One flit going from the leaves to the root; `bytes(c)` is the message from child `c`.
fn up(topo: &Topology, t: &Tree, bytes: impl Fn(usize) -> usize) -> Pass {
    let p = topo.size();
    let costs = topo.costs();
    let mut load = Load::default();
    let mut done = vec![0.0f64; p];
    let mut in_free: HashMap<usize, f64> = HashMap::new();
    for &v in t.preorder.iter().rev() {
        in_free.clear();
        let mut clock = 0.0f64;
        for &c in t.children[v].iter().rev() {
            let (l, b) = (topo.level(v, c), bytes(c));
            let beta_b = costs[l].beta * b as f64;
            let arrival = done[c] + costs[l].time(b);
            let f = in_free.entry(topo.port(l, c)).or_insert(0.0);
            *f = arrival.max(*f + beta_b);
            clock = clock.max(*f);
            *load.inn.entry((v, topo.port(l, c))).or_default() += beta_b;
            *load.out.entry((c, topo.out_port(l, v, b))).or_default() += costs[l].busy(b);
        }
        done[v] = clock;
    }
    Pass {
        first: done[t.root],
        times: done,
        load,
    }
}

/// The pairwise exchange among `members`: round s (send s places on) ends when its
/// slowest pair has delivered its k flits; rounds follow one another. O(m²).
fn pairwise(topo: &Topology, members: &[usize], n: usize, k: usize) -> f64 {
    let m = members.len();
    let costs = topo.costs();
    (1..m)
        .map(|s| {
            (0..m)
                .map(|i| {
                    let c = costs[topo.level(members[i], members[(i + s) % m])];
                    let piece = n.div_ceil(k.max(1));
                    c.time(piece) + k.saturating_sub(1) as f64 * c.busy(piece)
                })
                .fold(0.0, f64::max)
        })
        .sum()
}

/// The hierarchical alltoall, site by site: members → representative and
/// representative → representatives (`T_AB`), the pairwise exchange inside the site, then
/// representatives → members (`T_C`); each phase is its first flit plus `k − 1` times its
/// busiest port. The phases of all sites are taken in step (maximum per phase).
fn hierarchical_alltoall(topo: &Topology, n: usize, k: usize, s: usize) -> f64 {
    let (p, levels) = (topo.size(), topo.depth() + 1);
    let costs = topo.costs();
    let mut sites: Vec<Vec<usize>> = Vec::new();
    let mut index = std::collections::HashMap::new();
    for r in 0..p {
        let key = if topo.depth() == 0 {
            0
        } else {
            topo.group(0, r)
        };
        let i = *index.entry(key).or_insert_with(|| {
            sites.push(Vec::new());
            sites.len() - 1
        });
        sites[i].push(r);
    }
    let (mut ab, mut pair, mut c) = (0.0f64, 0.0f64, 0.0f64);
    for mine in &sites {
        pair = pair.max(pairwise(topo, mine, n, k));
        let (m, d) = (mine.len(), p - mine.len());
        if d == 0 {
            continue;
        }
        let rep = mine[0];
        let (mut a_in, mut c_out) = (vec![0.0f64; levels], vec![0.0f64; levels]);
        let mut a_first = 0.0f64;
        for &j in &mine[1..] {
            let l = topo.level(j, rep);
            a_first = a_first.max(costs[l].time(d * s));
            a_in[l] += costs[l].beta * (d * s) as f64;
            c_out[l] += costs[l].busy(d * s);
        }
        let a_in_max = a_in.iter().copied().fold(0.0, f64::max);
        let c_out_max = c_out.iter().copied().fold(0.0, f64::max);
        // To and from the other sites: one port for all, or one each on a mesh (going
        // out, only for messages the sender hands over without waiting).
        let others: Vec<&Vec<usize>> = sites.iter().filter(|h| h[0] != rep).collect();
        let sizes = others.iter().map(|h| m * h.len() * s);
        let b_out = if costs[0].mesh && sizes.clone().all(|b| b <= SEND_WINDOW) {
            sizes.map(|b| costs[0].busy(b)).fold(0.0, f64::max)
        } else {
            sizes.map(|b| costs[0].busy(b)).sum::<f64>()
        };
        let b_in = if costs[0].mesh {
            others
                .iter()
                .map(|h| costs[0].beta * (m * h.len() * s) as f64)
                .fold(0.0, f64::max)
        } else {
            costs[0].beta * (m * d * s) as f64
        };
        let member_out = costs
            .iter()
            .map(|cost| cost.busy(d * s))
            .fold(0.0, f64::max);
        let per_flit = a_in_max.max(b_out).max(member_out);
        ab = ab.max(
            a_first + a_in_max + costs[0].alpha + b_out + k.saturating_sub(1) as f64 * per_flit,
        );
        let c_alpha = (0..levels).map(|l| costs[l].alpha).fold(0.0, f64::max);
        c = c.max(c_alpha + c_out_max + k.saturating_sub(1) as f64 * c_out_max.max(b_in));
    }
    ab + pair + c
}

/// Allreduce by exchange at the top: every site reduces to its representative (one
/// tree per site), the representatives send their partials to one another (one WAN
/// latency instead of a reduce's and a bcast's two) and combine them in site order,
/// then every site broadcasts. The representatives are busy through the three phases
/// in turn, flit after flit.
///
/// With `shared`, every representative's sends and receives across the top level are
/// priced on one port each way even on a mesh: the exchange multiplies the bytes that
/// cross the top level by about (sites − 1) / 2, and is only chosen where latency, not
/// volume, decides (a mesh's aggregate capacity is seldom what its pairs promise).
/// Inside a node (every rank its own representative), `shared` also keeps a sender
/// busy for each message's whole latency: the messages of one rank are copies its
/// core makes one after another, not bytes that overlap on a wire. On two ranks with
/// a core each, the split halved the time of 64-128 KiB.
fn exchange_time(
    topo: &Topology,
    forest: &Tree,
    reps: &[usize],
    (s, k): (usize, usize),
    shared: bool,
    kind: Exchange,
) -> f64 {
    let up = up(topo, forest, |_| s);
    let mut load = Load::default();
    let clock = match kind {
        Exchange::Full => exchange_round(topo, reps, &up.times, s, shared, &mut load),
        Exchange::Split => {
            // Each message is a 1/m block of the flit, and two rounds follow each other.
            let sb = s.div_ceil(reps.len().max(1));
            let c1 = exchange_round(topo, reps, &up.times, sb, shared, &mut load);
            exchange_round(topo, reps, &c1, sb, shared, &mut load)
        }
    };
    let down = down_from(topo, forest, |_| s, Some(&clock));
    let more = k.saturating_sub(1) as f64;
    down.first + more * (up.load.max() + load.max() + down.load.max())
}

/// One round in which representative `reps[i]` sends messages of `messages[i]` bytes,
/// each to every other representative (message-major), starting at `start[rep]`: when
/// each has received everything, in the order it posts its receives (sender by
/// sender, in site order).
fn block_round(
    topo: &Topology,
    reps: &[usize],
    messages: &[Vec<usize>],
    start: &[f64],
) -> Vec<f64> {
    let c0 = topo.costs()[0];
    let mut arrival: HashMap<(usize, usize, usize), f64> = HashMap::new();
    for (i, &r) in reps.iter().enumerate() {
        let mut free: HashMap<usize, f64> = HashMap::new();
        for (j, &b) in messages[i].iter().enumerate() {
            for &q in reps.iter().filter(|&&q| q != r) {
                let f = free.entry(topo.out_port(0, q, b)).or_insert(0.0);
                let begin = f.max(start[r]);
                arrival.insert((r, j, q), begin + c0.time(b));
                *f = begin + c0.busy(b);
            }
        }
    }
    let mut clock = vec![0.0f64; topo.size()];
    for &q in reps {
        let mut in_free: HashMap<usize, f64> = HashMap::new();
        let mut c = start[q];
        for (i, &r) in reps.iter().enumerate().filter(|&(_, &r)| r != q) {
            for (j, &b) in messages[i].iter().enumerate() {
                let f = in_free.entry(topo.port(0, r)).or_insert(0.0);
                *f = arrival[&(r, j, q)].max(*f + c0.beta * b as f64);
                c = c.max(*f);
            }
        }
        clock[q] = c;
    }
    clock
}

/// One round in which every representative sends `s` bytes to every other, each
/// starting at `start[rep]`: when each has received everything (per rank; 0 for
/// ranks that are not representatives). Adds the round's port loads to `load`.
fn exchange_round(
    topo: &Topology,
    reps: &[usize],
    start: &[f64],
    s: usize,
    shared: bool,
    load: &mut Load,
) -> Vec<f64> {
    let level = crossed(topo, reps);
    let c0 = topo.costs()[level];
    let whole = shared && level == topo.depth();
    let busy = if whole { c0.time(s) } else { c0.busy(s) };
    let out_port = |q: usize| {
        if shared {
            0
        } else {
            topo.out_port(level, q, s)
        }
    };
    let in_port = |r: usize| if shared { 0 } else { topo.port(level, r) };
    // Every representative sends to the others starting with the next one, each on
    // its port.
    let mut arrival: HashMap<(usize, usize), f64> = HashMap::new();
    for &r in reps {
        let mut free: HashMap<usize, f64> = HashMap::new();
        for q in crate::schedule::after(reps, r) {
            let f = free.entry(out_port(q)).or_insert(start[r]);
            arrival.insert((r, q), *f + c0.time(s));
            *f += busy;
            *load.out.entry((r, out_port(q))).or_default() += busy;
            *load.inn.entry((q, in_port(r))).or_default() += c0.beta * s as f64;
        }
    }
    let mut clock = vec![0.0f64; topo.size()];
    for &q in reps {
        let mut in_free: HashMap<usize, f64> = HashMap::new();
        let mut c = start[q];
        for &r in reps.iter().filter(|&&r| r != q) {
            let f = in_free.entry(in_port(r)).or_insert(0.0);
            *f = arrival[&(r, q)].max(*f + c0.beta * s as f64);
            c = c.max(*f);
        }
        clock[q] = c;
    }
    clock
}

/// The level the representatives' messages cross: the top one between site
/// representatives, the node's between the ranks of a one-node job.
fn crossed(topo: &Topology, reps: &[usize]) -> usize {
    match reps {
        [a, b, ..] => topo.level(*a, *b),
        _ => 0,
    }
}

/// How site representatives combine their sites' partials.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Exchange {
    /// Each sends its whole partial to every other and combines all: one top-level
    /// latency, (sites − 1) partials out of every site.
    Full,
    /// Reduce-scatter then allgather, as Rabenseifner's allreduce: each sends block
    /// j of its partial to representative j, which combines block j and sends it to
    /// every other. Two top-level latencies, 2·(sites − 1)/sites of a partial out of
    /// every site: what large vectors need.
    Split,
}

/// What an exchange between site representatives starts from: bytes per rank, flits
/// and the largest flit, the per-site forest and the representatives in site order.
struct SiteExchange {
    n: usize,
    k: usize,
    s: usize,
    forest: Tree,
    reps: Vec<usize>,
}

/// The [`SiteExchange`] of a hierarchical `op`; `None` for another operation or
/// algorithm, bad arguments, or a single site (except for an allreduce whose ranks all
/// share one node: each rank is then its own representative, see
/// [`tree::node_forest`]).
fn site_exchange(
    op: Op,
    coll: &Collective,
    topo: &Topology,
    alg: Algorithm,
    flits: usize,
) -> Option<SiteExchange> {
    if coll.op != op || alg != Algorithm::Hierarchical {
        return None;
    }
    let n = validate(coll, topo, alg, flits).ok()?;
    let cut = pieces(n, coll.elem_size, flits);
    let (k, s) = (cut.len(), cut.iter().map(|r| r.len()).max().unwrap_or(0));
    let (forest, reps) = tree::site_forest(topo, 0, (s, k))
        .or_else(|| (op == Op::Allreduce).then(|| tree::node_forest(topo))?)?;
    Some(SiteExchange {
        n,
        k,
        s,
        forest,
        reps,
    })
}

/// Whether a hierarchical allreduce of `coll` exchanges partials between site
/// representatives (see [`exchange_time`]): when the topology has several sites, the
/// result can be combined in rank order (a commutative operation, or sites that are
/// contiguous rank ranges) and the model finds it faster than the reduce-then-bcast
/// tree, pricing the exchange's top level as shared (see [`exchange_time`]); or when
/// every rank shares one node, a split exchange between all of them (never the full
/// one there). Returns the per-site forest and the representatives in site order.
pub(crate) fn allreduce_exchange(
    coll: &Collective,
    topo: &Topology,
    alg: Algorithm,
    flits: usize,
) -> Option<(Tree, Vec<usize>, Exchange)> {
    let SiteExchange {
        n,
        k,
        s,
        forest,
        reps,
    } = site_exchange(Op::Allreduce, coll, topo, alg, flits)?;
    if coll.ordered() && forest.runs().iter().any(|r| r.len() > 1) {
        return None;
    }
    let t = tree::build(topo, alg, 0, coll.ordered(), (s, k));
    let segs: Option<Vec<usize>> = coll
        .ordered()
        .then(|| t.runs().iter().map(Vec::len).collect());
    let seg = |c: usize| segs.as_ref().map_or(1, |v| v[c]);
    let tree_time = up(topo, &t, |c| seg(c) * s).total(k) + down(topo, &t, |_| s).total(k);
    // Inside a node, every rank sending its whole vector to every other is never
    // worth it: the ranks share the node's cores and memory, which the model prices
    // per rank. A split there needs a core per rank: where a message's latency is a
    // wait for a core (above the per-message overhead: more ranks than cores), 16
    // ranks on 2 cores measured 1-2× slower than the tree from 64 KiB to 512 KiB
    // (4 ranks: 1.7× at 64 KiB), however the model priced its many messages.
    let in_node = crossed(topo, &reps) == topo.depth();
    let full =
        (!in_node).then(|| exchange_time(topo, &forest, &reps, (s, k), true, Exchange::Full));
    let own_cores = topo.costs()[topo.depth()].alpha <= SEND_OVERHEAD;
    // A split needs an element per representative in every block.
    let split = (n / coll.elem_size.max(1) >= reps.len() && (own_cores || !in_node))
        .then(|| exchange_time(topo, &forest, &reps, (s, k), true, Exchange::Split));
    let (kind, best) = match (split, full) {
        (Some(t), Some(f)) if t < f => (Exchange::Split, t),
        (Some(t), None) => (Exchange::Split, t),
        (_, Some(f)) => (Exchange::Full, f),
        (None, None) => return None,
    };
    (best < tree_time).then_some((forest, reps, kind))
}

/// Allgather over tree `t`: gather to its root, then broadcast the `P·n` result cut
/// into its own flits.
fn allgather_tree_time(
    topo: &Topology,
    t: &Tree,
    n: usize,
    (s, k): (usize, usize),
    coll: &Collective,
    flits: usize,
) -> f64 {
    let cut2 = pieces(topo.size() * n, coll.elem_size, flits);
    let s2 = cut2.iter().map(|r| r.len()).max().unwrap_or(0);
    up(topo, t, |c| t.size[c] * s).total(k) + down(topo, t, |_| s2).total(cut2.len())
}

/// Allgather by exchange at the top: every site gathers to its representative (one
/// tree per site), the representatives send their site's blocks to one another (one
/// top-level latency where gathering to one root and broadcasting takes two, and each
/// site's blocks cross to each other site once instead of the whole result), then
/// every site broadcasts the result. A representative sends its site's blocks once it
/// has them all, one message per run of consecutive ranks.
fn allgather_exchange_time(
    topo: &Topology,
    forest: &Tree,
    reps: &[usize],
    n: usize,
    (s, k): (usize, usize),
    coll: &Collective,
    flits: usize,
) -> f64 {
    let up = up(topo, forest, |c| forest.size[c] * s);
    let more = k.saturating_sub(1) as f64 * up.load.max();
    let start: Vec<f64> = up.times.iter().map(|t| t + more).collect();
    let runs = forest.runs();
    let messages: Vec<Vec<usize>> = reps
        .iter()
        .map(|&r| runs[r].iter().map(|&(lo, hi)| (hi - lo) * n).collect())
        .collect();
    let clock = block_round(topo, reps, &messages, &start);
    let cut2 = pieces(topo.size() * n, coll.elem_size, flits);
    let s2 = cut2.iter().map(|r| r.len()).max().unwrap_or(0);
    let down = down_from(topo, forest, |_| s2, Some(&clock));
    down.first + cut2.len().saturating_sub(1) as f64 * down.load.max()
}

/// Whether a hierarchical allgather exchanges site blocks between representatives
/// (see [`allgather_exchange_time`]): when the topology has several sites and the
/// model finds it faster than gathering to rank 0 and broadcasting. Returns the
/// per-site forest and the representatives in site order.
pub(crate) fn allgather_exchange(
    coll: &Collective,
    topo: &Topology,
    alg: Algorithm,
    flits: usize,
) -> Option<(Tree, Vec<usize>)> {
    let SiteExchange {
        n,
        k,
        s,
        forest,
        reps,
    } = site_exchange(Op::Allgather, coll, topo, alg, flits)?;
    // One message per run of consecutive ranks of a site, each with its own tag.
    let runs = forest.runs();
    if reps.iter().any(|&r| runs[r].len() >= 1 << 16) {
        return None;
    }
    let t = tree::build(topo, alg, 0, coll.ordered(), (s, k));
    let tree_time = allgather_tree_time(topo, &t, n, (s, k), coll, flits);
    let ex = allgather_exchange_time(topo, &forest, &reps, n, (s, k), coll, flits);
    (ex < tree_time).then_some((forest, reps))
}

/// The modelled time of `coll` on `topo` with `alg` and `flits`, in seconds.
pub fn time(
    coll: &Collective,
    topo: &Topology,
    alg: Algorithm,
    flits: usize,
) -> Result<f64, ScheduleError> {
    let n = validate(coll, topo, alg, flits)?;
    let cut = pieces(n, coll.elem_size, flits);
    let (k, s) = (cut.len(), cut.iter().map(|r| r.len()).max().unwrap_or(0));
    if coll.op == Op::Alltoall {
        let all: Vec<usize> = (0..topo.size()).collect();
        return Ok(match alg {
            Algorithm::Hierarchical => hierarchical_alltoall(topo, n, k, s),
            _ => pairwise(topo, &all, n, k),
        });
    }
    if let Some((forest, reps, kind)) = allreduce_exchange(coll, topo, alg, flits) {
        return Ok(exchange_time(topo, &forest, &reps, (s, k), false, kind));
    }
    if let Some((forest, reps)) = allgather_exchange(coll, topo, alg, flits) {
        return Ok(allgather_exchange_time(
            topo,
            &forest,
            &reps,
            n,
            (s, k),
            coll,
            flits,
        ));
    }
    let root = if coll.op.is_rooted() { coll.root } else { 0 };
    let t = tree::build(topo, alg, root, coll.ordered(), (s, k));
    let segs: Option<Vec<usize>> = coll
        .ordered()
        .then(|| t.runs().iter().map(Vec::len).collect());
    let seg = |c: usize| segs.as_ref().map_or(1, |v| v[c]);
    Ok(match coll.op {
        Op::Bcast => down(topo, &t, |_| s).total(k),
        Op::Reduce => up(topo, &t, |c| seg(c) * s).total(k),
        Op::Allreduce => up(topo, &t, |c| seg(c) * s).total(k) + down(topo, &t, |_| s).total(k),
        Op::Gather => up(topo, &t, |c| t.size[c] * s).total(k),
        Op::Scatter => down(topo, &t, |c| t.size[c] * s).total(k),
        Op::Allgather => allgather_tree_time(topo, &t, n, (s, k), coll, flits),
        Op::Barrier => up(topo, &t, |_| 0).total(1) + down(topo, &t, |_| 0).total(1),
        Op::Alltoall => unreachable!("priced above"),
    })
}
