//! Step lists for every rank: a spanning tree plus a data layout per operation.

use std::ops::Range;

use crate::alltoall;
use crate::step::{Algorithm, Buf, Collective, Op, Order, RankSchedule, ScheduleError, Step};
use crate::topology::Topology;
use crate::tree::{self, Tree};

/// Largest flit count (flit indices fill the low 16 bits of a tag).
pub const MAX_FLITS: usize = 1 << 16;

/// Tag phase of messages towards the root (reduce, gather, and the first half of
/// allreduce, allgather and barrier).
pub const PHASE_UP: u32 = 0;
/// Tag phase of messages away from the root (bcast, scatter, second halves).
pub const PHASE_DOWN: u32 = 1;
/// Tag phase of the pairwise exchange of alltoall.
pub const PHASE_PAIRWISE: u32 = 2;
/// Tag phase of the exchange between site representatives (hierarchical alltoall, and
/// the hierarchical allreduce's exchange of site partials).
pub const PHASE_EXCHANGE: u32 = 3;
/// Tag phase of the second half of a split exchange (the combined blocks handed
/// out). It shares alltoall's pairwise phase: no operation uses both, and a tag has
/// room for four phases (libqcg puts a call's sequence number above bit 18).
pub const PHASE_SPREAD: u32 = PHASE_PAIRWISE;

/// The tag of flit `flit` in `phase`: `phase << 16 | flit`.
pub fn tag(phase: u32, flit: usize) -> u32 {
    (phase << 16) | flit as u32
}

/// Cuts `total` bytes into at most `k` nearly equal pieces on `elem` boundaries (at least
/// one piece, possibly empty when `total` is 0).
pub fn pieces(total: usize, elem: usize, k: usize) -> Vec<Range<usize>> {
    let elems = total / elem.max(1);
    let k = k.min(elems).max(1);
    (0..k)
        .map(|i| elem * (i * elems / k)..elem * ((i + 1) * elems / k))
        .collect()
}

/// The representatives other than `r`, starting with the one after it (wrapping
/// around): the order each sends to the others in, so that they do not all begin
/// with the first.
pub(crate) fn after(reps: &[usize], r: usize) -> impl Iterator<Item = usize> + Clone + '_ {
    let me = reps.iter().position(|&q| q == r).unwrap_or(0);
    let m = reps.len();
    (1..m).map(move |d| reps[(me + d) % m])
}

/// Flit `i` (`piece` of `own`) of every site representative's partial combined
/// into this representative's `Output`, in site order (`((p₀ ∘ p₁) ∘ p₂) ∘ …`, the
/// same association everywhere): the others' flits arrive in `got` (slots of `mp`
/// bytes, one per other representative), `acc` holds the running result, or
/// `Output` itself when there is none (`own` must then be another buffer).
fn combine_flit(
    b: &mut Builder,
    reps: &[usize],
    i: usize,
    piece: &Range<usize>,
    (got, mp): (Buf, usize),
    (own, acc): (Buf, Option<Buf>),
) {
    let (r, plen) = (b.rs.rank, piece.len());
    let mut parts = Vec::with_capacity(reps.len());
    let mut j = 0;
    for &q in reps {
        if q == r {
            parts.push((own, piece.clone()));
        } else {
            let slot = j * mp..j * mp + plen;
            b.recv(q, tag(PHASE_EXCHANGE, i), got, slot.clone());
            parts.push((got, slot));
            j += 1;
        }
    }
    let (dst, at) = match acc {
        Some(acc) => (acc, 0..plen),
        None => (Buf::Output, piece.clone()),
    };
    let (first_buf, first_range) = parts[0].clone();
    b.copy(dst, at.clone(), first_buf, first_range);
    for (buf, range) in &parts[1..] {
        b.reduce(dst, at.clone(), *buf, range.clone(), Order::DstFirst);
    }
    if acc.is_some() {
        b.copy(Buf::Output, piece.clone(), dst, at);
    }
}

/// The schedules of every rank (index = rank).
pub fn schedule(
    coll: &Collective,
    topo: &Topology,
    alg: Algorithm,
    flits: usize,
) -> Result<Vec<RankSchedule>, ScheduleError> {
    let plan = Plan::new(coll, topo, alg, flits)?;
    Ok((0..topo.size()).map(|r| plan.rank(r)).collect())
}

/// The schedule of one rank. Costs the tree construction (O(P log P)) plus the rank's
/// own steps.
pub fn schedule_for(
    rank: usize,
    coll: &Collective,
    topo: &Topology,
    alg: Algorithm,
    flits: usize,
) -> Result<RankSchedule, ScheduleError> {
    if rank >= topo.size() {
        return Err(ScheduleError::RankOutOfRange {
            rank,
            size: topo.size(),
        });
    }
    Ok(Plan::new(coll, topo, alg, flits)?.rank(rank))
}

/// Checks the parameters; returns the bytes per rank (0 for barrier).
pub(crate) fn validate(
    coll: &Collective,
    topo: &Topology,
    alg: Algorithm,
    flits: usize,
) -> Result<usize, ScheduleError> {
    let p = topo.size();
    let e = coll.elem_size;
    if e == 0 {
        return Err(ScheduleError::ZeroElemSize);
    }
    if coll.op.is_rooted() && coll.root >= p {
        return Err(ScheduleError::RankOutOfRange {
            rank: coll.root,
            size: p,
        });
    }
    if flits == 0 || flits > MAX_FLITS {
        return Err(ScheduleError::BadFlits(flits));
    }
    if coll.op == Op::Alltoall && !matches!(alg, Algorithm::FlatLinear | Algorithm::Hierarchical) {
        return Err(ScheduleError::Unsupported(coll.op, alg));
    }
    let n = if coll.op == Op::Barrier {
        0
    } else {
        coll.bytes
    };
    if n % e != 0 {
        return Err(ScheduleError::NotWholeElements {
            bytes: n,
            elem_size: e,
        });
    }
    p.checked_mul(n).ok_or(ScheduleError::TooLarge)?;
    Ok(n)
}

/// Everything shared by the ranks' schedules.
struct Plan {
    coll: Collective,
    p: usize,
    /// Bytes per rank (0 for barrier).
    n: usize,
    /// Flits of one `n`-byte vector or block.
    pieces: Vec<Range<usize>>,
    /// Flits asked for.
    flits: usize,
    tree: Option<Tree>,
    /// Runs of each subtree, for non-commutative reductions.
    runs: Option<Vec<Vec<(usize, usize)>>>,
    /// Sites, for the hierarchical alltoall.
    sites: Option<alltoall::Sites>,
    /// Site representatives that exchange their sites' partials (hierarchical
    /// allreduce, when the model finds it faster than a reduce and a bcast), and how;
    /// `tree` is then one tree per site.
    exchange: Option<(Vec<usize>, crate::model::Exchange)>,
    /// Site representatives that exchange their sites' blocks (hierarchical
    /// allgather, when the model finds it faster than a gather and a bcast); `tree`
    /// is then one tree per site.
    block_exchange: Option<Vec<usize>>,
}

impl Plan {
    fn new(
        coll: &Collective,
        topo: &Topology,
        alg: Algorithm,
        flits: usize,
    ) -> Result<Plan, ScheduleError> {
        let (p, n) = (topo.size(), validate(coll, topo, alg, flits)?);
        let e = coll.elem_size;
        let mut sites = None;
        let mut exchange = None;
        let mut block_exchange = None;
        let (tree, runs) = if let Some((forest, reps, kind)) =
            crate::model::allreduce_exchange(coll, topo, alg, flits)
        {
            let runs = coll.ordered().then(|| forest.runs());
            exchange = Some((reps, kind));
            (Some(forest), runs)
        } else if let Some((forest, reps)) =
            crate::model::allgather_exchange(coll, topo, alg, flits)
        {
            block_exchange = Some(reps);
            (Some(forest), None)
        } else if coll.op == Op::Alltoall {
            if alg == Algorithm::Hierarchical {
                sites = Some(alltoall::Sites::new(topo));
            }
            (None, None)
        } else {
            let root = if coll.op.is_rooted() { coll.root } else { 0 };
            let cut = pieces(n, e, flits);
            let s = cut.iter().map(|r| r.len()).max().unwrap_or(0);
            let t = tree::build(topo, alg, root, coll.ordered(), (s, cut.len()));
            let runs = coll.ordered().then(|| t.runs());
            (Some(t), runs)
        };
        Ok(Plan {
            coll: *coll,
            p,
            n,
            pieces: pieces(n, e, flits),
            flits,
            tree,
            runs,
            sites,
            exchange,
            block_exchange,
        })
    }

    fn rank(&self, r: usize) -> RankSchedule {
        let (n, pn) = (self.n, self.p * self.n);
        let root = self.coll.root;
        let mut b = Builder::new(r);
        let Some(t) = &self.tree else {
            b.rs.input_len = pn;
            b.rs.output_len = pn;
            match &self.sites {
                Some(sites) => alltoall::hierarchical(&mut b, sites, n, &self.pieces),
                None => alltoall::flat(&mut b, self.p, n, &self.pieces),
            }
            return b.rs;
        };
        let is_root = t.root == r;
        match self.coll.op {
            Op::Bcast => {
                (b.rs.input_len, b.rs.output_len) = (if is_root { n } else { 0 }, n);
                self.down(&mut b, t, &self.pieces, Buf::Input);
                if is_root {
                    b.copy(Buf::Output, 0..n, Buf::Input, 0..n);
                }
            }
            Op::Reduce => {
                (b.rs.input_len, b.rs.output_len) = (n, if is_root { n } else { 0 });
                self.up_reduce(&mut b, t);
            }
            Op::Allreduce | Op::Barrier => {
                (b.rs.input_len, b.rs.output_len) = (n, n);
                use crate::model::Exchange;
                // A representative alone in its tree (every rank of a one-node job)
                // splits its own input: nothing to reduce first.
                let alone = t.parent[r].is_none() && t.children[r].is_empty();
                let split_alone = alone && matches!(self.exchange, Some((_, Exchange::Split)));
                if !split_alone {
                    self.up_reduce(&mut b, t);
                }
                if let Some((reps, kind)) = &self.exchange {
                    if reps.contains(&r) {
                        match kind {
                            Exchange::Full => self.exchange_partials(&mut b, reps),
                            Exchange::Split => {
                                let own = if split_alone { Buf::Input } else { Buf::Output };
                                self.exchange_split(&mut b, reps, own)
                            }
                        }
                    }
                }
                self.down(&mut b, t, &self.pieces, Buf::Output);
            }
            Op::Gather => {
                (b.rs.input_len, b.rs.output_len) = (n, if r == root { pn } else { 0 });
                self.up_gather(&mut b, t);
            }
            Op::Scatter => {
                (b.rs.input_len, b.rs.output_len) = (if r == root { pn } else { 0 }, n);
                self.down_scatter(&mut b, t);
            }
            Op::Allgather => {
                (b.rs.input_len, b.rs.output_len) = (n, pn);
                self.up_gather(&mut b, t);
                if let Some(reps) = &self.block_exchange {
                    if reps.contains(&r) {
                        self.exchange_blocks(&mut b, t, reps);
                    }
                }
                let cut = pieces(pn, self.coll.elem_size, self.flits);
                self.down(&mut b, t, &cut, Buf::Output);
            }
            Op::Alltoall => unreachable!("alltoall has no tree"),
        }
        b.rs
    }

    fn max_piece(&self) -> usize {
        self.pieces.iter().map(|p| p.len()).max().unwrap_or(0)
    }

    /// Segments of `v`'s partial result: its runs when ordered, else one segment.
    fn segs(&self, v: usize) -> &[(usize, usize)] {
        match &self.runs {
            Some(runs) => &runs[v],
            None => std::slice::from_ref(&(0, 0)),
        }
    }

    /// The segment of `v` that contains segment `s` of its child `c`.
    fn parent_seg(&self, v: usize, c: usize, s: usize) -> usize {
        match &self.runs {
            Some(runs) => runs[v].partition_point(|&(_, hi)| hi <= runs[c][s].0),
            None => 0,
        }
    }

    /// Bytes flow from the root down `t`: `total` bytes cut into `cut`, the root reading
    /// `src`, the others receiving into and forwarding from `Output`.
    fn down(&self, b: &mut Builder, t: &Tree, cut: &[Range<usize>], src: Buf) {
        let r = b.rs.rank;
        for (i, piece) in cut.iter().enumerate() {
            let from = match t.parent[r] {
                Some(parent) => {
                    b.recv(parent, tag(PHASE_DOWN, i), Buf::Output, piece.clone());
                    Buf::Output
                }
                None => src,
            };
            for &c in &t.children[r] {
                b.send(c, tag(PHASE_DOWN, i), from, piece.clone());
            }
        }
    }

    /// Partial results flow up `t`. A rank's partial has one slot per segment; a flit of
    /// it is the flit of every segment, segment-major, in one message.
    fn up_reduce(&self, b: &mut Builder, t: &Tree) {
        let r = b.rs.rank;
        let kids: Vec<usize> = t.children[r].iter().rev().copied().collect();
        let nseg = self.segs(r).len();
        if let (true, Some(parent)) = (kids.is_empty(), t.parent[r]) {
            for (i, piece) in self.pieces.iter().enumerate() {
                b.send(parent, tag(PHASE_UP, i), Buf::Input, piece.clone());
            }
            return;
        }
        let mp = self.max_piece();
        // A root accumulates in its output; the others in a temp, so that an
        // allreduce's result lands straight in their output (no step touched it).
        let acc_in_output = t.parent[r].is_none();
        let acc = if acc_in_output {
            Buf::Output
        } else {
            b.temp(nseg * mp)
        };
        let kid_segs: usize = kids.iter().map(|&c| self.segs(c).len()).sum();
        let rt = if kid_segs > 0 {
            b.temp(kid_segs * mp)
        } else {
            Buf::Input
        };
        for (i, piece) in self.pieces.iter().enumerate() {
            let plen = piece.len();
            // contributions[j]: (first rank covered, buffer, range) for segment j.
            let mut contrib: Vec<Vec<(usize, Buf, Range<usize>)>> = vec![Vec::new(); nseg];
            let own_seg = self.segs(r).partition_point(|&(_, hi)| hi <= r);
            let own_seg = if self.runs.is_some() { own_seg } else { 0 };
            contrib[own_seg].push((r, Buf::Input, piece.clone()));
            let mut off = 0;
            for &c in &kids {
                let cs = self.segs(c);
                b.recv(c, tag(PHASE_UP, i), rt, off..off + cs.len() * plen);
                for (s, &(lo, _)) in cs.iter().enumerate() {
                    let j = self.parent_seg(r, c, s);
                    contrib[j].push((lo, rt, off + s * plen..off + (s + 1) * plen));
                }
                off += cs.len() * plen;
            }
            let base = if acc_in_output { piece.start } else { 0 };
            for (j, mut parts) in contrib.into_iter().enumerate() {
                if self.runs.is_some() {
                    parts.sort_by_key(|x| x.0);
                }
                let slot = base + j * plen..base + (j + 1) * plen;
                let pivot = parts.iter().position(|x| x.0 == r).unwrap_or(0);
                let (_, pb, pr) = &parts[pivot];
                b.copy(acc, slot.clone(), *pb, pr.clone());
                for (_, sb, sr) in &parts[pivot + 1..] {
                    b.reduce(acc, slot.clone(), *sb, sr.clone(), Order::DstFirst);
                }
                for (_, sb, sr) in parts[..pivot].iter().rev() {
                    b.reduce(acc, slot.clone(), *sb, sr.clone(), Order::SrcFirst);
                }
            }
            if let Some(parent) = t.parent[r] {
                b.send(parent, tag(PHASE_UP, i), acc, base..base + nseg * plen);
            }
        }
    }

    /// A site representative sends its site's partial (in `Output`) to every other
    /// representative and combines all of them, in site order and with the same
    /// association on every representative: `((p₀ ∘ p₁) ∘ p₂) ∘ …`.
    fn exchange_partials(&self, b: &mut Builder, reps: &[usize]) {
        let r = b.rs.rank;
        let mp = self.max_piece();
        let others = reps.len() - 1;
        let got = b.temp(others * mp);
        let acc = b.temp(mp);
        // Every flit goes out before the first is awaited: one latency in all, not one
        // per flit.
        for (i, piece) in self.pieces.iter().enumerate() {
            for q in after(reps, r) {
                b.send(q, tag(PHASE_EXCHANGE, i), Buf::Output, piece.clone());
            }
        }
        for (i, piece) in self.pieces.iter().enumerate() {
            combine_flit(b, reps, i, piece, (got, mp), (Buf::Output, Some(acc)));
        }
    }

    /// The exchange of a hierarchical allgather between site representatives, each
    /// with its site's blocks gathered in `Output`: each sends every run of
    /// consecutive ranks of its site, in one message, to every other representative,
    /// and receives theirs in place.
    fn exchange_blocks(&self, b: &mut Builder, t: &Tree, reps: &[usize]) {
        let (r, n) = (b.rs.rank, self.n);
        let runs = t.runs();
        // Every run goes out before the first is awaited: one latency in all.
        for (j, &(lo, hi)) in runs[r].iter().enumerate() {
            for &q in reps.iter().filter(|&&q| q != r) {
                b.send(q, tag(PHASE_EXCHANGE, j), Buf::Output, lo * n..hi * n);
            }
        }
        for &q in reps.iter().filter(|&&q| q != r) {
            for (j, &(lo, hi)) in runs[q].iter().enumerate() {
                b.recv(q, tag(PHASE_EXCHANGE, j), Buf::Output, lo * n..hi * n);
            }
        }
    }

    /// The split exchange (Rabenseifner's reduce-scatter, then allgather), between
    /// site representatives whose partials are in `Output`: the vector is cut into one
    /// block per representative; representative j receives block j of every partial,
    /// combines them in site order (`((p₀ ∘ p₁) ∘ p₂) ∘ …`, as the full exchange) and
    /// sends the result to every other. Each block travels in flits.
    ///
    /// The partial is read from `own` (`Output`, or `Input` for a representative
    /// alone in its tree); the result lands in `Output`. Each sends to the others
    /// starting with the next one, so that they do not all begin with the first.
    fn exchange_split(&self, b: &mut Builder, reps: &[usize], own: Buf) {
        let r = b.rs.rank;
        let e = self.coll.elem_size;
        let blocks = pieces(self.n, e, reps.len());
        let flits_of = |j: usize| -> Vec<Range<usize>> {
            let base = blocks[j].start;
            pieces(blocks[j].len(), e, self.flits)
                .into_iter()
                .map(|f| base + f.start..base + f.end)
                .collect()
        };
        let me = reps.iter().position(|&q| q == r).unwrap_or(0);
        let mine = flits_of(me);
        let mp = mine.iter().map(|f| f.len()).max().unwrap_or(0);
        let got = b.temp((reps.len() - 1) * mp);
        // Combining straight into `Output` would overwrite the partial read there.
        let acc = if own == Buf::Output {
            Some(b.temp(mp))
        } else {
            None
        };
        let m = reps.len();
        let others = (1..m).map(|d| ((me + d) % m, reps[(me + d) % m]));
        // Every block's flits go out before the first is awaited.
        for (j, q) in others.clone() {
            for (i, f) in flits_of(j).into_iter().enumerate() {
                b.send(q, tag(PHASE_EXCHANGE, i), own, f);
            }
        }
        for (i, f) in mine.iter().enumerate() {
            combine_flit(b, reps, i, f, (got, mp), (own, acc));
            for (_, q) in others.clone() {
                b.send(q, tag(PHASE_SPREAD, i), Buf::Output, f.clone());
            }
        }
        for (j, &q) in reps.iter().enumerate().filter(|&(_, &q)| q != r) {
            for (i, f) in flits_of(j).into_iter().enumerate() {
                b.recv(q, tag(PHASE_SPREAD, i), Buf::Output, f);
            }
        }
    }

    /// Whether the flit pieces of `ranks`' blocks are contiguous in a rank-major buffer.
    fn contiguous(&self, ranks: &[usize]) -> bool {
        ranks.len() == 1 || (self.pieces.len() == 1 && ranks.windows(2).all(|w| w[1] == w[0] + 1))
    }

    /// Blocks flow up `t`; a message carries flit i of every block of the sender's
    /// subtree, in preorder, so that intermediate ranks receive in place.
    fn up_gather(&self, b: &mut Builder, t: &Tree) {
        let (r, n) = (b.rs.rank, self.n);
        let kids: Vec<usize> = t.children[r].iter().rev().copied().collect();
        let mp = self.max_piece();
        if let Some(parent) = t.parent[r] {
            let stage = if kids.is_empty() {
                Buf::Input
            } else if b.rs.output_len >= t.size[r] * mp {
                Buf::Output
            } else {
                b.temp(t.size[r] * mp)
            };
            for (i, piece) in self.pieces.iter().enumerate() {
                let plen = piece.len();
                if kids.is_empty() {
                    b.send(parent, tag(PHASE_UP, i), Buf::Input, piece.clone());
                    continue;
                }
                b.copy(stage, 0..plen, Buf::Input, piece.clone());
                for &c in &kids {
                    let off = (t.start[c] - t.start[r]) * plen;
                    b.recv(c, tag(PHASE_UP, i), stage, off..off + t.size[c] * plen);
                }
                b.send(parent, tag(PHASE_UP, i), stage, 0..t.size[r] * plen);
            }
            return;
        }
        let scattered = kids.iter().any(|&c| !self.contiguous(t.subtree(c)));
        let rt = if scattered {
            let most = kids.iter().map(|&c| t.size[c]).max().unwrap_or(0);
            b.temp(most * mp)
        } else {
            Buf::Input
        };
        for (i, piece) in self.pieces.iter().enumerate() {
            let (a, plen) = (piece.start, piece.len());
            b.copy(
                Buf::Output,
                r * n + a..r * n + a + plen,
                Buf::Input,
                piece.clone(),
            );
            for &c in &kids {
                let ranks = t.subtree(c);
                if self.contiguous(ranks) {
                    let s = ranks[0] * n + a;
                    b.recv(c, tag(PHASE_UP, i), Buf::Output, s..s + ranks.len() * plen);
                    continue;
                }
                b.recv(c, tag(PHASE_UP, i), rt, 0..ranks.len() * plen);
                for (j, &q) in ranks.iter().enumerate() {
                    let d = q * n + a;
                    b.copy(Buf::Output, d..d + plen, rt, j * plen..(j + 1) * plen);
                }
            }
        }
    }

    /// Blocks flow down `t`, the mirror image of [`Plan::up_gather`].
    fn down_scatter(&self, b: &mut Builder, t: &Tree) {
        let (r, n) = (b.rs.rank, self.n);
        let kids = &t.children[r];
        let mp = self.max_piece();
        if let Some(parent) = t.parent[r] {
            let stage = if kids.is_empty() {
                Buf::Output
            } else {
                b.temp(t.size[r] * mp)
            };
            for (i, piece) in self.pieces.iter().enumerate() {
                let plen = piece.len();
                if kids.is_empty() {
                    b.recv(parent, tag(PHASE_DOWN, i), Buf::Output, piece.clone());
                    continue;
                }
                b.recv(parent, tag(PHASE_DOWN, i), stage, 0..t.size[r] * plen);
                b.copy(Buf::Output, piece.clone(), stage, 0..plen);
                for &c in kids {
                    let off = (t.start[c] - t.start[r]) * plen;
                    b.send(c, tag(PHASE_DOWN, i), stage, off..off + t.size[c] * plen);
                }
            }
            return;
        }
        let scattered = kids.iter().any(|&c| !self.contiguous(t.subtree(c)));
        let st = if scattered {
            let most = kids.iter().map(|&c| t.size[c]).max().unwrap_or(0);
            b.temp(most * mp)
        } else {
            Buf::Input
        };
        for (i, piece) in self.pieces.iter().enumerate() {
            let (a, plen) = (piece.start, piece.len());
            b.copy(
                Buf::Output,
                piece.clone(),
                Buf::Input,
                r * n + a..r * n + a + plen,
            );
            for &c in kids {
                let ranks = t.subtree(c);
                if self.contiguous(ranks) {
                    let s = ranks[0] * n + a;
                    b.send(c, tag(PHASE_DOWN, i), Buf::Input, s..s + ranks.len() * plen);
                    continue;
                }
                for (j, &q) in ranks.iter().enumerate() {
                    let s = q * n + a;
                    b.copy(st, j * plen..(j + 1) * plen, Buf::Input, s..s + plen);
                }
                b.send(c, tag(PHASE_DOWN, i), st, 0..ranks.len() * plen);
            }
        }
    }
}

/// Accumulates one rank's schedule; drops local steps on empty ranges.
pub(crate) struct Builder {
    pub(crate) rs: RankSchedule,
}

impl Builder {
    pub(crate) fn new(rank: usize) -> Self {
        Builder {
            rs: RankSchedule {
                rank,
                ..RankSchedule::default()
            },
        }
    }

    pub(crate) fn temp(&mut self, len: usize) -> Buf {
        self.rs.temps.push(len);
        Buf::Temp((self.rs.temps.len() - 1) as u8)
    }

    pub(crate) fn send(&mut self, to: usize, tag: u32, buf: Buf, range: Range<usize>) {
        self.rs.steps.push(Step::Send {
            to,
            tag,
            buf,
            range,
        });
    }

    pub(crate) fn recv(&mut self, from: usize, tag: u32, buf: Buf, range: Range<usize>) {
        self.rs.steps.push(Step::Recv {
            from,
            tag,
            buf,
            range,
        });
    }

    pub(crate) fn copy(
        &mut self,
        dst: Buf,
        dst_range: Range<usize>,
        src: Buf,
        src_range: Range<usize>,
    ) {
        if !dst_range.is_empty() {
            self.rs.steps.push(Step::Copy {
                dst,
                dst_range,
                src,
                src_range,
            });
        }
    }

    pub(crate) fn reduce(
        &mut self,
        dst: Buf,
        dst_range: Range<usize>,
        src: Buf,
        src_range: Range<usize>,
        order: Order,
    ) {
        if !dst_range.is_empty() {
            self.rs.steps.push(Step::Reduce {
                dst,
                dst_range,
                src,
                src_range,
                order,
            });
        }
    }
}
