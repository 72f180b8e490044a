//! Point-to-point in standard mode: blocking and nonblocking sends and receives,
//! probes, counts, sendrecv. The other modes, persistent requests and matched
//! probes are in [`super::modes`].
#![allow(unsafe_code)]
#![allow(clippy::missing_safety_doc)]
#![allow(clippy::too_many_arguments)]

use super::requests::complete;
use super::*;
use crate::modes::Mode;

// ---- point-to-point ----------------------------------------------------------

unsafe fn send(
    name: &str,
    buf: *const c_void,
    n: c_int,
    t: c_int,
    d: c_int,
    tag: c_int,
    comm: c_int,
) -> c_int {
    call(name, comm, || {
        state::with_comm_ty(comm, t, |c, ty| {
            let n = count(n)?;
            let Some(d) = dest(c, d)? else { return Ok(()) };
            let tag = send_tag(tag)?;
            // SAFETY: `n` elements of `ty` at `buf`.
            let data = unsafe { in_bytes(buf, n, ty)? };
            c.send(d, tag, &data)?;
            Ok(())
        })
    })
}

/// The bytes of `n` elements of a plain datatype of `elem` bytes at `buf`, if
/// nothing is wrong with them: `None` sends the caller to its full path, which
/// says what is.
#[inline]
fn plain_len(buf: *const c_void, n: c_int, elem: usize) -> Option<usize> {
    let len = usize::try_from(n).ok()?.checked_mul(elem)?;
    let bad = len > isize::MAX as usize || (len > 0 && (buf.is_null() || buf == IN_PLACE));
    (!bad).then_some(len)
}

/// A rank of `c` (no `MPI_PROC_NULL`, no wildcard), for the plain paths.
#[inline]
fn plain_rank(c: &qcg::Comm, r: c_int) -> Option<u32> {
    u32::try_from(r).ok().filter(|&r| r < c.size())
}

/// A tag (no wildcard), for the plain paths.
#[inline]
fn plain_tag(t: c_int) -> Option<u32> {
    u32::try_from(t).ok().filter(|&t| t <= state::TAG_UB as u32)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Send(
    buf: *const c_void,
    count: c_int,
    datatype: c_int,
    dest: c_int,
    tag: c_int,
    comm: c_int,
) -> c_int {
    // The usual send (the thread's last communicator and datatype, a plain
    // datatype, a rank and a tag) goes straight to libqcg: the checks and lookups
    // of the full path were a third of the MPI layer's share of a small message's
    // round trip.
    let fast = state::with_plain(comm, datatype, |c, elem| {
        let len = plain_len(buf, count, elem)?;
        let d = plain_rank(c, dest)?;
        let tag = plain_tag(tag)?;
        let data: &[u8] = if len == 0 {
            &[]
        } else {
            // SAFETY: the caller's buffer of `count` elements of a contiguous
            // datatype: `len` bytes from `buf`, not null (checked above).
            unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), len) }
        };
        Some(c.send(d, tag, data))
    });
    match fast {
        Some(Some(Ok(()))) => 0,
        Some(Some(Err(e))) => call("MPI_Send", comm, || Err(e.into())),
        // SAFETY: passed on.
        _ => unsafe { send("MPI_Send", buf, count, datatype, dest, tag, comm) },
    }
}

/// Synchronous mode: the message is announced and its bytes go only once the
/// receiver has matched it with a receive, whatever its size, so the call returns
/// after the match (MPI 3.1 §3.4).
#[no_mangle]
pub unsafe extern "C" fn PMPI_Ssend(
    buf: *const c_void,
    count_: c_int,
    datatype: c_int,
    dest_: c_int,
    tag_: c_int,
    comm: c_int,
) -> c_int {
    call("MPI_Ssend", comm, || {
        let (c, ty) = comm_ty(comm, datatype)?;
        let n = count(count_)?;
        let Some(d) = dest(&c, dest_)? else {
            return Ok(());
        };
        let tag = send_tag(tag_)?;
        // SAFETY: `n` elements of `ty` at `buf`.
        let data = unsafe { in_bytes(buf, n, &ty)? };
        // SAFETY: `data` lives until the request is waited for, just below.
        let r = unsafe { c.issend_raw(d, tag, data.as_ptr(), data.len())? };
        r.wait()?;
        Ok(())
    })
}

/// A message too long for a receive's buffer of `cap` bytes: libqcg leaves it
/// queued, MPI consumes it (MPI 3.1 §3.2.4), `keep` takes what fits (as a matched
/// receive's does, and Open MPI's), and the error says so.
fn truncated(
    c: &qcg::Comm,
    src: Option<u32>,
    tag: Option<u32>,
    cap: usize,
    keep: impl FnOnce(&[u8]) -> Result<(), MpiError>,
) -> MpiError {
    let m = match c.recv(src, tag) {
        Ok(m) => m,
        Err(e) => return e.into(),
    };
    if let Err(e) = keep(&m.data[..cap.min(m.data.len())]) {
        return e;
    }
    MpiError::new(
        Class::Truncate,
        format!(
            "a message of {} bytes from rank {} (tag {}) does not fit a buffer of {cap} bytes",
            m.data.len(),
            m.source,
            m.tag,
        ),
    )
}

/// Receives straight into `out` (a large message lands there with no copy); one too
/// long is consumed, what fits kept.
fn recv_contiguous(
    c: &qcg::Comm,
    src: Option<u32>,
    tag: Option<u32>,
    out: &mut [u8],
) -> Result<St, MpiError> {
    match c.recv_into(src, tag, out) {
        Ok(st) => Ok(St::of(st)),
        Err(qcg::Error::Truncated { .. }) => Err(truncated(c, src, tag, out.len(), |fit| {
            out[..fit.len()].copy_from_slice(fit);
            Ok(())
        })),
        Err(e) => Err(e.into()),
    }
}

/// Receives into `n` elements of `ty` at `buf`.
unsafe fn recv_into(
    c: &qcg::Comm,
    buf: *mut c_void,
    n: usize,
    ty: &TypeInfo,
    src: Option<u32>,
    tag: Option<u32>,
) -> Result<St, MpiError> {
    if ty.is_contiguous() {
        // SAFETY: `n` elements of `ty` at `buf`.
        let out = unsafe { out_span(buf, n, ty)? };
        recv_contiguous(c, src, tag, out)
    } else {
        check_recv(buf, n, ty)?;
        let mut tmp = vec![0u8; n * ty.size];
        match c.recv_into(src, tag, &mut tmp) {
            Ok(st) => {
                // SAFETY: `n` elements of `ty` at `buf`, checked above.
                unsafe { write_packed(buf, n, ty, &tmp[..st.len])? };
                Ok(St::of(st))
            }
            Err(qcg::Error::Truncated { .. }) => Err(truncated(c, src, tag, n * ty.size, |fit| {
                // SAFETY: as above, with what fits of the message.
                unsafe { write_packed(buf, n, ty, fit) }
            })),
            Err(e) => Err(e.into()),
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Recv(
    buf: *mut c_void,
    count: c_int,
    datatype: c_int,
    source: c_int,
    tag: c_int,
    comm: c_int,
    status: *mut MpiStatus,
) -> c_int {
    // The usual receive, as the usual send above (the wildcards included).
    let fast = state::with_plain(comm, datatype, |c, elem| {
        let len = plain_len(buf, count, elem)?;
        let src = if source == ANY_SOURCE {
            None
        } else {
            Some(plain_rank(c, source)?)
        };
        let tag = if tag == ANY_TAG {
            None
        } else {
            Some(plain_tag(tag)?)
        };
        let out: &mut [u8] = if len == 0 {
            &mut []
        } else {
            // SAFETY: the caller's writable buffer of `count` elements of a
            // contiguous datatype: `len` bytes from `buf`, not null.
            unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), len) }
        };
        Some(recv_contiguous(c, src, tag, out))
    });
    if let Some(Some(r)) = fast {
        return call("MPI_Recv", comm, || {
            // SAFETY: a status or MPI_STATUS_IGNORE.
            unsafe { put_status(status, r?) };
            Ok(())
        });
    }
    call("MPI_Recv", comm, || {
        let st = state::with_comm_ty(comm, datatype, |c, ty| {
            let n = state::count(count)?;
            let src = state::source(c, source)?;
            let tag = recv_tag(tag)?;
            Ok(match src {
                None => St::empty(PROC_NULL),
                // SAFETY: the receive buffer.
                Some(src) => unsafe { recv_into(c, buf, n, ty, src, tag)? },
            })
        })?;
        // SAFETY: a status or MPI_STATUS_IGNORE.
        unsafe { put_status(status, st) };
        Ok(())
    })
}

/// Starts a receive of `n` elements of `ty` at `buf`.
pub(super) unsafe fn post_recv(
    c: &qcg::Comm,
    comm: c_int,
    buf: *mut c_void,
    n: usize,
    ty: &Arc<TypeInfo>,
    src: Option<u32>,
    tag: Option<u32>,
) -> Result<Req, MpiError> {
    if ty.is_contiguous() {
        // SAFETY: `n` elements of `ty` at `buf`.
        let out = unsafe { out_span(buf, n, ty)? };
        // SAFETY: MPI requires the buffer to stay valid and untouched until the
        // request completes; a request freed early is kept until finalize.
        let r = unsafe { c.irecv_raw(src, tag, out.as_mut_ptr(), out.len())? };
        Ok(Req {
            inner: Some(r),
            meta: Meta::Plain,
            cancelled: false,
            comm,
        })
    } else {
        check_recv(buf, n, ty)?;
        let r = c.irecv_into(src, tag, vec![0u8; n * ty.size])?;
        Ok(Req {
            inner: Some(r),
            meta: Meta::Unpack {
                base: buf as usize,
                count: n,
                ty: ty.clone(),
            },
            cancelled: false,
            comm,
        })
    }
}

pub(super) fn null_req(comm: c_int) -> Req {
    Req {
        inner: None,
        meta: Meta::Null,
        cancelled: false,
        comm,
    }
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Isend(
    buf: *const c_void,
    count: c_int,
    datatype: c_int,
    dest: c_int,
    tag: c_int,
    comm: c_int,
    request: *mut c_int,
) -> c_int {
    // SAFETY: passed on.
    unsafe {
        super::modes::isend_mode(
            "MPI_Isend",
            Mode::Standard,
            buf,
            count,
            datatype,
            dest,
            tag,
            comm,
            request,
        )
    }
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Irecv(
    buf: *mut c_void,
    count: c_int,
    datatype: c_int,
    source: c_int,
    tag: c_int,
    comm: c_int,
    request: *mut c_int,
) -> c_int {
    call("MPI_Irecv", comm, || {
        // The communicator and datatype borrowed from the lookup cache, not cloned.
        state::with_comm_ty(comm, datatype, |c, ty| {
            let n = state::count(count)?;
            let src = state::source(c, source)?;
            let tag = recv_tag(tag)?;
            let req = match src {
                None => null_req(comm),
                // SAFETY: the receive buffer.
                Some(src) => unsafe { post_recv(c, comm, buf, n, ty, src, tag)? },
            };
            let h = state::with(|s| Ok(s.add_request(req)))?;
            // SAFETY: an output handle.
            unsafe { put(request, h) }
        })
    })
}

/// Finishes a request whose libqcg outcome is `r`.
/// A probe's communicator, source (`None` for `MPI_PROC_NULL`) and tag.
pub(super) type ProbeArgs = (Arc<qcg::Comm>, Option<Option<u32>>, Option<u32>);

pub(super) fn probe_args(comm: c_int, source: c_int, tag: c_int) -> Result<ProbeArgs, MpiError> {
    let c = comm_of(comm)?;
    let src = state::source(&c, source)?;
    let tag = recv_tag(tag)?;
    Ok((c, src, tag))
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Probe(
    source: c_int,
    tag: c_int,
    comm: c_int,
    status: *mut MpiStatus,
) -> c_int {
    call("MPI_Probe", comm, || {
        let (c, src, tag) = probe_args(comm, source, tag)?;
        let st = match src {
            None => St::empty(PROC_NULL),
            Some(src) => St::of(c.probe(src, tag)?),
        };
        // SAFETY: a status or MPI_STATUS_IGNORE.
        unsafe { put_status(status, st) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Iprobe(
    source: c_int,
    tag: c_int,
    comm: c_int,
    flag: *mut c_int,
    status: *mut MpiStatus,
) -> c_int {
    call("MPI_Iprobe", comm, || {
        let (c, src, tag) = probe_args(comm, source, tag)?;
        let st = match src {
            None => Some(St::empty(PROC_NULL)),
            Some(src) => c.iprobe(src, tag)?.map(St::of),
        };
        // SAFETY: the caller's flag and status.
        unsafe {
            put(flag, c_int::from(st.is_some()))?;
            if let Some(st) = st {
                put_status(status, st);
            }
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Get_count(
    status: *const MpiStatus,
    datatype: c_int,
    count: *mut c_int,
) -> c_int {
    call("MPI_Get_count", 1, || {
        if status.is_null() || status as usize == STATUS_IGNORE {
            return Err(MpiError::new(
                Class::Arg,
                "the status is NULL or MPI_STATUS_IGNORE",
            ));
        }
        let ty = state::with(|s| s.any_ty(datatype))?;
        // SAFETY: a status the caller passes.
        let bytes = unsafe { (*status).bytes() } as usize;
        let n = if ty.size == 0 {
            0
        } else if bytes % ty.size != 0 {
            UNDEFINED
        } else {
            (bytes / ty.size) as c_int
        };
        // SAFETY: an output int.
        unsafe { put(count, n) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Sendrecv(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: c_int,
    dest: c_int,
    sendtag: c_int,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: c_int,
    source: c_int,
    recvtag: c_int,
    comm: c_int,
    status: *mut MpiStatus,
) -> c_int {
    call("MPI_Sendrecv", comm, || {
        let (c, sty) = comm_ty(comm, sendtype)?;
        let rty = state::with(|s| s.ty(recvtype))?;
        let (sn, rn) = (count(sendcount)?, count(recvcount)?);
        let d = state::dest(&c, dest)?;
        let stag = send_tag(sendtag)?;
        let src = state::source(&c, source)?;
        let rtag = recv_tag(recvtag)?;
        // SAFETY: the send buffer, packed before the receive can write anything.
        let data = unsafe { in_bytes(sendbuf, sn, &sty)? }.into_owned();
        // SAFETY: the receive buffer.
        let st = unsafe { exchange(&c, comm, &data, d, stag, recvbuf, rn, &rty, src, rtag)? };
        // SAFETY: a status or MPI_STATUS_IGNORE.
        unsafe { put_status(status, st) };
        Ok(())
    })
}

/// Posts the receive, sends `data`, then waits for the receive.
unsafe fn exchange(
    c: &qcg::Comm,
    comm: c_int,
    data: &[u8],
    d: Option<u32>,
    stag: u32,
    recvbuf: *mut c_void,
    rn: usize,
    rty: &Arc<TypeInfo>,
    src: Option<Option<u32>>,
    rtag: Option<u32>,
) -> Result<St, MpiError> {
    let req = match src {
        None => None,
        // SAFETY: the receive buffer.
        Some(src) => Some(unsafe { post_recv(c, comm, recvbuf, rn, rty, src, rtag)? }),
    };
    if let Some(d) = d {
        if let Err(e) = c.send(d, stag, data) {
            if let Some(q) = req.and_then(|r| r.inner) {
                q.cancel();
                let _ = q.wait();
            }
            return Err(e.into());
        }
    }
    match req {
        None => Ok(St::empty(PROC_NULL)),
        Some(r) => {
            let out = r.inner.map(qcg::Request::wait);
            // SAFETY: the receive buffer.
            unsafe { complete(&r.meta, false, out) }
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Sendrecv_replace(
    buf: *mut c_void,
    count: c_int,
    datatype: c_int,
    dest: c_int,
    sendtag: c_int,
    source: c_int,
    recvtag: c_int,
    comm: c_int,
    status: *mut MpiStatus,
) -> c_int {
    call("MPI_Sendrecv_replace", comm, || {
        let (c, ty) = comm_ty(comm, datatype)?;
        let n = state::count(count)?;
        let d = state::dest(&c, dest)?;
        let stag = send_tag(sendtag)?;
        let src = state::source(&c, source)?;
        let rtag = recv_tag(recvtag)?;
        // SAFETY: the buffer, copied before the receive writes into it.
        let data = unsafe { in_bytes(buf, n, &ty)? }.into_owned();
        // SAFETY: the same buffer, now the receive's.
        let st = unsafe { exchange(&c, comm, &data, d, stag, buf, n, &ty, src, rtag)? };
        // SAFETY: a status or MPI_STATUS_IGNORE.
        unsafe { put_status(status, st) };
        Ok(())
    })
}
