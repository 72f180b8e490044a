//! The qcg relay proxy.
//!
//! It registers with the broker (QUIC, mutual TLS, a `proxy` certificate from the grid
//! CA) and offers relaying on a TCP address. For each relayed link the broker hands it
//! a single-use token before giving the same token to both processes; the proxy pairs
//! the two connections that present it ([`relay`]) and moves bytes between them with
//! splice(2), with no cap on bytes or time. Anything else knocking is refused.
//!
//! ```no_run
//! # async fn f(id: qcg_proto::tls::Identity) -> anyhow::Result<()> {
//! let p = qcg_proxy::Proxy::start(id, "0.0.0.0:7800".parse()?, None, "127.0.0.1:7700".parse()?).await?;
//! println!("relaying on {}", p.addr);
//! # Ok(()) }
//! ```

pub mod config;
pub mod gate;
pub mod relay;

use qcg_proto::quic::{self, Upstream};
use qcg_proto::tls::{Identity, Role};
use qcg_proto::{ErrorKind, Request, Response};
use relay::Tokens;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// A running proxy.
pub struct Proxy {
    /// Where processes reach it.
    pub addr: SocketAddr,
    /// Its tokens and counters.
    pub tokens: Tokens,
    /// What its door did ([`gate`]).
    pub gate: Arc<gate::GateStats>,
    task: tokio::task::JoinHandle<()>,
    door: tokio::task::JoinHandle<()>,
    endpoint: quinn::Endpoint,
    stopped: Arc<std::sync::atomic::AtomicBool>,
}

/// How long a reachability check's connect may take.
const DIAL_CHECK_TIMEOUT: Duration = Duration::from_secs(3);

/// A reachability check: a plain TCP connect to `addr`, from outside every
/// cluster, as a process of another cluster would dial (the broker asks).
async fn dial_check(addr: SocketAddr) -> Response {
    match tokio::time::timeout(DIAL_CHECK_TIMEOUT, tokio::net::TcpStream::connect(addr)).await {
        Ok(Ok(_)) => Response::Ok,
        Ok(Err(e)) => Response::error(ErrorKind::Unavailable, format!("connect to {addr}: {e}")),
        Err(_) => Response::error(
            ErrorKind::Unavailable,
            format!(
                "connect to {addr} timed out after {} s (dropped)",
                DIAL_CHECK_TIMEOUT.as_secs()
            ),
        ),
    }
}

impl Proxy {
    /// Listens for relayed connections on `listen` and registers with the broker at
    /// `broker`, announcing `public` (default: the bound address).
    pub async fn start(
        id: Identity,
        listen: SocketAddr,
        public: Option<SocketAddr>,
        broker: SocketAddr,
    ) -> anyhow::Result<Proxy> {
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .map_err(|e| anyhow::anyhow!("cannot listen on {listen}: {e}"))?;
        let addr = listener.local_addr()?;
        let public = public.unwrap_or(addr);
        let tokens = Tokens::default();
        let stopped = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let gate = Arc::new(gate::GateStats::default());
        let door = tokio::spawn(gate::run(listener, tokens.clone(), gate.clone()));
        let t = tokens.clone();
        let on_connect = Arc::new(move |conn: quinn::Connection| {
            let t = t.clone();
            tokio::spawn(quic::serve(conn, move |req: Request| {
                let t = t.clone();
                async move {
                    match req {
                        Request::ExpectRelay { token, valid_ms } => {
                            t.expect(token, Duration::from_millis(valid_ms));
                            Response::Ok
                        }
                        Request::DialCheck { addr } => dial_check(addr).await,
                        other => Response::error(
                            ErrorKind::Forbidden,
                            format!("a proxy does not answer `{}`", other.kind()),
                        ),
                    }
                }
            }));
        });
        let endpoint = quic::client_endpoint(&id)?;
        let hello = Request::RegisterProxy { addr: public };
        let up = Upstream::new(
            endpoint.clone(),
            broker,
            Role::Broker,
            Some(hello.clone()),
            Some(on_connect),
        );
        // Register now and every two seconds: it keeps the broker's view of this proxy
        // fresh and reconnects after a broker restart.
        let task = tokio::spawn(async move {
            loop {
                if let Err(e) = up.request(&hello).await {
                    tracing::warn!(%broker, error = %e, "broker unreachable");
                }
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
        });
        tracing::info!(%addr, %public, "proxy started");
        Ok(Proxy {
            addr,
            tokens,
            gate,
            task,
            door,
            endpoint,
            stopped,
        })
    }

    /// Stops registering (relays in progress go on until their ends close).
    pub fn shutdown(self) {
        self.task.abort();
    }

    /// Stops everything at once, as a killed proxy would: no more registrations or
    /// tokens, no new relays, and the relays in progress cut.
    pub fn kill(self) {
        self.task.abort();
        self.door.abort();
        self.endpoint.close(0u32.into(), b"proxy killed");
        self.stopped
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.tokens.cut_all();
    }
}
