//! The engine's state machine: every link of a process, its requests, matching and
//! the eager/rendezvous protocol, over any byte stream that reads and writes without
//! blocking (`WouldBlock` when it cannot). No sockets, threads or clocks of its own:
//! the shell ([`super::Engine`]) hands it readiness and the time; tests hand it
//! in-memory pipes.
//!
//! # Protocol
//! A message of at most `eager` bytes goes at once (`Eager`). A larger one is
//! announced (`Rts`); its bytes follow (`Data`) only once the receiver has a matching
//! receive posted and said so (`Cts`), and then land straight in the posted buffer.
//! Unexpected eager messages are kept up to `unexpected` bytes in all: past that the
//! engine stops reading the link that brought the next one (its header read, its
//! payload left in the kernel), so its sender waits; a receive posted for that very
//! message takes it directly. Nothing is dropped.
//!
//! # Requests
//! A send completes when its last byte is handed to the kernel; a receive when its
//! message is in its buffer. A peer that is lost fails every request that needs it,
//! naming the rank.

use super::matching::{Envelope, Pattern, Queues};
use super::rawbuf::RawBuf;
use super::wire::{Header, Kind, HEADER};
use crate::error::Error;
use slab::Slab;
use std::collections::{HashMap, VecDeque};
use std::io::{self, IoSlice, Read, Write};
use std::time::{Duration, Instant};

/// A request's handle inside the engine.
pub type ReqId = usize;
/// A connection's handle inside the engine.
pub type ConnId = usize;

/// Bytes staged per link for headers and small payloads.
const STAGE: usize = 32 * 1024;
/// Payloads at least this long are read straight into their buffer.
const DIRECT: usize = 8 * 1024;
/// Frames gathered into one vectored write.
const IOVECS: usize = 64;

/// What a link's stream offers besides reading and writing without blocking.
pub trait LinkIo: Read + Write {
    /// The poller does not watch it: the shell asks it each turn ([`Core::poll_links`]).
    fn polled(&self) -> bool {
        false
    }
    /// For a polled link: (something to read or the end, room to write).
    fn ready(&self) -> (bool, bool) {
        (false, false)
    }
    /// Whether the peer's memory can be read from here (large messages then cross
    /// in one copy: `Addr`, then `Fin` instead of `Cts` and `Data`).
    fn reads_peer(&self) -> bool {
        false
    }
    /// Copies the peer's memory at `addr` into `dst`.
    fn read_peer(&mut self, _addr: u64, _dst: &mut [u8]) -> io::Result<()> {
        Err(io::ErrorKind::Unsupported.into())
    }
}

/// What carries a link, worst first: a peer's messages go on its best link.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Via {
    /// Through a relay proxy.
    Relay,
    /// A connection through the network (or loopback).
    Net,
    /// Shared memory, between two processes of one node.
    Memory,
}

/// A frame for the shell (a shared-memory offer and its answer), read off a link.
#[derive(Debug)]
pub struct ShellFrame {
    /// From whom.
    pub peer: u32,
    /// On which connection.
    pub conn: ConnId,
    /// Which frame (the header's `id`).
    pub what: u32,
    /// Its payload.
    pub payload: Vec<u8>,
}

/// Largest payload of a shell frame.
pub const SHELL_MAX: u64 = 4096;

/// The engine's settings.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Largest message sent at once; larger ones wait for the receiver (rendezvous).
    pub eager: usize,
    /// Bytes of unexpected eager messages kept before senders are made to wait.
    pub unexpected: usize,
    /// A peer that sends nothing (not even a heartbeat) for this long is lost.
    pub liveness: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            eager: 64 * 1024,
            unexpected: 64 * 1024 * 1024,
            liveness: Duration::from_secs(30),
        }
    }
}

/// A send's bytes.
#[derive(Debug)]
pub enum SendBuf {
    /// Owned by the request.
    Owned(Vec<u8>),
    /// Lent by the caller.
    Raw(RawBuf),
}

impl SendBuf {
    fn as_slice(&self) -> &[u8] {
        match self {
            SendBuf::Owned(v) => v,
            SendBuf::Raw(r) => r.as_slice(),
        }
    }
}

/// Where a receive puts its message.
#[derive(Debug)]
pub enum RecvBuf {
    /// A buffer of the message's length, made when it matches.
    Alloc(Vec<u8>),
    /// The caller's buffer, given to the engine (returned on completion).
    Owned(Vec<u8>),
    /// The caller's buffer, lent.
    Raw(RawBuf),
}

impl RecvBuf {
    fn capacity(&self) -> Option<usize> {
        match self {
            RecvBuf::Alloc(_) => None,
            RecvBuf::Owned(v) => Some(v.len()),
            RecvBuf::Raw(r) => Some(r.len()),
        }
    }

    fn prepare(&mut self, len: usize) {
        if let RecvBuf::Alloc(v) = self {
            *v = vec![0u8; len];
        }
    }

    fn slice(&mut self) -> &mut [u8] {
        match self {
            RecvBuf::Alloc(v) | RecvBuf::Owned(v) => v,
            RecvBuf::Raw(r) => r.as_mut_slice(),
        }
    }

    /// Takes a complete message: moved in when this is `Alloc`, copied otherwise.
    fn fill(&mut self, data: Vec<u8>) {
        match self {
            RecvBuf::Alloc(v) => *v = data,
            other => other.slice()[..data.len()].copy_from_slice(&data),
        }
    }

    fn into_data(self) -> Option<Vec<u8>> {
        match self {
            RecvBuf::Alloc(v) | RecvBuf::Owned(v) => Some(v),
            RecvBuf::Raw(_) => None,
        }
    }
}

/// What a received message was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Status {
    /// Sender (job rank).
    pub source: u32,
    /// Tag.
    pub tag: u32,
    /// Bytes.
    pub len: usize,
}

/// How a request ended.
#[derive(Debug)]
pub enum Outcome {
    /// A send: its bytes are with the kernel.
    Sent,
    /// A receive, with the buffer it was given (or allocated), unless it was lent.
    Received(Status, Option<Vec<u8>>),
    /// A cancelled receive, with its buffer unless it was lent.
    Cancelled(Option<Vec<u8>>),
}

enum ReqState {
    Send {
        dest: u32,
        /// A rendezvous send's bytes, until the receiver is ready.
        held: Option<SendBuf>,
    },
    Recv {
        buf: RecvBuf,
        matched: Option<Status>,
    },
    Done(Result<Outcome, Error>),
}

struct Req {
    state: ReqState,
    /// Nobody will take the result: free it when it completes.
    detached: bool,
}

/// Where a payload's bytes go.
#[derive(Clone, Copy, Debug)]
enum Sink {
    Req(ReqId),
    Unex(usize),
    Shell(usize),
}

#[derive(Clone, Copy, Debug)]
enum Rx {
    Header,
    Payload {
        to: Sink,
        len: usize,
        have: usize,
    },
    /// An unexpected eager message waits for room (or for its receive): its header is
    /// read, its payload is not.
    Stalled {
        key: usize,
    },
    /// The peer moved its messages here (`Resume`) and those it sent before on
    /// another link are not all handled yet: the next header waits.
    Gated,
}

struct Out {
    head: [u8; HEADER],
    body: Option<SendBuf>,
    off: usize,
    req: Option<ReqId>,
}

impl Out {
    /// A frame with no payload and no request behind it.
    fn control(h: Header) -> Out {
        Out {
            head: h.encode(),
            body: None,
            off: 0,
            req: None,
        }
    }

    fn len(&self) -> usize {
        HEADER + self.body.as_ref().map_or(0, |b| b.as_slice().len())
    }
}

struct Conn<C> {
    io: C,
    peer: u32,
    rx: Rx,
    stage: Box<[u8]>,
    start: usize,
    end: usize,
    out: VecDeque<Out>,
    last_tx: Instant,
    /// What carries it: a better link to the same peer replaces it.
    via: Via,
    /// Messages of the peer to handle before the next one read here (its `Resume`).
    gate: Option<u64>,
    /// The peer sends nothing more here (its `Moved`).
    moved_in: bool,
    /// We send nothing more here (our `Moved`).
    moved_out: bool,
    /// The poller said the peer shut its side: read on to the end of the stream
    /// even after a short read, since no further readiness comes for the end.
    hup: bool,
}

enum UnexBody {
    Eager { data: Vec<u8>, complete: bool },
    Stalled { conn: ConnId },
    Rts { id: u32 },
}

struct Unex {
    env: Envelope,
    body: UnexBody,
    /// The receive that matched it while its payload was still arriving.
    claimed: Option<ReqId>,
}

/// What the engine holds, for tests and reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Accounting {
    /// Bytes of unexpected eager messages held now.
    pub unexpected_bytes: usize,
    /// The most ever held.
    pub unexpected_peak: usize,
    /// Times a link was paused because the unexpected buffer was full.
    pub stalls: u64,
    /// Requests not yet taken.
    pub requests: usize,
    /// Open connections.
    pub conns: usize,
    /// Times our sends moved from a relayed link to a direct one.
    pub upgrades: u64,
    /// Bytes written to and read from links so far.
    pub moved: u64,
    /// Links that moved to shared memory.
    pub memory_links: u64,
    /// Large messages copied straight from the sender's memory.
    pub single_copies: u64,
}

/// Every link and request of one process.
pub struct Core<C> {
    me: u32,
    size: u32,
    limits: Limits,
    conns: Slab<Conn<C>>,
    /// Connections per peer; the first carries what we send.
    links: HashMap<u32, Vec<ConnId>>,
    /// When we last heard from each peer.
    heard: HashMap<u32, Instant>,
    lost: HashMap<u32, String>,
    reqs: Slab<Req>,
    queues: Queues<ReqId, usize>,
    unexp: Slab<Unex>,
    /// Rendezvous receives waiting for their data, by (peer, sender's id).
    expect: HashMap<(u32, u32), ReqId>,
    stalled: Vec<ConnId>,
    /// Ordered frames (`Eager`, `Rts`) sent to / handled from each peer: a link a
    /// peer moved to waits until the count reaches its `Resume`.
    sent_seq: HashMap<u32, u64>,
    recv_seq: HashMap<u32, u64>,
    /// Connections waiting at their gate.
    gated: Vec<ConnId>,
    /// Synchronous sends to ourselves not matched yet, by their unexpected message.
    sync_local: HashMap<usize, ReqId>,
    acct: Accounting,
    /// Connections the poller does not watch (see [`LinkIo::polled`]).
    polled: Vec<ConnId>,
    /// Shell frames read and not yet taken, and those whose payload is arriving.
    shell: Vec<ShellFrame>,
    shell_partial: Slab<ShellFrame>,
    /// Where the senders of announced large messages keep them (`Addr`), by
    /// (peer, sender's id).
    peer_addr: HashMap<(u32, u32), u64>,
    /// A cross-memory read failed once: said once, then `Cts` as on a socket.
    single_copy_refused: bool,
    /// The time, as the shell last said ([`Core::set_now`]).
    now: Instant,
    /// Bumped whenever a request completes: what waiting callers watch.
    pub completions: u64,
    /// The process is leaving: what arrives is read and dropped until each peer
    /// closes its side.
    draining: bool,
}

fn would_block(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::WouldBlock
}

impl<C: LinkIo> Core<C> {
    /// The engine of rank `me` of a job of `size` ranks, at time `now`.
    pub fn new(me: u32, size: u32, limits: Limits, now: Instant) -> Core<C> {
        Core {
            now,
            me,
            size,
            limits,
            conns: Slab::new(),
            links: HashMap::new(),
            heard: HashMap::new(),
            lost: HashMap::new(),
            reqs: Slab::new(),
            queues: Queues::default(),
            unexp: Slab::new(),
            expect: HashMap::new(),
            stalled: Vec::new(),
            sent_seq: HashMap::new(),
            recv_seq: HashMap::new(),
            gated: Vec::new(),
            sync_local: HashMap::new(),
            acct: Accounting::default(),
            polled: Vec::new(),
            shell: Vec::new(),
            shell_partial: Slab::new(),
            peer_addr: HashMap::new(),
            single_copy_refused: false,
            completions: 0,
            draining: false,
        }
    }

    /// The shell says what time it is (each turn of its loop): when links last sent
    /// and were heard from is counted from it.
    pub fn set_now(&mut self, now: Instant) {
        self.now = now;
    }

    /// The settings.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// What the engine holds now.
    pub fn accounting(&self) -> Accounting {
        Accounting {
            requests: self.reqs.len(),
            conns: self.conns.len(),
            ..self.acct
        }
    }

    /// Whether we have a link to `peer`.
    pub fn has_link(&self, peer: u32) -> bool {
        self.links.get(&peer).is_some_and(|c| !c.is_empty())
    }

    /// Whether we have a link to `peer` that does not go through a relay proxy.
    pub fn has_direct_link(&self, peer: u32) -> bool {
        self.links.get(&peer).is_some_and(|v| {
            v.iter()
                .any(|&c| self.conns.get(c).is_some_and(|c| c.via != Via::Relay))
        })
    }

    /// Why `peer` is gone, if it is.
    pub fn lost(&self, peer: u32) -> Option<&str> {
        self.lost.get(&peer).map(String::as_str)
    }

    /// Adds a connection to `peer` whose handshake is done (`relayed`: through a
    /// relay proxy). Returns its handle; the caller then reports readiness for it
    /// ([`Core::on_readable`]). See [`Core::add_conn_via`].
    pub fn add_conn(&mut self, peer: u32, io: C, now: Instant, relayed: bool) -> ConnId {
        let via = if relayed { Via::Relay } else { Via::Net };
        self.add_conn_via(peer, io, now, via)
    }

    /// Adds a connection to `peer` carried by `via`.
    ///
    /// We send on a peer's first connection. A better one that comes up (a direct
    /// link beside a relayed one, shared memory beside TCP) takes over: `Moved` closes
    /// our stream on the worse links, `Resume` opens it on the new one with the count
    /// of messages sent before, and the peer holds what comes on the new link until
    /// it has handled that many. The peer does the same on its side, and once both
    /// `Moved` have crossed, the worse link is closed. A worse link that comes up
    /// after a better one is never used by us.
    pub fn add_conn_via(&mut self, peer: u32, io: C, now: Instant, via: Via) -> ConnId {
        let polled = io.polled();
        let id = self.conns.insert(Conn {
            io,
            peer,
            rx: Rx::Header,
            stage: vec![0u8; STAGE].into_boxed_slice(),
            start: 0,
            end: 0,
            out: VecDeque::new(),
            last_tx: now,
            via,
            gate: None,
            moved_in: false,
            moved_out: false,
            hup: false,
        });
        if polled {
            self.polled.push(id);
        }
        let first = self.links.get(&peer).and_then(|v| v.first().copied());
        let first_via = first.and_then(|f| self.conns.get(f)).map(|f| f.via);
        self.heard.insert(peer, now);
        let links = self.links.entry(peer).or_default();
        match first_via {
            Some(best) if via > best => {
                links.insert(0, id);
                // Every worse link to the peer is done with (two that crossed
                // included): each hears so, and closes once the peer says it too.
                let worse: Vec<ConnId> = links
                    .iter()
                    .copied()
                    .filter(|&c| {
                        self.conns
                            .get(c)
                            .is_some_and(|c| c.via < via && !c.moved_out)
                    })
                    .collect();
                for old in worse {
                    self.move_off(old);
                }
                let mut h = Header::new(Kind::Resume);
                h.len = self.sent_seq.get(&peer).copied().unwrap_or(0);
                self.queue(id, Out::control(h));
                if via == Via::Memory {
                    self.acct.memory_links += 1;
                } else {
                    self.acct.upgrades += 1;
                }
            }
            Some(best) if via < best => {
                links.push(id);
                self.move_off(id);
            }
            _ => links.push(id),
        }
        id
    }

    /// The connections the poller does not watch, each with (readable, writable):
    /// the shell asks them every turn and reports what they say.
    pub fn poll_links(&mut self) -> bool {
        let mut any = false;
        for i in 0..self.polled.len() {
            let Some(&c) = self.polled.get(i) else { break };
            let Some(conn) = self.conns.get(c) else {
                continue;
            };
            let (r, w) = conn.io.ready();
            if r {
                any = true;
                self.pump(c);
            }
            if w && self.conns.get(c).is_some_and(|x| !x.out.is_empty()) {
                any = true;
                self.flush(c);
            }
        }
        any
    }

    /// The streams of the polled connections (to raise their sleep flags).
    pub fn polled_io(&mut self) -> impl Iterator<Item = &mut C> {
        let polled = &self.polled;
        self.conns
            .iter_mut()
            .filter(|(id, _)| polled.contains(id))
            .map(|(_, c)| &mut c.io)
    }

    /// Whether a polled link has something to do now (checked before sleeping).
    pub fn polled_ready(&self) -> bool {
        self.polled.iter().any(|&c| {
            self.conns.get(c).is_some_and(|conn| {
                let (r, w) = conn.io.ready();
                r || (w && !conn.out.is_empty())
            })
        })
    }

    /// Sends a shell frame (`what`, `payload`) on connection `c`.
    pub fn send_shell(&mut self, c: ConnId, what: u32, payload: Vec<u8>) {
        let mut h = Header::new(Kind::Shell);
        h.id = what;
        h.len = payload.len() as u64;
        self.queue(
            c,
            Out {
                head: h.encode(),
                body: Some(SendBuf::Owned(payload)),
                off: 0,
                req: None,
            },
        );
    }

    /// Shell frames read since the last call.
    pub fn take_shell(&mut self) -> Vec<ShellFrame> {
        std::mem::take(&mut self.shell)
    }

    /// What carries connection `c`.
    pub fn conn_via(&self, c: ConnId) -> Option<Via> {
        self.conns.get(c).map(|c| c.via)
    }

    /// What carries the link we send to `peer` on.
    pub fn link_via(&self, peer: u32) -> Option<Via> {
        let c = *self.links.get(&peer)?.first()?;
        self.conn_via(c)
    }

    /// We send nothing more on `c`, and tell the peer so.
    fn move_off(&mut self, c: ConnId) {
        if let Some(o) = self.conns.get_mut(c) {
            o.moved_out = true;
        }
        self.queue(c, Out::control(Header::new(Kind::Moved)));
        self.retire_if_done(c);
    }

    /// Closes a link both sides moved away from, once our `Moved` is out.
    fn retire_if_done(&mut self, c: ConnId) {
        let Some(conn) = self.conns.get(c) else {
            return;
        };
        if conn.moved_in
            && conn.moved_out
            && conn.out.is_empty()
            && matches!(conn.rx, Rx::Header)
            && conn.start == conn.end
        {
            self.forget_conn(c);
        }
    }

    /// One more ordered frame from `peer` handled: lets go a link waiting for it.
    fn handled_one(&mut self, peer: u32) {
        let n = self.recv_seq.entry(peer).or_default();
        *n += 1;
        let n = *n;
        let ready: Vec<ConnId> = self
            .gated
            .iter()
            .copied()
            .filter(|&g| {
                self.conns
                    .get(g)
                    .is_some_and(|x| x.peer == peer && x.gate.is_none_or(|want| want <= n))
            })
            .collect();
        for g in ready {
            self.gated.retain(|&x| x != g);
            if let Some(conn) = self.conns.get_mut(g) {
                conn.rx = Rx::Header;
            }
            self.pump(g);
        }
    }

    /// The peer of a connection.
    pub fn conn_peer(&self, c: ConnId) -> Option<u32> {
        self.conns.get(c).map(|c| c.peer)
    }

    /// The connection's stream (for the shell's registration).
    pub fn conn_io(&mut self, c: ConnId) -> Option<&mut C> {
        self.conns.get_mut(c).map(|c| &mut c.io)
    }

    /// The connection we send to `peer` on (its first), if there is one.
    pub fn link_io(&self, peer: u32) -> Option<&C> {
        let c = *self.links.get(&peer)?.first()?;
        self.conns.get(c).map(|c| &c.io)
    }

    fn new_req(&mut self, state: ReqState) -> ReqId {
        self.reqs.insert(Req {
            state,
            detached: false,
        })
    }

    fn complete(&mut self, id: ReqId, r: Result<Outcome, Error>) {
        self.completions += 1;
        let Some(req) = self.reqs.get_mut(id) else {
            return;
        };
        if req.detached {
            self.reqs.remove(id);
        } else {
            req.state = ReqState::Done(r);
        }
    }

    fn complete_recv(&mut self, id: ReqId) {
        let Some(req) = self.reqs.get_mut(id) else {
            return;
        };
        let state = std::mem::replace(&mut req.state, ReqState::Done(Ok(Outcome::Sent)));
        let out = match state {
            ReqState::Recv {
                buf,
                matched: Some(st),
                ..
            } => {
                let data = buf.into_data();
                Outcome::Received(st, data)
            }
            other => {
                req.state = other;
                return;
            }
        };
        self.complete(id, Ok(out));
    }

    /// Whether a request has completed.
    pub fn is_done(&self, id: ReqId) -> bool {
        matches!(
            self.reqs.get(id).map(|r| &r.state),
            Some(ReqState::Done(_)) | None
        )
    }

    /// Takes a completed request's result (and frees it).
    pub fn take(&mut self, id: ReqId) -> Option<Result<Outcome, Error>> {
        if !matches!(self.reqs.get(id)?.state, ReqState::Done(_)) {
            return None;
        }
        match self.reqs.remove(id).state {
            ReqState::Done(r) => Some(r),
            _ => None,
        }
    }

    /// Nobody will wait for this request: a receive not matched yet is cancelled,
    /// anything else completes on its own and its result is dropped.
    pub fn detach(&mut self, id: ReqId) {
        if self.cancel(id) || self.is_done(id) {
            self.reqs.try_remove(id);
            return;
        }
        if let Some(r) = self.reqs.get_mut(id) {
            r.detached = true;
        }
    }

    /// Cancels a receive that has not matched a message yet. False if it has (or is
    /// a send, or done): then it completes as it would have.
    pub fn cancel(&mut self, id: ReqId) -> bool {
        let Some(Req {
            state: ReqState::Recv { matched: None, .. },
            ..
        }) = self.reqs.get(id)
        else {
            return false;
        };
        if !self.queues.cancel(id) {
            return false;
        }
        let Some(req) = self.reqs.get_mut(id) else {
            return false;
        };
        if let ReqState::Recv { buf, .. } =
            std::mem::replace(&mut req.state, ReqState::Done(Ok(Outcome::Sent)))
        {
            let data = match buf {
                RecvBuf::Alloc(_) => None,
                other => other.into_data(),
            };
            self.complete(id, Ok(Outcome::Cancelled(data)));
        }
        true
    }

    fn lost_error(&self, rank: u32) -> Error {
        Error::PeerLost {
            rank,
            reason: self
                .lost
                .get(&rank)
                .cloned()
                .unwrap_or_else(|| "no link".into()),
        }
    }

    /// Posts a send of `buf` to `dest` (a job rank) with `tag` in `context`. The
    /// caller makes sure a link exists first (or `dest` is us).
    pub fn post_send(&mut self, dest: u32, tag: u32, context: u32, buf: SendBuf) -> ReqId {
        self.post_send_mode(dest, tag, context, buf, false, 0)
    }

    /// Posts a send that goes at once up to `allowance` bytes above the eager limit
    /// (a collective's flit, sized by its model to the limit, carries the call's
    /// signature at its head).
    pub fn post_send_allowing(
        &mut self,
        dest: u32,
        tag: u32,
        context: u32,
        buf: SendBuf,
        allowance: usize,
    ) -> ReqId {
        self.post_send_mode(dest, tag, context, buf, false, allowance)
    }

    /// Posts a synchronous send (MPI's `MPI_Ssend`): announced first (`Rts`)
    /// whatever its size, so it completes only after the receiver matched it with
    /// a receive and said so (`Cts`). To ourselves, it completes when a receive of
    /// ours takes it (as under MPI, without one posted it never does).
    pub fn post_ssend(&mut self, dest: u32, tag: u32, context: u32, buf: SendBuf) -> ReqId {
        self.post_send_mode(dest, tag, context, buf, true, 0)
    }

    fn post_send_mode(
        &mut self,
        dest: u32,
        tag: u32,
        context: u32,
        buf: SendBuf,
        sync: bool,
        allowance: usize,
    ) -> ReqId {
        let len = buf.as_slice().len();
        if dest == self.me {
            let id = self.new_req(ReqState::Send { dest, held: None });
            let data = buf.as_slice().to_vec();
            match self.deliver_local(tag, context, data) {
                Some(key) if sync => {
                    self.sync_local.insert(key, id);
                }
                _ => self.complete(id, Ok(Outcome::Sent)),
            }
            return id;
        }
        if let Some(_reason) = self.lost.get(&dest) {
            let e = self.lost_error(dest);
            let id = self.new_req(ReqState::Send { dest, held: None });
            self.complete(id, Err(e));
            return id;
        }
        let Some(&c) = self.links.get(&dest).and_then(|v| v.first()) else {
            let id = self.new_req(ReqState::Send { dest, held: None });
            self.complete(
                id,
                Err(Error::PeerLost {
                    rank: dest,
                    reason: "no link to it".into(),
                }),
            );
            return id;
        };
        let id = self.new_req(ReqState::Send { dest, held: None });
        let mut h = Header::new(Kind::Eager);
        h.tag = tag;
        h.context = context;
        h.id = id as u32;
        h.len = len as u64;
        let out = if len <= self.limits.eager + allowance && !sync {
            Out {
                head: h.encode(),
                body: Some(buf),
                off: 0,
                req: Some(id),
            }
        } else {
            h.kind = Kind::Rts;
            let addr = buf.as_slice().as_ptr() as u64;
            if let Some(Req {
                state: ReqState::Send { held, .. },
                ..
            }) = self.reqs.get_mut(id)
            {
                *held = Some(buf);
            }
            if len > 0 && self.conns.get(c).is_some_and(|x| x.io.reads_peer()) {
                // The receiver may copy it from here (see `clear_to_send`).
                let mut a = Header::new(Kind::Addr);
                a.tag = (addr >> 32) as u32;
                a.context = addr as u32;
                a.id = id as u32;
                a.len = len as u64;
                self.queue(c, Out::control(a));
            }
            Out {
                head: h.encode(),
                body: None,
                off: 0,
                req: None,
            }
        };
        *self.sent_seq.entry(dest).or_default() += 1;
        self.queue(c, out);
        id
    }

    /// A send to ourselves: matched here and now.
    /// Returns the unexpected message's key when no receive took it.
    fn deliver_local(&mut self, tag: u32, context: u32, data: Vec<u8>) -> Option<usize> {
        let env = Envelope {
            source: self.me,
            tag,
            context,
            len: data.len() as u64,
        };
        while let Some((_, rid)) = self.queues.arrive(&env) {
            if self.too_small(rid, &env) {
                continue;
            }
            self.matched(rid, &env);
            if let Some(ReqState::Recv { buf, .. }) = self.reqs.get_mut(rid).map(|r| &mut r.state) {
                buf.fill(data);
            }
            self.complete_recv(rid);
            return None;
        }
        let key = self.unexp.insert(Unex {
            env,
            body: UnexBody::Eager {
                data,
                complete: true,
            },
            claimed: None,
        });
        self.queues.file(env, key);
        Some(key)
    }

    /// Fails `rid` if its buffer cannot hold `env`'s message; true if it did.
    fn too_small(&mut self, rid: ReqId, env: &Envelope) -> bool {
        let cap = match self.reqs.get(rid).map(|r| &r.state) {
            Some(ReqState::Recv { buf, .. }) => buf.capacity(),
            _ => return true,
        };
        match cap {
            Some(cap) if (cap as u64) < env.len => {
                self.complete(
                    rid,
                    Err(Error::Truncated {
                        from: env.source,
                        tag: env.tag,
                        len: env.len,
                        capacity: cap,
                    }),
                );
                true
            }
            _ => false,
        }
    }

    /// Marks `rid` as matched with `env` and sizes its buffer.
    fn matched(&mut self, rid: ReqId, env: &Envelope) {
        if let Some(ReqState::Recv { buf, matched, .. }) =
            self.reqs.get_mut(rid).map(|r| &mut r.state)
        {
            buf.prepare(env.len as usize);
            *matched = Some(Status {
                source: env.source,
                tag: env.tag,
                len: env.len as usize,
            });
        }
    }

    /// Posts a receive.
    pub fn post_recv(&mut self, pattern: Pattern, buf: RecvBuf) -> ReqId {
        let cap = buf.capacity();
        let id = self.new_req(ReqState::Recv { buf, matched: None });
        if let Some((env, _)) = self.queues.peek(&pattern) {
            if let Some(cap) = cap {
                if (cap as u64) < env.len {
                    let env = *env;
                    self.too_small(id, &env);
                    return id;
                }
            }
        }
        match self.queues.post(pattern, id) {
            Some((env, key)) => self.take_unexpected(id, env, key),
            None => {
                if let Some(e) = self.hopeless(&pattern) {
                    self.queues.cancel(id);
                    self.complete(id, Err(e));
                }
            }
        }
        id
    }

    /// Why a receive with this pattern can never match, if it cannot.
    fn hopeless(&self, p: &Pattern) -> Option<Error> {
        match p.source {
            Some(s) if s != self.me && self.lost.contains_key(&s) => Some(self.lost_error(s)),
            None if self.size > 1 && self.lost.len() as u32 >= self.size - 1 => {
                let rank = self.lost.keys().min().copied().unwrap_or(0);
                Some(Error::PeerLost {
                    rank,
                    reason: "every other rank is gone".into(),
                })
            }
            _ => None,
        }
    }

    /// Receive `rid` matched the unexpected message `key`.
    fn take_unexpected(&mut self, rid: ReqId, env: Envelope, key: usize) {
        self.matched(rid, &env);
        let Some(u) = self.unexp.get_mut(key) else {
            return;
        };
        match &mut u.body {
            UnexBody::Eager {
                complete: false, ..
            } => u.claimed = Some(rid),
            UnexBody::Eager { complete: true, .. } => {
                let u = self.unexp.remove(key);
                if let Some(sid) = self.sync_local.remove(&key) {
                    self.complete(sid, Ok(Outcome::Sent));
                }
                if let UnexBody::Eager { data, .. } = u.body {
                    if env.source != self.me {
                        self.acct.unexpected_bytes -= data.len();
                    }
                    if let Some(ReqState::Recv { buf, .. }) =
                        self.reqs.get_mut(rid).map(|r| &mut r.state)
                    {
                        buf.fill(data);
                    }
                }
                self.complete_recv(rid);
                self.resume_stalled();
            }
            UnexBody::Stalled { conn } => {
                let c = *conn;
                self.unexp.remove(key);
                self.stalled.retain(|&s| s != c);
                if let Some(conn) = self.conns.get_mut(c) {
                    conn.rx = Rx::Payload {
                        to: Sink::Req(rid),
                        len: env.len as usize,
                        have: 0,
                    };
                }
                self.pump(c);
            }
            UnexBody::Rts { id } => {
                let id = *id;
                self.unexp.remove(key);
                self.clear_to_send(env.source, id, rid, env.len);
            }
        }
    }

    /// Tells `peer` to send the data of its request `id` into our receive `rid`.
    /// Over a link that reads the peer's memory, copies the data from where the
    /// sender keeps it instead (one copy) and says `Fin`.
    fn clear_to_send(&mut self, peer: u32, id: u32, rid: ReqId, len: u64) {
        let Some(&c) = self.links.get(&peer).and_then(|v| v.first()) else {
            self.expect.insert((peer, id), rid);
            return;
        };
        if let Some(addr) = self.peer_addr.remove(&(peer, id)) {
            let Core { conns, reqs, .. } = self;
            let copied = match (conns.get_mut(c), reqs.get_mut(rid).map(|r| &mut r.state)) {
                (Some(conn), Some(ReqState::Recv { buf, .. })) if conn.io.reads_peer() => {
                    let dst = &mut buf.slice()[..len as usize];
                    conn.io.read_peer(addr, dst)
                }
                _ => Err(io::ErrorKind::Unsupported.into()),
            };
            match copied {
                Ok(()) => {
                    self.acct.moved += len;
                    self.acct.single_copies += 1;
                    let mut h = Header::new(Kind::Fin);
                    h.id = id;
                    h.len = len;
                    self.queue(c, Out::control(h));
                    self.complete_recv(rid);
                    return;
                }
                Err(e) => {
                    if !self.single_copy_refused {
                        self.single_copy_refused = true;
                        tracing::info!(
                            rank = peer,
                            error = %e,
                            "cannot read a peer's memory (cross-memory attach); large messages \
                             inside the node stream through shared memory instead"
                        );
                    }
                }
            }
        }
        self.expect.insert((peer, id), rid);
        let mut h = Header::new(Kind::Cts);
        h.id = id;
        h.len = len;
        self.queue(
            c,
            Out {
                head: h.encode(),
                body: None,
                off: 0,
                req: None,
            },
        );
    }

    /// The oldest unexpected message `pattern` accepts, left in place. An error if
    /// none is there and none can come.
    pub fn iprobe(&self, pattern: &Pattern) -> Result<Option<Status>, Error> {
        if let Some((env, _)) = self.queues.peek(pattern) {
            return Ok(Some(Status {
                source: env.source,
                tag: env.tag,
                len: env.len as usize,
            }));
        }
        match self.hopeless(pattern) {
            Some(e) => Err(e),
            None => Ok(None),
        }
    }

    /// A matched probe (MPI's `MPI_Improbe`): the oldest unexpected message
    /// `pattern` accepts, taken out of matching at once so that no other receive
    /// can have it, and a receive request that gets its bytes (in a buffer of the
    /// message's length: rendezvous data is asked for now). `None` if no such
    /// message is there; an error if none can come.
    pub fn improbe(&mut self, pattern: &Pattern) -> Result<Option<(Status, ReqId)>, Error> {
        let Some((env, key)) = self.queues.take(pattern) else {
            return match self.hopeless(pattern) {
                Some(e) => Err(e),
                None => Ok(None),
            };
        };
        let id = self.new_req(ReqState::Recv {
            buf: RecvBuf::Alloc(Vec::new()),
            matched: None,
        });
        self.take_unexpected(id, env, key);
        let st = Status {
            source: env.source,
            tag: env.tag,
            len: env.len as usize,
        };
        Ok(Some((st, id)))
    }

    fn queue(&mut self, c: ConnId, out: Out) {
        let Some(conn) = self.conns.get_mut(c) else {
            return;
        };
        conn.out.push_back(out);
        if conn.out.len() == 1 {
            self.flush(c);
        }
    }

    /// The connection can be written: sends what is queued.
    pub fn on_writable(&mut self, c: ConnId) {
        self.flush(c);
    }

    fn flush(&mut self, c: ConnId) {
        let mut done: Vec<ReqId> = Vec::new();
        let result = loop {
            let Some(conn) = self.conns.get_mut(c) else {
                return;
            };
            if conn.out.is_empty() {
                break Ok(());
            }
            let mut slices: Vec<IoSlice<'_>> = Vec::with_capacity(IOVECS);
            for o in conn.out.iter() {
                if slices.len() + 2 > IOVECS {
                    break;
                }
                if o.off < HEADER {
                    slices.push(IoSlice::new(&o.head[o.off..]));
                    if let Some(b) = &o.body {
                        slices.push(IoSlice::new(b.as_slice()));
                    }
                } else if let Some(b) = &o.body {
                    slices.push(IoSlice::new(&b.as_slice()[o.off - HEADER..]));
                }
            }
            let r = conn.io.write_vectored(&slices);
            drop(slices);
            match r {
                Ok(0) => break Err("the link accepts no more bytes".to_string()),
                Ok(mut n) => {
                    conn.last_tx = self.now;
                    self.acct.moved += n as u64;
                    while n > 0 {
                        let Some(front) = conn.out.front_mut() else {
                            break;
                        };
                        let left = front.len() - front.off;
                        if n >= left {
                            n -= left;
                            if let Some(o) = conn.out.pop_front() {
                                if let Some(r) = o.req {
                                    done.push(r);
                                }
                            }
                        } else {
                            front.off += n;
                            n = 0;
                        }
                    }
                }
                Err(e) if would_block(&e) => break Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => break Err(format!("link error: {e}")),
            }
        };
        for r in done {
            self.complete(r, Ok(Outcome::Sent));
        }
        if result.is_ok() {
            self.retire_if_done(c);
        }
        if let Err(reason) = result {
            if let Some(p) = self.conn_peer(c) {
                self.fail_peer(p, &reason);
            }
        }
    }

    /// The connection can be read: reads and handles everything available.
    pub fn on_readable(&mut self, c: ConnId) {
        self.pump(c);
    }

    /// Readiness that says the peer shut its side of `c` (after what it sent
    /// last, which may still wait to be read): reads on to the end.
    pub fn on_read_closed(&mut self, c: ConnId) {
        if let Some(conn) = self.conns.get_mut(c) {
            conn.hup = true;
        }
        self.pump(c);
    }

    /// The process is leaving (its own sends are out and its side of every link is
    /// shut): from now on what arrives is read and dropped, and a link is closed
    /// quietly when its peer closes its side. Reading on keeps the kernel from
    /// resetting links whose peers are still sending to us, which would destroy data
    /// of ours they have not read yet.
    pub fn drain(&mut self) {
        self.draining = true;
        for c in self.conn_ids() {
            self.pump(c);
        }
    }

    fn pump_draining(&mut self, c: ConnId) {
        loop {
            let Some(conn) = self.conns.get_mut(c) else {
                return;
            };
            conn.start = 0;
            conn.end = 0;
            match conn.io.read(&mut conn.stage) {
                Ok(n) if n > 0 => continue,
                Err(e) if would_block(&e) => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                _ => {
                    self.forget_conn(c);
                    return;
                }
            }
        }
    }

    /// The peer closed its side of `c`. When it has other links to us (both ends
    /// dialled at once) and `c` holds no half-read message and nothing of ours to
    /// send, only `c` goes: the peer's other links may still carry its last messages,
    /// and it is gone when the last of them ends. Otherwise the peer is lost.
    fn closed_by_peer(&mut self, c: ConnId, peer: u32) {
        let Some(conn) = self.conns.get(c) else {
            return;
        };
        let idle = matches!(conn.rx, Rx::Header) && conn.start == conn.end && conn.out.is_empty();
        let others = self
            .links
            .get(&peer)
            .is_some_and(|v| v.iter().any(|&x| x != c));
        if !(idle && others) {
            return self.fail_peer(peer, "it closed its link");
        }
        self.forget_conn(c);
    }

    /// Drops connection `c` alone (its peer keeps its other links, if any).
    fn forget_conn(&mut self, c: ConnId) {
        if self.conns.contains(c) {
            let conn = self.conns.remove(c);
            if let Some(v) = self.links.get_mut(&conn.peer) {
                v.retain(|&x| x != c);
            }
        }
        self.polled.retain(|&s| s != c);
        self.stalled.retain(|&s| s != c);
        self.gated.retain(|&s| s != c);
    }

    /// Reads connection `c` until it would block or is paused.
    fn pump(&mut self, c: ConnId) {
        if self.draining {
            return self.pump_draining(c);
        }
        loop {
            if let Err(reason) = self.consume(c) {
                if let Some(p) = self.conn_peer(c) {
                    self.fail_peer(p, &reason);
                }
                return;
            }
            let Some(conn) = self.conns.get_mut(c) else {
                return;
            };
            let peer = conn.peer;
            let r = match conn.rx {
                Rx::Stalled { .. } | Rx::Gated => return,
                Rx::Payload { to, len, have } if conn.start == conn.end && len - have >= DIRECT => {
                    let dst: &mut [u8] = match to {
                        Sink::Req(rid) => match self.reqs.get_mut(rid).map(|r| &mut r.state) {
                            Some(ReqState::Recv { buf, .. }) => &mut buf.slice()[have..len],
                            _ => return,
                        },
                        Sink::Unex(key) => match self.unexp.get_mut(key).map(|u| &mut u.body) {
                            Some(UnexBody::Eager { data, .. }) => &mut data[have..len],
                            _ => return,
                        },
                        Sink::Shell(key) => match self.shell_partial.get_mut(key) {
                            Some(f) => &mut f.payload[have..len],
                            None => return,
                        },
                    };
                    let want = dst.len();
                    match conn.io.read(dst) {
                        Ok(n) if n > 0 => {
                            conn.rx = Rx::Payload {
                                to,
                                len,
                                have: have + n,
                            };
                            Ok((n, want))
                        }
                        other => other.map(|n| (n, want)),
                    }
                }
                _ => {
                    if conn.start == conn.end {
                        conn.start = 0;
                        conn.end = 0;
                    } else if conn.start > 0 && conn.stage.len() - conn.end < HEADER {
                        conn.stage.copy_within(conn.start..conn.end, 0);
                        conn.end -= conn.start;
                        conn.start = 0;
                    }
                    let want = conn.stage.len() - conn.end;
                    let end = conn.end;
                    match conn.io.read(&mut conn.stage[end..]) {
                        Ok(n) => {
                            conn.end += n;
                            Ok((n, want))
                        }
                        Err(e) => Err(e),
                    }
                }
            };
            match r {
                Ok((0, _)) => {
                    self.closed_by_peer(c, peer);
                    return;
                }
                Ok((n, want)) => {
                    self.heard.insert(peer, self.now);
                    self.acct.moved += n as u64;
                    let hup = self.conns.get(c).is_some_and(|x| x.hup);
                    if n < want && !hup {
                        // Drained for now (a short read on a stream socket); handle
                        // what came and wait for the next readiness. Not when the
                        // peer has shut its side: its last bytes and the end come in
                        // one readiness, and the end must be read too.
                        if let Err(reason) = self.consume(c) {
                            self.fail_peer(peer, &reason);
                            return;
                        }
                        self.finish_direct(c);
                        return;
                    }
                    self.finish_direct(c);
                }
                Err(e) if would_block(&e) => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    self.fail_peer(peer, &format!("link error: {e}"));
                    return;
                }
            }
        }
    }

    /// After a direct read: completes the payload if it is whole.
    fn finish_direct(&mut self, c: ConnId) {
        if let Some(Conn {
            rx: Rx::Payload { to, len, have },
            ..
        }) = self.conns.get(c)
        {
            if have == len {
                let to = *to;
                if let Some(conn) = self.conns.get_mut(c) {
                    conn.rx = Rx::Header;
                }
                self.payload_done(to);
            }
        }
    }

    /// Handles what is staged on connection `c`.
    fn consume(&mut self, c: ConnId) -> Result<(), String> {
        loop {
            let Some(conn) = self.conns.get_mut(c) else {
                return Ok(());
            };
            let avail = conn.end - conn.start;
            match conn.rx {
                Rx::Stalled { .. } | Rx::Gated => return Ok(()),
                Rx::Header => {
                    if avail < HEADER {
                        return Ok(());
                    }
                    let mut b = [0u8; HEADER];
                    b.copy_from_slice(&conn.stage[conn.start..conn.start + HEADER]);
                    let peer = conn.peer;
                    let h = Header::decode(&b).map_err(|e| format!("protocol error: {e}"))?;
                    if h.kind.ordered() {
                        if let Some(want) = conn.gate {
                            if self.recv_seq.get(&peer).copied().unwrap_or(0) < want {
                                // Messages sent before the move are still on their way.
                                conn.rx = Rx::Gated;
                                self.gated.push(c);
                                return Ok(());
                            }
                            conn.gate = None;
                        }
                    }
                    conn.start += HEADER;
                    self.on_header(c, peer, h)?;
                    if h.kind.ordered() {
                        self.handled_one(peer);
                    } else if h.kind == Kind::Moved {
                        self.retire_if_done(c);
                    }
                }
                Rx::Payload { to, len, have } => {
                    if have == len {
                        conn.rx = Rx::Header;
                        self.payload_done(to);
                        continue;
                    }
                    if avail == 0 {
                        return Ok(());
                    }
                    let n = avail.min(len - have);
                    let src = &conn.stage[conn.start..conn.start + n];
                    let dst: &mut [u8] = match to {
                        Sink::Req(rid) => match self.reqs.get_mut(rid).map(|r| &mut r.state) {
                            Some(ReqState::Recv { buf, .. }) => &mut buf.slice()[have..have + n],
                            _ => return Err("a payload for a request that is gone".into()),
                        },
                        Sink::Unex(key) => match self.unexp.get_mut(key).map(|u| &mut u.body) {
                            Some(UnexBody::Eager { data, .. }) => &mut data[have..have + n],
                            _ => return Err("a payload for a message that is gone".into()),
                        },
                        Sink::Shell(key) => match self.shell_partial.get_mut(key) {
                            Some(f) => &mut f.payload[have..have + n],
                            None => return Err("a payload for a frame that is gone".into()),
                        },
                    };
                    dst.copy_from_slice(src);
                    conn.start += n;
                    conn.rx = Rx::Payload {
                        to,
                        len,
                        have: have + n,
                    };
                }
            }
        }
    }

    fn payload_done(&mut self, to: Sink) {
        match to {
            Sink::Req(rid) => self.complete_recv(rid),
            Sink::Shell(key) => {
                if self.shell_partial.contains(key) {
                    let f = self.shell_partial.remove(key);
                    self.shell.push(f);
                }
            }
            Sink::Unex(key) => {
                let Some(u) = self.unexp.get_mut(key) else {
                    return;
                };
                if let UnexBody::Eager { complete, .. } = &mut u.body {
                    *complete = true;
                }
                if let Some(rid) = u.claimed {
                    let u = self.unexp.remove(key);
                    if let UnexBody::Eager { data, .. } = u.body {
                        self.acct.unexpected_bytes -= data.len();
                        if let Some(ReqState::Recv { buf, .. }) =
                            self.reqs.get_mut(rid).map(|r| &mut r.state)
                        {
                            buf.fill(data);
                        }
                    }
                    self.complete_recv(rid);
                    self.resume_stalled();
                }
            }
        }
    }

    fn on_header(&mut self, c: ConnId, peer: u32, h: Header) -> Result<(), String> {
        let env = Envelope {
            source: peer,
            tag: h.tag,
            context: h.context,
            len: h.len,
        };
        let set_rx = |core: &mut Self, rx: Rx| {
            if let Some(conn) = core.conns.get_mut(c) {
                conn.rx = rx;
            }
        };
        match h.kind {
            Kind::Heartbeat => {}
            Kind::Shell => {
                if h.len > SHELL_MAX {
                    return Err(format!("protocol error: a shell frame of {} bytes", h.len));
                }
                let f = ShellFrame {
                    peer,
                    conn: c,
                    what: h.id,
                    payload: vec![0u8; h.len as usize],
                };
                if h.len == 0 {
                    self.shell.push(f);
                } else {
                    let key = self.shell_partial.insert(f);
                    set_rx(
                        self,
                        Rx::Payload {
                            to: Sink::Shell(key),
                            len: h.len as usize,
                            have: 0,
                        },
                    );
                }
            }
            Kind::Addr => {
                let reads = self.conns.get(c).is_some_and(|x| x.io.reads_peer());
                if !reads {
                    return Err("protocol error: an address on a link that cannot read it".into());
                }
                if self.peer_addr.len() >= 1 << 20 {
                    return Err("protocol error: over a million addresses announced".into());
                }
                let addr = (u64::from(h.tag) << 32) | u64::from(h.context);
                self.peer_addr.insert((peer, h.id), addr);
            }
            Kind::Fin => {
                let id = h.id as usize;
                let held = match self.reqs.get_mut(id).map(|r| &mut r.state) {
                    Some(ReqState::Send { dest, held }) if *dest == peer && held.is_some() => {
                        held.take()
                    }
                    _ => {
                        return Err(format!(
                            "protocol error: a copy finished for unknown request {id}"
                        ))
                    }
                };
                if let Some(buf) = held {
                    if buf.as_slice().len() as u64 != h.len {
                        return Err(format!(
                            "protocol error: a copy of {} bytes finished, the message has {}",
                            h.len,
                            buf.as_slice().len()
                        ));
                    }
                }
                self.complete(id, Ok(Outcome::Sent));
            }
            Kind::Moved => {
                if let Some(conn) = self.conns.get_mut(c) {
                    conn.moved_in = true;
                }
            }
            Kind::Resume => {
                if let Some(conn) = self.conns.get_mut(c) {
                    if conn.gate.is_some() || conn.moved_in {
                        return Err("protocol error: a second resume on one link".into());
                    }
                    conn.gate = Some(h.len);
                }
            }
            Kind::Eager => {
                if h.len as usize > self.limits.eager.max(STAGE) && h.len > (1 << 30) {
                    return Err(format!(
                        "protocol error: an eager message of {} bytes",
                        h.len
                    ));
                }
                while let Some((_, rid)) = self.queues.arrive(&env) {
                    if self.too_small(rid, &env) {
                        continue;
                    }
                    self.matched(rid, &env);
                    if h.len == 0 {
                        self.complete_recv(rid);
                    } else {
                        set_rx(
                            self,
                            Rx::Payload {
                                to: Sink::Req(rid),
                                len: h.len as usize,
                                have: 0,
                            },
                        );
                    }
                    return Ok(());
                }
                let len = h.len as usize;
                if self.acct.unexpected_bytes > 0
                    && self.acct.unexpected_bytes + len > self.limits.unexpected
                {
                    let key = self.unexp.insert(Unex {
                        env,
                        body: UnexBody::Stalled { conn: c },
                        claimed: None,
                    });
                    self.queues.file(env, key);
                    self.acct.stalls += 1;
                    self.stalled.push(c);
                    set_rx(self, Rx::Stalled { key });
                    return Ok(());
                }
                self.hold(len);
                let key = self.unexp.insert(Unex {
                    env,
                    body: UnexBody::Eager {
                        data: vec![0u8; len],
                        complete: len == 0,
                    },
                    claimed: None,
                });
                self.queues.file(env, key);
                if len > 0 {
                    set_rx(
                        self,
                        Rx::Payload {
                            to: Sink::Unex(key),
                            len,
                            have: 0,
                        },
                    );
                }
            }
            Kind::Rts => {
                while let Some((_, rid)) = self.queues.arrive(&env) {
                    if self.too_small(rid, &env) {
                        continue;
                    }
                    self.matched(rid, &env);
                    self.clear_to_send(peer, h.id, rid, h.len);
                    return Ok(());
                }
                let key = self.unexp.insert(Unex {
                    env,
                    body: UnexBody::Rts { id: h.id },
                    claimed: None,
                });
                self.queues.file(env, key);
            }
            Kind::Cts => {
                let id = h.id as usize;
                let held = match self.reqs.get_mut(id).map(|r| &mut r.state) {
                    Some(ReqState::Send { dest, held }) if *dest == peer && held.is_some() => {
                        held.take()
                    }
                    _ => {
                        return Err(format!(
                            "protocol error: clear-to-send for unknown request {id}"
                        ))
                    }
                };
                let Some(buf) = held else { return Ok(()) };
                if buf.as_slice().len() as u64 != h.len {
                    return Err(format!(
                        "protocol error: clear-to-send for {} bytes, the message has {}",
                        h.len,
                        buf.as_slice().len()
                    ));
                }
                let mut d = Header::new(Kind::Data);
                d.id = h.id;
                d.len = h.len;
                let Some(&out_c) = self.links.get(&peer).and_then(|v| v.first()) else {
                    return Ok(());
                };
                self.queue(
                    out_c,
                    Out {
                        head: d.encode(),
                        body: Some(buf),
                        off: 0,
                        req: Some(id),
                    },
                );
            }
            Kind::Data => {
                let Some(rid) = self.expect.remove(&(peer, h.id)) else {
                    return Err(format!("protocol error: data for unknown request {}", h.id));
                };
                let want = match self.reqs.get(rid).map(|r| &r.state) {
                    Some(ReqState::Recv {
                        matched: Some(st), ..
                    }) => st.len as u64,
                    _ => return Err("protocol error: data for a receive that is gone".into()),
                };
                if want != h.len {
                    return Err(format!(
                        "protocol error: {} bytes of data for a message of {want}",
                        h.len
                    ));
                }
                if h.len == 0 {
                    self.complete_recv(rid);
                } else {
                    set_rx(
                        self,
                        Rx::Payload {
                            to: Sink::Req(rid),
                            len: h.len as usize,
                            have: 0,
                        },
                    );
                }
            }
        }
        Ok(())
    }

    fn hold(&mut self, len: usize) {
        self.acct.unexpected_bytes += len;
        self.acct.unexpected_peak = self.acct.unexpected_peak.max(self.acct.unexpected_bytes);
    }

    /// Room was made in the unexpected buffer: lets paused links go on, oldest first.
    fn resume_stalled(&mut self) {
        while let Some(&c) = self.stalled.first() {
            let Some(Conn {
                rx: Rx::Stalled { key },
                ..
            }) = self.conns.get(c)
            else {
                self.stalled.remove(0);
                continue;
            };
            let key = *key;
            let len = self.unexp.get(key).map_or(0, |u| u.env.len as usize);
            if self.acct.unexpected_bytes > 0
                && self.acct.unexpected_bytes + len > self.limits.unexpected
            {
                return;
            }
            self.stalled.remove(0);
            self.hold(len);
            if let Some(u) = self.unexp.get_mut(key) {
                u.body = UnexBody::Eager {
                    data: vec![0u8; len],
                    complete: len == 0,
                };
            }
            if let Some(conn) = self.conns.get_mut(c) {
                conn.rx = if len == 0 {
                    Rx::Header
                } else {
                    Rx::Payload {
                        to: Sink::Unex(key),
                        len,
                        have: 0,
                    }
                };
            }
            self.pump(c);
        }
    }

    /// Closes every connection to `peer` and fails every request that needs it.
    pub fn fail_peer(&mut self, peer: u32, reason: &str) {
        if self.lost.contains_key(&peer) {
            return;
        }
        tracing::debug!(rank = peer, %reason, "link lost");
        self.lost.insert(peer, reason.to_string());
        let conns = self.links.remove(&peer).unwrap_or_default();
        let mut failed: Vec<ReqId> = Vec::new();
        for c in &conns {
            let conn = self.conns.remove(*c);
            failed.extend(conn.out.iter().filter_map(|o| o.req));
            if let Rx::Payload {
                to: Sink::Req(rid), ..
            } = conn.rx
            {
                failed.push(rid);
            }
            self.stalled.retain(|s| s != c);
            self.gated.retain(|s| s != c);
            self.polled.retain(|s| s != c);
        }
        self.peer_addr.retain(|(p, _), _| *p != peer);
        // Messages from it that will never be whole.
        let partial: Vec<usize> = self
            .unexp
            .iter()
            .filter(|(_, u)| {
                u.env.source == peer && !matches!(u.body, UnexBody::Eager { complete: true, .. })
            })
            .map(|(k, _)| k)
            .collect();
        for k in partial {
            let u = self.unexp.remove(k);
            if let UnexBody::Eager { data, .. } = &u.body {
                self.acct.unexpected_bytes -= data.len();
            }
            if let Some(rid) = u.claimed {
                failed.push(rid);
            }
        }
        let unexp = &self.unexp;
        self.queues.retain_unexpected(|&k| unexp.contains(k));
        failed.extend(
            self.expect
                .iter()
                .filter(|((p, _), _)| *p == peer)
                .map(|(_, r)| *r),
        );
        self.expect.retain(|(p, _), _| *p != peer);
        failed.extend(self.reqs.iter().filter_map(|(id, r)| match &r.state {
            ReqState::Send { dest, .. } if *dest == peer => Some(id),
            _ => None,
        }));
        let everyone_gone = self.size > 1 && self.lost.len() as u32 >= self.size - 1;
        failed
            .extend(self.queues.remove_posted(|p| {
                p.source == Some(peer) || (p.source.is_none() && everyone_gone)
            }));
        failed.sort_unstable();
        failed.dedup();
        for rid in failed {
            if !self.is_done(rid) {
                let e = if everyone_gone && self.lost.len() > 1 {
                    Error::PeerLost {
                        rank: peer,
                        reason: format!("{reason} (and every other rank is gone)"),
                    }
                } else {
                    self.lost_error(peer)
                };
                self.complete(rid, Err(e));
            }
        }
        self.resume_stalled();
    }

    /// Housekeeping at `now`: heartbeats on quiet links, and peers that went silent
    /// for longer than the liveness limit are lost.
    pub fn tick(&mut self, now: Instant) {
        let beat = self.limits.liveness / 3;
        let quiet: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(_, c)| {
                !c.moved_out && c.out.is_empty() && now.saturating_duration_since(c.last_tx) >= beat
            })
            .map(|(id, _)| id)
            .collect();
        for c in quiet {
            self.queue(
                c,
                Out {
                    head: Header::new(Kind::Heartbeat).encode(),
                    body: None,
                    off: 0,
                    req: None,
                },
            );
        }
        let paused: Vec<u32> = self
            .stalled
            .iter()
            .filter_map(|&c| self.conn_peer(c))
            .collect();
        let silent: Vec<(u32, Duration)> = self
            .heard
            .iter()
            .filter(|(p, _)| self.has_link(**p) && !paused.contains(p))
            .map(|(p, t)| (*p, now.saturating_duration_since(*t)))
            .filter(|(_, d)| *d >= self.limits.liveness)
            .collect();
        for (p, d) in silent {
            self.fail_peer(
                p,
                &format!(
                    "it sent nothing for {:.1} s (not even a heartbeat; the limit is {} s): it is frozen or unreachable",
                    d.as_secs_f64(),
                    self.limits.liveness.as_secs()
                ),
            );
        }
    }

    /// Closes every connection (at exit: peers see the links end).
    pub fn close_all(&mut self) {
        self.polled.clear();
        self.conns.clear();
        self.links.clear();
        self.stalled.clear();
    }

    /// Whether everything queued for sending has been handed to the kernel.
    pub fn flushed(&self) -> bool {
        self.conns.iter().all(|(_, c)| c.out.is_empty())
    }

    /// Every connection, for the shell.
    pub fn conn_ids(&self) -> Vec<ConnId> {
        self.conns.iter().map(|(id, _)| id).collect()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::cell::RefCell;
    use std::rc::Rc;

    /// One direction of an in-memory link that holds at most `cap` bytes.
    type Buf = Rc<RefCell<VecDeque<u8>>>;

    /// An in-memory stream end: reads `rx`, writes `tx`; `WouldBlock` when empty/full.
    struct Pipe {
        rx: Buf,
        tx: Buf,
        cap: usize,
        /// Once set, an empty `rx` reads as the end of the stream.
        eof: Rc<std::cell::Cell<bool>>,
        /// Reads the peer's memory (the same process here): `Some(false)` says it
        /// can but the kernel refuses, as under a ptrace policy.
        mem: Option<bool>,
    }

    impl Read for Pipe {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            let mut q = self.rx.borrow_mut();
            if q.is_empty() && self.eof.get() {
                return Ok(0);
            }
            if q.is_empty() {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            let n = out.len().min(q.len());
            for (o, b) in out.iter_mut().zip(q.drain(..n)) {
                *o = b;
            }
            Ok(n)
        }
    }

    impl Write for Pipe {
        fn write(&mut self, data: &[u8]) -> io::Result<usize> {
            let mut q = self.tx.borrow_mut();
            let room = self.cap - q.len();
            if room == 0 {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            let n = data.len().min(room);
            q.extend(&data[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl LinkIo for Pipe {
        fn reads_peer(&self) -> bool {
            self.mem.is_some()
        }

        #[allow(unsafe_code)]
        fn read_peer(&mut self, addr: u64, dst: &mut [u8]) -> io::Result<()> {
            if self.mem != Some(true) {
                return Err(io::ErrorKind::PermissionDenied.into());
            }
            // SAFETY: the peer is a core of this test, whose send buffer at `addr`
            // lives until its request completes (after our `Fin`).
            unsafe {
                std::ptr::copy_nonoverlapping(addr as *const u8, dst.as_mut_ptr(), dst.len())
            };
            Ok(())
        }
    }

    fn pipe(cap: usize) -> (Pipe, Pipe, Buf) {
        let (a, b): (Buf, Buf) = Default::default();
        (
            Pipe {
                rx: a.clone(),
                tx: b.clone(),
                cap,
                eof: Default::default(),
                mem: None,
            },
            Pipe {
                rx: b,
                tx: a.clone(),
                cap,
                eof: Default::default(),
                mem: None,
            },
            a,
        )
    }

    /// Ranks 0 and 1 linked in memory; `to0` is what rank 0 will read.
    fn pair(limits: Limits, cap: usize) -> (Core<Pipe>, Core<Pipe>, Buf) {
        let now = Instant::now();
        let (p0, p1, to0) = pipe(cap);
        let mut a = Core::new(0, 2, limits, Instant::now());
        let mut b = Core::new(1, 2, limits, Instant::now());
        a.add_conn(1, p0, now, false);
        b.add_conn(0, p1, now, false);
        (a, b, to0)
    }

    /// Moves bytes both ways for a while (enough for every test's bytes).
    fn settle(a: &mut Core<Pipe>, b: &mut Core<Pipe>) {
        for _ in 0..2_000 {
            for c in a.conn_ids() {
                a.on_writable(c);
                a.on_readable(c);
            }
            for c in b.conn_ids() {
                b.on_writable(c);
                b.on_readable(c);
            }
        }
    }

    fn any() -> Pattern {
        Pattern {
            context: 0,
            source: None,
            tag: None,
        }
    }

    fn received(r: Option<Result<Outcome, Error>>) -> (Status, Vec<u8>) {
        match r {
            Some(Ok(Outcome::Received(st, Some(d)))) => (st, d),
            other => panic!("not a receive: {other:?}"),
        }
    }

    fn limits(eager: usize, unexpected: usize) -> Limits {
        Limits {
            eager,
            unexpected,
            liveness: Duration::from_secs(30),
        }
    }

    #[test]
    fn eager_and_rendezvous_messages_arrive_whole_and_in_order() {
        let (mut a, mut b, _) = pair(limits(100, 1 << 20), 64);
        let msgs: Vec<Vec<u8>> = [0usize, 1, 99, 100, 101, 5000]
            .iter()
            .map(|&n| (0..n).map(|i| i as u8).collect())
            .collect();
        let sends: Vec<ReqId> = msgs
            .iter()
            .map(|m| a.post_send(1, 3, 0, SendBuf::Owned(m.clone())))
            .collect();
        settle(&mut a, &mut b);
        // The large ones wait for their receives (rendezvous): not done yet.
        assert!(!a.is_done(sends[4]) && !a.is_done(sends[5]));
        for m in &msgs {
            let r = b.post_recv(any(), RecvBuf::Alloc(Vec::new()));
            settle(&mut a, &mut b);
            let (st, d) = received(b.take(r));
            assert_eq!((st.source, st.tag, st.len), (0, 3, m.len()));
            assert_eq!(&d, m);
        }
        assert!(sends
            .iter()
            .all(|&s| matches!(a.take(s), Some(Ok(Outcome::Sent)))));
        assert_eq!(b.accounting().unexpected_bytes, 0);
        // What one side wrote the other read: both count every byte, payloads and
        // headers, once.
        let payload: usize = msgs.iter().map(Vec::len).sum();
        let (ma, mb) = (a.accounting().moved, b.accounting().moved);
        assert_eq!(ma, mb);
        assert!(ma as usize > payload && (ma as usize) < payload + 64 * HEADER);
    }

    #[test]
    fn a_synchronous_send_completes_only_once_the_receiver_matched_it() {
        let (mut a, mut b, _) = pair(limits(100, 1 << 20), 64);
        let small = a.post_ssend(1, 4, 0, SendBuf::Owned(vec![7u8; 3]));
        let empty = a.post_ssend(1, 5, 0, SendBuf::Owned(Vec::new()));
        let plain = a.post_send(1, 4, 0, SendBuf::Owned(vec![8u8; 3]));
        settle(&mut a, &mut b);
        // The standard one is out; the synchronous ones wait, however small.
        assert!(a.is_done(plain));
        assert!(!a.is_done(small) && !a.is_done(empty));
        assert_eq!(b.iprobe(&any()).ok().flatten().map(|s| s.len), Some(3));
        let r = b.post_recv(
            Pattern {
                tag: Some(5),
                ..any()
            },
            RecvBuf::Alloc(Vec::new()),
        );
        settle(&mut a, &mut b);
        assert_eq!(received(b.take(r)).0.len, 0);
        assert!(a.is_done(empty) && !a.is_done(small));
        for want in [vec![7u8; 3], vec![8u8; 3]] {
            let r = b.post_recv(any(), RecvBuf::Alloc(Vec::new()));
            settle(&mut a, &mut b);
            assert_eq!(received(b.take(r)).1, want, "order kept per tag");
        }
        assert!(matches!(a.take(small), Some(Ok(Outcome::Sent))));
    }

    #[test]
    fn a_large_message_lands_in_the_posted_buffer() {
        let (mut a, mut b, _) = pair(limits(16, 1 << 20), 1 << 12);
        let r = b.post_recv(any(), RecvBuf::Owned(vec![0u8; 100_000]));
        let data: Vec<u8> = (0..70_000).map(|i| (i * 7) as u8).collect();
        let s = a.post_send(1, 1, 0, SendBuf::Owned(data.clone()));
        settle(&mut a, &mut b);
        let (st, buf) = received(b.take(r));
        assert_eq!(st.len, 70_000);
        assert_eq!(buf.len(), 100_000, "the caller's own buffer comes back");
        assert_eq!(&buf[..70_000], &data[..]);
        assert!(a.take(s).is_some());
        assert_eq!(b.accounting().unexpected_peak, 0, "nothing was buffered");
    }

    /// Over a link that reads the peer's memory, a large message is copied from the
    /// sender's buffer (`Addr`, then `Fin`: no `Data` on the link); where the read is
    /// refused, it streams as on a socket. Sent before and after its receive is posted.
    #[test]
    fn a_large_message_is_copied_once_from_the_senders_memory_or_streamed_if_refused() {
        for (mem, copies) in [(true, 2u64), (false, 0)] {
            let now = Instant::now();
            let (mut p0, mut p1, _) = pipe(1 << 12);
            p0.mem = Some(mem);
            p1.mem = Some(mem);
            let mut a = Core::new(0, 2, limits(16, 1 << 20), Instant::now());
            let mut b = Core::new(1, 2, limits(16, 1 << 20), Instant::now());
            a.add_conn(1, p0, now, false);
            b.add_conn(0, p1, now, false);
            let data: Vec<u8> = (0..70_000).map(|i| (i * 7) as u8).collect();
            let posted = b.post_recv(any(), RecvBuf::Owned(vec![0u8; 100_000]));
            let s1 = a.post_send(1, 1, 0, SendBuf::Owned(data.clone()));
            let s2 = a.post_ssend(1, 2, 0, SendBuf::Owned(data[..30_000].to_vec()));
            settle(&mut a, &mut b);
            assert!(a.take(s1).is_some_and(|r| r.is_ok()));
            assert!(!a.is_done(s2), "a synchronous send waits for its receive");
            let (st, buf) = received(b.take(posted));
            assert_eq!(st.len, 70_000);
            assert_eq!(&buf[..70_000], &data[..]);
            let late = b.post_recv(any(), RecvBuf::Alloc(Vec::new()));
            settle(&mut a, &mut b);
            let (st, buf) = received(b.take(late));
            assert_eq!((st.tag, buf), (2, data[..30_000].to_vec()));
            assert!(a.take(s2).is_some_and(|r| r.is_ok()));
            assert_eq!(b.accounting().single_copies, copies, "reads allowed: {mem}");
        }
    }

    #[test]
    fn a_full_unexpected_buffer_pauses_the_link_and_loses_nothing() {
        // 10 messages of 100 bytes against a 250-byte bound.
        let (mut a, mut b, _) = pair(limits(100, 250), 128);
        let sends: Vec<ReqId> = (0..10u8)
            .map(|i| a.post_send(1, 0, 0, SendBuf::Owned(vec![i; 100])))
            .collect();
        settle(&mut a, &mut b);
        let acct = b.accounting();
        assert!(acct.unexpected_bytes <= 250, "{acct:?}");
        assert!(acct.stalls > 0);
        assert!(!a.is_done(sends[9]), "the sender waits");
        for i in 0..10u8 {
            let r = b.post_recv(any(), RecvBuf::Alloc(Vec::new()));
            settle(&mut a, &mut b);
            assert_eq!(received(b.take(r)).1, vec![i; 100]);
        }
        assert!(b.accounting().unexpected_peak <= 250);
        assert!(sends.iter().all(|&s| a.is_done(s)));
    }

    /// MPI_Ssend to oneself completes only once a receive takes the message.
    #[test]
    fn a_synchronous_send_to_ourselves_waits_for_our_receive() {
        let (mut a, _b, _) = pair(limits(100, 1 << 20), 1 << 12);
        let s = a.post_ssend(0, 3, 0, SendBuf::Owned(vec![5; 10]));
        assert!(!a.is_done(s), "completed with no receive posted");
        let r = a.post_recv(any(), RecvBuf::Alloc(Vec::new()));
        let (st, d) = received(a.take(r));
        assert_eq!((st.source, st.tag, d), (0, 3, vec![5; 10]));
        assert!(matches!(a.take(s), Some(Ok(Outcome::Sent))));
        // With the receive posted first, at once.
        let r = a.post_recv(any(), RecvBuf::Alloc(Vec::new()));
        let s = a.post_ssend(0, 4, 0, SendBuf::Owned(vec![6; 3]));
        assert!(matches!(a.take(s), Some(Ok(Outcome::Sent))));
        assert_eq!(received(a.take(r)).1, vec![6; 3]);
    }

    #[test]
    fn a_short_buffer_fails_and_the_message_stays() {
        let (mut a, mut b, _) = pair(limits(100, 1 << 20), 1 << 12);
        a.post_send(1, 9, 0, SendBuf::Owned(vec![5; 50]));
        settle(&mut a, &mut b);
        let r = b.post_recv(any(), RecvBuf::Owned(vec![0; 10]));
        assert!(matches!(
            b.take(r),
            Some(Err(Error::Truncated {
                len: 50,
                capacity: 10,
                ..
            }))
        ));
        assert_eq!(b.iprobe(&any()).unwrap().unwrap().len, 50);
        let r = b.post_recv(any(), RecvBuf::Owned(vec![0; 64]));
        assert_eq!(&received(b.take(r)).1[..50], &[5; 50]);
    }

    /// What a matched probe takes no later receive can match, eager or rendezvous,
    /// and its request gets the bytes.
    #[test]
    fn a_matched_probe_takes_the_message_out_of_matching() {
        let (mut a, mut b, _) = pair(limits(100, 1 << 20), 1 << 12);
        assert!(matches!(b.improbe(&any()), Ok(None)));
        let big: Vec<u8> = (0..5000).map(|i| i as u8).collect();
        let s1 = a.post_send(1, 1, 0, SendBuf::Owned(vec![1; 10]));
        let s2 = a.post_send(1, 2, 0, SendBuf::Owned(big.clone()));
        let s3 = a.post_send(1, 1, 0, SendBuf::Owned(vec![3; 7]));
        settle(&mut a, &mut b);
        let (st, m1) = b.improbe(&any()).unwrap().unwrap();
        assert_eq!((st.source, st.tag, st.len), (0, 1, 10));
        // A receive posted now takes the next message, not the probed one.
        let r = b.post_recv(
            Pattern {
                tag: Some(1),
                ..any()
            },
            RecvBuf::Alloc(Vec::new()),
        );
        assert_eq!(received(b.take(r)).1, vec![3; 7]);
        assert_eq!(received(b.take(m1)).1, vec![1; 10]);
        // The rendezvous one: announced only, its data comes once probed.
        assert!(!a.is_done(s2));
        let (st, m2) = b.improbe(&any()).unwrap().unwrap();
        assert_eq!(st.len, 5000);
        settle(&mut a, &mut b);
        assert_eq!(received(b.take(m2)).1, big);
        assert!([s1, s2, s3].iter().all(|&s| a.is_done(s)));
        assert!(matches!(b.improbe(&any()), Ok(None)));
        assert_eq!(b.accounting().unexpected_bytes, 0);
    }

    #[test]
    fn cancel_takes_back_an_unmatched_receive_only() {
        let (mut a, mut b, _) = pair(limits(100, 1 << 20), 1 << 12);
        let r = b.post_recv(any(), RecvBuf::Owned(vec![1, 2]));
        assert!(b.cancel(r));
        assert!(matches!(b.take(r), Some(Ok(Outcome::Cancelled(Some(v)))) if v == [1, 2]));
        let r = b.post_recv(any(), RecvBuf::Alloc(Vec::new()));
        a.post_send(1, 0, 0, SendBuf::Owned(vec![3]));
        settle(&mut a, &mut b);
        assert!(!b.cancel(r));
        assert_eq!(received(b.take(r)).1, vec![3]);
    }

    /// Two ranks that dialled each other at once have two links; a peer leaving
    /// closes both, in any order. The end of one while the other still carries its
    /// last message lost that message, and failed the receive waiting for it.
    #[test]
    fn a_peer_closing_one_of_two_links_loses_nothing_sent_on_the_other() {
        let now = Instant::now();
        let (p0, p1, _) = pipe(1 << 12);
        let (q0, q1, _) = pipe(1 << 12);
        let (p_end, q_end) = (p0.eof.clone(), q0.eof.clone());
        let mut a = Core::new(0, 2, limits(100, 1 << 20), Instant::now());
        let mut b = Core::new(1, 2, limits(100, 1 << 20), Instant::now());
        let q = a.add_conn(1, q0, now, false);
        let p = a.add_conn(1, p0, now, false);
        b.add_conn(0, p1, now, false); // b's first link: its sends go on p
        b.add_conn(0, q1, now, false);
        let s = b.post_send(0, 5, 0, SendBuf::Owned(vec![7; 50]));
        for c in b.conn_ids() {
            b.on_writable(c);
        }
        assert!(matches!(b.take(s), Some(Ok(Outcome::Sent))));
        // b leaves: a sees q end before it reads what waits on p.
        q_end.set(true);
        a.on_readable(q);
        assert_eq!(a.lost(1), None);
        let r = a.post_recv(any(), RecvBuf::Alloc(Vec::new()));
        a.on_readable(p);
        let (st, d) = received(a.take(r));
        assert_eq!((st.source, st.tag, d), (1, 5, vec![7; 50]));
        // The last link ends: now b is gone, and a receive from it says so.
        p_end.set(true);
        a.on_readable(p);
        let from_b = Pattern {
            source: Some(1),
            ..any()
        };
        let r = a.post_recv(from_b, RecvBuf::Alloc(Vec::new()));
        match a.take(r) {
            Some(Err(Error::PeerLost { rank: 1, reason })) => {
                assert!(reason.contains("closed its link"), "{reason}")
            }
            other => panic!("{other:?}"),
        }
    }

    /// A peer's last message and the end of its stream come in one readiness (its
    /// data, then its close, before we read): both are handled in that one turn,
    /// since the poller reports no further readiness for the end.
    #[test]
    fn a_last_message_and_the_close_in_one_readiness_are_both_read() {
        let now = Instant::now();
        let (p0, p1, _) = pipe(1 << 16);
        let end = p0.eof.clone();
        let mut a = Core::new(0, 2, limits(100, 1 << 20), Instant::now());
        let mut b = Core::new(1, 2, limits(100, 1 << 20), Instant::now());
        let c = a.add_conn(1, p0, now, false);
        let d = b.add_conn(0, p1, now, false);
        let s = b.post_send(0, 5, 0, SendBuf::Owned(vec![7; 50]));
        b.on_writable(d);
        assert!(matches!(b.take(s), Some(Ok(Outcome::Sent))));
        end.set(true);
        let r = a.post_recv(any(), RecvBuf::Alloc(Vec::new()));
        a.on_read_closed(c);
        let (st, data) = received(a.take(r));
        assert_eq!((st.source, st.tag, data), (1, 5, vec![7; 50]));
        match a.lost(1) {
            Some(reason) => assert!(reason.contains("closed its link"), "{reason}"),
            None => panic!("the end of the stream was left unread"),
        }
    }

    /// Relay first, then upgrade: a direct link comes up beside the relayed one, on
    /// each side at its own time. Messages sent before, across and after the move
    /// (eager and rendezvous) are received in the order sent, whichever link the
    /// receiver reads first, and the relayed link is closed on both sides.
    #[test]
    fn a_relayed_link_moves_to_a_direct_one_without_reordering() {
        let msg = |from: u32, i: u32| -> Vec<u8> {
            let len = if i % 7 == 3 {
                500
            } else {
                8 + (i as usize % 50)
            };
            let mut m = vec![from as u8; len];
            m[..4].copy_from_slice(&i.to_le_bytes());
            m
        };
        for read_new_first in [false, true] {
            let now = Instant::now();
            // A small relayed pipe, so that part of what precedes the move is still
            // queued on it when the direct link takes over.
            let (r0, r1, _) = pipe(300);
            let (d0, d1, _) = pipe(1 << 16);
            let mut a = Core::new(0, 2, limits(100, 1 << 20), Instant::now());
            let mut b = Core::new(1, 2, limits(100, 1 << 20), Instant::now());
            a.add_conn(1, r0, now, true);
            b.add_conn(0, r1, now, true);
            let mut sends = Vec::new();
            for i in 0..20 {
                sends.push(a.post_send(1, i % 2, 0, SendBuf::Owned(msg(0, i))));
                sends.push(b.post_send(0, i % 2, 0, SendBuf::Owned(msg(1, i))));
            }
            let da = a.add_conn(1, d0, now, false);
            for i in 20..40 {
                sends.push(a.post_send(1, i % 2, 0, SendBuf::Owned(msg(0, i))));
            }
            let db = b.add_conn(0, d1, now, false);
            for i in 20..40 {
                sends.push(b.post_send(0, i % 2, 0, SendBuf::Owned(msg(1, i))));
            }
            let ra: Vec<ReqId> = (0..40)
                .map(|_| a.post_recv(any(), RecvBuf::Alloc(Vec::new())))
                .collect();
            let rb: Vec<ReqId> = (0..40)
                .map(|_| b.post_recv(any(), RecvBuf::Alloc(Vec::new())))
                .collect();
            if read_new_first {
                for _ in 0..10 {
                    a.on_readable(da);
                    b.on_readable(db);
                }
                assert!(a.take(ra[0]).is_none() && b.take(rb[0]).is_none());
            }
            settle(&mut a, &mut b);
            for (core, recvs, from) in [(&mut a, &ra, 1u32), (&mut b, &rb, 0)] {
                let got: Vec<u32> = recvs
                    .iter()
                    .map(|&r| {
                        let (st, d) = received(core.take(r));
                        assert_eq!(st.source, from);
                        let i = u32::from_le_bytes([d[0], d[1], d[2], d[3]]);
                        assert_eq!(d, msg(from, i), "message {i} damaged");
                        i
                    })
                    .collect();
                assert_eq!(
                    got,
                    (0..40).collect::<Vec<_>>(),
                    "read_new_first {read_new_first}"
                );
                let acct = core.accounting();
                assert_eq!((acct.upgrades, acct.conns), (1, 1), "{acct:?}");
            }
            for s in sends {
                assert!(
                    matches!(a.take(s).or_else(|| b.take(s)), Some(Ok(Outcome::Sent))),
                    "send {s} not done"
                );
            }
        }
    }

    #[test]
    fn a_malformed_header_loses_that_peer_naming_it() {
        let (mut a, mut b, to0) = pair(limits(100, 1 << 20), 1 << 12);
        let r = a.post_recv(any(), RecvBuf::Alloc(Vec::new()));
        let s = a.post_send(1, 0, 0, SendBuf::Owned(vec![0; 1000]));
        // Rank 1 "sends" garbage: an unknown kind.
        let mut h = Header::new(Kind::Eager).encode();
        h[0] = 77;
        to0.borrow_mut().extend(h);
        a.on_readable(0);
        for id in [r, s] {
            match a.take(id) {
                Some(Err(Error::PeerLost { rank: 1, reason })) => {
                    assert!(reason.contains("unknown frame kind 77"), "{reason}")
                }
                other => panic!("{other:?}"),
            }
        }
        // Later calls fail at once.
        let s = a.post_send(1, 0, 0, SendBuf::Owned(vec![1]));
        assert!(matches!(
            a.take(s),
            Some(Err(Error::PeerLost { rank: 1, .. }))
        ));
        let _ = &mut b;
    }

    #[test]
    fn an_absurd_length_and_a_stray_clear_to_send_are_protocol_errors() {
        for bad in [
            {
                let mut h = Header::new(Kind::Rts);
                h.len = u64::MAX;
                h.encode()
            },
            {
                let mut h = Header::new(Kind::Cts);
                h.id = 12345;
                h.encode()
            },
            {
                let mut h = Header::new(Kind::Data);
                h.id = 1;
                h.len = 5;
                h.encode()
            },
        ] {
            let (mut a, _b, to0) = pair(limits(100, 1 << 20), 1 << 12);
            to0.borrow_mut().extend(bad);
            a.on_readable(0);
            assert!(
                a.lost(1).is_some_and(|r| r.contains("protocol error")),
                "{:?}",
                a.lost(1)
            );
        }
    }

    #[test]
    fn silence_past_the_liveness_time_loses_the_peer_and_heartbeats_prevent_it() {
        let mut l = limits(100, 1 << 20);
        l.liveness = Duration::from_secs(3);
        let (mut a, mut b, _) = pair(l, 1 << 12);
        let t0 = Instant::now();
        // Both tick every second: heartbeats keep the link alive.
        for s in 1..=10 {
            let now = t0 + Duration::from_secs(s);
            a.tick(now);
            b.tick(now);
            // What each read counts as heard "now" in real time; move it to `now`.
            for c in a.conn_ids() {
                a.on_readable(c);
            }
            for c in b.conn_ids() {
                b.on_readable(c);
            }
            a.heard.values_mut().for_each(|t| *t = (*t).max(now));
            b.heard.values_mut().for_each(|t| *t = (*t).max(now));
        }
        assert!(a.lost(1).is_none());
        // Rank 1 goes silent: rank 0 gives up after the liveness time.
        a.tick(t0 + Duration::from_secs(14));
        assert!(
            a.lost(1).is_some_and(|r| r.contains("sent nothing for")),
            "{:?}",
            a.lost(1)
        );
    }
}
