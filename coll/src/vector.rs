//! Schedules of the collectives whose blocks differ per rank (MPI's v- and
//! w-variants) and of the scans: direct (linear) exchanges and a chain, as plain
//! step lists that any executor of [`crate::exec`] runs. Every rank must build its
//! part from the same counts. Blocks sit packed in rank order in `Input` and
//! `Output`; every (sender, receiver) pair exchanges at most one message, tag 0, and
//! all of a rank's sends and receives fall in one round.

use crate::step::{Buf, Order, RankSchedule, Step};
use std::ops::Range;

/// Offsets of packed blocks of `sizes` bytes.
fn offsets(sizes: &[usize]) -> Vec<Range<usize>> {
    let mut at = 0;
    sizes
        .iter()
        .map(|&n| {
            at += n;
            at - n..at
        })
        .collect()
}

fn recv(from: usize, buf: Buf, range: Range<usize>) -> Step {
    Step::Recv {
        from,
        tag: 0,
        buf,
        range,
    }
}

fn send(to: usize, buf: Buf, range: Range<usize>) -> Step {
    Step::Send {
        to,
        tag: 0,
        buf,
        range,
    }
}

fn copy(dst: Buf, dst_range: Range<usize>, src: Buf, src_range: Range<usize>) -> Step {
    Step::Copy {
        dst,
        dst_range,
        src,
        src_range,
    }
}

/// Block exchange: rank `me` sends `send[q]` bytes (packed in rank order in
/// `Input`) to every rank q and receives `recv[q]` bytes from each (packed in rank
/// order in `Output`); a rank's block to itself is copied. `send[q]` on this rank
/// must equal `recv[me]` on rank q. Gatherv, scatterv, allgatherv, alltoallv and
/// alltoallw are all this with some sizes zero (a zero-byte block is no message
/// where `skip_empty`, which every rank must agree on).
pub fn exchange(
    me: usize,
    send_sizes: &[usize],
    recv_sizes: &[usize],
    skip_empty: bool,
) -> RankSchedule {
    let (so, ro) = (offsets(send_sizes), offsets(recv_sizes));
    let mut steps = Vec::new();
    let p = send_sizes.len();
    if send_sizes[me] > 0 {
        steps.push(copy(
            Buf::Output,
            ro[me].clone(),
            Buf::Input,
            so[me].clone(),
        ));
    }
    for i in 1..p {
        // Start with the next rank, so that not everyone sends to rank 0 first.
        let q = (me + i) % p;
        if !(skip_empty && send_sizes[q] == 0) {
            steps.push(send(q, Buf::Input, so[q].clone()));
        }
    }
    for q in (0..p).filter(|&q| q != me) {
        if !(skip_empty && recv_sizes[q] == 0) {
            steps.push(recv(q, Buf::Output, ro[q].clone()));
        }
    }
    RankSchedule {
        rank: me,
        input_len: send_sizes.iter().sum(),
        output_len: recv_sizes.iter().sum(),
        temps: Vec::new(),
        steps,
    }
}

/// A prefix reduction of `bytes` bytes along the chain 0 → 1 → … → P−1: rank r's
/// `Output` gets `x_0 ∘ … ∘ x_r` (`inclusive`) or `x_0 ∘ … ∘ x_{r−1}` (rank 0's
/// output stays zero), in rank order whether or not the operation commutes.
pub fn scan(me: usize, p: usize, bytes: usize, inclusive: bool) -> RankSchedule {
    let mut rs = RankSchedule {
        rank: me,
        input_len: bytes,
        output_len: bytes,
        temps: Vec::new(),
        steps: Vec::new(),
    };
    let all = 0..bytes;
    let last = me + 1 == p;
    if inclusive {
        rs.steps
            .push(copy(Buf::Output, all.clone(), Buf::Input, all.clone()));
        if me > 0 {
            rs.temps.push(bytes);
            rs.steps.push(recv(me - 1, Buf::Temp(0), all.clone()));
            rs.steps.push(Step::Reduce {
                dst: Buf::Output,
                dst_range: all.clone(),
                src: Buf::Temp(0),
                src_range: all.clone(),
                order: Order::SrcFirst,
            });
        }
        if !last {
            rs.steps.push(send(me + 1, Buf::Output, all));
        }
        return rs;
    }
    if me == 0 {
        if !last {
            rs.steps.push(send(1, Buf::Input, all));
        }
        return rs;
    }
    rs.steps.push(recv(me - 1, Buf::Output, all.clone()));
    if !last {
        rs.temps.push(bytes);
        rs.steps
            .push(copy(Buf::Temp(0), all.clone(), Buf::Input, all.clone()));
        rs.steps.push(Step::Reduce {
            dst: Buf::Temp(0),
            dst_range: all.clone(),
            src: Buf::Output,
            src_range: all.clone(),
            order: Order::SrcFirst,
        });
        rs.steps.push(send(me + 1, Buf::Temp(0), all));
    }
    rs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{sim, Topology};

    #[test]
    fn exchanges_of_uneven_blocks_deliver_every_block() {
        let p = 5;
        // size[i][j]: bytes rank i sends to rank j.
        let size = |i: usize, j: usize| (i * 7 + j * 3) % 4 * (1 + (i + j) % 3);
        let topo = Topology::uniform(1, 1, p);
        for skip in [false, true] {
            let ranks: Vec<_> = (0..p)
                .map(|me| {
                    let s: Vec<_> = (0..p).map(|j| size(me, j)).collect();
                    let r: Vec<_> = (0..p).map(|i| size(i, me)).collect();
                    exchange(me, &s, &r, skip)
                })
                .collect();
            let inputs: Vec<Vec<u8>> = (0..p)
                .map(|i| {
                    (0..p)
                        .flat_map(|j| vec![(i * 10 + j) as u8; size(i, j)])
                        .collect()
                })
                .collect();
            let rep = sim::run(&ranks, &topo, &inputs, 1, &|_, _, _| {}).unwrap();
            for (me, out) in rep.outputs.iter().enumerate() {
                let want: Vec<u8> = (0..p)
                    .flat_map(|i| vec![(i * 10 + me) as u8; size(i, me)])
                    .collect();
                assert_eq!(out, &want, "rank {me}");
            }
        }
    }

    #[test]
    fn scans_combine_in_rank_order() {
        let p = 4;
        let topo = Topology::uniform(2, 1, 2);
        // a ∘ b = 3a + b: not commutative, so the order shows.
        let f = |a: &[u8], b: &[u8], o: &mut [u8]| o[0] = a[0].wrapping_mul(3).wrapping_add(b[0]);
        let inputs: Vec<Vec<u8>> = (0..p).map(|r| vec![r as u8 + 1]).collect();
        for inclusive in [true, false] {
            let ranks: Vec<_> = (0..p).map(|me| scan(me, p, 1, inclusive)).collect();
            let rep = sim::run(&ranks, &topo, &inputs, 1, &f).unwrap();
            let mut acc: Option<u8> = None;
            for (r, out) in rep.outputs.iter().enumerate() {
                let x = r as u8 + 1;
                let incl = acc.map_or(x, |a| a.wrapping_mul(3).wrapping_add(x));
                let want = if inclusive { incl } else { acc.unwrap_or(0) };
                assert_eq!(out[0], want, "rank {r} inclusive {inclusive}");
                acc = Some(incl);
            }
        }
    }
}
