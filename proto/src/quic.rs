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

/// The key of a server's stateless resets and the key its connection ids are
/// checked with, both derived from its private key, so that they stay the same
/// across restarts: a service started again on the same address recognises its
/// clients' packets for connections it no longer knows as its own and answers
/// them with a reset they accept, and they redial at once instead of waiting for
/// the idle timeout.
fn stable_keys(id: &Identity) -> (ring::hmac::Key, u64) {
    let derive = |label: &[u8]| {
        let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
        ctx.update(label);
        ctx.update(id.key.secret_der());
        ctx.finish()
    };
    let reset = derive(b"qcg quic stateless reset key v1\0");
    let cid = derive(b"qcg quic connection id key v1\0");
    let mut k = [0u8; 8];
    k.copy_from_slice(&cid.as_ref()[..8]);
    (
        ring::hmac::Key::new(ring::hmac::HMAC_SHA256, reset.as_ref()),
        u64::from_le_bytes(k),
    )
}

/// An endpoint that accepts connections on `addr` and can also dial out.
pub fn server_endpoint(addr: SocketAddr, id: &Identity) -> Result<Endpoint, QuicError> {
    let crypto = QuicServerConfig::try_from(id.server_config()?)
        .map_err(|e| TlsError::Verifier(e.to_string()))?;
    let mut cfg = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    cfg.transport_config(transport());
    let bind = |source| QuicError::Bind { addr, source };
    let socket = std::net::UdpSocket::bind(addr).map_err(bind)?;
    let runtime = quinn::default_runtime()
        .ok_or_else(|| bind(std::io::Error::other("no async runtime for QUIC")))?;
    let (reset, cid_key) = stable_keys(id);
    let mut ep_cfg = quinn::EndpointConfig::new(Arc::new(reset));
    ep_cfg.cid_generator(move || {
        Box::new(quinn_proto::HashedConnectionIdGenerator::from_key(cid_key))
    });
    let mut ep = Endpoint::new(ep_cfg, Some(cfg), socket, runtime).map_err(bind)?;
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

/// The peer's own certificate on `conn`, if it showed one.
pub fn peer_cert(conn: &Connection) -> Option<rustls::pki_types::CertificateDer<'static>> {
    conn.peer_identity()?
        .downcast::<Vec<rustls::pki_types::CertificateDer<'static>>>()
        .ok()?
        .into_iter()
        .next()
}

/// How often [`cut_revoked`] looks at the revocation list.
pub const CRL_POLL: Duration = Duration::from_millis(500);

/// Keeps live connections to the revocation list: every [`CRL_POLL`], when the list
/// changed, closes each connection of `conns()` (with what the peer is, for the log)
/// whose peer certificate it now revokes; their serve loops end, and with them
/// whatever the peer was doing here. Runs until dropped.
pub async fn cut_revoked<F>(crl: Arc<crate::revocation::CrlWatch>, conns: F)
where
    F: Fn() -> Vec<(Connection, String)>,
{
    let mut seen = crl.generation();
    let mut every = tokio::time::interval(CRL_POLL);
    loop {
        every.tick().await;
        let now = crl.generation();
        if now == seen {
            continue;
        }
        seen = now;
        for (conn, who) in conns() {
            let Some(serial) = peer_cert(&conn).and_then(|c| crl.revokes(&c)) else {
                continue;
            };
            tracing::warn!(peer = %conn.remote_address(), %serial, %who, "certificate revoked: closing its live connection");
            conn.close(3u32.into(), b"certificate revoked");
        }
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
/// connection and its other streams go on. Each stream's task runs in the span
/// current where `serve` is polled (the connection's, [`crate::spans`]); the
/// handler makes the request's own ([`crate::request_span!`]).
pub async fn serve<F, Fut>(conn: Connection, handler: F) -> quinn::ConnectionError
where
    F: Fn(Request) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response> + Send,
{
    use tracing::Instrument;
    loop {
        let (mut send, mut recv) = match conn.accept_bi().await {
            Ok(s) => s,
            Err(e) => return e,
        };
        let handler = handler.clone();
        let peer = conn.remote_address();
        tokio::spawn(
            async move {
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
                    Err(e) => {
                        match frame::encode(&Response::error(ErrorKind::Internal, e.to_string())) {
                            Ok(b) => b,
                            Err(_) => return,
                        }
                    }
                };
                if send.write_all(&bytes).await.is_ok() {
                    let _ = send.finish();
                    // Wait until the peer has read the answer before dropping the stream.
                    let _ = send.stopped().await;
                }
            }
            .in_current_span(),
        );
    }
}

/// First delay before redialing a lost upstream.
pub const BACKOFF_START: Duration = Duration::from_millis(100);
/// Longest delay between two dials.
pub const BACKOFF_CAP: Duration = Duration::from_secs(3);

/// The delay before redial number `attempt` (from 0): [`BACKOFF_START`] doubled at
/// each attempt up to [`BACKOFF_CAP`], of which a random half (`jitter` in 0..1)
/// is taken off, so that the services of a grid do not all redial at once.
pub fn backoff(attempt: u32, jitter: f64) -> Duration {
    let full = BACKOFF_START
        .saturating_mul(1u32 << attempt.min(16))
        .min(BACKOFF_CAP);
    full.mul_f64(1.0 - 0.5 * jitter.clamp(0.0, 1.0))
}

/// A number in 0..1 that differs from call to call (std's hasher keys are random).
fn jitter() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    (h.finish() >> 11) as f64 / (1u64 << 53) as f64
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

    /// Keeps a connection up for as long as the future is polled: dials now, waits
    /// for the connection to close (a dead peer is noticed within [`IDLE_TIMEOUT`]),
    /// then dials again with exponential backoff and jitter ([`backoff`]). Every new
    /// connection sends the hello and runs `on_connect`, so the peer gets all our
    /// state back without waiting for traffic. While the upstream is missing it says
    /// so in the log (once per outage, then every ~30 s).
    pub async fn stay_connected(&self) {
        let mut attempt = 0u32;
        let mut down_since: Option<std::time::Instant> = None;
        let mut last_warn = std::time::Instant::now();
        loop {
            match self.connection().await {
                Ok(conn) => {
                    if let Some(t) = down_since.take() {
                        tracing::info!(peer = %self.addr, role = %self.role, after_ms = t.elapsed().as_millis() as u64, "reconnected");
                    }
                    attempt = 0;
                    let why = conn.closed().await;
                    if matches!(why, quinn::ConnectionError::LocallyClosed) {
                        // We closed it ourselves (shutting down, or a request that
                        // found it broken and said so): nothing to warn about.
                        tracing::debug!(peer = %self.addr, role = %self.role, "closed the connection; redialing");
                    } else {
                        tracing::warn!(peer = %self.addr, role = %self.role, reason = %why, "lost the connection; redialing");
                    }
                    down_since = Some(std::time::Instant::now());
                    last_warn = std::time::Instant::now();
                }
                Err(e) => {
                    let now = std::time::Instant::now();
                    if down_since.is_none()
                        || now.duration_since(last_warn) > Duration::from_secs(30)
                    {
                        tracing::warn!(peer = %self.addr, role = %self.role, error = %e, "upstream missing; retrying");
                        last_warn = now;
                    }
                    down_since.get_or_insert(now);
                    tokio::time::sleep(backoff(attempt, jitter())).await;
                    attempt = attempt.saturating_add(1);
                }
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_100_ms_up_to_the_cap_with_at_most_half_taken_off() {
        assert_eq!(backoff(0, 0.0), Duration::from_millis(100));
        assert_eq!(backoff(1, 0.0), Duration::from_millis(200));
        assert_eq!(backoff(3, 0.0), Duration::from_millis(800));
        assert_eq!(backoff(5, 0.0), BACKOFF_CAP);
        assert_eq!(backoff(1000, 0.0), BACKOFF_CAP);
        assert_eq!(backoff(0, 1.0), Duration::from_millis(50));
        assert_eq!(backoff(9, 1.0), BACKOFF_CAP / 2);
        for a in 0..20 {
            let d = backoff(a, jitter());
            assert!(d >= Duration::from_millis(50) && d <= BACKOFF_CAP, "{d:?}");
        }
    }

    #[test]
    fn jitter_stays_in_0_1_and_varies() {
        let v: Vec<f64> = (0..50).map(|_| jitter()).collect();
        assert!(v.iter().all(|x| (0.0..1.0).contains(x)));
        assert!(v.iter().any(|&x| x != v[0]));
    }
}
