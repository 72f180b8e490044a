//! The broker's HTTP API: read-only views of its state, the resource topology and
//! Prometheus metrics. It holds nothing secret and changes nothing, so it may be
//! served on plain HTTP (`http_listen`); the job API is HTTPS only ([`crate::api`]).

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
        .route("/v1/processes", get(processes))
        .route("/v1/links", get(links))
        .route("/metrics", get(metrics))
        .with_state(ctx.registry.clone())
        .merge(
            Router::new()
                .route("/v1/topology", get(topology))
                .with_state(ctx),
        )
}

async fn topology(State(ctx): State<Ctx>) -> impl IntoResponse {
    Json(ctx.topology())
}

async fn clusters(State(s): State<Shared>) -> impl IntoResponse {
    Json(lock(&s).clusters())
}

async fn processes(State(s): State<Shared>) -> impl IntoResponse {
    Json(lock(&s).processes())
}

async fn links(State(s): State<Shared>) -> impl IntoResponse {
    Json(lock(&s).links())
}

async fn metrics(State(s): State<Shared>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        lock(&s).metrics(),
    )
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
        let (s, body) = get(app(state.clone()), "/v1/topology").await;
        assert_eq!(s, StatusCode::OK);
        assert_eq!(body, r#"{"clusters":[],"links":[]}"#);
        let (s, _) = get(app(state), "/v1/nope").await;
        assert_eq!(s, StatusCode::NOT_FOUND);
    }
}
