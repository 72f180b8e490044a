//! Point-to-point beyond standard mode (MPI 3.1 §3.4–3.9): buffered, synchronous
//! and ready sends and their `I` forms, the buffer of buffered sends, persistent
//! requests, matched probes. Their bookkeeping (safe code) is [`crate::modes`].
#![allow(unsafe_code)]
#![allow(clippy::missing_safety_doc)]
#![allow(clippy::too_many_arguments)]

use super::p2p::{null_req, post_recv, probe_args};
use super::requests::complete;
use super::*;
use crate::modes::{Matched, Mode, Persistent, Pool, MESSAGE_NO_PROC, MESSAGE_NULL};

// ---- send modes ----------------------------------------------------------------

/// Starts a send of `n` elements of `ty` at `buf` to `d` (`None`: `MPI_PROC_NULL`)
/// in `mode`. A buffered send is copied and complete at once.
pub(super) unsafe fn start_send(
    mode: Mode,
    c: &qcg::Comm,
    comm: c_int,
    buf: *const c_void,
    n: usize,
    ty: &TypeInfo,
    d: Option<u32>,
    tag: u32,
) -> Result<Req, MpiError> {
    let Some(d) = d else {
        return Ok(null_req(comm));
    };
    // SAFETY: `n` elements of `ty` at `buf`.
    let data = unsafe { in_bytes(buf, n, ty)? };
    // SAFETY (the `_raw` calls): MPI requires the buffer to stay untouched until
    // the request completes; a request freed early is kept until finalize.
    let r = match (mode, data) {
        (Mode::Buffered, data) => {
            bsend(c, d, tag, data.into_owned())?;
            return Ok(null_req(comm));
        }
        (Mode::Synchronous, Cow::Borrowed(b)) => unsafe {
            c.issend_raw(d, tag, b.as_ptr(), b.len())?
        },
        (Mode::Synchronous, Cow::Owned(v)) => c.issend(d, tag, v)?,
        (_, Cow::Borrowed(b)) => unsafe { c.isend_raw(d, tag, b.as_ptr(), b.len())? },
        (_, Cow::Owned(v)) => c.isend(d, tag, v)?,
    };
    Ok(Req {
        inner: Some(r),
        meta: Meta::Plain,
        cancelled: false,
        comm,
    })
}

/// A buffered send: the bytes are charged to the attached buffer and sent as an
/// owned copy (see [`crate::modes`]).
fn bsend(c: &qcg::Comm, d: u32, tag: u32, data: Vec<u8>) -> Result<(), MpiError> {
    let charge = state::with(|s| {
        let pool = s.p2p.buffer.as_mut().ok_or_else(|| {
            MpiError::new(
                Class::Buffer,
                format!(
                    "a buffered send of {} bytes, but no buffer is attached (MPI_Buffer_attach)",
                    data.len()
                ),
            )
        })?;
        pool.reap(qcg::Request::is_done);
        pool.fits(data.len())
    })?;
    let r = c.isend(d, tag, data)?;
    state::with(|s| {
        if let Some(p) = s.p2p.buffer.as_mut() {
            p.push(r, charge);
        }
        Ok(())
    })
}

/// Waits for every buffered send still pending (`MPI_Finalize`, which must deliver
/// them); the first failure.
pub(super) fn flush_bsends() -> Result<(), MpiError> {
    let pending = state::with(|s| Ok(s.p2p.buffer.as_mut().map(Pool::take_pending)))?;
    let mut first = Ok(());
    for r in pending.into_iter().flatten() {
        if let Err(e) = r.wait() {
            if first.is_ok() {
                first = Err(e.into());
            }
        }
    }
    first
}

/// A blocking send in `mode`: started, then waited for.
unsafe fn send_mode(
    name: &str,
    mode: Mode,
    buf: *const c_void,
    n: c_int,
    t: c_int,
    d: c_int,
    tag: c_int,
    comm: c_int,
) -> c_int {
    call(name, comm, || {
        let (c, ty) = comm_ty(comm, t)?;
        let n = count(n)?;
        let d = dest(&c, d)?;
        let tag = send_tag(tag)?;
        // SAFETY: `n` elements of `ty` at `buf`, waited for below.
        let req = unsafe { start_send(mode, &c, comm, buf, n, &ty, d, tag)? };
        if let Some(r) = req.inner {
            r.wait()?;
        }
        Ok(())
    })
}

/// A nonblocking send in `mode`.
pub(super) unsafe fn isend_mode(
    name: &str,
    mode: Mode,
    buf: *const c_void,
    n: c_int,
    t: c_int,
    d: c_int,
    tag: c_int,
    comm: c_int,
    request: *mut c_int,
) -> c_int {
    call(name, comm, || {
        // The communicator and datatype borrowed from the lookup cache, not cloned.
        state::with_comm_ty(comm, t, |c, ty| {
            let n = count(n)?;
            let d = dest(c, d)?;
            let tag = send_tag(tag)?;
            // SAFETY: `n` elements of `ty` at `buf`, kept by the program until done.
            let req = unsafe { start_send(mode, c, comm, buf, n, ty, d, tag)? };
            let h = state::with(|s| Ok(s.add_request(req)))?;
            // SAFETY: an output handle.
            unsafe { put(request, h) }
        })
    })
}

/// Buffered mode: returns once the bytes are copied; fails with `MPI_ERR_BUFFER`
/// if the attached buffer has no room (MPI 3.1 §3.6).
#[no_mangle]
pub unsafe extern "C" fn PMPI_Bsend(
    buf: *const c_void,
    count: c_int,
    datatype: c_int,
    dest: c_int,
    tag: c_int,
    comm: c_int,
) -> c_int {
    // SAFETY: passed on.
    unsafe {
        send_mode(
            "MPI_Bsend",
            Mode::Buffered,
            buf,
            count,
            datatype,
            dest,
            tag,
            comm,
        )
    }
}

/// Ready mode: the program promises a matching receive is posted; sent as a
/// standard send, which MPI allows (§3.4).
#[no_mangle]
pub unsafe extern "C" fn PMPI_Rsend(
    buf: *const c_void,
    count: c_int,
    datatype: c_int,
    dest: c_int,
    tag: c_int,
    comm: c_int,
) -> c_int {
    // SAFETY: passed on.
    unsafe {
        send_mode(
            "MPI_Rsend",
            Mode::Ready,
            buf,
            count,
            datatype,
            dest,
            tag,
            comm,
        )
    }
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Ibsend(
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
        isend_mode(
            "MPI_Ibsend",
            Mode::Buffered,
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
pub unsafe extern "C" fn PMPI_Issend(
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
        isend_mode(
            "MPI_Issend",
            Mode::Synchronous,
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
pub unsafe extern "C" fn PMPI_Irsend(
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
        isend_mode(
            "MPI_Irsend",
            Mode::Ready,
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
pub unsafe extern "C" fn PMPI_Buffer_attach(buffer: *mut c_void, size: c_int) -> c_int {
    call("MPI_Buffer_attach", 1, || {
        let size = usize::try_from(size).map_err(|_| {
            MpiError::new(Class::Arg, format!("the buffer's size {size} is negative"))
        })?;
        if buffer.is_null() && size > 0 {
            return Err(MpiError::new(
                Class::Buffer,
                format!("the buffer of {size} bytes is NULL"),
            ));
        }
        state::with(|s| {
            if let Some(p) = &s.p2p.buffer {
                return Err(MpiError::new(
                    Class::Buffer,
                    format!(
                        "a buffer of {} bytes is attached already (MPI_Buffer_detach it first)",
                        p.size
                    ),
                ));
            }
            s.p2p.buffer = Some(Pool::new(buffer as usize, size));
            Ok(())
        })
    })
}

/// Waits until every buffered send charged to the buffer is delivered (MPI 3.1
/// §3.6.1), then gives back its address (in `*(void **)buffer_addr`) and size.
/// With no buffer attached: NULL and 0.
#[no_mangle]
pub unsafe extern "C" fn PMPI_Buffer_detach(buffer_addr: *mut c_void, size: *mut c_int) -> c_int {
    call("MPI_Buffer_detach", 1, || {
        flush_bsends()?;
        let pool = state::with(|s| Ok(s.p2p.buffer.take()))?;
        let (addr, n) = pool.map_or((0, 0), |p| (p.addr, p.size));
        // SAFETY: the caller passes the address of a pointer, and an int.
        unsafe {
            put(buffer_addr as *mut *mut c_void, addr as *mut c_void)?;
            put(size, c_int::try_from(n).unwrap_or(c_int::MAX))
        }
    })
}

// ---- persistent requests ---------------------------------------------------------

/// `MPI_X_init`: checks the arguments and makes an inactive persistent request.
unsafe fn init(
    name: &str,
    mode: Mode,
    buf: *const c_void,
    n: c_int,
    t: c_int,
    peer: c_int,
    tag: c_int,
    comm: c_int,
    request: *mut c_int,
) -> c_int {
    call(name, comm, || {
        let (c, ty) = comm_ty(comm, t)?;
        let count = count(n)?;
        let (peer, tag) = if mode == Mode::Recv {
            (state::source(&c, peer)?, recv_tag(tag)?)
        } else {
            (dest(&c, peer)?.map(Some), Some(send_tag(tag)?))
        };
        if buf.is_null() && ty.span(count).1 > 0 {
            return Err(buffer_null(&ty, count));
        }
        let p = Persistent {
            mode,
            buf: buf as usize,
            count,
            ty,
            comm: c,
            comm_handle: comm,
            peer,
            tag,
        };
        let h = state::with(|s| {
            // A handle from the request table's numbering; inactive, so not in it.
            let h = s.add_request(null_req(comm));
            s.requests.remove(&h);
            s.p2p.persistent.insert(h, p);
            Ok(h)
        })?;
        // SAFETY: an output handle.
        unsafe { put(request, h) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Send_init(
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
        init(
            "MPI_Send_init",
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
pub unsafe extern "C" fn PMPI_Bsend_init(
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
        init(
            "MPI_Bsend_init",
            Mode::Buffered,
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
pub unsafe extern "C" fn PMPI_Ssend_init(
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
        init(
            "MPI_Ssend_init",
            Mode::Synchronous,
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
pub unsafe extern "C" fn PMPI_Rsend_init(
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
        init(
            "MPI_Rsend_init",
            Mode::Ready,
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
pub unsafe extern "C" fn PMPI_Recv_init(
    buf: *mut c_void,
    count: c_int,
    datatype: c_int,
    source: c_int,
    tag: c_int,
    comm: c_int,
    request: *mut c_int,
) -> c_int {
    // SAFETY: passed on.
    unsafe {
        init(
            "MPI_Recv_init",
            Mode::Recv,
            buf,
            count,
            datatype,
            source,
            tag,
            comm,
            request,
        )
    }
}

/// Starts persistent request `h`, which must be inactive.
unsafe fn start_one(h: c_int) -> Result<(), MpiError> {
    let p = state::with(|s| {
        let Some(p) = s.p2p.persistent.get(&h) else {
            return Err(MpiError::new(
                Class::Request,
                if s.requests.contains_key(&h) {
                    format!("request {h} is not persistent (MPI_Send_init, MPI_Recv_init, ... make those)")
                } else {
                    format!("{h} is not a persistent request")
                },
            ));
        };
        if s.requests.contains_key(&h) {
            return Err(MpiError::new(
                Class::Request,
                format!(
                    "persistent request {h} is active: complete it (MPI_Wait, MPI_Test, ...) before starting it again"
                ),
            ));
        }
        Ok(p.clone())
    })?;
    let req = match (p.mode, p.peer) {
        (_, None) => null_req(p.comm_handle),
        // SAFETY: the buffer given to MPI_Recv_init, which MPI keeps valid.
        (Mode::Recv, Some(src)) => unsafe {
            post_recv(
                &p.comm,
                p.comm_handle,
                p.buf as *mut c_void,
                p.count,
                &p.ty,
                src,
                p.tag,
            )?
        },
        // SAFETY: the buffer given to MPI_X_init, which MPI keeps valid.
        (mode, Some(d)) => unsafe {
            start_send(
                mode,
                &p.comm,
                p.comm_handle,
                p.buf as *const c_void,
                p.count,
                &p.ty,
                d,
                p.tag.unwrap_or(0),
            )?
        },
    };
    state::with(|s| {
        s.requests.insert(h, req);
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Start(request: *mut c_int) -> c_int {
    call("MPI_Start", 1, || {
        // SAFETY: a request handle.
        unsafe { start_one(get(request, "the request")?) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Startall(count: c_int, requests: *mut c_int) -> c_int {
    call("MPI_Startall", 1, || {
        let n = state::count(count)?;
        // SAFETY: an array of `n` handles.
        let hs = unsafe { ints(requests, n, "the request array")? };
        for (i, &h) in hs.iter().enumerate() {
            // SAFETY: as MPI_Start.
            unsafe { start_one(h) }
                .map_err(|e| MpiError::new(e.class, format!("request {i}: {}", e.message)))?;
        }
        Ok(())
    })
}

// ---- matched probes ----------------------------------------------------------------

/// Registers what a matched probe took; its `MPI_Message` handle and status.
fn matched(
    m: Option<(qcg::Status, qcg::Request)>,
    comm: c_int,
) -> Result<Option<(c_int, St)>, MpiError> {
    let Some((st, req)) = m else {
        return Ok(None);
    };
    let h = state::with(|s| {
        Ok(s.p2p.add_message(Matched {
            req,
            status: st,
            comm,
        }))
    })?;
    Ok(Some((h, St::of(st))))
}

/// Takes matched message `h` out of the table (`None` for `MPI_MESSAGE_NO_PROC`).
fn take_message(h: c_int) -> Result<Option<Matched>, MpiError> {
    if h == MESSAGE_NO_PROC {
        return Ok(None);
    }
    state::with(|s| {
        s.p2p.messages.remove(&h).map(Some).ok_or_else(|| {
            MpiError::new(
                Class::Request,
                if h == MESSAGE_NULL {
                    "the message is MPI_MESSAGE_NULL (received already, or never probed)".into()
                } else {
                    format!("{h} is not a message from MPI_Mprobe or MPI_Improbe")
                },
            )
        })
    })
}

/// The communicator of matched message `*message` (for the error handler).
unsafe fn message_comm(message: *const c_int) -> c_int {
    if message.is_null() {
        return state::COMM_WORLD;
    }
    // SAFETY: non-null, the caller's message handle.
    let h = unsafe { message.read() };
    state::lock()
        .as_ref()
        .and_then(|s| s.p2p.messages.get(&h).map(|m| m.comm))
        .unwrap_or(state::COMM_WORLD)
}

/// Waits for a message matching `source` and `tag` and takes it out of matching:
/// only `MPI_Mrecv`/`MPI_Imrecv` of `*message` receive it (MPI 3.1 §3.8.2).
#[no_mangle]
pub unsafe extern "C" fn PMPI_Mprobe(
    source: c_int,
    tag: c_int,
    comm: c_int,
    message: *mut c_int,
    status: *mut MpiStatus,
) -> c_int {
    call("MPI_Mprobe", comm, || {
        let (c, src, tag) = probe_args(comm, source, tag)?;
        if message.is_null() {
            return Err(MpiError::new(Class::Arg, "the message argument is NULL"));
        }
        let (h, st) = match src {
            None => (MESSAGE_NO_PROC, St::empty(PROC_NULL)),
            Some(src) => matched(Some(c.mprobe(src, tag)?), comm)?
                .ok_or_else(|| MpiError::new(Class::Intern, "a matched probe took nothing"))?,
        };
        // SAFETY: the caller's message handle and status.
        unsafe {
            put(message, h)?;
            put_status(status, st);
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Improbe(
    source: c_int,
    tag: c_int,
    comm: c_int,
    flag: *mut c_int,
    message: *mut c_int,
    status: *mut MpiStatus,
) -> c_int {
    call("MPI_Improbe", comm, || {
        let (c, src, tag) = probe_args(comm, source, tag)?;
        if message.is_null() || flag.is_null() {
            return Err(MpiError::new(
                Class::Arg,
                "the flag or message argument is NULL",
            ));
        }
        let got = match src {
            None => Some((MESSAGE_NO_PROC, St::empty(PROC_NULL))),
            Some(src) => matched(c.improbe(src, tag)?, comm)?,
        };
        // SAFETY: the caller's flag, message handle and status.
        unsafe {
            put(flag, c_int::from(got.is_some()))?;
            if let Some((h, st)) = got {
                put(message, h)?;
                put_status(status, st);
            }
        }
        Ok(())
    })
}

/// The request that receives matched message `h` into `n` elements of `ty` at
/// `buf` (`None` for `MPI_MESSAGE_NO_PROC`).
fn message_req(h: c_int, buf: *mut c_void, n: usize, ty: Arc<TypeInfo>) -> Result<Req, MpiError> {
    Ok(match take_message(h)? {
        None => null_req(state::COMM_WORLD),
        Some(m) => Req {
            inner: Some(m.req),
            meta: Meta::Unpack {
                base: buf as usize,
                count: n,
                ty,
            },
            cancelled: false,
            comm: m.comm,
        },
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Mrecv(
    buf: *mut c_void,
    count: c_int,
    datatype: c_int,
    message: *mut c_int,
    status: *mut MpiStatus,
) -> c_int {
    // SAFETY: the caller's message handle.
    let comm = unsafe { message_comm(message) };
    call("MPI_Mrecv", comm, || {
        let ty = state::with(|s| s.ty(datatype))?;
        let n = state::count(count)?;
        // SAFETY: the caller's message handle.
        let h = unsafe { get(message, "the message")? };
        let req = message_req(h, buf, n, ty)?;
        // SAFETY: as above.
        unsafe { message.write(MESSAGE_NULL) };
        let out = req.inner.map(qcg::Request::wait);
        // SAFETY: the receive buffer, written now.
        let st = unsafe { complete(&req.meta, false, out)? };
        // SAFETY: a status or MPI_STATUS_IGNORE.
        unsafe { put_status(status, st) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Imrecv(
    buf: *mut c_void,
    count: c_int,
    datatype: c_int,
    message: *mut c_int,
    request: *mut c_int,
) -> c_int {
    // SAFETY: the caller's message handle.
    let comm = unsafe { message_comm(message) };
    call("MPI_Imrecv", comm, || {
        let ty = state::with(|s| s.ty(datatype))?;
        let n = state::count(count)?;
        // SAFETY: the caller's message handle.
        let h = unsafe { get(message, "the message")? };
        if request.is_null() {
            return Err(MpiError::new(Class::Arg, "the request argument is NULL"));
        }
        let req = message_req(h, buf, n, ty)?;
        let r = state::with(|s| Ok(s.add_request(req)))?;
        // SAFETY: the caller's message handle and request.
        unsafe {
            message.write(MESSAGE_NULL);
            put(request, r)
        }
    })
}
