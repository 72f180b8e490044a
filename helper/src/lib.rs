//! The qcg helper: one per node.
//!
//! Local processes talk to it over a unix socket, in the same frames the rest of the
//! control plane uses; it answers what it knows (which node this is, which address to
//! bind) and relays registrations and lookups to its cluster's frontal over QUIC with
//! mutual TLS.
//!
//! It also starts the processes of submitted jobs: on connecting it tells the frontal
//! its node ([`node::detect`] gives the defaults), then answers the frontal's
//! `Launch` and `Kill` requests ([`procs`]). Each process runs in its own process
//! group; its output lines and its end go back up to the broker.
//!
//! ```no_run
//! # async fn f(id: qcg_proto::tls::Identity) -> anyhow::Result<()> {
//! let helper = qcg_helper::Helper::start(
//!     id,
//!     "node-1".into(),
//!     "127.0.0.1:7701".parse()?,
//!     "/tmp/qcg-node-1.sock".into(),
//!     "127.0.0.1".parse()?,
//! )
//! .await?;
//! # Ok(()) }
//! ```

pub mod access;
pub mod accounts;
pub mod config;
pub mod metrics;
pub mod node;
pub mod pgroup;
pub mod procs;
pub mod raw;

use qcg_proto::frame::{self, FrameError};
use qcg_proto::quic::{self, Upstream};
use qcg_proto::tls::{Identity, Role};
use qcg_proto::{ErrorKind, NodeSpec, Request, Response};
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{UnixListener, UnixStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

type Subscribers = std::sync::Mutex<
    std::collections::HashMap<
        qcg_proto::ProcName,
        tokio::sync::mpsc::UnboundedSender<qcg_proto::Notice>,
    >,
>;

struct Inner {
    /// Processes of this node waiting for notices.
    subs: Subscribers,
    node: String,
    bind_addr: IpAddr,
    frontal: Arc<Upstream>,
    socket: PathBuf,
    procs: Arc<procs::Procs>,
    /// Which user owns each job on this node ([`access`]).
    owners: std::sync::Mutex<std::collections::HashMap<String, u32>>,
    /// This machine's boot id, named with the uid of requests for jobs the helper
    /// did not start ([`qcg_proto::LocalUser`]).
    machine: String,
    /// What it counts ([`metrics`]).
    metrics: Arc<metrics::Metrics>,
}

/// A running helper.
pub struct Helper {
    /// The unix socket processes connect to.
    pub socket: PathBuf,
    procs: Arc<procs::Procs>,
    endpoint: quinn::Endpoint,
    cancel: CancellationToken,
    tracker: TaskTracker,
    metrics: Arc<metrics::Metrics>,
}

/// Why a helper did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The QUIC endpoint toward the frontal could not be made (the certificate,
    /// key or CA, or a local UDP port).
    #[error("cannot make the QUIC endpoint toward the frontal: {0}")]
    Quic(#[from] qcg_proto::quic::QuicError),
    /// Another helper answers on the socket (config field `socket`).
    #[error("{} is in use by another helper (config field `socket`)", .0.display())]
    SocketInUse(PathBuf),
    /// The socket could not be made (config fields `socket`, `socket_group`).
    #[error("cannot {what} {} (config field `socket`): {source}", path.display())]
    Socket {
        /// What was being done.
        what: &'static str,
        /// The socket's path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The metrics address (`metrics_listen`) could not be bound.
    #[error(transparent)]
    Metrics(#[from] qcg_proto::metrics::BindError),
}

/// Answers what the frontal asks of this helper: start or kill processes, pass a
/// notice to one of our processes or inject a SYN.
fn frontal_handler(
    weak: std::sync::Weak<Inner>,
) -> impl Fn(
    Request,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Response> + Send + 'static>>
       + Clone
       + Send
       + Sync
       + 'static {
    move |req: Request| {
        let weak = weak.clone();
        let span = qcg_proto::request_span!(&req);
        Box::pin(
            async move {
                let resp = match weak.upgrade() {
                    Some(inner) => answer_frontal(&inner, req).await,
                    None => Response::error(ErrorKind::Unavailable, "the helper is stopping"),
                };
                qcg_proto::answered!(&resp);
                resp
            }
            .instrument(span),
        )
    }
}

async fn answer_frontal(inner: &Inner, req: Request) -> Response {
    match req {
        Request::Launch(spec) => {
            lock(&inner.owners).insert(spec.job.clone(), access::LAUNCHED);
            inner
                .procs
                .launch(&spec, &inner.node, &inner.socket, inner.frontal.clone())
        }
        Request::Kill { job } => {
            inner.procs.kill(&job);
            lock(&inner.owners).remove(&job);
            Response::Ok
        }
        Request::Echo { payload } => Response::Echoed {
            len: payload.len() as u64,
        },
        Request::OpenCheck { node, ports } => {
            if node != inner.node {
                return Response::error(
                    ErrorKind::Forbidden,
                    format!("this helper serves node {}, not {node}", inner.node),
                );
            }
            match check_listener(inner.bind_addr, ports).await {
                Ok(addr) => Response::Listening { addr },
                Err(e) => Response::error(
                    ErrorKind::Unavailable,
                    format!(
                        "cannot listen for a reachability check on {}: {e}",
                        inner.bind_addr
                    ),
                ),
            }
        }
        Request::NatCheck { node, proxy } => {
            if node != inner.node {
                return Response::error(
                    ErrorKind::Forbidden,
                    format!("this helper serves node {}, not {node}", inner.node),
                );
            }
            match tokio::time::timeout(CHECK_OPEN, whoami(inner.bind_addr, proxy)).await {
                Ok(Ok((local, seen))) => Response::Seen { local, seen },
                Ok(Err(e)) => Response::error(
                    ErrorKind::Unavailable,
                    format!("NAT check through the proxy at {proxy}: {e}"),
                ),
                Err(_) => Response::error(
                    ErrorKind::Unavailable,
                    format!(
                        "NAT check through the proxy at {proxy} timed out after {} s",
                        CHECK_OPEN.as_secs()
                    ),
                ),
            }
        }
        req @ Request::Notify { .. } => notice(inner, req).await,
        other => Response::error(
            ErrorKind::Forbidden,
            format!(
                "a helper does not answer `{}` from its frontal",
                other.kind()
            ),
        ),
    }
}

/// How long a check listener stays open.
const CHECK_OPEN: Duration = Duration::from_secs(10);
/// Connections a check listener takes before it closes.
const CHECK_ACCEPTS: usize = 8;

/// Listens on `ip` (on a port of `ports`, when the cluster opens only those) for
/// [`CHECK_OPEN`], as a process would, so that a dial from outside the cluster shows
/// what its firewall lets in. What connects is closed at once.
async fn check_listener(ip: IpAddr, ports: Option<(u16, u16)>) -> std::io::Result<SocketAddr> {
    let listener = match ports {
        None => tokio::net::TcpListener::bind((ip, 0)).await?,
        Some((lo, hi)) => {
            let mut found = None;
            let span = u32::from(hi.saturating_sub(lo)) + 1;
            let start = std::process::id() % span;
            for k in 0..span.min(200) {
                let port = lo + ((start + k) % span) as u16;
                if let Ok(l) = tokio::net::TcpListener::bind((ip, port)).await {
                    found = Some(l);
                    break;
                }
            }
            found.ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::AddrInUse,
                    format!("no free port in {lo}-{hi}"),
                )
            })?
        }
    };
    let addr = listener.local_addr()?;
    tokio::spawn(
        async move {
            let until = tokio::time::Instant::now() + CHECK_OPEN;
            for _ in 0..CHECK_ACCEPTS {
                match tokio::time::timeout_at(until, listener.accept()).await {
                    Ok(Ok((s, from))) => {
                        tracing::debug!(%from, "reachability check connected");
                        drop(s);
                    }
                    _ => break,
                }
            }
        }
        .instrument(tracing::error_span!("check_listener", listen = %addr)),
    );
    Ok(addr)
}

/// Connects to the relay proxy at `proxy` from `ip`, as a process's dial would
/// leave the node, and asks where it sees us from: (our address, the one it saw).
async fn whoami(ip: IpAddr, proxy: SocketAddr) -> std::io::Result<(SocketAddr, SocketAddr)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let socket = match ip {
        IpAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
        IpAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
    };
    socket.bind(SocketAddr::new(ip, 0))?;
    let mut s = socket.connect(proxy).await?;
    let local = s.local_addr()?;
    s.write_all(b"QCGW").await?;
    let mut line = Vec::new();
    (&mut s).take(64).read_to_end(&mut line).await?;
    let text = String::from_utf8_lossy(&line);
    let seen = text.trim().parse().map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("the proxy answered {:?}, not an address", text.trim()),
        )
    })?;
    Ok((local, seen))
}

impl Helper {
    /// Starts serving processes on `socket` (replacing a stale socket file), with the
    /// node's figures read from this machine ([`node::detect`]).
    pub async fn start(
        id: Identity,
        node: String,
        frontal: SocketAddr,
        socket: PathBuf,
        bind_addr: IpAddr,
    ) -> Result<Helper, StartError> {
        let spec = node::detect(&node);
        Helper::start_with(id, spec, frontal, socket, bind_addr).await
    }

    /// Like [`Helper::start`], with the node's figures given. Job processes run as
    /// the default [`accounts::Accounts`] say: the `qcg` user, never root.
    pub async fn start_with(
        id: Identity,
        node: NodeSpec,
        frontal: SocketAddr,
        socket: PathBuf,
        bind_addr: IpAddr,
    ) -> Result<Helper, StartError> {
        Helper::start_full(
            id,
            node,
            frontal,
            socket,
            bind_addr,
            None,
            accounts::Accounts::default(),
        )
        .await
    }

    /// Like [`Helper::start_with`], with the socket's group (`None`: the helper's
    /// own group) and the accounts job processes run as.
    pub async fn start_full(
        id: Identity,
        node: NodeSpec,
        frontal: SocketAddr,
        socket: PathBuf,
        bind_addr: IpAddr,
        socket_group: Option<u32>,
        accounts: accounts::Accounts,
    ) -> Result<Helper, StartError> {
        let endpoint = quic::client_endpoint(&id)?;
        let caps = socket_caps(qcg_proto::limits::nofile());
        let counts = Arc::new(metrics::Metrics::new(caps.clone()));
        // The broker places a job only on nodes that can run it as someone.
        let mut node = node;
        let uid = rustix::process::getuid().as_raw();
        node.submitters = accounts.submitters(uid);
        if node.submitters.as_ref().is_some_and(|s| s.is_empty()) {
            let why = match accounts.resolve(None, uid) {
                Err(e) => e.to_string(),
                Ok(_) => "no default account".to_string(),
            };
            tracing::error!(
                reason = %why,
                "no account can run a job on this node (default account: {why}; no mapped \
                 account works either): the broker will place no job here; see [accounts] \
                 in the helper's config"
            );
        }
        warn_unreachable_socket(&accounts, uid, socket_group);
        if let Some(pool) = &accounts.pool {
            if uid == 0 {
                tracing::info!(
                    first = pool.first,
                    count = pool.count,
                    gid = pool.gid,
                    "unmapped submitters' jobs run each under a uid of its own from the job pool"
                );
            } else {
                tracing::error!(
                    "[accounts.pool] needs the helper to run as root (it runs as uid {uid}): \
                     pooled jobs will be refused"
                );
            }
        }
        let procs = Arc::new(procs::Procs::new(accounts));
        let tracker = TaskTracker::new();
        let inner = Arc::new_cyclic(|weak: &std::sync::Weak<Inner>| {
            let (weak, t) = (weak.clone(), tracker.clone());
            let on_connect = Arc::new(move |conn: quinn::Connection| {
                let handler = frontal_handler(weak.clone());
                // Root spans: these tasks outlive whatever request made the connection.
                let peer = conn.remote_address();
                let resync = tracing::error_span!(parent: None, "frontal_resync", %peer);
                let serve = tracing::error_span!(parent: None, "frontal", %peer);
                // A frontal that (re)started, or whose broker did, learns what runs here.
                let (w, c2) = (weak.clone(), conn.clone());
                t.spawn(async move {
                    let Some(inner) = w.upgrade() else {
                        return;
                    };
                    let req = Request::Running {
                        nodes: vec![inner.node.clone()],
                        processes: inner.procs.processes(),
                    };
                    drop(inner);
                    if let Err(e) = quic::request(&c2, &req).await {
                        tracing::warn!(error = %e, "could not tell the frontal which processes run");
                    }
                }.instrument(resync));
                t.spawn(
                    async move {
                        quic::serve(conn, handler).await;
                    }
                    .instrument(serve),
                );
            });
            Inner {
                subs: Default::default(),
                node: node.name.clone(),
                bind_addr,
                frontal: Arc::new(Upstream::new(
                    endpoint.clone(),
                    frontal,
                    Role::Frontal,
                    Some(Request::RegisterNode(node)),
                    Some(on_connect),
                )),
                socket: socket.clone(),
                procs: procs.clone(),
                owners: Default::default(),
                machine: access::machine_id(),
                metrics: counts.clone(),
            }
        });
        if socket.exists() {
            // Only replace a socket nobody answers on: never steal a live helper's.
            if UnixStream::connect(&socket).await.is_ok() {
                return Err(StartError::SocketInUse(socket));
            }
            std::fs::remove_file(&socket).map_err(|source| StartError::Socket {
                what: "remove the stale",
                path: socket.clone(),
                source,
            })?;
        }
        let listener = bind_private(&socket, socket_group)?;
        let cancel = CancellationToken::new();
        // Stay connected to the frontal, so that it can start processes here: connect
        // now, and again as soon as the connection is lost (the node registers anew).
        let (c, up) = (cancel.clone(), inner.frontal.clone());
        tracker.spawn(
            async move {
                tokio::select! {
                    _ = c.cancelled() => {}
                    _ = up.stay_connected() => {}
                }
            }
            .instrument(
                tracing::error_span!(parent: None, "upstream", peer = %frontal, role = "frontal"),
            ),
        );
        let (c, t) = (cancel.clone(), tracker.clone());
        let (per_uid, total) = caps.limits();
        tracker.spawn(async move {
            let mut errors = qcg_proto::limits::AcceptErrors::new("helper socket");
            loop {
                let stream = tokio::select! {
                    _ = c.cancelled() => break,
                    s = listener.accept() => match s {
                        Ok((s, _)) => s,
                        Err(e) => {
                            let pause = errors.failed(&e, std::time::Instant::now());
                            tokio::select! {
                                _ = c.cancelled() => break,
                                _ = tokio::time::sleep(pause) => {}
                            }
                            continue;
                        }
                    },
                };
                errors.flush(std::time::Instant::now());
                let (uid, pid) = match stream.peer_cred() {
                    Ok(c) => (c.uid(), c.pid()),
                    Err(e) => {
                        inner.metrics.errors.note("no_credentials");
                        tracing::warn!(error = %e, "no peer credentials on the helper socket; closing");
                        continue;
                    }
                };
                let Some(permit) = qcg_proto::limits::admit(&caps, "helper socket", uid) else {
                    continue;
                };
                let inner = inner.clone();
                let c = c.clone();
                let span = match pid {
                    Some(pid) => tracing::error_span!(parent: None, "process", uid, pid),
                    None => tracing::error_span!(parent: None, "process", uid),
                };
                t.spawn(async move {
                    let _permit = permit;
                    tokio::select! {
                        _ = c.cancelled() => {}
                        _ = serve_process(stream, inner) => {}
                    }
                }.instrument(span));
            }
        }.instrument(tracing::error_span!(parent: None, "accept", socket = %socket.display())));
        // Debug: the service's "serving" line is its one start-up line.
        tracing::debug!(
            socket = %socket.display(),
            %frontal,
            local_connections_per_uid = per_uid,
            local_connections = total,
            "helper started"
        );
        Ok(Helper {
            socket,
            procs,
            endpoint,
            cancel,
            tracker,
            metrics: counts,
        })
    }

    /// Number of job processes running on this node.
    pub fn running(&self) -> usize {
        self.procs.len()
    }

    /// One scrape of the helper's metrics ([`metrics::render`]).
    pub fn metrics(&self) -> String {
        metrics::render(&self.metrics, self.procs.len())
    }

    /// Binds the metrics address (config field `metrics_listen`). Bind it before
    /// [`Helper::start`], and serve it with [`Helper::serve_metrics_on`]: a taken
    /// port then stops the service before it says it serves.
    pub async fn bind_metrics(
        listen: SocketAddr,
    ) -> Result<qcg_proto::metrics::Listener, StartError> {
        Ok(qcg_proto::metrics::bind(listen).await?)
    }

    /// Serves the helper's metrics on `listener` until it stops; returns its address.
    pub fn serve_metrics_on(&self, listener: qcg_proto::metrics::Listener) -> SocketAddr {
        let (m, procs) = (self.metrics.clone(), Arc::downgrade(&self.procs));
        let render = move || metrics::render(&m, procs.upgrade().map_or(0, |p| p.len()));
        let stop = self.cancel.clone().cancelled_owned();
        let (at, task) = qcg_proto::metrics::task(listener, render, stop);
        self.tracker.spawn(task);
        at
    }

    /// Binds `listen` and serves the helper's metrics there until it stops;
    /// returns the bound address.
    pub async fn serve_metrics(&self, listen: SocketAddr) -> Result<SocketAddr, StartError> {
        Ok(self.serve_metrics_on(Helper::bind_metrics(listen).await?))
    }

    /// Stops serving, kills the job processes still running, removes the socket and
    /// waits for the tasks.
    pub async fn shutdown(self) {
        self.procs.kill_all().await;
        self.cancel.cancel();
        self.endpoint.close(0u32.into(), b"helper shutting down");
        self.tracker.close();
        self.tracker.wait().await;
        let _ = std::fs::remove_file(&self.socket);
    }
}

/// One process's connection: requests answered in order until it hangs up. A bad
/// frame gets an error answer; the connection (and the helper) go on unless the
/// stream itself is broken.
async fn serve_process(mut stream: UnixStream, inner: Arc<Inner>) {
    let peer = match stream.peer_cred() {
        Ok(c) => access::Peer {
            uid: c.uid(),
            pid: c.pid().and_then(|p| u32::try_from(p).ok()),
        },
        Err(e) => {
            tracing::warn!(error = %e, "no peer credentials on the helper socket; closing");
            return;
        }
    };
    loop {
        let req = match read_request(&mut stream).await {
            Ok(Some(req)) => req,
            Ok(None) => return,
            Err(e @ (FrameError::Io(_) | FrameError::Truncated)) => {
                tracing::debug!(uid = peer.uid, error = %e, "process connection closed");
                return;
            }
            Err(e) => {
                inner.metrics.errors.note("bad_frame");
                qcg_proto::limits::warn_summed(
                    &BAD_FRAMES,
                    "bad frames from local processes",
                    format_args!("uid {}: {e}", peer.uid),
                );
                let resp = Response::error(e.kind(), e.to_string());
                let _ =
                    tokio::time::timeout(FRAME_DEADLINE, frame::write_frame(&mut stream, &resp))
                        .await;
                // After an oversized or unreadable frame the byte stream cannot be
                // resynchronised: close this connection only.
                if matches!(e, FrameError::TooLarge { .. }) {
                    return;
                }
                continue;
            }
        };
        let kind = req.kind();
        let span = qcg_proto::request_span!(&req);
        let resp = match (span.in_scope(|| refuse(&inner, peer, &req)), req) {
            (Err(refusal), _) => refusal,
            (Ok(_), Request::Subscribe { process }) => {
                inner.metrics.answers.note("subscribe", &Response::Ok);
                return subscribed(stream, inner, process).instrument(span).await;
            }
            (Ok((claimed, foreign)), req) => {
                // A request for a job this helper did not start the asking process
                // for goes up naming its user: the broker keeps a job it did not
                // place to one user ([`access`]).
                let user = foreign.then(|| qcg_proto::LocalUser {
                    uid: peer.uid,
                    machine: inner.machine.clone(),
                    node: inner.node.clone(),
                });
                let resp = handle(&inner, req, user).instrument(span.clone()).await;
                if let Response::Error(e) = &resp {
                    if e.kind == ErrorKind::Forbidden {
                        span.in_scope(
                            || tracing::warn!(reason = %e.message, "request refused upstream"),
                        );
                        // The grid says the job is not this user's to act for
                        // here: the claim this request made is void.
                        if let Some(job) = claimed {
                            let mut owners = lock(&inner.owners);
                            if owners.get(&job) == Some(&peer.uid) {
                                owners.remove(&job);
                            }
                        }
                    }
                }
                resp
            }
        };
        span.in_scope(|| qcg_proto::answered!(&resp));
        inner.metrics.answers.note(kind, &resp);
        match tokio::time::timeout(FRAME_DEADLINE, frame::write_frame(&mut stream, &resp)).await {
            Ok(Ok(())) => {}
            _ => return,
        }
    }
}

/// Bad frames from local processes, summed up in the log.
static BAD_FRAMES: std::sync::Mutex<qcg_proto::limits::Tally> =
    std::sync::Mutex::new(qcg_proto::limits::Tally::new());

/// How long a local process has to send the rest of a frame once its first byte
/// came, and to take an answer: a half-sent frame cannot hold a connection longer.
pub const FRAME_DEADLINE: Duration = Duration::from_secs(5);
/// The helper socket's caps for a process allowed `nofile` descriptors: three
/// quarters of them in all (at most 16,384; the rest is for the processes' pipes and
/// the helper's own files), three quarters of that per uid, so that one local user
/// cannot take every place (a rank holds three lines: requests, notices, reports).
pub fn socket_caps(nofile: u64) -> qcg_proto::limits::Caps<u32> {
    let total = ((nofile as usize).saturating_mul(3) / 4).clamp(8, 16384);
    qcg_proto::limits::Caps::new(total * 3 / 4, total)
}

/// The next request on a process's connection: waits for its first byte as long as
/// the process likes (a rank keeps its lines to the helper open between requests,
/// and its link reporter may send its first one minutes after connecting: idle
/// connections are bounded by the caps per uid, not by time), then the whole frame
/// within [`FRAME_DEADLINE`]. `Ok(None)` at a clean end.
async fn read_request(stream: &mut UnixStream) -> Result<Option<Request>, FrameError> {
    use tokio::io::AsyncReadExt;
    let mut byte = [0u8; 1];
    if stream.read(&mut byte).await? == 0 {
        return Ok(None);
    }
    let mut rest = (&byte[..]).chain(&mut *stream);
    match tokio::time::timeout(FRAME_DEADLINE, frame::read_frame::<Request, _>(&mut rest)).await {
        Ok(Ok(Some(r))) => Ok(Some(r)),
        Ok(Ok(None)) => Err(FrameError::Truncated),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(FrameError::Io(timed_out("a frame not finished"))),
    }
}

fn timed_out(what: &str) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        format!("{what} within the deadline"),
    )
}

/// Job processes run with their account's primary group only (no supplementary
/// groups): an account that is neither root nor the helper's user and whose primary
/// group is not the socket's cannot reach the helper, and its jobs would fail with
/// `Permission denied`. Says so at start, once per such account.
fn warn_unreachable_socket(accounts: &accounts::Accounts, helper_uid: u32, group: Option<u32>) {
    let gid = group.unwrap_or_else(|| rustix::process::getgid().as_raw());
    let owners = std::iter::once(None).chain(accounts.map.keys().map(|k| Some(k.as_str())));
    let mut told = std::collections::BTreeSet::new();
    for owner in owners {
        let Ok(a) = accounts.resolve(owner, helper_uid) else {
            continue;
        };
        if a.uid == 0 || a.uid == helper_uid || a.gid == gid || !told.insert(a.name.clone()) {
            continue;
        }
        tracing::warn!(
            account = %a.name,
            primary_gid = a.gid,
            socket_gid = gid,
            "jobs of account {} cannot reach the helper socket: their processes have only \
             their primary group ({}), not the socket's ({gid}); make {gid} that account's \
             primary group or set socket_group to {}",
            a.name,
            a.gid,
            a.gid
        );
    }
}

/// Binds the socket so that it is never reachable with a wider mode than 0660: bound
/// under a temporary name, given its mode and group, then renamed into place.
fn bind_private(socket: &std::path::Path, group: Option<u32>) -> Result<UnixListener, StartError> {
    use std::os::unix::fs::PermissionsExt;
    let mut tmp = socket.as_os_str().to_owned();
    tmp.push(format!(".{}.tmp", std::process::id()));
    let tmp = PathBuf::from(tmp);
    let _ = std::fs::remove_file(&tmp);
    let fail = |what: &'static str| {
        let tmp = tmp.clone();
        move |source| {
            let _ = std::fs::remove_file(&tmp);
            StartError::Socket {
                what,
                path: socket.to_path_buf(),
                source,
            }
        }
    };
    let listener = UnixListener::bind(&tmp).map_err(fail("listen on"))?;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o660))
        .map_err(fail("set the mode of"))?;
    if let Some(g) = group {
        std::os::unix::fs::chown(&tmp, None, Some(g)).map_err(fail("set the group of"))?;
    }
    std::fs::rename(&tmp, socket).map_err(fail("move into place"))?;
    Ok(listener)
}

/// The refusal of a request `peer` may not make ([`access`]), if it may not; else
/// the job whose ownership this request claimed first on this node, if it did, and
/// whether the request acts for a job that `peer` is not one of the helper's
/// processes of.
fn refuse(
    inner: &Inner,
    peer: access::Peer,
    req: &Request,
) -> Result<(Option<String>, bool), Response> {
    let verdict = access::job_of(req).and_then(|job| {
        let Some(job) = job else {
            return Ok((None, false));
        };
        if let Request::Register(ap) = req {
            if ap.node != inner.node {
                return Err(format!(
                    "this helper serves node {}: process {} cannot register here as running on node {}",
                    inner.node, ap.process, ap.node
                ));
            }
        }
        let launched = match peer.pid {
            Some(pid) if peer.uid != 0 => access::lineage(pid)
                .into_iter()
                .find_map(|p| inner.procs.job_of_pid(p)),
            _ => None,
        };
        let mut owners = lock(&inner.owners);
        let fresh = !owners.contains_key(job);
        access::decide(peer, launched.as_deref(), job, &mut owners)?;
        let claimed = (fresh && owners.get(job) == Some(&peer.uid)).then(|| job.to_string());
        Ok((claimed, launched.is_none()))
    });
    verdict.map_err(|why| {
        tracing::warn!(reason = %why, "request refused");
        Response::error(
            ErrorKind::Forbidden,
            format!("`{}` refused: {why}", req.kind()),
        )
    })
}

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A process's notice connection: notices go out as they come until it hangs up.
async fn subscribed(mut stream: UnixStream, inner: Arc<Inner>, process: qcg_proto::ProcName) {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    lock(&inner.subs).insert(process.clone(), tx.clone());
    if frame::write_frame(&mut stream, &Response::Ok).await.is_ok() {
        let (mut rd, mut wr) = stream.split();
        let mut probe = [0u8; 1];
        loop {
            tokio::select! {
                n = tokio::io::AsyncReadExt::read(&mut rd, &mut probe) => {
                    if !matches!(n, Ok(n) if n > 0) { break }
                }
                n = rx.recv() => match n {
                    Some(n) => if frame::write_frame(&mut wr, &Response::Notice(n)).await.is_err() { break },
                    None => break,
                },
            }
        }
    }
    let mut subs = lock(&inner.subs);
    // Only our own entry: a newer subscription of the same process stays.
    if subs.get(&process).is_some_and(|t| t.same_channel(&tx)) {
        subs.remove(&process);
    }
}

/// A request the frontal pushed: a notice for one of our processes, or a SYN to inject.
async fn notice(inner: &Inner, req: Request) -> Response {
    let Request::Notify { target, notice } = req else {
        return Response::error(
            ErrorKind::Forbidden,
            format!("`{}` is not a request a frontal may push", req.kind()),
        );
    };
    if let qcg_proto::Notice::Inject { packet } = notice {
        let span = tracing::Span::current();
        let inject = move || span.in_scope(|| raw::inject(&packet));
        return match tokio::task::spawn_blocking(inject).await {
            Ok(Ok(())) => Response::Ok,
            Ok(Err(e)) => {
                Response::error(ErrorKind::Unavailable, format!("SYN injection failed: {e}"))
            }
            Err(e) => Response::error(ErrorKind::Internal, e.to_string()),
        };
    }
    let tx = lock(&inner.subs).get(&target).cloned();
    match tx.map(|t| t.send(notice)) {
        Some(Ok(())) => Response::Ok,
        _ => Response::error(
            ErrorKind::UnknownProcess,
            format!(
                "process {target} is not listening for notices on node {}",
                inner.node
            ),
        ),
    }
}

/// Starts capturing the process's next SYN toward `remote`; answers once the capture
/// is in place, and sends the SYN up when it is seen.
async fn watch_syn(inner: Arc<Inner>, req: Request) -> Response {
    let Request::WatchSyn {
        from,
        target,
        local,
        remote,
    } = req
    else {
        return Response::error(ErrorKind::Internal, "not a watch");
    };
    let sock = match raw::capture_socket() {
        Ok(s) => s,
        Err(e) => {
            return Response::error(
                ErrorKind::Unavailable,
                format!(
                    "cannot capture packets on node {} (root needed): {e}",
                    inner.node
                ),
            )
        }
    };
    // The capture outlives the request: a root span of its own.
    let span = tracing::error_span!(parent: None, "syn_capture", job = %from.job, rank = from.rank, %local, %remote);
    tokio::spawn(
        async move {
            let span = tracing::Span::current();
            let got = tokio::task::spawn_blocking(move || {
                let _in = span.enter();
                raw::capture_syn(sock, local, remote, std::time::Duration::from_secs(5))
            })
            .await;
            match got {
                Ok(Ok(Some(packet))) => {
                    let r = inner
                        .frontal
                        .forward(&Request::Syn {
                            from,
                            target,
                            packet,
                        })
                        .await;
                    if !matches!(r, Response::Ok) {
                        inner.metrics.errors.note("syn_not_delivered");
                        tracing::warn!(?r, "SYN not delivered");
                    }
                }
                other => {
                    inner.metrics.errors.note("syn_not_delivered");
                    tracing::warn!(?other, "no SYN seen")
                }
            }
        }
        .instrument(span),
    );
    Response::Ok
}

/// Answers a process's request; what goes up to the frontal names `user` when
/// given.
async fn handle(inner: &Arc<Inner>, req: Request, user: Option<qcg_proto::LocalUser>) -> Response {
    if let Request::WatchSyn { .. } = req {
        return watch_syn(inner.clone(), req).await;
    }
    match req {
        Request::NodeInfo => match inner.frontal.forward(&Request::ClusterInfo).await {
            Response::Cluster(cluster) => Response::Node {
                cluster,
                node: inner.node.clone(),
                bind_addr: inner.bind_addr,
            },
            other => other,
        },
        Request::ClusterInfo => inner.frontal.forward(&req).await,
        Request::Register(_)
        | Request::Unregister { .. }
        | Request::Lookup { .. }
        | Request::Rendezvous { .. }
        | Request::JobEnd { .. } => inner.frontal.forward(&access::for_user(req, user)).await,
        Request::Report {
            technique,
            ok,
            upgrade,
            ..
        } => {
            let resp = inner
                .frontal
                .forward(&access::for_user(req.clone(), user))
                .await;
            if resp == Response::Ok {
                inner.metrics.links.note(technique, ok, upgrade);
            }
            resp
        }
        other => Response::error(
            ErrorKind::Forbidden,
            format!("`{}` is not a request a process may send", other.kind()),
        ),
    }
}
