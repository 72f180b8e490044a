//! The broker's plain HTTP API: aggregate, read-only figures only. Cluster
//! summaries (name, announced policy and NAT, process count; no address), link
//! outcome counts, the resource topology (nodes, slots and measured links; no
//! address) and Prometheus metrics. Nothing here names a process or an address,
//! so it may be served without authentication (`http_listen`, on loopback unless
//! the config says `http_public = true`); the processes' addresses and the jobs are
//! on the HTTPS API only ([`crate::api`]), for their owners and admins.
//!
//! Anyone who reaches the port may connect, so what a connection may hold is
//! bounded ([`serve`]): a few connections per address and a few dozen in all, a few
//! seconds to send each request's head (the first one, and the next one on a kept
//! connection), a minute in all. The HTTPS API shares the accept loop
//! ([`accept_loop`]) with its own, larger caps.

use crate::grid::Ctx;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use qcg_proto::limits::{self, AcceptErrors, Caps, Permit};
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// How long a plain-HTTP client has to send a request's head: the first one, and
/// the next one on a kept-alive connection (so idle connections close this soon).
pub const PLAIN_HEAD: Duration = Duration::from_secs(5);
/// How long a plain-HTTP connection may stay open at most.
pub const PLAIN_LIFETIME: Duration = Duration::from_secs(60);
/// How long an HTTPS client has for its handshake.
pub const TLS_HANDSHAKE: Duration = Duration::from_secs(10);
/// How long an HTTPS client has to send a request's head (first or next).
pub const HTTPS_HEAD: Duration = Duration::from_secs(30);

/// Caps of the plain-HTTP API for a process allowed `nofile` descriptors: an eighth
/// of them (at most 256), a quarter of that per address.
pub fn plain_caps(nofile: u64) -> Caps<IpAddr> {
    Caps::sized(nofile, 0.125, 256)
}

/// Caps of the HTTPS API: half the descriptors (at most 4,096), a quarter of that
/// per address.
pub fn tls_caps(nofile: u64) -> Caps<IpAddr> {
    Caps::sized(nofile, 0.5, 4096)
}

/// Accepts on `listener` until `cancel`: a connection over `caps` is closed at
/// once (refusals summed up in the log), the others are handed to `serve` in a
/// tracked task with their permit. Out of descriptors, the loop pauses instead of
/// spinning and says so once per interval.
pub async fn accept_loop<F, Fut>(
    listener: TcpListener,
    what: &'static str,
    caps: Caps<IpAddr>,
    cancel: CancellationToken,
    tracker: TaskTracker,
    serve: F,
) where
    F: Fn(TcpStream, SocketAddr, Permit<IpAddr>) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let mut errors = AcceptErrors::new(what);
    loop {
        let (tcp, peer) = tokio::select! {
            _ = cancel.cancelled() => break,
            a = listener.accept() => match a {
                Ok(a) => a,
                Err(e) => {
                    let pause = errors.failed(&e, Instant::now());
                    tokio::select! {
                        _ = cancel.cancelled() => break,
                        _ = tokio::time::sleep(pause) => {}
                    }
                    continue;
                }
            },
        };
        errors.flush(Instant::now());
        let Some(permit) = limits::admit(&caps, what, peer.ip()) else {
            drop(tcp);
            continue;
        };
        let c = cancel.clone();
        let conn = serve(tcp, peer, permit);
        tracker.spawn(async move {
            tokio::select! {
                _ = c.cancelled() => {}
                _ = conn => {}
            }
        });
    }
}

/// One HTTP/1.1 connection served by `app` (plain or inside TLS), each request's
/// head due within `head`.
pub async fn serve_connection<I>(io: I, app: Router, head: Duration) -> Result<(), hyper::Error>
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let svc = hyper_util::service::TowerToHyperService::new(app);
    hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(head)
        .serve_connection(hyper_util::rt::TokioIo::new(io), svc)
        .await
}

/// Serves the plain-HTTP API on `listener` until `cancel`, bounded by `caps`,
/// [`PLAIN_HEAD`] and [`PLAIN_LIFETIME`].
pub async fn serve(
    listener: TcpListener,
    app: Router,
    caps: Caps<IpAddr>,
    cancel: CancellationToken,
    tracker: TaskTracker,
) {
    accept_loop(
        listener,
        "HTTP API",
        caps,
        cancel,
        tracker,
        move |tcp, peer, permit| {
            let app = app.clone();
            async move {
                let _permit = permit;
                let conn = serve_connection(tcp, app, PLAIN_HEAD);
                match tokio::time::timeout(PLAIN_LIFETIME, conn).await {
                    Ok(Err(e)) => tracing::debug!(%peer, error = %e, "HTTP connection ended"),
                    Err(_) => tracing::debug!(%peer, "HTTP connection open too long; closed"),
                    Ok(Ok(())) => {}
                }
            }
        },
    )
    .await
}

/// The router, built apart from serving so tests can call it without a port.
pub fn app(ctx: Ctx) -> Router {
    Router::new()
        .route("/v1/clusters", get(clusters))
        .route("/v1/links", get(links))
        .route("/v1/topology", get(topology))
        .route("/metrics", get(metrics))
        .with_state(ctx)
}

async fn topology(State(ctx): State<Ctx>) -> impl IntoResponse {
    // Whose jobs each node runs names client identities: not for plain HTTP.
    let mut t = ctx.topology();
    for n in t.clusters.iter_mut().flat_map(|c| c.nodes.iter_mut()) {
        n.submitters = None;
    }
    Json(t)
}

async fn clusters(State(ctx): State<Ctx>) -> impl IntoResponse {
    Json(ctx.core().registry.cluster_summaries())
}

async fn links(State(ctx): State<Ctx>) -> impl IntoResponse {
    Json(ctx.core().registry.links())
}

async fn metrics(State(ctx): State<Ctx>) -> impl IntoResponse {
    use crate::jobs::JobState;
    let mut e = qcg_proto::metrics::Exposition::default();
    e.raw(&ctx.core().registry.metrics());
    // Jobs by state: the queue is the `queued` ones.
    let (states, bytes) = {
        let book = ctx.book();
        let mut n = [0usize; 5];
        for j in book.jobs.all() {
            n[match j.state {
                JobState::Queued => 0,
                JobState::Running => 1,
                JobState::Succeeded => 2,
                JobState::Failed { .. } => 3,
                JobState::Cancelled => 4,
            }] += 1;
        }
        (n, book.jobs.output_bytes())
    };
    let mut f = e.gauge(
        "qcg_broker_jobs",
        "Jobs the broker knows, by state (queued: waiting for slots; the finished ones \
         until their record is dropped).",
    );
    for (s, n) in ["queued", "running", "succeeded", "failed", "cancelled"]
        .iter()
        .zip(states)
    {
        f.sample(&[("state", s)], n);
    }
    e.gauge(
        "qcg_broker_output_bytes",
        "Bytes of job output the broker holds.",
    )
    .value(bytes);
    let listeners: Vec<_> = lock_listeners(&ctx)
        .iter()
        .map(|(name, caps)| (*name, caps.counts()))
        .collect();
    e.connections("qcg_broker", &listeners);
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        e.finish(),
    )
}

fn lock_listeners(ctx: &Ctx) -> std::sync::MutexGuard<'_, Vec<(&'static str, Caps<IpAddr>)>> {
    ctx.listeners.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::{Request, StatusCode};
    use http_body_util::BodyExt;
    use qcg_proto::{ClusterConfig, Policy};
    use tower::ServiceExt;

    async fn get(app: Router, uri: &str) -> (StatusCode, String) {
        let resp = app
            .oneshot(Request::get(uri).body(Body::empty()).unwrap())
            .await
            .unwrap();
        let status = resp.status();
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8(body.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn endpoints_answer() {
        let state: crate::grid::Shared = Default::default();
        state.lock().unwrap().registry.handle(
            None,
            qcg_proto::Request::RegisterCluster(ClusterConfig {
                name: "orsay".into(),
                policy: Policy::Open,
                nat: qcg_proto::Nat::None,
                public_address: None,
            }),
        );
        let ctx = Ctx::new(state.clone(), std::time::Duration::from_secs(60));
        let app = |_: crate::grid::Shared| self::app(ctx.clone());
        let (s, body) = get(app(state.clone()), "/v1/clusters").await;
        assert_eq!(s, StatusCode::OK);
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v[0]["name"], "orsay");
        assert_eq!(v[0]["policy"], "open");
        let (_, body) = get(app(state.clone()), "/v1/links").await;
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["direct"]["ok"], 0);
        let (_, body) = get(app(state.clone()), "/metrics").await;
        assert!(body.contains("qcg_broker_clusters 1"), "{body}");
        assert!(body.contains("\nqcg_broker_output_bytes 0\n"), "{body}");
        let (s, body) = get(app(state.clone()), "/v1/topology").await;
        assert_eq!(s, StatusCode::OK);
        assert_eq!(body, r#"{"clusters":[],"links":[]}"#);
        let (s, _) = get(app(state.clone()), "/v1/nope").await;
        assert_eq!(s, StatusCode::NOT_FOUND);
        // No address on plain HTTP: no process list, no cluster address.
        state.lock().unwrap().registry.handle(
            None,
            qcg_proto::Request::RegisterCluster(ClusterConfig {
                name: "nat".into(),
                policy: Policy::Closed,
                nat: qcg_proto::Nat::PortPreserving,
                public_address: Some([192, 0, 2, 77].into()),
            }),
        );
        let (s, _) = get(app(state.clone()), "/v1/processes").await;
        assert_eq!(s, StatusCode::NOT_FOUND);
        let (_, body) = get(app(state.clone()), "/v1/clusters").await;
        assert!(!body.contains("192.0.2.77"), "{body}");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v[0]["name"], "nat");
        assert_eq!(v[0]["processes"], 0);
    }
}
