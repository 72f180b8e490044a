//! The qcg helper: one per node.
//!
//! Local processes talk to it over a unix socket, in the same frames the rest of the
//! control plane uses; it answers what it knows (which node this is, which address to
//! bind) and relays registrations and lookups to its cluster's frontal over QUIC with
//! mutual TLS.
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

use qcg_proto::frame::{self, FrameError};
use qcg_proto::quic::{self, Upstream};
use qcg_proto::tls::{Identity, Role};
use qcg_proto::{ErrorKind, Request, Response};
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use tokio::net::{UnixListener, UnixStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

struct Inner {
    node: String,
    bind_addr: IpAddr,
    frontal: Upstream,
}

/// A running helper.
pub struct Helper {
    /// The unix socket processes connect to.
    pub socket: PathBuf,
    cancel: CancellationToken,
    tracker: TaskTracker,
}

impl Helper {
    /// Starts serving processes on `socket` (replacing a stale socket file).
    pub async fn start(
        id: Identity,
        node: String,
        frontal: SocketAddr,
        socket: PathBuf,
        bind_addr: IpAddr,
    ) -> anyhow::Result<Helper> {
        let endpoint = quic::client_endpoint(&id)?;
        let inner = Arc::new(Inner {
            node,
            bind_addr,
            frontal: Upstream::new(endpoint, frontal, Role::Frontal, None, None),
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
        let tracker = TaskTracker::new();
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
            cancel,
            tracker,
        })
    }

    /// Stops serving, removes the socket and waits for the tasks.
    pub async fn shutdown(self) {
        self.cancel.cancel();
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
        Request::RegisterCluster(_) | Request::Invalidate { .. } => Response::error(
            ErrorKind::Forbidden,
            format!("`{}` is not a request a process may send", req.kind()),
        ),
        other => inner.frontal.forward(&other).await,
    }
}
