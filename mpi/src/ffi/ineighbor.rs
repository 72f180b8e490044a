//! The non-blocking neighbourhood collectives (`MPI_Ineighbor_*`, MPI 3.1 §7.7):
//! the blocks of a neighbourhood collective ([`crate::topo::Plan`]) as one direct
//! exchange schedule ([`qcg_coll::vector::exchange`]) that the engine advances on
//! its own, as the other non-blocking collectives do.
//!
//! The exchange carries one message per pair of processes: the blocks between two
//! processes travel together, in (tag, slot) order on both sides, which pairs them
//! as the blocking forms' tags do (a Cartesian dimension of size 1 or 2 has the
//! same process on both sides; a graph may list an edge twice).
#![allow(unsafe_code)]
#![allow(clippy::missing_safety_doc)]
#![allow(clippy::too_many_arguments)]

use super::coll::{at, ty, Ctx};
use super::nbc::{register, Block};
use super::neighbor::plan_of;
use crate::error::{Class, MpiError};
use crate::ffi::{call, in_bytes, ints, write_packed};
use crate::state::{count, Finish};
use crate::topo::{Edge, Plan};
use libc::{c_int, c_void};
use qcg_coll::{vector, Collective, Op};

/// For each process, the slots of `edges` that go to (or come from) it, in (tag,
/// slot) order.
fn per_peer(edges: &[Edge], p: usize) -> Vec<Vec<usize>> {
    let mut per = vec![Vec::new(); p];
    for (i, e) in edges.iter().enumerate() {
        if let Some(q) = e.peer.filter(|&q| (q as usize) < p) {
            per[q as usize].push(i);
        }
    }
    for v in &mut per {
        v.sort_by_key(|&i| (edges[i].tag, i));
    }
    per
}

/// Starts the exchange of `sends[j]` to `plan.send[j]` and `recvs[i]` from
/// `plan.recv[i]`; the completion writes every received block in place.
unsafe fn start(
    c: &Ctx,
    comm: c_int,
    plan: &Plan,
    sends: Vec<Block>,
    recvs: Vec<Block>,
    request: *mut c_int,
) -> Result<(), MpiError> {
    let (so, ro) = (per_peer(&plan.send, c.p), per_peer(&plan.recv, c.p));
    let size = |blocks: &[Block], order: &[Vec<usize>]| -> Vec<usize> {
        order
            .iter()
            .map(|v| v.iter().map(|&i| blocks[i].bytes()).sum())
            .collect()
    };
    let (send_sizes, recv_sizes) = (size(&sends, &so), size(&recvs, &ro));
    let mut input = Vec::with_capacity(send_sizes.iter().sum());
    for &j in so.iter().flatten() {
        let b = &sends[j];
        // SAFETY: the caller's send block.
        input.extend_from_slice(&unsafe { in_bytes(b.at as *const c_void, b.n, &b.t)? });
    }
    let sched = vector::exchange(c.me as usize, &send_sizes, &recv_sizes, true);
    let req = c
        .comm
        .start_schedule(sched, Collective::new(Op::Alltoall, 0, 0), input, None)?;
    let mut slots: Vec<Option<Block>> = recvs.into_iter().map(Some).collect();
    let ordered: Vec<Block> = ro
        .iter()
        .flatten()
        .filter_map(|&i| slots[i].take())
        .collect();
    let finish: Finish = Box::new(move |out: &[u8]| {
        let mut off = 0;
        for b in &ordered {
            let k = b.bytes();
            let Some(bytes) = out.get(off..off + k) else {
                return Err(MpiError::new(
                    Class::Intern,
                    "a neighbourhood exchange gave fewer bytes than its blocks hold",
                ));
            };
            // SAFETY: the caller's receive block, valid until the request completes.
            unsafe { write_packed(b.at as *mut c_void, b.n, &b.t, bytes)? };
            off += k;
        }
        Ok(())
    });
    // SAFETY: the caller's request handle.
    unsafe { register(comm, Some(req), Some(finish), request) }
}

/// `n` blocks of `k` elements of `t`, one after the other from `buf`.
fn even(
    buf: *const c_void,
    k: usize,
    t: &std::sync::Arc<crate::types::TypeInfo>,
    n: usize,
) -> Vec<Block> {
    (0..n)
        .map(|i| Block::new(at(buf, i * k, t), k, t.clone()))
        .collect()
}

/// Blocks of `counts[i]` elements of `t` at `displs[i]` elements from `buf`.
unsafe fn v_blocks(
    buf: *const c_void,
    counts: *const c_int,
    displs: *const c_int,
    t: &std::sync::Arc<crate::types::TypeInfo>,
    n: usize,
) -> Result<Vec<Block>, MpiError> {
    // SAFETY: two arrays of `n` ints.
    let (k, d) = unsafe {
        (
            ints(counts, n, "the counts")?,
            ints(displs, n, "the displacements")?,
        )
    };
    k.iter()
        .zip(d)
        .map(|(&k, &d)| {
            let d = usize::try_from(d)
                .map_err(|_| MpiError::new(Class::Arg, format!("displacement {d} is negative")))?;
            Ok(Block::new(at(buf, d, t), count(k)?, t.clone()))
        })
        .collect()
}

/// Blocks of `counts[i]` elements of `types[i]` at `displs[i]` bytes from `buf`.
unsafe fn w_blocks(
    buf: *const c_void,
    counts: *const c_int,
    displs: *const isize,
    types_: *const c_int,
    n: usize,
) -> Result<Vec<Block>, MpiError> {
    if n > 0 && displs.is_null() {
        return Err(MpiError::new(Class::Arg, "the displacements are NULL"));
    }
    // SAFETY: arrays of `n` ints, MPI_Aints and handles.
    let (k, d, t) = unsafe {
        (
            ints(counts, n, "the counts")?,
            if n == 0 {
                &[][..]
            } else {
                std::slice::from_raw_parts(displs, n)
            },
            ints(types_, n, "the types")?,
        )
    };
    (0..n)
        .map(|i| {
            let base = (buf as *const u8).wrapping_offset(d[i]).cast();
            Ok(Block::new(base, count(k[i])?, ty(t[i])?))
        })
        .collect()
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Ineighbor_allgather(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: c_int,
    comm: c_int,
    request: *mut c_int,
) -> c_int {
    call("MPI_Ineighbor_allgather", comm, || {
        let (c, plan) = plan_of(comm)?;
        let (st, rt) = (ty(sendtype)?, ty(recvtype)?);
        let (sk, rk) = (count(sendcount)?, count(recvcount)?);
        let sends = (0..plan.send.len())
            .map(|_| Block::new(sendbuf, sk, st.clone()))
            .collect();
        let recvs = even(recvbuf, rk, &rt, plan.recv.len());
        // SAFETY: the caller's buffers and request.
        unsafe { start(&c, comm, &plan, sends, recvs, request) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Ineighbor_allgatherv(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    displs: *const c_int,
    recvtype: c_int,
    comm: c_int,
    request: *mut c_int,
) -> c_int {
    call("MPI_Ineighbor_allgatherv", comm, || {
        let (c, plan) = plan_of(comm)?;
        let (st, rt) = (ty(sendtype)?, ty(recvtype)?);
        let sk = count(sendcount)?;
        let sends = (0..plan.send.len())
            .map(|_| Block::new(sendbuf, sk, st.clone()))
            .collect();
        // SAFETY: the caller's arrays, buffers and request.
        unsafe {
            let recvs = v_blocks(recvbuf, recvcounts, displs, &rt, plan.recv.len())?;
            start(&c, comm, &plan, sends, recvs, request)
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Ineighbor_alltoall(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: c_int,
    comm: c_int,
    request: *mut c_int,
) -> c_int {
    call("MPI_Ineighbor_alltoall", comm, || {
        let (c, plan) = plan_of(comm)?;
        let (st, rt) = (ty(sendtype)?, ty(recvtype)?);
        let sends = even(sendbuf, count(sendcount)?, &st, plan.send.len());
        let recvs = even(recvbuf, count(recvcount)?, &rt, plan.recv.len());
        // SAFETY: the caller's buffers and request.
        unsafe { start(&c, comm, &plan, sends, recvs, request) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Ineighbor_alltoallv(
    sendbuf: *const c_void,
    sendcounts: *const c_int,
    sdispls: *const c_int,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    rdispls: *const c_int,
    recvtype: c_int,
    comm: c_int,
    request: *mut c_int,
) -> c_int {
    call("MPI_Ineighbor_alltoallv", comm, || {
        let (c, plan) = plan_of(comm)?;
        let (st, rt) = (ty(sendtype)?, ty(recvtype)?);
        // SAFETY: the caller's arrays, buffers and request.
        unsafe {
            let sends = v_blocks(sendbuf, sendcounts, sdispls, &st, plan.send.len())?;
            let recvs = v_blocks(recvbuf, recvcounts, rdispls, &rt, plan.recv.len())?;
            start(&c, comm, &plan, sends, recvs, request)
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Ineighbor_alltoallw(
    sendbuf: *const c_void,
    sendcounts: *const c_int,
    sdispls: *const isize,
    sendtypes: *const c_int,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    rdispls: *const isize,
    recvtypes: *const c_int,
    comm: c_int,
    request: *mut c_int,
) -> c_int {
    call("MPI_Ineighbor_alltoallw", comm, || {
        let (c, plan) = plan_of(comm)?;
        // SAFETY: the caller's arrays, buffers and request.
        unsafe {
            let sends = w_blocks(sendbuf, sendcounts, sdispls, sendtypes, plan.send.len())?;
            let recvs = w_blocks(recvbuf, recvcounts, rdispls, recvtypes, plan.recv.len())?;
            start(&c, comm, &plan, sends, recvs, request)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_to_one_peer_go_in_tag_then_slot_order() {
        let e = |peer, tag| Edge { peer, tag };
        // A periodic dimension of 2: both neighbours are rank 1, tags 1 (-1) and 0 (+1).
        let edges = [
            e(Some(1), 1),
            e(Some(1), 0),
            e(None, 0),
            e(Some(0), 0),
            e(Some(1), 0),
        ];
        let per = per_peer(&edges, 2);
        assert_eq!(per[0], vec![3]);
        assert_eq!(per[1], vec![1, 4, 0]);
    }
}
