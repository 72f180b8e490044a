//! Completing nonblocking calls: wait, test (one, any, some, all), cancel, free,
//! `MPI_Request_get_status`, and the status setters.
//!
//! A persistent request (`MPI_X_init`) keeps its handle: completing it makes it
//! inactive (out of the request table, its recipe still in `modes::P2p`), and
//! every call treats an inactive one as it treats `MPI_REQUEST_NULL`.
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
        Completion::Sent if matches!(meta, Meta::Greq(_)) => {
            let Meta::Greq(g) = meta else { unreachable!() };
            // SAFETY: the program's functions, called once at completion.
            unsafe { greq::finish(g, cancelled) }
        }
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
                let room = count * ty.size;
                let len = st.len.min(data.len());
                // SAFETY: the receive's buffer, which MPI keeps valid until now.
                unsafe { write_packed(*base as *mut c_void, *count, ty, &data[..len.min(room)])? };
                if len > room {
                    // A matched message (MPI_Imrecv) longer than the buffer: what fits
                    // is written, the rest is lost (MPI 3.1 §3.2.4).
                    return Err(MpiError::new(
                        Class::Truncate,
                        format!(
                            "a message of {len} bytes from rank {} (tag {}) does not fit a buffer of {room} bytes",
                            st.source, st.tag
                        ),
                    ));
                }
            }
            Ok(St::of(st))
        }
    }
}

fn not_a_request(h: c_int) -> MpiError {
    MpiError::new(
        Class::Request,
        format!("{h} is not a request (never made, or already completed or freed)"),
    )
}

/// A request taken out of the table to be completed.
struct Taken {
    req: Req,
    /// Its handle stays (it becomes inactive).
    persistent: bool,
    /// The outcome `MPI_Request_get_status` took already.
    settled: Option<Settled>,
}

/// An outcome `MPI_Request_get_status` took from libqcg.
type Settled = Result<Completion, MpiError>;

/// Completes a request whose outcome was taken already.
unsafe fn settle(meta: &Meta, cancelled: bool, o: Settled) -> Result<St, MpiError> {
    // SAFETY: the request's own buffer (unpacked again: the same bytes).
    unsafe { complete(meta, cancelled, Some(Ok(o?))) }
}

impl Taken {
    /// Waits for the request and completes it.
    unsafe fn finish(self) -> (Req, Result<St, MpiError>) {
        let mut req = self.req;
        // SAFETY: the request's own buffer.
        let st = unsafe {
            match self.settled {
                Some(o) => settle(&req.meta, req.cancelled, o),
                None => {
                    let out = req.inner.take().map(qcg::Request::wait);
                    complete(&req.meta, req.cancelled, out)
                }
            }
        };
        (req, st)
    }
}

/// Takes request `h` out of the table: `None` for an inactive persistent request.
fn take_req(h: c_int) -> Result<Option<Taken>, MpiError> {
    state::with(|s| {
        let persistent = s.p2p.persistent.contains_key(&h);
        match s.requests.remove(&h) {
            Some(req) => Ok(Some(Taken {
                req,
                persistent,
                settled: s.p2p.settled.remove(&h),
            })),
            None if persistent => Ok(None),
            None => Err(not_a_request(h)),
        }
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
    let taken = match take_req(h) {
        Ok(Some(t)) => t,
        // An inactive persistent request: an empty status at once.
        Ok(None) => return (St::empty(ANY_SOURCE), None),
        Err(e) => return (St::default(), Some((1, e))),
    };
    if !taken.persistent {
        // SAFETY: `p` was read above.
        unsafe { p.write(0) };
    }
    // SAFETY: the request's own buffer.
    let (req, st) = unsafe { taken.finish() };
    match st {
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

/// The active requests of an array: (index, handle); null handles and inactive
/// persistent requests left out.
unsafe fn active(count: c_int, requests: *mut c_int) -> Result<Vec<(usize, c_int)>, MpiError> {
    let n = state::count(count)?;
    // SAFETY: an array of `n` handles.
    let hs = unsafe { ints(requests, n, "the request array")? };
    state::with(|s| {
        Ok(hs
            .iter()
            .enumerate()
            .filter(|(_, &h)| h != 0 && !s.p2p.inactive(h, &s.requests))
            .map(|(i, &h)| (i, h))
            .collect())
    })
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
    type Out = (Vec<Req>, Vec<bool>, Vec<Option<Settled>>);
    let (mut rest, persistent, mut settled): Out = state::with(|s| {
        if let Some((_, h)) = list.iter().find(|(_, h)| !s.requests.contains_key(h)) {
            return Err(not_a_request(*h));
        }
        let mut out: Out = Default::default();
        for (_, h) in list {
            if let Some(r) = s.requests.remove(h) {
                out.0.push(r);
                out.1.push(s.p2p.persistent.contains_key(h));
                out.2.push(s.p2p.settled.remove(h));
            }
        }
        Ok(out)
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
            let st = match settled[k].take() {
                // SAFETY: the request's own buffer.
                Some(o) => unsafe { settle(&rest[k].meta, rest[k].cancelled, o) },
                None => Ok(St::empty(PROC_NULL)),
            };
            done_k.push((k, st));
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
        for ((k, r), o) in rest.into_iter().enumerate().zip(settled) {
            if !finished_k.contains(&k) {
                let h = list[k].1;
                s.requests.insert(h, r);
                if let Some(o) = o {
                    s.p2p.settled.insert(h, o);
                }
            }
        }
        Ok(())
    })?;
    let mut out = Vec::new();
    for (k, st) in done_k {
        let i = list[k].0;
        if !persistent[k] {
            // SAFETY: an index into the caller's array.
            unsafe { requests.add(i).write(0) };
        }
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

/// Waitsome's and Testsome's body: finishes the requests that are done (waiting
/// for one first if `wait`), writes how many, their indices and statuses.
unsafe fn some(
    incount: c_int,
    requests: *mut c_int,
    outcount: *mut c_int,
    indices: *mut c_int,
    statuses: *mut MpiStatus,
    wait: bool,
) -> Result<(), MpiError> {
    // SAFETY: the caller's arrays.
    unsafe {
        let list = active(incount, requests)?;
        if list.is_empty() {
            return put(outcount, UNDEFINED);
        }
        if indices.is_null() {
            return Err(MpiError::new(Class::Arg, "the array of indices is NULL"));
        }
        let done = finish_some(requests, &list, Pick::Some, |live| {
            let mut out: Outcomes = Vec::new();
            if wait {
                match qcg::wait_any(live) {
                    Ok((j, c)) => out.push((j, Ok(c))),
                    Err(e) => return vec![(spent(live), Err(e))],
                }
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
        unsafe { some(incount, requests, outcount, indices, statuses, true) }
    })
}

/// Like `MPI_Waitsome`, without waiting: `*outcount` may be 0.
#[no_mangle]
pub unsafe extern "C" fn PMPI_Testsome(
    incount: c_int,
    requests: *mut c_int,
    outcount: *mut c_int,
    indices: *mut c_int,
    statuses: *mut MpiStatus,
) -> c_int {
    call("MPI_Testsome", 1, || {
        // SAFETY: the caller's arrays.
        unsafe { some(incount, requests, outcount, indices, statuses, false) }
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
            let list = active(1, request)?;
            if list.is_empty() {
                put(flag, 1)?;
                put_status(status, St::empty(ANY_SOURCE));
                return Ok(());
            }
            let done = finish_some(request, &list, Pick::One, |live| test_first(live))?;
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

/// Cancels a receive that has not matched a message yet (its status then says
/// cancelled). libqcg cannot take back a send once posted, so a send is not
/// cancelled: it completes as usual and its status says not cancelled, which MPI
/// 3.1 §3.8.4 permits.
#[no_mangle]
pub unsafe extern "C" fn PMPI_Cancel(request: *mut c_int) -> c_int {
    call("MPI_Cancel", 1, || {
        // SAFETY: a request handle.
        let h = unsafe { get(request, "the request")? };
        let greq = state::with(|s| {
            let r = s.requests.get_mut(&h).ok_or_else(|| {
                MpiError::new(Class::Request, format!("{h} is not an active request"))
            })?;
            if let (Meta::Greq(g), Some(q)) = (&r.meta, &r.inner) {
                r.cancelled = true;
                return Ok(Some((g.cancel, g.extra, q.is_done())));
            }
            if let Some(q) = &r.inner {
                if q.cancel() {
                    r.cancelled = true;
                }
            }
            Ok(None)
        })?;
        match greq {
            // The program's function, called with the state unlocked (it may call MPI).
            // SAFETY: its function with the state it gave.
            Some((f, extra, done)) => unsafe { greq::cancel(f, extra, done) },
            None => Ok(()),
        }
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
        let taken = state::with(|s| {
            let persistent = s.p2p.persistent.remove(&h).is_some();
            let settled = s.p2p.settled.remove(&h);
            match s.requests.remove(&h) {
                Some(r) => Ok(Some((r, settled))),
                None if persistent => Ok(None),
                None => Err(not_a_request(h)),
            }
        })?;
        let r = match taken {
            // Done already (MPI_Request_get_status saw it), or inactive.
            Some((_, Some(_))) | None => {
                // SAFETY: read above.
                unsafe { request.write(0) };
                return Ok(());
            }
            Some((r, None)) => r,
        };
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

/// Whether request `request` is complete, with its status, without freeing or
/// deactivating it: a later wait or test completes it as usual with that status.
#[no_mangle]
pub unsafe extern "C" fn PMPI_Request_get_status(
    request: c_int,
    flag: *mut c_int,
    status: *mut MpiStatus,
) -> c_int {
    call("MPI_Request_get_status", 1, || {
        let taken = state::with(|s| {
            if request == 0 || s.p2p.inactive(request, &s.requests) {
                return Ok(None);
            }
            let r = s
                .requests
                .remove(&request)
                .ok_or_else(|| not_a_request(request))?;
            Ok(Some((r, s.p2p.settled.remove(&request))))
        })?;
        let Some((mut r, mut settled)) = taken else {
            // SAFETY: the caller's flag and status.
            unsafe {
                put(flag, 1)?;
                put_status(status, St::empty(ANY_SOURCE));
            }
            return Ok(());
        };
        if settled.is_none() {
            if let Some(q) = r.inner.as_mut() {
                settled = match q.test() {
                    Ok(Some(c)) => Some(Ok(c)),
                    Ok(None) => None,
                    Err(e) => Some(Err(e.into())),
                };
                if settled.is_some() {
                    r.inner = None;
                }
            }
        }
        let done = settled.is_some() || matches!(r.meta, Meta::Null);
        let st = match settled.take() {
            Some(Ok(c)) => {
                let (received, was_cancelled) = (
                    matches!(c, Completion::Received(..)),
                    matches!(c, Completion::Cancelled(_)),
                );
                // SAFETY: the request's own buffer, written now: the program may read
                // it once the flag says the request is complete. A generalized
                // request's status comes from its query function (its free function
                // runs when it is waited for or freed).
                let res = match &r.meta {
                    Meta::Greq(g) => unsafe { greq::status(g, r.cancelled) },
                    _ => unsafe { complete(&r.meta, r.cancelled, Some(Ok(c))) },
                };
                // Kept: what completes again to the same status with no bytes to copy.
                settled = Some(match &res {
                    Ok(st) if received => Ok(Completion::Received(
                        qcg::Status {
                            source: st.source as u32,
                            tag: st.tag as u32,
                            len: st.bytes,
                        },
                        Vec::new(),
                    )),
                    Ok(_) if was_cancelled => Ok(Completion::Cancelled(None)),
                    Ok(_) => Ok(Completion::Sent),
                    Err(e) => Err(e.clone()),
                });
                Some(res)
            }
            Some(Err(e)) => {
                settled = Some(Err(e.clone()));
                Some(Err(e))
            }
            None if done => Some(Ok(St::empty(PROC_NULL))),
            None => None,
        };
        let (comm, cancelled) = (r.comm, r.cancelled);
        state::with(|s| {
            s.requests.insert(request, r);
            if let Some(o) = settled {
                s.p2p.settled.insert(request, o);
            }
            Ok(())
        })?;
        // SAFETY: the caller's flag and status.
        unsafe {
            put(flag, c_int::from(st.is_some()))?;
            match st {
                None => {}
                Some(Ok(st)) => put_status(
                    status,
                    St {
                        cancelled: st.cancelled || cancelled,
                        ..st
                    },
                ),
                Some(Err(e)) => {
                    put_status(
                        status,
                        St {
                            error: e.class as c_int,
                            ..St::default()
                        },
                    );
                    return Err(MpiError::new(
                        e.class,
                        format!("{} (request of communicator {comm})", e.message),
                    ));
                }
            }
        }
        Ok(())
    })
}

/// Checks a status argument a setter writes to.
fn status_arg(status: *mut MpiStatus) -> Result<*mut MpiStatus, MpiError> {
    if status.is_null() || status as usize == STATUS_IGNORE {
        return Err(MpiError::new(
            Class::Arg,
            "the status is NULL or MPI_STATUS_IGNORE",
        ));
    }
    Ok(status)
}

/// Sets the status's length to `count` elements of `datatype`.
unsafe fn set_elements(
    status: *mut MpiStatus,
    datatype: c_int,
    count: i64,
) -> Result<(), MpiError> {
    let status = status_arg(status)?;
    let ty = state::with(|s| s.any_ty(datatype))?;
    let bytes = usize::try_from(count)
        .ok()
        .and_then(|n| ty.bytes_of_elements(n))
        .filter(|&b| i64::try_from(b).is_ok())
        .ok_or_else(|| {
            MpiError::new(
                Class::Count,
                format!("{count} elements of {} is not a length", ty.name),
            )
        })?;
    // SAFETY: a status the caller passes.
    unsafe { (*status).set_bytes(bytes as u64) };
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Status_set_elements(
    status: *mut MpiStatus,
    datatype: c_int,
    count: c_int,
) -> c_int {
    call("MPI_Status_set_elements", 1, || {
        // SAFETY: the caller's status.
        unsafe { set_elements(status, datatype, i64::from(count)) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Status_set_elements_x(
    status: *mut MpiStatus,
    datatype: c_int,
    count: i64,
) -> c_int {
    call("MPI_Status_set_elements_x", 1, || {
        // SAFETY: the caller's status.
        unsafe { set_elements(status, datatype, count) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Status_set_cancelled(status: *mut MpiStatus, flag: c_int) -> c_int {
    call("MPI_Status_set_cancelled", 1, || {
        let status = status_arg(status)?;
        // SAFETY: a status the caller passes.
        unsafe { (*status).cancelled = c_int::from(flag != 0) };
        Ok(())
    })
}
