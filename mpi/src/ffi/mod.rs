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
//! receives, probes), [`modes`] (buffered, synchronous and ready sends, persistent
//! requests, matched probes), [`requests`] (completion of nonblocking calls),
//! [`datatypes`], [`coll`] (collectives), [`comms`] (communicators and groups),
//! [`inter`] (intercommunicators, and collectives on them), [`topo`] (process
//! topologies) and [`neighbor`] (neighbourhood collectives); this one holds what
//! they share (the error handler's [`call`], the pointer helpers).
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

/// `MPI_Status` as `mpi.h` lays it out: six C ints, so that it is also Fortran's
/// `integer status(MPI_STATUS_SIZE)` (4-byte aligned; the byte count is split in
/// two halves for that reason).
#[repr(C)]
pub struct MpiStatus {
    source: c_int,
    tag: c_int,
    error: c_int,
    cancelled: c_int,
    bytes_lo: c_int,
    bytes_hi: c_int,
}

impl MpiStatus {
    /// The bytes the status counts.
    pub(crate) fn bytes(&self) -> u64 {
        u64::from(self.bytes_lo as u32) | (u64::from(self.bytes_hi as u32) << 32)
    }

    /// Sets the bytes the status counts.
    pub(crate) fn set_bytes(&mut self, n: u64) {
        self.bytes_lo = n as u32 as c_int;
        self.bytes_hi = (n >> 32) as u32 as c_int;
    }
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
pub(crate) const STATUS_IGNORE: usize = 1;

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
    if handler != state::ERRORS_ARE_FATAL {
        // The program gets only the class: what was wrong (which rank, which link)
        // is said here, for `QCG_LOG=qcgmpi=debug` to show.
        tracing::debug!(call = name, on = %rank_text(), class = e.class as c_int, error = %e, "an MPI call failed; the program's error handler takes it");
    }
    if handler == ERRORS_RETURN {
        return e.class as c_int;
    }
    if let Some(code) = env::run_user_handler(handler, comm, e.class as c_int) {
        return code;
    }
    die(
        &format!("{name} failed on {}: {e}; aborting the job", rank_text()),
        e.class as c_int,
    )
}

/// At exit: a process that initialized MPI but did not finalize fails the job. Its
/// own exit status is kept (`exit(7)` leaves with 7, as under Open MPI); only a
/// status of 0 becomes 1, so the job does not pass for a success.
extern "C" fn at_exit(status: c_int, _arg: *mut std::ffi::c_void) {
    if PHASE.load(Ordering::SeqCst) == 1 && !LEAVING.load(Ordering::SeqCst) {
        eprintln!(
            "qcg-mpi: {} exited without calling MPI_Finalize",
            rank_text()
        );
        if status == 0 {
            // SAFETY: flushing every C stream and leaving at once are what an exit
            // handler may do (`exit` again would be undefined behaviour).
            unsafe {
                libc::fflush(std::ptr::null_mut());
                libc::_exit(1);
            }
        }
    }
}

extern "C" {
    /// glibc's `on_exit`: as `atexit`, with the status given to `exit`.
    pub(crate) fn on_exit(
        f: extern "C" fn(c_int, *mut std::ffi::c_void),
        arg: *mut std::ffi::c_void,
    ) -> c_int;
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
    // MPI_ERROR is the program's unless there is an error to report (MPI 3.1
    // §3.2.5: single completions never set it, multiple ones only with
    // MPI_ERR_IN_STATUS).
    // SAFETY: a status the caller passed, not MPI_STATUS_IGNORE.
    let error = if st.error != 0 {
        st.error
    } else {
        unsafe { (*p).error }
    };
    let mut s = MpiStatus {
        source: st.source,
        tag: st.tag,
        error,
        cancelled: c_int::from(st.cancelled),
        bytes_lo: 0,
        bytes_hi: 0,
    };
    s.set_bytes(st.bytes as u64);
    // SAFETY: a status the caller passed, not MPI_STATUS_IGNORE.
    unsafe { p.write(s) };
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

/// Checks the buffer of `n` elements of `t` at `buf`: `MPI_IN_PLACE` is refused,
/// and NULL is `MPI_BOTTOM`, fine only when the type's displacements are
/// absolute addresses (built with `MPI_Get_address`), never in the first page.
/// Returns the span (`TypeInfo::span`).
fn check_buf(buf: *const c_void, n: usize, t: &TypeInfo) -> Result<(isize, usize), MpiError> {
    t.check_count(n)?;
    let (first, len) = t.span(n);
    if len > 0 && (buf == IN_PLACE || (buf.is_null() && first < 4096)) {
        return Err(buffer_null(t, n));
    }
    Ok((first, len))
}

/// Copies the data of `n` elements of `t` at `buf` out, packed.
///
/// # Safety
/// `buf` (possibly `MPI_BOTTOM`) holds `n` elements of `t`: every run of every
/// element is readable.
unsafe fn gather(buf: *const c_void, n: usize, t: &TypeInfo) -> Vec<u8> {
    let mut out = Vec::with_capacity(n * t.size);
    for (off, len) in t.runs_of(n) {
        let p = (buf as *const u8).wrapping_offset(off);
        // SAFETY: one run of the caller's elements.
        out.extend_from_slice(unsafe { std::slice::from_raw_parts(p, len) });
    }
    out
}

/// Copies `packed` into the runs of at most `n` elements of `t` at `buf`, the
/// last partly if the data ends inside it.
///
/// # Safety
/// `buf` (possibly `MPI_BOTTOM`) holds `n` writable elements of `t`.
unsafe fn scatter(buf: *mut c_void, n: usize, t: &TypeInfo, packed: &[u8]) {
    let mut at = 0;
    for (off, len) in t.runs_of(n) {
        if at == packed.len() {
            break;
        }
        let len = len.min(packed.len() - at);
        let p = (buf as *mut u8).wrapping_offset(off);
        // SAFETY: one run of the caller's elements, `len` bytes of `packed`.
        unsafe { std::ptr::copy_nonoverlapping(packed.as_ptr().add(at), p, len) };
        at += len;
    }
}

/// The packed bytes of `n` elements of `t` at `buf`.
pub(crate) unsafe fn in_bytes<'a>(
    buf: *const c_void,
    n: usize,
    t: &TypeInfo,
) -> Result<Cow<'a, [u8]>, MpiError> {
    let (first, len) = check_buf(buf, n, t)?;
    if len == 0 {
        return Ok(Cow::Borrowed(&[]));
    }
    if t.is_contiguous() {
        // SAFETY: the caller passes a buffer of `n` elements of `t`, which spans
        // `len` bytes from `first`.
        let s =
            unsafe { std::slice::from_raw_parts((buf as *const u8).wrapping_offset(first), len) };
        Ok(Cow::Borrowed(s))
    } else {
        // SAFETY: passed on from the caller.
        Ok(Cow::Owned(unsafe { gather(buf, n, t) }))
    }
}

/// Checks that `n` elements of `t` at `buf` can be received into.
pub(crate) fn check_recv(buf: *const c_void, n: usize, t: &TypeInfo) -> Result<(), MpiError> {
    check_buf(buf, n, t)?;
    t.check_recv(n)
}

/// The bytes `n` elements of `t` at `buf` span.
pub(crate) unsafe fn out_span<'a>(
    buf: *mut c_void,
    n: usize,
    t: &TypeInfo,
) -> Result<&'a mut [u8], MpiError> {
    check_recv(buf, n, t)?;
    let (first, len) = t.span(n);
    if len == 0 {
        return Ok(&mut []);
    }
    if buf.is_null() {
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
    if t.is_contiguous() {
        // SAFETY: passed on from the caller.
        let out = unsafe { out_span(buf, n, t)? };
        let k = packed.len().min(out.len());
        out[..k].copy_from_slice(&packed[..k]);
    } else {
        check_recv(buf, n, t)?;
        // SAFETY: passed on from the caller.
        unsafe { scatter(buf, n, t, packed) };
    }
    Ok(())
}

/// The communicator of point-to-point calls on `h` (ranks are the remote group's
/// on an intercommunicator).
fn comm_of(h: c_int) -> Result<Arc<qcg::Comm>, MpiError> {
    state::with(|s| Ok(s.comm(h)?.p2p().clone()))
}

fn comm_ty(h: c_int, t: c_int) -> Result<(Arc<qcg::Comm>, Arc<TypeInfo>), MpiError> {
    state::with_comm_ty(h, t, |c, ty| Ok((c.clone(), ty.clone())))
}

mod attrs;
mod coll;
mod comms;
mod compat;
mod datatypes;
mod env;
mod greq;
mod ineighbor;
mod info;
mod inter;
mod modes;
mod nbc;
mod neighbor;
mod p2p;
mod requests;
mod topo;

/// The C types of callbacks, under the names the API table gives them.
pub(crate) mod callbacks {
    pub use crate::attrs::CopyFn as MPI_Comm_copy_attr_function;
    pub use crate::attrs::CopyFn as MPI_Type_copy_attr_function;
    pub use crate::attrs::CopyFn as MPI_Copy_function;
    pub use crate::attrs::DeleteFn as MPI_Comm_delete_attr_function;
    pub use crate::attrs::DeleteFn as MPI_Type_delete_attr_function;
    pub use crate::attrs::DeleteFn as MPI_Delete_function;
    pub use crate::handlers::ErrFn as MPI_Comm_errhandler_function;
    pub use crate::handlers::ErrFn as MPI_Handler_function;
    pub use crate::state::UserFn as MPI_User_function;
    pub use crate::state::{
        GreqCancel as MPI_Grequest_cancel_function, GreqFree as MPI_Grequest_free_function,
        GreqQuery as MPI_Grequest_query_function,
    };
}

/// The `MPI_X` entry points, generated from the API table (`crate::api`): each
/// calls its implementation `PMPI_X`, so a profiling library may define `MPI_X`
/// and call `PMPI_X` (MPI 3.1 chapter 14).
mod pmpi {
    #![allow(unused_unsafe)]
    use super::callbacks;
    use super::pmpi_impls::*;
    use super::MpiStatus;
    use libc::{c_char, c_int, c_void};
    include!(concat!(env!("OUT_DIR"), "/pmpi.rs"));
}

/// Every `PMPI_X` implementation, whichever module holds it.
mod pmpi_impls {
    pub use super::{
        attrs::*, coll::*, comms::*, compat::*, datatypes::*, env::*, greq::*, ineighbor::*,
        info::*, inter::*, modes::*, nbc::*, neighbor::*, p2p::*, requests::*, topo::*,
    };
}

mod fortran;
