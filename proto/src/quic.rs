//! QUIC plumbing: endpoints under the grid CA, one request/response per bidirectional
//! stream, and a server loop that answers bad frames with a clear error and goes on.

use crate::frame::{self, FrameError};
use crate::msg::{ErrorKind, Request, Response};
use crate::tls::{peer_has_role, Identity, Role, TlsError};
use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use quinn::{Connection, Endpoint};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// Why a QUIC exchange failed.
#[derive(Debug, thiserror::Error)]
pub enum QuicError {
    /// TLS setup failed.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// Binding the UDP socket failed.
    #[error("cannot bind {addr}: {source}")]
    Bind {
        /// Address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// Connecting failed.
    #[error("cannot connect to {role} at {addr}: {detail}")]
    Connect {
        /// Expected role of the peer.
        role: Role,
        /// Address.
        addr: SocketAddr,
        /// Why.
        detail: String,
    },
    /// The peer's certificate does not certify the role this side expects.
    #[error("peer at {addr} is not a {role}: its certificate does not certify that role")]
    WrongRole {
        /// Expected role.
        role: Role,
        /// Address.
        addr: SocketAddr,
    },
    /// The connection broke.
    #[error("connection lost: {0}")]
    Connection(#[from] quinn::ConnectionError),
    /// Writing failed.
    #[error("write failed: {0}")]
    Write(#[from] quinn::WriteError),
    /// The stream was closed early.
    #[error("stream closed: {0}")]
    Closed(#[from] quinn::ClosedStream),
    /// Reading or decoding failed.
    #[error(transparent)]
    Frame(#[from] FrameError),
    /// The peer closed the stream without answering.
    #[error("peer closed the stream without an answer")]
    NoAnswer,
}

/// How often an idle control connection sends a keep-alive.
pub const KEEP_ALIVE: Duration = Duration::from_secs(1);
/// How long a control connection may hear nothing before it counts as lost: a peer
/// that died (kill -9, a crashed host) is noticed within this time, and its
/// services redial. Five keep-alives may be lost before a live peer is given up.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(5);

fn transport() -> Arc<quinn::TransportConfig> {
    let mut t = quinn::TransportConfig::default();
    t.keep_alive_interval(Some(KEEP_ALIVE));
    t.max_idle_timeout(Some(
        quinn::IdleTimeout::try_from(IDLE_TIMEOUT).expect("5 s is a valid timeout"),
    ));
    t.max_concurrent_bidi_streams(1024u32.into());
    Arc::new(t)
}

fn client_config(id: &Identity) -> Result<quinn::ClientConfig, QuicError> {
    let crypto = QuicClientConfig::try_from(id.client_config()?)
        .map_err(|e| TlsError::Verifier(e.to_string()))?;
    let mut cfg = quinn::ClientConfig::new(Arc::new(crypto));
    cfg.transport_config(transport());
    Ok(cfg)
}

/// An endpoint that accepts connections on `addr` and can also dial out.
pub fn server_endpoint(addr: SocketAddr, id: &Identity) -> Result<Endpoint, QuicError> {
    let crypto = QuicServerConfig::try_from(id.server_config()?)
        .map_err(|e| TlsError::Verifier(e.to_string()))?;
    let mut cfg = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    cfg.transport_config(transport());
    let mut ep = Endpoint::server(cfg, addr).map_err(|source| QuicError::Bind { addr, source })?;
    ep.set_default_client_config(client_config(id)?);
    Ok(ep)
}

/// An endpoint that only dials out.
pub fn client_endpoint(id: &Identity) -> Result<Endpoint, QuicError> {
    let addr: SocketAddr = ([0, 0, 0, 0], 0).into();
    let mut ep = Endpoint::client(addr).map_err(|source| QuicError::Bind { addr, source })?;
    ep.set_default_client_config(client_config(id)?);
    Ok(ep)
}

/// Dials a peer that must hold a certificate for `role`.
pub async fn connect(ep: &Endpoint, addr: SocketAddr, role: Role) -> Result<Connection, QuicError> {
    let err = |detail: String| QuicError::Connect { role, addr, detail };
    let connecting = ep
        .connect(addr, &role.dns_name())
        .map_err(|e| err(e.to_string()))?;
    match tokio::time::timeout(Duration::from_secs(10), connecting).await {
        Ok(Ok(conn)) => Ok(conn),
        Ok(Err(e)) => Err(err(e.to_string())),
        Err(_) => Err(err("timed out after 10 s".into())),
    }
}

/// Checks, after the handshake, that the client's certificate certifies `role`.
pub fn check_peer_role(conn: &Connection, role: Role) -> Result<(), QuicError> {
    let addr = conn.remote_address();
    let certs = conn
        .peer_identity()
        .and_then(|id| {
            id.downcast::<Vec<rustls::pki_types::CertificateDer<'static>>>()
                .ok()
        })
        .ok_or(QuicError::WrongRole { role, addr })?;
    match certs.first() {
        Some(c) if peer_has_role(c, role) => Ok(()),
        _ => Err(QuicError::WrongRole { role, addr }),
    }
}

/// Sends one request on a new bidirectional stream and waits for the answer.
pub async fn request(conn: &Connection, req: &Request) -> Result<Response, QuicError> {
    let (mut send, mut recv) = conn.open_bi().await?;
    send.write_all(&frame::encode(req)?).await?;
    send.finish()?;
    frame::read_frame(&mut recv)
        .await?
        .ok_or(QuicError::NoAnswer)
}

/// Answers every stream the peer opens on `conn` with `handler`, until the connection
/// closes. A frame that cannot be decoded gets an error answer naming the problem; the
/// connection and its other streams go on.
pub async fn serve<F, Fut>(conn: Connection, handler: F) -> quinn::ConnectionError
where
    F: Fn(Request) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response> + Send,
{
    loop {
        let (mut send, mut recv) = match conn.accept_bi().await {
            Ok(s) => s,
            Err(e) => return e,
        };
        let handler = handler.clone();
        let peer = conn.remote_address();
        tokio::spawn(async move {
            let resp = match frame::read_frame::<Request, _>(&mut recv).await {
                Ok(Some(req)) => handler(req).await,
                Ok(None) => return,
                Err(e) => {
                    tracing::warn!(%peer, error = %e, "bad frame");
                    if let FrameError::Io(_) = e {
                        return;
                    }
                    Response::error(e.kind(), e.to_string())
                }
            };
            let bytes = match frame::encode(&resp) {
                Ok(b) => b,
                Err(e) => match frame::encode(&Response::error(ErrorKind::Internal, e.to_string()))
                {
                    Ok(b) => b,
                    Err(_) => return,
                },
            };
            if send.write_all(&bytes).await.is_ok() {
                let _ = send.finish();
                // Wait until the peer has read the answer before dropping the stream.
                let _ = send.stopped().await;
            }
        });
    }
}

type OnConnect = Arc<dyn Fn(Connection) + Send + Sync>;

/// A connection to the next hop up (helper → frontal, frontal → broker), made on first
/// use and made again when it breaks.
pub struct Upstream {
    ep: Endpoint,
    addr: SocketAddr,
    role: Role,
    hello: Option<Request>,
    on_connect: Option<OnConnect>,
    conn: tokio::sync::Mutex<Option<Connection>>,
}

impl Upstream {
    /// An upstream at `addr` whose certificate must certify `role`. `hello` is sent
    /// first on every new connection (and must be answered `Ok`); `on_connect` sees each
    /// new connection (to serve requests the peer opens on it).
    pub fn new(
        ep: Endpoint,
        addr: SocketAddr,
        role: Role,
        hello: Option<Request>,
        on_connect: Option<OnConnect>,
    ) -> Self {
        Upstream {
            ep,
            addr,
            role,
            hello,
            on_connect,
            conn: tokio::sync::Mutex::new(None),
        }
    }

    /// The peer's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    async fn connection(&self) -> Result<Connection, QuicError> {
        let mut slot = self.conn.lock().await;
        if let Some(c) = slot.as_ref() {
            if c.close_reason().is_none() {
                return Ok(c.clone());
            }
        }
        let conn = connect(&self.ep, self.addr, self.role).await?;
        if let Some(hello) = &self.hello {
            match request(&conn, hello).await? {
                Response::Ok => {}
                Response::Error(e) => {
                    return Err(QuicError::Connect {
                        role: self.role,
                        addr: self.addr,
                        detail: format!("refused our {}: {e}", hello.kind()),
                    })
                }
                other => {
                    return Err(QuicError::Connect {
                        role: self.role,
                        addr: self.addr,
                        detail: format!("unexpected answer to {}: {other:?}", hello.kind()),
                    })
                }
            }
        }
        if let Some(f) = &self.on_connect {
            f(conn.clone());
        }
        *slot = Some(conn.clone());
        Ok(conn)
    }

    /// Sends a request, reconnecting once if the connection had broken.
    pub async fn request(&self, req: &Request) -> Result<Response, QuicError> {
        let mut last = None;
        for _ in 0..2 {
            let conn = self.connection().await?;
            match request(&conn, req).await {
                Ok(r) => return Ok(r),
                Err(
                    e @ (QuicError::Connection(_) | QuicError::Write(_) | QuicError::Closed(_)),
                ) => {
                    conn.close(0u32.into(), b"reconnecting");
                    last = Some(e);
                }
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or(QuicError::NoAnswer))
    }

    /// Sends a request; any failure becomes an `Unavailable` error answer that names
    /// the upstream.
    pub async fn forward(&self, req: &Request) -> Response {
        match self.request(req).await {
            Ok(r) => r,
            Err(e) => Response::error(
                ErrorKind::Unavailable,
                format!("{} at {} unreachable: {e}", self.role, self.addr),
            ),
        }
    }
}
