//! Runs every rank's schedule together in memory.
//!
//! [`run`] moves real bytes (one FIFO queue per (source, destination, tag)), checks every
//! step (bounds, sizes, read-only input, overlapping local operands), detects deadlock
//! and unconsumed messages, and counts messages and bytes per level crossed.
//! [`estimate`] runs the same engine without data, for the time estimate only.
//!
//! # Time model
//! Each rank has a clock, and per level an outgoing and an incoming port. A `Send` of `b`
//! bytes crossing level `l` starts at `s = max(clock, out_free[l])` and reaches the
//! receiver at `s + α_l + β_l·b`; the sender's port is busy for `o_l + β_l·b` where
//! `o_l = min(α_l, SEND_OVERHEAD)` (LogP's overhead: the rest of a long latency is
//! propagation, and the port sends its next message meanwhile). k flits through a
//! chain of stages cost about `Σ c_i + (k − 1)·max busy_i`. The sender's clock
//! does not move (sends are eager), so a rank talks on several levels at once. Incoming
//! transfers serialize per port, in the order the receiver posts its receives: the
//! matching `Recv` has the message in at `port = max(arrival, in_free[l] + β_l·b)`, sets
//! `in_free[l] = port` and completes at `max(clock, port)`, the new clock. `Copy` and
//! `Reduce` take no time. The estimate is the largest final clock. On a mesh level (see
//! [`crate::LinkCost`]) a rank has one port per peer group instead of one per level
//! (for sending, only messages up to `SEND_WINDOW` bytes: see [`Topology::out_port`]).

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::ops::Range;

use crate::exec::{self, Buffers};
use crate::step::{Buf, Order, RankSchedule, Step};
use crate::topology::Topology;
use std::borrow::Cow;

/// Messages and bytes that crossed one level.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LevelCount {
    /// Number of messages.
    pub messages: usize,
    /// Total payload bytes.
    pub bytes: usize,
}

/// One message, as sent.
#[derive(Clone, Debug, PartialEq)]
pub struct Message {
    /// Sender.
    pub from: usize,
    /// Receiver.
    pub to: usize,
    /// Tag.
    pub tag: u32,
    /// Payload bytes.
    pub bytes: usize,
    /// Level crossed (see [`Topology::level`]).
    pub level: usize,
}

/// What a simulation produced.
#[derive(Clone, Debug, PartialEq)]
pub struct SimReport {
    /// Each rank's `Output` buffer at the end (empty in [`estimate`]).
    pub outputs: Vec<Vec<u8>>,
    /// Counts per level, `depth + 1` entries.
    pub levels: Vec<LevelCount>,
    /// Every message in the order the simulator sent them (empty in [`estimate`]).
    pub messages: Vec<Message>,
    /// Each rank's final clock in seconds.
    pub finish: Vec<f64>,
    /// The largest final clock: the estimated time of the collective.
    pub time: f64,
}

/// Why a set of schedules is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SimError {
    /// Not one schedule per rank, or schedule `i` is not for rank `i`.
    Ranks,
    /// The input of `rank` does not have the length its schedule declares.
    InputLength {
        /// The rank.
        rank: usize,
    },
    /// Step `step` of `rank` is malformed (bad peer, range out of bounds, write to the
    /// input, operands of different lengths or overlapping, partial elements).
    BadStep {
        /// The rank.
        rank: usize,
        /// Index of the step.
        step: usize,
        /// What is wrong.
        why: &'static str,
    },
    /// A message of `sent` bytes met a receive of `expected` bytes.
    SizeMismatch {
        /// The receiving rank.
        rank: usize,
        /// Index of the receive step.
        step: usize,
        /// Bytes in the message.
        sent: usize,
        /// Bytes the receive asked for.
        expected: usize,
    },
    /// No rank can progress; each blocked rank with its step index and awaited (source, tag).
    Deadlock(Vec<(usize, usize, usize, u32)>),
    /// Messages left unreceived at the end: (from, to, tag, count).
    Unconsumed(Vec<(usize, usize, u32, usize)>),
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SimError::Ranks => write!(f, "schedules do not match ranks 0..P"),
            SimError::InputLength { rank } => write!(f, "input of rank {rank} has a wrong length"),
            SimError::BadStep { rank, step, why } => {
                write!(f, "rank {rank} step {step}: {why}")
            }
            SimError::SizeMismatch {
                rank,
                step,
                sent,
                expected,
            } => write!(
                f,
                "rank {rank} step {step}: received {sent} bytes, expected {expected}"
            ),
            SimError::Deadlock(b) => write!(f, "deadlock: blocked (rank, step, from, tag) {b:?}"),
            SimError::Unconsumed(m) => write!(f, "unreceived messages {m:?}"),
        }
    }
}

impl std::error::Error for SimError {}

/// Elementwise combination: `out = left ∘ right` over whole slices of equal length (a
/// multiple of the element size).
pub type Combine<'a> = &'a dyn Fn(&[u8], &[u8], &mut [u8]);

/// Runs the schedules with real data; `inputs[r]` is rank r's `Input`.
pub fn run(
    schedules: &[RankSchedule],
    topo: &Topology,
    inputs: &[Vec<u8>],
    elem_size: usize,
    combine: Combine<'_>,
) -> Result<SimReport, SimError> {
    if inputs.len() != schedules.len() {
        return Err(SimError::Ranks);
    }
    for (rank, (s, i)) in schedules.iter().zip(inputs).enumerate() {
        if s.input_len != i.len() {
            return Err(SimError::InputLength { rank });
        }
    }
    let report = Engine::new(schedules, topo, Some((inputs, elem_size.max(1), combine)))?.run()?;
    check_rounds(schedules)?;
    Ok(report)
}

/// Checks the rounds rule (see the crate documentation): the schedules complete when
/// every rank runs its [`exec::rounds`] one after the other, posting each round's
/// receives, then its sends, and moving to the next round once every receive of the
/// round has met its send. A send is a rendezvous: it meets its receive only once the
/// receiver has reached the round that posts it, and it is waited for only at the
/// end of the schedule, so nothing relies on a message being buffered before its
/// receive is posted, and no round waits on a peer's later round. On failure, the
/// blocked operations: (rank, first step of its round, peer, tag), the peer being
/// the source of a receive or the destination of a send.
pub fn check_rounds(schedules: &[RankSchedule]) -> Result<(), SimError> {
    use std::collections::HashSet;
    if schedules.iter().enumerate().any(|(i, s)| s.rank != i) {
        return Err(SimError::Ranks);
    }
    let rounds: Vec<Vec<Range<usize>>> = schedules.iter().map(exec::rounds).collect();
    // (from, to, tag) of the sends and receives posted so far.
    let mut sends: HashSet<(usize, usize, u32)> = HashSet::new();
    let mut recvs: HashSet<(usize, usize, u32)> = HashSet::new();
    let key = |r: usize, s: &Step| match s {
        Step::Send { to, tag, .. } => Some((true, (r, *to, *tag))),
        Step::Recv { from, tag, .. } => Some((false, (*from, r, *tag))),
        _ => None,
    };
    let post = |r: usize, k: usize, sends: &mut HashSet<_>, recvs: &mut HashSet<_>| {
        let Some(range) = rounds[r].get(k) else {
            return;
        };
        for s in &schedules[r].steps[range.clone()] {
            match key(r, s) {
                Some((true, k)) => sends.insert(k),
                Some((false, k)) => recvs.insert(k),
                None => false,
            };
        }
    };
    let mut at = vec![0usize; schedules.len()];
    for r in 0..schedules.len() {
        post(r, 0, &mut sends, &mut recvs);
    }
    loop {
        let mut moved = false;
        for r in 0..schedules.len() {
            while let Some(range) = rounds[r].get(at[r]) {
                let done = schedules[r].steps[range.clone()]
                    .iter()
                    .filter_map(|s| key(r, s))
                    .all(|(send, k)| send || sends.contains(&k));
                if !done {
                    break;
                }
                at[r] += 1;
                moved = true;
                post(r, at[r], &mut sends, &mut recvs);
            }
        }
        if !moved {
            break;
        }
    }
    let mut blocked = Vec::new();
    for (r, s) in schedules.iter().enumerate() {
        // A rank that is through its rounds still waits for its sends.
        let range = rounds[r].get(at[r]).cloned().unwrap_or(0..s.steps.len());
        for step in &s.steps[range.clone()] {
            match key(r, step) {
                Some((true, k)) if !recvs.contains(&k) => blocked.push((r, range.start, k.1, k.2)),
                Some((false, k)) if !sends.contains(&k) => blocked.push((r, range.start, k.0, k.2)),
                _ => {}
            }
        }
    }
    if blocked.is_empty() {
        Ok(())
    } else {
        Err(SimError::Deadlock(blocked))
    }
}

/// Runs the schedules without data: counts and time only.
pub fn estimate(schedules: &[RankSchedule], topo: &Topology) -> Result<SimReport, SimError> {
    Engine::new(schedules, topo, None)?.run()
}

struct Msg {
    data: Vec<u8>,
    len: usize,
    arrival: f64,
    level: usize,
    /// The receiver's port it comes in on ([`Topology::port`]).
    port: usize,
}

struct RankState<'a> {
    pc: usize,
    clock: f64,
    /// When each port (see [`Topology::port`]) is free again.
    out_free: HashMap<usize, f64>,
    in_free: HashMap<usize, f64>,
    /// The buffers (`None` when running without data).
    bufs: Option<Buffers<'a>>,
    lens: Vec<usize>,
}

struct Engine<'a> {
    schedules: &'a [RankSchedule],
    topo: &'a Topology,
    data: Option<(usize, Combine<'a>)>,
    ranks: Vec<RankState<'a>>,
    queues: HashMap<(usize, usize, u32), VecDeque<Msg>>,
    report: SimReport,
}

fn slot(b: Buf) -> usize {
    match b {
        Buf::Input => 0,
        Buf::Output => 1,
        Buf::Temp(i) => 2 + i as usize,
    }
}

impl<'a> Engine<'a> {
    fn new(
        schedules: &'a [RankSchedule],
        topo: &'a Topology,
        data: Option<(&[Vec<u8>], usize, Combine<'a>)>,
    ) -> Result<Self, SimError> {
        let p = topo.size();
        if schedules.len() != p || schedules.iter().enumerate().any(|(i, s)| s.rank != i) {
            return Err(SimError::Ranks);
        }
        let levels = topo.depth() + 1;
        let ranks = schedules
            .iter()
            .enumerate()
            .map(|(r, s)| {
                let mut lens = vec![s.input_len, s.output_len];
                lens.extend_from_slice(&s.temps);
                // Buffers that may start with any bytes start with garbage, as a
                // reused one would in libqcg: a schedule that read one before
                // writing it would give a wrong result here.
                let bufs = data.as_ref().and_then(|(inputs, _, _)| {
                    let mut spares: Vec<Vec<u8>> =
                        lens[1..].iter().map(|&n| vec![0xA5; n]).collect();
                    let input = Cow::Owned(inputs[r].clone());
                    Buffers::reusing(s, input, None, &crate::exec::reusable(s), &mut spares)
                });
                RankState {
                    pc: 0,
                    clock: 0.0,
                    out_free: HashMap::new(),
                    in_free: HashMap::new(),
                    bufs,
                    lens,
                }
            })
            .collect();
        Ok(Engine {
            schedules,
            topo,
            data: data.map(|(_, e, c)| (e, c)),
            ranks,
            queues: HashMap::new(),
            report: SimReport {
                outputs: Vec::new(),
                levels: vec![LevelCount::default(); levels],
                messages: Vec::new(),
                finish: Vec::new(),
                time: 0.0,
            },
        })
    }

    fn run(mut self) -> Result<SimReport, SimError> {
        let p = self.schedules.len();
        let mut waiting: Vec<Option<(usize, u32)>> = vec![None; p];
        let mut ready: VecDeque<usize> = (0..p).collect();
        while let Some(r) = ready.pop_front() {
            waiting[r] = None;
            while self.ranks[r].pc < self.schedules[r].steps.len() {
                match self.step(r)? {
                    Progress::Done => self.ranks[r].pc += 1,
                    Progress::Sent(to, tag) => {
                        self.ranks[r].pc += 1;
                        if waiting[to] == Some((r, tag)) {
                            waiting[to] = None;
                            ready.push_back(to);
                        }
                    }
                    Progress::Blocked(from, tag) => {
                        waiting[r] = Some((from, tag));
                        break;
                    }
                }
            }
        }
        let blocked: Vec<_> = (0..p)
            .filter_map(|r| waiting[r].map(|(f, t)| (r, self.ranks[r].pc, f, t)))
            .collect();
        if !blocked.is_empty() {
            return Err(SimError::Deadlock(blocked));
        }
        let mut left: Vec<_> = self
            .queues
            .iter()
            .filter(|(_, q)| !q.is_empty())
            .map(|(&(f, t, g), q)| (f, t, g, q.len()))
            .collect();
        if !left.is_empty() {
            left.sort_unstable();
            return Err(SimError::Unconsumed(left));
        }
        let mut report = self.report;
        report.finish = self.ranks.iter().map(|s| s.clock).collect();
        report.time = report.finish.iter().copied().fold(0.0, f64::max);
        report.outputs = self
            .ranks
            .iter_mut()
            .map(|s| s.bufs.take().map(Buffers::into_output).unwrap_or_default())
            .collect();
        Ok(report)
    }

    fn check(
        &self,
        r: usize,
        buf: Buf,
        range: &Range<usize>,
        write: bool,
    ) -> Result<(), &'static str> {
        let len = self.ranks[r]
            .lens
            .get(slot(buf))
            .ok_or("no such temp buffer")?;
        if range.start > range.end || range.end > *len {
            return Err("range out of bounds");
        }
        if write && buf == Buf::Input {
            return Err("writes to the input");
        }
        Ok(())
    }

    fn step(&mut self, r: usize) -> Result<Progress, SimError> {
        let pc = self.ranks[r].pc;
        let bad = |why| SimError::BadStep {
            rank: r,
            step: pc,
            why,
        };
        let p = self.schedules.len();
        match &self.schedules[r].steps[pc] {
            Step::Send {
                to,
                tag,
                buf,
                range,
            } => {
                let (to, tag) = (*to, *tag);
                if to >= p || to == r {
                    return Err(bad("bad destination"));
                }
                self.check(r, *buf, range, false).map_err(bad)?;
                let level = self.topo.level(r, to);
                let cost = self.topo.costs()[level];
                let len = range.len();
                let st = &mut self.ranks[r];
                let free = st
                    .out_free
                    .entry(self.topo.out_port(level, to, len))
                    .or_insert(0.0);
                let start = st.clock.max(*free);
                *free = start + cost.busy(len);
                let data = match st.bufs.as_ref().and_then(|b| b.get(*buf)) {
                    Some(b) => b[range.clone()].to_vec(),
                    None => Vec::new(),
                };
                let msg = Msg {
                    data,
                    len,
                    arrival: start + cost.time(len),
                    level,
                    port: self.topo.port(level, r),
                };
                self.queues.entry((r, to, tag)).or_default().push_back(msg);
                self.report.levels[level].messages += 1;
                self.report.levels[level].bytes += len;
                if self.data.is_some() {
                    self.report.messages.push(Message {
                        from: r,
                        to,
                        tag,
                        bytes: len,
                        level,
                    });
                }
                Ok(Progress::Sent(to, tag))
            }
            Step::Recv {
                from,
                tag,
                buf,
                range,
            } => {
                if *from >= p || *from == r {
                    return Err(bad("bad source"));
                }
                self.check(r, *buf, range, true).map_err(bad)?;
                let Some(msg) = self
                    .queues
                    .get_mut(&(*from, r, *tag))
                    .and_then(|q| q.pop_front())
                else {
                    return Ok(Progress::Blocked(*from, *tag));
                };
                if msg.len != range.len() {
                    return Err(SimError::SizeMismatch {
                        rank: r,
                        step: pc,
                        sent: msg.len,
                        expected: range.len(),
                    });
                }
                let beta = self.topo.costs()[msg.level].beta;
                let st = &mut self.ranks[r];
                let free = st.in_free.entry(msg.port).or_insert(0.0);
                let port = msg.arrival.max(*free + beta * msg.len as f64);
                *free = port;
                st.clock = st.clock.max(port);
                if let Some(b) = st.bufs.as_mut() {
                    b.store(*buf, range, &msg.data).map_err(bad)?;
                }
                Ok(Progress::Done)
            }
            Step::Copy {
                dst,
                dst_range,
                src,
                src_range,
            } => {
                self.local(r, pc, *dst, dst_range, *src, src_range, None)
                    .map_err(bad)?;
                Ok(Progress::Done)
            }
            Step::Reduce {
                dst,
                dst_range,
                src,
                src_range,
                order,
            } => {
                self.local(r, pc, *dst, dst_range, *src, src_range, Some(*order))
                    .map_err(bad)?;
                Ok(Progress::Done)
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn local(
        &mut self,
        r: usize,
        pc: usize,
        dst: Buf,
        dr: &Range<usize>,
        src: Buf,
        sr: &Range<usize>,
        reduce: Option<Order>,
    ) -> Result<(), &'static str> {
        self.check(r, dst, dr, true)?;
        self.check(r, src, sr, false)?;
        if dr.len() != sr.len() {
            return Err("operands of different lengths");
        }
        if dst == src && dr.start < sr.end && sr.start < dr.end {
            return Err("overlapping operands");
        }
        let Some((elem, combine)) = self.data else {
            return Ok(());
        };
        let step = &self.schedules[r].steps[pc];
        if reduce.is_some() && dr.len() % elem != 0 {
            return Err("partial elements");
        }
        let Some(bufs) = self.ranks[r].bufs.as_mut() else {
            return Ok(());
        };
        // The simulator's combine writes `left ∘ right` to a third slice; the
        // executor's combines in place.
        let inplace = |d: &mut [u8], s: &[u8], order: Order| {
            let old = d.to_vec();
            match order {
                Order::DstFirst => combine(&old, s, d),
                Order::SrcFirst => combine(s, &old, d),
            }
        };
        exec::local(bufs, step, Some(&inplace))?;
        Ok(())
    }
}

enum Progress {
    Done,
    Sent(usize, u32),
    Blocked(usize, u32),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rs(rank: usize, steps: Vec<Step>) -> RankSchedule {
        RankSchedule {
            rank,
            input_len: 1,
            output_len: 1,
            temps: vec![1],
            steps,
        }
    }

    fn send(to: usize, buf: Buf) -> Step {
        Step::Send {
            to,
            tag: 0,
            buf,
            range: 0..1,
        }
    }

    fn recv(from: usize) -> Step {
        Step::Recv {
            from,
            tag: 0,
            buf: Buf::Temp(0),
            range: 0..1,
        }
    }

    #[test]
    fn the_rounds_check_names_a_schedule_that_waits_before_it_sends() {
        // Each rank forwards what it received: neither sends before it received.
        let cyclic = vec![
            rs(0, vec![recv(1), send(1, Buf::Temp(0))]),
            rs(1, vec![recv(0), send(0, Buf::Temp(0))]),
        ];
        assert_eq!(
            check_rounds(&cyclic),
            Err(SimError::Deadlock(vec![(0, 0, 1, 0), (1, 0, 0, 0)]))
        );
        // Both receive first and send their input: one round each, no buffering
        // needed since every receive is posted before the round's send.
        let exchange = vec![
            rs(0, vec![recv(1), send(1, Buf::Input)]),
            rs(1, vec![recv(0), send(0, Buf::Input)]),
        ];
        assert_eq!(check_rounds(&exchange), Ok(()));
    }
}
