//! Non-blocking point-to-point calls: requests, in MPI's shape.
//!
//! [`Comm::isend`] and [`Comm::irecv`] return at once with a [`Request`]; the engine
//! moves the bytes while the program computes, and [`Request::wait`] (or
//! [`Request::test`], [`wait_all`], [`wait_any`], [`test_all`]) collects the
//! outcome. A send completes when its bytes are with the kernel (small messages) or
//! in the receiver's buffer (large ones, sent only once the receiver posted a
//! matching receive); a receive when its message is in its buffer.
//!
//! Buffers are owned by the request while it runs (the send's `Vec`, the receive's
//! `Vec` given to [`Comm::irecv_into`] or made by [`Comm::irecv`] at the message's
//! size), so nothing needs `unsafe` and a message lands in its buffer with no
//! intermediate copy.
//!
//! # Dropping a pending request
//! Dropping a request that has not completed *detaches* it: a receive that has not
//! matched a message yet is cancelled (no message is consumed); a send, or a
//! receive whose message is arriving, completes on its own and its result is
//! dropped. Nothing waits in `drop`.
//!
//! ```no_run
//! # fn main() -> Result<(), qcg::Error> {
//! let comm = qcg::init()?;
//! let peer = (comm.rank() + 1) % comm.size();
//! let from = (comm.rank() + comm.size() - 1) % comm.size();
//! let r = comm.irecv(Some(from), Some(1))?;
//! let s = comm.isend(peer, 1, vec![7u8; 1 << 20])?;
//! // ... compute while the bytes move ...
//! let got = r.wait()?.into_message().expect("a receive");
//! s.wait()?;
//! assert_eq!(got.data.len(), 1 << 20);
//! # Ok(()) }
//! ```

use crate::comm::{Comm, View};
use crate::engine::core::Core;
use crate::engine::core::{Outcome, RecvBuf, SendBuf, Status as CoreStatus};
use crate::engine::matching::Pattern;
use crate::engine::Engine;
use crate::engine::Link;
use crate::error::{Error, Result};
use crate::mailbox::Message;
use crate::nbc::Run;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// What a received (or probed) message is: sender (rank in the communicator), tag
/// and length in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Status {
    /// The sender's rank in the communicator.
    pub source: u32,
    /// The tag.
    pub tag: u32,
    /// The message's length in bytes.
    pub len: usize,
}

/// How a request ended.
#[derive(Debug)]
pub enum Completion {
    /// A send.
    Sent,
    /// A receive: what arrived, and the buffer holding it (the one given to
    /// [`Comm::irecv_into`], whose first `status.len` bytes are the message, or one
    /// of exactly the message's length).
    Received(Status, Vec<u8>),
    /// A cancelled receive, with its buffer if it was given one.
    Cancelled(Option<Vec<u8>>),
    /// A non-blocking collective: its output (see [`crate::nbc`]).
    Collective(Vec<u8>),
}

impl Completion {
    /// The output of a non-blocking collective.
    pub fn into_collective(self) -> Option<Vec<u8>> {
        match self {
            Completion::Collective(out) => Some(out),
            _ => None,
        }
    }

    /// The message of a receive (its buffer cut to the message's length).
    pub fn into_message(self) -> Option<Message> {
        match self {
            Completion::Received(st, mut data) => {
                data.truncate(st.len);
                Some(Message {
                    source: st.source,
                    tag: st.tag,
                    data,
                })
            }
            _ => None,
        }
    }
}

/// A send or receive in progress. See the [module docs](self) for what dropping
/// one does.
#[must_use = "a request does its work until waited for; dropping it detaches it"]
pub struct Request {
    engine: Arc<Engine>,
    view: Arc<View>,
    id: Option<usize>,
    /// A non-blocking collective (then `id` is `None`), until its outcome is taken.
    coll: Option<Arc<Run>>,
    /// A request the program completes itself (then `id` is `None`): its flag,
    /// until its outcome is taken.
    user: Option<Arc<AtomicBool>>,
    /// A send complete when it was made (the link took the message at once; then
    /// `id` is `None`), until its outcome is taken: it never entered the engine.
    sent: bool,
}

/// Completes a request made by [`Comm::user_request`] (MPI's generalized
/// requests): whoever waits for it returns [`Completion::Sent`].
#[derive(Clone, Debug)]
pub struct Completer {
    engine: Arc<Engine>,
    flag: Arc<AtomicBool>,
}

impl Completer {
    /// Marks the request complete and wakes a thread that waits for it.
    pub fn complete(&self) {
        self.flag.store(true, Ordering::SeqCst);
        self.engine.wake();
    }
}

impl std::fmt::Debug for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Request")
            .field("id", &self.id)
            .field("sent", &self.sent)
            .finish()
    }
}

impl Request {
    fn convert(&self, r: Result<Outcome>) -> Result<Completion> {
        Ok(match r? {
            Outcome::Sent => Completion::Sent,
            Outcome::Received(st, data) => {
                Completion::Received(local_status(&self.view, st), data.unwrap_or_default())
            }
            Outcome::Cancelled(buf) => Completion::Cancelled(buf),
        })
    }

    fn spent() -> Error {
        Error::InvalidArgument("this request has already completed".into())
    }

    /// A request for a non-blocking collective in flight.
    pub(crate) fn collective(engine: Arc<Engine>, view: Arc<View>, run: Arc<Run>) -> Request {
        Request {
            engine,
            view,
            id: None,
            coll: Some(run),
            user: None,
            sent: false,
        }
    }

    /// Whether the request is done, advancing a collective (with `core` locked).
    fn done_in(&self, core: &mut Core<Link>) -> bool {
        if let Some(flag) = &self.user {
            return flag.load(Ordering::SeqCst);
        }
        match (&self.coll, self.id) {
            (Some(run), _) => run.done(core),
            (None, Some(id)) => core.is_done(id),
            (None, None) => true,
        }
    }

    /// Whether it is (or was) a non-blocking collective's or a user request.
    fn is_coll(&self) -> bool {
        self.coll.is_some() || self.user.is_some()
    }

    /// Waits for the request to complete.
    pub fn wait(mut self) -> Result<Completion> {
        if std::mem::take(&mut self.sent) {
            return Ok(Completion::Sent);
        }
        if let Some(flag) = self.user.take() {
            self.engine
                .wait(|_| flag.load(Ordering::SeqCst).then_some(()), None);
            return Ok(Completion::Sent);
        }
        if let Some(run) = self.coll.take() {
            // Wait while the collective moves; nothing for the timeout fails it.
            loop {
                let (timeout, seen) = run.stall();
                let deadline = Instant::now() + timeout;
                if let Some(r) = self.engine.wait(|core| run.poll(core), Some(deadline)) {
                    return r.map(Completion::Collective);
                }
                if run.stall().1 == seen {
                    return Err(run.give_up(&mut self.engine.core()));
                }
            }
        }
        let id = self.id.take().ok_or_else(Self::spent)?;
        let r = self
            .engine
            .wait(|core| core.take(id), None)
            .unwrap_or_else(|| Err(Self::spent()));
        self.convert(r)
    }

    /// The outcome if the request has completed (then it is spent), else `None`.
    /// Drives the engine once.
    pub fn test(&mut self) -> Result<Option<Completion>> {
        self.engine.poke();
        if std::mem::take(&mut self.sent) {
            return Ok(Some(Completion::Sent));
        }
        if let Some(flag) = &self.user {
            if !flag.load(Ordering::SeqCst) {
                return Ok(None);
            }
            self.user = None;
            return Ok(Some(Completion::Sent));
        }
        if let Some(run) = &self.coll {
            let r = run.poll(&mut self.engine.core());
            if r.is_some() {
                self.coll = None;
            }
            return r.map(|r| r.map(Completion::Collective)).transpose();
        }
        let id = self.id.ok_or_else(Self::spent)?;
        let taken = self.engine.core().take(id);
        match taken {
            Some(r) => {
                self.id = None;
                self.convert(r).map(Some)
            }
            None => Ok(None),
        }
    }

    /// Whether the request is done (or spent), without taking its outcome.
    pub fn is_done(&self) -> bool {
        self.done_in(&mut self.engine.core())
    }

    /// Cancels a receive that has not matched a message yet: true if it was
    /// cancelled (its `wait` then gives [`Completion::Cancelled`]); false if it had
    /// matched (it completes as usual) or is a send.
    pub fn cancel(&self) -> bool {
        self.id.is_some_and(|id| self.engine.core().cancel(id))
    }
}

impl Drop for Request {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            self.engine.core().detach(id);
        }
    }
}

fn local_status(view: &View, st: CoreStatus) -> Status {
    Status {
        source: view.local(st.source).unwrap_or(st.source),
        tag: st.tag,
        len: st.len,
    }
}

fn same_engine(reqs: &[Request]) -> Result<Option<Arc<Engine>>> {
    let Some(first) = reqs.first() else {
        return Ok(None);
    };
    if reqs.iter().any(|r| !Arc::ptr_eq(&r.engine, &first.engine)) {
        return Err(Error::InvalidArgument(
            "requests of different processes' engines".into(),
        ));
    }
    Ok(Some(first.engine.clone()))
}

/// Waits for every request; their outcomes in order. The first failure is returned
/// once all have completed.
pub fn wait_all(reqs: Vec<Request>) -> Result<Vec<Completion>> {
    let Some(engine) = same_engine(&reqs)? else {
        return Ok(Vec::new());
    };
    engine.wait(
        |core| reqs.iter().all(|r| r.done_in(core)).then_some(()),
        None,
    );
    let mut out = Vec::with_capacity(reqs.len());
    let mut first_err = None;
    for r in reqs {
        match r.wait() {
            Ok(c) => out.push(c),
            Err(e) => {
                if first_err.is_none() {
                    first_err = Some(e);
                }
            }
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

/// Waits for one of the requests that are not spent; its index and outcome (it is
/// spent afterwards).
pub fn wait_any(reqs: &mut [Request]) -> Result<(usize, Completion)> {
    let Some(engine) = same_engine(reqs)? else {
        return Err(Error::InvalidArgument("wait_any of no requests".into()));
    };
    let live: Vec<usize> = reqs
        .iter()
        .enumerate()
        .filter(|(_, r)| r.id.is_some() || r.coll.is_some() || r.user.is_some() || r.sent)
        .map(|(i, _)| i)
        .collect();
    if live.is_empty() {
        return Err(Error::InvalidArgument(
            "wait_any: every request is already spent".into(),
        ));
    }
    let i = engine
        .wait(
            |core| live.iter().copied().find(|&i| reqs[i].done_in(core)),
            None,
        )
        .ok_or_else(Request::spent)?;
    let r = &mut reqs[i];
    if std::mem::take(&mut r.sent) {
        return Ok((i, Completion::Sent));
    }
    if r.is_coll() {
        return match r.test()? {
            Some(c) => Ok((i, c)),
            None => Err(Request::spent()),
        };
    }
    let id = r.id.take().ok_or_else(Request::spent)?;
    let taken = engine
        .core()
        .take(id)
        .unwrap_or_else(|| Err(Request::spent()));
    r.convert(taken).map(|c| (i, c))
}

/// The outcomes of all requests if every one has completed (they are spent then),
/// else `None` and nothing is taken. Drives the engine once.
pub fn test_all(reqs: &mut [Request]) -> Result<Option<Vec<Completion>>> {
    let Some(engine) = same_engine(reqs)? else {
        return Ok(Some(Vec::new()));
    };
    engine.poke();
    if !reqs.iter().all(Request::is_done) {
        return Ok(None);
    }
    let mut out = Vec::with_capacity(reqs.len());
    for r in reqs.iter_mut() {
        if let Some(c) = r.test()? {
            out.push(c);
        }
    }
    Ok(Some(out))
}

impl Comm {
    /// The request of engine request `id`, or with `None` a send complete at birth
    /// (see [`Request::sent`]).
    fn request_of(&self, id: Option<usize>) -> Request {
        Request {
            engine: self.inner.engine.clone(),
            view: self.view_arc(),
            id,
            coll: None,
            user: None,
            sent: id.is_none(),
        }
    }

    fn request(&self, id: usize) -> Request {
        self.request_of(Some(id))
    }

    /// A request that completes when the program says so, through its
    /// [`Completer`] (MPI's generalized requests): waits, tests and `wait_any`
    /// treat it as any other request.
    pub fn user_request(&self) -> (Request, Completer) {
        let flag = Arc::new(AtomicBool::new(false));
        let r = Request {
            engine: self.inner.engine.clone(),
            view: self.view_arc(),
            id: None,
            coll: None,
            user: Some(flag.clone()),
            sent: false,
        };
        let c = Completer {
            engine: self.inner.engine.clone(),
            flag,
        };
        (r, c)
    }

    fn pattern(&self, source: Option<u32>, tag: Option<u32>) -> Result<Pattern> {
        if let Some(s) = source {
            self.check(s)?;
        }
        Ok(Pattern {
            context: self.view().context,
            source: source.map(|s| self.view().global(s)),
            tag,
        })
    }

    fn check(&self, rank: u32) -> Result<()> {
        if rank >= self.size() {
            return Err(Error::InvalidRank {
                rank,
                size: self.size(),
            });
        }
        Ok(())
    }

    /// Starts sending `data` to `dest` with `tag`; the request owns the bytes until
    /// it completes. Makes the link first if there is none yet.
    pub fn isend(&self, dest: u32, tag: u32, data: Vec<u8>) -> Result<Request> {
        let len = data.len();
        self.start_send(dest, tag, SendBuf::Owned(data), len, false)
    }

    /// Starts sending `buf` (`len` bytes) to `dest` with `tag`, in synchronous mode
    /// if `sync` ([`Comm::issend`]); makes the link first if there is none yet.
    fn start_send(
        &self,
        dest: u32,
        tag: u32,
        buf: SendBuf,
        len: usize,
        sync: bool,
    ) -> Result<Request> {
        self.check(dest)?;
        let g = self.view().global(dest);
        let context = self.view().context;
        if !sync {
            // An eager message the link takes at once (or copies into its queue) is
            // sent when the call returns, as a blocking send: no engine request.
            let data = match &buf {
                SendBuf::Raw(r) => Some(r.as_slice()),
                SendBuf::Owned(v) => Some(&v[..]),
                _ => None,
            };
            if let Some(data) = data {
                let mut core = self.inner.engine.core();
                if core.send_now(g, tag, context, data).is_some() {
                    drop(core);
                    self.count_sent(g, len);
                    return Ok(self.request_of(None));
                }
            }
        }
        self.ensure_link(g)?;
        self.count_sent(g, len);
        let mut core = self.inner.engine.core();
        let id = if sync {
            core.post_ssend(g, tag, context, buf)
        } else {
            core.post_send(g, tag, context, buf)
        };
        drop(core);
        Ok(self.request(id))
    }

    /// Starts receiving the next message matching `source` and `tag` (`None` = any)
    /// into a buffer made at the message's size.
    pub fn irecv(&self, source: Option<u32>, tag: Option<u32>) -> Result<Request> {
        let p = self.pattern(source, tag)?;
        let id = self
            .inner
            .engine
            .core()
            .post_recv(p, RecvBuf::Alloc(Vec::new()));
        Ok(self.request(id))
    }

    /// Starts receiving into `buf` (handed back on completion). A message longer than
    /// `buf` fails the request with [`Error::Truncated`] and stays to be received.
    pub fn irecv_into(
        &self,
        source: Option<u32>,
        tag: Option<u32>,
        buf: Vec<u8>,
    ) -> Result<Request> {
        let p = self.pattern(source, tag)?;
        let id = self.inner.engine.core().post_recv(p, RecvBuf::Owned(buf));
        Ok(self.request(id))
    }

    /// Receives the next matching message into `buf`, with no intermediate copy for
    /// large messages. A message longer than `buf` is an [`Error::Truncated`] and is
    /// not lost.
    pub fn recv_into(
        &self,
        source: Option<u32>,
        tag: Option<u32>,
        buf: &mut [u8],
    ) -> Result<Status> {
        let p = self.pattern(source, tag)?;
        // SAFETY: the request is finished (completed or failed, never left pending)
        // before this function returns, so the engine stops using `buf` in time.
        #[allow(unsafe_code)]
        let raw = unsafe { crate::engine::rawbuf::RawBuf::from_mut(buf) };
        let taken = {
            let mut core = self.inner.engine.core();
            let id = core.post_recv(p, RecvBuf::Raw(raw));
            core.take(id).ok_or(id)
        };
        let outcome = match taken {
            Ok(done) => done?,
            Err(id) => self.finish(id)?,
        };
        match outcome {
            Outcome::Received(st, _) => Ok(local_status(self.view(), st)),
            other => Err(Error::InvalidArgument(format!(
                "a receive ended as {other:?}"
            ))),
        }
    }

    /// The sender, tag and size of the next message matching `source` and `tag`,
    /// without receiving it; waits until there is one.
    pub fn probe(&self, source: Option<u32>, tag: Option<u32>) -> Result<Status> {
        let p = self.pattern(source, tag)?;
        let r = self.inner.engine.wait(
            |core| match core.iprobe(&p) {
                Ok(Some(st)) => Some(Ok(st)),
                Ok(None) => None,
                Err(e) => Some(Err(e)),
            },
            None,
        );
        match r {
            Some(Ok(st)) => Ok(local_status(self.view(), st)),
            Some(Err(e)) => Err(e),
            None => Err(Error::InvalidArgument(
                "probe ended without a message".into(),
            )),
        }
    }

    /// Like [`Comm::probe`], but returns `None` at once if no such message is there.
    pub fn iprobe(&self, source: Option<u32>, tag: Option<u32>) -> Result<Option<Status>> {
        let p = self.pattern(source, tag)?;
        self.inner.engine.poke();
        let r = self.inner.engine.core().iprobe(&p)?;
        Ok(r.map(|st| local_status(self.view(), st)))
    }

    /// A matched probe (MPI's `MPI_Improbe`): the sender, tag and size of the next
    /// message matching `source` and `tag`, taken out of matching (no other receive
    /// can have it), with the receive that gets it (its [`Completion::Received`]
    /// buffer is the message); `None` at once if there is none.
    pub fn improbe(
        &self,
        source: Option<u32>,
        tag: Option<u32>,
    ) -> Result<Option<(Status, Request)>> {
        let p = self.pattern(source, tag)?;
        self.inner.engine.poke();
        let r = self.inner.engine.core().improbe(&p)?;
        Ok(r.map(|(st, id)| (local_status(self.view(), st), self.request(id))))
    }

    /// Like [`Comm::improbe`], waiting until there is such a message.
    pub fn mprobe(&self, source: Option<u32>, tag: Option<u32>) -> Result<(Status, Request)> {
        let p = self.pattern(source, tag)?;
        let r = self.inner.engine.wait(
            |core| match core.improbe(&p) {
                Ok(Some(m)) => Some(Ok(m)),
                Ok(None) => None,
                Err(e) => Some(Err(e)),
            },
            None,
        );
        match r {
            Some(Ok((st, id))) => Ok((local_status(self.view(), st), self.request(id))),
            Some(Err(e)) => Err(e),
            None => Err(Error::InvalidArgument(
                "matched probe ended without a message".into(),
            )),
        }
    }

    /// Like [`Comm::isend`], in synchronous mode (MPI's `MPI_Issend`): completes
    /// only once the receiver has matched the message with a receive.
    pub fn issend(&self, dest: u32, tag: u32, data: Vec<u8>) -> Result<Request> {
        let len = data.len();
        self.start_send(dest, tag, SendBuf::Owned(data), len, true)
    }

    /// Sends `data` to `dest` and receives from `source` at the same time (no
    /// deadlock when two ranks exchange).
    pub fn sendrecv(
        &self,
        dest: u32,
        send_tag: u32,
        data: &[u8],
        source: Option<u32>,
        recv_tag: Option<u32>,
    ) -> Result<Message> {
        let r = self.irecv(source, recv_tag)?;
        self.send(dest, send_tag, data)?;
        r.wait()?
            .into_message()
            .ok_or_else(|| Error::InvalidArgument("sendrecv: the receive was cancelled".into()))
    }

    /// What the engine holds now: unexpected bytes (and their peak), pauses, open
    /// requests and connections.
    pub fn engine_accounting(&self) -> crate::engine::core::Accounting {
        self.inner.engine.core().accounting()
    }

    /// The engine's limits (eager size, unexpected-buffer bound, liveness).
    pub fn engine_limits(&self) -> crate::engine::core::Limits {
        self.inner.engine.core().limits()
    }

    /// Waits until `deadline` at most for the request set to drain, driving the
    /// engine: a helper for programs that poll.
    pub fn progress_until(&self, deadline: Instant) {
        let _ = self.inner.engine.wait(|_| None::<()>, Some(deadline));
    }
}

/// Requests over memory the caller lends rather than gives: what the MPI layer
/// needs for C buffers (see [`crate::engine::rawbuf`]).
#[allow(unsafe_code)]
impl Comm {
    /// Starts sending the `len` bytes at `ptr`.
    ///
    /// # Safety
    /// The bytes must stay valid and unmodified until the request completes (it is
    /// waited for, tested to completion, or its peer is lost); dropping the request
    /// before that detaches it and the engine may still read them.
    pub unsafe fn isend_raw(
        &self,
        dest: u32,
        tag: u32,
        ptr: *const u8,
        len: usize,
    ) -> Result<Request> {
        // SAFETY: passed on to the caller (see above).
        let raw = unsafe { crate::engine::rawbuf::RawBuf::from_raw(ptr as *mut u8, len) };
        self.start_send(dest, tag, SendBuf::Raw(raw), len, false)
    }

    /// Like [`Comm::isend_raw`], in synchronous mode (MPI's `MPI_Ssend`): the
    /// request completes only once the receiver has matched the message with a
    /// receive, whatever its size (a send to this rank itself completes at once).
    ///
    /// # Safety
    /// As [`Comm::isend_raw`].
    pub unsafe fn issend_raw(
        &self,
        dest: u32,
        tag: u32,
        ptr: *const u8,
        len: usize,
    ) -> Result<Request> {
        // SAFETY: passed on to the caller (see above).
        let raw = unsafe { crate::engine::rawbuf::RawBuf::from_raw(ptr as *mut u8, len) };
        self.start_send(dest, tag, SendBuf::Raw(raw), len, true)
    }

    /// Starts receiving into the `len` bytes at `ptr`. A longer message fails the
    /// request with [`Error::Truncated`] and stays to be received.
    ///
    /// # Safety
    /// The memory must stay valid and untouched by anyone else until the request
    /// completes or is cancelled (as [`Comm::isend_raw`]).
    pub unsafe fn irecv_raw(
        &self,
        source: Option<u32>,
        tag: Option<u32>,
        ptr: *mut u8,
        len: usize,
    ) -> Result<Request> {
        let p = self.pattern(source, tag)?;
        // SAFETY: passed on to the caller (see above).
        let raw = unsafe { crate::engine::rawbuf::RawBuf::from_raw(ptr, len) };
        let id = self.inner.engine.core().post_recv(p, RecvBuf::Raw(raw));
        Ok(self.request(id))
    }
}
