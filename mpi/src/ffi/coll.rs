//! The C ABI of collectives and user operations (see `ffi` for the conventions
//! and the safety contract). Collectives with equal blocks go to
//! libqcg's topology-aware collectives; the v-variants and scans are built from
//! point-to-point messages on the communicator's twin (which user messages never
//! reach).
#![allow(unsafe_code)]
#![allow(clippy::missing_safety_doc)]
#![allow(clippy::too_many_arguments)]

use super::inter;
use crate::agree;
use crate::error::{Class, MpiError};
use crate::ffi::{call, in_bytes, ints, out_span, put, write_packed, IN_PLACE};
use crate::state::{self, count, root, OpKind, COMM_WORLD};
use crate::types::{self, TypeInfo};
use libc::{c_int, c_void};
use std::borrow::Cow;
use std::sync::Arc;

/// Tags of the collectives built on the twin communicator.
const TAG_GATHERV: u32 = 1;
const TAG_SCATTERV: u32 = 2;
const TAG_ALLTOALLV: u32 = 3;
const TAG_SCAN: u32 = 4;

pub(super) type Combine = Box<dyn Fn(&mut [u8], &[u8]) + Send + Sync>;

pub(super) struct Ctx {
    pub(super) comm: Arc<qcg::Comm>,
    pub(super) twin: Arc<qcg::Comm>,
    pub(super) me: u32,
    pub(super) p: usize,
}

impl Ctx {
    /// A message of this layer's own collectives from `src`, of exactly `len`
    /// bytes, waiting at most the collective timeout (`QCG_COLL_TIMEOUT`): a rank
    /// that never sends (calls that do not match across ranks, or a dead rank) is
    /// named rather than waited for, and so is one that sends another amount than
    /// this rank expects (counts that do not match).
    fn recv(&self, op: &str, src: u32, tag: u32, len: usize) -> Result<Vec<u8>, MpiError> {
        let t = self.comm.coll_options().timeout;
        match self.twin.recv_timeout(Some(src), Some(tag), t) {
            Ok(m) if m.data.len() == len => Ok(m.data),
            Ok(m) => Err(MpiError::new(
                if m.data.len() > len {
                    Class::Truncate
                } else {
                    Class::Count
                },
                format!(
                    "{op}: rank {src} sent {} bytes where this rank (rank {}) expects {len}: the ranks' counts do not match",
                    m.data.len(),
                    self.me
                ),
            )),
            Err(qcg::Error::Timeout { .. }) => Err(MpiError::new(
                Class::Other,
                format!(
                    "{op}: rank {src} sent nothing in {:.0} s (calls that do not match across ranks, or a dead rank)",
                    t.as_secs_f64()
                ),
            )),
            Err(e) => Err(e.into()),
        }
    }
}

impl Ctx {
    /// Waits for this layer's sends, each to rank `q`, for at most the collective
    /// timeout in all: a rank that never takes its block is named.
    fn wait_sends(&self, op: &str, sends: Vec<(usize, qcg::Request)>) -> Result<(), MpiError> {
        let t = self.comm.coll_options().timeout;
        let deadline = std::time::Instant::now() + t;
        for (q, mut r) in sends {
            loop {
                if let Some(done) = r.test()? {
                    drop(done);
                    break;
                }
                let now = std::time::Instant::now();
                if now >= deadline {
                    return Err(MpiError::new(
                        Class::Other,
                        format!(
                            "{op}: rank {q} did not take its block in {:.0} s (calls that do not match across ranks, or a dead rank)",
                            t.as_secs_f64()
                        ),
                    ));
                }
                self.twin
                    .progress_until((now + std::time::Duration::from_millis(1)).min(deadline));
            }
        }
        Ok(())
    }
}

/// The intracommunicator of handle `h`: an intercommunicator fails with
/// `MPI_ERR_COMM` (calls that take one check [`inter::of`] first, or use
/// [`local_ctx`]).
pub(super) fn ctx(h: c_int) -> Result<Ctx, MpiError> {
    inter::intra(h, "this call")?;
    local_ctx(h)
}

/// The communicator of handle `h`, or an intercommunicator's local group.
pub(super) fn local_ctx(h: c_int) -> Result<Ctx, MpiError> {
    state::with(|s| {
        let e = s.comm(h)?;
        Ok(Ctx {
            comm: e.comm.clone(),
            twin: e.twin.clone(),
            me: e.comm.rank(),
            p: e.comm.size() as usize,
        })
    })
}

pub(super) fn ty(h: c_int) -> Result<Arc<TypeInfo>, MpiError> {
    state::with(|s| s.ty(h))
}

/// `a = a ∘ b` over a run of whole packed elements of `t` (as many in `b` as in
/// `a`), and whether the operation commutes. A run is combined in one call: the
/// predefined operations on numbers loop in vector code over it and a user's
/// function gets it as one `len` (MPI's contract), where one call per element
/// cost a dynamic call, and for a user's function an allocation, per element.
pub(super) fn combiner(
    h: c_int,
    dt: c_int,
    t: &Arc<TypeInfo>,
) -> Result<(Combine, bool), MpiError> {
    let size = t.size;
    match state::with(|s| s.op(h))? {
        OpKind::Predefined(op) => {
            types::check_op(op, t)?;
            let kind = t.kind;
            // Numbers, logicals and bytes combine lane by lane whatever the run's
            // length; pairs and complex numbers one element at a time.
            let runs = types::Op::takes_runs(kind);
            Ok((
                Box::new(move |a: &mut [u8], b: &[u8]| {
                    if runs {
                        op.apply(kind, a, b);
                    } else if size > 0 {
                        for (x, y) in a.chunks_exact_mut(size).zip(b.chunks_exact(size)) {
                            op.apply(kind, x, y);
                        }
                    }
                }),
                true,
            ))
        }
        OpKind::User { f, commute } => {
            let t = t.clone();
            let g = move |a: &mut [u8], b: &[u8]| {
                if size == 0 {
                    return;
                }
                let n = a.len().min(b.len()) / size;
                let mut d = dt;
                // MPI's user function computes inoutvec = invec ∘ inoutvec.
                if t.is_contiguous() {
                    let mut inout = b[..n * size].to_vec();
                    // `len` is a C int: runs longer than that go in pieces.
                    let most = (c_int::MAX as usize / size).max(1) * size;
                    for (x, y) in a[..n * size].chunks_mut(most).zip(inout.chunks_mut(most)) {
                        let mut len = (x.len() / size) as c_int;
                        // SAFETY: two buffers of `len` elements of `t`, as MPI
                        // promises the user function.
                        unsafe {
                            f(
                                x.as_mut_ptr().cast(),
                                y.as_mut_ptr().cast(),
                                &mut len,
                                &mut d,
                            )
                        };
                    }
                    a[..n * size].copy_from_slice(&inout);
                } else {
                    let (first, span) = t.span(1);
                    let mut x = vec![0u8; span];
                    let mut y = vec![0u8; span];
                    for (pa, pb) in a.chunks_exact_mut(size).zip(b.chunks_exact(size)) {
                        let mut len: c_int = 1;
                        t.unpack(pa, &mut x, 1);
                        t.unpack(pb, &mut y, 1);
                        // SAFETY: one element of `t` laid out in each buffer, addressed
                        // from its origin (`first` bytes before the buffer's start).
                        unsafe {
                            f(
                                x.as_mut_ptr().wrapping_offset(-first).cast(),
                                y.as_mut_ptr().wrapping_offset(-first).cast(),
                                &mut len,
                                &mut d,
                            )
                        };
                        pa.copy_from_slice(&t.pack(&y, 1));
                    }
                }
            };
            Ok((Box::new(g), commute))
        }
    }
}

/// A reduction (at `root`, or on every rank for `None`) of `data`, `n` packed
/// elements of `t`, that also checks every rank passed the same operation, root
/// and datatype ([`agree`]): the result where there is one, or an error naming the
/// rank at fault.
pub(super) fn checked_reduction(
    c: &Ctx,
    name: &str,
    root: Option<u32>,
    data: &[u8],
    t: &TypeInfo,
    op: c_int,
    f: &Combine,
    commute: bool,
) -> Result<Option<Vec<u8>>, MpiError> {
    let Some((out, layout)) = reduce_chunks(c, root, data, t, op, f, commute)? else {
        return Ok(None);
    };
    let (result, trailer) = layout.unpack(&out);
    check_trailer(name, trailer)?;
    Ok(Some(result))
}

/// [`checked_reduction`] with the result written into the caller's `recvbuf` of
/// `n` elements of `t` (where this rank gets one): elements of a contiguous type
/// are copied from the chunks straight there. `data` is dropped first (it may
/// borrow `recvbuf`, for `MPI_IN_PLACE`).
///
/// # Safety
/// `recvbuf` holds `n` elements of `t` where this rank gets the result.
pub(super) unsafe fn reduce_into(
    c: &Ctx,
    name: &str,
    root: Option<u32>,
    data: Cow<'_, [u8]>,
    t: &TypeInfo,
    op: c_int,
    f: &Combine,
    commute: bool,
    recvbuf: *mut c_void,
    n: usize,
) -> Result<(), MpiError> {
    // Where the result lands here, a buffer that cannot take it keeps the chunked
    // path, which names it after the reduction (the other ranks are not left waiting).
    let here = root.is_none_or(|r| r == c.me);
    let takes = !here || (super::check_recv(recvbuf, n, t).is_ok() && !recvbuf.is_null());
    if t.is_contiguous() && data.len() >= DIRECT_REDUCTION && takes {
        // SAFETY: passed on from the caller.
        return unsafe { reduce_direct(c, root, data, t, op, f, commute, recvbuf, n) };
    }
    let reduced = reduce_chunks(c, root, &data, t, op, f, commute)?;
    drop(data);
    let Some((out, layout)) = reduced else {
        return Ok(());
    };
    if t.is_contiguous() {
        // The ranks agreed before the caller's buffer is touched.
        check_trailer(name, layout.trailer(&out))?;
        // SAFETY: passed on from the caller.
        let dst = unsafe { out_span(recvbuf, n, t)? };
        layout.unpack_into(&out, dst);
        c.comm.reuse(out);
        Ok(())
    } else {
        let (result, trailer) = layout.unpack(&out);
        c.comm.reuse(out);
        check_trailer(name, trailer)?;
        // SAFETY: passed on from the caller.
        unsafe { write_packed(recvbuf, n, t, &result) }
    }
}

/// The smallest reduction (bytes per rank) of a contiguous datatype that runs on the
/// caller's bytes as they are, the call's operation and datatype carried in every
/// message's signature ([`reduce_direct`]), rather than packed in chunks with
/// trailers that merge what each rank passed ([`reduce_chunks`]): from here the two
/// copies of packing and unpacking cost more than the trailers' finer report (which
/// rank is the odd one out) is worth. `MPI_Allreduce` of 1 MiB, back to back: 16
/// ranks on 2 cores 18.2 → 13.3 ms, 2 ranks 959 → 318 µs.
const DIRECT_REDUCTION: usize = 64 << 10;

/// How errors name the labels of a direct reduction's messages: an operation's
/// handle, a datatype's signature.
fn label_name(which: qcg::callsig::Label, v: u32) -> String {
    match which {
        qcg::callsig::Label::Operation if v == agree::USER_OP => "a user operation".into(),
        qcg::callsig::Label::Operation => types::Op::from_handle(v as c_int).map_or_else(
            || format!("operation {v}"),
            |o| format!("MPI_{o:?}").to_uppercase(),
        ),
        qcg::callsig::Label::Elements => format!("datatype #{v:08x}"),
    }
}

/// [`reduce_into`] for a contiguous datatype: the caller's bytes reduced as they
/// are, the result written straight into `recvbuf` where the schedule allows. The
/// operation and the datatype travel as the call's labels, so ranks that pass
/// others fail naming both.
///
/// # Safety
/// `recvbuf` holds `n` elements of `t` where this rank gets the result.
#[allow(clippy::too_many_arguments)]
unsafe fn reduce_direct(
    c: &Ctx,
    root: Option<u32>,
    data: Cow<'_, [u8]>,
    t: &TypeInfo,
    op: c_int,
    f: &Combine,
    commute: bool,
    recvbuf: *mut c_void,
    n: usize,
) -> Result<(), MpiError> {
    qcg::callsig::name_labels(label_name);
    let opsig = op_sig(op)?;
    let how = qcg::Reduction {
        elem_size: t.size,
        commutative: commute,
        labels: (opsig, agree::type_sig(&t.kind, t.size)),
    };
    let here = root.is_none_or(|r| r == c.me);
    // `MPI_IN_PLACE`: the input is the output's own bytes, copied before the output
    // is taken for writing.
    let (first, len) = t.span(n);
    let at = (recvbuf as usize).wrapping_add_signed(first);
    let (d, dl) = (data.as_ptr() as usize, data.len());
    let data = if here && at < d + dl && d < at + len {
        Cow::Owned(data.into_owned())
    } else {
        data
    };
    // SAFETY: passed on from the caller.
    let out = if here {
        Some(unsafe { out_span(recvbuf, n, t)? })
    } else {
        None
    };
    Ok(c.comm.reduce_runs_into(root, &data, out, how, &**f)?)
}

/// What identifies operation `op` across ranks: a predefined one's handle, or
/// [`agree::USER_OP`] for any user operation.
pub(super) fn op_sig(op: c_int) -> Result<u32, MpiError> {
    Ok(match state::with(|s| s.op(op))? {
        OpKind::Predefined(_) => op as u32,
        OpKind::User { .. } => agree::USER_OP,
    })
}

/// The reduction of `data` in chunks with their trailers, and their layout (at
/// `root` only, or everywhere).
fn reduce_chunks(
    c: &Ctx,
    root: Option<u32>,
    data: &[u8],
    t: &TypeInfo,
    op: c_int,
    f: &Combine,
    commute: bool,
) -> Result<Option<(Vec<u8>, agree::Layout)>, MpiError> {
    let opsig = op_sig(op)?;
    let sig = agree::Sig {
        op: opsig,
        root: root.unwrap_or(0),
        ty: agree::type_sig(&t.kind, t.size),
    };
    // The combiner takes a chunk's elements in one call ([`combiner`]).
    let layout = agree::Layout::new(t.size, data.len() / t.size.max(1)).with_runs(true);
    let input = layout.pack(data, c.me, sig);
    let g = |a: &mut [u8], b: &[u8]| layout.combine(a, b, &**f);
    let out = match root {
        Some(r) => c
            .comm
            .reduce_bytes(r, &input, layout.chunk(), commute, &g)?,
        None => Some(
            c.comm
                .allreduce_bytes(&input, layout.chunk(), commute, &g)?,
        ),
    };
    Ok(out.map(|o| (o, layout)))
}

/// Whether the ranks agreed on the call, as the result's first trailer says.
fn check_trailer(name: &str, trailer: Option<agree::Trailer>) -> Result<(), MpiError> {
    if let Some(t) = trailer {
        agree::verdict(name, &t, &|h| {
            types::Op::from_handle(h as c_int).map_or_else(
                || format!("op {h}"),
                |o| format!("MPI_{o:?}").to_uppercase(),
            )
        })?;
    }
    Ok(())
}

fn combine_all(f: &Combine, size: usize, acc: &mut [u8], other: &[u8]) {
    if size == 0 {
        return;
    }
    let n = acc.len().min(other.len()) / size * size;
    f(&mut acc[..n], &other[..n]);
}

pub(super) fn in_place(p: *const c_void) -> bool {
    p == IN_PLACE
}

/// The send data of a reduction: `sendbuf`, or `recvbuf` for `MPI_IN_PLACE`.
pub(super) unsafe fn reduce_input<'a>(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    n: usize,
    t: &TypeInfo,
) -> Result<Cow<'a, [u8]>, MpiError> {
    let src = if in_place(sendbuf) {
        recvbuf as *const c_void
    } else {
        sendbuf
    };
    // SAFETY: `n` elements of `t`.
    unsafe { in_bytes(src, n, t) }
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Barrier(comm: c_int) -> c_int {
    call("MPI_Barrier", comm, || match inter::of(comm)? {
        Some(x) => inter::barrier(&x),
        None => Ok(ctx(comm)?.comm.barrier()?),
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Bcast(
    buffer: *mut c_void,
    count_: c_int,
    datatype: c_int,
    root_: c_int,
    comm: c_int,
) -> c_int {
    call("MPI_Bcast", comm, || {
        if let Some(x) = inter::of(comm)? {
            // SAFETY: the caller's buffers and arrays, passed on.
            return unsafe { inter::bcast(&x, buffer, count_, datatype, root_) };
        }
        let c = ctx(comm)?;
        let t = ty(datatype)?;
        let n = count(count_)?;
        let r = root(&c.comm, root_)?;
        // SAFETY: `n` elements of `t` at `buffer`.
        unsafe {
            if t.is_contiguous() {
                // Straight into the caller's buffer: no copy on any rank.
                c.comm.bcast(r, crate::ffi::out_span(buffer, n, &t)?)?;
                return Ok(());
            }
            let mut data = if c.me == r {
                in_bytes(buffer, n, &t)?.into_owned()
            } else {
                vec![0u8; n * t.size]
            };
            c.comm.bcast(r, &mut data)?;
            if c.me != r {
                write_packed(buffer, n, &t, &data)?;
            }
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Reduce(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count_: c_int,
    datatype: c_int,
    op: c_int,
    root_: c_int,
    comm: c_int,
) -> c_int {
    call("MPI_Reduce", comm, || {
        if let Some(x) = inter::of(comm)? {
            // SAFETY: the caller's buffers and arrays, passed on.
            return unsafe { inter::reduce(&x, sendbuf, recvbuf, count_, datatype, op, root_) };
        }
        let c = ctx(comm)?;
        let t = ty(datatype)?;
        let n = count(count_)?;
        let r = root(&c.comm, root_)?;
        let (f, commute) = combiner(op, datatype, &t)?;
        if n == 0 || t.size == 0 {
            return Ok(());
        }
        // SAFETY: the caller's buffers of `n` elements.
        unsafe {
            let data = if c.me == r {
                reduce_input(sendbuf, recvbuf, n, &t)?
            } else {
                in_bytes(sendbuf, n, &t)?
            };
            reduce_into(
                &c,
                "MPI_Reduce",
                Some(r),
                data,
                &t,
                op,
                &f,
                commute,
                recvbuf,
                n,
            )?;
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Allreduce(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count_: c_int,
    datatype: c_int,
    op: c_int,
    comm: c_int,
) -> c_int {
    call("MPI_Allreduce", comm, || {
        if let Some(x) = inter::of(comm)? {
            // SAFETY: the caller's buffers and arrays, passed on.
            return unsafe { inter::allreduce(&x, sendbuf, recvbuf, count_, datatype, op) };
        }
        let c = ctx(comm)?;
        let t = ty(datatype)?;
        let n = count(count_)?;
        let (f, commute) = combiner(op, datatype, &t)?;
        if n == 0 || t.size == 0 {
            return Ok(());
        }
        // SAFETY: the caller's buffers of `n` elements.
        unsafe {
            let data = reduce_input(sendbuf, recvbuf, n, &t)?;
            reduce_into(
                &c,
                "MPI_Allreduce",
                None,
                data,
                &t,
                op,
                &f,
                commute,
                recvbuf,
                n,
            )?;
        }
        Ok(())
    })
}

/// The whole reduction of `n * p` elements on every rank (for reduce_scatter).
unsafe fn reduce_all(
    c: &Ctx,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    total: usize,
    datatype: c_int,
    op: c_int,
) -> Result<(Arc<TypeInfo>, Vec<u8>), MpiError> {
    let t = ty(datatype)?;
    let (f, commute) = combiner(op, datatype, &t)?;
    if total == 0 || t.size == 0 {
        return Ok((t, Vec::new()));
    }
    // SAFETY: the caller's buffers of `total` elements.
    let data = unsafe { reduce_input(sendbuf, recvbuf, total, &t)? };
    let out = checked_reduction(c, "MPI_Reduce_scatter", None, &data, &t, op, &f, commute)?
        .unwrap_or_default();
    Ok((t, out))
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Reduce_scatter_block(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcount: c_int,
    datatype: c_int,
    op: c_int,
    comm: c_int,
) -> c_int {
    call("MPI_Reduce_scatter_block", comm, || {
        if let Some(x) = inter::of(comm)? {
            // SAFETY: the caller's buffers and arrays, passed on.
            return unsafe {
                inter::reduce_scatter(
                    &x,
                    sendbuf,
                    recvbuf,
                    &vec![count(recvcount)?; x.local_size()],
                    datatype,
                    op,
                )
            };
        }
        let c = ctx(comm)?;
        let n = count(recvcount)?;
        // SAFETY: the caller's buffers.
        unsafe {
            let (t, all) = reduce_all(&c, sendbuf, recvbuf, n * c.p, datatype, op)?;
            let b = n * t.size;
            let at = c.me as usize * b;
            write_packed(recvbuf, n, &t, all.get(at..at + b).unwrap_or(&[]))
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Reduce_scatter(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    datatype: c_int,
    op: c_int,
    comm: c_int,
) -> c_int {
    call("MPI_Reduce_scatter", comm, || {
        if let Some(x) = inter::of(comm)? {
            // SAFETY: the caller's buffers and arrays, passed on.
            return unsafe {
                {
                    let counts = ints(recvcounts, x.local_size(), "recvcounts")?;
                    let counts: Vec<usize> =
                        counts.iter().map(|&k| count(k)).collect::<Result<_, _>>()?;
                    inter::reduce_scatter(&x, sendbuf, recvbuf, &counts, datatype, op)
                }
            };
        }
        let c = ctx(comm)?;
        // SAFETY: the caller's arrays and buffers.
        unsafe {
            let counts = ints(recvcounts, c.p, "recvcounts")?;
            let counts: Vec<usize> = counts.iter().map(|&k| count(k)).collect::<Result<_, _>>()?;
            let total: usize = counts.iter().sum();
            let (t, all) = reduce_all(&c, sendbuf, recvbuf, total, datatype, op)?;
            let before: usize = counts[..c.me as usize].iter().sum();
            let (at, b) = (before * t.size, counts[c.me as usize] * t.size);
            write_packed(
                recvbuf,
                counts[c.me as usize],
                &t,
                all.get(at..at + b).unwrap_or(&[]),
            )
        }
    })
}

unsafe fn scan(
    name: &str,
    exclusive: bool,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count_: c_int,
    datatype: c_int,
    op: c_int,
    comm: c_int,
) -> c_int {
    call(name, comm, || {
        inter::intra(comm, name)?;
        let c = ctx(comm)?;
        let t = ty(datatype)?;
        let n = count(count_)?;
        let (f, _) = combiner(op, datatype, &t)?;
        // SAFETY: the caller's buffers of `n` elements.
        unsafe {
            let mine = reduce_input(sendbuf, recvbuf, n, &t)?.into_owned();
            // The prefix x0 ∘ … ∘ x(me−1) from the left neighbour, in rank order.
            let prefix = if c.me > 0 {
                Some(c.recv(name, c.me - 1, TAG_SCAN, n * t.size)?)
            } else {
                None
            };
            let upto = match &prefix {
                Some(p) => {
                    let mut acc = p.clone();
                    combine_all(&f, t.size, &mut acc, &mine);
                    acc
                }
                None => mine,
            };
            if (c.me as usize) + 1 < c.p {
                c.twin.send(c.me + 1, TAG_SCAN, &upto)?;
            }
            match (exclusive, prefix) {
                (false, _) => write_packed(recvbuf, n, &t, &upto)?,
                (true, Some(p)) => write_packed(recvbuf, n, &t, &p)?,
                (true, None) => {}
            }
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Scan(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count_: c_int,
    datatype: c_int,
    op: c_int,
    comm: c_int,
) -> c_int {
    // SAFETY: passed on.
    unsafe {
        scan(
            "MPI_Scan", false, sendbuf, recvbuf, count_, datatype, op, comm,
        )
    }
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Exscan(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count_: c_int,
    datatype: c_int,
    op: c_int,
    comm: c_int,
) -> c_int {
    // SAFETY: passed on.
    unsafe {
        scan(
            "MPI_Exscan",
            true,
            sendbuf,
            recvbuf,
            count_,
            datatype,
            op,
            comm,
        )
    }
}

pub(super) fn at(buf: *const c_void, elems: usize, t: &TypeInfo) -> *const c_void {
    (buf as *const u8)
        .wrapping_offset(elems as isize * t.extent)
        .cast()
}

pub(super) fn at_mut(buf: *mut c_void, elems: usize, t: &TypeInfo) -> *mut c_void {
    (buf as *mut u8)
        .wrapping_offset(elems as isize * t.extent)
        .cast()
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Gather(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: c_int,
    root_: c_int,
    comm: c_int,
) -> c_int {
    call("MPI_Gather", comm, || {
        if let Some(x) = inter::of(comm)? {
            // SAFETY: the caller's buffers and arrays, passed on.
            return unsafe {
                inter::gather(
                    &x,
                    "MPI_Gather",
                    sendbuf,
                    sendcount,
                    sendtype,
                    recvbuf,
                    &|| inter::even(recvcount, x.remote_size()),
                    recvtype,
                    root_,
                )
            };
        }
        let c = ctx(comm)?;
        let r = root(&c.comm, root_)?;
        // SAFETY: the caller's buffers.
        unsafe {
            let data = if c.me == r && in_place(sendbuf) {
                let rt = ty(recvtype)?;
                let rn = count(recvcount)?;
                in_bytes(at(recvbuf, r as usize * rn, &rt), rn, &rt)?
            } else {
                in_bytes(sendbuf, count(sendcount)?, &*ty(sendtype)?)?
            };
            if let Some(all) = c.comm.gather(r, &data)? {
                let rt = ty(recvtype)?;
                write_packed(recvbuf, count(recvcount)? * c.p, &rt, &all)?;
            }
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Scatter(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: c_int,
    root_: c_int,
    comm: c_int,
) -> c_int {
    call("MPI_Scatter", comm, || {
        if let Some(x) = inter::of(comm)? {
            // SAFETY: the caller's buffers and arrays, passed on.
            return unsafe {
                inter::scatter(
                    &x,
                    "MPI_Scatter",
                    sendbuf,
                    &|| inter::even(sendcount, x.remote_size()),
                    sendtype,
                    recvbuf,
                    recvcount,
                    recvtype,
                    root_,
                )
            };
        }
        let c = ctx(comm)?;
        let r = root(&c.comm, root_)?;
        // SAFETY: the caller's buffers.
        unsafe {
            let keep = c.me == r && in_place(recvbuf);
            let (data, block) = if c.me == r {
                let st = ty(sendtype)?;
                let sn = count(sendcount)?;
                (in_bytes(sendbuf, sn * c.p, &st)?, sn * st.size)
            } else {
                (
                    Cow::Borrowed(&[][..]),
                    count(recvcount)? * ty(recvtype)?.size,
                )
            };
            let mine = c.comm.scatter(r, &data, block)?;
            if !keep {
                write_packed(recvbuf, count(recvcount)?, &*ty(recvtype)?, &mine)?;
            }
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Allgather(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: c_int,
    comm: c_int,
) -> c_int {
    call("MPI_Allgather", comm, || {
        if let Some(x) = inter::of(comm)? {
            // SAFETY: the caller's buffers and arrays, passed on.
            return unsafe {
                inter::allgather(
                    &x,
                    "MPI_Allgather",
                    sendbuf,
                    sendcount,
                    sendtype,
                    recvbuf,
                    &inter::even(recvcount, x.remote_size())?,
                    recvtype,
                )
            };
        }
        let c = ctx(comm)?;
        let rt = ty(recvtype)?;
        let rn = count(recvcount)?;
        // SAFETY: the caller's buffers.
        unsafe {
            let data = if in_place(sendbuf) {
                in_bytes(at(recvbuf, c.me as usize * rn, &rt), rn, &rt)?
            } else {
                in_bytes(sendbuf, count(sendcount)?, &*ty(sendtype)?)?
            };
            let all = c.comm.allgather(&data)?;
            write_packed(recvbuf, rn * c.p, &rt, &all)?;
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Alltoall(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: c_int,
    comm: c_int,
) -> c_int {
    call("MPI_Alltoall", comm, || {
        if let Some(x) = inter::of(comm)? {
            // SAFETY: the caller's buffers and arrays, passed on.
            return unsafe {
                inter::alltoall(
                    &x,
                    "MPI_Alltoall",
                    sendbuf,
                    &inter::even(sendcount, x.remote_size())?,
                    sendtype,
                    recvbuf,
                    &inter::even(recvcount, x.remote_size())?,
                    recvtype,
                )
            };
        }
        let c = ctx(comm)?;
        let rt = ty(recvtype)?;
        let rn = count(recvcount)?;
        // SAFETY: the caller's buffers.
        unsafe {
            let data = if in_place(sendbuf) {
                in_bytes(recvbuf, rn * c.p, &rt)?.into_owned()
            } else {
                in_bytes(sendbuf, count(sendcount)? * c.p, &*ty(sendtype)?)?.into_owned()
            };
            let all = c.comm.alltoall(&data)?;
            write_packed(recvbuf, rn * c.p, &rt, &all)?;
        }
        Ok(())
    })
}

/// Counts and displacements of a v-collective, checked.
pub(super) unsafe fn counts_displs(
    counts: *const c_int,
    displs: *const c_int,
    p: usize,
) -> Result<Vec<(usize, usize)>, MpiError> {
    // SAFETY: two arrays of `p` ints.
    let (c, d) = unsafe {
        (
            ints(counts, p, "the count array")?,
            ints(displs, p, "the displacement array")?,
        )
    };
    c.iter()
        .zip(d)
        .map(|(&k, &d)| {
            let d = usize::try_from(d)
                .map_err(|_| MpiError::new(Class::Arg, format!("displacement {d} is negative")))?;
            Ok((count(k)?, d))
        })
        .collect()
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Gatherv(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    displs: *const c_int,
    recvtype: c_int,
    root_: c_int,
    comm: c_int,
) -> c_int {
    call("MPI_Gatherv", comm, || {
        if let Some(x) = inter::of(comm)? {
            // SAFETY: the caller's buffers and arrays, passed on.
            return unsafe {
                inter::gather(
                    &x,
                    "MPI_Gatherv",
                    sendbuf,
                    sendcount,
                    sendtype,
                    recvbuf,
                    &|| counts_displs(recvcounts, displs, x.remote_size()),
                    recvtype,
                    root_,
                )
            };
        }
        let c = ctx(comm)?;
        let r = root(&c.comm, root_)?;
        // SAFETY: the caller's buffers and arrays.
        unsafe {
            if c.me != r {
                let data = in_bytes(sendbuf, count(sendcount)?, &*ty(sendtype)?)?;
                c.twin.send(r, TAG_GATHERV, &data)?;
                return Ok(());
            }
            let rt = ty(recvtype)?;
            let cd = counts_displs(recvcounts, displs, c.p)?;
            if !in_place(sendbuf) {
                let data = in_bytes(sendbuf, count(sendcount)?, &*ty(sendtype)?)?;
                let (k, d) = cd[r as usize];
                write_packed(at_mut(recvbuf, d, &rt), k, &rt, &data)?;
            }
            for (q, &(k, d)) in cd.iter().enumerate() {
                if q as u32 == r {
                    continue;
                }
                let got = c.recv("MPI_Gatherv", q as u32, TAG_GATHERV, k * rt.size)?;
                write_packed(at_mut(recvbuf, d, &rt), k, &rt, &got)?;
            }
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Scatterv(
    sendbuf: *const c_void,
    sendcounts: *const c_int,
    displs: *const c_int,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: c_int,
    root_: c_int,
    comm: c_int,
) -> c_int {
    call("MPI_Scatterv", comm, || {
        if let Some(x) = inter::of(comm)? {
            // SAFETY: the caller's buffers and arrays, passed on.
            return unsafe {
                inter::scatter(
                    &x,
                    "MPI_Scatterv",
                    sendbuf,
                    &|| counts_displs(sendcounts, displs, x.remote_size()),
                    sendtype,
                    recvbuf,
                    recvcount,
                    recvtype,
                    root_,
                )
            };
        }
        let c = ctx(comm)?;
        let r = root(&c.comm, root_)?;
        // SAFETY: the caller's buffers and arrays.
        unsafe {
            if c.me != r {
                let rt = ty(recvtype)?;
                let rn = count(recvcount)?;
                let got = c.recv("MPI_Scatterv", r, TAG_SCATTERV, rn * rt.size)?;
                return write_packed(recvbuf, rn, &rt, &got);
            }
            let st = ty(sendtype)?;
            let cd = counts_displs(sendcounts, displs, c.p)?;
            let mut reqs = Vec::new();
            for (q, &(k, d)) in cd.iter().enumerate() {
                let data = in_bytes(at(sendbuf, d, &st), k, &st)?.into_owned();
                if q as u32 == r {
                    if !in_place(recvbuf) {
                        write_packed(recvbuf, count(recvcount)?, &*ty(recvtype)?, &data)?;
                    }
                } else {
                    reqs.push(c.twin.isend(q as u32, TAG_SCATTERV, data)?);
                }
            }
            qcg::wait_all(reqs)?;
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Allgatherv(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    displs: *const c_int,
    recvtype: c_int,
    comm: c_int,
) -> c_int {
    call("MPI_Allgatherv", comm, || {
        if let Some(x) = inter::of(comm)? {
            // SAFETY: the caller's buffers and arrays, passed on.
            return unsafe {
                inter::allgather(
                    &x,
                    "MPI_Allgatherv",
                    sendbuf,
                    sendcount,
                    sendtype,
                    recvbuf,
                    &counts_displs(recvcounts, displs, x.remote_size())?,
                    recvtype,
                )
            };
        }
        let c = ctx(comm)?;
        let rt = ty(recvtype)?;
        // SAFETY: the caller's buffers and arrays.
        unsafe {
            let cd = counts_displs(recvcounts, displs, c.p)?;
            let (k, d) = cd[c.me as usize];
            let mine = if in_place(sendbuf) {
                in_bytes(at(recvbuf, d, &rt), k, &rt)?.into_owned()
            } else {
                in_bytes(sendbuf, count(sendcount)?, &*ty(sendtype)?)?.into_owned()
            };
            // Rank 0 collects every block in rank order, then broadcasts them all.
            let total: usize = cd.iter().map(|(k, _)| k * rt.size).sum();
            let mut all = vec![0u8; total];
            if c.me == 0 {
                let mut at_ = 0;
                for (q, &(k, _)) in cd.iter().enumerate() {
                    let b = k * rt.size;
                    if q == 0 {
                        all[..b.min(mine.len())].copy_from_slice(&mine[..b.min(mine.len())]);
                    } else {
                        let got = c.recv("MPI_Allgatherv", q as u32, TAG_GATHERV, b)?;
                        all[at_..at_ + got.len()].copy_from_slice(&got);
                    }
                    at_ += b;
                }
            } else {
                c.twin.send(0, TAG_GATHERV, &mine)?;
            }
            c.comm.bcast(0, &mut all)?;
            let mut at_ = 0;
            for &(k, d) in &cd {
                let b = k * rt.size;
                write_packed(at_mut(recvbuf, d, &rt), k, &rt, &all[at_..at_ + b])?;
                at_ += b;
            }
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Alltoallv(
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
    call("MPI_Alltoallv", comm, || {
        if let Some(x) = inter::of(comm)? {
            // SAFETY: the caller's buffers and arrays, passed on.
            return unsafe {
                inter::alltoall(
                    &x,
                    "MPI_Alltoallv",
                    sendbuf,
                    &counts_displs(sendcounts, sdispls, x.remote_size())?,
                    sendtype,
                    recvbuf,
                    &counts_displs(recvcounts, rdispls, x.remote_size())?,
                    recvtype,
                )
            };
        }
        let c = ctx(comm)?;
        let rt = ty(recvtype)?;
        // SAFETY: the caller's buffers and arrays.
        unsafe {
            let rcd = counts_displs(recvcounts, rdispls, c.p)?;
            // Every block to send, packed before anything is received (MPI_IN_PLACE).
            let blocks: Vec<Vec<u8>> = if in_place(sendbuf) {
                rcd.iter()
                    .map(|&(k, d)| in_bytes(at(recvbuf, d, &rt), k, &rt).map(Cow::into_owned))
                    .collect::<Result<_, _>>()?
            } else {
                let st = ty(sendtype)?;
                let scd = counts_displs(sendcounts, sdispls, c.p)?;
                scd.iter()
                    .map(|&(k, d)| in_bytes(at(sendbuf, d, &st), k, &st).map(Cow::into_owned))
                    .collect::<Result<_, _>>()?
            };
            let mut sends = Vec::new();
            for (q, b) in blocks.into_iter().enumerate() {
                sends.push((q, c.twin.isend(q as u32, TAG_ALLTOALLV, b)?));
            }
            // Each block checked for its size, each peer waited for at most the
            // collective timeout: counts that do not match name the rank.
            for (q, &(k, d)) in rcd.iter().enumerate() {
                let got = c.recv("MPI_Alltoallv", q as u32, TAG_ALLTOALLV, k * rt.size)?;
                write_packed(at_mut(recvbuf, d, &rt), k, &rt, &got)?;
            }
            c.wait_sends("MPI_Alltoallv", sends)?;
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Op_create(
    user_fn: Option<state::UserFn>,
    commute: c_int,
    op: *mut c_int,
) -> c_int {
    call("MPI_Op_create", COMM_WORLD, || {
        let f = user_fn.ok_or_else(|| MpiError::new(Class::Arg, "the user function is NULL"))?;
        let h = state::with(|s| Ok(s.add_op(f, commute != 0)))?;
        // SAFETY: an output handle.
        unsafe { put(op, h) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Op_free(op: *mut c_int) -> c_int {
    call("MPI_Op_free", COMM_WORLD, || {
        // SAFETY: an op handle.
        unsafe {
            let h = crate::ffi::get(op, "the operation")?;
            state::with(|s| s.free_op(h))?;
            op.write(0);
        }
        Ok(())
    })
}
