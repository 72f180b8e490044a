//! The C ABI: every `MPI_*` function of `mpi.h`. Each one turns its C arguments into
//! checked Rust values (handles looked up, counts, ranks and tags checked, buffers
//! turned into slices) and calls libqcg; failures go through the communicator's
//! error handler ([`call`]).
//!
//! # Safety
//! The functions are `unsafe extern "C"`: the C program must pass pointers that are
//! valid for what the MPI standard says each argument is (a buffer of `count`
//! elements of `datatype`, an `MPI_Status` or `MPI_STATUS_IGNORE`, arrays of the
//! given length), and keep a nonblocking call's buffer alive and untouched until
//! the request completes, as MPI requires. Null pointers and bad handles, counts,
//! ranks and tags are caught and reported; dangling pointers cannot be.
#![allow(unsafe_code)]
#![allow(clippy::missing_safety_doc)]
#![allow(clippy::too_many_arguments)]

use crate::error::{describe, Class, MpiError};
use crate::state::{
    self, count, dest, recv_tag, send_tag, Meta, Req, State, ANY_SOURCE, ANY_TAG, ERRORS_RETURN,
    PROC_NULL, UNDEFINED,
};
use crate::types::{self, TypeInfo};
use libc::{c_char, c_int, c_void};
use qcg::Completion;
use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;

/// `MPI_Status` as `mpi.h` lays it out.
#[repr(C)]
pub struct MpiStatus {
    source: c_int,
    tag: c_int,
    error: c_int,
    cancelled: c_int,
    bytes: i64,
}

/// What a completed request or probe reports.
#[derive(Clone, Copy, Debug, Default)]
struct St {
    source: i32,
    tag: i32,
    error: i32,
    cancelled: bool,
    bytes: usize,
}

impl St {
    /// The "empty" status of a null or `MPI_PROC_NULL` request.
    fn empty(source: i32) -> St {
        St {
            source,
            tag: ANY_TAG,
            ..St::default()
        }
    }

    fn of(s: qcg::Status) -> St {
        St {
            source: s.source as i32,
            tag: s.tag as i32,
            bytes: s.len,
            ..St::default()
        }
    }
}

pub(crate) const IN_PLACE: *const c_void = usize::MAX as *const c_void;
const STATUS_IGNORE: usize = 1;

/// 0 before `MPI_Init`, 1 after, 2 after `MPI_Finalize`.
static PHASE: AtomicU8 = AtomicU8::new(0);
/// Set when the process is leaving on purpose (`MPI_Abort`, a fatal error).
static LEAVING: AtomicBool = AtomicBool::new(false);

fn rank_text() -> String {
    match state::lock().as_ref() {
        Some(s) => format!("rank {}", s.rank),
        None => match std::env::var("QCG_RANK") {
            Ok(r) => format!("rank {r}"),
            Err(_) => "a process outside a qcg job".into(),
        },
    }
}

/// Ends the process (and so the job: `qcg run` stops the other ranks) with `msg`.
fn die(msg: &str, code: i32) -> ! {
    LEAVING.store(true, Ordering::SeqCst);
    eprintln!("qcg-mpi: {msg}");
    std::process::exit(if code & 0xff == 0 { 1 } else { code & 0xff })
}

/// Runs the body of call `name` on communicator `comm`: 0 on success; on failure
/// the error class under `MPI_ERRORS_RETURN`, else the job aborts naming the call,
/// the rank and what was wrong.
pub(crate) fn call(name: &str, comm: c_int, f: impl FnOnce() -> Result<(), MpiError>) -> c_int {
    match f() {
        Ok(()) => 0,
        Err(e) => fail(name, comm, e),
    }
}

fn fail(name: &str, comm: c_int, e: MpiError) -> c_int {
    let handler = state::lock()
        .as_ref()
        .map_or(state::ERRORS_ARE_FATAL, |s| s.errhandler(comm));
    if handler == ERRORS_RETURN {
        return e.class as c_int;
    }
    die(
        &format!("{name} failed on {}: {e}; aborting the job", rank_text()),
        e.class as c_int,
    )
}

/// At exit: a process that initialized MPI but did not finalize fails the job.
extern "C" fn at_exit() {
    if PHASE.load(Ordering::SeqCst) == 1 && !LEAVING.load(Ordering::SeqCst) {
        eprintln!(
            "qcg-mpi: {} exited without calling MPI_Finalize",
            rank_text()
        );
        // SAFETY: flushing every C stream and leaving at once are what an atexit
        // handler may do (`exit` again would be undefined behaviour).
        unsafe {
            libc::fflush(std::ptr::null_mut());
            libc::_exit(1);
        }
    }
}

// ---- pointer helpers -------------------------------------------------------

pub(crate) unsafe fn put<T>(p: *mut T, v: T) -> Result<(), MpiError> {
    if p.is_null() {
        return Err(MpiError::new(Class::Arg, "an output argument is NULL"));
    }
    // SAFETY: non-null, and the caller passes a valid pointer for the output.
    unsafe { p.write(v) };
    Ok(())
}

pub(crate) unsafe fn get<T: Copy>(p: *const T, what: &str) -> Result<T, MpiError> {
    if p.is_null() {
        return Err(MpiError::new(Class::Arg, format!("{what} is NULL")));
    }
    // SAFETY: non-null, and the caller passes a valid pointer.
    Ok(unsafe { p.read() })
}

unsafe fn put_status(p: *mut MpiStatus, st: St) {
    if p.is_null() || p as usize == STATUS_IGNORE {
        return;
    }
    // SAFETY: a status the caller passed, not MPI_STATUS_IGNORE.
    unsafe {
        p.write(MpiStatus {
            source: st.source,
            tag: st.tag,
            error: st.error,
            cancelled: c_int::from(st.cancelled),
            bytes: st.bytes as i64,
        })
    };
}

pub(crate) unsafe fn ints<'a>(
    p: *const c_int,
    n: usize,
    what: &str,
) -> Result<&'a [c_int], MpiError> {
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(MpiError::new(Class::Arg, format!("{what} is NULL")));
    }
    // SAFETY: the caller passes an array of `n` ints.
    Ok(unsafe { std::slice::from_raw_parts(p, n) })
}

fn buffer_null(t: &TypeInfo, n: usize) -> MpiError {
    MpiError::new(
        Class::Buffer,
        format!("the buffer of {n} elements of {} is NULL", t.name),
    )
}

/// The packed bytes of `n` elements of `t` at `buf`.
pub(crate) unsafe fn in_bytes<'a>(
    buf: *const c_void,
    n: usize,
    t: &TypeInfo,
) -> Result<Cow<'a, [u8]>, MpiError> {
    let (first, len) = t.span(n);
    if len == 0 {
        return Ok(Cow::Borrowed(&[]));
    }
    if buf.is_null() || buf == IN_PLACE {
        return Err(buffer_null(t, n));
    }
    // SAFETY: the caller passes a buffer of `n` elements of `t`, which spans
    // `len` bytes from `first`.
    let s = unsafe { std::slice::from_raw_parts((buf as *const u8).wrapping_offset(first), len) };
    Ok(if t.is_contiguous() {
        Cow::Borrowed(s)
    } else {
        Cow::Owned(t.pack(s, n))
    })
}

/// The bytes `n` elements of `t` at `buf` span.
pub(crate) unsafe fn out_span<'a>(
    buf: *mut c_void,
    n: usize,
    t: &TypeInfo,
) -> Result<&'a mut [u8], MpiError> {
    let (first, len) = t.span(n);
    if len == 0 {
        return Ok(&mut []);
    }
    if buf.is_null() || std::ptr::eq(buf, IN_PLACE) {
        return Err(buffer_null(t, n));
    }
    // SAFETY: the caller passes a writable buffer of `n` elements of `t`.
    Ok(unsafe { std::slice::from_raw_parts_mut((buf as *mut u8).wrapping_offset(first), len) })
}

/// Writes packed elements into at most `n` elements of `t` at `buf`.
pub(crate) unsafe fn write_packed(
    buf: *mut c_void,
    n: usize,
    t: &TypeInfo,
    packed: &[u8],
) -> Result<(), MpiError> {
    // SAFETY: passed on from the caller.
    let out = unsafe { out_span(buf, n, t)? };
    if t.is_contiguous() {
        let k = packed.len().min(out.len());
        out[..k].copy_from_slice(&packed[..k]);
    } else {
        t.unpack(packed, out, n);
    }
    Ok(())
}

fn comm_of(h: c_int) -> Result<Arc<qcg::Comm>, MpiError> {
    state::with(|s| Ok(s.comm(h)?.comm.clone()))
}

fn comm_ty(h: c_int, t: c_int) -> Result<(Arc<qcg::Comm>, Arc<TypeInfo>), MpiError> {
    state::with(|s| Ok((s.comm(h)?.comm.clone(), s.ty(t)?)))
}

// ---- environment -----------------------------------------------------------

fn init(level: c_int) -> Result<c_int, MpiError> {
    if PHASE.load(Ordering::SeqCst) != 0 {
        return Err(MpiError::new(
            Class::Other,
            "MPI is already initialized (MPI_Init may be called once)",
        ));
    }
    let provided = level.clamp(0, 1);
    let world = qcg::init()?;
    let st = State::new(world, provided)?;
    *state::lock() = Some(st);
    PHASE.store(1, Ordering::SeqCst);
    // SAFETY: registers a plain extern "C" function with no arguments.
    if unsafe { libc::atexit(at_exit) } != 0 {
        return Err(MpiError::new(Class::Intern, "atexit failed"));
    }
    Ok(provided)
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Init(_argc: *mut c_int, _argv: *mut *mut *mut c_char) -> c_int {
    call("MPI_Init", 1, || init(0).map(|_| ()))
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Init_thread(
    _argc: *mut c_int,
    _argv: *mut *mut *mut c_char,
    required: c_int,
    provided: *mut c_int,
) -> c_int {
    call("MPI_Init_thread", 1, || {
        let p = init(required)?;
        // SAFETY: an output int.
        unsafe { put(provided, p) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Query_thread(provided: *mut c_int) -> c_int {
    call("MPI_Query_thread", 1, || {
        let p = state::with(|s| Ok(s.thread_level))?;
        // SAFETY: an output int.
        unsafe { put(provided, p) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Initialized(flag: *mut c_int) -> c_int {
    call("MPI_Initialized", 1, || {
        // SAFETY: an output int.
        unsafe { put(flag, c_int::from(PHASE.load(Ordering::SeqCst) >= 1)) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Finalized(flag: *mut c_int) -> c_int {
    call("MPI_Finalized", 1, || {
        // SAFETY: an output int.
        unsafe { put(flag, c_int::from(PHASE.load(Ordering::SeqCst) == 2)) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Finalize() -> c_int {
    call("MPI_Finalize", 1, || {
        let (world, orphans) = state::with(|s| {
            Ok((
                s.comm(state::COMM_WORLD)?.comm.clone(),
                std::mem::take(&mut s.orphans),
            ))
        })?;
        for r in orphans {
            let out = r.inner.map(qcg::Request::wait);
            // SAFETY: the freed request's buffer, which MPI keeps valid until it
            // completes.
            let _ = unsafe { complete(&r.meta, r.cancelled, out) };
        }
        world.barrier()?;
        drop(world);
        let st = state::lock().take();
        drop(st);
        PHASE.store(2, Ordering::SeqCst);
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Abort(_comm: c_int, errorcode: c_int) -> c_int {
    die(
        &format!(
            "MPI_Abort called on {} with error code {errorcode}; aborting the job",
            rank_text()
        ),
        errorcode,
    )
}

#[no_mangle]
pub extern "C" fn MPI_Wtime() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

#[no_mangle]
pub extern "C" fn MPI_Wtick() -> f64 {
    1e-9
}

unsafe fn put_text(
    dst: *mut c_char,
    len: *mut c_int,
    text: &str,
    max: usize,
) -> Result<(), MpiError> {
    if dst.is_null() {
        return Err(MpiError::new(Class::Arg, "the string argument is NULL"));
    }
    let b = &text.as_bytes()[..text.len().min(max - 1)];
    // SAFETY: the caller passes room for `max` chars (MPI_MAX_*).
    unsafe {
        std::ptr::copy_nonoverlapping(b.as_ptr(), dst as *mut u8, b.len());
        dst.add(b.len()).write(0);
        put(len, b.len() as c_int)
    }
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Get_processor_name(name: *mut c_char, resultlen: *mut c_int) -> c_int {
    call("MPI_Get_processor_name", 1, || {
        let node = state::with(|s| Ok(s.comm(state::COMM_WORLD)?.comm.node().to_string()))?;
        // SAFETY: MPI_MAX_PROCESSOR_NAME chars.
        unsafe { put_text(name, resultlen, &node, 256) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Get_version(version: *mut c_int, subversion: *mut c_int) -> c_int {
    call("MPI_Get_version", 1, || {
        // SAFETY: output ints.
        unsafe {
            put(version, 3)?;
            put(subversion, 1)
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Error_string(
    code: c_int,
    string: *mut c_char,
    resultlen: *mut c_int,
) -> c_int {
    call("MPI_Error_string", 1, || {
        // SAFETY: MPI_MAX_ERROR_STRING chars.
        unsafe { put_text(string, resultlen, describe(code), 512) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Error_class(code: c_int, class: *mut c_int) -> c_int {
    call("MPI_Error_class", 1, || {
        if !(0..=64).contains(&code) {
            return Err(MpiError::new(
                Class::Arg,
                format!("{code} is not an error code"),
            ));
        }
        // SAFETY: an output int.
        unsafe { put(class, code) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_set_errhandler(comm: c_int, errhandler: c_int) -> c_int {
    call("MPI_Comm_set_errhandler", comm, || {
        state::with(|s| s.set_errhandler(comm, errhandler))
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_get_errhandler(comm: c_int, errhandler: *mut c_int) -> c_int {
    call("MPI_Comm_get_errhandler", comm, || {
        let e = state::with(|s| Ok(s.comm(comm)?.errhandler))?;
        // SAFETY: an output handle.
        unsafe { put(errhandler, e) }
    })
}

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
        let (c, ty) = comm_ty(comm, t)?;
        let n = count(n)?;
        let Some(d) = dest(&c, d)? else { return Ok(()) };
        let tag = send_tag(tag)?;
        // SAFETY: `n` elements of `ty` at `buf`.
        let data = unsafe { in_bytes(buf, n, &ty)? };
        c.send(d, tag, &data)?;
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Send(
    buf: *const c_void,
    count: c_int,
    datatype: c_int,
    dest: c_int,
    tag: c_int,
    comm: c_int,
) -> c_int {
    // SAFETY: passed on.
    unsafe { send("MPI_Send", buf, count, datatype, dest, tag, comm) }
}

/// Synchronous mode: the message is announced and its bytes go only once the
/// receiver has matched it with a receive, whatever its size, so the call returns
/// after the match (MPI 3.1 §3.4).
#[no_mangle]
pub unsafe extern "C" fn MPI_Ssend(
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

/// Receives into `n` elements of `ty` at `buf`.
unsafe fn recv_into(
    c: &qcg::Comm,
    buf: *mut c_void,
    n: usize,
    ty: &TypeInfo,
    src: Option<u32>,
    tag: Option<u32>,
) -> Result<St, MpiError> {
    // SAFETY: `n` elements of `ty` at `buf`.
    let out = unsafe { out_span(buf, n, ty)? };
    if ty.is_contiguous() {
        // libqcg's receive into a buffer it makes measured faster here at 1 MiB
        // than its receive into a lent buffer (`recv_into`), copy included (see
        // mpi/bench/pingpong.c); a longer message is consumed, as in Open MPI.
        let m = c.recv(src, tag)?;
        let st = St {
            source: m.source as i32,
            tag: m.tag as i32,
            bytes: m.data.len(),
            ..St::default()
        };
        if m.data.len() > out.len() {
            return Err(MpiError::new(
                Class::Truncate,
                format!(
                    "a message of {} bytes from rank {} (tag {}) does not fit a buffer of {} bytes",
                    m.data.len(),
                    m.source,
                    m.tag,
                    out.len()
                ),
            ));
        }
        out[..m.data.len()].copy_from_slice(&m.data);
        Ok(st)
    } else {
        let mut tmp = vec![0u8; n * ty.size];
        let st = c.recv_into(src, tag, &mut tmp)?;
        ty.unpack(&tmp[..st.len], out, n);
        Ok(St::of(st))
    }
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Recv(
    buf: *mut c_void,
    count: c_int,
    datatype: c_int,
    source: c_int,
    tag: c_int,
    comm: c_int,
    status: *mut MpiStatus,
) -> c_int {
    call("MPI_Recv", comm, || {
        let (c, ty) = comm_ty(comm, datatype)?;
        let n = state::count(count)?;
        let src = state::source(&c, source)?;
        let tag = recv_tag(tag)?;
        let st = match src {
            None => St::empty(PROC_NULL),
            // SAFETY: the receive buffer.
            Some(src) => unsafe { recv_into(&c, buf, n, &ty, src, tag)? },
        };
        // SAFETY: a status or MPI_STATUS_IGNORE.
        unsafe { put_status(status, st) };
        Ok(())
    })
}

/// Starts a receive of `n` elements of `ty` at `buf`.
unsafe fn post_recv(
    c: &qcg::Comm,
    comm: c_int,
    buf: *mut c_void,
    n: usize,
    ty: &Arc<TypeInfo>,
    src: Option<u32>,
    tag: Option<u32>,
) -> Result<Req, MpiError> {
    // SAFETY: `n` elements of `ty` at `buf`.
    let out = unsafe { out_span(buf, n, ty)? };
    if ty.is_contiguous() {
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

fn null_req(comm: c_int) -> Req {
    Req {
        inner: None,
        meta: Meta::Null,
        cancelled: false,
        comm,
    }
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Isend(
    buf: *const c_void,
    count: c_int,
    datatype: c_int,
    dest: c_int,
    tag: c_int,
    comm: c_int,
    request: *mut c_int,
) -> c_int {
    call("MPI_Isend", comm, || {
        let (c, ty) = comm_ty(comm, datatype)?;
        let n = state::count(count)?;
        let d = state::dest(&c, dest)?;
        let tag = send_tag(tag)?;
        let req = match d {
            None => null_req(comm),
            Some(d) => {
                // SAFETY: `n` elements of `ty` at `buf`.
                let data = unsafe { in_bytes(buf, n, &ty)? };
                let r = match data {
                    // SAFETY: MPI requires the buffer to stay untouched until the
                    // request completes; a request freed early is kept until
                    // finalize.
                    Cow::Borrowed(b) => unsafe { c.isend_raw(d, tag, b.as_ptr(), b.len())? },
                    Cow::Owned(v) => c.isend(d, tag, v)?,
                };
                Req {
                    inner: Some(r),
                    meta: Meta::Plain,
                    cancelled: false,
                    comm,
                }
            }
        };
        let h = state::with(|s| Ok(s.add_request(req)))?;
        // SAFETY: an output handle.
        unsafe { put(request, h) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Irecv(
    buf: *mut c_void,
    count: c_int,
    datatype: c_int,
    source: c_int,
    tag: c_int,
    comm: c_int,
    request: *mut c_int,
) -> c_int {
    call("MPI_Irecv", comm, || {
        let (c, ty) = comm_ty(comm, datatype)?;
        let n = state::count(count)?;
        let src = state::source(&c, source)?;
        let tag = recv_tag(tag)?;
        let req = match src {
            None => null_req(comm),
            // SAFETY: the receive buffer.
            Some(src) => unsafe { post_recv(&c, comm, buf, n, &ty, src, tag)? },
        };
        let h = state::with(|s| Ok(s.add_request(req)))?;
        // SAFETY: an output handle.
        unsafe { put(request, h) }
    })
}

/// Finishes a request whose libqcg outcome is `r`.
unsafe fn complete(
    meta: &Meta,
    cancelled: bool,
    r: Option<qcg::Result<Completion>>,
) -> Result<St, MpiError> {
    let Some(r) = r else {
        return Ok(St::empty(PROC_NULL));
    };
    match r? {
        Completion::Sent => Ok(St {
            cancelled,
            ..St::empty(ANY_SOURCE)
        }),
        Completion::Cancelled(_) => Ok(St {
            cancelled: true,
            ..St::empty(ANY_SOURCE)
        }),
        Completion::Received(st, data) => {
            if let Meta::Unpack { base, count, ty } = meta {
                // SAFETY: the receive's buffer, which MPI keeps valid until now.
                unsafe {
                    write_packed(
                        *base as *mut c_void,
                        *count,
                        ty,
                        &data[..st.len.min(data.len())],
                    )?
                };
            }
            Ok(St::of(st))
        }
    }
}

/// Takes request `h` out of the table.
fn take_req(h: c_int) -> Result<Req, MpiError> {
    state::with(|s| {
        s.requests
            .remove(&h)
            .ok_or_else(|| MpiError::new(Class::Request, format!("{h} is not an active request")))
    })
}

/// Waits for request `*p` (MPI_Wait's body); the status, and the error for it.
unsafe fn wait_one(p: *mut c_int) -> (St, Option<(c_int, MpiError)>) {
    // SAFETY: a request handle.
    let h = match unsafe { get(p, "the request") } {
        Ok(h) => h,
        Err(e) => return (St::default(), Some((1, e))),
    };
    if h == 0 {
        return (St::empty(ANY_SOURCE), None);
    }
    let req = match take_req(h) {
        Ok(r) => r,
        Err(e) => return (St::default(), Some((1, e))),
    };
    // SAFETY: `p` was read above.
    unsafe { p.write(0) };
    let out = req.inner.map(|r| r.wait());
    // SAFETY: the request's own buffer.
    match unsafe { complete(&req.meta, req.cancelled, out) } {
        Ok(st) => (st, None),
        Err(e) => (
            St {
                error: e.class as c_int,
                ..St::default()
            },
            Some((req.comm, e)),
        ),
    }
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Wait(request: *mut c_int, status: *mut MpiStatus) -> c_int {
    // SAFETY: a request handle.
    let (st, err) = unsafe { wait_one(request) };
    // SAFETY: a status or MPI_STATUS_IGNORE.
    unsafe { put_status(status, st) };
    match err {
        None => 0,
        Some((comm, e)) => fail("MPI_Wait", comm, e),
    }
}

unsafe fn status_at(statuses: *mut MpiStatus, i: usize) -> *mut MpiStatus {
    if statuses.is_null() || statuses as usize == STATUS_IGNORE {
        statuses
    } else {
        // SAFETY: an array of as many statuses as requests.
        unsafe { statuses.add(i) }
    }
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Waitall(
    count: c_int,
    requests: *mut c_int,
    statuses: *mut MpiStatus,
) -> c_int {
    let n = match state::count(count) {
        Ok(n) => n,
        Err(e) => return fail("MPI_Waitall", 1, e),
    };
    let mut first: Option<(c_int, MpiError)> = None;
    for i in 0..n {
        // SAFETY: an array of `n` handles.
        let (st, err) = unsafe { wait_one(requests.add(i)) };
        // SAFETY: statuses array or MPI_STATUSES_IGNORE.
        unsafe { put_status(status_at(statuses, i), st) };
        if first.is_none() {
            first = err;
        }
    }
    match first {
        None => 0,
        Some((comm, e)) => {
            let class = if statuses as usize == STATUS_IGNORE {
                e.class
            } else {
                Class::InStatus
            };
            fail("MPI_Waitall", comm, MpiError::new(class, e.message))
        }
    }
}

/// The active requests of an array: (index, handle).
unsafe fn active(count: c_int, requests: *mut c_int) -> Result<Vec<(usize, c_int)>, MpiError> {
    let n = state::count(count)?;
    // SAFETY: an array of `n` handles.
    let hs = unsafe { ints(requests, n, "the request array")? };
    Ok(hs
        .iter()
        .enumerate()
        .filter(|(_, &h)| h != 0)
        .map(|(i, &h)| (i, h))
        .collect())
}

/// How many requests a multiple completion call finishes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pick {
    /// One (Wait/Testany, Test): a request on `MPI_PROC_NULL` first.
    One,
    /// As many as are done (Waitsome).
    Some,
    /// All or none (Testall).
    All,
}

type Outcomes = Vec<(usize, qcg::Result<Completion>)>;

/// (array index, status or error) of each request a call finished.
type Finished = Vec<(usize, Result<St, MpiError>)>;

/// Takes the requests of `list` ((array index, handle)) out of the table, lets
/// `pick` finish some of the live ones (by position in the vector it is given),
/// completes them, and puts the others back. Returns (array index, status) of each
/// finished request, whose handle in `requests` becomes `MPI_REQUEST_NULL`.
unsafe fn finish_some(
    requests: *mut c_int,
    list: &[(usize, c_int)],
    mode: Pick,
    pick: impl FnOnce(&mut Vec<qcg::Request>) -> Outcomes,
) -> Result<Finished, MpiError> {
    let mut rest: Vec<Req> = state::with(|s| {
        if let Some((_, h)) = list.iter().find(|(_, h)| !s.requests.contains_key(h)) {
            return Err(MpiError::new(
                Class::Request,
                format!("{h} is not an active request"),
            ));
        }
        Ok(list
            .iter()
            .filter_map(|(_, h)| s.requests.remove(h))
            .collect())
    })?;
    let mut live = Vec::new();
    let mut live_at = Vec::new();
    let mut nulls = Vec::new();
    for (k, r) in rest.iter_mut().enumerate() {
        match r.inner.take() {
            Some(q) => {
                live.push(q);
                live_at.push(k);
            }
            None => nulls.push(k),
        }
    }
    let finished = match mode {
        Pick::One | Pick::Some if !nulls.is_empty() => Vec::new(),
        _ => pick(&mut live),
    };
    let mut done_k: Vec<(usize, Result<St, MpiError>)> = Vec::new();
    let all_ok = mode != Pick::All || finished.len() == live.len();
    if all_ok {
        let n = if mode == Pick::One { 1 } else { nulls.len() };
        for &k in nulls.iter().take(n) {
            done_k.push((k, Ok(St::empty(PROC_NULL))));
        }
    }
    let mut gone = vec![false; live.len()];
    for (j, out) in finished {
        let k = live_at[j];
        gone[j] = true;
        // SAFETY: the request's own buffer.
        let st = unsafe { complete(&rest[k].meta, rest[k].cancelled, Some(out)) };
        done_k.push((k, st));
    }
    for (j, q) in live.into_iter().enumerate() {
        if !gone[j] {
            rest[live_at[j]].inner = Some(q);
        }
    }
    let finished_k: std::collections::HashSet<usize> = done_k.iter().map(|(k, _)| *k).collect();
    state::with(|s| {
        for (k, r) in rest.into_iter().enumerate() {
            if !finished_k.contains(&k) {
                s.requests.insert(list[k].1, r);
            }
        }
        Ok(())
    })?;
    let mut out = Vec::new();
    for (k, st) in done_k {
        let i = list[k].0;
        // SAFETY: an index into the caller's array.
        unsafe { requests.add(i).write(0) };
        out.push((i, st));
    }
    out.sort_by_key(|(i, _)| *i);
    Ok(out)
}

/// The position of the request a failed `wait_any` spent (best effort: the first
/// one that is done).
fn spent(live: &[qcg::Request]) -> usize {
    live.iter().position(qcg::Request::is_done).unwrap_or(0)
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Waitany(
    count: c_int,
    requests: *mut c_int,
    index: *mut c_int,
    status: *mut MpiStatus,
) -> c_int {
    call("MPI_Waitany", 1, || {
        // SAFETY: the caller's arrays.
        unsafe {
            let list = active(count, requests)?;
            if list.is_empty() {
                put(index, UNDEFINED)?;
                put_status(status, St::empty(ANY_SOURCE));
                return Ok(());
            }
            let done = finish_some(requests, &list, Pick::One, |live| {
                match qcg::wait_any(live) {
                    Ok((j, c)) => vec![(j, Ok(c))],
                    Err(e) => vec![(spent(live), Err(e))],
                }
            })?;
            let Some((i, st)) = done.into_iter().next() else {
                return Err(MpiError::new(Class::Intern, "MPI_Waitany finished nothing"));
            };
            put(index, i as c_int)?;
            put_status(status, st?);
            Ok(())
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Waitsome(
    incount: c_int,
    requests: *mut c_int,
    outcount: *mut c_int,
    indices: *mut c_int,
    statuses: *mut MpiStatus,
) -> c_int {
    call("MPI_Waitsome", 1, || {
        // SAFETY: the caller's arrays.
        unsafe {
            let list = active(incount, requests)?;
            if list.is_empty() {
                return put(outcount, UNDEFINED);
            }
            let done = finish_some(requests, &list, Pick::Some, |live| {
                let mut out: Outcomes = Vec::new();
                match qcg::wait_any(live) {
                    Ok((j, c)) => out.push((j, Ok(c))),
                    Err(e) => return vec![(spent(live), Err(e))],
                }
                for (j, r) in live.iter_mut().enumerate() {
                    if out.iter().any(|(k, _)| *k == j) {
                        continue;
                    }
                    match r.test() {
                        Ok(Some(c)) => out.push((j, Ok(c))),
                        Ok(None) => {}
                        Err(e) => out.push((j, Err(e))),
                    }
                }
                out
            })?;
            put(outcount, done.len() as c_int)?;
            let mut err = None;
            for (k, (i, st)) in done.into_iter().enumerate() {
                indices.add(k).write(i as c_int);
                match st {
                    Ok(st) => put_status(status_at(statuses, k), st),
                    Err(e) => {
                        put_status(
                            status_at(statuses, k),
                            St {
                                error: e.class as c_int,
                                ..St::default()
                            },
                        );
                        err.get_or_insert(e);
                    }
                }
            }
            match err {
                None => Ok(()),
                Some(e) => Err(MpiError::new(Class::InStatus, e.message)),
            }
        }
    })
}

/// The outcome of the first request of `live` that is done, driving the engine.
fn test_first(live: &mut [qcg::Request]) -> Outcomes {
    for (j, r) in live.iter_mut().enumerate() {
        match r.test() {
            Ok(Some(c)) => return vec![(j, Ok(c))],
            Ok(None) => {}
            Err(e) => return vec![(j, Err(e))],
        }
    }
    Vec::new()
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Test(
    request: *mut c_int,
    flag: *mut c_int,
    status: *mut MpiStatus,
) -> c_int {
    call("MPI_Test", 1, || {
        // SAFETY: the caller's request, flag and status.
        unsafe {
            let h = get(request, "the request")?;
            if h == 0 {
                put(flag, 1)?;
                put_status(status, St::empty(ANY_SOURCE));
                return Ok(());
            }
            let done = finish_some(request, &[(0, h)], Pick::One, |live| test_first(live))?;
            match done.into_iter().next() {
                None => put(flag, 0),
                Some((_, st)) => {
                    put(flag, 1)?;
                    put_status(status, st?);
                    Ok(())
                }
            }
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Testany(
    count: c_int,
    requests: *mut c_int,
    index: *mut c_int,
    flag: *mut c_int,
    status: *mut MpiStatus,
) -> c_int {
    call("MPI_Testany", 1, || {
        // SAFETY: the caller's arrays.
        unsafe {
            let list = active(count, requests)?;
            if list.is_empty() {
                put(flag, 1)?;
                put(index, UNDEFINED)?;
                put_status(status, St::empty(ANY_SOURCE));
                return Ok(());
            }
            let done = finish_some(requests, &list, Pick::One, |live| test_first(live))?;
            match done.into_iter().next() {
                None => {
                    put(flag, 0)?;
                    put(index, UNDEFINED)
                }
                Some((i, st)) => {
                    put(flag, 1)?;
                    put(index, i as c_int)?;
                    put_status(status, st?);
                    Ok(())
                }
            }
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Testall(
    count: c_int,
    requests: *mut c_int,
    flag: *mut c_int,
    statuses: *mut MpiStatus,
) -> c_int {
    call("MPI_Testall", 1, || {
        // SAFETY: the caller's arrays.
        unsafe {
            let n = state::count(count)?;
            let list = active(count, requests)?;
            let done = finish_some(requests, &list, Pick::All, |live| {
                match qcg::test_all(live) {
                    Ok(Some(cs)) => cs.into_iter().map(Ok).enumerate().collect(),
                    Ok(None) => Vec::new(),
                    Err(e) => vec![(spent(live), Err(e))],
                }
            })?;
            if done.len() < list.len() {
                return put(flag, 0);
            }
            put(flag, 1)?;
            let mut err = None;
            for i in 0..n {
                let st = match done.iter().find(|(k, _)| *k == i) {
                    Some((_, Ok(st))) => *st,
                    Some((_, Err(e))) => {
                        err.get_or_insert(e.clone());
                        St {
                            error: e.class as c_int,
                            ..St::default()
                        }
                    }
                    None => St::empty(ANY_SOURCE),
                };
                put_status(status_at(statuses, i), st);
            }
            match err {
                None => Ok(()),
                Some(e) => Err(MpiError::new(Class::InStatus, e.message)),
            }
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Cancel(request: *mut c_int) -> c_int {
    call("MPI_Cancel", 1, || {
        // SAFETY: a request handle.
        let h = unsafe { get(request, "the request")? };
        state::with(|s| {
            let r = s.requests.get_mut(&h).ok_or_else(|| {
                MpiError::new(Class::Request, format!("{h} is not an active request"))
            })?;
            if let Some(q) = &r.inner {
                if q.cancel() {
                    r.cancelled = true;
                }
            }
            Ok(())
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Test_cancelled(status: *const MpiStatus, flag: *mut c_int) -> c_int {
    call("MPI_Test_cancelled", 1, || {
        if status.is_null() || status as usize == STATUS_IGNORE {
            return Err(MpiError::new(
                Class::Arg,
                "the status is NULL or MPI_STATUS_IGNORE",
            ));
        }
        // SAFETY: a status the caller passes.
        unsafe { put(flag, (*status).cancelled) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Request_free(request: *mut c_int) -> c_int {
    call("MPI_Request_free", 1, || {
        // SAFETY: a request handle.
        let h = unsafe { get(request, "the request")? };
        let r = take_req(h)?;
        match &r.inner {
            Some(q) if q.is_done() => {
                let out = r.inner.map(qcg::Request::wait);
                // SAFETY: the request's own buffer (a receive's data is unpacked
                // into it now).
                let _ = unsafe { complete(&r.meta, r.cancelled, out) };
            }
            // Still moving bytes: kept until finalize so that it completes.
            Some(_) => state::with(|s| {
                s.orphans.push(r);
                Ok(())
            })?,
            None => {}
        }
        // SAFETY: read above.
        unsafe { request.write(0) };
        Ok(())
    })
}

/// A probe's communicator, source (`None` for `MPI_PROC_NULL`) and tag.
type ProbeArgs = (Arc<qcg::Comm>, Option<Option<u32>>, Option<u32>);

fn probe_args(comm: c_int, source: c_int, tag: c_int) -> Result<ProbeArgs, MpiError> {
    let c = comm_of(comm)?;
    let src = state::source(&c, source)?;
    let tag = recv_tag(tag)?;
    Ok((c, src, tag))
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Probe(
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
pub unsafe extern "C" fn MPI_Iprobe(
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
pub unsafe extern "C" fn MPI_Get_count(
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
        let bytes = unsafe { (*status).bytes } as usize;
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
pub unsafe extern "C" fn MPI_Sendrecv(
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
pub unsafe extern "C" fn MPI_Sendrecv_replace(
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

// ---- datatypes -----------------------------------------------------------------

#[no_mangle]
pub unsafe extern "C" fn MPI_Type_size(datatype: c_int, size: *mut c_int) -> c_int {
    call("MPI_Type_size", 1, || {
        let t = match types::predefined(datatype) {
            Some(t) => t.size,
            None => state::with(|s| s.any_ty(datatype))?.size,
        };
        // SAFETY: an output int.
        unsafe { put(size, t as c_int) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Type_get_extent(
    datatype: c_int,
    lb: *mut isize,
    extent: *mut isize,
) -> c_int {
    call("MPI_Type_get_extent", 1, || {
        let t = match types::predefined(datatype) {
            Some(t) => Arc::new(t),
            None => state::with(|s| s.any_ty(datatype))?,
        };
        // SAFETY: output MPI_Aints.
        unsafe {
            put(lb, t.lb)?;
            put(extent, t.extent)
        }
    })
}

fn new_type(newtype: *mut c_int, t: Result<TypeInfo, MpiError>) -> Result<(), MpiError> {
    let t = t?;
    let h = state::with(|s| Ok(s.add_type(t)))?;
    // SAFETY: an output handle.
    unsafe { put(newtype, h) }
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Type_contiguous(
    count: c_int,
    oldtype: c_int,
    newtype: *mut c_int,
) -> c_int {
    call("MPI_Type_contiguous", 1, || {
        let old = state::with(|s| s.any_ty(oldtype))?;
        new_type(newtype, types::contiguous(count, &old))
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Type_vector(
    count: c_int,
    blocklength: c_int,
    stride: c_int,
    oldtype: c_int,
    newtype: *mut c_int,
) -> c_int {
    call("MPI_Type_vector", 1, || {
        let old = state::with(|s| s.any_ty(oldtype))?;
        new_type(newtype, types::vector(count, blocklength, stride, &old))
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Type_create_struct(
    count: c_int,
    blocklengths: *const c_int,
    displacements: *const isize,
    types_: *const c_int,
    newtype: *mut c_int,
) -> c_int {
    call("MPI_Type_create_struct", 1, || {
        let n = state::count(count)?;
        // SAFETY: three arrays of `count` elements.
        let (lens, disps, hs) = unsafe {
            if n > 0 && displacements.is_null() {
                return Err(MpiError::new(Class::Arg, "the displacement array is NULL"));
            }
            (
                ints(blocklengths, n, "the block length array")?,
                if n == 0 {
                    &[][..]
                } else {
                    std::slice::from_raw_parts(displacements, n)
                },
                ints(types_, n, "the type array")?,
            )
        };
        let olds = state::with(|s| {
            hs.iter()
                .map(|&h| s.any_ty(h))
                .collect::<Result<Vec<_>, _>>()
        })?;
        let blocks: Vec<(i32, isize, &TypeInfo)> =
            (0..n).map(|i| (lens[i], disps[i], &*olds[i])).collect();
        new_type(newtype, types::create_struct(&blocks))
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Type_commit(datatype: *mut c_int) -> c_int {
    call("MPI_Type_commit", 1, || {
        // SAFETY: a datatype handle.
        let h = unsafe { get(datatype, "the datatype")? };
        state::with(|s| s.commit_type(h))
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Type_free(datatype: *mut c_int) -> c_int {
    call("MPI_Type_free", 1, || {
        // SAFETY: a datatype handle.
        let h = unsafe { get(datatype, "the datatype")? };
        state::with(|s| s.free_type(h))?;
        // SAFETY: read above.
        unsafe { datatype.write(0) };
        Ok(())
    })
}
