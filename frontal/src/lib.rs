//! The qcg frontal: one per cluster, on its gateway.
//!
//! It connects to the broker (QUIC, mutual TLS), registers its cluster's
//! configuration, accepts the cluster's helpers (each with a `helper` certificate from
//! the grid CA) and forwards their requests. Lookups are answered from a cache of
//! broker answers when possible; the broker tells the frontal when an answer goes
//! stale (a process re-registered or ended, a job ended).
//!
//! For submitted jobs it reports its cluster's nodes to the broker ([`nodes`]: the
//! connected helpers, with figures from the config's `[[nodes]]`), measures the link
//! to another cluster's frontal when the broker asks (`ProbePeer`: three empty QUIC
//! echoes for the latency, then one echo of 256 KiB for the bandwidth), and passes
//! the broker's `Launch` and `Kill` on to the helpers of its nodes, or, for a cluster
//! run by Slurm, to Slurm ([`slurm`]: `salloc`, `srun`, `scancel`). Other frontals may
//! connect, but only to be probed.
//!
//! ```no_run
//! # async fn f(id: qcg_proto::tls::Identity, cluster: qcg_proto::ClusterConfig) -> anyhow::Result<()> {
//! let frontal = qcg_frontal::Frontal::start(id, cluster, "127.0.0.1:7700".parse()?, "127.0.0.1:0".parse()?).await?;
//! println!("helpers dial {}", frontal.addr);
//! # Ok(()) }
//! ```

pub mod cache;
pub mod config;
pub mod held;
pub mod metrics;
pub mod nodes;
pub mod slurm;

use cache::PlanCache;
use qcg_proto::quic::{self, Upstream};
use qcg_proto::tls::{Identity, Role};
use qcg_proto::{ClusterConfig, ErrorKind, NodeSpec, Request, Response};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

/// Counters a test or an operator can read.
#[derive(Default, Debug)]
pub struct Stats {
    /// Lookups received from helpers.
    pub lookups: AtomicU64,
    /// Lookups answered from the cache.
    pub cache_hits: AtomicU64,
}

/// A connected helper: its connection, its node, its measured round trip.
type HelperEntry = (quinn::Connection, NodeSpec, Option<Duration>);

/// Bytes of the timed echo of a probe.
pub const PROBE_BYTES: usize = 256 * 1024;

struct Inner {
    /// The helper connection each registered process came through.
    routes: Mutex<std::collections::HashMap<qcg_proto::ProcName, quinn::Connection>>,
    /// The registrations of the cluster's live processes, sent again to a broker
    /// that was restarted (its registry is soft state, rebuilt by the frontals).
    registrations: Mutex<std::collections::HashMap<qcg_proto::ProcName, Request>>,
    cluster: ClusterConfig,
    broker: Upstream,
    cache: PlanCache,
    stats: Stats,
    settings: nodes::Settings,
    endpoint: quinn::Endpoint,
    /// Connected helpers by node name, with the best round trip measured to each.
    /// A node is offered once its round trip is measured.
    helpers: Mutex<BTreeMap<String, HelperEntry>>,
    /// Held while a node report is on its way, so reports arrive in order.
    reporting: tokio::sync::Mutex<()>,
    /// The processes started on each node (job, rank) whose end was not reported yet:
    /// if the node's helper goes away they are reported lost, naming the node.
    launched: Mutex<BTreeMap<String, std::collections::BTreeSet<(String, u32)>>>,
    /// Outputs and process ends the broker could not be told (it was away).
    held: tokio::sync::Mutex<held::Held>,
    /// Where the broker placed the ranks of its jobs in this cluster (job → rank →
    /// node), from its launches and the helpers' reports: a rank acts only from the
    /// helper of its node ([`placed`]).
    placed: Mutex<Placed>,
    /// Set when the cluster's nodes are run by Slurm: ranks start through it.
    slurm: Option<Arc<slurm::Slurm>>,
    /// What it counts ([`metrics`]).
    metrics: metrics::Metrics,
}

/// Job → rank → node, for the submitted jobs placed in this cluster.
type Placed = std::collections::HashMap<String, BTreeMap<u32, String>>;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Inner {
    /// The processes that run on the nodes whose helper is connected.
    fn running(&self) -> Request {
        let nodes: Vec<String> = lock(&self.helpers).keys().cloned().collect();
        let launched = lock(&self.launched);
        let mut processes: Vec<qcg_proto::ProcName> = nodes
            .iter()
            .filter_map(|n| launched.get(n))
            .flatten()
            .map(|(job, rank)| qcg_proto::ProcName::new(job, *rank))
            .collect();
        processes.extend(self.under_slurm(|n| nodes.iter().any(|m| m == n)));
        Request::Running { nodes, processes }
    }

    fn report(&self) -> Request {
        let helpers = lock(&self.helpers);
        let measured = helpers.values().filter(|(_, _, r)| r.is_some());
        let specs: Vec<NodeSpec> = measured.clone().map(|(_, n, _)| n.clone()).collect();
        let rtts: Vec<Duration> = measured.filter_map(|(_, _, r)| *r).collect();
        Request::ClusterNodes {
            nodes: nodes::offer(&self.settings, &specs),
            internal: nodes::internal(&self.settings, &rtts),
        }
    }

    /// Tells the broker the cluster's nodes (after a helper came or went). A broker
    /// out of reach gets them when the connection is made again.
    async fn push_nodes(&self) {
        let _order = self.reporting.lock().await;
        if let Err(e) = self.broker.request(&self.report()).await {
            tracing::debug!(error = %e, "could not report the cluster's nodes");
        }
    }

    /// The ranks running under Slurm on the nodes `on` accepts.
    fn under_slurm(&self, on: impl Fn(&str) -> bool) -> Vec<qcg_proto::ProcName> {
        self.slurm
            .as_ref()
            .map(|s| s.processes())
            .unwrap_or_default()
            .into_iter()
            .filter(|(_, node)| on(node))
            .map(|(p, _)| p)
            .collect()
    }

    fn helper(&self, node: &str) -> Option<quinn::Connection> {
        lock(&self.helpers).get(node).map(|(c, _, _)| c.clone())
    }

    /// Answers what the broker asks of this frontal.
    async fn answer_broker(&self, req: Request) -> Response {
        match req {
            Request::Invalidate { job, rank } => {
                let n = self.cache.invalidate(&job, rank);
                tracing::debug!(%job, ?rank, dropped = n, "cache invalidated");
                Response::Ok
            }
            req @ Request::Notify { .. } => notify(self, req).await,
            Request::ProbePeer { cluster, addr } => match self.probe(addr).await {
                Ok(q) => {
                    tracing::debug!(peer = %cluster, %addr, latency_ms = q.latency_ms, bandwidth_mbps = q.bandwidth_mbps, "probed");
                    Response::Measured(q)
                }
                Err(e) => Response::error(
                    ErrorKind::Unavailable,
                    format!("cannot probe the frontal of `{cluster}` at {addr}: {e}"),
                ),
            },
            // Under Slurm the node's helper must be there too (the rank's links go
            // through it), but Slurm starts the rank.
            Request::Launch(spec) if self.slurm.is_some() && self.helper(&spec.node).is_some() => {
                let Some(s) = &self.slurm else {
                    return Response::error(ErrorKind::Internal, "no Slurm");
                };
                // Placed before the step starts: the rank registers through the
                // node's helper as soon as it runs, maybe before `launch` returns.
                lock(&self.placed)
                    .entry(spec.job.clone())
                    .or_default()
                    .insert(spec.rank, spec.node.clone());
                let r = s.launch(&spec).await;
                if !matches!(r, Response::Ok) {
                    forget_placed(&mut lock(&self.placed), &spec.job, spec.rank);
                }
                r
            }
            Request::Launch(spec) => match self.helper(&spec.node) {
                Some(conn) => {
                    // Placed before the helper starts it: the rank registers as soon
                    // as it runs, often before the helper's answer reaches us, and a
                    // registration for a rank not yet placed here is refused.
                    lock(&self.placed)
                        .entry(spec.job.clone())
                        .or_default()
                        .insert(spec.rank, spec.node.clone());
                    match quic::request(&conn, &Request::Launch(spec.clone())).await {
                        Ok(Response::Ok) => {
                            lock(&self.launched)
                                .entry(spec.node.clone())
                                .or_default()
                                .insert((spec.job.clone(), spec.rank));
                            Response::Ok
                        }
                        Ok(r) => {
                            forget_placed(&mut lock(&self.placed), &spec.job, spec.rank);
                            r
                        }
                        Err(e) => {
                            forget_placed(&mut lock(&self.placed), &spec.job, spec.rank);
                            Response::error(
                                ErrorKind::Unavailable,
                                format!("the helper of node {} is unreachable: {e}", spec.node),
                            )
                        }
                    }
                }
                None => Response::error(
                    ErrorKind::Unavailable,
                    format!(
                        "node {} of cluster {} has no helper connected",
                        spec.node, self.cluster.name
                    ),
                ),
            },
            req @ (Request::OpenCheck { .. } | Request::NatCheck { .. }) => {
                let (Request::OpenCheck { node, .. } | Request::NatCheck { node, .. }) = &req
                else {
                    return Response::error(ErrorKind::Forbidden, "not a check");
                };
                match self.helper(node) {
                    Some(conn) => quic::request(&conn, &req).await.unwrap_or_else(|e| {
                        Response::error(
                            ErrorKind::Unavailable,
                            format!("the helper of node {node} is unreachable: {e}"),
                        )
                    }),
                    None => Response::error(
                        ErrorKind::Unavailable,
                        format!("node {node} has no helper connected"),
                    ),
                }
            }
            Request::Kill { job } => {
                lock(&self.placed).remove(&job);
                if let Some(s) = &self.slurm {
                    s.cancel(&job).await;
                }
                let conns: Vec<_> = lock(&self.helpers)
                    .iter()
                    .map(|(node, (c, _, _))| (node.clone(), c.clone()))
                    .collect();
                let mut set = tokio::task::JoinSet::new();
                for (node, conn) in conns {
                    let req = Request::Kill { job: job.clone() };
                    let span = tracing::error_span!("kill", %node);
                    set.spawn(
                        async move {
                            if let Err(e) = quic::request(&conn, &req).await {
                                tracing::warn!(error = %e, "kill not delivered to the node's helper");
                            }
                        }
                        .instrument(span),
                    );
                }
                while set.join_next().await.is_some() {}
                Response::Ok
            }
            other => Response::error(
                ErrorKind::Forbidden,
                format!(
                    "a frontal does not answer `{}` from the broker",
                    other.kind()
                ),
            ),
        }
    }

    /// Measures the link to another frontal: the best of three empty echoes, then one
    /// timed echo of [`PROBE_BYTES`].
    async fn probe(&self, addr: SocketAddr) -> Result<qcg_proto::LinkQuality, quic::QuicError> {
        let conn = quic::connect(&self.endpoint, addr, Role::Frontal).await?;
        let result = async {
            let mut rtt = Duration::MAX;
            for _ in 0..3 {
                let t = Instant::now();
                quic::request(
                    &conn,
                    &Request::Echo {
                        payload: String::new(),
                    },
                )
                .await?;
                rtt = rtt.min(t.elapsed());
            }
            let payload = "q".repeat(PROBE_BYTES);
            let t = Instant::now();
            quic::request(&conn, &Request::Echo { payload }).await?;
            Ok(nodes::measured(rtt, t.elapsed(), PROBE_BYTES))
        }
        .await;
        conn.close(0u32.into(), b"probe done");
        result
    }
}

/// A running frontal.
pub struct Frontal {
    /// Where helpers connect.
    pub addr: SocketAddr,
    inner: Arc<Inner>,
    cancel: CancellationToken,
    tracker: TaskTracker,
    endpoint: quinn::Endpoint,
}

/// Why a frontal did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The QUIC endpoint for helpers (`listen`) could not be made: the address,
    /// or the certificate, key or CA.
    #[error("cannot serve helpers on {addr} (config field `listen`): {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: qcg_proto::quic::QuicError,
    },
    /// The metrics address (`metrics_listen`) could not be bound.
    #[error(transparent)]
    Metrics(#[from] qcg_proto::metrics::BindError),
}

/// Failed QUIC handshakes, summed up in the log.
static HANDSHAKES_FAILED: std::sync::Mutex<qcg_proto::limits::Tally> =
    std::sync::Mutex::new(qcg_proto::limits::Tally::new());

/// QUIC connections (handshakes included) a frontal takes per address.
pub const QUIC_PER_ADDRESS: usize = 64;
/// QUIC connections a frontal takes in all.
pub const QUIC_TOTAL: usize = 16384;

impl Frontal {
    /// Starts serving helpers on `listen`; the broker is dialled on first need.
    pub async fn start(
        id: Identity,
        cluster: ClusterConfig,
        broker: SocketAddr,
        listen: SocketAddr,
    ) -> Result<Frontal, StartError> {
        Frontal::start_with(id, cluster, broker, listen, nodes::Settings::default()).await
    }

    /// Like [`Frontal::start`], with the cluster's node figures and internal link.
    pub async fn start_with(
        id: Identity,
        cluster: ClusterConfig,
        broker: SocketAddr,
        listen: SocketAddr,
        settings: nodes::Settings,
    ) -> Result<Frontal, StartError> {
        let endpoint = quic::server_endpoint(listen, &id).map_err(|source| StartError::Listen {
            addr: listen,
            source,
        })?;
        let addr = endpoint.local_addr().map_err(|e| StartError::Listen {
            addr: listen,
            source: qcg_proto::quic::QuicError::Bind {
                addr: listen,
                source: e,
            },
        })?;
        let cancel = CancellationToken::new();
        let tracker = TaskTracker::new();
        let (reports, mut slurm_reports) = tokio::sync::mpsc::unbounded_channel();
        let slurm = settings
            .slurm
            .clone()
            .map(|c| Arc::new(slurm::Slurm::new(c, reports)));
        // Helpers of the cluster and other clusters' frontals probing: a few per
        // address (a node's helper, a frontal host), a bounded number in all.
        let caps = qcg_proto::limits::Caps::new(QUIC_PER_ADDRESS, QUIC_TOTAL);

        let inner = Arc::new_cyclic(|weak: &std::sync::Weak<Inner>| {
            let weak = weak.clone();
            let t = tracker.clone();
            // Requests the broker opens toward us: cache invalidations, probes,
            // launches and kills. A new connection also gets the node list.
            let on_connect = Arc::new(move |conn: quinn::Connection| {
                let weak = weak.clone();
                let w2 = weak.clone();
                let c2 = conn.clone();
                // Root spans: these tasks outlive whatever request made the connection.
                let peer = conn.remote_address();
                let resync = tracing::error_span!(parent: None, "broker_resync", %peer);
                let serve = tracing::error_span!(parent: None, "broker", %peer);
                t.spawn(async move {
                    if let Some(inner) = w2.upgrade() {
                        {
                            let _order = inner.reporting.lock().await;
                            if let Err(e) = quic::request(&c2, &inner.report()).await {
                                tracing::warn!(error = %e, "could not report the cluster's nodes");
                            }
                        }
                        // The live processes' registrations, for a broker that lost them.
                        let regs: Vec<Request> =
                            lock(&inner.registrations).values().cloned().collect();
                        if !regs.is_empty() {
                            tracing::info!(
                                processes = regs.len(),
                                "registering the cluster's processes again"
                            );
                        }
                        for r in regs {
                            match quic::request(&c2, &r).await {
                                Ok(Response::Ok) => {}
                                other => {
                                    tracing::warn!(?other, "a process's registration was refused")
                                }
                            }
                        }
                        // What could not be sent while the broker was away, in order.
                        {
                            let mut held = inner.held.lock().await;
                            let (reqs, dropped) = held.take();
                            if dropped > 0 {
                                inner.metrics.errors.add("output_dropped", dropped as u64);
                                tracing::warn!(dropped, "output lines dropped while the broker was away (over the bound)");
                            }
                            for (n, r) in reqs.iter().enumerate() {
                                if let Err(e) = quic::request(&c2, r).await {
                                    tracing::warn!(error = %e, "held reports not delivered; kept");
                                    for r in reqs.into_iter().skip(n) {
                                        held.push(r);
                                    }
                                    break;
                                }
                            }
                        }
                        // What runs on the nodes whose helper is here: a broker back
                        // from a restart keeps those jobs and fails the others now.
                        let req = inner.running();
                        if let Err(e) = quic::request(&c2, &req).await {
                            tracing::warn!(error = %e, "could not report the running processes");
                        }
                    }
                }.instrument(resync));
                t.spawn(
                    async move {
                        let handler = move |req: Request| {
                            let weak = weak.clone();
                            let span = qcg_proto::request_span!(&req);
                            async move {
                                let resp = match weak.upgrade() {
                                    Some(inner) => inner.answer_broker(req).await,
                                    None => Response::error(
                                        ErrorKind::Unavailable,
                                        "the frontal is stopping",
                                    ),
                                };
                                qcg_proto::answered!(&resp);
                                resp
                            }
                            .instrument(span)
                        };
                        quic::serve(conn, handler).await;
                    }
                    .instrument(serve),
                );
            });
            Inner {
                broker: Upstream::new(
                    endpoint.clone(),
                    broker,
                    Role::Broker,
                    Some(Request::RegisterCluster(cluster.clone())),
                    Some(on_connect),
                ),
                routes: Default::default(),
                registrations: Default::default(),
                cluster,
                cache: PlanCache::default(),
                stats: Stats::default(),
                settings,
                endpoint: endpoint.clone(),
                helpers: Mutex::new(BTreeMap::new()),
                reporting: tokio::sync::Mutex::new(()),
                launched: Default::default(),
                held: Default::default(),
                placed: Default::default(),
                slurm,
                metrics: metrics::Metrics::new(caps.clone()),
            }
        });

        // What the ranks run by Slurm print, and their ends, go to the broker as a
        // helper's would (kept while it is away).
        let (inn, c) = (inner.clone(), cancel.clone());
        tracker.spawn(async move {
            loop {
                let req = tokio::select! {
                    _ = c.cancelled() => break,
                    r = slurm_reports.recv() => match r { Some(r) => r, None => break },
                };
                if let Request::ProcessExited { job, rank, .. } = &req {
                    forget_placed(&mut lock(&inn.placed), job, *rank);
                }
                match forward(&inn, &req).await {
                    Response::Ok => {}
                    other => tracing::warn!(kind = req.kind(), answer = ?other, "the broker did not take a Slurm rank's report"),
                }
            }
        }.instrument(tracing::error_span!(parent: None, "slurm_reports")));

        // Register now so the cluster is known before its first process; a broker that
        // is not up yet, or lost later, is redialed in the background.
        if let Err(e) = inner.broker.request(&Request::ClusterInfo).await {
            tracing::warn!(broker = %broker, error = %e, "broker not reachable yet; retrying");
        }
        let (inn, c) = (inner.clone(), cancel.clone());
        tracker.spawn(
            async move {
                tokio::select! {
                    _ = c.cancelled() => {}
                    _ = inn.broker.stay_connected() => {}
                }
            }
            .instrument(
                tracing::error_span!(parent: None, "upstream", peer = %broker, role = "broker"),
            ),
        );

        let ep = endpoint.clone();
        let (inn, c, t) = (inner.clone(), cancel.clone(), tracker.clone());
        tracker.spawn(async move {
            loop {
                let incoming = tokio::select! {
                    _ = c.cancelled() => break,
                    i = ep.accept() => match i { Some(i) => i, None => break },
                };
                let peer = incoming.remote_address();
                let Some(permit) = qcg_proto::limits::admit(&caps, "QUIC", peer.ip()) else {
                    incoming.refuse();
                    continue;
                };
                let inn = inn.clone();
                // The node is named once its helper registers it.
                let span = tracing::error_span!(parent: None, "conn", %peer, node = tracing::field::Empty);
                t.spawn(async move {
                    let _permit = permit;
                    match incoming.await {
                        Ok(conn) => serve_helper(conn, inn).await,
                        Err(e) => {
                            inn.metrics.errors.note("handshake_failed");
                            qcg_proto::limits::warn_summed(
                                &HANDSHAKES_FAILED,
                                "helper handshakes failed",
                                format_args!("{peer}: {e}"),
                            )
                        }
                    }
                }.instrument(span));
            }
        }.instrument(tracing::error_span!(parent: None, "accept", listen = %addr)));
        // A revocation cuts the live connections of the helpers it names, at once:
        // their nodes leave the cluster's report.
        if let Some(crl) = id.crl.clone() {
            let (inn, c) = (inner.clone(), cancel.clone());
            tracker.spawn(
                async move {
                    let conns = move || {
                        lock(&inn.helpers)
                            .iter()
                            .map(|(node, (c, _, _))| (c.clone(), format!("helper of node {node}")))
                            .collect()
                    };
                    tokio::select! {
                        _ = c.cancelled() => {}
                        _ = quic::cut_revoked(crl, conns) => {}
                    }
                }
                .instrument(tracing::error_span!(parent: None, "revocations")),
            );
        }
        // Debug: the service's "serving" line is its one start-up line.
        tracing::debug!(cluster = %inner.cluster.name, %addr, "frontal started");
        Ok(Frontal {
            addr,
            inner,
            cancel,
            tracker,
            endpoint,
        })
    }

    /// The frontal's counters.
    pub fn stats(&self) -> &Stats {
        &self.inner.stats
    }

    /// One scrape of the frontal's metrics ([`metrics::render`]).
    pub fn metrics(&self) -> String {
        render_metrics(&self.inner)
    }

    /// Binds the metrics address (config field `metrics_listen`). Bind it before
    /// [`Frontal::start`], and serve it with [`Frontal::serve_metrics_on`]: a taken
    /// port then stops the service before it says it serves.
    pub async fn bind_metrics(
        listen: SocketAddr,
    ) -> Result<qcg_proto::metrics::Listener, StartError> {
        Ok(qcg_proto::metrics::bind(listen).await?)
    }

    /// Serves the frontal's metrics on `listener` until it stops; returns its
    /// address.
    pub fn serve_metrics_on(&self, listener: qcg_proto::metrics::Listener) -> SocketAddr {
        let inner = Arc::downgrade(&self.inner);
        let render = move || {
            inner
                .upgrade()
                .map(|i| render_metrics(&i))
                .unwrap_or_default()
        };
        let stop = self.cancel.clone().cancelled_owned();
        let (at, task) = qcg_proto::metrics::task(listener, render, stop);
        self.tracker.spawn(task);
        at
    }

    /// Binds `listen` and serves the frontal's metrics there until it stops;
    /// returns the bound address.
    pub async fn serve_metrics(&self, listen: SocketAddr) -> Result<SocketAddr, StartError> {
        Ok(self.serve_metrics_on(Frontal::bind_metrics(listen).await?))
    }

    /// Stops serving and waits for the tasks.
    pub async fn shutdown(self) {
        self.cancel.cancel();
        self.endpoint.close(0u32.into(), b"frontal shutting down");
        self.tracker.close();
        self.tracker.wait().await;
    }
}

fn render_metrics(inner: &Inner) -> String {
    let now = metrics::Now {
        helpers: lock(&inner.helpers).len(),
        processes: lock(&inner.registrations).len(),
        lookups: inner.stats.lookups.load(Ordering::Relaxed),
        cache_hits: inner.stats.cache_hits.load(Ordering::Relaxed),
    };
    metrics::render(&inner.metrics, now)
}

async fn serve_helper(conn: quinn::Connection, inner: Arc<Inner>) {
    let peer = conn.remote_address();
    if quic::check_peer_role(&conn, Role::Frontal).is_ok() {
        // Another cluster's frontal, probing the link: echoes only.
        let handler = |req: Request| {
            let span = qcg_proto::request_span!(&req);
            async move {
                let resp = match req {
                    Request::Echo { payload } => Response::Echoed {
                        len: payload.len() as u64,
                    },
                    other => Response::error(
                        ErrorKind::Forbidden,
                        format!(
                            "a frontal only answers `echo` from another frontal, not `{}`",
                            other.kind()
                        ),
                    ),
                };
                qcg_proto::answered!(&resp);
                resp
            }
            .instrument(span)
        };
        quic::serve(conn, handler).await;
        return;
    }
    if let Err(e) = quic::check_peer_role(&conn, Role::Helper) {
        inner.metrics.errors.note("wrong_role");
        tracing::warn!(%peer, error = %e, "refused connection");
        conn.close(1u32.into(), b"a helper certificate is required");
        return;
    }
    tracing::info!(%peer, "helper connected");
    let node: Arc<Mutex<Option<String>>> = Default::default();
    let (inn, nd, c2) = (inner.clone(), node.clone(), conn.clone());
    // The connection's span (current here): it names the node once registered.
    let conn_span = tracing::Span::current();
    let handler = move |req: Request| {
        let (inner, node, conn) = (inn.clone(), nd.clone(), c2.clone());
        let conn_span = conn_span.clone();
        let span = qcg_proto::request_span!(&req);
        let answer = async move {
            if let Request::RegisterNode(spec) = req {
                let name = spec.name.clone();
                conn_span.record("node", tracing::field::display(&name));
                // The node's latency: the best of three empty round trips, timed
                // once the helper's stream is answered (so, in the background).
                let (inn, nm, c) = (inner.clone(), name.clone(), conn.clone());
                let ping_span = tracing::error_span!("ping");
                tokio::spawn(
                    async move {
                        let rtt = ping(&c).await;
                        let changed = match lock(&inn.helpers).get_mut(&nm) {
                            Some(h) if h.0.stable_id() == c.stable_id() => {
                                h.2 = Some(rtt);
                                true
                            }
                            _ => false,
                        };
                        if changed {
                            inn.push_nodes().await;
                        }
                    }
                    .instrument(ping_span),
                );
                lock(&inner.helpers).insert(name.clone(), (conn.clone(), spec, None));
                *lock(&node) = Some(name.clone());
                tracing::info!(%peer, node = %name, "node registered");
                return Response::Ok;
            }
            if let Request::Running { processes, .. } = req {
                // A helper speaks for its own node only.
                let Some(name) = lock(&node).clone() else {
                    return Response::error(
                        ErrorKind::Forbidden,
                        "register the node before reporting its processes",
                    );
                };
                lock(&inner.launched).insert(
                    name.clone(),
                    processes.iter().map(|p| (p.job.clone(), p.rank)).collect(),
                );
                {
                    let mut placed = lock(&inner.placed);
                    for p in &processes {
                        placed
                            .entry(p.job.clone())
                            .or_default()
                            .insert(p.rank, name.clone());
                    }
                }
                // The ranks Slurm runs on the node are the frontal's to report.
                let mut processes = processes;
                processes.extend(inner.under_slurm(|n| n == name));
                let up = Request::Running {
                    nodes: vec![name],
                    processes,
                };
                if let Err(e) = inner.broker.request(&up).await {
                    tracing::warn!(error = %e, "could not pass the node's processes to the broker");
                }
                return Response::Ok;
            }
            if let Request::ProcessExited { job, rank, .. } = &req {
                let p = qcg_proto::ProcName {
                    job: job.clone(),
                    rank: *rank,
                };
                lock(&inner.registrations).remove(&p);
                forget_placed(&mut lock(&inner.placed), job, *rank);
                let name = lock(&node).clone();
                if let Some(n) = name {
                    if let Some(set) = lock(&inner.launched).get_mut(&n) {
                        set.remove(&(job.clone(), *rank));
                    }
                }
            }
            let from = lock(&node).clone();
            let checked = for_user(from.as_deref(), &req)
                .and_then(|plain| placed(&lock(&inner.placed), from.as_deref(), plain));
            if let Err(why) = checked {
                tracing::warn!(%peer, node = ?from, request = req.kind(), reason = %why, "request refused: not where the job was placed");
                return Response::error(
                    ErrorKind::Forbidden,
                    format!("`{}` refused: {why}", req.kind()),
                );
            }
            let kind = req.kind();
            let resp = handle(&inner, &conn, req).await;
            inner.metrics.answers.note(kind, &resp);
            resp
        };
        async move {
            let resp = answer.await;
            qcg_proto::answered!(&resp);
            resp
        }
        .instrument(span)
    };
    let why = quic::serve(conn.clone(), handler).await;
    let name = lock(&node).clone();
    if let Some(name) = name {
        let removed = {
            let mut h = lock(&inner.helpers);
            let same = h
                .get(&name)
                .is_some_and(|(c, _, _)| c.stable_id() == conn.stable_id());
            if same {
                h.remove(&name);
            }
            same
        };
        // The processes that came through this helper are gone with it.
        let gone: Vec<qcg_proto::ProcName> = {
            let mut routes = lock(&inner.routes);
            let gone = routes
                .iter()
                .filter(|(_, c)| c.stable_id() == conn.stable_id())
                .map(|(p, _)| p.clone())
                .collect::<Vec<_>>();
            for p in &gone {
                routes.remove(p);
            }
            gone
        };
        {
            let mut regs = lock(&inner.registrations);
            for p in &gone {
                regs.remove(p);
            }
        }
        if removed {
            inner.push_nodes().await;
            lost(&inner, &name).await;
        }
    }
    tracing::info!(%peer, reason = %why, "helper disconnected");
}

/// The helper of `node` went away: the processes it ran for jobs are reported
/// ended, naming the node, so that their jobs fail (and the rest of them are
/// stopped) instead of running on unseen. The helper's guardian has stopped them.
async fn lost(inner: &Inner, node: &str) {
    let why = format!(
        "the helper of node {node} (cluster `{}`) went away; its processes were stopped",
        inner.cluster.name
    );
    // Ranks Slurm runs there lose their links with the helper: their allocations are
    // cancelled, and their ends reported so once their steps have ended (after their
    // last output).
    if let Some(s) = &inner.slurm {
        s.cancel_node(node, &why).await;
    }
    let procs = lock(&inner.launched).remove(node).unwrap_or_default();
    {
        let mut placed = lock(&inner.placed);
        for (job, rank) in &procs {
            forget_placed(&mut placed, job, *rank);
        }
    }
    for (job, rank) in procs {
        tracing::warn!(%job, rank, %node, "the node's helper went away; its process is lost");
        let req = Request::ProcessExited {
            job: job.clone(),
            rank,
            exit: qcg_proto::ExitReport::not_started(why.clone()),
        };
        if let Err(e) = inner.broker.request(&req).await {
            tracing::warn!(%job, rank, error = %e, "the loss of a process was not delivered");
        }
    }
}

/// The best of three empty round trips on `conn` (its QUIC estimate if they fail).
async fn ping(conn: &quinn::Connection) -> Duration {
    let mut best = None;
    for _ in 0..3 {
        let t = Instant::now();
        let echo = Request::Echo {
            payload: String::new(),
        };
        if quic::request(conn, &echo).await.is_ok() {
            let d = t.elapsed();
            best = Some(best.map_or(d, |b: Duration| b.min(d)));
        }
    }
    best.unwrap_or_else(|| conn.rtt())
}

/// Passes a broker's notice to the helper of the target's node.
async fn notify(inner: &Inner, req: Request) -> Response {
    let Request::Notify { target, .. } = &req else {
        return Response::error(qcg_proto::ErrorKind::Internal, "not a notice");
    };
    let conn = lock(&inner.routes).get(target).cloned();
    let Some(conn) = conn else {
        return Response::error(
            qcg_proto::ErrorKind::UnknownProcess,
            format!(
                "process {target} is not registered in cluster `{}`",
                inner.cluster.name
            ),
        );
    };
    match tokio::time::timeout(
        std::time::Duration::from_secs(3),
        quic::request(&conn, &req),
    )
    .await
    {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => Response::error(
            qcg_proto::ErrorKind::Unavailable,
            format!("helper of {target}: {e}"),
        ),
        Err(_) => Response::error(
            qcg_proto::ErrorKind::Unavailable,
            format!("helper of {target} did not answer"),
        ),
    }
}

/// A rank that ended is no longer placed here; a job none of whose ranks is, neither.
fn forget_placed(placed: &mut Placed, job: &str, rank: u32) {
    if let Some(ranks) = placed.get_mut(job) {
        ranks.remove(&rank);
        if ranks.is_empty() {
            placed.remove(job);
        }
    }
}

/// Whether the helper of `node` may send `req`: a registration names the helper's
/// own node, and a request acting for a rank the broker placed in this cluster comes
/// from the helper of that rank's node; a placed job is not ended from a node. Jobs
/// not placed here pass (the broker checks the cluster, and the helpers the user).
fn placed(placed: &Placed, node: Option<&str>, req: &Request) -> Result<(), String> {
    let (process, said) = match req {
        Request::Register(ap) => (&ap.process, Some(ap.node.as_str())),
        Request::Unregister { process } => (process, None),
        Request::Lookup { from, .. }
        | Request::Report { from, .. }
        | Request::Rendezvous { from, .. }
        | Request::Syn { from, .. } => (from, None),
        Request::JobEnd { job } => {
            return match placed.get(job) {
                Some(_) => Err(format!(
                    "job {job} was submitted to the broker: it ends when its processes end, \
                     not by a `job_end` from node {}",
                    node.unwrap_or("(unregistered)")
                )),
                None => Ok(()),
            };
        }
        _ => return Ok(()),
    };
    let Some(node) = node else {
        return Err("the helper has not registered its node".into());
    };
    if let Some(said) = said.filter(|s| *s != node) {
        return Err(format!(
            "the helper of node {node} registers only its own processes, not one on node {said}"
        ));
    }
    match placed
        .get(&process.job)
        .map(|ranks| ranks.get(&process.rank))
    {
        Some(Some(at)) if at != node => Err(format!(
            "rank {} of job {} was placed on node {at}, not on node {node}",
            process.rank, process.job
        )),
        Some(None) => Err(format!(
            "job {} has no rank {} placed in this cluster",
            process.job, process.rank
        )),
        _ => Ok(()),
    }
}

/// The request a helper sent, checked if it names its sender
/// ([`Request::ForUser`]): a helper speaks for its own node's users only.
fn for_user<'r>(node: Option<&str>, req: &'r Request) -> Result<&'r Request, String> {
    let (plain, user) = req.by_user();
    if let Some(user) = user {
        if let Request::ForUser { .. } = plain {
            return Err("a request names its sender twice".into());
        }
        if node != Some(user.node.as_str()) {
            return Err(format!(
                "the helper of node {} speaks for its own node's users, not for {user}",
                node.unwrap_or("(unregistered)")
            ));
        }
    }
    Ok(plain)
}

async fn handle(inner: &Inner, helper: &quinn::Connection, req: Request) -> Response {
    let resp = forward(inner, &req).await;
    let plain = req.by_user().0;
    if let (
        Request::Report {
            technique,
            ok,
            upgrade,
            ..
        },
        Response::Ok,
    ) = (plain, &resp)
    {
        inner.metrics.links.note(*technique, *ok, *upgrade);
    }
    // What this frontal keeps of a process changes only as the broker took it: a
    // refused request leaves the job as it was.
    let refused = matches!(&resp, Response::Error(e) if e.kind == ErrorKind::Forbidden);
    if matches!(resp, Response::Ok) {
        if let Request::Register(ap) = plain {
            lock(&inner.routes).insert(ap.process.clone(), helper.clone());
            // Sent again as it came (with its sender) to a broker that lost it.
            lock(&inner.registrations).insert(ap.process.clone(), req.clone());
        }
    }
    if !refused {
        match plain {
            Request::Unregister { process } => {
                lock(&inner.routes).remove(process);
                lock(&inner.registrations).remove(process);
            }
            Request::JobEnd { job } => {
                lock(&inner.routes).retain(|p, _| &p.job != job);
                lock(&inner.registrations).retain(|p, _| &p.job != job);
            }
            _ => {}
        }
    }
    resp
}

async fn forward(inner: &Inner, req: &Request) -> Response {
    let req = req.clone();
    let (plain, user) = req.by_user();
    match plain {
        Request::ClusterInfo => Response::Cluster(inner.cluster.clone()),
        Request::Lookup { target, .. } => {
            inner.stats.lookups.fetch_add(1, Ordering::Relaxed);
            let slot = inner.cache.slot(target);
            let mut plan = slot.lock().await;
            // A plan the broker gave one user is not another's to see: it answers
            // only lookups from the same sender.
            if let Some((p, by)) = plan.as_ref() {
                let same = match (by, user) {
                    (None, None) => true,
                    (Some(a), Some(b)) => a.same(b),
                    _ => false,
                };
                if same {
                    inner.stats.cache_hits.fetch_add(1, Ordering::Relaxed);
                    return Response::Plan(p.clone());
                }
            }
            let resp = inner.broker.forward(&req).await;
            if let Response::Plan(p) = &resp {
                *plan = Some((p.clone(), user.cloned()));
            }
            resp
        }
        Request::Register(_)
        | Request::Unregister { .. }
        | Request::Report { .. }
        | Request::JobEnd { .. }
        | Request::Rendezvous { .. }
        | Request::Syn { .. } => inner.broker.forward(&req).await,
        _ if user.is_some() => Response::error(
            ErrorKind::Forbidden,
            format!("`{}` may not name its sender", req.kind()),
        ),
        // What a job printed and how its processes ended must reach the broker even
        // if it is away for a while: kept here, and sent first when it is back.
        Request::Output { .. } | Request::ProcessExited { .. } => {
            match inner.broker.request(&req).await {
                Ok(r) => r,
                Err(e) => {
                    inner.metrics.errors.note("broker_unreachable");
                    tracing::warn!(error = %e, kind = req.kind(), "broker away; kept for when it is back");
                    inner.held.lock().await.push(req);
                    Response::Ok
                }
            }
        }
        other => Response::error(
            ErrorKind::Forbidden,
            format!("`{}` is not a request a helper may send", other.kind()),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use qcg_proto::{AccessPoint, ProcName};

    fn register(rank: u32, node: &str) -> Request {
        Request::Register(AccessPoint {
            process: ProcName::new("j", rank),
            cluster: "c".into(),
            node: node.into(),
            private_addr: [127, 0, 0, 1].into(),
            public_addr: None,
            port: 9,
        })
    }

    #[test]
    fn a_helper_names_only_its_own_nodes_users() {
        let by = |node: &str, req: Request| Request::ForUser {
            user: qcg_proto::LocalUser {
                uid: 1000,
                machine: "m".into(),
                node: node.into(),
            },
            request: Box::new(req),
        };
        let r = by("n1", register(0, "n1"));
        assert_eq!(for_user(Some("n1"), &r).unwrap(), &register(0, "n1"));
        let e = for_user(Some("n2"), &r).unwrap_err();
        assert!(
            e.contains("helper of node n2") && e.contains("uid 1000 on node n1"),
            "{e}"
        );
        assert!(for_user(Some("n1"), &by("n1", r)).is_err());
        assert_eq!(
            for_user(None, &register(0, "n1")).unwrap(),
            &register(0, "n1")
        );
    }

    #[test]
    fn a_placed_rank_acts_only_through_its_nodes_helper() {
        let mut p = Placed::new();
        p.entry("j".into()).or_default().insert(0, "n1".into());
        p.entry("j".into()).or_default().insert(1, "n2".into());
        placed(&p, Some("n1"), &register(0, "n1")).unwrap();
        let e = placed(&p, Some("n1"), &register(1, "n1")).unwrap_err();
        assert!(
            e.contains("rank 1 of job j was placed on node n2, not on node n1"),
            "{e}"
        );
        let e = placed(&p, Some("n1"), &register(0, "n2")).unwrap_err();
        assert!(e.contains("only its own processes"), "{e}");
        let lookup = Request::Lookup {
            from: ProcName::new("j", 1),
            target: ProcName::new("j", 0),
        };
        placed(&p, Some("n2"), &lookup).unwrap();
        assert!(placed(&p, Some("n1"), &lookup).is_err());
        let e = placed(&p, Some("n1"), &register(5, "n1")).unwrap_err();
        assert!(e.contains("no rank 5"), "{e}");
        let end = Request::JobEnd { job: "j".into() };
        assert!(placed(&p, Some("n1"), &end)
            .unwrap_err()
            .contains("submitted"));
        // Jobs not placed here (qcg run's) pass; the broker and helpers check them.
        placed(&p, Some("n1"), &Request::JobEnd { job: "k".into() }).unwrap();
        assert!(placed(&p, None, &register(0, "n1")).is_err());
    }

    #[test]
    fn ended_ranks_and_jobs_are_forgotten() {
        let mut p = Placed::new();
        p.entry("j".into()).or_default().insert(0, "n1".into());
        p.entry("j".into()).or_default().insert(1, "n1".into());
        forget_placed(&mut p, "j", 0);
        assert!(placed(&p, Some("n1"), &register(0, "n1")).is_err());
        forget_placed(&mut p, "j", 1);
        assert!(p.is_empty());
    }
}
