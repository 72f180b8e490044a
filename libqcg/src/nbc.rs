//! Non-blocking collectives: a started schedule is a [`Request`] that the engine
//! advances on its own.
//!
//! [`Comm::start_collective`] takes this rank's schedule (the same hierarchical,
//! topology-aware one the blocking call uses, from [`qcg_coll::schedule_for`]), makes
//! the links it needs, posts every receive of every round at once (the rounds rule of
//! [`qcg_coll`], kept a fortiori) and runs the first steps. The rest happens in
//! the collective's [`crate::engine::Progress::advance`], which the engine calls
//! after every turn of its loop, whoever drives it: the background progress thread while the program computes, or any
//! thread waiting in the engine. Each call runs the steps in order until one needs
//! the bytes of a receive that has not landed: that is where a round ends, and the
//! next turn that brings a message goes on from there. Local steps run through
//! [`qcg_coll::exec::local`], as in the blocking path and the simulator.
//!
//! Calls are numbered with the blocking ones (the tags carry the number), so every
//! rank must start its collectives, blocking or not, in the same order, as MPI asks.
//! A message is checked against what this rank called, as in the blocking path. A
//! caller waiting on one while nothing of it moves for the collective timeout
//! (`QCG_COLL_TIMEOUT`, as the blocking calls) gets an error naming the rank it
//! waits for; time spent computing before the wait does not count.
//!
//! ```no_run
//! # fn main() -> Result<(), qcg::Error> {
//! let comm = qcg::init()?;
//! let r = comm.iallreduce(&[comm.rank() as u64], qcg::ReduceOp::Sum)?;
//! // ... compute: the engine's thread moves the schedule on meanwhile ...
//! let sum = r.wait()?.into_collective().expect("a collective");
//! # let _ = sum;
//! # Ok(()) }
//! ```

use crate::callsig::{op_name, CallSig, HEADER};
use crate::coll::{Number, Planned, ReduceOp, SentCopy, COLL_CONTEXT, SEQ_MASK, SEQ_SHIFT};
use crate::comm::{Comm, View};
use crate::engine::core::{Core, Outcome, RecvBuf, SendBuf};
use crate::engine::matching::Pattern;
use crate::engine::Link;
use crate::engine::Progress;
use crate::error::{Error, Result};
use crate::request::Request;
use qcg_coll::exec::{self, Buffers};
use qcg_coll::{Algorithm, Buf, Collective, Op, Order, RankSchedule, Step};
use std::borrow::Cow;
use std::collections::VecDeque;
use std::ops::Range;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// `f(a, b)` leaves `a ∘ b` in `a`, for one element; shareable with the engine's
/// thread.
pub type ElemOp = Arc<dyn Fn(&mut [u8], &[u8]) + Send + Sync>;

/// An elementwise combination (`d = d ∘ s` or `s ∘ d`) the engine's thread may run.
pub type SharedCombine = Arc<dyn Fn(&mut [u8], &[u8], Order) + Send + Sync>;

/// A receive of the schedule: posted, and where its bytes go once its step is
/// reached.
struct Pending {
    id: usize,
    from: usize,
    buf: Buf,
    range: Range<usize>,
}

/// One non-blocking collective in flight.
pub(crate) struct Run {
    state: Mutex<State>,
}

struct State {
    planned: Arc<Planned>,
    view: Arc<View>,
    bufs: Buffers<'static>,
    combine: Option<SharedCombine>,
    /// Index of the next step to run.
    next: usize,
    /// Receives posted ahead, in step order, whose steps are not reached yet.
    early: VecDeque<usize>,
    /// Receives whose steps are reached, in step order, not landed yet.
    recvs: VecDeque<Pending>,
    /// Sends started: (request, rank).
    sends: Vec<(usize, usize)>,
    ctx: u32,
    seq: u32,
    header: [u8; HEADER],
    /// The last message copied for a send (see [`SentCopy`]).
    copies: SentCopy,
    name: &'static str,
    /// The result, once finished (taken by the request).
    outcome: Option<Result<Vec<u8>>>,
    /// Receives landed and sends completed so far: whether anything moved.
    moved: u64,
    /// How long a waiter waits with nothing moving (the collective timeout).
    timeout: Duration,
}

impl Run {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Advances, then the result if the collective is finished (taken: a second call
    /// says it was).
    pub(crate) fn poll(&self, core: &mut Core<Link>) -> Option<Result<Vec<u8>>> {
        let mut s = self.lock();
        s.advance(core);
        let r = s.outcome.take();
        if r.is_some() {
            s.outcome = Some(Err(Error::InvalidArgument(
                "this request has already completed".into(),
            )));
        }
        r
    }

    /// How long a waiter may wait with nothing moving, and how much moved so far.
    pub(crate) fn stall(&self) -> (Duration, u64) {
        let s = self.lock();
        (s.timeout, s.moved)
    }

    /// Fails the collective because nothing moved for the timeout while a caller
    /// waited: names the rank it waits for.
    pub(crate) fn give_up(&self, core: &mut Core<Link>) -> Error {
        let mut s = self.lock();
        let peer = s
            .recvs
            .front()
            .map(|p| p.from)
            .or_else(|| {
                // The receive the next step needs, posted ahead.
                let steps = &s.planned.sched.steps;
                steps[s.next.min(steps.len())..]
                    .iter()
                    .find_map(|st| match st {
                        Step::Recv { from, .. } => Some(*from),
                        _ => None,
                    })
            })
            .or_else(|| s.sends.last().map(|&(_, to)| to));
        let e = s.err(format!(
            "{} sent nothing for {:.0} s: it died, or the ranks disagree on the call (operation, root or size)",
            peer.map_or("no rank".to_string(), |p| format!("rank {p}")),
            s.timeout.as_secs_f64()
        ));
        s.fail(core, e.to_string());
        e
    }

    /// Advances; whether the collective is finished.
    pub(crate) fn done(&self, core: &mut Core<Link>) -> bool {
        let mut s = self.lock();
        s.advance(core);
        s.outcome.is_some()
    }
}

impl Progress for Run {
    fn advance(&self, core: &mut Core<Link>) -> bool {
        let mut s = self.lock();
        s.advance(core);
        s.outcome.is_some()
    }
}

impl State {
    fn err(&self, message: String) -> Error {
        Error::Collective {
            op: self.name,
            message,
        }
    }

    fn advance(&mut self, core: &mut Core<Link>) {
        if self.outcome.is_some() {
            return;
        }
        match self.steps(core) {
            Ok(false) => {}
            Ok(true) => {
                let out = std::mem::replace(
                    &mut self.bufs,
                    Buffers::new(&RankSchedule::default(), Cow::Borrowed(&[])),
                );
                self.outcome = Some(Ok(out.into_output()));
            }
            Err(e) => {
                self.detach_all(core);
                self.outcome = Some(Err(e));
            }
        }
    }

    /// Whatever is pending is detached: an unmatched receive is cancelled, a send
    /// finishes on its own.
    fn detach_all(&mut self, core: &mut Core<Link>) {
        core.detach_each(self.sends.drain(..).map(|s| s.0));
        core.detach_each(self.recvs.drain(..).map(|p| p.id));
        core.detach_each(self.early.drain(..));
    }

    fn fail(&mut self, core: &mut Core<Link>, message: String) {
        if self.outcome.is_none() {
            self.detach_all(core);
            self.outcome = Some(Err(self.err(message)));
        }
    }

    /// Runs steps until one waits for a message; true once every step ran and
    /// every send completed.
    fn steps(&mut self, core: &mut Core<Link>) -> Result<bool> {
        let planned = self.planned.clone();
        let steps = &planned.sched.steps;
        while let Some(step) = steps.get(self.next) {
            match step {
                Step::Send {
                    to,
                    tag,
                    buf,
                    range,
                } => {
                    if !self.land_order(core)? || !self.land(core, *buf, range)? {
                        return Ok(false);
                    }
                    let body = self
                        .bufs
                        .get(*buf)
                        .and_then(|d| d.get(range.clone()))
                        .ok_or_else(|| self.err("a send outside its buffer".into()))?;
                    let data = self.copies.message(&self.header, *buf, range, body);
                    let g = self.view.global(*to as u32);
                    let id = core.post_send_allowing(
                        g,
                        (self.seq << SEQ_SHIFT) | tag,
                        self.ctx,
                        SendBuf::Shared(data),
                        HEADER,
                    );
                    self.sends.push((id, *to));
                }
                Step::Recv {
                    from, buf, range, ..
                } => {
                    self.copies.forget();
                    // Two receives into the same bytes land in step order.
                    if !self.land(core, *buf, range)? {
                        return Ok(false);
                    }
                    let id = self
                        .early
                        .pop_front()
                        .ok_or_else(|| self.err("a receive was not posted ahead".into()))?;
                    self.recvs.push_back(Pending {
                        id,
                        from: *from,
                        buf: *buf,
                        range: range.clone(),
                    });
                }
                Step::Copy {
                    dst,
                    dst_range,
                    src,
                    src_range,
                }
                | Step::Reduce {
                    dst,
                    dst_range,
                    src,
                    src_range,
                    ..
                } => {
                    self.copies.forget();
                    if !self.land_order(core)?
                        || !self.land(core, *dst, dst_range)?
                        || !self.land(core, *src, src_range)?
                    {
                        return Ok(false);
                    }
                    let f = self.combine.clone();
                    let f = f.as_deref().map(|f| f as exec::Combine<'_>);
                    exec::local(&mut self.bufs, step, f)
                        .map_err(|e| self.err(format!("a local step of the schedule: {e}")))?;
                }
            }
            self.next += 1;
        }
        if !self.land_first(core, self.recvs.len())? {
            return Ok(false);
        }
        while let Some(&(id, to)) = self.sends.last() {
            match core.take(id) {
                None => return Ok(false),
                Some(Ok(_)) => {
                    self.sends.pop();
                    self.moved += 1;
                }
                Some(Err(e)) => {
                    self.sends.pop();
                    return Err(self.err(format!("sending to rank {to}: {e}")));
                }
            }
        }
        Ok(true)
    }

    /// Lands, in posting order, the receives into bytes that overlap `buf[range]`;
    /// false if one of them has not arrived yet.
    fn land(&mut self, core: &mut Core<Link>, buf: Buf, range: &Range<usize>) -> Result<bool> {
        match self
            .recvs
            .iter()
            .rposition(|p| p.buf == buf && exec::overlaps(&p.range, range))
        {
            Some(last) => self.land_first(core, last + 1),
            None => Ok(true),
        }
    }

    /// Lands the pending zero-byte receives (and those before them): they carry no
    /// data, only an order (a barrier's arrivals), which every later step keeps.
    fn land_order(&mut self, core: &mut Core<Link>) -> Result<bool> {
        match self.recvs.iter().rposition(|p| p.range.is_empty()) {
            Some(last) => self.land_first(core, last + 1),
            None => Ok(true),
        }
    }

    /// Lands the first `n` pending receives if they arrived (in order).
    fn land_first(&mut self, core: &mut Core<Link>, n: usize) -> Result<bool> {
        for _ in 0..n {
            let Some(p) = self.recvs.front() else {
                return Ok(true);
            };
            let from = p.from;
            let data = match core.take(p.id) {
                None => return Ok(false),
                Some(Ok(Outcome::Received(_, Some(d)))) => d,
                Some(Ok(_)) => {
                    self.recvs.pop_front();
                    return Err(self.err(format!("receiving from rank {from}: cancelled")));
                }
                Some(Err(e)) => {
                    self.recvs.pop_front();
                    return Err(match e {
                        Error::PeerLost { reason, .. } => {
                            self.err(format!("rank {from} is gone: {reason}"))
                        }
                        other => self.err(format!("receiving from rank {from}: {other}")),
                    });
                }
            };
            let Some(p) = self.recvs.pop_front() else {
                return Ok(true);
            };
            self.moved += 1;
            self.check_header(from, &data)?;
            let body = &data[HEADER..];
            if body.len() != p.range.len() {
                return Err(self.err(format!(
                    "rank {from} sent {} bytes where {} were expected: the ranks disagree on sizes or roots",
                    body.len(),
                    p.range.len()
                )));
            }
            self.bufs
                .store(p.buf, &p.range, body)
                .map_err(|e| self.err(format!("a receive of the schedule: {e}")))?;
        }
        Ok(true)
    }

    fn check_header(&self, from: usize, data: &[u8]) -> Result<()> {
        let Some(theirs) = CallSig::decode(data) else {
            return Err(self.err(format!(
                "rank {from} sent a message of {} bytes without a collective header",
                data.len()
            )));
        };
        match theirs.disagreement(&self.planned.sig) {
            None => Ok(()),
            Some(on) => Err(Error::Disagreement {
                op: self.name,
                on,
                message: crate::callsig::mismatch_text(
                    from as u32,
                    &theirs,
                    self.view.rank,
                    &self.planned.sig,
                ),
            }),
        }
    }
}

impl Comm {
    /// Starts `coll` without waiting: this rank's schedule (as the blocking call
    /// would run it) with `input` (`schedule.input_len` bytes), combining with
    /// `combine` for a reduction. The request's [`crate::Completion::Collective`]
    /// holds the schedule's output (see [`qcg_coll`] for its layout per operation).
    pub fn start_collective(
        &self,
        coll: Collective,
        input: Vec<u8>,
        combine: Option<SharedCombine>,
    ) -> Result<Request> {
        let planned = self.schedule(&coll)?;
        self.start_planned(planned, input, combine)
    }

    /// Starts a schedule made by the caller (e.g. for the v-collectives, whose
    /// blocks differ per rank): `sched` must be this rank's part of schedules every
    /// rank builds alike for one call, and `sig` what every rank's messages carry
    /// (the same on every rank).
    pub fn start_schedule(
        &self,
        sched: RankSchedule,
        sig: Collective,
        input: Vec<u8>,
        combine: Option<SharedCombine>,
    ) -> Result<Request> {
        let planned = Arc::new(Planned::new(
            sched,
            CallSig::new(&sig, Algorithm::FlatLinear, 1),
        ));
        self.start_planned(planned, input, combine)
    }

    fn start_planned(
        &self,
        planned: Arc<Planned>,
        input: Vec<u8>,
        combine: Option<SharedCombine>,
    ) -> Result<Request> {
        let name = op_name(planned.sig.op);
        let sched = &planned.sched;
        if input.len() != sched.input_len {
            return Err(Error::Collective {
                op: name,
                message: format!(
                    "this rank passed {} bytes where {} were expected",
                    input.len(),
                    sched.input_len
                ),
            });
        }
        let view = self.view_arc();
        // Links first, on this thread: the engine's thread only moves bytes.
        for step in &sched.steps {
            if let Step::Send { to, range, .. } = step {
                let g = view.global(*to as u32);
                self.ensure_link(g).map_err(|e| Error::Collective {
                    op: name,
                    message: format!("sending to rank {to}: {e}"),
                })?;
                self.count_sent(g, HEADER + range.len());
            }
        }
        let seq = view
            .calls
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            & SEQ_MASK;
        {
            let mut recent = view.recent.lock().unwrap_or_else(|p| p.into_inner());
            if recent.len() > crate::coll::STALE_WINDOW as usize {
                recent.pop_front();
            }
            recent.push_back((seq, planned.sig));
        }
        let ctx = view.context | COLL_CONTEXT;
        let mut state = State {
            bufs: Buffers::new(sched, Cow::Owned(input)),
            planned: planned.clone(),
            view: view.clone(),
            combine,
            next: 0,
            early: VecDeque::new(),
            recvs: VecDeque::new(),
            sends: Vec::new(),
            ctx,
            seq,
            header: planned.sig.encode(),
            copies: SentCopy::default(),
            name,
            outcome: None,
            moved: 0,
            timeout: self.coll_options().timeout,
        };
        let engine = self.inner.engine.clone();
        {
            let mut core = engine.core();
            // Every receive of every round before the first send.
            for step in &sched.steps {
                if let Step::Recv { from, tag, .. } = step {
                    let pattern = Pattern {
                        context: ctx,
                        source: Some(view.global(*from as u32)),
                        tag: Some((seq << SEQ_SHIFT) | tag),
                    };
                    state
                        .early
                        .push_back(core.post_recv(pattern, RecvBuf::Alloc(Vec::new())));
                }
            }
            state.advance(&mut core);
        }
        let finished = state.outcome.is_some();
        let run = Arc::new(Run {
            state: Mutex::new(state),
        });
        if !finished {
            engine.add_progress(run.clone());
        }
        Ok(Request::collective(engine, view, run))
    }

    /// [`Comm::barrier`], started.
    pub fn ibarrier(&self) -> Result<Request> {
        self.start_collective(Collective::new(Op::Barrier, 0, 0), Vec::new(), None)
    }

    /// [`Comm::bcast`], started: every rank passes `len` (the root its `data` of
    /// that length, the others anything); the completion holds the root's bytes.
    pub fn ibcast(&self, root: u32, data: Vec<u8>, len: usize) -> Result<Request> {
        self.check_root(root)?;
        let input = if self.rank() == root {
            data
        } else {
            Vec::new()
        };
        self.start_collective(Collective::new(Op::Bcast, root as usize, len), input, None)
    }

    /// [`Comm::reduce_bytes`], started; the completion holds the result at `root`
    /// (empty elsewhere).
    pub fn ireduce_bytes(
        &self,
        root: u32,
        data: Vec<u8>,
        elem_size: usize,
        commutative: bool,
        f: ElemOp,
    ) -> Result<Request> {
        self.check_root(root)?;
        self.ireduction(Op::Reduce, root, data, elem_size, commutative, f)
    }

    /// [`Comm::allreduce_bytes`], started.
    pub fn iallreduce_bytes(
        &self,
        data: Vec<u8>,
        elem_size: usize,
        commutative: bool,
        f: ElemOp,
    ) -> Result<Request> {
        self.ireduction(Op::Allreduce, 0, data, elem_size, commutative, f)
    }

    /// [`Comm::allreduce`], started; the completion holds the little-endian bytes
    /// of the result.
    pub fn iallreduce<T: Number>(&self, data: &[T], op: ReduceOp) -> Result<Request> {
        let f = Arc::new(Self::typed_op_shared::<T>(op)?);
        let mut bytes = vec![0u8; data.len() * T::SIZE];
        for (x, c) in data.iter().zip(bytes.chunks_exact_mut(T::SIZE)) {
            x.write(c);
        }
        self.iallreduce_bytes(bytes, T::SIZE, true, f)
    }

    fn ireduction(
        &self,
        op: Op,
        root: u32,
        data: Vec<u8>,
        elem_size: usize,
        commutative: bool,
        f: ElemOp,
    ) -> Result<Request> {
        if elem_size == 0 || data.len() % elem_size != 0 {
            return Err(Error::InvalidArgument(format!(
                "{} bytes are not a whole number of {elem_size}-byte elements",
                data.len()
            )));
        }
        let coll = Collective::new(op, root as usize, data.len())
            .elem_size(elem_size)
            .commutative(commutative);
        self.start_collective(coll, data, Some(in_order(elem_size, f)))
    }

    /// [`Comm::gather`], started; the completion holds every block at `root`.
    pub fn igather(&self, root: u32, data: Vec<u8>) -> Result<Request> {
        self.check_root(root)?;
        let n = data.len();
        self.start_collective(Collective::new(Op::Gather, root as usize, n), data, None)
    }

    /// [`Comm::scatter`], started.
    pub fn iscatter(&self, root: u32, data: Vec<u8>, block: usize) -> Result<Request> {
        self.check_root(root)?;
        let input = if self.rank() == root {
            if data.len() != block * self.size() as usize {
                return Err(Error::InvalidArgument(format!(
                    "scatter: the root passed {} bytes, not {} blocks of {block}",
                    data.len(),
                    self.size()
                )));
            }
            data
        } else {
            Vec::new()
        };
        self.start_collective(
            Collective::new(Op::Scatter, root as usize, block),
            input,
            None,
        )
    }

    /// [`Comm::allgather`], started.
    pub fn iallgather(&self, data: Vec<u8>) -> Result<Request> {
        let n = data.len();
        self.start_collective(Collective::new(Op::Allgather, 0, n), data, None)
    }

    /// [`Comm::alltoall`], started.
    pub fn ialltoall(&self, data: Vec<u8>) -> Result<Request> {
        let p = self.size() as usize;
        if data.len() % p != 0 {
            return Err(Error::InvalidArgument(format!(
                "alltoall: {} bytes are not {p} equal blocks",
                data.len()
            )));
        }
        let n = data.len() / p;
        self.start_collective(Collective::new(Op::Alltoall, 0, n), data, None)
    }

    fn typed_op_shared<T: Number>(op: ReduceOp) -> Result<impl Fn(&mut [u8], &[u8]) + Send + Sync> {
        let zero = T::read(&vec![0u8; T::SIZE]);
        if T::apply(op, zero, zero).is_none() {
            return Err(Error::InvalidArgument(format!(
                "{op:?} does not apply to {}",
                std::any::type_name::<T>()
            )));
        }
        Ok(move |a: &mut [u8], b: &[u8]| {
            if let Some(r) = T::apply(op, T::read(a), T::read(b)) {
                r.write(a);
            }
        })
    }
}

/// `f(a, b)` leaves `a ∘ b` in `a` for one element; the schedule's combine, element
/// by element, in either order.
pub fn in_order(elem_size: usize, f: ElemOp) -> SharedCombine {
    Arc::new(move |d: &mut [u8], s: &[u8], order: Order| {
        for (dc, sc) in d.chunks_exact_mut(elem_size).zip(s.chunks_exact(elem_size)) {
            match order {
                Order::DstFirst => f(dc, sc),
                Order::SrcFirst => {
                    let mut tmp = sc.to_vec();
                    f(&mut tmp, dc);
                    dc.copy_from_slice(&tmp);
                }
            }
        }
    })
}
