//! The qcg relay proxy.
//!
//! It registers with the broker (QUIC, mutual TLS, a `proxy` certificate from the grid
//! CA) and offers relaying on a TCP address. For each relayed link the broker hands it
//! a single-use token before giving the same token to both processes; the proxy pairs
//! the two connections that present it ([`relay`]) and moves bytes between them with
//! splice(2), with no cap on bytes or time. Anything else knocking is refused.
//!
//! Its counters are served in Prometheus's text format on a separate listener
//! when the config names one ([`Proxy::serve_metrics`], [`metrics`]).
//!
//! ```no_run
//! # async fn f(id: qcg_proto::tls::Identity) -> anyhow::Result<()> {
//! let mut p = qcg_proxy::Proxy::start(id, "0.0.0.0:7800".parse()?, None, "127.0.0.1:7700".parse()?).await?;
//! println!("relaying on {}", p.addr);
//! let at = p.serve_metrics("127.0.0.1:9102".parse()?).await?;
//! println!("metrics on http://{at}/metrics");
//! # Ok(()) }
//! ```

pub mod config;
pub mod gate;
pub mod metrics;
pub mod relay;

use qcg_proto::quic::{self, Upstream};
use qcg_proto::tls::{Identity, Role};
use qcg_proto::{ErrorKind, Request, Response};
use relay::Tokens;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tracing::Instrument;

/// A running proxy.
pub struct Proxy {
    /// Where processes reach it.
    pub addr: SocketAddr,
    /// Its tokens and counters.
    pub tokens: Tokens,
    /// What its door did ([`gate`]).
    pub gate: Arc<gate::GateStats>,
    /// Errors it met, by kind ([`metrics::ERRORS`]).
    pub errors: Arc<qcg_proto::metrics::Errors>,
    task: tokio::task::JoinHandle<()>,
    metrics: Option<tokio::task::JoinHandle<()>>,
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

/// Why a proxy did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The relay address (`listen`) could not be bound.
    #[error("cannot listen for relayed links on {addr} (config field `listen`): {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The QUIC endpoint toward the broker could not be made (its certificate,
    /// key or CA, or a local UDP port).
    #[error("cannot make the QUIC endpoint toward the broker: {0}")]
    Quic(#[from] qcg_proto::quic::QuicError),
    /// The metrics address (`metrics_listen`) could not be bound.
    #[error(transparent)]
    Metrics(#[from] qcg_proto::metrics::BindError),
}

impl Proxy {
    /// Listens for relayed connections on `listen` and registers with the broker at
    /// `broker`, announcing `public` (default: the bound address).
    pub async fn start(
        id: Identity,
        listen: SocketAddr,
        public: Option<SocketAddr>,
        broker: SocketAddr,
    ) -> Result<Proxy, StartError> {
        let listen_err = |source| StartError::Listen {
            addr: listen,
            source,
        };
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .map_err(listen_err)?;
        let addr = listener.local_addr().map_err(listen_err)?;
        let public = public.unwrap_or(addr);
        let tokens = Tokens::default();
        let stopped = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let gate = Arc::new(gate::GateStats::default());
        let door = gate::run(listener, tokens.clone(), gate.clone());
        let door = tokio::spawn(
            door.instrument(tracing::error_span!(parent: None, "gate", listen = %addr)),
        );
        let t = tokens.clone();
        let on_connect = Arc::new(move |conn: quinn::Connection| {
            let t = t.clone();
            // A root span: the task outlives whatever request made the connection.
            let span = tracing::error_span!(parent: None, "broker", peer = %conn.remote_address());
            let serve = quic::serve(conn, move |req: Request| {
                let t = t.clone();
                let span = qcg_proto::request_span!(&req);
                async move {
                    let resp = match req {
                        Request::ExpectRelay { token, valid_ms } => {
                            t.expect(token, Duration::from_millis(valid_ms));
                            Response::Ok
                        }
                        Request::DialCheck { addr } => dial_check(addr).await,
                        other => Response::error(
                            ErrorKind::Forbidden,
                            format!("a proxy does not answer `{}`", other.kind()),
                        ),
                    };
                    qcg_proto::answered!(&resp);
                    resp
                }
                .instrument(span)
            });
            tokio::spawn(serve.instrument(span));
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
        let errors = Arc::new(qcg_proto::metrics::Errors::new(metrics::ERRORS));
        let errs = errors.clone();
        let register = tracing::error_span!(parent: None, "register", %broker);
        let task = tokio::spawn(async move {
            loop {
                match up.request(&hello).await {
                    Ok(Response::Ok) => {}
                    Ok(other) => {
                        errs.note("broker_refused");
                        tracing::warn!(%broker, answer = ?other, "the broker refused the registration");
                    }
                    Err(e) => {
                        errs.note("broker_unreachable");
                        tracing::warn!(%broker, error = %e, "broker unreachable");
                    }
                }
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
        }.instrument(register));
        // Debug: the service's "relaying" line is its one start-up line.
        tracing::debug!(%addr, %public, "proxy started");
        Ok(Proxy {
            addr,
            tokens,
            gate,
            errors,
            task,
            metrics: None,
            door,
            endpoint,
            stopped,
        })
    }

    /// Binds the metrics address (config field `metrics_listen`). Bind it before
    /// [`Proxy::start`], and serve it with [`Proxy::serve_metrics_on`]: a taken
    /// port then stops the service before it says it serves.
    pub async fn bind_metrics(
        listen: SocketAddr,
    ) -> Result<qcg_proto::metrics::Listener, StartError> {
        Ok(qcg_proto::metrics::bind(listen).await?)
    }

    /// Serves this proxy's metrics ([`metrics::render`]) on `listener` until it
    /// stops; returns its address.
    pub fn serve_metrics_on(&mut self, listener: qcg_proto::metrics::Listener) -> SocketAddr {
        let (tokens, gate, errors) = (self.tokens.clone(), self.gate.clone(), self.errors.clone());
        let render = move || metrics::render(&tokens, &gate, &errors);
        // Stopped by `shutdown` (aborted), as the proxy's other tasks.
        let (at, task) = qcg_proto::metrics::task(listener, render, std::future::pending());
        if let Some(old) = self.metrics.replace(tokio::spawn(task)) {
            old.abort();
        }
        at
    }

    /// Binds `listen` and serves this proxy's metrics there until it stops;
    /// returns the bound address.
    pub async fn serve_metrics(&mut self, listen: SocketAddr) -> Result<SocketAddr, StartError> {
        let listener = Proxy::bind_metrics(listen).await?;
        Ok(self.serve_metrics_on(listener))
    }

    /// Stops registering (relays in progress go on until their ends close).
    pub fn shutdown(self) {
        self.task.abort();
        if let Some(m) = &self.metrics {
            m.abort();
        }
    }

    /// Stops everything at once, as a killed proxy would: no more registrations or
    /// tokens, no new relays, and the relays in progress cut.
    pub fn kill(self) {
        self.task.abort();
        if let Some(m) = &self.metrics {
            m.abort();
        }
        self.door.abort();
        self.endpoint.close(0u32.into(), b"proxy killed");
        self.stopped
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.tokens.cut_all();
    }
}
