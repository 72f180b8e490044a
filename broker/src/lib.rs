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

use qcg_proto::msg::{ErrorKind, Request, Response};
use qcg_proto::quic;
use qcg_proto::tls::{Identity, Role};
use registry::{Effect, Invalidation, Registry};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
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

type Conns<K> = Arc<Mutex<HashMap<K, quinn::Connection>>>;

/// Connections the broker can push requests over.
#[derive(Clone, Default)]
struct Peers {
    frontals: Conns<String>,
    proxies: Conns<SocketAddr>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Broker {
    /// Binds and starts serving. Bind to port 0 to let the system choose.
    pub async fn start(
        id: Identity,
        quic_addr: SocketAddr,
        http_addr: Option<SocketAddr>,
    ) -> anyhow::Result<Broker> {
        let endpoint = quic::server_endpoint(quic_addr, &id)?;
        let quic_addr = endpoint.local_addr()?;
        let state: http::Shared =
            Arc::new(Mutex::new(Registry::with_tokens(Box::new(random_token))));
        let cancel = CancellationToken::new();
        let tracker = TaskTracker::new();
        let peers = Peers::default();

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
                let (st, peers) = (st.clone(), peers.clone());
                t.spawn(async move {
                    let peer = incoming.remote_address();
                    match incoming.await {
                        Ok(conn) => {
                            if quic::check_peer_role(&conn, Role::Frontal).is_ok() {
                                serve_frontal(conn, st, peers).await
                            } else if quic::check_peer_role(&conn, Role::Proxy).is_ok() {
                                serve_proxy(conn, st, peers).await
                            } else {
                                tracing::warn!(%peer, "refused connection: neither a frontal nor a proxy certificate");
                                conn.close(1u32.into(), b"a frontal certificate is required");
                            }
                        }
                        Err(e) => tracing::warn!(%peer, error = %e, "handshake failed"),
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

fn random_token() -> String {
    use ring::rand::SecureRandom;
    let mut b = [0u8; 32];
    ring::rand::SystemRandom::new()
        .fill(&mut b)
        .expect("system random number generator");
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// How long the broker waits for a proxy or a frontal to take a pushed request.
const PUSH_TIMEOUT: Duration = Duration::from_secs(3);

async fn push(conn: &quinn::Connection, req: &Request) -> Result<Response, String> {
    match tokio::time::timeout(PUSH_TIMEOUT, quic::request(conn, req)).await {
        Ok(Ok(r)) => Ok(r),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no answer in {} s", PUSH_TIMEOUT.as_secs())),
    }
}

/// Handles a frontal's request and carries out its effects. A relay whose proxy
/// does not take the token is retried on the next live proxy.
async fn handle(
    state: &http::Shared,
    peers: &Peers,
    cluster: Option<String>,
    req: Request,
) -> Response {
    'retry: for _ in 0..8 {
        let (resp, effects) = lock(state).handle(cluster.as_deref(), req.clone());
        for e in &effects {
            if let Effect::ExpectRelay { proxy, token } = e {
                let conn = lock(&peers.proxies).get(proxy).cloned();
                let r = match conn {
                    Some(c) => {
                        push(
                            &c,
                            &Request::ExpectRelay {
                                token: token.clone(),
                                valid_ms: registry::RELAY_TOKEN_MS,
                            },
                        )
                        .await
                    }
                    None => Err("not connected".into()),
                };
                if !matches!(r, Ok(Response::Ok)) {
                    tracing::warn!(%proxy, outcome = ?r, "proxy failed its check; marking it dead");
                    lock(state).set_proxy_alive(*proxy, false);
                    continue 'retry;
                }
            }
        }
        for e in effects {
            match e {
                Effect::ExpectRelay { .. } => {}
                Effect::Invalidate(inv) => push_invalidation(&peers.frontals, inv),
                Effect::Notify {
                    cluster,
                    target,
                    notice,
                } => {
                    let conn = lock(&peers.frontals).get(&cluster).cloned();
                    let what = format!("process {target} in cluster `{cluster}`");
                    let r = match conn {
                        Some(c) => push(&c, &Request::Notify { target, notice }).await,
                        None => Err("its frontal is not connected".into()),
                    };
                    match r {
                        Ok(Response::Ok) => {}
                        Ok(Response::Error(e)) => return Response::Error(e),
                        other => {
                            return Response::error(
                                ErrorKind::Unavailable,
                                format!("cannot reach {what}: {other:?}"),
                            )
                        }
                    }
                }
            }
        }
        return resp;
    }
    Response::error(ErrorKind::NoRoute, "no relay proxy took the link")
}

async fn serve_frontal(conn: quinn::Connection, state: http::Shared, peers: Peers) {
    let peer = conn.remote_address();
    tracing::info!(%peer, "frontal connected");
    // The cluster this connection speaks for, set by its first RegisterCluster.
    let cluster: Arc<Mutex<Option<String>>> = Default::default();
    let c2 = conn.clone();
    let cl = cluster.clone();
    let pe = peers.clone();
    let handler = move |req: Request| {
        let (state, cluster, peers, conn) = (state.clone(), cl.clone(), pe.clone(), c2.clone());
        async move {
            let current = lock(&cluster).clone();
            let name = match &req {
                Request::RegisterCluster(c) => Some(c.name.clone()),
                _ => None,
            };
            tracing::debug!(%peer, kind = req.kind(), "request");
            let resp = handle(&state, &peers, current, req).await;
            if let (Some(name), Response::Ok) = (name, &resp) {
                *lock(&cluster) = Some(name.clone());
                lock(&peers.frontals).insert(name.clone(), conn);
                tracing::info!(%peer, cluster = %name, "cluster registered");
            }
            resp
        }
    };
    let why = quic::serve(conn.clone(), handler).await;
    if let Some(name) = lock(&cluster).clone() {
        let mut f = lock(&peers.frontals);
        if f.get(&name)
            .is_some_and(|c| c.stable_id() == conn.stable_id())
        {
            f.remove(&name);
        }
    }
    tracing::info!(%peer, reason = %why, "frontal disconnected");
}

async fn serve_proxy(conn: quinn::Connection, state: http::Shared, peers: Peers) {
    let peer = conn.remote_address();
    let offered: Arc<Mutex<Option<SocketAddr>>> = Default::default();
    let (st, pe, of, c2) = (state.clone(), peers.clone(), offered.clone(), conn.clone());
    let handler = move |req: Request| {
        let (st, pe, of, c2) = (st.clone(), pe.clone(), of.clone(), c2.clone());
        async move {
            match req {
                Request::RegisterProxy { addr } => {
                    lock(&st).add_proxy(addr);
                    lock(&pe.proxies).insert(addr, c2);
                    *lock(&of) = Some(addr);
                    tracing::info!(%peer, %addr, "proxy registered");
                    Response::Ok
                }
                other => Response::error(
                    ErrorKind::Forbidden,
                    format!("`{}` is not a request a proxy may send", other.kind()),
                ),
            }
        }
    };
    let why = quic::serve(conn.clone(), handler).await;
    if let Some(addr) = *lock(&offered) {
        lock(&state).set_proxy_alive(addr, false);
        let mut p = lock(&peers.proxies);
        if p.get(&addr)
            .is_some_and(|c| c.stable_id() == conn.stable_id())
        {
            p.remove(&addr);
        }
    }
    tracing::info!(%peer, reason = %why, "proxy disconnected");
}

fn push_invalidation(frontals: &Conns<String>, inv: Invalidation) {
    let conns: Vec<_> = lock(frontals).values().cloned().collect();
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
