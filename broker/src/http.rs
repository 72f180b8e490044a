//! The broker's plain HTTP API: aggregate, read-only figures only. Cluster
//! summaries (name, announced policy and NAT, process count; no address), link
//! outcome counts, the resource topology (nodes, slots and measured links; no
//! address) and Prometheus metrics. Nothing here names a process or an address,
//! so it may be served without authentication (`http_listen`, on loopback unless
//! the config says `http_public = true`); the processes' addresses and the jobs are
//! on the HTTPS API only ([`crate::api`]), for their owners and admins.

use crate::grid::Ctx;
use crate::registry::Registry;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use std::sync::{Arc, Mutex};

/// Shared state behind the API.
pub type Shared = Arc<Mutex<Registry>>;

fn lock(s: &Shared) -> std::sync::MutexGuard<'_, Registry> {
    s.lock().unwrap_or_else(|p| p.into_inner())
}

/// The router, built apart from serving so tests can call it without a port.
pub fn app(ctx: Ctx) -> Router {
    Router::new()
        .route("/v1/clusters", get(clusters))
        .route("/v1/links", get(links))
        .with_state(ctx.registry.clone())
        .merge(
            Router::new()
                .route("/v1/topology", get(topology))
                .route("/metrics", get(metrics))
                .with_state(ctx),
        )
}

async fn topology(State(ctx): State<Ctx>) -> impl IntoResponse {
    // Whose jobs each node runs names client identities: not for plain HTTP.
    let mut t = ctx.topology();
    for n in t.clusters.iter_mut().flat_map(|c| c.nodes.iter_mut()) {
        n.submitters = None;
    }
    Json(t)
}

async fn clusters(State(s): State<Shared>) -> impl IntoResponse {
    Json(lock(&s).cluster_summaries())
}

async fn links(State(s): State<Shared>) -> impl IntoResponse {
    Json(lock(&s).links())
}

async fn metrics(State(ctx): State<Ctx>) -> impl IntoResponse {
    let mut text = lock(&ctx.registry).metrics();
    let (jobs, bytes) = {
        let book = ctx.book();
        (book.jobs.all().count(), book.jobs.output_bytes())
    };
    text.push_str(&format!(
        "# HELP qcg_broker_jobs Jobs the broker knows.\n# TYPE qcg_broker_jobs gauge\nqcg_broker_jobs {jobs}\n\
         # HELP qcg_broker_output_bytes Bytes of job output the broker holds.\n# TYPE qcg_broker_output_bytes gauge\nqcg_broker_output_bytes {bytes}\n"
    ));
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text)
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
        let state: Shared = Default::default();
        state.lock().unwrap().handle(
            None,
            qcg_proto::Request::RegisterCluster(ClusterConfig {
                name: "orsay".into(),
                policy: Policy::Open,
                nat: qcg_proto::Nat::None,
                public_address: None,
            }),
        );
        let ctx = Ctx::new(state.clone(), std::time::Duration::from_secs(60));
        let app = |_: Shared| self::app(ctx.clone());
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
        state.lock().unwrap().handle(
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
