//! Completing nonblocking calls: wait, test (one, any, some, all), cancel, free.
#![allow(unsafe_code)]
#![allow(clippy::missing_safety_doc)]
#![allow(clippy::too_many_arguments)]

use super::*;

pub(super) unsafe fn complete(
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
        Completion::Collective(out) => {
            if let Meta::Finish(f) = meta {
                f(&out)?;
            }
            Ok(St {
                cancelled,
                ..St::empty(ANY_SOURCE)
            })
        }
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
pub unsafe extern "C" fn PMPI_Wait(request: *mut c_int, status: *mut MpiStatus) -> c_int {
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
pub unsafe extern "C" fn PMPI_Waitall(
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
pub unsafe extern "C" fn PMPI_Waitany(
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
pub unsafe extern "C" fn PMPI_Waitsome(
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
pub unsafe extern "C" fn PMPI_Test(
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
pub unsafe extern "C" fn PMPI_Testany(
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
pub unsafe extern "C" fn PMPI_Testall(
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
pub unsafe extern "C" fn PMPI_Cancel(request: *mut c_int) -> c_int {
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
pub unsafe extern "C" fn PMPI_Test_cancelled(status: *const MpiStatus, flag: *mut c_int) -> c_int {
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
pub unsafe extern "C" fn PMPI_Request_free(request: *mut c_int) -> c_int {
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
