//! The engine: one readiness loop (epoll, through mio) drives every link of the
//! process, its listener and the handshakes of whoever knocks on it.
//!
//! Threads: the caller's own thread drives the loop while it waits in a call
//! (spinning briefly first, since a thread woken from another core costs 30-55 µs
//! here), and one background thread drives it while the program computes, so that
//! large messages keep flowing and peers hear our heartbeats. The count does not grow
//! with the number of peers: a link is one descriptor in the loop, and so is each
//! socket or helper request of a link being made (the dialer, `crate::link`, is
//! stepped by the same loop, see `dial_step`).
//!
//! The state machine it drives ([`core::Core`]) is pure: matching ([`matching`]),
//! the eager/rendezvous protocol and each link's framing ([`wire`]).
//!
//! A link is a socket, or shared memory between two ranks of one node ([`shm`]):
//! those are not in epoll, the loop polls them every turn, and a rank about to sleep
//! asks its shared-memory peers to ring its doorbell (an eventfd in epoll).

pub mod core;
pub mod matching;
pub mod rawbuf;
pub mod shm;
pub mod wire;

use self::core::{ConnId, Core, Limits, LinkIo, Peek, ShellFrame, Via};
use crate::handshake::{Acceptor, HandshakeError, Linked, Step};
use crate::seal::{Keys, Sealed};
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Registry, Token, Waker};
use slab::Slab;
use std::io::{IoSlice, Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

const WAKER: Token = Token(usize::MAX);
const LISTENER: Token = Token(usize::MAX - 1);
const BELL: Token = Token(usize::MAX - 2);
/// The longest a waiting caller polls (yielding its core at each turn) on a node
/// with more ranks than cores, before it sleeps. 16 ranks on 2 cores, allreduce and
/// bcast from 8 B to 1 MiB: polling 1 ms took 1.1-1.4× the time of polling 50 µs at
/// most sizes; sleeping at once was faster below 64 KiB but took 1.9× at 1 MiB (bcast).
const CROWDED_SPIN: Duration = Duration::from_micros(50);
/// How often a spinning wait on a node with a core per rank yields its core, in case
/// the rank it waits for was placed on the same core. Two ranks on two cores, each
/// sleeping 3 ms (as computing would) before an 8-byte allreduce: without it, the
/// woken ranks now and then shared one core while the other idled, and the one that
/// spun held the other off for its whole spin (1 ms): 150-630 µs per call.
const SPIN_YIELD_EVERY: Duration = Duration::from_micros(20);
/// Spinning turns of a wait between two readings of the clock.
const CLOCK_EVERY: u32 = 16;
/// Spinning turns that look at the shared-memory links only, between two that also
/// ask epoll (a system call each).
const SKIP_POLL: u32 = 32;
/// The same when every link of the process is in shared memory and the node has a
/// core per rank: epoll then only brings new connections, doorbells and dials, none
/// of them urgent, and a system call (with the full turn's clock reads and dialer
/// timers) on the path of a message that arrives meanwhile delays it by more than the
/// message's own cost.
const SKIP_POLL_MEMORY: u32 = 1024;
/// Shell frames: a shared-memory offer, its acceptance, a refusal.
const SHM_OFFER: u32 = 1;
const SHM_ACCEPT: u32 = 2;
const SHM_DECLINE: u32 = 3;

/// A link's stream: a socket, or shared memory with a process of this node.
#[derive(Debug)]
pub enum Link {
    /// A TCP connection (direct, or to a relay proxy).
    Tcp(TcpStream),
    /// A TCP connection whose bytes are sealed ([`crate::seal`]).
    Sealed(Box<Sealed<TcpStream>>),
    /// Shared memory.
    Shm(shm::ShmLink),
}

impl Read for Link {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Link::Tcp(s) => s.read(buf),
            Link::Sealed(s) => s.read(buf),
            Link::Shm(s) => s.read(buf),
        }
    }
}

impl Write for Link {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Link::Tcp(s) => s.write(buf),
            Link::Sealed(s) => s.write(buf),
            Link::Shm(s) => s.write(buf),
        }
    }

    fn write_vectored(&mut self, bufs: &[std::io::IoSlice<'_>]) -> std::io::Result<usize> {
        match self {
            Link::Tcp(s) => s.write_vectored(bufs),
            Link::Sealed(s) => s.write_vectored(bufs),
            Link::Shm(s) => s.write_vectored(bufs),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Link::Tcp(s) => s.flush(),
            Link::Sealed(s) => s.flush(),
            Link::Shm(s) => s.flush(),
        }
    }
}

impl LinkIo for Link {
    fn write_frame(&mut self, head: &[u8; wire::HEADER], body: &[u8]) -> std::io::Result<usize> {
        match self {
            Link::Shm(s) => s.write_frame(head, body),
            _ => self.write_vectored(&[IoSlice::new(head), IoSlice::new(body)]),
        }
    }

    fn polled(&self) -> bool {
        matches!(self, Link::Shm(_))
    }

    #[inline]
    fn ready(&self) -> (bool, bool) {
        match self {
            Link::Tcp(_) | Link::Sealed(_) => (false, false),
            Link::Shm(s) => (s.readable(), s.writable()),
        }
    }

    fn reads_peer(&self) -> bool {
        matches!(self, Link::Shm(s) if s.single_copy)
    }

    fn set_sleeping(&self, on: bool) {
        if let Link::Shm(s) = self {
            s.set_sleeping(on);
        }
    }

    fn read_peer(&mut self, addr: u64, dst: &mut [u8]) -> std::io::Result<()> {
        match self {
            Link::Tcp(_) | Link::Sealed(_) => Err(std::io::ErrorKind::Unsupported.into()),
            Link::Shm(s) => s.read_peer(addr, dst),
        }
    }

    fn lend(&mut self) -> Option<u64> {
        match self {
            Link::Shm(s) if s.single_copy => s.lend(),
            _ => None,
        }
    }

    fn take_back(&mut self, n: u64) {
        if let Link::Shm(s) = self {
            s.take_back(n);
        }
    }

    fn peer_lends(&self, n: u64) -> bool {
        matches!(self, Link::Shm(s) if s.peer_lends(n))
    }

    fn shares(&self) -> bool {
        matches!(self, Link::Shm(s) if s.single_copy && s.share)
    }

    fn open_share(&mut self, id: u32) {
        if let Link::Shm(s) = self {
            s.open_share(id);
        }
    }

    fn claim(&mut self, ours: bool, id: u32, chunks: u32) -> std::io::Result<Option<u32>> {
        match self {
            Link::Shm(s) => s.claim(ours, id, chunks),
            _ => Ok(None),
        }
    }

    fn helped(&mut self, i: u32, ok: bool) {
        if let Link::Shm(s) = self {
            s.helped(i, ok);
        }
    }

    fn share_marks(&self) -> (u64, u64) {
        match self {
            Link::Shm(s) => s.share_marks(),
            _ => (0, 0),
        }
    }

    fn write_peer(&mut self, addr: u64, src: &[u8]) -> std::io::Result<()> {
        match self {
            Link::Shm(s) if s.single_copy => s.write_peer(addr, src),
            _ => Err(std::io::ErrorKind::Unsupported.into()),
        }
    }

    fn peer_alive(&self) -> bool {
        match self {
            Link::Shm(s) => s.peer_alive(),
            _ => true,
        }
    }

    fn pending(&self) -> bool {
        matches!(self, Link::Sealed(s) if s.pending())
    }

    fn read_direct(&mut self, dst: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Link::Sealed(s) => s.read_in_place(dst),
            other => other.read(dst),
        }
    }

    fn reads_in_place(&self) -> bool {
        matches!(self, Link::Sealed(_))
    }

    fn peek_frame(&self) -> Peek {
        match self {
            Link::Shm(s) => s.peek_frame(),
            _ => Peek::Other,
        }
    }

    fn take_frame(&mut self, skip: usize, dst: &mut [u8]) {
        if let Link::Shm(s) = self {
            s.take_frame(skip, dst);
        }
    }

    fn remote(&self) -> Option<String> {
        self.tcp()
            .and_then(|s| s.peer_addr().ok())
            .map(|a| a.to_string())
    }
}

impl Link {
    /// The TCP connection under the link, if it is one.
    pub fn tcp(&self) -> Option<&TcpStream> {
        match self {
            Link::Tcp(s) => Some(s),
            Link::Sealed(s) => Some(s.get_ref()),
            Link::Shm(_) => None,
        }
    }

    fn tcp_mut(&mut self) -> Option<&mut TcpStream> {
        match self {
            Link::Tcp(s) => Some(s),
            Link::Sealed(s) => Some(s.get_mut()),
            Link::Shm(_) => None,
        }
    }

    /// Whether the link's bytes are sealed.
    pub fn sealed(&self) -> bool {
        matches!(self, Link::Sealed(_))
    }

    /// Shuts our sending side: the peer reads what we sent, then the end.
    fn shutdown_write(&mut self) {
        match self {
            Link::Tcp(s) => {
                let _ = s.shutdown(std::net::Shutdown::Write);
            }
            Link::Sealed(s) => {
                // The close record must be out before the FIN, or the peer reads a
                // cut stream: wait for room a moment if the socket is full.
                let _ = s.close();
                let deadline = Instant::now() + Duration::from_secs(2);
                while s.pending() && Instant::now() < deadline {
                    match s.flush() {
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                            std::thread::sleep(Duration::from_millis(1))
                        }
                        _ => break,
                    }
                }
                let _ = s.get_ref().shutdown(std::net::Shutdown::Write);
            }
            Link::Shm(s) => s.shutdown_write(),
        }
    }
}

/// A connection whose job handshake is done, with its keys if it is sealed.
#[derive(Debug)]
pub struct NewLink {
    /// The connection.
    pub stream: std::net::TcpStream,
    /// The keys the handshake derived (`None`: plaintext).
    pub keys: Option<Keys>,
}

/// How links inside the node are made (`QCG_SHM`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShmMode {
    /// TCP over loopback, as between nodes.
    Off,
    /// Shared memory; large messages stream through it.
    Copy,
    /// Shared memory; large messages copied once from the sender's memory, the
    /// receiver and the sender each copying part (see [`shm`]'s "Sharing a large
    /// copy").
    SingleCopy,
    /// As [`ShmMode::SingleCopy`], but the receiver copies alone (Open MPI's way).
    ReadOnly,
}

impl ShmMode {
    /// Whether large messages are copied once, from the sender's memory.
    pub fn single_copy(self) -> bool {
        matches!(self, ShmMode::SingleCopy | ShmMode::ReadOnly)
    }

    /// Reads `QCG_SHM` (see [`qcg_wire::env::SHM`]).
    pub fn from_env() -> Result<ShmMode, String> {
        match std::env::var(qcg_wire::env::SHM).ok().as_deref() {
            None | Some("") | Some("1") => Ok(ShmMode::SingleCopy),
            Some("copy") => Ok(ShmMode::Copy),
            Some("read") => Ok(ShmMode::ReadOnly),
            Some("0") => Ok(ShmMode::Off),
            Some(v) => Err(format!(
                "{}={v}: expected 1 (shared memory, default), read (shared memory, the \
                 receiver alone copying large messages), copy (shared memory without \
                 single copies) or 0 (TCP)",
                qcg_wire::env::SHM
            )),
        }
    }
}

/// Shared memory between ranks of this node.
struct Shm {
    mode: ShmMode,
    node: Option<shm::Node>,
    bell: shm::Bell,
    /// Segments we offered, by peer.
    pending: Mutex<std::collections::HashMap<u32, shm::Pending>>,
}
/// Nodes of at most this many ranks map a shared-memory link's segment with all its
/// pages at once (`MAP_POPULATE`), on both sides. Left to fault in as the rings
/// first fill, the first lap of a ring cost a small message about twice its usual
/// latency: two ranks, 1 B ping-pong, 0.50 µs against 0.28-0.30 µs for the first
/// 4,000 round trips after the link was made. A segment is 520 KiB, so a node of 32
/// ranks that all link with each other holds 252 MiB at once; larger nodes let the
/// pages come as they are used.
pub const POPULATE_RANKS: usize = 32;
/// Tokens of connections still in their handshake start here.
const HANDSHAKE_BASE: usize = 1 << 40;
/// Why an accepted connection that closed before its handshake ended was dropped.
const CLOSED_EARLY: &str = "closed during the handshake";
/// Handshakes in progress at once; past it the oldest is dropped.
pub const MAX_HANDSHAKES: usize = 256;
/// Time a stranger gets to send its first bytes.
const FIRST_BYTES: Duration = Duration::from_secs(2);
/// Time a whole handshake may take.
const HANDSHAKE_TIME: Duration = Duration::from_secs(5);
/// Dropped strangers are summed up in one log line per this interval.
const LOG_INTERVAL: Duration = Duration::from_secs(10);
/// How often heartbeats and liveness are checked.
const TICK: Duration = Duration::from_millis(500);
/// How long a leaving process reads on, at most, for its peers to close their side.
const LINGER: Duration = Duration::from_secs(10);
/// Bytes moved that count as bulk data flowing: each such amount restarts a waiting
/// caller's spin (see `wait`).
const BULK: u64 = 64 * 1024;
/// How long the background thread sleeps while callers drive the loop; it takes the
/// loop only after such an interval in which no caller waited.
const CALLER_GRACE: Duration = Duration::from_millis(20);
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Who the process is, for the handshakes the loop answers.
#[derive(Clone)]
pub struct Identity {
    /// Job id.
    pub job: String,
    /// Job secret.
    pub secret: [u8; 32],
    /// Our job rank.
    pub rank: u32,
    /// Job size.
    pub size: u32,
    /// Which links are sealed.
    pub encrypt: crate::seal::Policy,
}

struct Accepting {
    stream: TcpStream,
    addr: SocketAddr,
    acceptor: Acceptor,
    need: usize,
    got_any: bool,
    started: Instant,
    reply: Vec<u8>,
    done: Option<Linked>,
}

/// Strangers dropped since the last log line.
#[derive(Default)]
struct Dropped {
    count: u64,
    last: String,
    /// When the last line was logged.
    logged: Option<Instant>,
}

struct Loop {
    poll: Poll,
    events: Events,
    listener: Option<TcpListener>,
    accepting: Slab<Accepting>,
    /// Accepting paused (out of descriptors) until then.
    accept_paused: Option<Instant>,
    dropped: Dropped,
    /// Failed accepts (out of descriptors) since the last log line.
    accept_failed: Dropped,
    next_tick: Instant,
    /// Readiness of the last turn, per token: readable, read side closed (or
    /// failed), writable.
    ready: Vec<(Token, bool, bool, bool)>,
}

/// Work the loop advances after every turn, whoever drives it (a waiting caller or
/// the background thread): the schedules of non-blocking collectives, whose next
/// round starts when the receives of the current one land.
pub trait Progress: Send + Sync {
    /// Advances with the state machine locked; true once finished (then dropped).
    fn advance(&self, core: &mut Core<Link>) -> bool;
}

/// The engine of one process.
pub struct Engine {
    /// Work advanced after every turn of the loop (locked before `core`).
    progress: Mutex<Vec<Arc<dyn Progress>>>,
    /// Its length, read without the lock by spinning turns.
    progress_len: AtomicUsize,
    id: Identity,
    /// What the broker's plans said about sealing links, by peer.
    plan_seal: crate::link::shell::PlanSeals,
    core: Mutex<Core<Link>>,
    /// Links inside the node (`None`: off).
    shm: Option<Shm>,
    /// Some link is in shared memory: spinning turns poll it and skip epoll.
    in_memory: AtomicBool,
    /// Spinning turns since the last that asked epoll (whoever turned: a counter
    /// kept across waits, read and written without the loop's lock).
    skipped: AtomicU32,
    /// How many may pass before one asks epoll (`SKIP_POLL`, or `SKIP_POLL_MEMORY`).
    skip_limit: AtomicU32,
    /// More ranks share this node than it has cores: a waiting caller yields its
    /// core between polls and keeps its whole spin (see `wait`).
    crowded: AtomicBool,
    /// Our shared-memory segments are mapped with all their pages at once (see
    /// [`POPULATE_RANKS`]).
    populate: AtomicBool,
    lp: Mutex<Loop>,
    registry: Registry,
    waker: Waker,
    /// Callers inside a wait.
    active: AtomicUsize,
    /// The background thread is (about to be) inside the loop.
    bg_in_loop: AtomicBool,
    epoch: Instant,
    closed: AtomicBool,
    /// The longest a waiting caller polls before sleeping.
    spin: Duration,
    /// How long it polls now (µs): adapted to how long waits last (see `wait`).
    spin_now: AtomicU64,
    /// Waits so far.
    waits: AtomicU64,
    background: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// Strangers dropped in all.
    strangers: AtomicU64,
    /// Congestion control for links inside the machine (`None`: the system's).
    local_cc: Option<String>,
    /// Link set-up: the dialer and its sockets (locked after `core`, never before).
    dial: Mutex<crate::link::shell::Shell>,
    /// How each peer's last dial ended (read by callers waiting for a link).
    dial_ends: Mutex<std::collections::HashMap<u32, Result<(), Vec<String>>>>,
    /// How we made each link (absent: the peer made it).
    techniques: Mutex<std::collections::HashMap<u32, qcg_wire::Technique>>,
    /// A dial or notice was queued: the next turn steps the shell.
    dial_work: AtomicBool,
    /// The kernel refused `local_cc` once (said once, not per link).
    local_cc_refused: AtomicBool,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("rank", &self.id.rank)
            .finish()
    }
}

impl Engine {
    /// An engine for `id`, serving `listener` (handshakes of incoming links).
    pub fn new(
        id: Identity,
        listener: Option<std::net::TcpListener>,
        limits: Limits,
        spin: Duration,
        local_cc: Option<String>,
        shm_mode: ShmMode,
    ) -> std::io::Result<Arc<Engine>> {
        let poll = Poll::new()?;
        let registry = poll.registry().try_clone()?;
        let waker = Waker::new(poll.registry(), WAKER)?;
        let shm = match shm_mode {
            ShmMode::Off => None,
            mode => match shm::Bell::new() {
                Ok(bell) => {
                    registry.register(
                        &mut mio::unix::SourceFd(&bell.raw()),
                        BELL,
                        Interest::READABLE,
                    )?;
                    Some(Shm {
                        mode,
                        node: shm::Node::here(),
                        bell,
                        pending: Mutex::new(Default::default()),
                    })
                }
                Err(e) => {
                    tracing::warn!(error = %e, "no doorbell for shared-memory links; ranks of this node link over TCP");
                    None
                }
            },
        };
        let populate = id.size as usize <= POPULATE_RANKS;
        let listener = match listener {
            Some(l) => {
                l.set_nonblocking(true)?;
                let mut l = TcpListener::from_std(l);
                registry.register(&mut l, LISTENER, Interest::READABLE)?;
                Some(l)
            }
            None => None,
        };
        let engine = Arc::new(Engine {
            progress: Mutex::new(Vec::new()),
            progress_len: AtomicUsize::new(0),
            core: Mutex::new(Core::new(id.rank, id.size, limits, Instant::now())),
            id,
            plan_seal: Default::default(),
            lp: Mutex::new(Loop {
                poll,
                events: Events::with_capacity(256),
                listener,
                accepting: Slab::new(),
                accept_paused: None,
                dropped: Dropped::default(),
                accept_failed: Dropped::default(),
                next_tick: Instant::now() + TICK,
                ready: Vec::new(),
            }),
            shm,
            in_memory: AtomicBool::new(false),
            skipped: AtomicU32::new(0),
            skip_limit: AtomicU32::new(SKIP_POLL),
            crowded: AtomicBool::new(false),
            populate: AtomicBool::new(populate),
            registry,
            waker,
            active: AtomicUsize::new(0),
            bg_in_loop: AtomicBool::new(false),
            epoch: Instant::now(),
            closed: AtomicBool::new(false),
            spin,
            spin_now: AtomicU64::new(spin.as_micros() as u64),
            waits: AtomicU64::new(0),
            background: Mutex::new(None),
            strangers: AtomicU64::new(0),
            local_cc,
            local_cc_refused: AtomicBool::new(false),
            dial: Mutex::new(Default::default()),
            dial_ends: Mutex::new(Default::default()),
            techniques: Mutex::new(Default::default()),
            dial_work: AtomicBool::new(false),
        });
        let weak = Arc::downgrade(&engine);
        let t = std::thread::Builder::new()
            .name("qcg-progress".into())
            .spawn(move || background(weak))?;
        *lock(&engine.background) = Some(t);
        Ok(engine)
    }

    /// The state machine, locked.
    pub fn core(&self) -> MutexGuard<'_, Core<Link>> {
        lock(&self.core)
    }

    /// Whether shared-memory links copy large messages once, from the sender's
    /// memory (`QCG_SHM` left at its default, or `read`).
    pub fn single_copy(&self) -> bool {
        self.shm.as_ref().is_some_and(|s| s.mode.single_copy())
    }

    /// Says whether more ranks share this node than it has cores (see `wait`).
    pub fn set_crowded(&self, crowded: bool) {
        self.crowded.store(crowded, Ordering::Relaxed);
        self.core().set_sharing(!crowded);
    }

    /// Says how many ranks of the job share this node (until said, the job's size
    /// stands for it): few enough, and shared-memory links are mapped whole at
    /// once (see [`POPULATE_RANKS`]).
    pub fn set_node_ranks(&self, ranks: usize) {
        self.populate
            .store(ranks <= POPULATE_RANKS, Ordering::Relaxed);
    }

    /// Whether our segments are mapped whole (see [`POPULATE_RANKS`]).
    fn populates(&self) -> bool {
        self.populate.load(Ordering::Relaxed)
    }

    /// Connections dropped because they were not links of this job.
    pub fn strangers(&self) -> u64 {
        self.strangers.load(Ordering::Relaxed)
    }

    /// Adds a link whose handshake is done (made by a link maker on some thread;
    /// `relayed`: through a relay proxy, which a direct link replaces when one comes
    /// up, see [`Core::add_conn`]).
    pub fn add_link(&self, peer: u32, link: NewLink, relayed: bool) -> std::io::Result<()> {
        let NewLink { stream, keys } = link;
        stream.set_nonblocking(true)?;
        stream.set_nodelay(true)?;
        keepalive(&stream);
        self.attach(peer, TcpStream::from_std(stream), relayed, keys);
        Ok(())
    }

    /// Which links are sealed.
    pub fn encrypt_policy(&self) -> &crate::seal::Policy {
        &self.id.encrypt
    }

    /// Whether we want a link with a peer sealed (it is if either end wants it): the
    /// broker's plan where we had one (the shell records it from the lookup's
    /// answer), else our policy; `QCG_ENCRYPT` wins over both. A function the
    /// listener's handshakes and the shell keep.
    fn seal_wish(&self) -> crate::handshake::Wish {
        let (policy, plans, me) = (
            self.id.encrypt.clone(),
            self.plan_seal.clone(),
            self.id.rank,
        );
        Arc::new(move |peer| {
            let plan = lock(&plans).get(&peer).copied().flatten();
            policy.ask(me, peer, plan)
        })
    }

    /// Lets the loop make links: what the dialer needs to know of the process.
    pub(crate) fn configure_dialing(&self, cfg: crate::link::shell::Config) {
        let sealing = crate::link::shell::Sealing {
            wish: self.seal_wish(),
            plans: self.plan_seal.clone(),
        };
        lock(&self.dial).configure(cfg, sealing);
    }

    /// Makes a link to `peer` (the loop dials, see [`crate::link::dialer`]) and waits
    /// for it: `Err` says why each attempt failed.
    pub(crate) fn link_to(&self, peer: u32) -> Result<(), Vec<String>> {
        {
            let core = self.core();
            if core.has_link(peer) {
                return Ok(());
            }
            let mut d = lock(&self.dial);
            if !d.configured() {
                return Err(vec!["this process makes no links (no helper)".into()]);
            }
            if !d.dialer.dialing(peer) {
                lock(&self.dial_ends).remove(&peer);
                d.dial(peer, Instant::now());
            }
        }
        self.dial_work.store(true, Ordering::SeqCst);
        let _ = self.waker.wake();
        self.wait(
            |core| match lock(&self.dial_ends).get(&peer) {
                Some(end) => Some(end.clone()),
                None => (core.has_link(peer) && !lock(&self.dial).dialer.dialing(peer))
                    .then_some(Ok(())),
            },
            None,
        )
        .unwrap_or(Ok(()))
    }

    /// Takes our part of a link another rank makes (a notice from the grid).
    pub(crate) fn notice(&self, n: qcg_wire::Notice) {
        let direct = match &n {
            qcg_wire::Notice::Punch { from, .. } => self.core().has_direct_link(from.rank),
            _ => false,
        };
        lock(&self.dial).notice(n, direct, &self.registry, Instant::now());
        self.dial_work.store(true, Ordering::SeqCst);
        let _ = self.waker.wake();
    }

    /// How we made the link to `peer` (`None`: the peer made it, or none yet).
    pub(crate) fn technique(&self, peer: u32) -> Option<qcg_wire::Technique> {
        lock(&self.techniques).get(&peer).copied()
    }

    /// Steps link set-up: readiness of its sockets (`ready`), its timers, queued
    /// dials and notices; then attaches the links it made.
    fn dial_step(&self, ready: &[Token], now: Instant) {
        let due = {
            let d = lock(&self.dial);
            d.next_timer().is_some_and(|t| now >= t)
        };
        if ready.is_empty() && !due && !self.dial_work.swap(false, Ordering::SeqCst) {
            return;
        }
        let mut outs = lock(&self.dial).step(ready, &self.registry, now);
        while !outs.is_empty() {
            let mut arrived = Vec::new();
            for o in outs {
                match o {
                    crate::link::shell::Out::Attach {
                        peer,
                        stream,
                        relayed,
                        keys,
                    } => {
                        let _ = stream.set_nodelay(true);
                        keepalive_fd(&stream);
                        self.attach(peer, stream, relayed, keys);
                        // Made by the peer's side, the dialer learns it here; made by
                        // ours, punches toward the peer from its notices end.
                        arrived.push((peer, relayed));
                    }
                    crate::link::shell::Out::Made { peer, technique } => {
                        if let Some(t) = technique {
                            lock(&self.techniques).insert(peer, t);
                        }
                        lock(&self.dial_ends).insert(peer, Ok(()));
                    }
                    crate::link::shell::Out::Failed { peer, attempts } => {
                        lock(&self.dial_ends).insert(peer, Err(attempts));
                    }
                }
            }
            let mut d = lock(&self.dial);
            for (peer, relayed) in arrived {
                d.arrived(peer, relayed, &self.registry, now);
            }
            outs = d.step(&[], &self.registry, now);
        }
        let handshaking = lock(&self.dial).handshaking();
        self.core().set_handshaking(handshaking);
    }

    /// A link arrived that the dialer did not make (our listener accepted it).
    fn link_arrived(&self, peer: u32, relayed: bool) {
        lock(&self.dial).arrived(peer, relayed, &self.registry, Instant::now());
        // What the dialer made of it is handled at the next step.
        self.dial_work.store(true, Ordering::SeqCst);
    }

    /// Waits until `check` gives an answer, driving the loop meanwhile; `None` if
    /// `deadline` passed first.
    pub fn wait<R>(
        &self,
        mut check: impl FnMut(&mut Core<Link>) -> Option<R>,
        deadline: Option<Instant>,
    ) -> Option<R> {
        let mut moved = {
            let mut core = self.core();
            if let Some(r) = check(&mut core) {
                return Some(r);
            }
            core.moved()
        };
        self.active.fetch_add(1, Ordering::SeqCst);
        if self.bg_in_loop.load(Ordering::SeqCst) {
            let _ = self.waker.wake();
        }
        let crowded = self.crowded.load(Ordering::Relaxed);
        let mut spin = Duration::from_micros(self.spin_now.load(Ordering::Relaxed));
        if crowded {
            spin = spin.min(CROWDED_SPIN);
        }
        // The spin runs from the last time bulk data moved, not from the start: a
        // large message streaming in (or out) keeps the caller polling, since each
        // readiness it slept for would cost a wake-up (30-55 µs here) per socket
        // buffer's worth of bytes.
        let mut slept = false;
        // The clock is read every few spinning turns only: a turn over shared memory
        // takes a fraction of a microsecond, and a clock read can cost as much. A wait
        // that ends within its first few turns (the answer to a ping-pong's message,
        // say) never reads it: its spin counts from the first reading. A crowded node,
        // a wait with a deadline and one that does not spin read it at once.
        let mut clocked = crowded || deadline.is_some() || spin.is_zero();
        let mut now = if clocked { Instant::now() } else { self.epoch };
        let mut spin_until = now + spin;
        let mut turns = 0u32;
        let mut yielded = now;
        let r = loop {
            turns = turns.wrapping_add(1);
            if turns % CLOCK_EVERY == 0 || (clocked && now >= spin_until) {
                now = Instant::now();
                if !clocked {
                    clocked = true;
                    spin_until = now + spin;
                    yielded = now;
                }
                if !crowded && now.saturating_duration_since(yielded) >= SPIN_YIELD_EVERY {
                    // The peer may have been woken onto this core (a timer's wake-up
                    // lands where the timer was queued), and a spin that never yields
                    // would hold it off for the whole spin while the other core idles.
                    std::thread::yield_now();
                    yielded = now;
                }
            }
            if deadline.is_some_and(|d| now >= d) {
                break None;
            }
            let spinning = !clocked || now < spin_until;
            if spinning {
                if self.memory_turn() {
                    // A spinning turn over shared memory: the links polled and the
                    // answer looked for under one lock of the state machine, no
                    // system call (but the yield of a crowded node) and no lock of
                    // the loop. On a crowded node this made a turn cheap enough to
                    // matter: 16 ranks on 2 cores, bcast of 128 KiB back to back,
                    // 94 -> 64 context switches per call (441 -> 403 µs).
                    let (r, any, m) = {
                        let mut core = self.core();
                        let any = self.poll_memory(&mut core);
                        (check(&mut core), any, core.moved())
                    };
                    if any && self.progress_len.load(Ordering::Relaxed) > 0 {
                        self.advance_progress();
                    }
                    if r.is_some() {
                        break r;
                    }
                    if m - moved >= BULK {
                        moved = m;
                        clocked = true;
                        now = Instant::now();
                        spin_until = now + spin;
                    }
                    if crowded {
                        // Ranks outnumber cores: the one we wait for may need ours.
                        std::thread::yield_now();
                    }
                    continue;
                }
                // A full turn (epoll included) every `skip_limit` turns.
                match self.lp.try_lock() {
                    Ok(mut lp) => self.turn(&mut lp, Duration::ZERO),
                    Err(_) => std::hint::spin_loop(),
                }
                if crowded {
                    std::thread::yield_now();
                }
            } else {
                // Sleep in the kernel: in epoll if the loop is free, else on the lock
                // until whoever drives the loop (woken above) lets go of it.
                slept = true;
                let mut lp = lock(&self.lp);
                let mut t = Duration::from_millis(10);
                if let Some(d) = deadline {
                    t = t.min(d.saturating_duration_since(now));
                }
                if let Some(r) = check(&mut self.core()) {
                    break Some(r);
                }
                self.turn(&mut lp, t);
            }
            let mut core = self.core();
            if let Some(r) = check(&mut core) {
                break Some(r);
            }
            let m = core.moved();
            if m - moved >= BULK {
                moved = m;
                clocked = true;
                now = Instant::now();
                spin_until = now + spin;
            }
        };
        // Adaptive spinning: polling pays when answers come within the spin (a thread
        // woken from another core costs 30-55 µs here), and only hurts when they do
        // not (on a loaded machine the spinner holds the core the peer needs). So the
        // spin doubles after a wait that never had to sleep and halves after one that
        // did. Every 256th wait probes the full spin again, in case the machine got
        // quiet. A crowded node polls briefly (`CROWDED_SPIN`), yielding its core at
        // every turn so that the peer it waits for runs, then sleeps: there, ranks
        // that poll long only take turns from those that have work.
        let max = self.spin.as_micros() as u64;
        // Also what tells the background thread that callers drive the loop (see
        // `background`): no clock is read here.
        let waits = self.waits.fetch_add(1, Ordering::Relaxed);
        let next = if waits % 256 == 255 || crowded {
            max
        } else if !slept {
            (spin.as_micros() as u64 * 2).clamp(1, max.max(1)).min(max)
        } else {
            spin.as_micros() as u64 / 2
        };
        if next != spin.as_micros() as u64 {
            self.spin_now.store(next, Ordering::Relaxed);
        }
        self.active.fetch_sub(1, Ordering::SeqCst);
        r
    }

    /// Adds work the loop advances after every turn until it says it is finished.
    /// The caller must not hold the state machine's lock.
    pub fn add_progress(&self, p: Arc<dyn Progress>) {
        {
            let mut list = lock(&self.progress);
            list.push(p);
            self.progress_len.store(list.len(), Ordering::Relaxed);
        }
        // Whoever is in the loop now sees it after its current turn.
        if self.bg_in_loop.load(Ordering::SeqCst) {
            let _ = self.waker.wake();
        }
    }

    /// Advances the registered work (see [`Progress`]).
    fn advance_progress(&self) {
        let mut list = lock(&self.progress);
        if list.is_empty() {
            return;
        }
        let mut core = self.core();
        list.retain(|p| !p.advance(&mut core));
        self.progress_len.store(list.len(), Ordering::Relaxed);
    }

    /// Wakes whoever waits in the loop now (something outside the loop changed,
    /// such as a user request's completion).
    pub(crate) fn wake(&self) {
        let _ = self.waker.wake();
    }

    /// Drives the loop once without waiting, unless someone else is driving it.
    pub fn poke(&self) {
        if let Ok(mut lp) = self.lp.try_lock() {
            self.turn(&mut lp, Duration::ZERO);
        }
    }

    /// Whether a spinning turn may poll the shared-memory links only (no system
    /// call): epoll is asked once every `skip_limit` turns, and at once when link
    /// set-up has work. Counts the turn.
    fn memory_turn(&self) -> bool {
        let k = self.skipped.load(Ordering::Relaxed);
        if k < self.skip_limit.load(Ordering::Relaxed)
            && self.in_memory.load(Ordering::Relaxed)
            && !self.dial_work.load(Ordering::Relaxed)
        {
            self.skipped.store(k + 1, Ordering::Relaxed);
            return true;
        }
        false
    }

    /// One turn of the loop: waits up to `timeout` for readiness, handles it.
    fn turn(&self, lp: &mut Loop, timeout: Duration) {
        if timeout.is_zero() && self.memory_turn() {
            // A spinning turn: the shared-memory links only, no system call, and
            // epoll once every few turns (the full turn below).
            let any = self.poll_memory(&mut self.core());
            if any && self.progress_len.load(Ordering::Relaxed) > 0 {
                self.advance_progress();
            }
            return;
        }
        let now = Instant::now();
        let mut timeout = timeout.min(lp.next_tick.saturating_duration_since(now));
        if let Some(p) = lp.accept_paused {
            timeout = timeout.min(p.saturating_duration_since(now));
        }
        if !lp.accepting.is_empty() {
            timeout = timeout.min(Duration::from_millis(100));
        }
        let dialing = lock(&self.dial).next_timer();
        if let Some(t) = dialing {
            timeout = timeout.min(t.saturating_duration_since(now));
        }
        // On a crowded node every spinning turn yields its core, so a turn may last
        // a whole round of the ranks sharing it: epoll is asked every few turns when
        // every link is in memory (it then has only set-up work), and at every turn
        // when some link is not (a socket's message must not wait for many rounds).
        let quiet = dialing.is_none() && lp.accepting.is_empty() && self.core().all_polled();
        let skip_limit = match (quiet, self.crowded.load(Ordering::Relaxed)) {
            (true, false) => SKIP_POLL_MEMORY,
            (true, true) | (false, false) => SKIP_POLL,
            (false, true) => 0,
        };
        self.skip_limit.store(skip_limit, Ordering::Relaxed);
        if self.dial_work.load(Ordering::SeqCst) {
            timeout = Duration::ZERO;
        }
        let sleeping = self.shm.is_some() && !timeout.is_zero();
        if sleeping {
            // About to sleep: peers ring our doorbell from now on; then look once
            // more, since they may have written before they saw the flag.
            let core = self.core();
            core.polled_sleep(true);
            if core.polled_ready() {
                timeout = Duration::ZERO;
            }
        }
        self.skipped.store(0, Ordering::Relaxed);
        let Loop { poll, events, .. } = lp;
        if let Err(e) = poll.poll(events, Some(timeout)) {
            if e.kind() != std::io::ErrorKind::Interrupted {
                tracing::warn!(error = %e, "the progress loop cannot poll");
            }
        }
        // What is read from now on was heard now.
        self.core().set_now(Instant::now());
        if sleeping {
            self.core().polled_sleep(false);
        }
        let mut accept = false;
        // Per token: readable, read side closed (or failed), writable.
        // Kept in the loop between turns: a turn allocates nothing.
        let mut ready = std::mem::take(&mut lp.ready);
        ready.clear();
        for ev in lp.events.iter() {
            let closed = ev.is_read_closed() || ev.is_error();
            ready.push((
                ev.token(),
                ev.is_readable() || closed,
                closed,
                ev.is_writable() || ev.is_error(),
            ));
        }
        {
            let mut core = self.core();
            for &(t, r, closed, w) in &ready {
                match t {
                    LISTENER => accept = true,
                    WAKER => {}
                    BELL => {
                        if let Some(shm) = &self.shm {
                            shm.bell.clear();
                        }
                    }
                    Token(c) if c < HANDSHAKE_BASE && core.conn_via(c) == Some(Via::Memory) => {
                        // Its pidfd: the peer's process exited. What it wrote is
                        // read to the end, then the link ends.
                        if let Some(Link::Shm(s)) = core.conn_io(c) {
                            s.peer_exited();
                        }
                        core.on_read_closed(c);
                    }
                    Token(c) if c < HANDSHAKE_BASE => {
                        if closed {
                            core.on_read_closed(c);
                        } else if r {
                            core.on_readable(c);
                        }
                        if w {
                            core.on_writable(c);
                        }
                    }
                    _ => {}
                }
            }
            if self.shm.is_some() {
                self.poll_memory(&mut core);
            }
        }
        self.advance_progress();
        let mut dialing = Vec::new();
        for &(t, ..) in &ready {
            if t.0 >= crate::link::shell::DIAL_BASE && t != WAKER && t != LISTENER && t != BELL {
                dialing.push(t);
            } else if t.0 >= HANDSHAKE_BASE && t != WAKER && t != LISTENER && t != BELL {
                self.handshake(lp, t.0 - HANDSHAKE_BASE);
            }
        }
        let now = Instant::now();
        self.dial_step(&dialing, now);
        if accept || lp.accept_paused.is_some_and(|p| now >= p) {
            lp.accept_paused = None;
            self.accept(lp);
        }
        if now >= lp.next_tick {
            lp.next_tick = now + TICK;
            self.core().tick(now);
            self.expire_handshakes(lp, now);
            self.log_dropped(lp, now, false);
        }
        lp.ready = ready;
    }

    fn drop_stranger(&self, lp: &mut Loop, addr: SocketAddr, why: &str) {
        self.strangers.fetch_add(1, Ordering::Relaxed);
        lp.dropped.count += 1;
        lp.dropped.last = format!("{addr}: {why}");
        self.log_dropped(lp, Instant::now(), false);
    }

    /// At most one line per interval, never one per stranger: the first drop after a
    /// quiet interval is logged at once, later ones are summed up.
    fn log_dropped(&self, lp: &mut Loop, now: Instant, force: bool) {
        let d = &mut lp.dropped;
        if d.count == 0 {
            return;
        }
        let due = d
            .logged
            .is_none_or(|t| now.duration_since(t) >= LOG_INTERVAL);
        if !due && !force {
            return;
        }
        if d.count == 1 {
            tracing::warn!(connection = %d.last, "dropped a connection that is not a link of this job");
        } else {
            tracing::warn!(
                count = d.count,
                last = %d.last,
                "dropped {} connections that are not links of this job since the last report",
                d.count
            );
        }
        d.count = 0;
        d.logged = Some(now);
    }

    fn accept(&self, lp: &mut Loop) {
        loop {
            let Some(l) = lp.listener.as_ref() else {
                return;
            };
            match l.accept() {
                Ok((stream, addr)) => {
                    if self.closed.load(Ordering::SeqCst) {
                        continue;
                    }
                    if lp.accepting.len() >= MAX_HANDSHAKES {
                        if let Some(oldest) = lp
                            .accepting
                            .iter()
                            .min_by_key(|(_, a)| a.started)
                            .map(|(k, _)| k)
                        {
                            let a = lp.accepting.remove(oldest);
                            self.drop_stranger(
                                lp,
                                a.addr,
                                "too many handshakes at once; dropped the oldest",
                            );
                        }
                    }
                    let acceptor = Acceptor::new(
                        &self.id.job,
                        &self.id.secret,
                        self.id.rank,
                        self.id.size,
                        self.seal_wish(),
                    );
                    let need = acceptor.first_need();
                    let entry = lp.accepting.vacant_entry();
                    let key = entry.key();
                    let mut a = Accepting {
                        stream,
                        addr,
                        acceptor,
                        need,
                        got_any: false,
                        started: Instant::now(),
                        reply: Vec::new(),
                        done: None,
                    };
                    if self
                        .registry
                        .register(
                            &mut a.stream,
                            Token(HANDSHAKE_BASE + key),
                            Interest::READABLE | Interest::WRITABLE,
                        )
                        .is_err()
                    {
                        continue;
                    }
                    entry.insert(a);
                    self.handshake(lp, key);
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // Out of descriptors (EMFILE/ENFILE) or the like: free the oldest
                    // handshake, or pause accepting for a moment; never spin.
                    if let Some(oldest) = lp
                        .accepting
                        .iter()
                        .min_by_key(|(_, a)| a.started)
                        .map(|(k, _)| k)
                    {
                        let a = lp.accepting.remove(oldest);
                        self.drop_stranger(lp, a.addr, &format!("dropped to accept more ({e})"));
                        continue;
                    }
                    // One line per interval, not one per pause.
                    let now = Instant::now();
                    let f = &mut lp.accept_failed;
                    f.count += 1;
                    f.last = e.to_string();
                    if f.logged
                        .is_none_or(|t| now.duration_since(t) >= LOG_INTERVAL)
                    {
                        tracing::warn!(
                            failures = f.count,
                            error = %f.last,
                            "cannot accept connections ({} times since the last report: {}); \
                             pausing 100 ms after each",
                            f.count,
                            f.last
                        );
                        f.count = 0;
                        f.logged = Some(now);
                    }
                    lp.accept_paused = Some(now + Duration::from_millis(100));
                    return;
                }
            }
        }
    }

    /// Drives handshake `key` as far as its bytes allow. A connection closed before
    /// its handshake ended ([`CLOSED_EARLY`]) is logged at debug level only; one that
    /// fails it is a stranger's (`drop_stranger`).
    fn handshake(&self, lp: &mut Loop, key: usize) {
        let outcome: Result<Option<Linked>, String> = (|| {
            let Some(a) = lp.accepting.get_mut(key) else {
                return Ok(None);
            };
            loop {
                while !a.reply.is_empty() {
                    match a.stream.write(&a.reply) {
                        Ok(n) => {
                            a.reply.drain(..n);
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(None),
                        Err(e) => return Err(e.to_string()),
                    }
                }
                if a.done.is_some() {
                    return Ok(a.done.take());
                }
                let mut buf = vec![0u8; a.need];
                match a.stream.read(&mut buf) {
                    Ok(0) => return Err(CLOSED_EARLY.into()),
                    Ok(n) => {
                        a.got_any = true;
                        match a.acceptor.feed(&buf[..n]) {
                            Ok(Step::Need(k)) => a.need = k,
                            Ok(Step::Reply(r, k)) => {
                                a.reply = r;
                                a.need = k;
                            }
                            Ok(Step::Done(r, linked)) => {
                                a.reply = r;
                                a.done = Some(linked);
                            }
                            Err(e) => return Err(e.to_string()),
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(None),
                    Err(e) => return Err(HandshakeError::Io(e).to_string()),
                }
            }
        })();
        match outcome {
            Ok(None) => {}
            Ok(Some(linked)) => {
                let mut a = lp.accepting.remove(key);
                let _ = self.registry.deregister(&mut a.stream);
                let _ = a.stream.set_nodelay(true);
                let peer = linked.peer;
                self.attach(peer, a.stream, false, linked.keys);
                self.link_arrived(peer, false);
            }
            Err(why) => {
                let a = lp.accepting.remove(key);
                if why == CLOSED_EARLY {
                    // Most often a peer's own attempt that lost its race (the dialer
                    // closes the techniques it no longer needs): nothing to warn of.
                    tracing::debug!(connection = %a.addr, "an incoming connection closed during the handshake");
                } else if !self.closed.load(Ordering::SeqCst) {
                    self.drop_stranger(lp, a.addr, &why);
                }
            }
        }
    }

    fn expire_handshakes(&self, lp: &mut Loop, now: Instant) {
        let late: Vec<usize> = lp
            .accepting
            .iter()
            .filter(|(_, a)| {
                let age = now.duration_since(a.started);
                age >= HANDSHAKE_TIME || (!a.got_any && age >= FIRST_BYTES)
            })
            .map(|(k, _)| k)
            .collect();
        for k in late {
            let a = lp.accepting.remove(k);
            self.drop_stranger(lp, a.addr, "handshake timed out");
        }
    }

    /// Puts a ready connection into the core and the loop.
    fn attach(&self, peer: u32, stream: TcpStream, relayed: bool, keys: Option<Keys>) {
        let local = match (stream.local_addr(), stream.peer_addr()) {
            (Ok(l), Ok(r)) => same_machine(l, r),
            _ => false,
        };
        if let Some(cc) = &self.local_cc {
            if local {
                self.tune_local(peer, &stream, cc);
            }
        }
        let mut core = self.core();
        if core.lost(peer).is_some() {
            // Declared lost (e.g. it went silent): a late link does not revive it.
            return;
        }
        let link = match keys {
            None => Link::Tcp(stream),
            Some(keys) => {
                crate::seal::ktls_offered(&stream);
                let name = match stream.peer_addr() {
                    Ok(a) => format!("rank {peer} ({a})"),
                    Err(_) => format!("rank {peer}"),
                };
                tracing::debug!(peer, relayed, "link sealed (AES-256-GCM records)");
                Link::Sealed(Box::new(Sealed::new(stream, keys, name)))
            }
        };
        let c: ConnId = core.add_conn(peer, link, Instant::now(), relayed);
        if let Some(io) = core.conn_io(c).and_then(Link::tcp_mut) {
            if let Err(e) =
                self.registry
                    .register(io, Token(c), Interest::READABLE | Interest::WRITABLE)
            {
                core.fail_peer(peer, &format!("cannot watch its link: {e}"));
                return;
            }
        }
        if local && !relayed && self.id.rank < peer {
            self.offer_shm(&mut core, peer, c);
        }
        core.on_readable(c);
        core.on_writable(c);
    }

    /// Offers a shared-memory link on `c` to `peer` (a rank of this machine), once.
    fn offer_shm(&self, core: &mut Core<Link>, peer: u32, c: ConnId) {
        let Some(shm) = &self.shm else { return };
        let Some(node) = shm.node else { return };
        if core.link_via(peer) == Some(Via::Memory) {
            return;
        }
        let mut pending = lock(&shm.pending);
        if pending.contains_key(&peer) {
            return;
        }
        match shm::Pending::new(node, &shm.bell, self.populates()) {
            Ok(p) => {
                core.send_shell(c, SHM_OFFER, p.offer().encode());
                pending.insert(peer, p);
            }
            Err(e) => {
                tracing::debug!(rank = peer, error = %e, "no shared-memory segment; the link stays on TCP");
                self.report_memory(peer, false);
            }
        }
    }

    /// Reads the shared-memory links and handles the shell frames read; whether any
    /// link had something.
    fn poll_memory(&self, core: &mut Core<Link>) -> bool {
        let any = core.poll_links();
        if core.has_shell() {
            let frames = core.take_shell();
            self.on_shell(core, frames);
        }
        any
    }

    /// Handles shell frames: offers, acceptances and refusals of shared memory.
    fn on_shell(&self, core: &mut Core<Link>, frames: Vec<ShellFrame>) {
        let conns: Vec<ConnId> = frames.iter().map(|f| f.conn).collect();
        self.handle_shell(core, frames);
        // Read on where each came from (what followed it may depend on it: the end
        // of a TCP link its peer moved off after its acceptance, say).
        for c in conns {
            core.shell_done(c);
        }
    }

    fn handle_shell(&self, core: &mut Core<Link>, frames: Vec<ShellFrame>) {
        for f in frames {
            let peer = f.peer;
            match f.what {
                SHM_OFFER => {
                    let r = match &self.shm {
                        None => Err("shared memory is off here (QCG_SHM=0)".to_string()),
                        Some(_) if peer >= self.id.rank => {
                            Err("offers come from the lower rank".to_string())
                        }
                        Some(shm) => match shm::Offer::decode(&f.payload) {
                            None => Err(format!("a malformed offer ({} bytes)", f.payload.len())),
                            Some(offer) => shm::accept(&offer, shm.node, self.populates())
                                .map(|l| (l, shm))
                                .map_err(|e| e.to_string()),
                        },
                    };
                    match r {
                        Ok((mut link, shm)) => {
                            link.single_copy = shm.mode.single_copy();
                            link.share = shm.mode == ShmMode::SingleCopy;
                            let bell = shm.bell.raw() as u32;
                            core.send_shell(
                                f.conn,
                                SHM_ACCEPT,
                                shm::encode_accept(std::process::id(), bell),
                            );
                            self.attach_shm(core, peer, link);
                        }
                        Err(why) => {
                            tracing::debug!(rank = peer, %why, "refused a shared-memory link; it stays on TCP");
                            core.send_shell(f.conn, SHM_DECLINE, why.into_bytes());
                        }
                    }
                }
                SHM_ACCEPT => {
                    let Some(shm) = &self.shm else { continue };
                    let Some(p) = lock(&shm.pending).remove(&peer) else {
                        core.fail_peer(
                            peer,
                            "protocol error: it accepted a shared-memory link never offered",
                        );
                        continue;
                    };
                    let Some((pid, bell)) = shm::decode_accept(&f.payload) else {
                        core.fail_peer(
                            peer,
                            "protocol error: a malformed shared-memory acceptance",
                        );
                        continue;
                    };
                    match p.accepted(pid, bell) {
                        Ok(mut link) => {
                            link.single_copy = shm.mode.single_copy();
                            link.share = shm.mode == ShmMode::SingleCopy;
                            self.attach_shm(core, peer, link);
                            self.report_memory(peer, true);
                        }
                        // It moved to the shared memory already: without it we cannot
                        // hear it.
                        Err(e) => {
                            self.report_memory(peer, false);
                            core.fail_peer(
                                peer,
                                &format!("cannot open its end of our shared-memory link: {e}"),
                            )
                        }
                    }
                }
                SHM_DECLINE => {
                    if let Some(shm) = &self.shm {
                        lock(&shm.pending).remove(&peer);
                    }
                    self.report_memory(peer, false);
                    tracing::debug!(
                        rank = peer,
                        why = %String::from_utf8_lossy(&f.payload),
                        "it refused a shared-memory link; the link stays on TCP"
                    );
                }
                other => core.fail_peer(peer, &format!("protocol error: shell frame {other}")),
            }
        }
    }

    /// Reports our offer of shared memory to `peer` to the grid (the offering,
    /// lower rank reports, as a dialer does): the link moved there (`ok`) or the
    /// offer failed and the link stays on TCP.
    fn report_memory(&self, peer: u32, ok: bool) {
        lock(&self.dial).report(peer, qcg_wire::Technique::SharedMemory, ok, None, false);
    }

    /// Puts a shared-memory link into the core; its pidfd (if the kernel gave one)
    /// into the loop.
    fn attach_shm(&self, core: &mut Core<Link>, peer: u32, link: shm::ShmLink) {
        let pidfd = link.pidfd();
        let c = core.add_conn_via(peer, Link::Shm(link), Instant::now(), Via::Memory);
        if let Some(Err(e)) = pidfd.map(|fd| {
            self.registry
                .register(&mut mio::unix::SourceFd(&fd), Token(c), Interest::READABLE)
        }) {
            core.fail_peer(peer, &format!("cannot watch its process: {e}"));
            return;
        }
        self.in_memory.store(true, Ordering::Relaxed);
        tracing::debug!(rank = peer, "moved to a shared-memory link");
        core.on_readable(c);
        core.on_writable(c);
    }

    /// Gives a link that stays inside this machine the congestion control `cc`.
    /// Congestion control protects a network that a loopback link does not cross,
    /// and here it only costs: with BBR (a common system default) a 1 MiB ping-pong
    /// between two ranks of one node took 127 µs one way, with `reno` 93 µs, the
    /// step appearing where a message needs more than 16 of loopback's 64 KiB
    /// segments (see the README).
    fn tune_local(&self, peer: u32, stream: &TcpStream, cc: &str) {
        if let Err(e) = socket2::SockRef::from(stream).set_tcp_congestion(cc.as_bytes()) {
            if !self.local_cc_refused.swap(true, Ordering::Relaxed) {
                tracing::warn!(
                    peer,
                    congestion_control = cc,
                    error = %e,
                    "the kernel refused this congestion control for links inside the machine \
                     (QCG_LOCAL_TCP_CC; `sysctl net.ipv4.tcp_allowed_congestion_control` \
                     lists what it allows); such links keep the system's"
                );
            }
        }
    }

    /// The TCP congestion control of the link we send to `peer` on, as the kernel
    /// reports it (`None`: no link, or a kernel that does not say).
    pub fn link_congestion(&self, peer: u32) -> Option<String> {
        let core = self.core();
        let io = core.link_io(peer)?.tcp()?;
        let name = socket2::SockRef::from(io).tcp_congestion().ok()?;
        let name = String::from_utf8_lossy(&name);
        Some(name.trim_end_matches('\0').to_string())
    }

    /// Closes every link.
    pub fn close_links(&self) {
        self.core().close_all();
    }

    /// Sends what is queued (bounded by `limit`) and stops the background thread.
    pub fn shutdown(&self, limit: Duration) {
        let deadline = Instant::now() + limit;
        let _ = self.wait(|core| core.flushed().then_some(()), Some(deadline));
        // No more links: attempts under way end (and stop holding the reporter).
        lock(&self.dial).stop(&self.registry);
        // Shut our side of every link and read on until the peers shut theirs (see
        // `Core::drain`): as MPI_Finalize waits for every rank, a process does not
        // vanish while its peers still read what it sent.
        {
            let mut core = self.core();
            for c in core.conn_ids() {
                if let Some(io) = core.conn_io(c) {
                    io.shutdown_write();
                }
            }
            core.drain();
        }
        let linger = deadline.min(Instant::now() + LINGER);
        let _ = self.wait(
            |core| (core.accounting().conns == 0).then_some(()),
            Some(linger),
        );
        self.closed.store(true, Ordering::SeqCst);
        let _ = self.waker.wake();
        if let Some(t) = lock(&self.background).take() {
            if t.thread().id() != std::thread::current().id() {
                let _ = t.join();
            }
        }
        let mut lp = lock(&self.lp);
        self.log_dropped(&mut lp, Instant::now(), true);
    }
}

/// Whether a connection from `local` to `peer` stays inside this machine: the
/// kernel carries a connection to loopback, or to one of the machine's own
/// addresses, over its loopback device.
pub fn same_machine(local: SocketAddr, peer: SocketAddr) -> bool {
    let p = peer.ip().to_canonical();
    p.is_loopback() || p == local.ip().to_canonical()
}

/// TCP keep-alive with short intervals: a dead host is noticed even on an idle link.
fn keepalive(s: &std::net::TcpStream) {
    let ka = socket2::TcpKeepalive::new()
        .with_time(Duration::from_secs(10))
        .with_interval(Duration::from_secs(5))
        .with_retries(3);
    let _ = socket2::SockRef::from(s).set_tcp_keepalive(&ka);
}

/// [`keepalive`] for a socket of the loop.
fn keepalive_fd(s: &TcpStream) {
    let ka = socket2::TcpKeepalive::new()
        .with_time(Duration::from_secs(10))
        .with_interval(Duration::from_secs(5))
        .with_retries(3);
    let _ = socket2::SockRef::from(s).set_tcp_keepalive(&ka);
}

fn background(engine: std::sync::Weak<Engine>) {
    // Waits callers had finished at the last look: one that moved since means they
    // drive the loop (counted rather than timed, so that a wait reads no clock).
    let mut seen = u64::MAX;
    loop {
        let Some(e) = engine.upgrade() else { return };
        if e.closed.load(Ordering::SeqCst) {
            return;
        }
        let waits = e.waits.load(Ordering::Relaxed);
        if e.active.load(Ordering::SeqCst) > 0 || waits != seen {
            seen = waits;
            drop(e);
            std::thread::sleep(CALLER_GRACE);
            continue;
        }
        e.bg_in_loop.store(true, Ordering::SeqCst);
        if e.active.load(Ordering::SeqCst) == 0 {
            if let Ok(mut lp) = e.lp.try_lock() {
                e.turn(&mut lp, Duration::from_millis(250));
            }
        }
        e.bg_in_loop.store(false, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::same_machine;

    #[test]
    fn links_to_loopback_or_our_own_address_stay_inside_the_machine() {
        let a = |s: &str| s.parse::<std::net::SocketAddr>().unwrap();
        assert!(same_machine(a("127.0.0.1:4000"), a("127.0.0.1:5000")));
        assert!(same_machine(a("127.0.0.1:4000"), a("127.0.0.5:5000")));
        assert!(same_machine(a("[::1]:4000"), a("[::1]:5000")));
        assert!(same_machine(
            a("[::ffff:127.0.0.1]:4000"),
            a("127.0.0.1:5000")
        ));
        assert!(same_machine(a("10.1.0.2:4000"), a("10.1.0.2:5000")));
        assert!(same_machine(
            a("[::ffff:10.1.0.2]:4000"),
            a("10.1.0.2:5000")
        ));
        assert!(!same_machine(a("10.1.0.2:4000"), a("10.1.0.3:5000")));
        assert!(!same_machine(a("127.0.0.1:4000"), a("10.1.0.3:5000")));
        assert!(!same_machine(
            a("[2001:db8::1]:4000"),
            a("[2001:db8::2]:5000")
        ));
    }
}
