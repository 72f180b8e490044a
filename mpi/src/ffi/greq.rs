//! Generalized requests (MPI 3.1 §12.2): requests the program completes itself.
//! Waits and tests treat them as any other request; at completion the program's
//! query function gives the status, then its free function runs; `MPI_Cancel`
//! tells its cancel function.
#![allow(unsafe_code)]
#![allow(clippy::missing_safety_doc)]

use super::*;
use crate::state::{Greq, GreqCancel, GreqFree, GreqQuery, COMM_WORLD};

#[no_mangle]
pub unsafe extern "C" fn PMPI_Grequest_start(
    query_fn: Option<GreqQuery>,
    free_fn: Option<GreqFree>,
    cancel_fn: Option<GreqCancel>,
    extra_state: *mut c_void,
    request: *mut c_int,
) -> c_int {
    call("MPI_Grequest_start", 1, || {
        let h = state::with(|s| {
            let (inner, done) = s.comm(COMM_WORLD)?.comm.user_request();
            let greq = Greq {
                query: query_fn,
                free: free_fn,
                cancel: cancel_fn,
                extra: extra_state as usize,
            };
            let h = s.add_request(Req {
                inner: Some(inner),
                meta: Meta::Greq(greq),
                cancelled: false,
                comm: COMM_WORLD,
            });
            s.greqs.insert(h, done);
            Ok(h)
        })?;
        // SAFETY: the caller's output handle.
        unsafe { put(request, h) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Grequest_complete(request: c_int) -> c_int {
    call("MPI_Grequest_complete", 1, || {
        state::with(|s| match s.greqs.remove(&request) {
            Some(done) => {
                done.complete();
                Ok(())
            }
            None => Err(MpiError::new(
                Class::Request,
                format!("{request} is not a generalized request still to complete"),
            )),
        })
    })
}

/// A program function's return code as an error (0: none).
fn code(what: &str, c: c_int) -> Result<(), MpiError> {
    if c == 0 {
        return Ok(());
    }
    let class = Class::from_code(c).unwrap_or(Class::Other);
    Err(MpiError::new(
        class,
        format!("the generalized request's {what} function returned error code {c}"),
    ))
}

/// Completes a generalized request: its query function fills the status, then
/// its free function runs (MPI 3.1 §12.2: in that order, once).
pub(super) unsafe fn finish(g: &Greq, cancelled: bool) -> Result<St, MpiError> {
    // SAFETY: passed on.
    let queried = unsafe { status(g, cancelled) };
    let freed = match g.free {
        // SAFETY: the program's function with its state; called once, the request
        // is out of the table.
        Some(f) => code("free", unsafe { f(g.extra as *mut c_void) }),
        None => Ok(()),
    };
    let st = queried?;
    freed?;
    Ok(st)
}

/// A generalized request's status, from its query function (`MPI_Request_get_status`
/// calls only this; completion calls [`finish`]).
pub(super) unsafe fn status(g: &Greq, cancelled: bool) -> Result<St, MpiError> {
    let extra = g.extra as *mut c_void;
    let mut raw = MpiStatus {
        source: UNDEFINED,
        tag: UNDEFINED,
        error: 0,
        cancelled: c_int::from(cancelled),
        bytes_lo: 0,
        bytes_hi: 0,
    };
    if let Some(q) = g.query {
        // SAFETY: the program's function with the state it gave.
        code("query", unsafe { q(extra, &mut raw) })?;
    }
    Ok(St {
        source: raw.source,
        tag: raw.tag,
        error: 0,
        cancelled: raw.cancelled != 0,
        bytes: raw.bytes() as usize,
    })
}

/// `MPI_Cancel` of a generalized request: its cancel function `f` is told whether
/// the request completed already. Called with the state unlocked.
pub(super) unsafe fn cancel(
    f: Option<GreqCancel>,
    extra: usize,
    done: bool,
) -> Result<(), MpiError> {
    match f {
        // SAFETY: the program's function with the state it gave.
        Some(c) => code("cancel", unsafe {
            c(extra as *mut c_void, c_int::from(done))
        }),
        None => Ok(()),
    }
}
