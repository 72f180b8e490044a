//! The environment: init, finalize, abort, clocks, names, error strings and handlers.
#![allow(unsafe_code)]
#![allow(clippy::missing_safety_doc)]
#![allow(clippy::too_many_arguments)]

use super::attrs::{delete_attrs, put_str, LASTUSEDCODE_VAL, UNIVERSE_SIZE_VAL};
use super::requests::complete;
use super::*;
use crate::attrs::Kind;
use crate::handlers::{ErrFn, LASTCODE};
use std::sync::OnceLock;
use std::thread::ThreadId;

/// The thread that initialized MPI (`MPI_Is_thread_main`).
static MAIN_THREAD: OnceLock<ThreadId> = OnceLock::new();

// ---- environment -----------------------------------------------------------

fn init(level: c_int) -> Result<c_int, MpiError> {
    if PHASE.load(Ordering::SeqCst) != 0 {
        return Err(MpiError::new(
            Class::Other,
            "MPI is already initialized (MPI_Init may be called once)",
        ));
    }
    // Every level is granted, up to MPI_THREAD_MULTIPLE (see mpi.h's top comment).
    let provided = level.clamp(0, 3);
    // The reductions' trailers make a 64 KiB flit of data 66,240 bytes: above
    // libqcg's default eager limit, every flit of a large reduction would wait a
    // rendezvous round trip (measured 3.5x slower at 512 KiB over a 10 ms WAN).
    if std::env::var_os(qcg::env::vars::EAGER_LIMIT).is_none() {
        std::env::set_var(
            qcg::env::vars::EAGER_LIMIT,
            crate::agree::EAGER_LIMIT.to_string(),
        );
    }
    keep_memory();
    let world = qcg::init()?;
    let size = world.size();
    let mut st = State::new(world, provided)?;
    st.infos = crate::info::Infos::new(super::info::env_info(size, provided));
    UNIVERSE_SIZE_VAL.store(size as i32, Ordering::SeqCst);
    let _ = MAIN_THREAD.set(std::thread::current().id());
    state::install(st);
    PHASE.store(1, Ordering::SeqCst);
    // SAFETY: registers a plain extern "C" function that ignores its argument.
    if unsafe { super::on_exit(at_exit, std::ptr::null_mut()) } != 0 {
        return Err(MpiError::new(Class::Intern, "atexit failed"));
    }
    Ok(provided)
}

/// Asks glibc's malloc to keep freed memory (up to 64 MiB at the top of the heap,
/// blocks up to 32 MiB taken from the heap rather than mapped alone), unless
/// `QCG_KEEP_MEMORY=0`. Collectives on large messages allocate and free buffers of
/// the message's size at every call; with glibc's defaults each free above a few
/// MiB went back to the kernel and the next call faulted every page in again,
/// zeroed: page faults and zeroing were a third of the CPU of 16 ranks' 1 MiB
/// allreduce, which took half the time with memory kept. MVAPICH2 and Open MPI
/// (when it keeps memory registered) turn the same two knobs. A program run with
/// glibc's own settings for them (`MALLOC_MMAP_THRESHOLD_`, `MALLOC_TRIM_THRESHOLD_`,
/// `GLIBC_TUNABLES`) keeps those.
fn keep_memory() {
    if std::env::var(qcg::env::vars::KEEP_MEMORY).is_ok_and(|v| v == "0") {
        return;
    }
    let set_by_user = [
        "MALLOC_MMAP_THRESHOLD_",
        "MALLOC_TRIM_THRESHOLD_",
        "GLIBC_TUNABLES",
    ]
    .iter()
    .any(|v| std::env::var_os(v).is_some());
    if set_by_user {
        return;
    }
    // SAFETY: mallopt only sets glibc's malloc parameters.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 64 << 20);
    }
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Init(_argc: *mut c_int, _argv: *mut *mut *mut c_char) -> c_int {
    call("MPI_Init", 1, || init(0).map(|_| ()))
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Init_thread(
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
pub unsafe extern "C" fn PMPI_Query_thread(provided: *mut c_int) -> c_int {
    call("MPI_Query_thread", 1, || {
        let p = state::with(|s| Ok(s.thread_level))?;
        // SAFETY: an output int.
        unsafe { put(provided, p) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Initialized(flag: *mut c_int) -> c_int {
    call("MPI_Initialized", 1, || {
        // SAFETY: an output int.
        unsafe { put(flag, c_int::from(PHASE.load(Ordering::SeqCst) >= 1)) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Finalized(flag: *mut c_int) -> c_int {
    call("MPI_Finalized", 1, || {
        // SAFETY: an output int.
        unsafe { put(flag, c_int::from(PHASE.load(Ordering::SeqCst) == 2)) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Finalize() -> c_int {
    call("MPI_Finalize", 1, || {
        // Buffered sends still pending are delivered before the job ends.
        super::modes::flush_bsends()?;
        // MPI 3.1 §8.7.1: MPI_COMM_SELF is freed first, its attributes' delete
        // callbacks run (last set first) while MPI still works.
        // SAFETY: the callbacks the program registered.
        unsafe { delete_attrs(Kind::Comm, state::COMM_SELF)? };
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
        let st = state::uninstall();
        drop(st);
        PHASE.store(2, Ordering::SeqCst);
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Abort(_comm: c_int, errorcode: c_int) -> c_int {
    die(
        &format!(
            "MPI_Abort called on {} with error code {errorcode}; aborting the job",
            rank_text()
        ),
        errorcode,
    )
}

#[no_mangle]
pub extern "C" fn PMPI_Wtime() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

#[no_mangle]
pub extern "C" fn PMPI_Wtick() -> f64 {
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
pub unsafe extern "C" fn PMPI_Get_processor_name(
    name: *mut c_char,
    resultlen: *mut c_int,
) -> c_int {
    call("MPI_Get_processor_name", 1, || {
        let node = state::with(|s| Ok(s.comm(state::COMM_WORLD)?.comm.node().to_string()))?;
        // SAFETY: MPI_MAX_PROCESSOR_NAME chars.
        unsafe { put_text(name, resultlen, &node, 256) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Get_version(version: *mut c_int, subversion: *mut c_int) -> c_int {
    call("MPI_Get_version", 1, || {
        // SAFETY: output ints.
        unsafe {
            put(version, 3)?;
            put(subversion, 1)
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Error_string(
    code: c_int,
    string: *mut c_char,
    resultlen: *mut c_int,
) -> c_int {
    call("MPI_Error_string", 1, || {
        let text = state::lock()
            .as_ref()
            .and_then(|s| s.handlers.text(code).map(str::to_string))
            .unwrap_or_else(|| describe(code));
        // SAFETY: MPI_MAX_ERROR_STRING chars.
        unsafe { put_text(string, resultlen, &text, 512) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Error_class(code: c_int, class: *mut c_int) -> c_int {
    call("MPI_Error_class", 1, || {
        let added = state::lock()
            .as_ref()
            .and_then(|s| s.handlers.class_of(code));
        let c = match added {
            Some(c) => c,
            None if (0..=LASTCODE).contains(&code) => code,
            None => {
                return Err(MpiError::new(
                    Class::Arg,
                    format!("{code} is not an error code"),
                ))
            }
        };
        // SAFETY: an output int.
        unsafe { put(class, c) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_set_errhandler(comm: c_int, errhandler: c_int) -> c_int {
    call("MPI_Comm_set_errhandler", comm, || {
        state::with(|s| s.set_errhandler(comm, errhandler))
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_get_errhandler(comm: c_int, errhandler: *mut c_int) -> c_int {
    call("MPI_Comm_get_errhandler", comm, || {
        let e = state::with(|s| Ok(s.comm(comm)?.errhandler))?;
        // SAFETY: an output handle.
        unsafe { put(errhandler, e) }
    })
}

// ---- the program's error handlers and codes ---------------------------------

/// Calls the program's handler `h` (if it is one) for an error of `code` on
/// communicator `comm`; `None` if `h` is predefined. The state is unlocked: the
/// handler may call MPI.
pub(super) fn run_user_handler(h: c_int, comm: c_int, code: c_int) -> Option<c_int> {
    let f: ErrFn = state::lock().as_ref()?.handlers.function(h)?;
    let (mut comm, mut code_) = (comm, code);
    // SAFETY: a function the program registered as an MPI_Comm_errhandler_function,
    // called with pointers to a communicator and a code as MPI does.
    unsafe { f(&mut comm, &mut code_) };
    Some(code)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_create_errhandler(
    function: Option<ErrFn>,
    errhandler: *mut c_int,
) -> c_int {
    call("MPI_Comm_create_errhandler", 1, || {
        let f = function.ok_or_else(|| MpiError::new(Class::Arg, "the function is NULL"))?;
        let h = state::with(|s| Ok(s.handlers.create(f)))?;
        // SAFETY: an output handle.
        unsafe { put(errhandler, h) }
    })
}

/// Frees the program's handle only: handlers are never destroyed (they stay
/// attached where they are set, as MPI requires, and cost a table entry).
#[no_mangle]
pub unsafe extern "C" fn PMPI_Errhandler_free(errhandler: *mut c_int) -> c_int {
    call("MPI_Errhandler_free", 1, || {
        // SAFETY: an in/out handle.
        let h = unsafe { get(errhandler, "the error handler")? };
        state::with(|s| s.handlers.check(h))?;
        // SAFETY: read above.
        unsafe { put(errhandler, 0) }
    })
}

/// Raises `errorcode` on `comm`: its handler runs (or the job aborts under
/// `MPI_ERRORS_ARE_FATAL`); `MPI_SUCCESS` once the handler returned (MPI 3.1 §8.3.1).
#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_call_errhandler(comm: c_int, errorcode: c_int) -> c_int {
    let h = match state::with(|s| Ok(s.comm(comm)?.errhandler)) {
        Ok(h) => h,
        Err(e) => return fail("MPI_Comm_call_errhandler", comm, e),
    };
    if h == ERRORS_RETURN || run_user_handler(h, comm, errorcode).is_some() {
        return 0;
    }
    let text = state::lock()
        .as_ref()
        .and_then(|s| s.handlers.text(errorcode).map(str::to_string))
        .unwrap_or_else(|| describe(errorcode));
    die(
        &format!(
            "MPI_Comm_call_errhandler raised error code {errorcode} ({text}) on {}; aborting the job",
            rank_text()
        ),
        errorcode,
    )
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Add_error_class(errorclass: *mut c_int) -> c_int {
    call("MPI_Add_error_class", 1, || {
        let c = state::with(|s| Ok(s.handlers.add_class()))?;
        LASTUSEDCODE_VAL.store(c, Ordering::SeqCst);
        // SAFETY: an output int.
        unsafe { put(errorclass, c) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Add_error_code(errorclass: c_int, errorcode: *mut c_int) -> c_int {
    call("MPI_Add_error_code", 1, || {
        let c = state::with(|s| s.handlers.add_code(errorclass))?;
        LASTUSEDCODE_VAL.store(c, Ordering::SeqCst);
        // SAFETY: an output int.
        unsafe { put(errorcode, c) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Add_error_string(errorcode: c_int, string: *const c_char) -> c_int {
    call("MPI_Add_error_string", 1, || {
        // SAFETY: a C string.
        let text = unsafe { super::attrs::c_str(string, "the string")? };
        if text.len() >= 512 {
            return Err(MpiError::new(
                Class::Arg,
                format!(
                    "the string has {} characters (MPI_MAX_ERROR_STRING is 512)",
                    text.len()
                ),
            ));
        }
        state::with(|s| s.handlers.set_text(errorcode, &text))
    })
}

// ---- the rest of the environment --------------------------------------------

#[no_mangle]
pub unsafe extern "C" fn PMPI_Get_library_version(
    version: *mut c_char,
    resultlen: *mut c_int,
) -> c_int {
    call("MPI_Get_library_version", 1, || {
        let v = format!(
            "qcg libqcgmpi {} (MPI 3.1 over qcg grid links)",
            env!("CARGO_PKG_VERSION")
        );
        if resultlen.is_null() {
            return Err(MpiError::new(Class::Arg, "resultlen is NULL"));
        }
        // SAFETY: MPI_MAX_LIBRARY_VERSION_STRING chars.
        unsafe { put_str(version, resultlen, &v, 256) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Alloc_mem(size: isize, _info: c_int, baseptr: *mut c_void) -> c_int {
    call("MPI_Alloc_mem", 1, || {
        let n = usize::try_from(size)
            .map_err(|_| MpiError::new(Class::Arg, format!("size {size} is negative")))?;
        // SAFETY: malloc of at least one byte (malloc(0) may give NULL, which the
        // program would take for a failure).
        let p = unsafe { libc::malloc(n.max(1)) };
        if p.is_null() {
            return Err(MpiError::new(
                Class::NoMem,
                format!("{n} bytes could not be allocated"),
            ));
        }
        // SAFETY: `baseptr` points to a pointer (MPI 3.1 §8.2).
        unsafe { put(baseptr as *mut *mut c_void, p) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Free_mem(base: *mut c_void) -> c_int {
    // SAFETY: memory MPI_Alloc_mem gave (malloc's), or NULL.
    unsafe { libc::free(base) };
    0
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Is_thread_main(flag: *mut c_int) -> c_int {
    call("MPI_Is_thread_main", 1, || {
        let main = MAIN_THREAD.get() == Some(&std::thread::current().id());
        // SAFETY: an output int.
        unsafe { put(flag, c_int::from(main)) }
    })
}

/// `int MPI_Pcontrol(const int level, ...)`: profiling is not controlled here, so
/// the call does nothing. Defined without the `...` (stable Rust cannot define a
/// variadic function): with the C calling conventions of the platforms qcg runs on
/// (x86-64 and AArch64 System V) the callee sees `level` alike and ignores the rest.
#[no_mangle]
pub extern "C" fn PMPI_Pcontrol(_level: c_int) -> c_int {
    0
}

// MPI-1's names of the error handler calls (removed from the standard in MPI 3.0,
// still in MPICH): the same calls.

#[no_mangle]
pub unsafe extern "C" fn PMPI_Errhandler_create(
    function: Option<ErrFn>,
    errhandler: *mut c_int,
) -> c_int {
    // SAFETY: passed on.
    unsafe { PMPI_Comm_create_errhandler(function, errhandler) }
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Errhandler_set(comm: c_int, errhandler: c_int) -> c_int {
    // SAFETY: passed on.
    unsafe { PMPI_Comm_set_errhandler(comm, errhandler) }
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Errhandler_get(comm: c_int, errhandler: *mut c_int) -> c_int {
    // SAFETY: passed on.
    unsafe { PMPI_Comm_get_errhandler(comm, errhandler) }
}
