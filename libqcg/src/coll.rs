//! Collectives on a communicator: broadcast, reduce, allreduce, gather, scatter,
//! allgather, alltoall, barrier, and `split`.
//!
//! Every call shape gets this rank's schedule from [`qcg_coll::schedule_for`] once (the
//! communicator keeps it) and runs it on the engine in rounds (see `Rounds`): sends
//! never wait (to several peers at once), receives are posted early and match on
//! (source, tag) inside a context of their own, so collective traffic never meets user
//! messages. The
//! algorithm and flit count come from [`CollOptions`]: `Auto` asks the cost model
//! ([`qcg_coll::auto`]) once per call shape. Local steps run through
//! [`qcg_coll::exec::local`], the executor the simulator and the non-blocking
//! collectives ([`crate::nbc`], the same schedules started as requests) share.
//!
//! Every rank must make the same calls in the same order with the same root and
//! sizes. Each message starts with what its sender called ([`crate::callsig`]): a
//! rank that receives one of another call, or one that none of its receives takes,
//! fails naming the sender and both calls ([`Error::Disagreement`]); a message an
//! earlier call left unreceived fails the next call. A rank that dies, or one that
//! sends nothing, is named after at most the collective timeout (`QCG_COLL_TIMEOUT`
//! seconds, 60 by default).

use crate::callsig::{op_name, CallSig, HEADER};
use crate::comm::{Comm, View};
use crate::engine::core::{Outcome, RecvBuf, SendBuf, Split};
use crate::engine::matching::Pattern;
use crate::engine::rawbuf::RawBuf;
use crate::error::{Error, Result};
use qcg_coll::exec::Buffers;
use qcg_coll::{Algorithm, Buf, Collective, Op, Order, RankSchedule, Step};
use std::sync::Arc;
use std::time::Duration;

/// Context bit of collective traffic.
pub(crate) const COLL_CONTEXT: u32 = 1 << 31;
/// Successive calls are kept apart by a sequence number above the schedule's tags.
pub(crate) const SEQ_SHIFT: u32 = 18;
pub(crate) const SEQ_MASK: u32 = (1 << 13) - 1;
/// Tag of the message a failing rank sends everyone so that no one waits for it.
const ABORT_TAG: u32 = u32::MAX;

/// Which algorithm a collective uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Algo {
    /// Chosen per call from the topology's cost model.
    Auto,
    /// One representative per group at every level of the topology.
    Hierarchical,
    /// A binomial tree over ranks, ignoring the topology.
    FlatBinomial,
    /// The root talks to everyone.
    FlatLinear,
    /// A pipelined chain.
    Chain,
}

impl std::str::FromStr for Algo {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        Ok(match s {
            "auto" => Algo::Auto,
            "hier" | "hierarchical" => Algo::Hierarchical,
            // Also the names a disagreement between ranks prints.
            "flat" | "binomial" | "flat-binomial" => Algo::FlatBinomial,
            "linear" | "flat-linear" => Algo::FlatLinear,
            "chain" => Algo::Chain,
            _ => {
                return Err(format!(
                    "unknown algorithm `{s}`: expected auto, hier, flat, linear or chain"
                ))
            }
        })
    }
}

/// Schedules a communicator keeps: (call, algorithm and flits asked for) → this rank's
/// schedule (choosing and building one costs up to a millisecond at 1024 ranks).
pub(crate) type Schedules =
    std::collections::HashMap<(Collective, Algo, Option<usize>), Arc<Planned>>;

/// A call shape's schedule on this rank, and the signature its messages carry.
pub(crate) struct Planned {
    pub(crate) sched: RankSchedule,
    pub(crate) sig: CallSig,
    /// Per step: a receive the blocking executor lands straight in its buffer
    /// ([`qcg_coll::exec::direct_receives`]); made on first use.
    direct: std::sync::OnceLock<Vec<bool>>,
    /// Whether the steps write every output byte before reading it
    /// ([`qcg_coll::exec::fills_output`]); made on first use.
    fills: std::sync::OnceLock<bool>,
    /// Which buffers may start with an earlier call's bytes
    /// ([`qcg_coll::exec::reusable`]); made on first use.
    reusable: std::sync::OnceLock<Vec<bool>>,
    /// Per step: a send the blocking executor lends rather than copies
    /// ([`qcg_coll::exec::lendable_sends`]); made on first use.
    lendable: std::sync::OnceLock<Vec<bool>>,
    /// The schedule for a caller that does not want the output
    /// ([`qcg_coll::exec::without_output`]); made on first use.
    unwanted: std::sync::OnceLock<Option<Arc<Planned>>>,
}

impl Planned {
    pub(crate) fn new(sched: RankSchedule, sig: CallSig) -> Planned {
        Planned {
            sched,
            sig,
            direct: std::sync::OnceLock::new(),
            fills: std::sync::OnceLock::new(),
            reusable: std::sync::OnceLock::new(),
            lendable: std::sync::OnceLock::new(),
            unwanted: std::sync::OnceLock::new(),
        }
    }

    /// This plan for a caller that does not want the output (a broadcast's root),
    /// if it has steps only for that (copies into the output): without them, and
    /// without the output's buffer to fill.
    fn without_output(&self) -> Option<Arc<Planned>> {
        self.unwanted
            .get_or_init(|| {
                qcg_coll::exec::without_output(&self.sched)
                    .map(|sched| Arc::new(Planned::new(sched, self.sig)))
            })
            .clone()
    }

    fn lendable(&self) -> &[bool] {
        self.lendable
            .get_or_init(|| qcg_coll::exec::lendable_sends(&self.sched, DIRECT_MIN))
    }

    fn reusable(&self) -> &[bool] {
        self.reusable
            .get_or_init(|| qcg_coll::exec::reusable(&self.sched))
    }

    fn fills_output(&self) -> bool {
        *self
            .fills
            .get_or_init(|| qcg_coll::exec::fills_output(&self.sched))
    }

    fn direct(&self) -> &[bool] {
        self.direct
            .get_or_init(|| qcg_coll::exec::direct_receives(&self.sched, DIRECT_MIN))
    }
}

/// Where a collective's result goes.
enum Out<'a> {
    /// Returned to the caller.
    Returned,
    /// Into the caller's buffer, of the output's length.
    Into(&'a mut [u8]),
    /// Nowhere: the caller has it already (a broadcast's root). The output is not
    /// even made where only copies into it would fill it.
    Unwanted,
}

/// Buffers of finished collectives, which later ones take instead of zero-filling
/// new ones where their schedule writes every byte before reading it
/// ([`qcg_coll::exec::Buffers::reusing`]): a 16-rank allreduce of 1 MiB zeroed 2 MiB
/// per rank and call, a tenth of its time on a crowded node.
static SPARES: std::sync::Mutex<Vec<Vec<u8>>> = std::sync::Mutex::new(Vec::new());

/// Most bytes [`SPARES`] keeps.
const SPARE_BYTES: usize = 32 << 20;

/// Keeps `bufs` in [`SPARES`], dropping the largest ones beyond [`SPARE_BYTES`].
fn keep_spares(bufs: impl FnOnce(&mut Vec<Vec<u8>>)) {
    let mut spares = SPARES.lock().unwrap_or_else(|p| p.into_inner());
    bufs(&mut spares);
    let mut total: usize = spares.iter().map(Vec::capacity).sum();
    while total > SPARE_BYTES {
        let Some(big) = (0..spares.len()).max_by_key(|&j| spares[j].capacity()) else {
            break;
        };
        total -= spares.swap_remove(big).capacity();
    }
}

/// The smallest receive of a blocking collective that lands straight in the
/// schedule's buffer (when a link reads the sender's memory, the message is then
/// copied once) rather than in a buffer of the engine's and then copied.
const DIRECT_MIN: usize = 16 * 1024;

/// Most schedules a communicator keeps before starting afresh.
const MAX_SCHEDULES: usize = 1024;

/// How collectives run on a communicator.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CollOptions {
    /// The algorithm.
    pub algo: Algo,
    /// Flits per message; `None` lets the cost model pick.
    pub flits: Option<usize>,
    /// How long a rank waits for one message of a collective.
    pub timeout: Duration,
}

impl Default for CollOptions {
    fn default() -> Self {
        CollOptions {
            algo: Algo::Auto,
            flits: None,
            timeout: Duration::from_secs(60),
        }
    }
}

impl CollOptions {
    /// Defaults, overridden by `QCG_COLL_ALGO`, `QCG_COLL_FLITS`, `QCG_COLL_TIMEOUT`;
    /// a value that does not parse is an error naming the variable and the value.
    pub fn from_env() -> Result<Self> {
        let get = |name: &str| std::env::var(name).ok();
        Self::from_vars(&get)
    }

    /// [`CollOptions::from_env`] over `get`, a variable's value by name.
    fn from_vars(get: &dyn Fn(&str) -> Option<String>) -> Result<Self> {
        let mut o = CollOptions::default();
        let var = |name: &'static str| {
            get(name)
                .map(|v| (name, v.trim().to_string()))
                .filter(|(_, v)| !v.is_empty())
        };
        let bad = |var: &'static str, message: String| Error::Env { var, message };
        if let Some((name, v)) = var(qcg_wire::env::COLL_ALGO) {
            o.algo = v.parse().map_err(|e| bad(name, e))?;
        }
        if let Some((name, v)) = var(qcg_wire::env::COLL_FLITS) {
            match v.parse::<usize>() {
                Ok(k) if (1..=qcg_coll::MAX_FLITS).contains(&k) => o.flits = Some(k),
                _ => {
                    return Err(bad(
                        name,
                        format!(
                            "`{v}` is not a flit count from 1 to {}",
                            qcg_coll::MAX_FLITS
                        ),
                    ))
                }
            }
        }
        if let Some((name, v)) = var(qcg_wire::env::COLL_TIMEOUT) {
            match v.parse::<f64>() {
                Ok(t) if t.is_finite() && t > 0.0 && t < 1e9 => {
                    o.timeout = Duration::from_secs_f64(t.max(0.001))
                }
                _ => return Err(bad(name, format!("`{v}` is not a number of seconds"))),
            }
        }
        Ok(o)
    }
}

/// How a reduction of [`Comm::reduce_runs_into`] runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reduction {
    /// Bytes per element.
    pub elem_size: usize,
    /// Whether the operation may combine in any order.
    pub commutative: bool,
    /// The caller's names for the operation and the elements (an MPI operation's
    /// handle and a datatype's signature, say; 0 for none), carried by every message
    /// of the call: ranks that name different ones fail, saying which
    /// ([`crate::callsig::name_labels`] says how errors name them).
    pub labels: (u32, u32),
}

/// A reduction operation on numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceOp {
    /// Sum (wrapping for integers).
    Sum,
    /// Product (wrapping for integers).
    Prod,
    /// Minimum.
    Min,
    /// Maximum.
    Max,
    /// Bitwise and (integers only).
    BitAnd,
    /// Bitwise or (integers only).
    BitOr,
    /// Bitwise exclusive or (integers only).
    BitXor,
    /// Logical and: non-zero is true; the result is 1 or 0.
    LogicalAnd,
    /// Logical or.
    LogicalOr,
}

/// A number collectives can carry and combine.
pub trait Number: Copy + Send + Sync + 'static {
    /// Size in bytes.
    const SIZE: usize;
    /// Reads one value (little-endian).
    fn read(b: &[u8]) -> Self;
    /// Writes one value (little-endian).
    fn write(self, b: &mut [u8]);
    /// `a ∘ b`, or `None` when `op` does not apply to this type.
    fn apply(op: ReduceOp, a: Self, b: Self) -> Option<Self>;
}

/// The size and little-endian conversions every [`Number`] shares.
macro_rules! le_bytes {
    ($t:ty) => {
        const SIZE: usize = std::mem::size_of::<$t>();
        fn read(b: &[u8]) -> Self {
            let mut a = [0u8; std::mem::size_of::<$t>()];
            a.copy_from_slice(&b[..Self::SIZE]);
            <$t>::from_le_bytes(a)
        }
        fn write(self, b: &mut [u8]) {
            b[..Self::SIZE].copy_from_slice(&self.to_le_bytes());
        }
    };
}

macro_rules! int_number {
    ($($t:ty),*) => {$(
        impl Number for $t {
            le_bytes!($t);
            fn apply(op: ReduceOp, a: Self, b: Self) -> Option<Self> {
                Some(match op {
                    ReduceOp::Sum => a.wrapping_add(b),
                    ReduceOp::Prod => a.wrapping_mul(b),
                    ReduceOp::Min => a.min(b),
                    ReduceOp::Max => a.max(b),
                    ReduceOp::BitAnd => a & b,
                    ReduceOp::BitOr => a | b,
                    ReduceOp::BitXor => a ^ b,
                    ReduceOp::LogicalAnd => (a != 0 && b != 0) as $t,
                    ReduceOp::LogicalOr => (a != 0 || b != 0) as $t,
                })
            }
        }
    )*};
}
int_number!(u8, i8, u16, i16, u32, i32, u64, i64);

macro_rules! float_number {
    ($($t:ty),*) => {$(
        impl Number for $t {
            le_bytes!($t);
            fn apply(op: ReduceOp, a: Self, b: Self) -> Option<Self> {
                Some(match op {
                    ReduceOp::Sum => a + b,
                    ReduceOp::Prod => a * b,
                    ReduceOp::Min => a.min(b),
                    ReduceOp::Max => a.max(b),
                    ReduceOp::LogicalAnd => (a != 0.0 && b != 0.0) as u8 as $t,
                    ReduceOp::LogicalOr => (a != 0.0 || b != 0.0) as u8 as $t,
                    ReduceOp::BitAnd | ReduceOp::BitOr | ReduceOp::BitXor => return None,
                })
            }
        }
    )*};
}
float_number!(f32, f64);

fn to_bytes<T: Number>(v: &[T]) -> Vec<u8> {
    let mut out = vec![0u8; v.len() * T::SIZE];
    for (x, chunk) in v.iter().zip(out.chunks_exact_mut(T::SIZE)) {
        x.write(chunk);
    }
    out
}

fn from_bytes<T: Number>(b: &[u8]) -> Vec<T> {
    b.chunks_exact(T::SIZE).map(T::read).collect()
}

/// Combines `d = d ∘ s` (or `s ∘ d`) elementwise over byte slices.
type Combine<'a> = qcg_coll::exec::Combine<'a>;

impl Comm {
    /// The collective options of this communicator.
    pub fn coll_options(&self) -> CollOptions {
        *self
            .view()
            .options
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// Sets how this communicator's collectives run (every rank should set the same).
    pub fn set_coll_options(&self, o: CollOptions) {
        *self
            .view()
            .options
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = o;
    }

    /// This rank's schedule of `coll` under the current options: built once per call
    /// shape (algorithm and flits from the cost model when asked), then kept.
    pub(crate) fn schedule(&self, coll: &Collective) -> Result<Arc<Planned>> {
        let o = self.coll_options();
        let key = (*coll, o.algo, o.flits);
        let lock = || {
            self.view()
                .schedules
                .lock()
                .unwrap_or_else(|p| p.into_inner())
        };
        if let Some(s) = lock().get(&key) {
            return Ok(s.clone());
        }
        let (algo, flits) = self.choose_now(coll, o)?;
        let me = self.rank() as usize;
        let sched = qcg_coll::schedule_for(me, coll, self.topology(), algo, flits)
            .map(|sched| Arc::new(Planned::new(sched, CallSig::new(coll, algo, flits))))
            .map_err(|e| Error::Collective {
                op: op_name(coll.op),
                message: e.to_string(),
            })?;
        let mut schedules = lock();
        if schedules.len() >= MAX_SCHEDULES {
            schedules.clear();
        }
        schedules.insert(key, sched.clone());
        Ok(sched)
    }

    /// Whether a broadcast should go from the root to every rank at once: on one
    /// node with more ranks than cores, a message above the eager limit and links
    /// that copy it once. Each rank then copies it from the root's memory itself
    /// (the root only announces it), so the copies run on both cores at once instead
    /// of waiting for a core at every level of a tree. 16 ranks on 2 cores, medians
    /// of 3 interleaved runs, the model's tree against this: 128 KiB 679 / 553 µs,
    /// 256 KiB 891 / 707, 512 KiB 1284 / 837, 1 MiB 2439 / 1818 (64 KiB, sent
    /// eagerly, 417 / 466: the root copies each). The cost model charges the root
    /// for every copy, which fits a socket, not a lend; an allreduce's reduction
    /// still takes the model's tree (linear was slower from 256 KiB up).
    fn lends_to_all(&self, coll: &Collective) -> bool {
        coll.op == Op::Bcast
            && coll.bytes > self.engine_limits().eager
            && self.inner.engine.single_copy()
            && qcg_coll::auto::one_crowded_node(self.topology())
    }

    /// The cost model's answer for `coll` under options `o`.
    fn choose_now(&self, coll: &Collective, o: CollOptions) -> Result<(Algorithm, usize)> {
        let topo = self.topology();
        let fixed = match o.algo {
            Algo::Auto => None,
            Algo::Hierarchical => Some(Algorithm::Hierarchical),
            Algo::FlatBinomial => Some(Algorithm::FlatBinomial),
            Algo::FlatLinear => Some(Algorithm::FlatLinear),
            Algo::Chain => Some(Algorithm::Chain),
        };
        // Alltoall has only linear and hierarchical forms.
        let fixed = match (coll.op, fixed) {
            (Op::Alltoall, Some(Algorithm::FlatBinomial | Algorithm::Chain)) => {
                Some(Algorithm::FlatLinear)
            }
            (_, f) => f,
        };
        let bad = |e: qcg_coll::ScheduleError| Error::Collective {
            op: op_name(coll.op),
            message: e.to_string(),
        };
        match (fixed, o.flits) {
            (Some(a), Some(k)) => Ok((a, k)),
            (Some(a), None) => {
                let c = qcg_coll::auto::choose_among(coll, topo, &[a]).map_err(bad)?;
                Ok((a, c.flits))
            }
            (None, None) if self.lends_to_all(coll) => Ok((Algorithm::FlatLinear, 1)),
            (None, k) => {
                let c = qcg_coll::auto::choose(coll, topo).map_err(bad)?;
                Ok((c.algorithm, k.unwrap_or(c.flits)))
            }
        }
    }

    /// Runs one collective; if it fails here, tells every other rank of the
    /// communicator, so that they fail too instead of waiting for this one.
    fn collective(
        &self,
        coll: Collective,
        input: &[u8],
        combine: Option<Combine>,
    ) -> Result<Vec<u8>> {
        self.collective_into(coll, input, combine, Out::Returned, (0, 0))
    }

    /// [`Comm::collective`], the result returned, written into the caller's buffer
    /// (straight, when the schedule writes every output byte before reading it: see
    /// [`Buffers::reusing`]) or not made at all where the schedule allows
    /// ([`Out`]); the returned vector is empty but in the first case.
    fn collective_into(
        &self,
        coll: Collective,
        input: &[u8],
        combine: Option<Combine>,
        output: Out<'_>,
        labels: (u32, u32),
    ) -> Result<Vec<u8>> {
        self.run_collective(coll, input, combine, output, labels).map_err(|e| {
            // What this call leaves unreceived is no sign of a later disagreement.
            self.view()
                .coll_failed
                .store(true, std::sync::atomic::Ordering::Relaxed);
            let aborted_by_peer = matches!(&e, Error::Collective { message, .. } | Error::Disagreement { message, .. } if message.starts_with("rank ") && message.contains(" failed: "));
            if aborted_by_peer {
                e
            } else {
                self.abort(e)
            }
        })
    }

    /// Tells every other rank that this rank's collective failed, and why: a byte
    /// for what the ranks disagree on (0: something else), then the error's text.
    fn abort(&self, e: Error) -> Error {
        let ctx = self.view().context | COLL_CONTEXT;
        let mut why = vec![match &e {
            Error::Disagreement { on, .. } => on.code(),
            _ => 0,
        }];
        why.extend_from_slice(e.to_string().as_bytes());
        for r in (0..self.size()).filter(|&r| r != self.rank()) {
            let _ = self.send_in(ctx, self.view().global(r), ABORT_TAG, &why);
        }
        e
    }

    fn run_collective(
        &self,
        coll: Collective,
        input: &[u8],
        combine: Option<Combine>,
        output: Out<'_>,
        labels: (u32, u32),
    ) -> Result<Vec<u8>> {
        let name = op_name(coll.op);
        let err = |message: String| Error::Collective { op: name, message };
        let mut planned = self.schedule(&coll)?;
        let output = match output {
            Out::Returned => None,
            Out::Into(out) => Some(out),
            Out::Unwanted => {
                if let Some(p) = planned.without_output() {
                    planned = p;
                }
                None
            }
        };
        let sched = &planned.sched;
        if input.len() != sched.input_len {
            return Err(err(format!(
                "this rank passed {} bytes where {} were expected",
                input.len(),
                sched.input_len
            )));
        }
        let view: &View = self.view();
        let seq = view
            .calls
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            & SEQ_MASK;
        {
            let mut recent = view.recent.lock().unwrap_or_else(|p| p.into_inner());
            if recent.len() > STALE_WINDOW as usize {
                recent.pop_front();
            }
            recent.push_back((seq, planned.sig.labelled(labels)));
        }
        let ctx = view.context | COLL_CONTEXT;
        let timeout = self.coll_options().timeout;
        let input = std::borrow::Cow::Borrowed(input);
        if output.as_ref().is_some_and(|o| o.len() != sched.output_len) {
            return Err(err(format!(
                "a result buffer of another length than the schedule's ({} bytes)",
                sched.output_len
            )));
        }
        let (lent, mut copy_to) = match output {
            Some(out) if planned.fills_output() => (Some(out), None),
            out => (None, out),
        };
        let mut b = {
            let mut spares = SPARES.lock().unwrap_or_else(|p| p.into_inner());
            Buffers::reusing(sched, input, lent, planned.reusable(), &mut spares)
                .ok_or_else(|| err("a result buffer of another length".into()))?
        };
        let mut run = Rounds {
            comm: self,
            ctx,
            timeout,
            name,
            sends: Vec::new(),
            recvs: std::collections::VecDeque::new(),
            early: std::collections::VecDeque::new(),
            seq,
            sig: planned.sig.labelled(labels),
            header: planned.sig.labelled(labels).encode(),
            copies: SentCopy::default(),
            check_stale: !view.coll_failed.load(std::sync::atomic::Ordering::Relaxed),
        };
        let r = run.execute(
            &sched.steps,
            (planned.direct(), planned.lendable()),
            &mut b,
            seq,
            combine,
        );
        // Whatever is still pending (after a failure) is detached (`Rounds::drop`,
        // which also runs if a combining function panics): receives may write
        // into `b` or the caller's buffer until then. `run` goes before `b`.
        drop(run);
        r?;
        let out = match copy_to.take() {
            Some(out) => {
                out.copy_from_slice(b.get(Buf::Output).unwrap_or_default());
                Vec::new()
            }
            None => b.take_output(),
        };
        keep_spares(|spares| b.recycle(spares));
        Ok(out)
    }

    /// Takes back a result a collective returned (once read), for later calls'
    /// buffers: they then need not zero-fill new ones.
    pub fn reuse(&self, result: Vec<u8>) {
        if result.capacity() > 0 {
            keep_spares(|spares| spares.push(result));
        }
    }

    /// Broadcasts `buf` from `root` to every rank. Every rank passes a buffer of the
    /// same length; on return every rank's buffer holds the root's bytes.
    pub fn bcast(&self, root: u32, buf: &mut [u8]) -> Result<()> {
        self.check_root(root)?;
        let coll = Collective::new(Op::Bcast, root as usize, buf.len());
        if self.rank() == root {
            // The result is the root's own bytes: no output made (the schedule's
            // copy of them left out), and the buffer sent from where it lies.
            let spare = self.collective_into(coll, buf, None, Out::Unwanted, (0, 0))?;
            self.reuse(spare);
        } else {
            // A receiver's output arrives before anything reads it: it lands in
            // the caller's buffer.
            self.collective_into(coll, &[], None, Out::Into(buf), (0, 0))?;
        }
        Ok(())
    }

    pub(crate) fn check_root(&self, root: u32) -> Result<()> {
        if root >= self.size() {
            return Err(Error::InvalidRank {
                rank: root,
                size: self.size(),
            });
        }
        Ok(())
    }

    /// Reduces byte vectors of elements of `elem_size` bytes with `f` (`f(a, b)`
    /// must leave `a ∘ b` in `a`, element by element). Non-commutative operations
    /// combine in rank order: the result is `x0 ∘ x1 ∘ … ∘ x(P−1)`. The result is
    /// returned at `root` only.
    pub fn reduce_bytes(
        &self,
        root: u32,
        data: &[u8],
        elem_size: usize,
        commutative: bool,
        f: &dyn Fn(&mut [u8], &[u8]),
    ) -> Result<Option<Vec<u8>>> {
        self.check_root(root)?;
        let out = self.reduction(Op::Reduce, root, data, elem_size, commutative, f)?;
        Ok((self.rank() == root).then_some(out))
    }

    /// Like [`Comm::reduce_bytes`], with the result on every rank.
    pub fn allreduce_bytes(
        &self,
        data: &[u8],
        elem_size: usize,
        commutative: bool,
        f: &dyn Fn(&mut [u8], &[u8]),
    ) -> Result<Vec<u8>> {
        self.reduction(Op::Allreduce, 0, data, elem_size, commutative, f)
    }

    /// Reduces `data` (whole elements of `how.elem_size` bytes) with `f`, which
    /// combines a run of elements at once (`a = a ∘ b` element by element over two
    /// slices of the same length): at `root`, into its `out`, or on every rank
    /// (`root` `None`) into each rank's `out`; `out` is ignored where no result
    /// lands. The result is written straight into `out` where the schedule allows
    /// (else copied there). Ranks that label the call differently
    /// ([`Reduction::labels`]) fail naming each other's labels.
    pub fn reduce_runs_into(
        &self,
        root: Option<u32>,
        data: &[u8],
        out: Option<&mut [u8]>,
        how: Reduction,
        f: &dyn Fn(&mut [u8], &[u8]),
    ) -> Result<()> {
        let e = how.elem_size;
        if e == 0 || data.len() % e != 0 {
            return Err(Error::InvalidArgument(format!(
                "{} bytes are not a whole number of {e}-byte elements",
                data.len()
            )));
        }
        let (op, r) = match root {
            Some(r) => {
                self.check_root(r)?;
                (Op::Reduce, r)
            }
            None => (Op::Allreduce, 0),
        };
        let here = root.is_none_or(|r| r == self.rank());
        let out = if here { out } else { None };
        if here && out.as_ref().map(|o| o.len()) != Some(data.len()) {
            return Err(Error::InvalidArgument(format!(
                "a result buffer of {} bytes for a reduction of {} bytes",
                out.map_or(0, |o| o.len()),
                data.len()
            )));
        }
        let coll = Collective::new(op, r as usize, data.len())
            .elem_size(e)
            .commutative(how.commutative);
        let combine = |d: &mut [u8], s: &[u8], order: Order| match order {
            Order::DstFirst => f(d, s),
            Order::SrcFirst => {
                let mut tmp = s.to_vec();
                f(&mut tmp, d);
                d.copy_from_slice(&tmp);
            }
        };
        let out = out.map_or(Out::Returned, Out::Into);
        self.collective_into(coll, data, Some(&combine), out, how.labels)?;
        Ok(())
    }

    fn reduction(
        &self,
        op: Op,
        root: u32,
        data: &[u8],
        elem_size: usize,
        commutative: bool,
        f: &dyn Fn(&mut [u8], &[u8]),
    ) -> Result<Vec<u8>> {
        if elem_size == 0 || data.len() % elem_size != 0 {
            return Err(Error::InvalidArgument(format!(
                "{} bytes are not a whole number of {elem_size}-byte elements",
                data.len()
            )));
        }
        let coll = Collective::new(op, root as usize, data.len())
            .elem_size(elem_size)
            .commutative(commutative);
        let combine = |d: &mut [u8], s: &[u8], order: Order| {
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
        };
        self.collective(coll, data, Some(&combine))
    }

    fn typed_op<T: Number>(op: ReduceOp) -> Result<impl Fn(&mut [u8], &[u8])> {
        if T::apply(
            op,
            T::read(&vec![0u8; T::SIZE]),
            T::read(&vec![0u8; T::SIZE]),
        )
        .is_none()
        {
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

    /// Reduces `data` elementwise with `op` at `root` (`Some` there, `None` elsewhere).
    pub fn reduce<T: Number>(&self, root: u32, data: &[T], op: ReduceOp) -> Result<Option<Vec<T>>> {
        let f = Self::typed_op::<T>(op)?;
        Ok(self
            .reduce_bytes(root, &to_bytes(data), T::SIZE, true, &f)?
            .map(|b| from_bytes(&b)))
    }

    /// Reduces `data` elementwise with `op`; every rank gets the result.
    pub fn allreduce<T: Number>(&self, data: &[T], op: ReduceOp) -> Result<Vec<T>> {
        let f = Self::typed_op::<T>(op)?;
        Ok(from_bytes(&self.allreduce_bytes(
            &to_bytes(data),
            T::SIZE,
            true,
            &f,
        )?))
    }

    /// Reduces with a closure `f(a, b) = a ∘ b`; when `commutative` is false the
    /// result is `x0 ∘ x1 ∘ … ∘ x(P−1)`, always in rank order.
    pub fn reduce_with<T: Number>(
        &self,
        root: u32,
        data: &[T],
        commutative: bool,
        f: impl Fn(T, T) -> T,
    ) -> Result<Option<Vec<T>>> {
        let g = |a: &mut [u8], b: &[u8]| f(T::read(a), T::read(b)).write(a);
        Ok(self
            .reduce_bytes(root, &to_bytes(data), T::SIZE, commutative, &g)?
            .map(|b| from_bytes(&b)))
    }

    /// Gathers every rank's block (all of the same length) at `root`, in rank order.
    pub fn gather(&self, root: u32, data: &[u8]) -> Result<Option<Vec<u8>>> {
        self.check_root(root)?;
        let out = self.collective(
            Collective::new(Op::Gather, root as usize, data.len()),
            data,
            None,
        )?;
        Ok((self.rank() == root).then_some(out))
    }

    /// Scatters `data` (at `root`: `size() * block` bytes, block r for rank r; ignored
    /// elsewhere) so that every rank gets its `block` bytes.
    pub fn scatter(&self, root: u32, data: &[u8], block: usize) -> Result<Vec<u8>> {
        self.check_root(root)?;
        let input: &[u8] = if self.rank() == root {
            if data.len() != block * self.size() as usize {
                return Err(self.abort(Error::InvalidArgument(format!(
                    "scatter: the root passed {} bytes, not {} blocks of {block}",
                    data.len(),
                    self.size()
                ))));
            }
            data
        } else {
            &[]
        };
        self.collective(
            Collective::new(Op::Scatter, root as usize, block),
            input,
            None,
        )
    }

    /// Every rank's block (same length everywhere) to every rank, in rank order.
    pub fn allgather(&self, data: &[u8]) -> Result<Vec<u8>> {
        self.collective(Collective::new(Op::Allgather, 0, data.len()), data, None)
    }

    /// Block j of `data` (`size()` blocks of equal length) goes to rank j; the result
    /// holds block i from rank i.
    pub fn alltoall(&self, data: &[u8]) -> Result<Vec<u8>> {
        let p = self.size() as usize;
        if data.len() % p != 0 {
            return Err(self.abort(Error::InvalidArgument(format!(
                "alltoall: {} bytes are not {p} equal blocks",
                data.len()
            ))));
        }
        self.collective(Collective::new(Op::Alltoall, 0, data.len() / p), data, None)
    }

    /// Returns once every rank has entered.
    pub fn barrier(&self) -> Result<()> {
        self.collective(Collective::new(Op::Barrier, 0, 0), &[], None)
            .map(|_| ())
    }

    /// Splits the communicator: ranks passing the same `color` form a new
    /// communicator, ranked by (`key`, old rank). Ranks passing `None` get `None`.
    /// Collective: every rank must call it.
    pub fn split(&self, color: Option<u32>, key: u32) -> Result<Option<Comm>> {
        let c = color.unwrap_or(u32::MAX);
        if color == Some(u32::MAX) {
            return Err(Error::InvalidArgument(
                "split: color u32::MAX is reserved".into(),
            ));
        }
        let mut mine = c.to_le_bytes().to_vec();
        mine.extend_from_slice(&key.to_le_bytes());
        let all = self.allgather(&mine)?;
        let seq = self
            .view()
            .splits
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let Some(color) = color else { return Ok(None) };
        let mut members: Vec<(u32, u32)> = all
            .chunks_exact(8)
            .enumerate()
            .filter_map(|(r, b)| {
                let c = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                let k = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
                (c == color).then_some((k, r as u32))
            })
            .collect();
        members.sort();
        let locals: Vec<usize> = members.iter().map(|&(_, r)| r as usize).collect();
        let view = self.view();
        let ranks: Vec<u32> = locals.iter().map(|&r| view.global(r as u32)).collect();
        let rank = locals
            .iter()
            .position(|&r| r as u32 == self.rank())
            .unwrap_or(0) as u32;
        let topology = self
            .topology()
            .subset(&locals)
            .map_err(|e| Error::Collective {
                op: "split",
                message: e.to_string(),
            })?;
        Ok(Some(self.with_view(View {
            context: child_context(view.context, seq, color),
            ranks,
            rank,
            topology,
            calls: Default::default(),
            coll_failed: Default::default(),
            recent: Default::default(),
            splits: Default::default(),
            options: std::sync::Mutex::new(self.coll_options()),
            schedules: Default::default(),
        })))
    }
}

impl Comm {
    /// A communicator over `members` (ranks of this one, in the new one's order)
    /// that only the members build, without a message: ranks outside `members` do
    /// not call it (MPI's `MPI_Comm_create_group`). `None` if this rank is not a
    /// member.
    ///
    /// The new context is derived from this one's, the members and `key`, so every
    /// member must pass the same `members` and `key`, and two communicators made
    /// over the same members of this one need different keys (the caller counts
    /// its calls per member list). This communicator's own sequence of splits is
    /// untouched, so ranks that did not take part still agree on later splits.
    pub fn subset(&self, members: &[u32], key: u64) -> Result<Option<Comm>> {
        let bad = |message: String| Error::Collective {
            op: "subset",
            message,
        };
        let mut seen = vec![false; self.size() as usize];
        for &m in members {
            match seen.get_mut(m as usize) {
                Some(s) if !*s => *s = true,
                Some(_) => return Err(bad(format!("rank {m} is listed twice"))),
                None => {
                    return Err(bad(format!(
                        "rank {m} is not in the communicator (size {})",
                        self.size()
                    )))
                }
            }
        }
        let Some(rank) = members.iter().position(|&m| m == self.rank()) else {
            return Ok(None);
        };
        let view = self.view();
        let locals: Vec<usize> = members.iter().map(|&m| m as usize).collect();
        let topology = self
            .topology()
            .subset(&locals)
            .map_err(|e| bad(e.to_string()))?;
        Ok(Some(self.with_view(View {
            context: subset_context(view.context, members, key),
            ranks: members.iter().map(|&m| view.global(m)).collect(),
            rank: rank as u32,
            topology,
            calls: Default::default(),
            coll_failed: Default::default(),
            recent: Default::default(),
            splits: Default::default(),
            options: std::sync::Mutex::new(self.coll_options()),
            schedules: Default::default(),
        })))
    }
}

impl Comm {
    /// The far side of an intercommunicator (MPI 3.1 §6.6): a communicator whose
    /// ranks are `peers` (ranks of this one, which need not include this process),
    /// in the context [`Comm::subset`] gives `members` with `key`. Both sides of an
    /// intercommunicator pass the same `members` (the union of their groups) and
    /// `key`, each its remote group as `peers`: a message sent to rank `r` here goes
    /// to the `r`-th peer, and a received message's source is the sender's place
    /// among the peers. Point-to-point only: this process is not one of its ranks
    /// (its `rank()` is 0 and means nothing), so its collectives must not be called.
    pub fn peers(&self, members: &[u32], key: u64, peers: &[u32]) -> Result<Comm> {
        let bad = |message: String| Error::Collective {
            op: "peers",
            message,
        };
        for &m in members.iter().chain(peers) {
            if m >= self.size() {
                return Err(bad(format!(
                    "rank {m} is not in the communicator (size {})",
                    self.size()
                )));
            }
        }
        let view = self.view();
        let locals: Vec<usize> = peers.iter().map(|&m| m as usize).collect();
        let topology = self
            .topology()
            .subset(&locals)
            .map_err(|e| bad(e.to_string()))?;
        Ok(self.with_view(View {
            context: subset_context(view.context, members, key),
            ranks: peers.iter().map(|&m| view.global(m)).collect(),
            rank: 0,
            topology,
            calls: Default::default(),
            coll_failed: Default::default(),
            recent: Default::default(),
            splits: Default::default(),
            options: std::sync::Mutex::new(self.coll_options()),
            schedules: Default::default(),
        }))
    }
}

/// The context of [`Comm::subset`] over `members` with `key`, under `parent`.
fn subset_context(parent: u32, members: &[u32], key: u64) -> u32 {
    // A marker no split's (parent, seq, color) hashes the same way as often.
    let mut words = vec![parent, 0x5b5e_7000, members.len() as u32];
    words.extend_from_slice(members);
    words.extend_from_slice(&[key as u32, (key >> 32) as u32]);
    fnv_context(&words)
}

/// A context every member of a split derives alike (FNV-1a of parent, call, color),
/// below the collective bit and never 0 (the job's own context).
fn child_context(parent: u32, seq: u32, color: u32) -> u32 {
    fnv_context(&[parent, seq, color])
}

/// FNV-1a of `words` (little-endian bytes) as a context: below the collective bit,
/// never 0.
fn fnv_context(words: &[u32]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in words.iter().flat_map(|w| w.to_le_bytes()) {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    (h & !COLL_CONTEXT).max(1)
}

/// A receive of a schedule in flight: where its bytes go once they are here.
struct PendingRecv {
    id: usize,
    from: usize,
    buf: Buf,
    range: std::ops::Range<usize>,
}

/// Runs a schedule's steps on the engine in rounds, as libNBC does: every receive is
/// posted before the first step runs (a schedule's (source, tag) pairs are unique),
/// sends go out without waiting (several peers at once), and a step waits only for
/// the receives whose bytes it needs, which land in the schedule's buffers in step
/// order. No step relies on a send being buffered, so a bounded unexpected buffer on
/// the peer cannot deadlock a schedule; and since every receive is posted early, a
/// flit above the eager limit is cleared to send at once instead of a round trip
/// after the flit before it (across a WAN, that round trip was paid per flit).
struct Rounds<'a> {
    comm: &'a Comm,
    ctx: u32,
    timeout: Duration,
    name: &'static str,
    sends: Vec<(usize, usize)>,
    recvs: std::collections::VecDeque<PendingRecv>,
    /// Receives posted ahead, in step order, whose steps are not reached yet.
    early: std::collections::VecDeque<usize>,
    /// This call's sequence number (in the tags' top bits).
    seq: u32,
    /// What this rank called, as its messages carry it at their head.
    sig: CallSig,
    header: [u8; HEADER],
    /// The last message copied for a send.
    copies: SentCopy,
    /// Whether a message of a recent earlier call still unreceived is an error
    /// (not after a call failed here, which leaves its messages behind).
    check_stale: bool,
}

/// The message last copied out of a schedule's buffer for a send, which the sends
/// of the same bytes that follow it share (a flit going to each child of a tree, a
/// block handed to every other rank): one copy instead of one per destination. Any
/// step other than a send may change the bytes, and forgets it.
#[derive(Default)]
pub(crate) struct SentCopy(Option<(Buf, std::ops::Range<usize>, Arc<Vec<u8>>)>);

impl SentCopy {
    /// The message of `header` then `body` (`buf[range]`): the last one if it was
    /// of the same bytes, else a new copy.
    pub(crate) fn message(
        &mut self,
        header: &[u8],
        buf: Buf,
        range: &std::ops::Range<usize>,
        body: &[u8],
    ) -> Arc<Vec<u8>> {
        if let Some((b, r, data)) = &self.0 {
            if *b == buf && r == range {
                return data.clone();
            }
        }
        let mut data = Vec::with_capacity(header.len() + body.len());
        data.extend_from_slice(header);
        data.extend_from_slice(body);
        let data = Arc::new(data);
        self.0 = Some((buf, range.clone(), data.clone()));
        data
    }

    /// Forgets the last copy (its bytes may change).
    pub(crate) fn forget(&mut self) {
        self.0 = None;
    }
}

impl Drop for Rounds<'_> {
    /// Detaches what is still pending: an unmatched receive is cancelled, a matched
    /// one stops writing into the buffers it was lent, a send finishes on its own.
    fn drop(&mut self) {
        let mut core = self.comm.inner.engine.core();
        core.detach_each(self.sends.drain(..).map(|s| s.0));
        core.detach_each(self.recvs.drain(..).map(|p| p.id));
        core.detach_each(self.early.drain(..));
    }
}

/// How many calls back a message still unreceived is taken for one of an earlier
/// call (the tags' sequence numbers wrap; one that far ahead is of a later call).
pub(crate) const STALE_WINDOW: u32 = 64;

/// Whether a message of call `theirs` is of a call before `current`, and recent.
fn stale(current: u32, theirs: u32) -> bool {
    let back = current.wrapping_sub(theirs) & SEQ_MASK;
    (1..=STALE_WINDOW).contains(&back)
}

fn overlaps(a: &std::ops::Range<usize>, b: &std::ops::Range<usize>) -> bool {
    a.start < b.end && b.start < a.end
}

impl Rounds<'_> {
    fn err(&self, message: String) -> Error {
        Error::Collective {
            op: self.name,
            message,
        }
    }

    fn execute(
        &mut self,
        steps: &[Step],
        (direct, lendable): (&[bool], &[bool]),
        b: &mut Buffers<'_>,
        seq: u32,
        combine: Option<Combine>,
    ) -> Result<()> {
        let view = self.comm.view();
        // Not this call's messages: they may come before their receives are posted.
        self.leftovers(false)?;
        {
            let mut core = self.comm.inner.engine.core();
            for (i, step) in steps.iter().enumerate() {
                if let Step::Recv {
                    from,
                    tag,
                    buf,
                    range,
                } = step
                {
                    let pattern = Pattern {
                        context: self.ctx,
                        source: Some(view.global(*from as u32)),
                        tag: Some((seq << SEQ_SHIFT) | tag),
                    };
                    let into = match b.get_mut(*buf).and_then(|d| d.get_mut(range.clone())) {
                        Some(dst) if direct.get(i) == Some(&true) => {
                            // SAFETY: nothing touches these bytes until this receive
                            // completes (`direct_receives`: no earlier step and no
                            // other receive does; later steps settle it first), and
                            // the buffers outlive it: a failed call detaches its
                            // receives first, and a detached one no longer writes
                            // into what it was lent (`Core::detach`).
                            #[allow(unsafe_code)]
                            let body = unsafe { RawBuf::from_mut(dst) };
                            RecvBuf::Split(Split::new(HEADER, body))
                        }
                        _ => RecvBuf::Alloc(Vec::new()),
                    };
                    let id = core.post_recv(pattern, into);
                    self.early.push_back(id);
                }
            }
        }
        for (i, step) in steps.iter().enumerate() {
            match step {
                Step::Send {
                    to,
                    tag,
                    buf,
                    range,
                } => {
                    self.settle_order(b)?;
                    self.settle(b, *buf, range)?;
                    let g = view.global(*to as u32);
                    self.comm
                        .ensure_link(g)
                        .map_err(|e| self.err(format!("sending to rank {to}: {e}")))?;
                    let body = b
                        .get(*buf)
                        .and_then(|d| d.get(range.clone()))
                        .ok_or_else(|| self.err("a send outside its buffer".into()))?;
                    let tag = (seq << SEQ_SHIFT) | tag;
                    // Written from the schedule's buffer into a link that has
                    // nothing queued (shared memory's ring, or the socket); else
                    // copied behind the signature and posted.
                    // Asked under the same lock: whether it went now, else whether
                    // it would be lent.
                    let (now, lend) = {
                        let mut core = self.comm.inner.engine.core();
                        let now = core.send_now_parts(g, tag, self.ctx, &self.header, body, HEADER);
                        let lend = now.is_none()
                            && lendable.get(i) == Some(&true)
                            && core.would_lend(g, HEADER + body.len(), HEADER);
                        (now, lend)
                    };
                    self.comm.count_sent(g, HEADER + body.len());
                    if now.is_some() {
                        continue;
                    }
                    let data = if lend {
                        // SAFETY: no later step writes these bytes
                        // (`lendable_sends`), and the buffers outlive the send or
                        // its lend: a call waits for its sends, and a failed one
                        // detaches them first, which takes the lend back
                        // (`Core::detach`): the receiver's copy is then thrown away.
                        #[allow(unsafe_code)]
                        let body = unsafe { RawBuf::from_ref(body) };
                        SendBuf::Lent {
                            head: self.header.to_vec(),
                            body,
                            lend: None,
                        }
                    } else {
                        SendBuf::Shared(self.copies.message(&self.header, *buf, range, body))
                    };
                    let id = self
                        .comm
                        .inner
                        .engine
                        .core()
                        .post_send_allowing(g, tag, self.ctx, data, HEADER);
                    self.sends.push((id, *to));
                }
                Step::Recv {
                    from, buf, range, ..
                } => {
                    self.copies.forget();
                    // Two receives into the same bytes land in step order.
                    self.settle(b, *buf, range)?;
                    let Some(id) = self.early.pop_front() else {
                        return Err(self.err("a receive was not posted ahead".into()));
                    };
                    self.recvs.push_back(PendingRecv {
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
                    self.settle_order(b)?;
                    self.settle(b, *dst, dst_range)?;
                    self.settle(b, *src, src_range)?;
                    qcg_coll::exec::local(b, step, combine)
                        .map_err(|e| self.err(format!("a local step of the schedule: {e}")))?;
                }
            }
        }
        // The last round: every receive in, every send out.
        if !self.recvs.is_empty() {
            self.complete_recvs(b, self.recvs.len())?;
        }
        let sends = std::mem::take(&mut self.sends);
        for (i, &(id, to)) in sends.iter().enumerate() {
            if let Err(e) = self.await_request(id, to) {
                self.sends = sends[i + 1..].to_vec();
                return Err(match e {
                    Error::Collective { .. } | Error::Disagreement { .. } => e,
                    other => self.err(format!("sending to rank {to}: {other}")),
                });
            }
        }
        // Messages on a link arrive in the order sent: an earlier call's message from a
        // rank this call heard from is here by now, as is any of this call that no
        // receive took.
        self.leftovers(true)
    }

    /// Fails if the oldest message in the collective context that no receive took
    /// is of a recent earlier call (or, with `this_call`, of this one).
    fn leftovers(&self, this_call: bool) -> Result<()> {
        let first = self.comm.inner.engine.core().iprobe(&Pattern {
            context: self.ctx,
            source: None,
            tag: None,
        });
        match first {
            Ok(Some(st)) if this_call || st.tag >> SEQ_SHIFT != self.seq => {
                self.unexpected(st.source, st.tag).map_or(Ok(()), Err)
            }
            _ => Ok(()),
        }
    }

    /// Completes, in posting order, the pending receives into bytes that overlap
    /// `buf[range]`.
    fn settle(
        &mut self,
        b: &mut Buffers<'_>,
        buf: Buf,
        range: &std::ops::Range<usize>,
    ) -> Result<()> {
        let Some(last) = self
            .recvs
            .iter()
            .rposition(|p| p.buf == buf && overlaps(&p.range, range))
        else {
            return Ok(());
        };
        self.complete_recvs(b, last + 1)
    }

    /// Completes the pending zero-byte receives (and those before them): they carry
    /// no data, only an order (a barrier's arrivals), which every later step keeps.
    fn settle_order(&mut self, b: &mut Buffers<'_>) -> Result<()> {
        match self.recvs.iter().rposition(|p| p.range.is_empty()) {
            Some(last) => self.complete_recvs(b, last + 1),
            None => Ok(()),
        }
    }

    /// Checks that the message `data` from rank `from` (of the communicator) belongs
    /// to the call this rank makes.
    fn check_header(&self, from: u32, data: &[u8]) -> Result<()> {
        let Some(theirs) = CallSig::decode(data) else {
            return Err(self.err(format!(
                "rank {from} sent a message of {} bytes without a collective header: it is not running this library's collectives",
                data.len()
            )));
        };
        match theirs.disagreement(&self.sig) {
            None => Ok(()),
            Some(on) => Err(Error::Disagreement {
                op: self.name,
                on,
                message: crate::callsig::mismatch_text(from, &theirs, self.comm.rank(), &self.sig),
            }),
        }
    }

    /// The error for a message (global source, tag) in the collective context that
    /// none of this call's receives takes, if it is one: of this call, or left
    /// unreceived by a recent earlier one. The message is received to read what its
    /// sender called.
    fn unexpected(&self, source: u32, tag: u32) -> Option<Error> {
        let of = tag >> SEQ_SHIFT;
        let earlier = stale(self.seq, of);
        if tag == ABORT_TAG || !(of == self.seq || self.check_stale && earlier) {
            return None;
        }
        let who = self.comm.view().local(source).unwrap_or(source);
        let m = match self.comm.recv_in(self.ctx, Some(source), Some(tag), None) {
            Ok(m) => m,
            Err(e) => return Some(e),
        };
        let theirs = CallSig::decode(&m.data);
        let mine = if earlier {
            let recent = self
                .comm
                .view()
                .recent
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            recent.iter().find(|(s, _)| *s == of).map(|&(_, sig)| sig)
        } else {
            Some(self.sig)
        };
        if let (Some(t), Some(mine)) = (theirs, mine) {
            if let Some(on) = t.disagreement(&mine) {
                let back = if earlier {
                    format!(
                        " ({} calls back, found by this rank's {} call)",
                        self.seq.wrapping_sub(of) & SEQ_MASK,
                        self.name
                    )
                } else {
                    String::new()
                };
                return Some(Error::Disagreement {
                    op: if earlier { op_name(mine.op) } else { self.name },
                    on,
                    message: format!(
                        "{}{back}",
                        crate::callsig::mismatch_text(who, &t, self.comm.rank(), &mine)
                    ),
                });
            }
        }
        let when = if earlier {
            format!(
                "a message of a collective {} calls back that this rank never received",
                self.seq.wrapping_sub(of) & SEQ_MASK
            )
        } else {
            "a message of this call that its schedule does not expect".to_string()
        };
        Some(match theirs {
            Some(t) => self.err(format!(
                "rank {who} sent {when} ({}): the ranks disagreed on a call, rank {who} or this rank (rank {}) is at fault",
                t.describe_against(&t),
                self.comm.rank()
            )),
            None => self.err(format!(
                "rank {who} sent {when}, without a collective header: the ranks disagree on the call"
            )),
        })
    }

    /// Completes the first `n` pending receives, in posting order.
    fn complete_recvs(&mut self, b: &mut Buffers<'_>, n: usize) -> Result<()> {
        for _ in 0..n {
            // One at a time: on a failure the rest stay pending, to be detached.
            let Some(p) = self.recvs.pop_front() else {
                return Ok(());
            };
            let (len, data) = match self.await_request(p.id, p.from) {
                Ok(Some(d)) => d,
                Ok(None) => {
                    return Err(self.err(format!("receiving from rank {}: cancelled", p.from)))
                }
                Err(e) => {
                    return Err(match e {
                        Error::Collective { .. } | Error::Disagreement { .. } => e,
                        Error::PeerLost { reason, .. } => {
                            self.err(format!("rank {} is gone: {reason}", p.from))
                        }
                        other => self.err(format!("receiving from rank {}: {other}", p.from)),
                    })
                }
            };
            self.check_header(p.from as u32, &data)?;
            if data.len() == HEADER && len == HEADER + p.range.len() {
                // Landed in place (a split receive's body).
                continue;
            }
            let body = &data[HEADER..];
            if body.len() != p.range.len() {
                return Err(self.err(format!(
                    "rank {} sent {} bytes where {} were expected: the ranks disagree on sizes or roots",
                    p.from,
                    body.len(),
                    p.range.len()
                )));
            }
            b.store(p.buf, &p.range, body)
                .map_err(|e| self.err(format!("a receive of the schedule: {e}")))?;
        }
        Ok(())
    }

    /// Waits for request `id` (with rank `peer` of the communicator), giving up when
    /// a rank's abort message arrives or nothing happens for the collective timeout.
    /// A received message comes with its length (all of it may not be in the
    /// bytes: see [`RecvBuf::Split`]).
    fn await_request(&mut self, id: usize, peer: usize) -> Result<Option<(usize, Vec<u8>)>> {
        enum Woke {
            Done(Result<Outcome>),
            Abort,
            Stray(u32, u32),
        }
        let abort = Pattern {
            context: self.ctx,
            source: None,
            tag: Some(ABORT_TAG),
        };
        let anything = Pattern {
            context: self.ctx,
            source: None,
            tag: None,
        };
        let seq = self.seq;
        let check_stale = self.check_stale;
        let engine = &self.comm.inner.engine;
        let deadline = std::time::Instant::now() + self.timeout;
        let woke = engine.wait(
            |core| {
                if let Some(r) = core.take(id) {
                    return Some(Woke::Done(r));
                }
                if matches!(core.iprobe(&abort), Ok(Some(_))) {
                    return Some(Woke::Abort);
                }
                // Every receive of this call was posted first: a message of this call
                // that none of them took is one this rank's schedule does not expect.
                match core.iprobe(&anything) {
                    Ok(Some(st))
                        if st.tag != ABORT_TAG
                            && (st.tag >> SEQ_SHIFT == seq
                                || (check_stale && stale(seq, st.tag >> SEQ_SHIFT))) =>
                    {
                        Some(Woke::Stray(st.source, st.tag))
                    }
                    _ => None,
                }
            },
            Some(deadline),
        );
        match woke {
            Some(Woke::Done(r)) => match r? {
                Outcome::Received(st, data) => Ok(data.map(|d| (st.len, d))),
                _ => Ok(None),
            },
            Some(Woke::Stray(from, tag)) => {
                engine.core().detach(id);
                Err(self
                    .unexpected(from, tag)
                    .unwrap_or_else(|| self.err("a stray message went away".into())))
            }
            Some(Woke::Abort) => {
                engine.core().detach(id);
                let m = self.comm.recv_in(self.ctx, None, Some(ABORT_TAG), None)?;
                let who = self.comm.view().local(m.source).unwrap_or(m.source);
                let (code, text) = m.data.split_first().unwrap_or((&0, &[]));
                let message = format!("rank {who} failed: {}", String::from_utf8_lossy(text));
                Err(match crate::callsig::Disagree::from_code(*code) {
                    Some(on) => Error::Disagreement {
                        op: self.name,
                        on,
                        message,
                    },
                    None => self.err(message),
                })
            }
            None => {
                engine.core().detach(id);
                Err(self.err(format!(
                    "rank {peer} sent nothing for {:.0} s: it died, or the ranks disagree on the call (operation, root or size)",
                    self.timeout.as_secs_f64()
                )))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(vars: &[(&str, &str)]) -> Result<CollOptions> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let get = |name: &str| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
        CollOptions::from_vars(&get)
    }

    #[test]
    fn collective_settings_parse_and_a_wrong_one_names_its_variable() {
        assert_eq!(options(&[]).unwrap(), CollOptions::default());
        let o = options(&[
            ("QCG_COLL_ALGO", "chain"),
            ("QCG_COLL_FLITS", " 8 "),
            ("QCG_COLL_TIMEOUT", "2.5"),
        ])
        .unwrap();
        assert_eq!(o.algo, Algo::Chain);
        assert_eq!(o.flits, Some(8));
        assert_eq!(o.timeout, Duration::from_millis(2500));
        assert_eq!(options(&[("QCG_COLL_ALGO", "")]).unwrap().algo, Algo::Auto);
        // The names the signatures' disagreements print are taken too.
        assert_eq!(
            options(&[("QCG_COLL_ALGO", "flat-binomial")]).unwrap().algo,
            Algo::FlatBinomial
        );
        assert_eq!(
            options(&[("QCG_COLL_ALGO", "flat-linear")]).unwrap().algo,
            Algo::FlatLinear
        );
        for (var, value, says) in [
            (
                "QCG_COLL_ALGO",
                "fastest",
                "expected auto, hier, flat, linear or chain",
            ),
            ("QCG_COLL_FLITS", "0", "not a flit count"),
            ("QCG_COLL_FLITS", "many", "not a flit count"),
            ("QCG_COLL_TIMEOUT", "-1", "not a number of seconds"),
            ("QCG_COLL_TIMEOUT", "inf", "not a number of seconds"),
        ] {
            let e = options(&[(var, value)]).unwrap_err().to_string();
            assert!(
                e.contains(var) && e.contains(value) && e.contains(says),
                "{e}"
            );
        }
    }
}
