//! The communicator: links to the job's other processes, made on first use.

use crate::control::Control;
use crate::env::JobEnv;
use crate::error::{Error, Result};
use crate::handshake;
use crate::mailbox::{Mailbox, Message};
use qcg_proto::{AccessPoint, ClusterConfig, ErrorKind, Policy, ProcName, Request, Response};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Time allowed for one TCP connect of a plan's attempt.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Time allowed for the job handshake on a new connection.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a lookup waits for a peer that has not registered yet.
const LOOKUP_PATIENCE: Duration = Duration::from_secs(60);
/// Data frame header: tag u32, context u32, length u64 (big-endian). The context keeps
/// communicators (and collective traffic) apart.
const HEADER: usize = 16;
/// How long the target of a simultaneous open waits before dialling.
const PUNCH_LAG: Duration = Duration::from_millis(30);
/// How long a receiver spins before it sleeps.
const SPIN: Duration = Duration::from_micros(50);
/// Messages up to this size go out in one write with their header.
const COALESCE: usize = 32 * 1024;
/// Largest message a peer may announce (64 GiB).
const MAX_MESSAGE: u64 = 1 << 36;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

struct Link {
    writer: Mutex<TcpStream>,
    /// How we made it (unset: the peer made it and we accepted).
    technique: std::sync::OnceLock<qcg_proto::Technique>,
}

/// What this process sent to one peer (user and collective traffic alike).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Messages sent.
    pub messages: u64,
    /// Payload bytes sent.
    pub bytes: u64,
}

struct Inner {
    env: JobEnv,
    control: Control,
    cluster: ClusterConfig,
    node: String,
    local: SocketAddr,
    links: Mutex<HashMap<u32, Arc<Link>>>,
    sent: Mutex<HashMap<u32, LinkStats>>,
    reports: Mutex<Option<Reporter>>,
    dialing: Mutex<()>,
    streams: Mutex<Vec<TcpStream>>,
    streams_unix: Mutex<Vec<std::os::unix::net::UnixStream>>,
    mail: Mutex<Mailbox>,
    arrived: Condvar,
    /// Messages (and link losses) so far: what a spinning receiver watches.
    arrivals: std::sync::atomic::AtomicU64,
    closed: AtomicBool,
}

/// A process's view of its job: its rank, the job's size, and messages to and from
/// every other rank.
///
/// Links are made lazily: the first `send` to a rank asks the grid for a plan and
/// tries its techniques in order. Messages from one rank with one tag are received in
/// the order they were sent.
pub struct Comm {
    inner: Arc<Inner>,
    view: Arc<View>,
    _closer: Arc<Closer>,
}

/// Which ranks of the job a communicator spans, and its message context.
pub(crate) struct View {
    pub(crate) context: u32,
    /// Global rank of each local rank.
    pub(crate) ranks: Vec<u32>,
    /// Our local rank.
    pub(crate) rank: u32,
    pub(crate) topology: qcg_coll::Topology,
    /// Collective calls made on this communicator (tags of successive calls differ).
    pub(crate) calls: std::sync::atomic::AtomicU32,
    /// Sub-communicators made from this one.
    pub(crate) splits: std::sync::atomic::AtomicU32,
    /// How collectives run.
    pub(crate) options: Mutex<crate::coll::CollOptions>,
    /// Schedules already built, per call shape (see `coll.rs`).
    pub(crate) schedules: Mutex<crate::coll::Schedules>,
}

impl View {
    pub(crate) fn global(&self, local: u32) -> u32 {
        self.ranks[local as usize]
    }

    pub(crate) fn local(&self, global: u32) -> Option<u32> {
        self.ranks
            .iter()
            .position(|&g| g == global)
            .map(|p| p as u32)
    }
}

/// Shuts the process's links down when the last communicator goes.
struct Closer(Arc<Inner>);

impl std::fmt::Debug for Comm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Comm")
            .field("job", &self.inner.env.job)
            .field("rank", &self.view.rank)
            .field("size", &self.view.ranks.len())
            .field("context", &self.view.context)
            .field("local", &self.inner.local)
            .finish()
    }
}

/// A socket with SO_REUSEADDR and SO_REUSEPORT, so that punching and traversal can
/// dial out from the listener's own port.
fn reusable(addr: SocketAddr) -> std::io::Result<socket2::Socket> {
    use socket2::{Domain, Socket, Type};
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    s.set_reuse_address(true)?;
    s.set_reuse_port(true)?;
    s.bind(&addr.into())?;
    Ok(s)
}

/// Our listener. It binds without SO_REUSEPORT, so it only gets a port nobody uses
/// (no second listener can share it), and turns SO_REUSEPORT on afterwards so our own
/// outgoing sockets can dial from the same port.
fn listen_on(addr: IpAddr, port: u16) -> std::io::Result<TcpListener> {
    use socket2::{Domain, Socket, Type};
    let a = SocketAddr::new(addr, port);
    let s = Socket::new(Domain::for_address(a), Type::STREAM, None)?;
    s.set_reuse_address(true)?;
    s.bind(&a.into())?;
    s.set_reuse_port(true)?;
    s.listen(1024)?;
    Ok(s.into())
}

/// Dials `to` from our listener's address and port.
fn dial_from(local: SocketAddr, to: SocketAddr, timeout: Duration) -> std::io::Result<TcpStream> {
    let s = reusable(local)?;
    s.connect_timeout(&to.into(), timeout)?;
    Ok(s.into())
}

fn bind(addr: IpAddr, policy: &Policy, rank: u32) -> Result<TcpListener> {
    match *policy {
        Policy::PortRange { lo, hi } => {
            let width = u32::from(hi - lo) + 1;
            // Start at a rank-dependent port so a node's processes do not all race
            // for the first one.
            let start = (rank + std::process::id()) % width;
            for i in 0..width {
                let port = lo + ((start + i) % width) as u16;
                if let Ok(l) = listen_on(addr, port) {
                    return Ok(l);
                }
            }
            Err(Error::Bind {
                addr: format!("{addr}:{lo}-{hi}"),
                message: "every port of the cluster's open range is in use".into(),
            })
        }
        _ => listen_on(addr, 0).map_err(|e| Error::Bind {
            addr: format!("{addr}:0"),
            message: e.to_string(),
        }),
    }
}

impl Comm {
    /// Joins the job described by `env`: asks the node's helper where we are, binds
    /// our listener (inside the cluster's port range when it has one) and registers
    /// our access point.
    pub fn connect(env: JobEnv) -> Result<Comm> {
        let control = Control::connect(&env.helper)?;
        let (cluster, node, bind_addr) = match control.request(&Request::NodeInfo)? {
            Response::Node {
                cluster,
                node,
                bind_addr,
            } => (cluster, node, bind_addr),
            other => {
                return Err(Error::Helper {
                    socket: env.helper.clone(),
                    message: format!("unexpected answer to node_info: {other:?}"),
                })
            }
        };
        let listener = bind(bind_addr, &cluster.policy, env.rank)?;
        let local = listener.local_addr().map_err(|e| Error::Bind {
            addr: bind_addr.to_string(),
            message: e.to_string(),
        })?;
        let ap = AccessPoint {
            process: ProcName::new(&env.job, env.rank),
            cluster: cluster.name.clone(),
            node: node.clone(),
            private_addr: local.ip(),
            public_addr: if cluster.nat.is_nat() {
                cluster.public_address
            } else {
                None
            },
            port: local.port(),
        };
        control.request(&Request::Register(ap))?;
        tracing::debug!(job = %env.job, rank = env.rank, %local, cluster = %cluster.name, "registered");
        let env_helper = env.helper.clone();
        let inner = Arc::new(Inner {
            env,
            control,
            cluster,
            node,
            local,
            links: Default::default(),
            sent: Default::default(),
            reports: Mutex::new(reporter(&env_helper)),
            dialing: Default::default(),
            streams: Default::default(),
            streams_unix: Default::default(),
            mail: Default::default(),
            arrived: Condvar::new(),
            arrivals: Default::default(),
            closed: AtomicBool::new(false),
        });
        // A second line to the helper, on which the grid tells us our part of links
        // other ranks make (connect back, punch, meet at a proxy).
        let notices = std::os::unix::net::UnixStream::connect(&inner.env.helper)
            .and_then(|mut s| {
                qcg_proto::frame::write_frame_sync(
                    &mut s,
                    &Request::Subscribe {
                        process: ProcName::new(&inner.env.job, inner.env.rank),
                    },
                )
                .map_err(std::io::Error::other)?;
                match qcg_proto::frame::read_frame_sync::<Response, _>(&mut s) {
                    Ok(Some(Response::Ok)) => Ok(s),
                    other => Err(std::io::Error::other(format!("subscribe: {other:?}"))),
                }
            })
            .map_err(|e| Error::Helper {
                socket: inner.env.helper.clone(),
                message: format!("cannot subscribe to notices: {e}"),
            })?;
        let weak = Arc::downgrade(&inner);
        lock(&inner.streams_unix).push(notices.try_clone().map_err(|e| Error::Helper {
            socket: inner.env.helper.clone(),
            message: e.to_string(),
        })?);
        let _ = std::thread::Builder::new()
            .name("qcg-notices".into())
            .spawn(move || notice_loop(weak, notices));
        let acc = inner.clone();
        std::thread::Builder::new()
            .name("qcg-accept".into())
            .spawn(move || accept_loop(acc, listener))
            .map_err(|e| Error::Bind {
                addr: local.to_string(),
                message: format!("cannot start the acceptor thread: {e}"),
            })?;
        let size = inner.env.size;
        let topology = crate::topo::from_env(size).unwrap_or_else(|| crate::topo::flat(size));
        let view = Arc::new(View {
            context: 0,
            ranks: (0..size).collect(),
            rank: inner.env.rank,
            topology,
            calls: Default::default(),
            splits: Default::default(),
            options: Mutex::new(crate::coll::CollOptions::from_env()),
            schedules: Mutex::default(),
        });
        Ok(Comm {
            _closer: Arc::new(Closer(inner.clone())),
            inner,
            view,
        })
    }

    /// A communicator over the same process with another view (sub-communicators).
    pub(crate) fn with_view(&self, view: View) -> Comm {
        Comm {
            inner: self.inner.clone(),
            view: Arc::new(view),
            _closer: self._closer.clone(),
        }
    }

    pub(crate) fn view(&self) -> &View {
        &self.view
    }

    /// This process's rank in this communicator.
    pub fn rank(&self) -> u32 {
        self.view.rank
    }

    /// Number of processes in this communicator.
    pub fn size(&self) -> u32 {
        self.view.ranks.len() as u32
    }

    /// This process's rank in the whole job.
    pub fn job_rank(&self) -> u32 {
        self.inner.env.rank
    }

    /// The global (job) rank of this communicator's rank `r`.
    pub fn job_rank_of(&self, r: u32) -> Option<u32> {
        self.view.ranks.get(r as usize).copied()
    }

    /// The communicator's topology: one path (site, node, …) per rank, and a cost per
    /// level, used by the collectives.
    pub fn topology(&self) -> &qcg_coll::Topology {
        &self.view.topology
    }

    /// The job's identifier.
    pub fn job(&self) -> &str {
        &self.inner.env.job
    }

    /// The cluster this process runs in.
    pub fn cluster(&self) -> &ClusterConfig {
        &self.inner.cluster
    }

    /// The node this process runs on.
    pub fn node(&self) -> &str {
        &self.inner.node
    }

    /// The address of this process's listener.
    pub fn local_addr(&self) -> SocketAddr {
        self.inner.local
    }

    fn check_rank(&self, rank: u32) -> Result<()> {
        if rank >= self.size() {
            return Err(Error::InvalidRank {
                rank,
                size: self.size(),
            });
        }
        Ok(())
    }

    /// Sends `data` to rank `dest` with `tag`. Returns once the bytes are handed to
    /// the operating system (the peer's library drains its links continuously, so a
    /// send never waits for the matching receive).
    pub fn send(&self, dest: u32, tag: u32, data: &[u8]) -> Result<()> {
        self.check_rank(dest)?;
        self.send_in(self.view.context, self.view.global(dest), tag, data)
    }

    /// Sends to a global rank in a context.
    pub(crate) fn send_in(&self, context: u32, dest: u32, tag: u32, data: &[u8]) -> Result<()> {
        let me = self.inner.env.rank;
        if dest == me {
            let mut mb = lock(&self.inner.mail);
            mb.push(
                context,
                Message {
                    source: dest,
                    tag,
                    data: data.to_vec(),
                },
            );
            self.inner.arrivals.fetch_add(1, Ordering::Release);
            self.inner.arrived.notify_all();
            return Ok(());
        }
        let link = self.link(dest)?;
        let mut w = lock(&link.writer);
        let mut header = [0u8; HEADER];
        header[..4].copy_from_slice(&tag.to_be_bytes());
        header[4..8].copy_from_slice(&context.to_be_bytes());
        header[8..].copy_from_slice(&(data.len() as u64).to_be_bytes());
        let r = if data.len() <= COALESCE {
            let mut buf = Vec::with_capacity(HEADER + data.len());
            buf.extend_from_slice(&header);
            buf.extend_from_slice(data);
            w.write_all(&buf)
        } else {
            w.write_all(&header).and_then(|_| w.write_all(data))
        };
        drop(w);
        r.map_err(|source| Error::Send { rank: dest, source })?;
        let mut sent = lock(&self.inner.sent);
        let st = sent.entry(dest).or_default();
        st.messages += 1;
        st.bytes += data.len() as u64;
        Ok(())
    }

    /// How the link to `rank` (a rank of this communicator) was made: the technique,
    /// if this process made it; `None` if the peer made it, or there is no link yet.
    pub fn link_technique(&self, rank: u32) -> Option<qcg_proto::Technique> {
        let g = self.view.ranks.get(rank as usize)?;
        lock(&self.inner.links)
            .get(g)
            .and_then(|l| l.technique.get().copied())
    }

    /// Messages and bytes this process has sent to each peer (by job rank) over its
    /// links, every communicator and collective included.
    pub fn link_stats(&self) -> HashMap<u32, LinkStats> {
        lock(&self.inner.sent).clone()
    }

    /// The same communicator with another topology (for collectives), e.g. one read
    /// from a file or measured. Its size must be this communicator's.
    pub fn with_topology(&self, topology: qcg_coll::Topology) -> Result<Comm> {
        if topology.size() != self.size() as usize {
            return Err(Error::InvalidArgument(format!(
                "a topology of {} ranks for a communicator of {}",
                topology.size(),
                self.size()
            )));
        }
        let v = &self.view;
        Ok(self.with_view(View {
            context: v.context,
            ranks: v.ranks.clone(),
            rank: v.rank,
            topology,
            calls: std::sync::atomic::AtomicU32::new(v.calls.load(Ordering::Relaxed)),
            splits: std::sync::atomic::AtomicU32::new(v.splits.load(Ordering::Relaxed)),
            options: Mutex::new(*lock(&v.options)),
            schedules: Mutex::default(),
        }))
    }

    /// Receives the oldest message matching `source` and `tag` (`None` = any),
    /// waiting as long as needed. Fails if the awaited peer is gone.
    pub fn recv(&self, source: Option<u32>, tag: Option<u32>) -> Result<Message> {
        self.recv_local(source, tag, None)
    }

    /// Like [`Comm::recv`], but gives up after `timeout`.
    pub fn recv_timeout(
        &self,
        source: Option<u32>,
        tag: Option<u32>,
        timeout: Duration,
    ) -> Result<Message> {
        self.recv_local(source, tag, Some(timeout))
    }

    fn recv_local(
        &self,
        source: Option<u32>,
        tag: Option<u32>,
        timeout: Option<Duration>,
    ) -> Result<Message> {
        if let Some(s) = source {
            self.check_rank(s)?;
        }
        let global = source.map(|s| self.view.global(s));
        let mut m = self.recv_in(self.view.context, global, tag, timeout)?;
        m.source = self.view.local(m.source).unwrap_or(m.source);
        Ok(m)
    }

    /// Receives from a global rank (or any) in a context; the message's source is the
    /// global rank.
    pub(crate) fn recv_in(
        &self,
        context: u32,
        source: Option<u32>,
        tag: Option<u32>,
        timeout: Option<Duration>,
    ) -> Result<Message> {
        self.recv_or_abort(context, source, tag, timeout, None)
    }

    /// Like `recv_in`, but a message of `context` with tag `abort` from anyone ends
    /// the wait: it is returned instead (the caller tells them apart by tag).
    pub(crate) fn recv_or_abort(
        &self,
        context: u32,
        source: Option<u32>,
        tag: Option<u32>,
        timeout: Option<Duration>,
        abort: Option<u32>,
    ) -> Result<Message> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let size = self.inner.env.size;
        let mut spin = true;
        let mut mb = lock(&self.inner.mail);
        loop {
            if let Some(m) = mb.take(context, source, tag) {
                return Ok(m);
            }
            if let Some(m) = abort.and_then(|a| mb.take(context, None, Some(a))) {
                return Ok(m);
            }
            match source {
                Some(s) => {
                    if let Some(reason) = mb.lost.get(&s) {
                        return Err(Error::PeerLost {
                            rank: s,
                            reason: reason.clone(),
                        });
                    }
                }
                None if size > 1 && mb.lost.len() as u32 >= size - 1 => {
                    return Err(Error::PeerLost {
                        rank: *mb.lost.keys().next().unwrap_or(&0),
                        reason: "every other rank is gone".into(),
                    })
                }
                None => {}
            }
            // Spin briefly before sleeping: a message that arrives within the spin
            // is taken without a futex wake-up and a rescheduling, which is most of
            // a small message's latency. Yielding keeps the reader threads running
            // when cores are scarce.
            if spin {
                spin = false;
                let seen = self.inner.arrivals.load(Ordering::Acquire);
                drop(mb);
                let start = Instant::now();
                while self.inner.arrivals.load(Ordering::Acquire) == seen && start.elapsed() < SPIN
                {
                    std::thread::yield_now();
                }
                mb = lock(&self.inner.mail);
                continue;
            }
            mb = match deadline {
                None => self
                    .inner
                    .arrived
                    .wait(mb)
                    .unwrap_or_else(|p| p.into_inner()),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        let from = source.map_or("any rank".to_string(), |s| format!("rank {s}"));
                        return Err(Error::Timeout {
                            what: format!("a message from {from}"),
                            secs: timeout.map_or(0.0, |t| t.as_secs_f64()),
                        });
                    }
                    self.inner
                        .arrived
                        .wait_timeout(mb, d - now)
                        .unwrap_or_else(|p| p.into_inner())
                        .0
                }
            };
        }
    }

    fn link(&self, dest: u32) -> Result<Arc<Link>> {
        if let Some(l) = lock(&self.inner.links).get(&dest) {
            return Ok(l.clone());
        }
        let _dialing = lock(&self.inner.dialing);
        if let Some(l) = lock(&self.inner.links).get(&dest) {
            return Ok(l.clone());
        }
        let plan = self.lookup(dest)?;
        let me = ProcName::new(&self.inner.env.job, self.inner.env.rank);
        let mut failures = Vec::new();
        for attempt in &plan.attempts {
            let r = self.attempt(attempt, dest);
            let ok = r.is_ok();
            self.report(Request::Report {
                from: me.clone(),
                target: plan.target.clone(),
                technique: attempt.technique,
                ok,
            });
            match r {
                Ok(link) => {
                    tracing::debug!(dest, technique = %attempt.technique, addr = %attempt.addr, "link made");
                    return Ok(link);
                }
                Err(e) => {
                    tracing::debug!(dest, technique = %attempt.technique, error = %e, "attempt failed");
                    failures.push(format!("{} to {}: {e}", attempt.technique, attempt.addr));
                }
            }
        }
        if failures.is_empty() {
            failures.push("the plan was empty".into());
        }
        Err(Error::NoLink {
            rank: dest,
            attempts: failures,
        })
    }

    /// Reports an attempt's outcome off the critical path of the first message.
    fn report(&self, req: Request) {
        if let Some(r) = lock(&self.inner.reports).as_ref() {
            let _ = r.tx.send(req);
        }
    }

    /// One attempt of a plan: a link to `dest`, or why not.
    fn attempt(
        &self,
        attempt: &qcg_proto::Attempt,
        dest: u32,
    ) -> std::result::Result<Arc<Link>, String> {
        use qcg_proto::Technique::*;
        let inner = &self.inner;
        let me = ProcName::new(&inner.env.job, inner.env.rank);
        let target = ProcName::new(&inner.env.job, dest);
        let rendezvous = |technique| -> std::result::Result<Response, String> {
            inner
                .control
                .request(&Request::Rendezvous {
                    from: me.clone(),
                    target: target.clone(),
                    technique,
                })
                .map_err(|e| e.to_string())
        };
        let stream = match attempt.technique {
            Direct | PortRange => TcpStream::connect_timeout(&attempt.addr, CONNECT_TIMEOUT)
                .map_err(|e| e.to_string())?,
            Reversed => {
                rendezvous(Reversed)?;
                // The target dials our listener; the acceptor makes the link.
                let until = Instant::now() + CONNECT_TIMEOUT + HANDSHAKE_TIMEOUT;
                while Instant::now() < until {
                    if let Some(l) = lock(&inner.links).get(&dest) {
                        let _ = l.technique.set(Reversed);
                        return Ok(l.clone());
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
                return Err("the target did not connect back in time".into());
            }
            Punched => {
                rendezvous(Punched)?;
                punch(inner.local, attempt.addr)?
            }
            Traversed => {
                inner
                    .control
                    .request(&Request::WatchSyn {
                        from: me.clone(),
                        target: target.clone(),
                        local: inner.local,
                        remote: attempt.addr,
                    })
                    .map_err(|e| e.to_string())?;
                dial_from(inner.local, attempt.addr, CONNECT_TIMEOUT).map_err(|e| e.to_string())?
            }
            Relayed => match rendezvous(Relayed)? {
                Response::Relay { proxy, token } => meet(proxy, &token)?,
                other => {
                    return Err(format!(
                        "unexpected answer to a relay rendezvous: {other:?}"
                    ))
                }
            },
        };
        let s = handshake_as(stream, inner, dest, Role::Initiator)?;
        Ok(add_link(inner, dest, s, Some(attempt.technique)))
    }

    fn lookup(&self, dest: u32) -> Result<qcg_proto::Plan> {
        let req = Request::Lookup {
            from: ProcName::new(&self.inner.env.job, self.inner.env.rank),
            target: ProcName::new(&self.inner.env.job, dest),
        };
        let start = Instant::now();
        let mut pause = Duration::from_millis(5);
        loop {
            match self.inner.control.request(&req) {
                Ok(Response::Plan(p)) => return Ok(p),
                Ok(other) => {
                    return Err(Error::Helper {
                        socket: self.inner.env.helper.clone(),
                        message: format!("unexpected answer to lookup: {other:?}"),
                    })
                }
                // The peer may simply not have started yet.
                Err(Error::Refused { reply, .. })
                    if reply.kind == ErrorKind::UnknownProcess
                        && start.elapsed() < LOOKUP_PATIENCE =>
                {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(200));
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// A thread with its own line to the helper that sends link reports, so that a new
/// link's first message does not wait for the broker to note the outcome.
struct Reporter {
    tx: std::sync::mpsc::Sender<Request>,
    thread: std::thread::JoinHandle<()>,
}

fn reporter(helper: &std::path::Path) -> Option<Reporter> {
    let control = Control::connect(helper).ok()?;
    let (tx, rx) = std::sync::mpsc::channel::<Request>();
    let thread = std::thread::Builder::new()
        .name("qcg-report".into())
        .spawn(move || {
            for req in rx {
                if let Err(e) = control.request(&req) {
                    tracing::debug!(error = %e, "link report not delivered");
                }
            }
        })
        .ok()?;
    Some(Reporter { tx, thread })
}

impl Drop for Closer {
    fn drop(&mut self) {
        let inner = &self.0;
        inner.closed.store(true, Ordering::SeqCst);
        // Closing the channel lets the reporter deliver what is queued and end; wait
        // for it, or the reports of the last links would be lost at exit.
        if let Some(r) = lock(&inner.reports).take() {
            drop(r.tx);
            let _ = r.thread.join();
        }
        let _ = inner.control.request(&Request::Unregister {
            process: ProcName::new(&inner.env.job, inner.env.rank),
        });
        for s in lock(&inner.streams).drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
        for s in lock(&inner.streams_unix).drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
        // Wake the acceptor so it sees `closed`.
        let _ = TcpStream::connect_timeout(&inner.local, Duration::from_millis(100));
    }
}

/// Which side of the job handshake a connection takes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    Initiator,
    Acceptor,
}

/// Runs the job handshake on a fresh connection with `peer`; the stream is ready for
/// data afterwards.
fn handshake_as(
    mut s: TcpStream,
    inner: &Inner,
    peer: u32,
    role: Role,
) -> std::result::Result<TcpStream, String> {
    let env = &inner.env;
    s.set_read_timeout(Some(HANDSHAKE_TIMEOUT))
        .and_then(|_| s.set_write_timeout(Some(HANDSHAKE_TIMEOUT)))
        .map_err(|e| e.to_string())?;
    match role {
        Role::Initiator => handshake::initiate(&mut s, &env.job, &env.secret, env.rank, peer)
            .map_err(|e| format!("handshake: {e}"))?,
        Role::Acceptor => {
            let from = handshake::accept(&mut s, &env.job, &env.secret, env.rank, env.size)
                .map_err(|e| format!("handshake: {e}"))?;
            if from != peer {
                return Err(format!("handshake: expected rank {peer}, got rank {from}"));
            }
        }
    }
    s.set_read_timeout(None)
        .and_then(|_| s.set_write_timeout(None))
        .and_then(|_| s.set_nodelay(true))
        .map_err(|e| e.to_string())?;
    Ok(s)
}

/// TCP simultaneous open: dial `to` from our listener's port, again and again until
/// the peer's SYN (sent at the same time toward us) lets one through.
fn punch(local: SocketAddr, to: SocketAddr) -> std::result::Result<TcpStream, String> {
    let until = Instant::now() + CONNECT_TIMEOUT;
    let mut last = String::from("no try");
    while Instant::now() < until {
        let left = until
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(10));
        match dial_from(local, to, left) {
            Ok(s) => return Ok(s),
            Err(e) => {
                last = e.to_string();
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
    Err(format!("simultaneous open failed: {last}"))
}

/// Meets the peer at a relay proxy: presents the token and waits for the pairing.
fn meet(proxy: SocketAddr, token: &str) -> std::result::Result<TcpStream, String> {
    let mut s = TcpStream::connect_timeout(&proxy, CONNECT_TIMEOUT)
        .map_err(|e| format!("proxy {proxy}: {e}"))?;
    s.write_all(b"QCGR")
        .and_then(|_| s.write_all(token.as_bytes()))
        .map_err(|e| format!("proxy {proxy}: {e}"))?;
    s.set_read_timeout(Some(CONNECT_TIMEOUT + HANDSHAKE_TIMEOUT))
        .map_err(|e| e.to_string())?;
    let mut k = [0u8; 1];
    match s.read(&mut k) {
        Ok(1) if k[0] == b'K' => Ok(s),
        Ok(_) => Err(format!("proxy {proxy} refused the token")),
        Err(e) => Err(format!("proxy {proxy}: no pairing: {e}")),
    }
}

/// Acts on a notice from the grid: our part of a link another rank is making.
fn on_notice(inner: &Arc<Inner>, notice: qcg_proto::Notice) {
    use qcg_proto::Notice;
    let (from, result) = match notice {
        Notice::ConnectBack { from, addr } => (
            from.clone(),
            TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT)
                .map_err(|e| e.to_string())
                .and_then(|s| handshake_as(s, inner, from.rank, Role::Initiator)),
        ),
        Notice::Punch { from, addr } => (from.clone(), {
            // Let the initiator's SYN leave first: behind real firewalls either order
            // works, but where nothing blocks (one host), our SYN reaching its listener
            // first would take the 4-tuple its own dial needs.
            std::thread::sleep(PUNCH_LAG);
            punch(inner.local, addr).and_then(|s| handshake_as(s, inner, from.rank, Role::Acceptor))
        }),
        Notice::Relay { from, proxy, token } => (
            from.clone(),
            meet(proxy, &token).and_then(|s| handshake_as(s, inner, from.rank, Role::Acceptor)),
        ),
        Notice::Inject { .. } => return,
    };
    if from.job != inner.env.job || from.rank >= inner.env.size {
        tracing::warn!(%from, "ignored a notice about a process of another job");
        return;
    }
    match result {
        Ok(s) => {
            add_link(inner, from.rank, s, None);
        }
        Err(e) => tracing::warn!(peer = from.rank, error = %e, "could not take our part of a link"),
    }
}

/// Reads notices from the helper until it hangs up; each is handled on its own thread.
fn notice_loop(inner: std::sync::Weak<Inner>, mut stream: std::os::unix::net::UnixStream) {
    loop {
        let n = match qcg_proto::frame::read_frame_sync::<Response, _>(&mut stream) {
            Ok(Some(Response::Notice(n))) => n,
            Ok(Some(_)) => continue,
            _ => return,
        };
        let Some(inner) = inner.upgrade() else { return };
        if inner.closed.load(Ordering::SeqCst) {
            return;
        }
        let _ = std::thread::Builder::new()
            .name("qcg-notice".into())
            .spawn(move || on_notice(&inner, n));
    }
}

fn add_link(
    inner: &Arc<Inner>,
    rank: u32,
    stream: TcpStream,
    technique: Option<qcg_proto::Technique>,
) -> Arc<Link> {
    let (reader, keep) = match (stream.try_clone(), stream.try_clone()) {
        (Ok(r), Ok(k)) => (r, k),
        _ => {
            // Out of descriptors: the link still works for sending.
            return Arc::new(Link {
                writer: Mutex::new(stream),
                technique: technique.map(std::sync::OnceLock::from).unwrap_or_default(),
            });
        }
    };
    lock(&inner.streams).push(keep);
    let new = Arc::new(Link {
        writer: Mutex::new(stream),
        technique: technique.map(std::sync::OnceLock::from).unwrap_or_default(),
    });
    // If both ends dialled at once there are two connections; keep sending on the
    // first one registered, so order per (source, tag) holds. Both are read.
    let link = lock(&inner.links).entry(rank).or_insert(new).clone();
    let inn = inner.clone();
    let _ = std::thread::Builder::new()
        .name(format!("qcg-recv-{rank}"))
        .spawn(move || read_loop(inn, rank, reader));
    link
}

fn read_loop(inner: Arc<Inner>, rank: u32, mut s: TcpStream) {
    let reason = loop {
        let mut header = [0u8; HEADER];
        if let Err(e) = s.read_exact(&mut header) {
            break if e.kind() == std::io::ErrorKind::UnexpectedEof {
                "it closed its link".to_string()
            } else {
                format!("link error: {e}")
            };
        }
        let tag = u32::from_be_bytes([header[0], header[1], header[2], header[3]]);
        let context = u32::from_be_bytes([header[4], header[5], header[6], header[7]]);
        let len = u64::from_be_bytes([
            header[8], header[9], header[10], header[11], header[12], header[13], header[14],
            header[15],
        ]);
        if len > MAX_MESSAGE {
            break format!(
                "announced a message of {len} bytes, above the {MAX_MESSAGE}-byte limit"
            );
        }
        // read_to_end into spare capacity: no zero-filling of large buffers.
        let mut data = Vec::with_capacity(len as usize);
        match (&mut s).take(len).read_to_end(&mut data) {
            Ok(n) if n as u64 == len => {}
            Ok(n) => break format!("link closed after {n} of a message's {len} bytes"),
            Err(e) => break format!("link broke inside a message of {len} bytes: {e}"),
        }
        lock(&inner.mail).push(
            context,
            Message {
                source: rank,
                tag,
                data,
            },
        );
        inner.arrivals.fetch_add(1, Ordering::Release);
        inner.arrived.notify_all();
    };
    if !inner.closed.load(Ordering::SeqCst) {
        tracing::debug!(rank, %reason, "link ended");
        lock(&inner.mail).lost.insert(rank, reason);
        inner.arrivals.fetch_add(1, Ordering::Release);
        inner.arrived.notify_all();
    }
}

fn accept_loop(inner: Arc<Inner>, listener: TcpListener) {
    for conn in listener.incoming() {
        if inner.closed.load(Ordering::SeqCst) {
            return;
        }
        let Ok(mut s) = conn else { continue };
        let inn = inner.clone();
        let _ = std::thread::Builder::new()
            .name("qcg-handshake".into())
            .spawn(move || {
                let peer = s
                    .peer_addr()
                    .map_or_else(|_| "?".to_string(), |a| a.to_string());
                let setup = s
                    .set_read_timeout(Some(HANDSHAKE_TIMEOUT))
                    .and_then(|_| s.set_write_timeout(Some(HANDSHAKE_TIMEOUT)));
                if setup.is_err() {
                    return;
                }
                let env = &inn.env;
                match handshake::accept(&mut s, &env.job, &env.secret, env.rank, env.size) {
                    Ok(from) => {
                        let ok = s
                            .set_read_timeout(None)
                            .and_then(|_| s.set_write_timeout(None))
                            .and_then(|_| s.set_nodelay(true));
                        if ok.is_ok() {
                            add_link(&inn, from, s, None);
                        }
                    }
                    Err(e) => {
                        if !inn.closed.load(Ordering::SeqCst) {
                            tracing::warn!(%peer, error = %e, "dropped a connection that is not a link of this job");
                        }
                    }
                }
            });
    }
}
