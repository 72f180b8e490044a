//! The qcg broker: one per grid.
//!
//! It accepts frontals over QUIC with mutual TLS (each must hold a `frontal`
//! certificate from the grid CA), keeps every cluster's configuration and the contact
//! registry of every process, and answers connection requests with a plan chosen by
//! the pure function in [`plan`]. An HTTP API ([`http`]) shows its state and metrics.
//!
//! ```no_run
//! # async fn f(id: qcg_proto::tls::Identity) -> anyhow::Result<()> {
//! let broker = qcg_broker::Broker::start(
//!     id,
//!     "127.0.0.1:0".parse()?,
//!     Some("127.0.0.1:0".parse()?),
//! )
//! .await?;
//! println!("frontals dial {}", broker.quic_addr);
//! broker.shutdown().await;
//! # Ok(()) }
//! ```

pub mod config;
pub mod http;
pub mod plan;
pub mod registry;

use qcg_proto::msg::{Request, Response};
use qcg_proto::quic;
use qcg_proto::tls::{Identity, Role};
use registry::{Invalidation, Registry};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// A running broker.
pub struct Broker {
    /// Where frontals connect (QUIC).
    pub quic_addr: SocketAddr,
    /// Where the HTTP API listens, if enabled.
    pub http_addr: Option<SocketAddr>,
    /// The broker's state (read by tests and the embedded grid).
    pub state: http::Shared,
    cancel: CancellationToken,
    tracker: TaskTracker,
    endpoint: quinn::Endpoint,
}

type Frontals = Arc<Mutex<HashMap<String, quinn::Connection>>>;

impl Broker {
    /// Binds and starts serving. Bind to port 0 to let the system choose.
    pub async fn start(
        id: Identity,
        quic_addr: SocketAddr,
        http_addr: Option<SocketAddr>,
    ) -> anyhow::Result<Broker> {
        let endpoint = quic::server_endpoint(quic_addr, &id)?;
        let quic_addr = endpoint.local_addr()?;
        let state: http::Shared = Arc::new(Mutex::new(Registry::default()));
        let cancel = CancellationToken::new();
        let tracker = TaskTracker::new();
        let frontals: Frontals = Default::default();

        let http_addr = match http_addr {
            Some(addr) => {
                let listener = tokio::net::TcpListener::bind(addr)
                    .await
                    .map_err(|e| anyhow::anyhow!("cannot bind the HTTP API on {addr}: {e}"))?;
                let addr = listener.local_addr()?;
                let app = http::app(state.clone());
                let c = cancel.clone();
                tracker.spawn(async move {
                    let r = axum::serve(listener, app)
                        .with_graceful_shutdown(async move { c.cancelled().await })
                        .await;
                    if let Err(e) = r {
                        tracing::error!(error = %e, "HTTP API stopped");
                    }
                });
                Some(addr)
            }
            None => None,
        };

        let ep = endpoint.clone();
        let (st, c, t) = (state.clone(), cancel.clone(), tracker.clone());
        tracker.spawn(async move {
            loop {
                let incoming = tokio::select! {
                    _ = c.cancelled() => break,
                    i = ep.accept() => match i { Some(i) => i, None => break },
                };
                let (st, fr) = (st.clone(), frontals.clone());
                t.spawn(async move {
                    let peer = incoming.remote_address();
                    match incoming.await {
                        Ok(conn) => serve_frontal(conn, st, fr).await,
                        Err(e) => tracing::warn!(%peer, error = %e, "frontal handshake failed"),
                    }
                });
            }
        });
        tracing::info!(%quic_addr, ?http_addr, "broker started");
        Ok(Broker {
            quic_addr,
            http_addr,
            state,
            cancel,
            tracker,
            endpoint,
        })
    }

    /// Stops accepting, closes connections and waits for the tasks.
    pub async fn shutdown(self) {
        self.cancel.cancel();
        self.endpoint.close(0u32.into(), b"broker shutting down");
        self.tracker.close();
        self.tracker.wait().await;
    }
}

async fn serve_frontal(conn: quinn::Connection, state: http::Shared, frontals: Frontals) {
    let peer = conn.remote_address();
    if let Err(e) = quic::check_peer_role(&conn, Role::Frontal) {
        tracing::warn!(%peer, error = %e, "refused connection");
        conn.close(1u32.into(), b"a frontal certificate is required");
        return;
    }
    tracing::info!(%peer, "frontal connected");
    // The cluster this connection speaks for, set by its first RegisterCluster.
    let cluster: Arc<Mutex<Option<String>>> = Default::default();
    let c2 = conn.clone();
    let cl = cluster.clone();
    let fr = frontals.clone();
    let handler = move |req: Request| {
        let (state, cluster, frontals, conn) = (state.clone(), cl.clone(), fr.clone(), c2.clone());
        async move {
            let current = cluster.lock().unwrap_or_else(|p| p.into_inner()).clone();
            let name = match &req {
                Request::RegisterCluster(c) => Some(c.name.clone()),
                _ => None,
            };
            tracing::debug!(%peer, kind = req.kind(), "request");
            let (resp, inv) = state
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .handle(current.as_deref(), req);
            if let (Some(name), Response::Ok) = (name, &resp) {
                *cluster.lock().unwrap_or_else(|p| p.into_inner()) = Some(name.clone());
                frontals
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(name.clone(), conn);
                tracing::info!(%peer, cluster = %name, "cluster registered");
            }
            if let Some(inv) = inv {
                push_invalidation(&frontals, inv);
            }
            resp
        }
    };
    let why = quic::serve(conn.clone(), handler).await;
    if let Some(name) = cluster.lock().unwrap_or_else(|p| p.into_inner()).clone() {
        let mut f = frontals.lock().unwrap_or_else(|p| p.into_inner());
        if f.get(&name)
            .is_some_and(|c| c.stable_id() == conn.stable_id())
        {
            f.remove(&name);
        }
    }
    tracing::info!(%peer, reason = %why, "frontal disconnected");
}

fn push_invalidation(frontals: &Frontals, inv: Invalidation) {
    let conns: Vec<_> = frontals
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .values()
        .cloned()
        .collect();
    for conn in conns {
        let req = Request::Invalidate {
            job: inv.job.clone(),
            rank: inv.rank,
        };
        tokio::spawn(async move {
            if let Err(e) = quic::request(&conn, &req).await {
                tracing::warn!(peer = %conn.remote_address(), error = %e, "invalidation not delivered");
            }
        });
    }
}
