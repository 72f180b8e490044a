//! The qcg frontal: one per cluster, on its gateway.
//!
//! It connects to the broker (QUIC, mutual TLS), registers its cluster's
//! configuration, accepts the cluster's helpers (each with a `helper` certificate from
//! the grid CA) and forwards their requests. Lookups are answered from a cache of
//! broker answers when possible; the broker tells the frontal when an answer goes
//! stale (a process re-registered or ended, a job ended).
//!
//! ```no_run
//! # async fn f(id: qcg_proto::tls::Identity, cluster: qcg_proto::ClusterConfig) -> anyhow::Result<()> {
//! let frontal = qcg_frontal::Frontal::start(id, cluster, "127.0.0.1:7700".parse()?, "127.0.0.1:0".parse()?).await?;
//! println!("helpers dial {}", frontal.addr);
//! # Ok(()) }
//! ```

pub mod cache;
pub mod config;

use cache::PlanCache;
use qcg_proto::quic::{self, Upstream};
use qcg_proto::tls::{Identity, Role};
use qcg_proto::{ClusterConfig, Request, Response};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Counters a test or an operator can read.
#[derive(Default, Debug)]
pub struct Stats {
    /// Lookups received from helpers.
    pub lookups: AtomicU64,
    /// Lookups answered from the cache.
    pub cache_hits: AtomicU64,
}

struct Inner {
    /// The helper connection each registered process came through.
    routes: std::sync::Mutex<std::collections::HashMap<qcg_proto::ProcName, quinn::Connection>>,
    cluster: ClusterConfig,
    broker: Upstream,
    cache: PlanCache,
    stats: Stats,
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

impl Frontal {
    /// Starts serving helpers on `listen`; the broker is dialled on first need.
    pub async fn start(
        id: Identity,
        cluster: ClusterConfig,
        broker: SocketAddr,
        listen: SocketAddr,
    ) -> anyhow::Result<Frontal> {
        let endpoint = quic::server_endpoint(listen, &id)?;
        let addr = endpoint.local_addr()?;
        let cancel = CancellationToken::new();
        let tracker = TaskTracker::new();

        let inner = Arc::new_cyclic(|weak: &std::sync::Weak<Inner>| {
            let weak = weak.clone();
            let t = tracker.clone();
            // Requests the broker opens toward us: cache invalidations.
            let on_connect = Arc::new(move |conn: quinn::Connection| {
                let weak = weak.clone();
                t.spawn(async move {
                    let handler = move |req: Request| {
                        let weak = weak.clone();
                        async move {
                            match (req, weak.upgrade()) {
                                (Request::Invalidate { job, rank }, Some(inner)) => {
                                    let n = inner.cache.invalidate(&job, rank);
                                    tracing::debug!(%job, ?rank, dropped = n, "cache invalidated");
                                    Response::Ok
                                }
                                (req @ Request::Notify { .. }, Some(inner)) => {
                                    notify(&inner, req).await
                                }
                                (req, _) => Response::error(
                                    qcg_proto::ErrorKind::Forbidden,
                                    format!(
                                        "a frontal does not answer `{}` from the broker",
                                        req.kind()
                                    ),
                                ),
                            }
                        }
                    };
                    quic::serve(conn, handler).await;
                });
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
                cluster,
                cache: PlanCache::default(),
                stats: Stats::default(),
            }
        });

        // Register now so the cluster is known before its first process; a broker that
        // is not up yet is retried on the first request.
        if let Err(e) = inner.broker.request(&Request::ClusterInfo).await {
            tracing::warn!(broker = %broker, error = %e, "broker not reachable yet; will retry on demand");
        }

        let ep = endpoint.clone();
        let (inn, c, t) = (inner.clone(), cancel.clone(), tracker.clone());
        tracker.spawn(async move {
            loop {
                let incoming = tokio::select! {
                    _ = c.cancelled() => break,
                    i = ep.accept() => match i { Some(i) => i, None => break },
                };
                let inn = inn.clone();
                t.spawn(async move {
                    let peer = incoming.remote_address();
                    match incoming.await {
                        Ok(conn) => serve_helper(conn, inn).await,
                        Err(e) => tracing::warn!(%peer, error = %e, "helper handshake failed"),
                    }
                });
            }
        });
        tracing::info!(cluster = %inner.cluster.name, %addr, "frontal started");
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

    /// Stops serving and waits for the tasks.
    pub async fn shutdown(self) {
        self.cancel.cancel();
        self.endpoint.close(0u32.into(), b"frontal shutting down");
        self.tracker.close();
        self.tracker.wait().await;
    }
}

async fn serve_helper(conn: quinn::Connection, inner: Arc<Inner>) {
    let peer = conn.remote_address();
    if let Err(e) = quic::check_peer_role(&conn, Role::Helper) {
        tracing::warn!(%peer, error = %e, "refused connection");
        conn.close(1u32.into(), b"a helper certificate is required");
        return;
    }
    tracing::info!(%peer, "helper connected");
    let c = conn.clone();
    let handler = move |req: Request| {
        let (inner, conn) = (inner.clone(), c.clone());
        async move { handle(&inner, &conn, req).await }
    };
    let why = quic::serve(conn, handler).await;
    tracing::info!(%peer, reason = %why, "helper disconnected");
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

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

async fn handle(inner: &Inner, helper: &quinn::Connection, req: Request) -> Response {
    match &req {
        Request::Register(ap) => {
            lock(&inner.routes).insert(ap.process.clone(), helper.clone());
        }
        Request::Unregister { process } => {
            lock(&inner.routes).remove(process);
        }
        Request::JobEnd { job } => {
            lock(&inner.routes).retain(|p, _| &p.job != job);
        }
        _ => {}
    }
    match req {
        Request::ClusterInfo => Response::Cluster(inner.cluster.clone()),
        Request::Lookup { ref target, .. } => {
            inner.stats.lookups.fetch_add(1, Ordering::Relaxed);
            let slot = inner.cache.slot(target);
            let mut plan = slot.lock().await;
            if let Some(p) = plan.as_ref() {
                inner.stats.cache_hits.fetch_add(1, Ordering::Relaxed);
                return Response::Plan(p.clone());
            }
            let resp = inner.broker.forward(&req).await;
            if let Response::Plan(p) = &resp {
                *plan = Some(p.clone());
            }
            resp
        }
        Request::RegisterCluster(_)
        | Request::Invalidate { .. }
        | Request::Notify { .. }
        | Request::RegisterProxy { .. }
        | Request::ExpectRelay { .. } => Response::error(
            qcg_proto::ErrorKind::Forbidden,
            format!("`{}` is not a request a helper may send", req.kind()),
        ),
        other => inner.broker.forward(&other).await,
    }
}
