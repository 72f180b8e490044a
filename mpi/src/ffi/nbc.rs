//! The C ABI of the non-blocking collectives (MPI 3.1 §5.12), `MPI_Alltoallw`,
//! `MPI_Reduce_local` and `MPI_Op_commutative`.
//!
//! Every `MPI_I*` call starts a schedule on libqcg's engine ([`qcg::nbc`]), which
//! advances it on its own while the program computes; the request completes
//! through the usual table (`MPI_Wait`, `MPI_Test`, …), whose completion step
//! writes the output into the caller's buffers. Equal-block collectives run the same
//! hierarchical schedules as the blocking calls; the v- and w-variants run a direct
//! exchange and the scans a chain ([`qcg_coll::vector`]), on the same executor.
#![allow(unsafe_code)]
#![allow(clippy::missing_safety_doc)]
#![allow(clippy::too_many_arguments)]

use super::coll::{
    at, at_mut, combiner, counts_displs, ctx, in_place, reduce_input, ty, Combine, Ctx,
};
use crate::agree;
use crate::error::{Class, MpiError};
use crate::ffi::{call, in_bytes, ints, put, write_packed};
use crate::state::{self, count, root, Finish, Meta, OpKind, Req};
use crate::types::{self, TypeInfo};
use libc::{c_int, c_void};
use qcg_coll::{vector, Collective, Op};
use std::sync::Arc;

/// Registers `inner` (or, for `None`, a request complete at once) as `*request`.
pub(super) unsafe fn register(
    comm: c_int,
    inner: Option<qcg::Request>,
    finish: Option<Finish>,
    request: *mut c_int,
) -> Result<(), MpiError> {
    let meta = match (&inner, finish) {
        (None, _) => Meta::Null,
        (Some(_), Some(f)) => Meta::Finish(f),
        (Some(_), None) => Meta::Plain,
    };
    let h = state::with(|s| {
        Ok(s.add_request(Req {
            inner,
            meta,
            cancelled: false,
            comm,
        }))
    })?;
    // SAFETY: the caller's request handle.
    unsafe { put(request, h) }
}

/// Whether `comm` is an intercommunicator.
fn is_inter(comm: c_int) -> bool {
    matches!(super::inter::of(comm), Ok(Some(_)))
}

/// A non-blocking collective on an intercommunicator: runs the blocking one now
/// (its errors go through the error handler there) and gives a request complete
/// at once. The intercommunicator collectives (`ffi/inter.rs`) have no schedule
/// the engine could advance alone yet, so these do not overlap with computation;
/// programs that start the same collectives in the same order on every rank, as
/// MPI requires, see no other difference.
unsafe fn inter_now(
    name: &str,
    comm: c_int,
    request: *mut c_int,
    blocking: impl FnOnce() -> c_int,
) -> c_int {
    let r = blocking();
    if r != 0 {
        return r;
    }
    // SAFETY: the caller's request handle.
    call(name, comm, || unsafe {
        register(comm, None, None, request)
    })
}

/// Writes `n` elements of `t` from the packed output at `buf` (an address kept as
/// an integer so that the completion may run on any thread).
fn writer(buf: *mut c_void, n: usize, t: Arc<TypeInfo>) -> impl Fn(&[u8]) -> Result<(), MpiError> {
    let buf = buf as usize;
    move |out: &[u8]| {
        // SAFETY: MPI keeps the receive buffer of a pending collective valid and
        // untouched until the request completes, which is now.
        unsafe { write_packed(buf as *mut c_void, n, &t, out) }
    }
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Ibarrier(comm: c_int, request: *mut c_int) -> c_int {
    if is_inter(comm) {
        // SAFETY: the caller's arguments, passed on.
        return unsafe {
            inter_now("MPI_Ibarrier", comm, request, || {
                super::coll::PMPI_Barrier(comm)
            })
        };
    }
    call("MPI_Ibarrier", comm, || {
        let r = ctx(comm)?.comm.ibarrier()?;
        // SAFETY: the caller's request handle.
        unsafe { register(comm, Some(r), None, request) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Ibcast(
    buffer: *mut c_void,
    count_: c_int,
    datatype: c_int,
    root_: c_int,
    comm: c_int,
    request: *mut c_int,
) -> c_int {
    if is_inter(comm) {
        // SAFETY: the caller's arguments, passed on.
        return unsafe {
            inter_now("MPI_Ibcast", comm, request, || {
                super::coll::PMPI_Bcast(buffer, count_, datatype, root_, comm)
            })
        };
    }
    call("MPI_Ibcast", comm, || {
        let c = ctx(comm)?;
        let t = ty(datatype)?;
        let n = count(count_)?;
        let r = root(&c.comm, root_)?;
        // SAFETY: `n` elements of `t` at `buffer`, and the request handle.
        unsafe {
            let data = if c.me == r {
                in_bytes(buffer, n, &t)?.into_owned()
            } else {
                Vec::new()
            };
            let req = c.comm.ibcast(r, data, n * t.size)?;
            let finish: Option<Finish> =
                (c.me != r).then(|| Box::new(writer(buffer, n, t)) as Finish);
            register(comm, Some(req), finish, request)
        }
    })
}

/// Starts a reduction of `data` (packed elements of `t`) at `root` (every rank for
/// `None`) with the operation check of the blocking calls ([`agree`]); `finish`
/// gets the result where there is one.
fn start_reduction(
    c: &Ctx,
    name: &'static str,
    root: Option<u32>,
    data: &[u8],
    t: &TypeInfo,
    op: c_int,
    f: Combine,
    commute: bool,
    finish: impl Fn(&[u8]) -> Result<(), MpiError> + Send + 'static,
) -> Result<(qcg::Request, Finish), MpiError> {
    let opsig = super::coll::op_sig(op)?;
    let sig = agree::Sig {
        op: opsig,
        root: root.unwrap_or(0),
        ty: agree::type_sig(&t.kind, t.size),
    };
    // The combiner takes a chunk's elements in one call ([`combiner`]).
    let layout = agree::Layout::new(t.size, data.len() / t.size.max(1)).with_runs(true);
    let input = layout.pack(data, c.me, sig);
    let g: qcg::nbc::ElemOp = Arc::new(move |a: &mut [u8], b: &[u8]| layout.combine(a, b, &*f));
    let req = match root {
        Some(r) => c.comm.ireduce_bytes(r, input, layout.chunk(), commute, g)?,
        None => c.comm.iallreduce_bytes(input, layout.chunk(), commute, g)?,
    };
    let done: Finish = Box::new(move |out: &[u8]| {
        if out.is_empty() {
            return Ok(());
        }
        let (result, trailer) = layout.unpack(out);
        if let Some(t) = trailer {
            agree::verdict(name, &t, &|h| {
                types::Op::from_handle(h as c_int).map_or_else(
                    || format!("op {h}"),
                    |o| format!("MPI_{o:?}").to_uppercase(),
                )
            })?;
        }
        finish(&result)
    });
    Ok((req, done))
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Ireduce(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count_: c_int,
    datatype: c_int,
    op: c_int,
    root_: c_int,
    comm: c_int,
    request: *mut c_int,
) -> c_int {
    if is_inter(comm) {
        // SAFETY: the caller's arguments, passed on.
        return unsafe {
            inter_now("MPI_Ireduce", comm, request, || {
                super::coll::PMPI_Reduce(sendbuf, recvbuf, count_, datatype, op, root_, comm)
            })
        };
    }
    call("MPI_Ireduce", comm, || {
        let c = ctx(comm)?;
        let t = ty(datatype)?;
        let n = count(count_)?;
        let r = root(&c.comm, root_)?;
        let (f, commute) = combiner(op, datatype, &t)?;
        // SAFETY: the caller's buffers of `n` elements, and the request handle.
        unsafe {
            if n == 0 || t.size == 0 {
                return register(comm, None, None, request);
            }
            let data = if c.me == r {
                reduce_input(sendbuf, recvbuf, n, &t)?
            } else {
                in_bytes(sendbuf, n, &t)?
            };
            let w = writer(recvbuf, n, t.clone());
            let (req, fin) =
                start_reduction(&c, "MPI_Ireduce", Some(r), &data, &t, op, f, commute, w)?;
            register(comm, Some(req), Some(fin), request)
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Iallreduce(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count_: c_int,
    datatype: c_int,
    op: c_int,
    comm: c_int,
    request: *mut c_int,
) -> c_int {
    if is_inter(comm) {
        // SAFETY: the caller's arguments, passed on.
        return unsafe {
            inter_now("MPI_Iallreduce", comm, request, || {
                super::coll::PMPI_Allreduce(sendbuf, recvbuf, count_, datatype, op, comm)
            })
        };
    }
    call("MPI_Iallreduce", comm, || {
        let c = ctx(comm)?;
        let t = ty(datatype)?;
        let n = count(count_)?;
        let (f, commute) = combiner(op, datatype, &t)?;
        // SAFETY: the caller's buffers of `n` elements, and the request handle.
        unsafe {
            if n == 0 || t.size == 0 {
                return register(comm, None, None, request);
            }
            let data = reduce_input(sendbuf, recvbuf, n, &t)?;
            let w = writer(recvbuf, n, t.clone());
            let (req, fin) =
                start_reduction(&c, "MPI_Iallreduce", None, &data, &t, op, f, commute, w)?;
            register(comm, Some(req), Some(fin), request)
        }
    })
}

/// Reduce-scatter: the whole reduction of `counts` (per rank) elements, then this
/// rank's block.
unsafe fn ireduce_scatter(
    name: &'static str,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    counts: Vec<usize>,
    datatype: c_int,
    op: c_int,
    comm: c_int,
    request: *mut c_int,
) -> Result<(), MpiError> {
    let c = ctx(comm)?;
    let t = ty(datatype)?;
    let (f, commute) = combiner(op, datatype, &t)?;
    let total: usize = counts.iter().sum();
    let me = c.me as usize;
    // SAFETY: the caller's buffers, and the request handle.
    unsafe {
        if total == 0 || t.size == 0 {
            return register(comm, None, None, request);
        }
        let data = reduce_input(sendbuf, recvbuf, total, &t)?;
        let before: usize = counts[..me].iter().sum();
        let (at, b) = (before * t.size, counts[me] * t.size);
        let w = writer(recvbuf, counts[me], t.clone());
        let mine = move |all: &[u8]| w(all.get(at..at + b).unwrap_or(&[]));
        let (req, fin) = start_reduction(&c, name, None, &data, &t, op, f, commute, mine)?;
        register(comm, Some(req), Some(fin), request)
    }
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Ireduce_scatter_block(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcount: c_int,
    datatype: c_int,
    op: c_int,
    comm: c_int,
    request: *mut c_int,
) -> c_int {
    if is_inter(comm) {
        // SAFETY: the caller's arguments, passed on.
        return unsafe {
            inter_now("MPI_Ireduce_scatter_block", comm, request, || {
                super::coll::PMPI_Reduce_scatter_block(
                    sendbuf, recvbuf, recvcount, datatype, op, comm,
                )
            })
        };
    }
    call("MPI_Ireduce_scatter_block", comm, || {
        let p = ctx(comm)?.p;
        let n = count(recvcount)?;
        // SAFETY: passed on.
        unsafe {
            ireduce_scatter(
                "MPI_Ireduce_scatter_block",
                sendbuf,
                recvbuf,
                vec![n; p],
                datatype,
                op,
                comm,
                request,
            )
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Ireduce_scatter(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    datatype: c_int,
    op: c_int,
    comm: c_int,
    request: *mut c_int,
) -> c_int {
    if is_inter(comm) {
        // SAFETY: the caller's arguments, passed on.
        return unsafe {
            inter_now("MPI_Ireduce_scatter", comm, request, || {
                super::coll::PMPI_Reduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm)
            })
        };
    }
    call("MPI_Ireduce_scatter", comm, || {
        let p = ctx(comm)?.p;
        // SAFETY: the caller's array; the rest passed on.
        unsafe {
            let counts = ints(recvcounts, p, "recvcounts")?;
            let counts: Vec<usize> = counts.iter().map(|&k| count(k)).collect::<Result<_, _>>()?;
            ireduce_scatter(
                "MPI_Ireduce_scatter",
                sendbuf,
                recvbuf,
                counts,
                datatype,
                op,
                comm,
                request,
            )
        }
    })
}

/// Inclusive or exclusive scan along the chain of ranks.
unsafe fn iscan(
    name: &str,
    exclusive: bool,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count_: c_int,
    datatype: c_int,
    op: c_int,
    comm: c_int,
    request: *mut c_int,
) -> c_int {
    call(name, comm, || {
        let c = ctx(comm)?;
        let t = ty(datatype)?;
        let n = count(count_)?;
        let (f, commute) = combiner(op, datatype, &t)?;
        // SAFETY: the caller's buffers of `n` elements, and the request handle.
        unsafe {
            let mine = reduce_input(sendbuf, recvbuf, n, &t)?.into_owned();
            let bytes = mine.len();
            let sched = vector::scan(c.me as usize, c.p, bytes, !exclusive);
            let sig = Collective::new(Op::Reduce, 0, bytes)
                .elem_size(t.size.max(1))
                .commutative(commute);
            let f: qcg::nbc::ElemOp = Arc::from(f);
            let comb = qcg::nbc::in_order(t.size.max(1), f);
            let req = c.comm.start_schedule(sched, sig, mine, Some(comb))?;
            let finish: Option<Finish> =
                (!exclusive || c.me > 0).then(|| Box::new(writer(recvbuf, n, t)) as Finish);
            register(comm, Some(req), finish, request)
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Iscan(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count_: c_int,
    datatype: c_int,
    op: c_int,
    comm: c_int,
    request: *mut c_int,
) -> c_int {
    // SAFETY: passed on.
    unsafe {
        iscan(
            "MPI_Iscan",
            false,
            sendbuf,
            recvbuf,
            count_,
            datatype,
            op,
            comm,
            request,
        )
    }
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Iexscan(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count_: c_int,
    datatype: c_int,
    op: c_int,
    comm: c_int,
    request: *mut c_int,
) -> c_int {
    // SAFETY: passed on.
    unsafe {
        iscan(
            "MPI_Iexscan",
            true,
            sendbuf,
            recvbuf,
            count_,
            datatype,
            op,
            comm,
            request,
        )
    }
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Igather(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: c_int,
    root_: c_int,
    comm: c_int,
    request: *mut c_int,
) -> c_int {
    if is_inter(comm) {
        // SAFETY: the caller's arguments, passed on.
        return unsafe {
            inter_now("MPI_Igather", comm, request, || {
                super::coll::PMPI_Gather(
                    sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root_, comm,
                )
            })
        };
    }
    call("MPI_Igather", comm, || {
        let c = ctx(comm)?;
        let r = root(&c.comm, root_)?;
        // SAFETY: the caller's buffers, and the request handle.
        unsafe {
            let data = if c.me == r && in_place(sendbuf) {
                let rt = ty(recvtype)?;
                let rn = count(recvcount)?;
                in_bytes(at(recvbuf, r as usize * rn, &rt), rn, &rt)?
            } else {
                in_bytes(sendbuf, count(sendcount)?, &*ty(sendtype)?)?
            };
            let req = c.comm.igather(r, data.into_owned())?;
            let finish = if c.me == r {
                let w = writer(recvbuf, count(recvcount)? * c.p, ty(recvtype)?);
                Some(Box::new(w) as Finish)
            } else {
                None
            };
            register(comm, Some(req), finish, request)
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Iscatter(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: c_int,
    root_: c_int,
    comm: c_int,
    request: *mut c_int,
) -> c_int {
    if is_inter(comm) {
        // SAFETY: the caller's arguments, passed on.
        return unsafe {
            inter_now("MPI_Iscatter", comm, request, || {
                super::coll::PMPI_Scatter(
                    sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root_, comm,
                )
            })
        };
    }
    call("MPI_Iscatter", comm, || {
        let c = ctx(comm)?;
        let r = root(&c.comm, root_)?;
        // SAFETY: the caller's buffers, and the request handle.
        unsafe {
            let keep = c.me == r && in_place(recvbuf);
            let (data, block) = if c.me == r {
                let st = ty(sendtype)?;
                let sn = count(sendcount)?;
                (in_bytes(sendbuf, sn * c.p, &st)?.into_owned(), sn * st.size)
            } else {
                (Vec::new(), count(recvcount)? * ty(recvtype)?.size)
            };
            let req = c.comm.iscatter(r, data, block)?;
            let finish = if keep {
                None
            } else {
                let w = writer(recvbuf, count(recvcount)?, ty(recvtype)?);
                Some(Box::new(w) as Finish)
            };
            register(comm, Some(req), finish, request)
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Iallgather(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: c_int,
    comm: c_int,
    request: *mut c_int,
) -> c_int {
    if is_inter(comm) {
        // SAFETY: the caller's arguments, passed on.
        return unsafe {
            inter_now("MPI_Iallgather", comm, request, || {
                super::coll::PMPI_Allgather(
                    sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
                )
            })
        };
    }
    call("MPI_Iallgather", comm, || {
        let c = ctx(comm)?;
        let rt = ty(recvtype)?;
        let rn = count(recvcount)?;
        // SAFETY: the caller's buffers, and the request handle.
        unsafe {
            let data = if in_place(sendbuf) {
                in_bytes(at(recvbuf, c.me as usize * rn, &rt), rn, &rt)?
            } else {
                in_bytes(sendbuf, count(sendcount)?, &*ty(sendtype)?)?
            };
            let req = c.comm.iallgather(data.into_owned())?;
            let w = writer(recvbuf, rn * c.p, rt);
            register(comm, Some(req), Some(Box::new(w)), request)
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Ialltoall(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: c_int,
    comm: c_int,
    request: *mut c_int,
) -> c_int {
    if is_inter(comm) {
        // SAFETY: the caller's arguments, passed on.
        return unsafe {
            inter_now("MPI_Ialltoall", comm, request, || {
                super::coll::PMPI_Alltoall(
                    sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
                )
            })
        };
    }
    call("MPI_Ialltoall", comm, || {
        let c = ctx(comm)?;
        let rt = ty(recvtype)?;
        let rn = count(recvcount)?;
        // SAFETY: the caller's buffers, and the request handle.
        unsafe {
            let data = if in_place(sendbuf) {
                in_bytes(recvbuf, rn * c.p, &rt)?.into_owned()
            } else {
                in_bytes(sendbuf, count(sendcount)? * c.p, &*ty(sendtype)?)?.into_owned()
            };
            let req = c.comm.ialltoall(data)?;
            let w = writer(recvbuf, rn * c.p, rt);
            register(comm, Some(req), Some(Box::new(w)), request)
        }
    })
}

/// One block of a v- or w-collective: where it is (an address), how many
/// elements, of which type.
pub(super) struct Block {
    pub(super) at: usize,
    pub(super) n: usize,
    pub(super) t: Arc<TypeInfo>,
}

impl Block {
    pub(super) fn new(base: *const c_void, n: usize, t: Arc<TypeInfo>) -> Block {
        Block {
            at: base as usize,
            n,
            t,
        }
    }

    pub(super) fn bytes(&self) -> usize {
        self.n * self.t.size
    }
}

/// Starts the direct exchange: `sends[q]` to rank q (`None`: no block), `recvs[q]`
/// from it; the completion writes every received block in place.
unsafe fn start_exchange(
    c: &Ctx,
    comm: c_int,
    sig: Collective,
    sends: Vec<Option<Block>>,
    recvs: Vec<Option<Block>>,
    request: *mut c_int,
) -> Result<(), MpiError> {
    let send_sizes: Vec<usize> = sends
        .iter()
        .map(|b| b.as_ref().map_or(0, Block::bytes))
        .collect();
    let recv_sizes: Vec<usize> = recvs
        .iter()
        .map(|b| b.as_ref().map_or(0, Block::bytes))
        .collect();
    let mut input = Vec::with_capacity(send_sizes.iter().sum());
    for b in sends.iter().flatten() {
        // SAFETY: the caller's send block.
        input.extend_from_slice(&unsafe { in_bytes(b.at as *const c_void, b.n, &b.t)? });
    }
    let sched = vector::exchange(c.me as usize, &send_sizes, &recv_sizes, true);
    let req = c.comm.start_schedule(sched, sig, input, None)?;
    let finish: Finish = Box::new(move |out: &[u8]| {
        let mut off = 0;
        for b in recvs.iter().flatten() {
            let k = b.bytes();
            // SAFETY: the caller's receive block, valid until the request completes.
            unsafe { write_packed(b.at as *mut c_void, b.n, &b.t, &out[off..off + k])? };
            off += k;
        }
        Ok(())
    });
    // SAFETY: the caller's request handle.
    unsafe { register(comm, Some(req), Some(finish), request) }
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Igatherv(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    displs: *const c_int,
    recvtype: c_int,
    root_: c_int,
    comm: c_int,
    request: *mut c_int,
) -> c_int {
    if is_inter(comm) {
        // SAFETY: the caller's arguments, passed on.
        return unsafe {
            inter_now("MPI_Igatherv", comm, request, || {
                super::coll::PMPI_Gatherv(
                    sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root_,
                    comm,
                )
            })
        };
    }
    call("MPI_Igatherv", comm, || {
        let c = ctx(comm)?;
        let r = root(&c.comm, root_)?;
        let ru = r as usize;
        let mut sends: Vec<Option<Block>> = (0..c.p).map(|_| None).collect();
        let mut recvs: Vec<Option<Block>> = (0..c.p).map(|_| None).collect();
        // SAFETY: the caller's arrays and buffers.
        unsafe {
            let skip_own = c.me == r && in_place(sendbuf);
            if !skip_own {
                sends[ru] = Some(Block::new(sendbuf, count(sendcount)?, ty(sendtype)?));
            }
            if c.me == r {
                let rt = ty(recvtype)?;
                for (q, (k, d)) in counts_displs(recvcounts, displs, c.p)?
                    .into_iter()
                    .enumerate()
                {
                    if q == ru && skip_own {
                        continue;
                    }
                    recvs[q] = Some(Block::new(at_mut(recvbuf, d, &rt), k, rt.clone()));
                }
            }
            start_exchange(
                &c,
                comm,
                Collective::new(Op::Gather, ru, 0),
                sends,
                recvs,
                request,
            )
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Iscatterv(
    sendbuf: *const c_void,
    sendcounts: *const c_int,
    displs: *const c_int,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: c_int,
    root_: c_int,
    comm: c_int,
    request: *mut c_int,
) -> c_int {
    if is_inter(comm) {
        // SAFETY: the caller's arguments, passed on.
        return unsafe {
            inter_now("MPI_Iscatterv", comm, request, || {
                super::coll::PMPI_Scatterv(
                    sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root_,
                    comm,
                )
            })
        };
    }
    call("MPI_Iscatterv", comm, || {
        let c = ctx(comm)?;
        let r = root(&c.comm, root_)?;
        let ru = r as usize;
        let mut sends: Vec<Option<Block>> = (0..c.p).map(|_| None).collect();
        let mut recvs: Vec<Option<Block>> = (0..c.p).map(|_| None).collect();
        // SAFETY: the caller's arrays and buffers.
        unsafe {
            let skip_own = c.me == r && in_place(recvbuf);
            if !skip_own {
                recvs[ru] = Some(Block::new(recvbuf, count(recvcount)?, ty(recvtype)?));
            }
            if c.me == r {
                let st = ty(sendtype)?;
                for (q, (k, d)) in counts_displs(sendcounts, displs, c.p)?
                    .into_iter()
                    .enumerate()
                {
                    if q == ru && skip_own {
                        continue;
                    }
                    sends[q] = Some(Block::new(at(sendbuf, d, &st), k, st.clone()));
                }
            }
            start_exchange(
                &c,
                comm,
                Collective::new(Op::Scatter, ru, 0),
                sends,
                recvs,
                request,
            )
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Iallgatherv(
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
    if is_inter(comm) {
        // SAFETY: the caller's arguments, passed on.
        return unsafe {
            inter_now("MPI_Iallgatherv", comm, request, || {
                super::coll::PMPI_Allgatherv(
                    sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm,
                )
            })
        };
    }
    call("MPI_Iallgatherv", comm, || {
        let c = ctx(comm)?;
        let me = c.me as usize;
        // SAFETY: the caller's arrays and buffers.
        unsafe {
            let rt = ty(recvtype)?;
            let cd = counts_displs(recvcounts, displs, c.p)?;
            let mine = if in_place(sendbuf) {
                let (k, d) = cd[me];
                Block::new(at(recvbuf, d, &rt), k, rt.clone())
            } else {
                Block::new(sendbuf, count(sendcount)?, ty(sendtype)?)
            };
            let own_in_place = in_place(sendbuf);
            let mut sends: Vec<Option<Block>> = Vec::with_capacity(c.p);
            for q in 0..c.p {
                if q == me && own_in_place {
                    sends.push(None);
                } else {
                    sends.push(Some(Block::new(
                        mine.at as *const c_void,
                        mine.n,
                        mine.t.clone(),
                    )));
                }
            }
            let recvs = cd
                .into_iter()
                .enumerate()
                .map(|(q, (k, d))| {
                    (!(q == me && own_in_place))
                        .then(|| Block::new(at_mut(recvbuf, d, &rt), k, rt.clone()))
                })
                .collect();
            start_exchange(
                &c,
                comm,
                Collective::new(Op::Allgather, 0, 0),
                sends,
                recvs,
                request,
            )
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Ialltoallv(
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
    if is_inter(comm) {
        // SAFETY: the caller's arguments, passed on.
        return unsafe {
            inter_now("MPI_Ialltoallv", comm, request, || {
                super::coll::PMPI_Alltoallv(
                    sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype,
                    comm,
                )
            })
        };
    }
    call("MPI_Ialltoallv", comm, || {
        let c = ctx(comm)?;
        // SAFETY: the caller's arrays and buffers.
        unsafe {
            let rt = ty(recvtype)?;
            let rcd = counts_displs(recvcounts, rdispls, c.p)?;
            let (sb, st, scd) = if in_place(sendbuf) {
                (recvbuf as *const c_void, rt.clone(), rcd.clone())
            } else {
                (
                    sendbuf,
                    ty(sendtype)?,
                    counts_displs(sendcounts, sdispls, c.p)?,
                )
            };
            let sends = scd
                .into_iter()
                .map(|(k, d)| Some(Block::new(at(sb, d, &st), k, st.clone())))
                .collect();
            let recvs = rcd
                .into_iter()
                .map(|(k, d)| Some(Block::new(at_mut(recvbuf, d, &rt), k, rt.clone())))
                .collect();
            start_exchange(
                &c,
                comm,
                Collective::new(Op::Alltoall, 0, 0),
                sends,
                recvs,
                request,
            )
        }
    })
}

/// The blocks of an alltoallw side: byte displacements and a type per rank.
unsafe fn w_blocks(
    base: *const c_void,
    counts: *const c_int,
    displs: *const c_int,
    types_: *const c_int,
    p: usize,
) -> Result<Vec<Option<Block>>, MpiError> {
    // SAFETY: three arrays of `p` ints.
    let (k, d, t) = unsafe {
        (
            ints(counts, p, "the count array")?,
            ints(displs, p, "the displacement array")?,
            ints(types_, p, "the type array")?,
        )
    };
    (0..p)
        .map(|q| {
            let d = isize::try_from(d[q]).map_err(|_| {
                MpiError::new(Class::Arg, format!("displacement {} is too large", d[q]))
            })?;
            let n = count(k[q])?;
            let at = (base as *const u8).wrapping_offset(d).cast();
            Ok(Some(Block::new(at, n, ty(t[q])?)))
        })
        .collect()
}

unsafe fn ialltoallw(
    sendbuf: *const c_void,
    sendcounts: *const c_int,
    sdispls: *const c_int,
    sendtypes: *const c_int,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    rdispls: *const c_int,
    recvtypes: *const c_int,
    comm: c_int,
    request: *mut c_int,
) -> Result<(), MpiError> {
    let c = ctx(comm)?;
    // SAFETY: the caller's arrays and buffers.
    unsafe {
        let recvs = w_blocks(recvbuf, recvcounts, rdispls, recvtypes, c.p)?;
        let sends = if in_place(sendbuf) {
            w_blocks(recvbuf, recvcounts, rdispls, recvtypes, c.p)?
        } else {
            w_blocks(sendbuf, sendcounts, sdispls, sendtypes, c.p)?
        };
        start_exchange(
            &c,
            comm,
            Collective::new(Op::Alltoall, 0, 0),
            sends,
            recvs,
            request,
        )
    }
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Ialltoallw(
    sendbuf: *const c_void,
    sendcounts: *const c_int,
    sdispls: *const c_int,
    sendtypes: *const c_int,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    rdispls: *const c_int,
    recvtypes: *const c_int,
    comm: c_int,
    request: *mut c_int,
) -> c_int {
    if is_inter(comm) {
        // SAFETY: the caller's arguments, passed on.
        return unsafe {
            inter_now("MPI_Ialltoallw", comm, request, || {
                PMPI_Alltoallw(
                    sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls,
                    recvtypes, comm,
                )
            })
        };
    }
    call("MPI_Ialltoallw", comm, || {
        // SAFETY: passed on.
        unsafe {
            ialltoallw(
                sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes,
                comm, request,
            )
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Alltoallw(
    sendbuf: *const c_void,
    sendcounts: *const c_int,
    sdispls: *const c_int,
    sendtypes: *const c_int,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    rdispls: *const c_int,
    recvtypes: *const c_int,
    comm: c_int,
) -> c_int {
    call("MPI_Alltoallw", comm, || {
        if let Some(x) = super::inter::of(comm)? {
            let q = x.remote_size();
            // SAFETY: the caller's arrays of the remote group's size and buffers.
            return unsafe {
                let arrays = |c, d, t| -> Result<_, MpiError> {
                    Ok((
                        ints(c, q, "the counts")?,
                        ints(d, q, "the displacements")?,
                        ints(t, q, "the types")?,
                    ))
                };
                super::inter::alltoallw(
                    &x,
                    sendbuf,
                    arrays(sendcounts, sdispls, sendtypes)?,
                    recvbuf,
                    arrays(recvcounts, rdispls, recvtypes)?,
                )
            };
        }
        let mut h: c_int = 0;
        // SAFETY: passed on; the request is completed here, before the buffers
        // go back to the caller.
        unsafe {
            ialltoallw(
                sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes,
                comm, &mut h,
            )?;
            let r = state::with(|s| {
                s.requests.remove(&h).ok_or_else(|| {
                    MpiError::new(Class::Intern, "MPI_Alltoallw: its request is gone")
                })
            })?;
            let done = r.inner.map(qcg::Request::wait);
            super::requests::complete(&r.meta, false, done)?;
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Reduce_local(
    inbuf: *const c_void,
    inoutbuf: *mut c_void,
    count_: c_int,
    datatype: c_int,
    op: c_int,
) -> c_int {
    call("MPI_Reduce_local", crate::state::COMM_WORLD, || {
        let t = ty(datatype)?;
        let n = count(count_)?;
        let (f, _) = combiner(op, datatype, &t)?;
        if n == 0 || t.size == 0 {
            return Ok(());
        }
        // SAFETY: the caller's buffers of `n` elements.
        unsafe {
            let a = in_bytes(inbuf, n, &t)?;
            let b = in_bytes(inoutbuf, n, &t)?;
            // inoutbuf = inbuf ∘ inoutbuf, the whole run in one call.
            let mut out = a.into_owned();
            f(&mut out, &b[..]);
            write_packed(inoutbuf, n, &t, &out)
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Op_commutative(op: c_int, commute: *mut c_int) -> c_int {
    call("MPI_Op_commutative", crate::state::COMM_WORLD, || {
        // MPI_REPLACE and MPI_NO_OP (one-sided communication's) do not commute.
        if op == 13 || op == 14 {
            // SAFETY: the caller's int.
            return unsafe { put(commute, 0) };
        }
        let c = match state::with(|s| s.op(op))? {
            OpKind::Predefined(_) => 1,
            OpKind::User { commute, .. } => c_int::from(commute),
        };
        // SAFETY: the caller's int.
        unsafe { put(commute, c) }
    })
}
