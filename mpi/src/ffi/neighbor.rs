//! The blocking neighbourhood collectives (MPI 3.1 §7.6) over a communicator's
//! Cartesian, graph or distributed-graph topology ([`crate::topo::Plan`] says who
//! sends which block to whom, in MPI's slot order). Each one packs its send
//! blocks and describes its receive [`Slot`]s, then [`exchange`]s them on the
//! communicator's twin (which user messages never reach).
//!
//! The exchange starts every send, then takes each block with the engine's timed
//! receive, then waits for the sends. Posting the receives first as requests and
//! polling them (the shape of the non-blocking forms) measured 10–30 times slower
//! here: libqcg has no timed wait on a request, and polling with
//! `progress_until` keeps the engine spinning on a loaded machine. The timed
//! receive keeps what the other collectives of this layer promise: a neighbour
//! that never calls (calls that do not match) is named after the collective
//! timeout rather than waited for forever. The non-blocking forms can reuse the
//! plan, the packing and the slots, and post `irecv`s for `plan.recv`.
#![allow(unsafe_code)]
#![allow(clippy::missing_safety_doc)]
#![allow(clippy::too_many_arguments)]

use super::coll::{ctx, Ctx};
use super::topo::topo_of;
use super::{call, in_bytes, ints, write_packed};
use crate::error::{Class, MpiError};
use crate::state::{self, count};
use crate::topo::Plan;
use crate::types::TypeInfo;
use libc::{c_int, c_void};
use std::sync::Arc;

/// The first tag of the neighbourhood collectives on the twin communicator (one
/// per Cartesian slot above it), far from the other collectives' tags.
const TAG_NEIGHBOR: u32 = 0x4e00_0000;

/// Where one received block goes: `n` elements of `t` at `buf`.
pub(super) struct Slot {
    buf: *mut c_void,
    n: usize,
    t: Arc<TypeInfo>,
}

/// Communicator `comm` and its topology's plan for this process
/// (`MPI_ERR_TOPOLOGY` without one).
pub(super) fn plan_of(comm: c_int) -> Result<(Ctx, Plan), MpiError> {
    let c = ctx(comm)?;
    let p = topo_of(comm)?.plan(c.me);
    Ok((c, p))
}

fn ty(h: c_int) -> Result<Arc<TypeInfo>, MpiError> {
    state::with(|s| s.ty(h))
}

/// `buf` moved by `bytes`.
fn off(buf: *const c_void, bytes: isize) -> *mut c_void {
    (buf as *mut u8).wrapping_offset(bytes).cast()
}

/// Receive slots of `k` elements of `t` each, one after the other.
pub(super) fn even_slots(buf: *mut c_void, k: usize, t: &Arc<TypeInfo>, n: usize) -> Vec<Slot> {
    (0..n)
        .map(|i| Slot {
            buf: off(buf, (i * k) as isize * t.extent),
            n: k,
            t: t.clone(),
        })
        .collect()
}

/// Receive slots of `counts[i]` elements of `t` at `displs[i]` elements.
pub(super) unsafe fn v_slots(
    buf: *mut c_void,
    counts: *const c_int,
    displs: *const c_int,
    t: &Arc<TypeInfo>,
    n: usize,
) -> Result<Vec<Slot>, MpiError> {
    // SAFETY: two arrays of `n` ints.
    let (k, d) = unsafe { (ints(counts, n, "recvcounts")?, ints(displs, n, "displs")?) };
    k.iter()
        .zip(d)
        .map(|(&k, &d)| {
            Ok(Slot {
                buf: off(buf, d as isize * t.extent),
                n: count(k)?,
                t: t.clone(),
            })
        })
        .collect()
}

/// Runs a neighbourhood collective: `blocks[j]` to send slot `j`'s neighbour,
/// receive slot `i` filled from its neighbour (each block checked for its size);
/// waits at most the collective timeout for each block.
unsafe fn exchange(
    name: &str,
    c: &Ctx,
    plan: &Plan,
    blocks: Vec<Vec<u8>>,
    slots: &[Slot],
) -> Result<(), MpiError> {
    let mut sends = Vec::new();
    for (e, b) in plan.send.iter().zip(blocks) {
        if let Some(q) = e.peer {
            sends.push(c.twin.isend(q, TAG_NEIGHBOR + e.tag, b)?);
        }
    }
    let t = c.comm.coll_options().timeout;
    for (e, s) in plan.recv.iter().zip(slots) {
        let Some(q) = e.peer else { continue };
        let data = match c.twin.recv_timeout(Some(q), Some(TAG_NEIGHBOR + e.tag), t) {
            Ok(m) => m.data,
            Err(qcg::Error::Timeout { .. }) => {
                return Err(MpiError::new(
                    Class::Other,
                    format!(
                        "{name}: neighbour {q} sent nothing in {:.0} s (calls that do not match across ranks, or a dead rank)",
                        t.as_secs_f64()
                    ),
                ))
            }
            Err(e) => return Err(e.into()),
        };
        let want = s.n * s.t.size;
        if data.len() != want {
            return Err(MpiError::new(
                if data.len() > want {
                    Class::Truncate
                } else {
                    Class::Count
                },
                format!(
                    "{name}: rank {q} sent {} bytes where this rank (rank {}) expects {want}: the counts do not match",
                    data.len(),
                    c.me
                ),
            ));
        }
        // SAFETY: the caller's buffer of `n` elements of `t`.
        unsafe { write_packed(s.buf, s.n, &s.t, &data)? };
    }
    // Every neighbour has sent its blocks, so it is taking ours: small sends are
    // done already, large ones finish as the neighbours receive them.
    qcg::wait_all(sends)?;
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Neighbor_allgather(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: c_int,
    comm: c_int,
) -> c_int {
    call("MPI_Neighbor_allgather", comm, || {
        let (c, plan) = plan_of(comm)?;
        let (st, rt) = (ty(sendtype)?, ty(recvtype)?);
        // SAFETY: the caller's buffers.
        unsafe {
            let mine = in_bytes(sendbuf, count(sendcount)?, &st)?.into_owned();
            let blocks = vec![mine; plan.send.len()];
            let slots = even_slots(recvbuf, count(recvcount)?, &rt, plan.recv.len());
            exchange("MPI_Neighbor_allgather", &c, &plan, blocks, &slots)
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Neighbor_allgatherv(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    displs: *const c_int,
    recvtype: c_int,
    comm: c_int,
) -> c_int {
    call("MPI_Neighbor_allgatherv", comm, || {
        let (c, plan) = plan_of(comm)?;
        let (st, rt) = (ty(sendtype)?, ty(recvtype)?);
        // SAFETY: the caller's buffers and arrays.
        unsafe {
            let mine = in_bytes(sendbuf, count(sendcount)?, &st)?.into_owned();
            let blocks = vec![mine; plan.send.len()];
            let slots = v_slots(recvbuf, recvcounts, displs, &rt, plan.recv.len())?;
            exchange("MPI_Neighbor_allgatherv", &c, &plan, blocks, &slots)
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Neighbor_alltoall(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: c_int,
    comm: c_int,
) -> c_int {
    call("MPI_Neighbor_alltoall", comm, || {
        let (c, plan) = plan_of(comm)?;
        let (st, rt) = (ty(sendtype)?, ty(recvtype)?);
        let sn = count(sendcount)?;
        // SAFETY: the caller's buffers.
        unsafe {
            let blocks = (0..plan.send.len())
                .map(|j| {
                    in_bytes(off(sendbuf, (j * sn) as isize * st.extent), sn, &st)
                        .map(|b| b.into_owned())
                })
                .collect::<Result<Vec<_>, _>>()?;
            let slots = even_slots(recvbuf, count(recvcount)?, &rt, plan.recv.len());
            exchange("MPI_Neighbor_alltoall", &c, &plan, blocks, &slots)
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Neighbor_alltoallv(
    sendbuf: *const c_void,
    sendcounts: *const c_int,
    sdispls: *const c_int,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    rdispls: *const c_int,
    recvtype: c_int,
    comm: c_int,
) -> c_int {
    call("MPI_Neighbor_alltoallv", comm, || {
        let (c, plan) = plan_of(comm)?;
        let (st, rt) = (ty(sendtype)?, ty(recvtype)?);
        let ns = plan.send.len();
        // SAFETY: the caller's buffers and arrays.
        unsafe {
            let (k, d) = (
                ints(sendcounts, ns, "sendcounts")?,
                ints(sdispls, ns, "sdispls")?,
            );
            let blocks = k
                .iter()
                .zip(d)
                .map(|(&k, &d)| {
                    in_bytes(off(sendbuf, d as isize * st.extent), count(k)?, &st)
                        .map(|b| b.into_owned())
                })
                .collect::<Result<Vec<_>, _>>()?;
            let slots = v_slots(recvbuf, recvcounts, rdispls, &rt, plan.recv.len())?;
            exchange("MPI_Neighbor_alltoallv", &c, &plan, blocks, &slots)
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Neighbor_alltoallw(
    sendbuf: *const c_void,
    sendcounts: *const c_int,
    sdispls: *const isize,
    sendtypes: *const c_int,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    rdispls: *const isize,
    recvtypes: *const c_int,
    comm: c_int,
) -> c_int {
    call("MPI_Neighbor_alltoallw", comm, || {
        let (c, plan) = plan_of(comm)?;
        let (ns, nr) = (plan.send.len(), plan.recv.len());
        let aints = |p: *const isize, n: usize, what: &str| -> Result<&[isize], MpiError> {
            if n == 0 {
                return Ok(&[]);
            }
            if p.is_null() {
                return Err(MpiError::new(Class::Arg, format!("{what} is NULL")));
            }
            // SAFETY: an array of `n` MPI_Aint.
            Ok(unsafe { std::slice::from_raw_parts(p, n) })
        };
        // SAFETY: the caller's buffers and arrays.
        unsafe {
            let sk = ints(sendcounts, ns, "sendcounts")?;
            let sd = aints(sdispls, ns, "sdispls")?;
            let stypes = ints(sendtypes, ns, "sendtypes")?;
            let mut blocks = Vec::with_capacity(ns);
            for j in 0..ns {
                let t = ty(stypes[j])?;
                blocks.push(in_bytes(off(sendbuf, sd[j]), count(sk[j])?, &t)?.into_owned());
            }
            let rk = ints(recvcounts, nr, "recvcounts")?;
            let rd = aints(rdispls, nr, "rdispls")?;
            let rtypes = ints(recvtypes, nr, "recvtypes")?;
            let slots = (0..nr)
                .map(|i| {
                    Ok(Slot {
                        buf: off(recvbuf, rd[i]),
                        n: count(rk[i])?,
                        t: ty(rtypes[i])?,
                    })
                })
                .collect::<Result<Vec<_>, MpiError>>()?;
            exchange("MPI_Neighbor_alltoallw", &c, &plan, blocks, &slots)
        }
    })
}
