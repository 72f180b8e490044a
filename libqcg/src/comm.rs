//! The communicator: links to the job's other processes, made on first use.

use crate::control::Control;
use crate::engine::core::{Limits, Outcome, RecvBuf, SendBuf};
use crate::engine::matching::Pattern;
use crate::engine::{Engine, Identity};
use crate::env::JobEnv;
use crate::error::{Error, Result};
use crate::mailbox::Message;
use qcg_wire::{AccessPoint, ClusterConfig, ProcName, Request, Response};
use std::collections::HashMap;
use std::net::{Shutdown, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How long a waiting caller polls, at most, before it sleeps in the kernel
/// (`QCG_SPIN_US`; the engine shortens it while waits last longer). A 1 MiB
/// ping-pong on loopback waits ~200 µs: with 100 µs the receiver slept and was woken
/// per chunk of the transfer (1 MiB in 400 µs); with 1 ms, 210 µs.
const SPIN: Duration = Duration::from_micros(1000);
/// How long the last communicator's drop waits for queued sends to leave.
const FLUSH_AT_EXIT: Duration = Duration::from_secs(60);
/// How long joining the job waits for a frontal or broker that is restarting.
const JOIN_PATIENCE: Duration = Duration::from_secs(60);

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

#[derive(Default)]
pub(crate) struct SentCount {
    messages: AtomicU64,
    bytes: AtomicU64,
}

pub(crate) struct Inner {
    pub(crate) env: JobEnv,
    pub(crate) control: Control,
    pub(crate) cluster: ClusterConfig,
    pub(crate) node: String,
    pub(crate) local: SocketAddr,
    pub(crate) engine: Arc<Engine>,
    /// Messages and bytes sent to each job rank: counted by every send (a pair of
    /// relaxed additions, no lock), read by [`Comm::link_stats`].
    pub(crate) sent: Box<[SentCount]>,
    pub(crate) reports: Mutex<Option<crate::link::Reporter>>,
    pub(crate) streams_unix: Mutex<Vec<std::os::unix::net::UnixStream>>,
    pub(crate) closed: AtomicBool,
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
    /// Whether a collective failed here (it may have left messages unreceived).
    pub(crate) coll_failed: std::sync::atomic::AtomicBool,
    /// The latest collective calls here: (sequence number, what this rank called).
    pub(crate) recent: Mutex<std::collections::VecDeque<(u32, crate::callsig::CallSig)>>,
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

impl Comm {
    /// Joins the job described by `env`: asks the node's helper where we are, binds
    /// our listener (inside the cluster's port range when it has one) and registers
    /// our access point.
    pub fn connect(env: JobEnv) -> Result<Comm> {
        // Settings first: a wrong one fails before anything is registered.
        let bind = bind_from_env()?;
        let coll_options = crate::coll::CollOptions::from_env()?;
        let topology = crate::topo::from_env(env.size)?;
        let control = Control::connect(&env.helper)?;
        let (cluster, node, bind_addr) =
            match control.request_patiently(&Request::NodeInfo, JOIN_PATIENCE)? {
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
        let listener = crate::link::direct::bind(bind_addr, &cluster.policy, env.rank)?;
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
        let notices = crate::link::subscribe(&env.helper, ProcName::new(&env.job, env.rank))?;
        control.request_patiently(&Request::Register(ap), JOIN_PATIENCE)?;
        tracing::debug!(job = %env.job, rank = env.rank, %local, cluster = %cluster.name, "registered");
        let engine = Engine::new(
            Identity {
                job: env.job.clone(),
                secret: env.secret,
                rank: env.rank,
                size: env.size,
                encrypt: crate::seal::Policy::from_env(env.size).map_err(|message| Error::Env {
                    var: qcg_wire::env::ENCRYPT,
                    message,
                })?,
            },
            Some(listener),
            limits_from_env()?,
            spin_from_env()?,
            local_cc_from_env()?,
            crate::engine::ShmMode::from_env().map_err(|message| Error::Env {
                var: qcg_wire::env::SHM,
                message,
            })?,
        )
        .map_err(|e| Error::Bind {
            addr: local.to_string(),
            message: format!("cannot start the progress engine: {e}"),
        })?;
        let env_helper = env.helper.clone();
        let reports = crate::link::reporter(&env_helper);
        engine.configure_dialing(crate::link::shell::Config {
            job: env.job.clone(),
            secret: env.secret,
            rank: env.rank,
            size: env.size,
            helper: env.helper.clone(),
            local,
            reports: reports.as_ref().map(|r| r.tx.clone()),
        });
        let sent = (0..env.size).map(|_| SentCount::default()).collect();
        let inner = Arc::new(Inner {
            env,
            control,
            cluster,
            node,
            local,
            engine,
            sent,
            reports: Mutex::new(reports),
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
            .spawn(move || crate::link::notice_loop(weak, notices));
        let size = inner.env.size;
        let mut topology = topology.unwrap_or_else(|| crate::topo::flat(size));
        // Ranks that share our node (our path in the topology, when it names one):
        // more of them than cores, and a waiting rank yields its core as it polls.
        // With a core each they are left alone: pinned, two ranks on two cores were
        // 3x slower at 4 MiB one-way (2.0 against 0.6 ms, the copies on one side
        // slow), though left to the kernel they shared a core for their first 13-35
        // ms in 3 of 12 runs.
        let me = inner.env.rank as usize;
        if topology.depth() > 0 && me < topology.size() {
            let local = (0..topology.size())
                .filter(|&r| topology.path(r) == topology.path(me))
                .count();
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            inner.engine.set_crowded(local > cores);
            inner.engine.set_node_ranks(local);
            if local > cores && bind {
                let index = (0..me)
                    .filter(|&r| topology.path(r) == topology.path(me))
                    .count();
                crate::affinity::pin(index, local);
            }
            // Every rank here: they all see these cores and price the node alike (a
            // job over several machines keeps its costs, which every rank shares).
            if local > cores
                && local == topology.size()
                && std::env::var(crate::topo::ENV_COSTS).is_err()
            {
                topology = crate::topo::crowded(topology, local, cores);
            }
        }
        let view = Arc::new(View {
            context: 0,
            ranks: (0..size).collect(),
            rank: inner.env.rank,
            topology,
            calls: Default::default(),
            coll_failed: Default::default(),
            recent: Default::default(),
            splits: Default::default(),
            options: Mutex::new(coll_options),
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
        // One lock of the engine in the usual case (a link there, a small message
        // that goes at once): the link checked, the send posted and taken.
        let posted = {
            let mut core = self.inner.engine.core();
            if core.send_now(dest, tag, context, data).is_some() {
                drop(core);
                self.count_sent(dest, data.len());
                return Ok(());
            }
            if dest == self.inner.env.rank || core.has_link(dest) || core.lost(dest).is_some() {
                // SAFETY: `data` outlives the request: it is taken here, or `finish`
                // does not return before the engine has completed it (a failed peer
                // completes it too).
                #[allow(unsafe_code)]
                let buf = SendBuf::Raw(unsafe { crate::engine::rawbuf::RawBuf::from_ref(data) });
                let id = core.post_send(dest, tag, context, buf);
                Some(core.take(id).ok_or(id))
            } else {
                None
            }
        };
        let id = match posted {
            Some(Ok(done)) => {
                self.count_sent(dest, data.len());
                return done.map(|_| ());
            }
            Some(Err(id)) => id,
            None => {
                self.ensure_link(dest)?;
                // SAFETY: as above.
                #[allow(unsafe_code)]
                let buf = SendBuf::Raw(unsafe { crate::engine::rawbuf::RawBuf::from_ref(data) });
                self.inner.engine.core().post_send(dest, tag, context, buf)
            }
        };
        self.count_sent(dest, data.len());
        self.finish(id).map(|_| ())
    }

    pub(crate) fn count_sent(&self, dest: u32, len: usize) {
        if dest == self.inner.env.rank {
            return;
        }
        if let Some(c) = self.inner.sent.get(dest as usize) {
            c.messages.fetch_add(1, Ordering::Relaxed);
            c.bytes.fetch_add(len as u64, Ordering::Relaxed);
        }
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
    pub fn link_technique(&self, rank: u32) -> Option<qcg_wire::Technique> {
        let g = self.view.ranks.get(rank as usize)?;
        self.inner.engine.technique(*g)
    }

    /// The TCP congestion control of the link to `rank` (a rank of this
    /// communicator), as the kernel reports it; `None` if there is no link yet. Links
    /// inside the machine get `QCG_LOCAL_TCP_CC`'s (`reno` by default).
    pub fn link_congestion(&self, rank: u32) -> Option<String> {
        let g = *self.view.ranks.get(rank as usize)?;
        self.inner.engine.link_congestion(g)
    }

    /// Whether the link we send to `rank` on (a rank of this communicator) is
    /// encrypted and authenticated ([`crate::seal`]); `None` if there is no link yet.
    pub fn link_sealed(&self, rank: u32) -> Option<bool> {
        let g = *self.view.ranks.get(rank as usize)?;
        self.inner.engine.core().link_io(g).map(|l| l.sealed())
    }

    /// What carries the link we send to `rank` on (a rank of this communicator):
    /// shared memory between ranks of one node, the network, or a relay proxy; `None`
    /// if there is no link yet.
    pub fn link_via(&self, rank: u32) -> Option<crate::engine::core::Via> {
        let g = *self.view.ranks.get(rank as usize)?;
        self.inner.engine.core().link_via(g)
    }

    /// Messages and bytes this process has sent to each peer (by job rank) over its
    /// links, every communicator and collective included.
    pub fn link_stats(&self) -> HashMap<u32, LinkStats> {
        self.inner
            .sent
            .iter()
            .enumerate()
            .filter_map(|(rank, c)| {
                let messages = c.messages.load(Ordering::Relaxed);
                (messages > 0).then(|| {
                    let bytes = c.bytes.load(Ordering::Relaxed);
                    (rank as u32, LinkStats { messages, bytes })
                })
            })
            .collect()
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
            coll_failed: std::sync::atomic::AtomicBool::new(v.coll_failed.load(Ordering::Relaxed)),
            recent: Mutex::new(lock(&v.recent).clone()),
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
    if let Some(v) = env_number(qcg_wire::env::EAGER_LIMIT)? {
        l.eager = v as usize;
    }
    if let Some(v) = env_number(qcg_wire::env::UNEXPECTED_LIMIT)? {
        l.unexpected = v as usize;
    }
    if let Some(v) = env_number(qcg_wire::env::LIVENESS)? {
        if v == 0 {
            return Err(Error::Env {
                var: qcg_wire::env::LIVENESS,
                message: "must be at least 1 second".into(),
            });
        }
        l.liveness = Duration::from_secs(v);
    }
    if l.eager > l.unexpected {
        return Err(Error::Env {
            var: qcg_wire::env::EAGER_LIMIT,
            message: format!(
                "the eager limit ({}) is above the unexpected-message limit ({})",
                l.eager, l.unexpected
            ),
        });
    }
    Ok(l)
}

/// The congestion control for links inside the machine: `QCG_LOCAL_TCP_CC`, `reno`
/// (in every Linux kernel, and allowed to every user) unless set; `system` keeps the
/// system's default. `None`: the system's.
pub fn local_cc_from_env() -> Result<Option<String>> {
    let var = qcg_wire::env::LOCAL_TCP_CC;
    match std::env::var(var) {
        Err(_) => Ok(Some("reno".to_string())),
        Ok(v) => parse_cc(&v).map_err(|message| Error::Env { var, message }),
    }
}

fn parse_cc(v: &str) -> std::result::Result<Option<String>, String> {
    let v = v.trim();
    if v == "system" {
        return Ok(None);
    }
    // The kernel's names: at most 15 bytes (TCP_CA_NAME_MAX is 16 with the NUL).
    let ok = !v.is_empty()
        && v.len() <= 15
        && v.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
    if !ok {
        return Err(format!(
            "`{v}` is not a congestion control's name (e.g. `reno`, `cubic`, `bbr`) nor `system`"
        ));
    }
    Ok(Some(v.to_string()))
}

/// `QCG_BIND`: whether a crowded node's ranks pin themselves to cores.
fn bind_from_env() -> Result<bool> {
    match std::env::var(qcg_wire::env::BIND) {
        Err(_) => Ok(true),
        Ok(v) => match v.trim() {
            "" | "auto" => Ok(true),
            "none" => Ok(false),
            other => Err(Error::Env {
                var: qcg_wire::env::BIND,
                message: format!("`{other}` is neither `auto` nor `none`"),
            }),
        },
    }
}

fn spin_from_env() -> Result<Duration> {
    Ok(env_number(qcg_wire::env::SPIN_US)?.map_or(SPIN, Duration::from_micros))
}

#[cfg(test)]
mod tests {
    use super::parse_cc;

    #[test]
    fn the_local_congestion_control_is_a_kernel_name_or_system() {
        assert_eq!(parse_cc("reno"), Ok(Some("reno".to_string())));
        assert_eq!(parse_cc(" cubic\n"), Ok(Some("cubic".to_string())));
        assert_eq!(parse_cc("system"), Ok(None));
        for bad in [
            "",
            "Reno",
            "bbr; rm -rf /",
            "a/b",
            "averyveryverylongname",
            "cc\0x",
        ] {
            let e = parse_cc(bad).unwrap_err();
            assert!(e.contains("not a congestion control"), "{bad:?}: {e}");
        }
    }
}
