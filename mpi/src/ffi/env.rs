//! The environment: init, finalize, abort, clocks, names, error strings and handlers.
#![allow(unsafe_code)]
#![allow(clippy::missing_safety_doc)]
#![allow(clippy::too_many_arguments)]

use super::requests::complete;
use super::*;

// ---- environment -----------------------------------------------------------

fn init(level: c_int) -> Result<c_int, MpiError> {
    if PHASE.load(Ordering::SeqCst) != 0 {
        return Err(MpiError::new(
            Class::Other,
            "MPI is already initialized (MPI_Init may be called once)",
        ));
    }
    let provided = level.clamp(0, 1);
    // The reductions' trailers make a 64 KiB flit of data 66,240 bytes: above
    // libqcg's default eager limit, every flit of a large reduction would wait a
    // rendezvous round trip (measured 3.5x slower at 512 KiB over a 10 ms WAN).
    if std::env::var_os(qcg::env::vars::EAGER_LIMIT).is_none() {
        std::env::set_var(
            qcg::env::vars::EAGER_LIMIT,
            crate::agree::EAGER_LIMIT.to_string(),
        );
    }
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
        // SAFETY: MPI_MAX_ERROR_STRING chars.
        unsafe { put_text(string, resultlen, &describe(code), 512) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Error_class(code: c_int, class: *mut c_int) -> c_int {
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
