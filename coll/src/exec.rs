//! The one executor of local steps, and the rounds a schedule runs in.
//!
//! Every executor of schedules (the simulator, libqcg's blocking collectives and its
//! non-blocking ones) keeps a rank's buffers in a [`Buffers`] and runs `Copy` and
//! `Reduce` steps through [`local`], so the three cannot drift apart in what a local
//! step means. Messages are the executor's business; [`rounds`] says how a rank's
//! steps fall into rounds (see the crate documentation for the rule).

use std::borrow::Cow;
use std::ops::Range;

use crate::step::{Buf, Order, RankSchedule, Step};

/// `d = d ∘ s` ([`Order::DstFirst`]) or `d = s ∘ d` ([`Order::SrcFirst`]), element by
/// element over slices of equal length (whole elements).
pub type Combine<'a> = &'a dyn Fn(&mut [u8], &[u8], Order);

/// One rank's buffers: the input (borrowed or owned), the output and the temps,
/// zero-filled as the schedule's sizes say (or the output lent by the caller).
#[derive(Debug)]
pub struct Buffers<'a> {
    input: Cow<'a, [u8]>,
    /// `Output`, then the temps.
    rest: Vec<Slot<'a>>,
}

/// A writable buffer: ours, or the caller's.
#[derive(Debug)]
enum Slot<'a> {
    Owned(Vec<u8>),
    Lent(&'a mut [u8]),
}

impl std::ops::Deref for Slot<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Slot::Owned(v) => v,
            Slot::Lent(s) => s,
        }
    }
}

impl std::ops::DerefMut for Slot<'_> {
    fn deref_mut(&mut self) -> &mut [u8] {
        match self {
            Slot::Owned(v) => v,
            Slot::Lent(s) => s,
        }
    }
}

impl<'a> Buffers<'a> {
    /// The buffers of `rs` around `input` (which should have `rs.input_len` bytes).
    pub fn new(rs: &RankSchedule, input: Cow<'a, [u8]>) -> Self {
        let mut rest = Vec::with_capacity(1 + rs.temps.len());
        rest.push(Slot::Owned(vec![0u8; rs.output_len]));
        rest.extend(rs.temps.iter().map(|&n| Slot::Owned(vec![0u8; n])));
        Buffers { input, rest }
    }

    /// The buffers of `rs` around `input`, and the caller's `output` when given,
    /// written in place and *not* zero-filled first: only for a schedule that writes
    /// every byte of its output before it reads it ([`fills_output`]). A slot that `reusable` (see
    /// [`reusable`]: the output, then the temps) says may start with any bytes is
    /// taken from `spares` (buffers of earlier calls, not zeroed again) when one is
    /// large enough; the others are zero-filled. `None` if `output` is not
    /// `rs.output_len` bytes long.
    pub fn reusing(
        rs: &RankSchedule,
        input: Cow<'a, [u8]>,
        output: Option<&'a mut [u8]>,
        reusable: &[bool],
        spares: &mut Vec<Vec<u8>>,
    ) -> Option<Self> {
        let mut slot = |i: usize, n: usize| {
            if !reusable.get(i).copied().unwrap_or(false) {
                return Slot::Owned(vec![0u8; n]);
            }
            // Not a buffer much larger than needed: the output goes to the caller,
            // who may keep it, and a later large call wants the large ones.
            let best = (0..spares.len())
                .filter(|&j| (n..=2 * n + (64 << 10)).contains(&spares[j].capacity()))
                .min_by_key(|&j| spares[j].capacity());
            match best {
                Some(j) => {
                    let mut v = spares.swap_remove(j);
                    // Bytes of an earlier call: the schedule writes before it reads.
                    if v.len() >= n {
                        v.truncate(n);
                    } else {
                        v.resize(n, 0);
                    }
                    Slot::Owned(v)
                }
                None => Slot::Owned(vec![0u8; n]),
            }
        };
        let mut rest = Vec::with_capacity(1 + rs.temps.len());
        match output {
            Some(out) if out.len() != rs.output_len => return None,
            Some(out) => rest.push(Slot::Lent(out)),
            None => rest.push(slot(0, rs.output_len)),
        }
        for (i, &n) in rs.temps.iter().enumerate() {
            rest.push(slot(1 + i, n));
        }
        Some(Buffers { input, rest })
    }

    /// Gives the buffers this owns (the temps, and the output unless taken) to
    /// `spares` for a later call.
    pub fn recycle(self, spares: &mut Vec<Vec<u8>>) {
        for s in self.rest {
            if let Slot::Owned(v) = s {
                if v.capacity() > 0 {
                    spares.push(v);
                }
            }
        }
    }

    /// The output, once the schedule is done, leaving the rest to
    /// [`Buffers::recycle`] (empty when the caller lent it).
    pub fn take_output(&mut self) -> Vec<u8> {
        match std::mem::replace(&mut self.rest[0], Slot::Owned(Vec::new())) {
            Slot::Owned(v) => v,
            Slot::Lent(_) => Vec::new(),
        }
    }

    /// The bytes of `b` (`None` for a temp the schedule does not have).
    pub fn get(&self, b: Buf) -> Option<&[u8]> {
        match b {
            Buf::Input => Some(&self.input),
            Buf::Output => Some(&self.rest[0]),
            Buf::Temp(i) => self.rest.get(1 + i as usize).map(|v| &v[..]),
        }
    }

    /// The bytes of `b` for writing (`None` for the input or a missing temp).
    pub fn get_mut(&mut self, b: Buf) -> Option<&mut [u8]> {
        match b {
            Buf::Input => None,
            Buf::Output => Some(&mut self.rest[0]),
            Buf::Temp(i) => self.rest.get_mut(1 + i as usize).map(|v| &mut v[..]),
        }
    }

    /// Stores `data` into `b[range]`: the landing of a receive. Fails if the range
    /// is not writable or not `data`'s length.
    pub fn store(&mut self, b: Buf, range: &Range<usize>, data: &[u8]) -> Result<(), &'static str> {
        let d = self
            .get_mut(b)
            .ok_or("writes to the input or a missing temp")?;
        let d = d.get_mut(range.clone()).ok_or("range out of bounds")?;
        if d.len() != data.len() {
            return Err("message of another length than its receive");
        }
        d.copy_from_slice(data);
        Ok(())
    }

    /// The output, once the schedule is done (empty when the caller lent it).
    pub fn into_output(mut self) -> Vec<u8> {
        match std::mem::replace(&mut self.rest[0], Slot::Owned(Vec::new())) {
            Slot::Owned(v) => v,
            Slot::Lent(_) => Vec::new(),
        }
    }
}

/// Runs one local step (`Copy` or `Reduce`) on `bufs`, after checking it (ranges in
/// bounds, equal lengths, no write to the input, no overlap within a buffer). A
/// `Reduce` without `combine` is an error; `Send` and `Recv` are not local steps.
pub fn local(
    bufs: &mut Buffers<'_>,
    step: &Step,
    combine: Option<Combine<'_>>,
) -> Result<(), &'static str> {
    let (dst, dr, src, sr, order) = match step {
        Step::Copy {
            dst,
            dst_range,
            src,
            src_range,
        } => (*dst, dst_range, *src, src_range, None),
        Step::Reduce {
            dst,
            dst_range,
            src,
            src_range,
            order,
        } => (*dst, dst_range, *src, src_range, Some(*order)),
        Step::Send { .. } | Step::Recv { .. } => return Err("not a local step"),
    };
    if dr.len() != sr.len() {
        return Err("operands of different lengths");
    }
    if dst == src && overlaps(dr, sr) {
        return Err("overlapping operands");
    }
    if bufs.get(src).and_then(|s| s.get(sr.clone())).is_none() {
        return Err("range out of bounds");
    }
    if dst == Buf::Input {
        return Err("writes to the input");
    }
    if bufs.get(dst).and_then(|d| d.get(dr.clone())).is_none() {
        return Err("range out of bounds");
    }
    if order.is_some() && combine.is_none() {
        return Err("a reduction without an operation");
    }
    // Take the destination out so the source can be read meanwhile (same buffer:
    // the ranges do not overlap, so a copy of the source is enough).
    let s: Cow<'_, [u8]> = if dst == src {
        Cow::Owned(
            bufs.get(src)
                .map(|b| b[sr.clone()].to_vec())
                .unwrap_or_default(),
        )
    } else {
        Cow::Borrowed(&[])
    };
    let (input, rest) = (&bufs.input, &mut bufs.rest);
    let (d, s): (&mut [u8], &[u8]) = match (dst, src) {
        (Buf::Output, Buf::Input) => (&mut rest[0][dr.clone()], &input[sr.clone()]),
        (Buf::Temp(i), Buf::Input) => (&mut rest[1 + i as usize][dr.clone()], &input[sr.clone()]),
        _ if dst == src => {
            let d = match dst {
                Buf::Output => &mut rest[0],
                Buf::Temp(i) => &mut rest[1 + i as usize],
                Buf::Input => return Err("writes to the input"),
            };
            (&mut d[dr.clone()], &s[..])
        }
        _ => {
            let (di, si) = (slot(dst), slot(src));
            let (lo, hi) = rest.split_at_mut(di.max(si));
            if di < si {
                (&mut lo[di][dr.clone()], &hi[0][sr.clone()])
            } else {
                (&mut hi[0][dr.clone()], &lo[si][sr.clone()])
            }
        }
    };
    match (order, combine) {
        (Some(o), Some(f)) => f(d, s, o),
        _ => d.copy_from_slice(s),
    }
    Ok(())
}

/// Index in `Buffers::rest` of a writable buffer.
fn slot(b: Buf) -> usize {
    match b {
        Buf::Input | Buf::Output => 0,
        Buf::Temp(i) => 1 + i as usize,
    }
}

/// Whether two byte ranges share a byte.
pub fn overlaps(a: &Range<usize>, b: &Range<usize>) -> bool {
    a.start < b.end && b.start < a.end
}

/// The bytes a step reads and writes: (buffer, range, written).
fn touches(step: &Step) -> Vec<(Buf, &Range<usize>, bool)> {
    match step {
        Step::Send { buf, range, .. } => vec![(*buf, range, false)],
        Step::Recv { buf, range, .. } => vec![(*buf, range, true)],
        Step::Copy {
            dst,
            dst_range,
            src,
            src_range,
        }
        | Step::Reduce {
            dst,
            dst_range,
            src,
            src_range,
            ..
        } => vec![(*src, src_range, false), (*dst, dst_range, true)],
    }
}

/// The rounds of a rank's steps, as index ranges of `rs.steps`. A round ends just
/// before the first step (other than a receive) that reads or writes bytes a
/// receive of the same round writes, or that follows a zero-byte receive of the
/// round: that step needs the message (a zero-byte message carries only an order,
/// as a barrier's arrivals do), so an executor waits there. Within a round an executor posts every receive before it starts
/// any send; the steps otherwise run in order.
pub fn rounds(rs: &RankSchedule) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut pending: Vec<(Buf, &Range<usize>)> = Vec::new();
    for (i, step) in rs.steps.iter().enumerate() {
        let needs = !matches!(step, Step::Recv { .. })
            && (pending.iter().any(|&(_, pr)| pr.is_empty())
                || touches(step)
                    .iter()
                    .any(|&(b, r, _)| pending.iter().any(|&(pb, pr)| pb == b && overlaps(pr, r))));
        if needs {
            out.push(start..i);
            start = i;
            pending.clear();
        }
        if let Step::Recv { buf, range, .. } = step {
            pending.push((*buf, range));
        }
    }
    if start < rs.steps.len() {
        out.push(start..rs.steps.len());
    }
    out
}

/// For every step, whether it is a receive of at least `min` bytes that may land
/// straight in its buffer at any time from the start of the schedule to its
/// completion: no step before it touches its bytes (a send from them, a local step,
/// another receive), and no other receive writes any of them. A later step that
/// reads or writes them waits for the receive first, as every executor does. An
/// executor that posts every receive at the start (libqcg's) may then write such a
/// message into place as it comes instead of into a buffer of its own.
pub fn direct_receives(rs: &RankSchedule, min: usize) -> Vec<bool> {
    let steps = &rs.steps;
    steps
        .iter()
        .enumerate()
        .map(|(i, step)| {
            let Step::Recv { buf, range, .. } = step else {
                return false;
            };
            if range.len() < min.max(1) || *buf == Buf::Input {
                return false;
            }
            steps.iter().enumerate().all(|(j, other)| {
                j == i
                    || !touches(other).iter().any(|&(b, r, written)| {
                        b == *buf
                            && overlaps(r, range)
                            && (j < i || written && matches!(other, Step::Recv { .. }))
                    })
            })
        })
        .collect()
}

/// For every step, whether it is a send of at least `min` bytes that no later step
/// writes over (a receive, a local step): its bytes stay as they are until the
/// schedule ends, so an executor may lend them to the receiver (which then copies
/// them from where they lie) instead of copying them first.
pub fn lendable_sends(rs: &RankSchedule, min: usize) -> Vec<bool> {
    let steps = &rs.steps;
    steps
        .iter()
        .enumerate()
        .map(|(i, step)| {
            let Step::Send { buf, range, .. } = step else {
                return false;
            };
            range.len() >= min.max(1)
                && steps[i + 1..].iter().all(|later| {
                    !touches(later)
                        .iter()
                        .any(|&(b, r, written)| written && b == *buf && overlaps(r, range))
                })
        })
        .collect()
}

/// Whether the steps write every byte of the output, each before any step reads it
/// (a broadcast's receivers do): then the output may start with any bytes, such as
/// those of a caller's buffer lent to it ([`Buffers::reusing`]).
pub fn fills_output(rs: &RankSchedule) -> bool {
    match written_before_read(rs, Buf::Output) {
        Some(w) => rs.output_len == 0 || w.iter().any(|x| x.start == 0 && rs.output_len <= x.end),
        None => false,
    }
}

/// The schedule for a caller that does not want the output (a broadcast's root,
/// whose result is its own input): `None` unless every step that touches the output
/// is a copy into it, and nothing reads it; then those copies are left out and the
/// output has no bytes. A step that writes the output from the wire or reduces into
/// it is work the other ranks may depend on, so it is kept.
pub fn without_output(rs: &RankSchedule) -> Option<RankSchedule> {
    let mut steps = Vec::with_capacity(rs.steps.len());
    for step in &rs.steps {
        let t = touches(step);
        if !t.iter().any(|&(b, _, _)| b == Buf::Output) {
            steps.push(step.clone());
            continue;
        }
        match step {
            Step::Copy { dst, src, .. } if *dst == Buf::Output && *src != Buf::Output => {}
            _ => return None,
        }
    }
    Some(RankSchedule {
        output_len: 0,
        steps,
        ..rs.clone()
    })
}

/// For the output then each temp: whether it may start with any bytes, such as a
/// buffer of an earlier call's ([`Buffers::reusing`]). For the output, every byte
/// is written before anything reads it ([`fills_output`]); for a temp, every byte a
/// step reads was written by an earlier step.
pub fn reusable(rs: &RankSchedule) -> Vec<bool> {
    let temps = (0..rs.temps.len())
        .map(|i| u8::try_from(i).is_ok_and(|i| written_before_read(rs, Buf::Temp(i)).is_some()));
    std::iter::once(fills_output(rs)).chain(temps).collect()
}

/// The bytes of `buf` the steps write (sorted disjoint ranges), if every byte a step
/// reads was written before; `None` if some step reads a byte not yet written.
fn written_before_read(rs: &RankSchedule, buf: Buf) -> Option<Vec<Range<usize>>> {
    // The bytes written so far, as sorted disjoint ranges.
    let mut written: Vec<Range<usize>> = Vec::new();
    let covered = |w: &[Range<usize>], r: &Range<usize>| {
        r.is_empty() || w.iter().any(|x| x.start <= r.start && r.end <= x.end)
    };
    for step in &rs.steps {
        let t = touches(step);
        // A reduction reads its destination too.
        let reads_dst = matches!(step, Step::Reduce { .. });
        for &(b, r, w) in &t {
            if b == buf && (!w || reads_dst) && !covered(&written, r) {
                return None;
            }
        }
        for &(b, r, w) in &t {
            if b == buf && w && !r.is_empty() {
                written.push(r.clone());
                written.sort_by_key(|x| x.start);
                let mut merged: Vec<Range<usize>> = Vec::with_capacity(written.len());
                for x in written.drain(..) {
                    match merged.last_mut() {
                        Some(l) if x.start <= l.end => l.end = l.end.max(x.end),
                        _ => merged.push(x),
                    }
                }
                written = merged;
            }
        }
    }
    Some(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_output_is_filled_when_every_byte_is_written_before_it_is_read() {
        let recv = |range| Step::Recv {
            from: 1,
            tag: 0,
            buf: Buf::Output,
            range,
        };
        let send = |range| Step::Send {
            to: 2,
            tag: 0,
            buf: Buf::Output,
            range,
        };
        // Two halves received, then sent on: filled.
        assert!(fills_output(&rs(vec![
            recv(0..2),
            send(0..2),
            recv(2..4),
            send(0..4)
        ])));
        // A send of bytes not yet received, or a byte never written: not.
        assert!(!fills_output(&rs(vec![recv(0..2), send(1..3), recv(2..4)])));
        assert!(!fills_output(&rs(vec![recv(0..3)])));
        // A reduction into the output reads it first.
        let reduce = Step::Reduce {
            dst: Buf::Output,
            dst_range: 0..4,
            src: Buf::Input,
            src_range: 0..4,
            order: Order::DstFirst,
        };
        assert!(!fills_output(&rs(vec![reduce.clone()])));
        assert!(fills_output(&rs(vec![recv(0..4), reduce])));
        // Every real broadcast receiver's schedule fills its output.
        let topo = crate::Topology::uniform(2, 2, 3);
        let mut checked = 0;
        for alg in crate::Algorithm::ALL {
            for flits in [1, 3, 8] {
                let coll = crate::Collective::new(crate::Op::Bcast, 4, 1000);
                let Ok(all) = crate::schedule(&coll, &topo, alg, flits) else {
                    continue;
                };
                for r in all.iter().filter(|r| r.rank != 4) {
                    assert!(fills_output(r), "{alg:?} {flits} flits, rank {}", r.rank);
                    checked += 1;
                }
            }
        }
        assert!(checked >= 4 * 3 * 11, "{checked} schedules checked");
    }

    #[test]
    fn a_broadcast_root_that_keeps_no_output_still_sends_everything() {
        // On random grids, roots, sizes and every algorithm: the root's schedule
        // without output drops only copies, and with it the others still get the
        // root's bytes (the simulator runs it with real data).
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |m: usize| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            (rng % m as u64) as usize
        };
        let mut checked = 0;
        for _ in 0..40 {
            let topo = crate::Topology::uniform(1 + next(3), 1 + next(3), 1 + next(4));
            let p = topo.size();
            let (root, n) = (next(p), 1 + next(5000));
            let coll = crate::Collective::new(crate::Op::Bcast, root, n);
            for alg in crate::Algorithm::ALL {
                let flits = 1 + next(6);
                let Ok(mut all) = crate::schedule(&coll, &topo, alg, flits) else {
                    continue;
                };
                let full = all[root].clone();
                let trimmed = without_output(&full).expect("a root's output is only a copy");
                assert_eq!(trimmed.output_len, 0);
                let kept: Vec<_> = full
                    .steps
                    .iter()
                    .filter(|s| {
                        !matches!(
                            s,
                            Step::Copy {
                                dst: Buf::Output,
                                ..
                            }
                        )
                    })
                    .cloned()
                    .collect();
                assert_eq!(trimmed.steps, kept, "{alg:?}");
                all[root] = trimmed;
                let inputs: Vec<Vec<u8>> = (0..p)
                    .map(|r| {
                        if r == root {
                            (0..n).map(|i| (i * 7 + 3) as u8).collect()
                        } else {
                            Vec::new()
                        }
                    })
                    .collect();
                let report = crate::sim::run(&all, &topo, &inputs, 1, &|a, b, o| {
                    o.copy_from_slice(if a.is_empty() { b } else { a })
                })
                .unwrap_or_else(|e| panic!("{alg:?} {flits} flits root {root}: {e}"));
                for r in (0..p).filter(|&r| r != root) {
                    assert_eq!(report.outputs[r], inputs[root], "{alg:?} rank {r}");
                }
                assert!(report.outputs[root].is_empty());
                checked += 1;
            }
        }
        assert!(checked >= 40, "{checked}");
        // A receiver's output, a reduction's or a gather's is work: not dropped.
        let topo = crate::Topology::uniform(2, 2, 2);
        for (op, r) in [
            (crate::Op::Bcast, 1),
            (crate::Op::Allreduce, 0),
            (crate::Op::Gather, 0),
            (crate::Op::Reduce, 0),
        ] {
            let all = crate::schedule(
                &crate::Collective::new(op, 0, 64),
                &topo,
                crate::Algorithm::Hierarchical,
                1,
            )
            .unwrap();
            assert!(without_output(&all[r]).is_none(), "{op:?} rank {r}");
        }
    }

    #[test]
    fn a_receive_lands_in_place_only_where_nothing_else_touches_its_bytes_first() {
        let s = rs(vec![
            // 0: nothing before it, no other receive into 0..2 of Output.
            recv(Buf::Output, 0..2),
            // 1: a send from Temp 0..2 comes first, so its bytes are still needed.
            send(Buf::Temp(0), 0..2),
            recv(Buf::Temp(0), 1..3),
            // 3: later steps touch its bytes (they wait for it): still in place.
            recv(Buf::Output, 2..4),
            send(Buf::Output, 2..4),
            Step::Copy {
                dst: Buf::Output,
                dst_range: 2..3,
                src: Buf::Output,
                src_range: 0..1,
            },
            // 6 and 7: two receives into the same bytes land in step order.
            recv(Buf::Temp(0), 3..4),
            recv(Buf::Temp(0), 3..4),
        ]);
        let d = direct_receives(&s, 1);
        assert_eq!(
            d,
            vec![true, false, false, true, false, false, false, false]
        );
        // Smaller than the minimum: through the engine's own buffer.
        assert_eq!(direct_receives(&s, 3), vec![false; 8]);
    }

    #[test]
    fn a_send_is_lent_only_if_nothing_later_writes_its_bytes() {
        let s = rs(vec![
            // 0: the input is never written.
            send(Buf::Input, 0..4),
            // 1: a later receive writes 1..2 of Temp 0.
            send(Buf::Temp(0), 0..2),
            recv(Buf::Temp(0), 1..3),
            // 3: a later copy writes Output 3..4; a copy from it (5) only reads.
            send(Buf::Output, 2..4),
            send(Buf::Output, 0..2),
            Step::Copy {
                dst: Buf::Output,
                dst_range: 3..4,
                src: Buf::Output,
                src_range: 0..1,
            },
            // 6: writes before it do not matter.
            send(Buf::Temp(0), 0..4),
        ]);
        assert_eq!(
            lendable_sends(&s, 1),
            vec![true, false, false, false, true, false, true]
        );
        assert_eq!(
            lendable_sends(&s, 3),
            vec![true, false, false, false, false, false, true]
        );
    }

    /// A receive from rank 1 into `buf[range]`.
    fn recv(buf: Buf, range: Range<usize>) -> Step {
        Step::Recv {
            from: 1,
            tag: 0,
            buf,
            range,
        }
    }

    /// A send of `buf[range]` to rank 2.
    fn send(buf: Buf, range: Range<usize>) -> Step {
        Step::Send {
            to: 2,
            tag: 0,
            buf,
            range,
        }
    }

    fn rs(steps: Vec<Step>) -> RankSchedule {
        RankSchedule {
            rank: 0,
            input_len: 4,
            output_len: 4,
            temps: vec![4],
            steps,
        }
    }

    #[test]
    fn a_step_that_needs_a_message_starts_a_round() {
        let s = rs(vec![
            Step::Recv {
                from: 1,
                tag: 0,
                buf: Buf::Temp(0),
                range: 0..2,
            },
            Step::Send {
                to: 2,
                tag: 0,
                buf: Buf::Input,
                range: 0..4,
            },
            Step::Copy {
                dst: Buf::Output,
                dst_range: 2..4,
                src: Buf::Temp(0),
                src_range: 2..4,
            },
            Step::Send {
                to: 2,
                tag: 1,
                buf: Buf::Temp(0),
                range: 1..3,
            },
            Step::Recv {
                from: 1,
                tag: 1,
                buf: Buf::Output,
                range: 0..2,
            },
        ]);
        assert_eq!(rounds(&s), vec![0..3, 3..5]);
    }

    #[test]
    fn local_steps_copy_and_combine_in_either_order() {
        let s = rs(Vec::new());
        let mut b = Buffers::new(&s, Cow::Borrowed(&[1, 2, 3, 4]));
        let copy = Step::Copy {
            dst: Buf::Output,
            dst_range: 0..4,
            src: Buf::Input,
            src_range: 0..4,
        };
        local(&mut b, &copy, None).unwrap();
        let sub = |d: &mut [u8], s: &[u8], o: Order| {
            for (x, y) in d.iter_mut().zip(s) {
                *x = match o {
                    Order::DstFirst => x.wrapping_sub(*y),
                    Order::SrcFirst => y.wrapping_sub(*x),
                };
            }
        };
        let red = |order| Step::Reduce {
            dst: Buf::Output,
            dst_range: 0..2,
            src: Buf::Output,
            src_range: 2..4,
            order,
        };
        local(&mut b, &red(Order::DstFirst), Some(&sub)).unwrap();
        assert_eq!(b.get(Buf::Output).unwrap(), &[254, 254, 3, 4]);
        local(&mut b, &red(Order::SrcFirst), Some(&sub)).unwrap();
        assert_eq!(b.get(Buf::Output).unwrap(), &[5, 6, 3, 4]);
        let bad = Step::Copy {
            dst: Buf::Input,
            dst_range: 0..1,
            src: Buf::Output,
            src_range: 0..1,
        };
        assert_eq!(local(&mut b, &bad, None), Err("writes to the input"));
        assert_eq!(
            local(&mut b, &red(Order::DstFirst), None),
            Err("a reduction without an operation")
        );
    }
}
