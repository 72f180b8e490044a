//! The communicator: links to the job's other processes, made on first use.

use crate::control::Control;
use crate::engine::core::{Limits, Outcome, RecvBuf, SendBuf};
use crate::engine::matching::Pattern;
use crate::engine::{Engine, Identity};
use crate::env::JobEnv;
use crate::error::{Error, Result};
use crate::handshake;
use crate::mailbox::Message;
use qcg_proto::{AccessPoint, ClusterConfig, ErrorKind, Policy, ProcName, Request, Response};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Time allowed for one TCP connect of a plan's attempt.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Time allowed for the job handshake on a new connection.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a lookup waits for a peer that has not registered yet.
const LOOKUP_PATIENCE: Duration = Duration::from_secs(60);
/// How long the target of a simultaneous open waits before dialling.
const PUNCH_LAG: Duration = Duration::from_millis(30);
/// How long a waiting caller polls before it sleeps in the kernel (`QCG_SPIN_US`).
const SPIN: Duration = Duration::from_micros(100);
/// How long the last communicator's drop waits for queued sends to leave.
const FLUSH_AT_EXIT: Duration = Duration::from_secs(60);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// What this process sent to one peer (user and collective traffic alike).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Messages sent.
    pub messages: u64,
    /// Payload bytes sent.
    pub bytes: u64,
}

pub(crate) struct Inner {
    env: JobEnv,
    control: Control,
    cluster: ClusterConfig,
    node: String,
    local: SocketAddr,
    pub(crate) engine: Arc<Engine>,
    /// How we made each link (absent: the peer made it and we accepted).
    techniques: Mutex<HashMap<u32, qcg_proto::Technique>>,
    sent: Mutex<HashMap<u32, LinkStats>>,
    reports: Mutex<Option<Reporter>>,
    /// One lock per peer being dialled: making one link never waits for another.
    dialing: Mutex<HashMap<u32, Arc<Mutex<()>>>>,
    streams_unix: Mutex<Vec<std::os::unix::net::UnixStream>>,
    closed: AtomicBool,
}

/// A process's view of its job: its rank, the job's size, and messages to and from
/// every other rank.
///
/// Links are made lazily: the first `send` to a rank asks the grid for a plan and
/// tries its techniques in order. Messages from one rank with one tag are received in
/// the order they were sent.
pub struct Comm {
    pub(crate) inner: Arc<Inner>,
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
        // Subscribe before registering: once a peer can find us, the grid may already
        // have notices for us (connect back, punch, relay).
        let notices = subscribe(&env.helper, ProcName::new(&env.job, env.rank))?;
        control.request(&Request::Register(ap))?;
        tracing::debug!(job = %env.job, rank = env.rank, %local, cluster = %cluster.name, "registered");
        let engine = Engine::new(
            Identity {
                job: env.job.clone(),
                secret: env.secret,
                rank: env.rank,
                size: env.size,
            },
            Some(listener),
            limits_from_env()?,
            spin_from_env()?,
        )
        .map_err(|e| Error::Bind {
            addr: local.to_string(),
            message: format!("cannot start the progress engine: {e}"),
        })?;
        let env_helper = env.helper.clone();
        let inner = Arc::new(Inner {
            env,
            control,
            cluster,
            node,
            local,
            engine,
            techniques: Default::default(),
            sent: Default::default(),
            reports: Mutex::new(reporter(&env_helper)),
            dialing: Default::default(),
            streams_unix: Default::default(),
            closed: AtomicBool::new(false),
        });
        let weak = Arc::downgrade(&inner);
        lock(&inner.streams_unix).push(notices.try_clone().map_err(|e| Error::Helper {
            socket: inner.env.helper.clone(),
            message: e.to_string(),
        })?);
        let _ = std::thread::Builder::new()
            .name("qcg-notices".into())
            .spawn(move || notice_loop(weak, notices));
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

    pub(crate) fn view_arc(&self) -> Arc<View> {
        self.view.clone()
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

    /// Sends to a global rank in a context: waits until the bytes are with the
    /// kernel (small messages) or in the receiver's buffer (large ones).
    pub(crate) fn send_in(&self, context: u32, dest: u32, tag: u32, data: &[u8]) -> Result<()> {
        self.ensure_link(dest)?;
        // SAFETY: `data` outlives the request: `finish` does not return before the
        // engine has completed it (a failed peer completes it too).
        #[allow(unsafe_code)]
        let buf = SendBuf::Raw(unsafe { crate::engine::rawbuf::RawBuf::from_ref(data) });
        let id = self.inner.engine.core().post_send(dest, tag, context, buf);
        self.count_sent(dest, data.len());
        self.finish(id).map(|_| ())
    }

    pub(crate) fn count_sent(&self, dest: u32, len: usize) {
        if dest == self.inner.env.rank {
            return;
        }
        let mut sent = lock(&self.inner.sent);
        let st = sent.entry(dest).or_default();
        st.messages += 1;
        st.bytes += len as u64;
    }

    /// Waits for engine request `id` to complete and takes its outcome.
    pub(crate) fn finish(&self, id: usize) -> Result<Outcome> {
        self.inner
            .engine
            .wait(|core| core.take(id), None)
            .unwrap_or_else(|| Err(Error::InvalidArgument("request vanished".into())))
    }

    /// Makes sure a link to global rank `dest` exists (or that it is us).
    pub(crate) fn ensure_link(&self, dest: u32) -> Result<()> {
        if dest == self.inner.env.rank {
            return Ok(());
        }
        {
            let core = self.inner.engine.core();
            if core.has_link(dest) {
                return Ok(());
            }
            if let Some(reason) = core.lost(dest) {
                return Err(Error::PeerLost {
                    rank: dest,
                    reason: reason.to_string(),
                });
            }
        }
        self.link(dest)
    }

    /// How the link to `rank` (a rank of this communicator) was made: the technique,
    /// if this process made it; `None` if the peer made it, or there is no link yet.
    pub fn link_technique(&self, rank: u32) -> Option<qcg_proto::Technique> {
        let g = self.view.ranks.get(rank as usize)?;
        lock(&self.inner.techniques).get(g).copied()
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
        let engine = &self.inner.engine;
        let pattern = Pattern {
            context,
            source,
            tag,
        };
        let id = engine.core().post_recv(pattern, RecvBuf::Alloc(Vec::new()));
        let abort = abort.map(|a| Pattern {
            context,
            source: None,
            tag: Some(a),
        });
        let deadline = timeout.map(|t| Instant::now() + t);
        enum Woke {
            Done(Result<Outcome>),
            Abort,
        }
        let woke = engine.wait(
            |core| {
                if let Some(r) = core.take(id) {
                    return Some(Woke::Done(r));
                }
                match abort {
                    Some(a) if matches!(core.iprobe(&a), Ok(Some(_))) => Some(Woke::Abort),
                    _ => None,
                }
            },
            deadline,
        );
        let outcome = match woke {
            Some(Woke::Done(r)) => r?,
            Some(Woke::Abort) | None => {
                if !engine.core().cancel(id) {
                    // Already matched: it completes; take it.
                    self.finish(id)?
                } else {
                    let _ = engine.core().take(id);
                    match woke {
                        Some(Woke::Abort) => {
                            let a = abort.map(|a| a.tag).unwrap_or_default();
                            return self.recv_in(context, None, a, None);
                        }
                        _ => {
                            let from =
                                source.map_or("any rank".to_string(), |s| format!("rank {s}"));
                            return Err(Error::Timeout {
                                what: format!("a message from {from}"),
                                secs: timeout.map_or(0.0, |t| t.as_secs_f64()),
                            });
                        }
                    }
                }
            }
        };
        match outcome {
            Outcome::Received(st, data) => Ok(Message {
                source: st.source,
                tag: st.tag,
                data: data.unwrap_or_default(),
            }),
            other => Err(Error::InvalidArgument(format!(
                "a receive ended as {other:?}"
            ))),
        }
    }

    fn link(&self, dest: u32) -> Result<()> {
        let gate = lock(&self.inner.dialing).entry(dest).or_default().clone();
        let _dialing = lock(&gate);
        if self.inner.engine.core().has_link(dest) {
            return Ok(());
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
                Ok(()) => {
                    tracing::debug!(dest, technique = %attempt.technique, addr = %attempt.addr, "link made");
                    lock(&self.inner.techniques).insert(dest, attempt.technique);
                    return Ok(());
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
    fn attempt(&self, attempt: &qcg_proto::Attempt, dest: u32) -> std::result::Result<(), String> {
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
                    if inner.engine.core().has_link(dest) {
                        return Ok(());
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
        inner
            .engine
            .add_link(dest, s)
            .map_err(|e| format!("cannot add the link to the engine: {e}"))
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
        // Queued sends leave before we go (a program may exit right after a send).
        inner.engine.shutdown(FLUSH_AT_EXIT);
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
        for s in lock(&inner.streams_unix).drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
        inner.engine.close_links();
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
            if let Err(e) = inner.engine.add_link(from.rank, s) {
                tracing::warn!(peer = from.rank, error = %e, "could not add a link to the engine");
            }
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

/// Subscribes to the grid's notices for `process` on a line of its own.
fn subscribe(
    helper: &std::path::Path,
    process: ProcName,
) -> Result<std::os::unix::net::UnixStream> {
    std::os::unix::net::UnixStream::connect(helper)
        .and_then(|mut s| {
            qcg_proto::frame::write_frame_sync(&mut s, &Request::Subscribe { process })
                .map_err(std::io::Error::other)?;
            match qcg_proto::frame::read_frame_sync::<Response, _>(&mut s) {
                Ok(Some(Response::Ok)) => Ok(s),
                other => Err(std::io::Error::other(format!("subscribe: {other:?}"))),
            }
        })
        .map_err(|e| Error::Helper {
            socket: helper.to_path_buf(),
            message: format!("cannot subscribe to notices: {e}"),
        })
}

fn env_number(var: &'static str) -> Result<Option<u64>> {
    match std::env::var(var) {
        Err(_) => Ok(None),
        Ok(v) => v.trim().parse::<u64>().map(Some).map_err(|_| Error::Env {
            var,
            message: format!("`{v}` is not a whole number"),
        }),
    }
}

/// The engine's limits: `QCG_EAGER_LIMIT` (bytes, default 64 KiB),
/// `QCG_UNEXPECTED_LIMIT` (bytes, default 64 MiB), `QCG_LIVENESS` (seconds, default 30).
pub fn limits_from_env() -> Result<Limits> {
    let mut l = Limits::default();
    if let Some(v) = env_number("QCG_EAGER_LIMIT")? {
        l.eager = v as usize;
    }
    if let Some(v) = env_number("QCG_UNEXPECTED_LIMIT")? {
        l.unexpected = v as usize;
    }
    if let Some(v) = env_number("QCG_LIVENESS")? {
        if v == 0 {
            return Err(Error::Env {
                var: "QCG_LIVENESS",
                message: "must be at least 1 second".into(),
            });
        }
        l.liveness = Duration::from_secs(v);
    }
    if l.eager > l.unexpected {
        return Err(Error::Env {
            var: "QCG_EAGER_LIMIT",
            message: format!(
                "the eager limit ({}) is above the unexpected-message limit ({})",
                l.eager, l.unexpected
            ),
        });
    }
    Ok(l)
}

fn spin_from_env() -> Result<Duration> {
    Ok(env_number("QCG_SPIN_US")?.map_or(SPIN, Duration::from_micros))
}
