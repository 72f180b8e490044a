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

pub mod config;
pub mod node;
pub mod procs;

use qcg_proto::frame::{self, FrameError};
use qcg_proto::quic::{self, Upstream};
use qcg_proto::tls::{Identity, Role};
use qcg_proto::{ErrorKind, NodeSpec, Request, Response};
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use tokio::net::{UnixListener, UnixStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

struct Inner {
    node: String,
    bind_addr: IpAddr,
    frontal: Arc<Upstream>,
    socket: PathBuf,
    procs: Arc<procs::Procs>,
}

/// A running helper.
pub struct Helper {
    /// The unix socket processes connect to.
    pub socket: PathBuf,
    procs: Arc<procs::Procs>,
    endpoint: quinn::Endpoint,
    cancel: CancellationToken,
    tracker: TaskTracker,
}

/// Answers what the frontal asks of this helper: start or kill processes.
fn frontal_handler(
    weak: std::sync::Weak<Inner>,
) -> impl Fn(Request) -> std::future::Ready<Response> + Clone + Send + Sync + 'static {
    move |req: Request| {
        let Some(inner) = weak.upgrade() else {
            return std::future::ready(Response::error(
                ErrorKind::Unavailable,
                "the helper is stopping",
            ));
        };
        std::future::ready(match req {
            Request::Launch(spec) => {
                inner
                    .procs
                    .launch(&spec, &inner.node, &inner.socket, inner.frontal.clone())
            }
            Request::Kill { job } => {
                inner.procs.kill(&job);
                Response::Ok
            }
            Request::Echo { payload } => Response::Echoed {
                len: payload.len() as u64,
            },
            other => Response::error(
                ErrorKind::Forbidden,
                format!(
                    "a helper does not answer `{}` from its frontal",
                    other.kind()
                ),
            ),
        })
    }
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
    ) -> anyhow::Result<Helper> {
        let spec = node::detect(&node);
        Helper::start_with(id, spec, frontal, socket, bind_addr).await
    }

    /// Like [`Helper::start`], with the node's figures given.
    pub async fn start_with(
        id: Identity,
        node: NodeSpec,
        frontal: SocketAddr,
        socket: PathBuf,
        bind_addr: IpAddr,
    ) -> anyhow::Result<Helper> {
        let endpoint = quic::client_endpoint(&id)?;
        let procs = Arc::new(procs::Procs::default());
        let tracker = TaskTracker::new();
        let inner = Arc::new_cyclic(|weak: &std::sync::Weak<Inner>| {
            let (weak, t) = (weak.clone(), tracker.clone());
            let on_connect = Arc::new(move |conn: quinn::Connection| {
                let handler = frontal_handler(weak.clone());
                t.spawn(async move {
                    quic::serve(conn, handler).await;
                });
            });
            Inner {
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
            }
        });
        if socket.exists() {
            // Only replace a socket nobody answers on: never steal a live helper's.
            if UnixStream::connect(&socket).await.is_ok() {
                anyhow::bail!("{} is in use by another helper", socket.display());
            }
            std::fs::remove_file(&socket)
                .map_err(|e| anyhow::anyhow!("cannot remove stale {}: {e}", socket.display()))?;
        }
        let listener = UnixListener::bind(&socket)
            .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", socket.display()))?;
        let cancel = CancellationToken::new();
        // Stay connected to the frontal, so that it can start processes here: connect
        // now, and again whenever the connection broke.
        let (c, up) = (cancel.clone(), inner.frontal.clone());
        tracker.spawn(async move {
            let mut warned = false;
            loop {
                match up.request(&Request::ClusterInfo).await {
                    Ok(_) => warned = false,
                    Err(e) if !warned => {
                        tracing::warn!(frontal = %up.addr(), error = %e, "frontal not reachable; retrying");
                        warned = true;
                    }
                    Err(_) => {}
                }
                tokio::select! {
                    _ = c.cancelled() => break,
                    _ = tokio::time::sleep(std::time::Duration::from_secs(2)) => {}
                }
            }
        });
        let (c, t) = (cancel.clone(), tracker.clone());
        tracker.spawn(async move {
            loop {
                let stream = tokio::select! {
                    _ = c.cancelled() => break,
                    s = listener.accept() => match s {
                        Ok((s, _)) => s,
                        Err(e) => {
                            tracing::warn!(error = %e, "accept failed");
                            continue;
                        }
                    },
                };
                let inner = inner.clone();
                let c = c.clone();
                t.spawn(async move {
                    tokio::select! {
                        _ = c.cancelled() => {}
                        _ = serve_process(stream, inner) => {}
                    }
                });
            }
        });
        tracing::info!(socket = %socket.display(), %frontal, "helper started");
        Ok(Helper {
            socket,
            procs,
            endpoint,
            cancel,
            tracker,
        })
    }

    /// Number of job processes running on this node.
    pub fn running(&self) -> usize {
        self.procs.len()
    }

    /// Stops serving, kills the job processes still running, removes the socket and
    /// waits for the tasks.
    pub async fn shutdown(self) {
        self.procs.kill_all();
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
    loop {
        let resp = match frame::read_frame::<Request, _>(&mut stream).await {
            Ok(Some(req)) => handle(&inner, req).await,
            Ok(None) => return,
            Err(e @ (FrameError::Io(_) | FrameError::Truncated)) => {
                tracing::debug!(error = %e, "process connection closed");
                return;
            }
            Err(e) => {
                tracing::warn!(error = %e, "bad frame from a local process");
                let resp = Response::error(e.kind(), e.to_string());
                let _ = frame::write_frame(&mut stream, &resp).await;
                // After an oversized or unreadable frame the byte stream cannot be
                // resynchronised: close this connection only.
                if matches!(e, FrameError::TooLarge { .. }) {
                    return;
                }
                continue;
            }
        };
        if frame::write_frame(&mut stream, &resp).await.is_err() {
            return;
        }
    }
}

async fn handle(inner: &Inner, req: Request) -> Response {
    match req {
        Request::NodeInfo => match inner.frontal.forward(&Request::ClusterInfo).await {
            Response::Cluster(cluster) => Response::Node {
                cluster,
                node: inner.node.clone(),
                bind_addr: inner.bind_addr,
            },
            other => other,
        },
        Request::ClusterInfo
        | Request::Register(_)
        | Request::Unregister { .. }
        | Request::Lookup { .. }
        | Request::Report { .. }
        | Request::JobEnd { .. } => inner.frontal.forward(&req).await,
        other => Response::error(
            ErrorKind::Forbidden,
            format!("`{}` is not a request a process may send", other.kind()),
        ),
    }
}
