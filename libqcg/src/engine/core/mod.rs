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
use super::shm::{share_geometry, SHARE_MIN};
use super::wire::{Header, Kind, HEADER};
use crate::error::Error;
use slab::Slab;
use std::collections::VecDeque;
use std::hash::{BuildHasherDefault, Hasher};
use std::io::{self, IoSlice, Read, Write};
use std::time::{Duration, Instant};

/// Hashes ranks, request ids and their pairs in a few instructions (the maps below
/// are read on every message; SipHash's protection against chosen keys buys
/// nothing for keys a peer does not choose freely, and a peer's keys are bounded).
#[derive(Default, Clone, Copy)]
pub struct RankHasher(u64);

impl Hasher for RankHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// A map keyed by ranks or request ids.
pub type HashMap<K, V> = std::collections::HashMap<K, V, BuildHasherDefault<RankHasher>>;

/// A request's handle inside the engine.
pub type ReqId = usize;
/// A connection's handle inside the engine.
pub type ConnId = usize;

/// Longest first part of a lent message ([`SendBuf::Lent`]): its length travels in
/// the top bits of a `Lend` frame's length, under the 2³⁶ a frame may announce.
const LEND_HEAD: usize = 64;

/// Bytes staged per link for headers and small payloads.
const STAGE: usize = 32 * 1024;
/// Payloads at least this long are read straight into their buffer.
const DIRECT: usize = 8 * 1024;
/// Frames gathered into one vectored write.
const IOVECS: usize = 64;

/// What a link's stream offers besides reading and writing without blocking.
pub trait LinkIo: Read + Write {
    /// Writes a frame, `head` then `body`: the bytes taken, as `write_vectored`.
    fn write_frame(&mut self, head: &[u8; HEADER], body: &[u8]) -> std::io::Result<usize> {
        self.write_vectored(&[IoSlice::new(head), IoSlice::new(body)])
    }
    /// The poller does not watch it: the shell asks it each turn ([`Core::poll_links`]).
    fn polled(&self) -> bool {
        false
    }
    /// For a polled link: (something to read or the end, room to write).
    fn ready(&self) -> (bool, bool) {
        (false, false)
    }
    /// For a polled link: asks the peer to wake us (or stops asking) when it writes
    /// to us or makes room, because we sleep.
    fn set_sleeping(&self, _on: bool) {}
    /// Whether the peer's memory can be read from here (large messages then cross
    /// in one copy: `Addr`, then `Fin` instead of `Cts` and `Data`).
    fn reads_peer(&self) -> bool {
        false
    }
    /// Copies the peer's memory at `addr` into `dst`.
    fn read_peer(&mut self, _addr: u64, _dst: &mut [u8]) -> io::Result<()> {
        Err(io::ErrorKind::Unsupported.into())
    }
    /// Lends memory of ours to the peer (a link that reads the peer's memory):
    /// the lend's number (below 2³⁰, never 0), or `None` when it cannot now. The
    /// peer's copy counts only if the lend still stands after it
    /// ([`LinkIo::peer_lends`]).
    fn lend(&mut self) -> Option<u64> {
        None
    }
    /// Ends our lend `n` (done with, or taken back): from now on the peer's copy
    /// of it fails its check, and the memory is ours again.
    fn take_back(&mut self, _n: u64) {}
    /// Whether the peer's lend `n` still stands (asked after copying it).
    fn peer_lends(&self, _n: u64) -> bool {
        false
    }
    /// Whether a large copy from the peer's memory may be shared with the peer,
    /// which writes part of it into ours (`Share`; see `shm`'s "Sharing a large
    /// copy").
    fn shares(&self) -> bool {
        false
    }
    /// Opens our share slot for the peer's message `id`.
    fn open_share(&mut self, _id: u32) {}
    /// Takes the next of the `chunks` chunks of message `id`: in our slot
    /// (`ours`: we receive it) or in the peer's (we send it).
    fn claim(&mut self, _ours: bool, _id: u32, _chunks: u32) -> io::Result<Option<u32>> {
        Ok(None)
    }
    /// Marks chunk `i` of the peer's message written into its memory, or refused.
    fn helped(&mut self, _i: u32, _ok: bool) {}
    /// The chunks the peer wrote into our memory, and those it could not.
    fn share_marks(&self) -> (u64, u64) {
        (0, 0)
    }
    /// Writes `src` into the peer's memory at `addr`.
    fn write_peer(&mut self, _addr: u64, _src: &[u8]) -> io::Result<()> {
        Err(io::ErrorKind::Unsupported.into())
    }
    /// Whether the peer's process still runs, as far as we can tell at once.
    fn peer_alive(&self) -> bool {
        true
    }
    /// Bytes the stream took but has not yet handed on (a sealed link's last record):
    /// pushed by [`Write::flush`], which the core calls when its own queue is empty.
    fn pending(&self) -> bool {
        false
    }
    /// Where the other end is (for a relayed link: the relay proxy's address).
    fn remote(&self) -> Option<String> {
        None
    }
    /// Reads a message's bytes into `dst`, the rest of its receive buffer: as
    /// [`Read::read`], but a sealed link opens its records right there
    /// ([`crate::seal::Sealed::read_in_place`]), and then the next call must be
    /// this one with the rest of the same buffer.
    fn read_direct(&mut self, dst: &mut [u8]) -> io::Result<usize> {
        self.read(dst)
    }
    /// Whether [`LinkIo::read_direct`] may leave part of a record in `dst` that the
    /// next read must find at the same address (a sealed link opens its records in
    /// place): a buffer that may be taken away midway (a split receive, see
    /// [`Split`]) is then read through the link's own buffer instead.
    fn reads_in_place(&self) -> bool {
        false
    }
    /// For a polled link that carries records (shared memory): what the next one
    /// is, looked at in place. A small message is one record; the core matches it
    /// from there and copies its payload straight into the receive buffer
    /// ([`LinkIo::take_frame`]), as Open MPI's ob1 does from a fast box.
    fn peek_frame(&self) -> Peek {
        Peek::Other
    }
    /// Copies bytes `skip..skip + dst.len()` of the record [`LinkIo::peek_frame`]
    /// gave into `dst`, and frees the record.
    fn take_frame(&mut self, _skip: usize, _dst: &mut [u8]) {}
}

/// What a polled link's next record is ([`LinkIo::peek_frame`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Peek {
    /// Nothing to read.
    Nothing,
    /// Something the usual reading handles (part of a stream, the end, an error).
    Other,
    /// A record whose first bytes are a frame header, whole in one place.
    Frame {
        /// The header's bytes.
        head: [u8; HEADER],
        /// The record's length (the header included).
        len: usize,
    },
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
    /// Shared with other sends of the same bytes (a collective's flit going to
    /// several children): copied once, held until the last of them is done.
    Shared(std::sync::Arc<Vec<u8>>),
    /// A message in two parts, `head` ours and `body` lent by the caller. Over a
    /// link that reads the peer's memory it is lent on (`lend`: the lend's number,
    /// see [`LinkIo::lend`]) and the receiver copies both parts from where they lie;
    /// elsewhere, or when the receiver asks for the data, the two are copied into
    /// one buffer first (`SendBuf::contiguous`). Detaching its request takes the
    /// lend back at once ([`Core::detach`]): the caller may then reuse the body.
    Lent {
        /// The first bytes (a collective's call signature).
        head: Vec<u8>,
        /// The rest, the caller's.
        body: RawBuf,
        /// The lend's number, once lent.
        lend: Option<u64>,
    },
    /// A lent message taken back: `len` bytes that are no longer there.
    Withdrawn(usize),
    /// A one-part buffer announced to a receiver that copies it from here, under a
    /// lend number: the lend ends when the send does, and when the link goes (the
    /// peer declared lost may still be alive), so that such a straggler's copy of
    /// memory freed since fails its check. Detaching the request does not take it
    /// back: the buffer is the request's, and the message still goes.
    Checked(Box<SendBuf>, u64),
}

impl SendBuf {
    /// The bytes of a one-part buffer (nothing for [`SendBuf::Lent`] and
    /// [`SendBuf::Withdrawn`], which never reach a frame: see
    /// [`SendBuf::contiguous`]).
    fn as_slice(&self) -> &[u8] {
        match self {
            SendBuf::Owned(v) => v,
            SendBuf::Raw(r) => r.as_slice(),
            SendBuf::Shared(v) => v,
            SendBuf::Checked(b, _) => b.as_slice(),
            SendBuf::Lent { .. } | SendBuf::Withdrawn(_) => &[],
        }
    }

    /// The message's length.
    fn len(&self) -> usize {
        match self {
            SendBuf::Lent { head, body, .. } => head.len() + body.as_slice().len(),
            SendBuf::Withdrawn(n) => *n,
            SendBuf::Checked(b, _) => b.len(),
            other => other.as_slice().len(),
        }
    }

    /// The same bytes in one buffer (a copy of a lent message's two parts, whose
    /// lend the caller has ended).
    fn contiguous(self) -> SendBuf {
        match self {
            SendBuf::Lent { mut head, body, .. } => {
                head.extend_from_slice(body.as_slice());
                SendBuf::Owned(head)
            }
            SendBuf::Checked(b, _) => *b,
            other => other,
        }
    }

    /// The lend's number of a message announced under one.
    fn lend(&self) -> Option<u64> {
        match self {
            SendBuf::Lent { lend, .. } => *lend,
            SendBuf::Checked(_, n) => Some(*n),
            _ => None,
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
    /// A message in two parts: its first bytes into a small buffer of ours, the rest
    /// into the caller's lent buffer (a collective's signature, then its data).
    Split(Split),
}

/// The buffers of a [`RecvBuf::Split`].
#[derive(Debug)]
pub struct Split {
    head: Vec<u8>,
    body: Option<RawBuf>,
    /// The message's length once matched.
    len: usize,
    /// Where a message that does not go straight into both parts lands whole.
    whole: Vec<u8>,
}

impl Split {
    /// A message of `head` bytes then `body.len()` bytes: the head kept here, the
    /// rest written into `body`.
    pub fn new(head: usize, body: RawBuf) -> Split {
        Split {
            head: vec![0; head],
            body: Some(body),
            len: 0,
            whole: Vec::new(),
        }
    }

    /// The two parts to write a message of `len` bytes into, when it fits them
    /// exactly and the caller still lends its buffer.
    fn parts(&mut self, len: usize) -> Option<(&mut [u8], &mut [u8])> {
        if !self.fits_len(len) {
            return None;
        }
        let body = self.body.as_mut()?;
        Some((&mut self.head[..], body.as_mut_slice()))
    }

    /// Whether a message of `len` bytes goes straight into the two parts.
    fn fits_len(&self, len: usize) -> bool {
        self.whole.is_empty()
            && self
                .body
                .as_ref()
                .is_some_and(|b| len == self.head.len() + b.len())
    }

    /// Whether the matched message goes straight into the two parts.
    fn fits(&self) -> bool {
        self.fits_len(self.len)
    }

    /// The caller no longer lends its buffer (a detached request): what still
    /// arrives lands whole, here.
    fn disown(&mut self) {
        self.body = None;
    }
}

impl RecvBuf {
    fn capacity(&self) -> Option<usize> {
        match self {
            RecvBuf::Alloc(_) => None,
            RecvBuf::Owned(v) => Some(v.len()),
            RecvBuf::Raw(r) => Some(r.len()),
            // Any length: one that does not fit the two parts lands whole, for its
            // owner to say what is wrong with it.
            RecvBuf::Split(_) => None,
        }
    }

    fn prepare(&mut self, len: usize) {
        match self {
            RecvBuf::Alloc(v) => *v = vec![0u8; len],
            RecvBuf::Split(s) => s.len = len,
            _ => {}
        }
    }

    /// The whole message's bytes, to write into. A split buffer then lands the
    /// message whole in a buffer of its own (its owner moves it into place).
    fn slice(&mut self) -> &mut [u8] {
        match self {
            RecvBuf::Alloc(v) | RecvBuf::Owned(v) => v,
            RecvBuf::Raw(r) => r.as_mut_slice(),
            RecvBuf::Split(s) => {
                if s.whole.len() != s.len {
                    s.whole = vec![0u8; s.len];
                }
                &mut s.whole
            }
        }
    }

    /// Where the message's bytes `at..end` go, or the first of them that lie
    /// together (a split buffer's head and body are apart): the caller writes what
    /// it gets and asks again for the rest.
    fn window(&mut self, at: usize, end: usize) -> &mut [u8] {
        if !matches!(self, RecvBuf::Split(s) if s.fits()) {
            return &mut self.slice()[at..end];
        }
        match self {
            RecvBuf::Split(s) => {
                let h = s.head.len();
                match s.body.as_mut() {
                    Some(body) if at >= h => &mut body.as_mut_slice()[at - h..end - h],
                    _ => &mut s.head[at..end.min(h)],
                }
            }
            other => &mut other.slice()[at..end],
        }
    }

    /// The two parts of a split buffer to write a message of `len` bytes straight
    /// into, if it is one and they fit.
    fn parts(&mut self, len: usize) -> Option<(&mut [u8], &mut [u8])> {
        match self {
            RecvBuf::Split(s) => s.parts(len),
            _ => None,
        }
    }

    /// Takes a complete message: moved in when this is `Alloc`, copied otherwise.
    fn fill(&mut self, data: Vec<u8>) {
        match self {
            RecvBuf::Alloc(v) => *v = data,
            RecvBuf::Split(s) => match s.parts(data.len()) {
                Some((head, body)) => {
                    let (h, b) = data.split_at(head.len());
                    head.copy_from_slice(h);
                    body.copy_from_slice(b);
                }
                None => s.whole = data,
            },
            other => other.slice()[..data.len()].copy_from_slice(&data),
        }
    }

    /// A detached request stops writing into memory its owner lent.
    fn disown(&mut self) {
        if let RecvBuf::Split(s) = self {
            s.disown();
        }
    }

    /// The received bytes the engine holds: for a split buffer, the whole message
    /// when it landed whole, else only its head (the rest is in the caller's buffer;
    /// the status's length tells which).
    fn into_data(self) -> Option<Vec<u8>> {
        match self {
            RecvBuf::Alloc(v) | RecvBuf::Owned(v) => Some(v),
            RecvBuf::Raw(_) => None,
            RecvBuf::Split(s) if s.whole.is_empty() && s.len > 0 => Some(s.head),
            RecvBuf::Split(s) => Some(s.whole),
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
    /// A shell frame was read here and the shell has not handled it yet: nothing
    /// more is read (what follows, such as the end of the link, may depend on it).
    shell_hold: bool,
    /// When we last read something here (folded into the peer's `heard` at each
    /// tick: a read costs no map update).
    heard: Instant,
    /// Ordered frames handled from here (see `Core::recv_count`).
    handled: u64,
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
    /// Chunks of those that the sender wrote into our memory itself (a shared
    /// copy).
    pub shared_chunks: u64,
}

/// Every link and request of one process.
pub struct Core<C> {
    me: u32,
    size: u32,
    limits: Limits,
    conns: Slab<Conn<C>>,
    /// Connections per peer; the first carries what we send.
    links: HashMap<u32, Vec<ConnId>>,
    /// When we last heard from each peer (as of the last tick, or its link's
    /// making; see `Conn::heard`).
    heard: HashMap<u32, Instant>,
    lost: HashMap<u32, String>,
    /// Peers a handshake is under way with (the dialer's, as of its last step): a
    /// link to them may still come up (see `closed_by_peer`).
    handshaking: std::collections::HashSet<u32>,
    /// Peers whose last link closed while a handshake with them was under way, with
    /// why: lost once it ends without a link (see `set_handshaking`).
    closing: HashMap<u32, String>,
    reqs: Slab<Req>,
    queues: Queues<ReqId, usize>,
    unexp: Slab<Unex>,
    /// Rendezvous receives waiting for their data, by (peer, sender's id).
    expect: HashMap<(u32, u32), ReqId>,
    stalled: Vec<ConnId>,
    /// Ordered frames (`Eager`, `Rts`) sent to / handled from each peer: a link a
    /// peer moved to waits until the count reaches its `Resume`.
    /// By rank (a vector: every eager send counts one).
    sent_seq: Vec<u64>,
    /// (Those handled on connections since closed: see `Core::recv_count`.)
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
    /// Of those, the messages lent in two parts (`Lend`): where the rest lies, the
    /// lend's number and the length of the first part.
    peer_lend: HashMap<(u32, u32), (u64, u64, usize)>,
    /// A cross-memory read failed once: said once, then `Cts` as on a socket.
    single_copy_refused: bool,
    /// Large copies from a peer's memory are shared with it (the node has a core
    /// per rank: [`Core::set_sharing`]).
    sharing: bool,
    /// A cross-memory write of ours failed once: we help no receiver again.
    help_refused: bool,
    /// The time, as the shell last said ([`Core::set_now`]).
    now: Instant,
    /// Sends a flush finished (its scratch list, kept between flushes).
    done: Vec<ReqId>,
    /// Bumped whenever a request completes: what waiting callers watch.
    pub completions: u64,
    /// The process is leaving: what arrives is read and dropped until each peer
    /// closes its side.
    draining: bool,
}

fn would_block(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::WouldBlock
}

mod links;
mod recv;
mod send;
#[cfg(test)]
mod tests;

/// Counts one ordered frame sent to `dest` in `seq` (a core's `sent_seq`).
#[inline]
fn count_ordered(seq: &mut Vec<u64>, dest: u32) {
    let d = dest as usize;
    if d >= seq.len() {
        seq.resize(d + 1, 0);
    }
    seq[d] += 1;
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
            links: HashMap::default(),
            heard: HashMap::default(),
            lost: HashMap::default(),
            handshaking: Default::default(),
            closing: HashMap::default(),
            reqs: Slab::new(),
            queues: Queues::default(),
            unexp: Slab::new(),
            expect: HashMap::default(),
            stalled: Vec::new(),
            sent_seq: Vec::new(),
            recv_seq: HashMap::default(),
            gated: Vec::new(),
            sync_local: HashMap::default(),
            acct: Accounting::default(),
            polled: Vec::new(),
            shell: Vec::new(),
            shell_partial: Slab::new(),
            peer_addr: HashMap::default(),
            peer_lend: HashMap::default(),
            single_copy_refused: false,
            sharing: true,
            help_refused: false,
            done: Vec::new(),
            completions: 0,
            draining: false,
        }
    }

    /// The shell says what time it is (each turn of its loop): when links last sent
    /// and were heard from is counted from it.
    pub fn set_now(&mut self, now: Instant) {
        self.now = now;
    }

    /// Whether our large copies from a peer's memory are shared with it (it writes
    /// part of the message while we read the rest). Worth it while the sender has a
    /// core of its own to copy with: the shell turns it off on a crowded node.
    pub fn set_sharing(&mut self, on: bool) {
        self.sharing = on;
    }

    /// The settings.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Bytes written to and read from links so far (`accounting().moved`).
    pub fn moved(&self) -> u64 {
        self.acct.moved
    }

    /// What the engine holds now.
    pub fn accounting(&self) -> Accounting {
        Accounting {
            requests: self.reqs.len(),
            conns: self.conns.len(),
            ..self.acct
        }
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

    /// Completes a matched receive whose message is in its buffer (as
    /// [`Core::complete`], with one look-up: it is on every small message's way).
    fn complete_recv(&mut self, id: ReqId) {
        let Some(req) = self.reqs.get_mut(id) else {
            return;
        };
        let ReqState::Recv {
            buf,
            matched: Some(st),
        } = &mut req.state
        else {
            return;
        };
        let st = *st;
        let data = std::mem::replace(buf, RecvBuf::Alloc(Vec::new())).into_data();
        self.completions += 1;
        if req.detached {
            self.reqs.remove(id);
        } else {
            req.state = ReqState::Done(Ok(Outcome::Received(st, data)));
        }
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
        // A lent message is taken back, before any of its memory is freed: the
        // caller may reuse its body at once, and a copy the receiver makes from now
        // on is thrown away.
        let lent = match self.reqs.get(id).map(|r| &r.state) {
            Some(ReqState::Send {
                dest,
                held: Some(b @ SendBuf::Lent { lend: Some(n), .. }),
            }) => Some((*dest, *n, b.len())),
            _ => None,
        };
        if let Some((dest, n, _)) = lent {
            self.take_back(dest, n);
        }
        if let Some(r) = self.reqs.get_mut(id) {
            r.detached = true;
            match &mut r.state {
                ReqState::Recv { buf, .. } => buf.disown(),
                ReqState::Send { held, .. } => {
                    if let Some((_, _, len)) = lent {
                        *held = Some(SendBuf::Withdrawn(len));
                    }
                }
                _ => {}
            }
        }
    }

    /// Ends our lend `n` on the link to `dest` (the one it was made on: a pair has
    /// one link over memory).
    pub(super) fn take_back(&mut self, dest: u32, n: u64) {
        let Core { links, conns, .. } = self;
        for &c in links.get(&dest).map_or(&[][..], Vec::as_slice) {
            if let Some(conn) = conns.get_mut(c) {
                conn.io.take_back(n);
            }
        }
    }

    /// Whether a message of `len` bytes to `dest`, sent with `allowance`
    /// ([`Core::post_send_allowing`]), would be lent if given as
    /// [`SendBuf::Lent`]: it goes by rendezvous over a link that reads our memory.
    /// Else a copy shared between destinations serves better.
    pub fn would_lend(&self, dest: u32, len: usize, allowance: usize) -> bool {
        len > self.limits.eager + allowance
            && self
                .links
                .get(&dest)
                .and_then(|v| v.first())
                .and_then(|&c| self.conns.get(c))
                .is_some_and(|x| x.io.reads_peer())
    }

    /// Detaches every request of `ids` (see [`Core::detach`]).
    pub fn detach_each(&mut self, ids: impl IntoIterator<Item = ReqId>) {
        for id in ids {
            self.detach(id);
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
}
