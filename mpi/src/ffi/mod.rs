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
//!
//! One module per family: [`env`] (init, finalize, errors), [`p2p`] (sends,
//! receives, probes), [`requests`] (completion of nonblocking calls), [`datatypes`],
//! [`coll`] (collectives) and [`comms`] (communicators and groups); this one holds
//! what they share (the error handler's [`call`], the pointer helpers).
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
        None => match std::env::var(qcg::env::vars::RANK) {
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

mod coll;
mod comms;
mod datatypes;
mod env;
mod nbc;
mod p2p;
mod requests;
