//! The blocking neighbourhood collectives (MPI 3.1 §7.6) over a communicator's
//! Cartesian, graph or distributed-graph topology ([`crate::topo::Plan`] says who
//! sends which block to whom). Each one packs its blocks, [`post`]s every receive
//! and then every send on the communicator's twin (which user messages never
//! reach), and [`finish`]es by waiting for them all and unpacking each block into
//! its slot: the non-blocking forms can run the same two steps apart.
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
use std::time::{Duration, Instant};

/// The first tag of the neighbourhood collectives on the twin communicator (one
/// per Cartesian slot above it), far from the other collectives' tags.
const TAG_NEIGHBOR: u32 = 0x4e00_0000;

/// Where one received block goes: `n` elements of `t` at `buf`.
pub(super) struct Slot {
    buf: *mut c_void,
    n: usize,
    t: Arc<TypeInfo>,
}

/// A neighbourhood collective under way: its receives and sends posted.
pub(super) struct Posted {
    recvs: Vec<(usize, u32, qcg::Request)>,
    sends: Vec<(u32, qcg::Request)>,
}

/// Communicator `comm` and its topology's plan for this process
/// (`MPI_ERR_TOPOLOGY` without one).
pub(super) fn plan_of(comm: c_int) -> Result<(Ctx, Plan), MpiError> {
    let c = ctx(comm)?;
    let p = topo_of(comm)?.plan(c.me);
    Ok((c, p))
}

/// Posts every receive of `plan`, then every send (`blocks[j]` to send slot `j`).
pub(super) fn post(c: &Ctx, plan: &Plan, blocks: Vec<Vec<u8>>) -> Result<Posted, MpiError> {
    let mut recvs = Vec::new();
    for (i, e) in plan.recv.iter().enumerate() {
        if let Some(q) = e.peer {
            recvs.push((i, q, c.twin.irecv(Some(q), Some(TAG_NEIGHBOR + e.tag))?));
        }
    }
    let mut sends = Vec::new();
    for (e, b) in plan.send.iter().zip(blocks) {
        if let Some(q) = e.peer {
            sends.push((q, c.twin.isend(q, TAG_NEIGHBOR + e.tag, b)?));
        }
    }
    Ok(Posted { recvs, sends })
}

/// Waits for everything posted, at most the collective timeout in all, and
/// writes each received block to its slot (checked for its size).
pub(super) unsafe fn finish(
    name: &str,
    c: &Ctx,
    posted: Posted,
    slots: &[Slot],
) -> Result<(), MpiError> {
    let t = c.comm.coll_options().timeout;
    let deadline = Instant::now() + t;
    let Posted { recvs, sends } = posted;
    let mut recvs: Vec<Option<(usize, u32, qcg::Request)>> = recvs.into_iter().map(Some).collect();
    let mut sends: Vec<Option<(u32, qcg::Request)>> = sends.into_iter().map(Some).collect();
    loop {
        for r in recvs.iter_mut() {
            let Some((i, q, req)) = r else { continue };
            if let Some(done) = req.test()? {
                let (i, q) = (*i, *q);
                *r = None;
                let data = done.into_message().map(|m| m.data).unwrap_or_default();
                let s = &slots[i];
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
        }
        for s in sends.iter_mut() {
            let Some((_, req)) = s else { continue };
            if req.test()?.is_some() {
                *s = None;
            }
        }
        let waiting = recvs
            .iter()
            .flatten()
            .map(|(_, q, _)| *q)
            .chain(sends.iter().flatten().map(|(q, _)| *q))
            .next();
        let Some(q) = waiting else { return Ok(()) };
        let now = Instant::now();
        if now >= deadline {
            return Err(MpiError::new(
                Class::Other,
                format!(
                    "{name}: neighbour {q} did not exchange its block in {:.0} s (calls that do not match across ranks, or a dead rank)",
                    t.as_secs_f64()
                ),
            ));
        }
        c.twin
            .progress_until((now + Duration::from_millis(1)).min(deadline));
    }
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

/// Runs a neighbourhood collective: `blocks` to the send slots, `slots` filled.
unsafe fn run(
    name: &str,
    c: &Ctx,
    plan: &Plan,
    blocks: Vec<Vec<u8>>,
    slots: &[Slot],
) -> Result<(), MpiError> {
    let posted = post(c, plan, blocks)?;
    // SAFETY: the caller's receive slots.
    unsafe { finish(name, c, posted, slots) }
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Neighbor_allgather(
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
            run("MPI_Neighbor_allgather", &c, &plan, blocks, &slots)
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Neighbor_allgatherv(
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
            run("MPI_Neighbor_allgatherv", &c, &plan, blocks, &slots)
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Neighbor_alltoall(
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
            run("MPI_Neighbor_alltoall", &c, &plan, blocks, &slots)
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Neighbor_alltoallv(
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
            run("MPI_Neighbor_alltoallv", &c, &plan, blocks, &slots)
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Neighbor_alltoallw(
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
            run("MPI_Neighbor_alltoallw", &c, &plan, blocks, &slots)
        }
    })
}
