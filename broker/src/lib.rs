//! The qcg broker: one per grid.
//!
//! It accepts frontals and relay proxies over QUIC with mutual TLS (each must hold a
//! `frontal` or `proxy` certificate from the grid CA), keeps every cluster's configuration and the contact
//! registry of every process, and answers connection requests with a plan chosen by
//! the pure function in [`plan`]. An HTTP API ([`http`]) shows its state and metrics.
//!
//! It also runs submitted jobs: an HTTPS API ([`api`], client certificates with role
//! `client`) takes JobProfiles; the pure job table ([`jobs`]) schedules them with
//! `qcg_jobprofile::sched` on the topology the frontals report and measure
//! ([`topology`]), and the shell ([`grid`]) has the frontals start, stream and stop
//! the processes.
//!
//! Every decision is the core's ([`core::Core`]: registry, jobs, topology, checks,
//! relay fail-over; `now` an input, no I/O), behind one lock; the serving loops here
//! and the shell in [`grid`] only move requests and outcomes in and out of it, in
//! tasks the shell tracks.
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

pub mod api;
pub mod caller;
pub mod config;
pub mod core;
pub mod dashboard;
pub mod encrypt;
pub mod grid;
pub mod http;
pub mod jobs;
pub mod placed;
pub mod plan;
pub mod queue;
pub mod reach;
pub mod registry;
pub mod store;
pub mod topology;
pub mod users;

use crate::core::{Core, Input};
use grid::Ctx;
use qcg_proto::msg::{ErrorKind, Request, Response};
use qcg_proto::quic;
use qcg_proto::revocation::CrlWatch;
use qcg_proto::tls::{Identity, Role};
use registry::Registry;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

/// Where and how a broker serves.
#[derive(Clone, Debug)]
pub struct Options {
    /// UDP address for frontals (QUIC).
    pub quic: SocketAddr,
    /// TCP address of the read-only HTTP API.
    pub http: Option<SocketAddr>,
    /// TCP address of the HTTPS job API.
    pub https: Option<SocketAddr>,
    /// How often each pair of clusters is measured.
    pub probe_interval: Duration,
    /// What the broker keeps at most.
    pub limits: Limits,
    /// The database jobs are kept in across restarts; `None` keeps them in memory
    /// only (the embedded grid).
    pub database: Option<std::path::PathBuf>,
    /// How long the helper of a node running a job may stay away before the job
    /// fails.
    pub lost_node_grace: Duration,
    /// Which links are encrypted (default: between clusters).
    pub encrypt: encrypt::EncryptPolicy,
}

impl Default for Options {
    /// Everything on 127.0.0.1, ports chosen by the system, no HTTPS.
    fn default() -> Self {
        let lo = SocketAddr::from(([127, 0, 0, 1], 0));
        Options {
            quic: lo,
            http: Some(lo),
            https: None,
            probe_interval: DEFAULT_PROBE_INTERVAL,
            limits: Limits::default(),
            database: None,
            lost_node_grace: grid::DEFAULT_LOST_NODE_GRACE,
            encrypt: Default::default(),
        }
    }
}

/// Bounds on what peers and clients can make the broker keep.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Processes registered per job.
    pub registrations_per_job: usize,
    /// Processes registered per cluster.
    pub registrations_per_cluster: usize,
    /// What the job table keeps, and for how long ([`jobs::JobLimits`]).
    pub jobs: jobs::JobLimits,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            registrations_per_job: registry::DEFAULT_PER_JOB,
            registrations_per_cluster: registry::DEFAULT_PER_CLUSTER,
            jobs: jobs::JobLimits::default(),
        }
    }
}

/// Failed and refused QUIC handshakes, summed up in the log.
static HANDSHAKES_REFUSED: Mutex<qcg_proto::limits::Tally> =
    Mutex::new(qcg_proto::limits::Tally::new());

/// QUIC connections (frontals and proxies, handshakes included) taken per address.
pub const QUIC_PER_ADDRESS: usize = 64;
/// QUIC connections taken in all.
pub const QUIC_TOTAL: usize = 4096;

/// Default time between two probes of a pair of clusters.
pub const DEFAULT_PROBE_INTERVAL: Duration = Duration::from_secs(300);

/// A running broker.
pub struct Broker {
    /// Where frontals connect (QUIC).
    pub quic_addr: SocketAddr,
    /// Where the HTTP API listens, if enabled.
    pub http_addr: Option<SocketAddr>,
    /// Where the HTTPS job API listens, if enabled.
    pub https_addr: Option<SocketAddr>,
    /// The broker's core (read by tests and the embedded grid).
    pub state: grid::Shared,
    /// Jobs, topology and frontal connections.
    pub ctx: Ctx,
    cancel: CancellationToken,
    tracker: TaskTracker,
    endpoint: quinn::Endpoint,
}

/// A fresh job id.
pub fn new_job_id() -> String {
    format!("job-{}", hex::encode(random::<4>()))
}

/// A fresh job secret, 64 hex digits.
pub fn new_secret_hex() -> String {
    hex::encode(random::<32>())
}

/// A fresh relay token, 64 hex digits.
fn random_token() -> String {
    hex::encode(random::<32>())
}

fn random<const N: usize>() -> [u8; N] {
    use ring::rand::SecureRandom;
    let mut b = [0u8; N];
    // The system's random source does not fail on the platforms qcg runs on; if it
    // ever did, a zeroed id or secret would be the wrong answer, so stop.
    ring::rand::SystemRandom::new()
        .fill(&mut b)
        .expect("system random number generator");
    b
}

/// Why a broker did not start; each names the config field to look at.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The QUIC endpoint for frontals and proxies (`listen`) could not be made:
    /// the address, or the certificate, key or CA.
    #[error("cannot serve frontals on {addr} (config field `listen`): {source}")]
    Quic {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: quic::QuicError,
    },
    /// An HTTP listener could not be bound.
    #[error("cannot bind the {what} on {addr} (config field `{field}`): {source}")]
    Bind {
        /// Which API.
        what: &'static str,
        /// Its config field.
        field: &'static str,
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The HTTPS API's TLS setup failed (the broker's certificate or key).
    #[error("cannot set up TLS for the HTTPS API (config fields `cert`, `key`, `ca`): {0}")]
    Tls(#[from] qcg_proto::tls::TlsError),
    /// The job database could not be opened or read.
    #[error("job database {} (config field `database`): {source}", path.display())]
    Database {
        /// Its path.
        path: std::path::PathBuf,
        /// Why.
        source: store::StoreError,
    },
}

async fn bind(
    addr: SocketAddr,
    what: &'static str,
    field: &'static str,
) -> Result<(tokio::net::TcpListener, SocketAddr), StartError> {
    let err = |source| StartError::Bind {
        what,
        field,
        addr,
        source,
    };
    let l = tokio::net::TcpListener::bind(addr).await.map_err(err)?;
    let bound = l.local_addr().map_err(err)?;
    Ok((l, bound))
}

impl Broker {
    /// Binds and starts serving, without the job API. Bind to port 0 to let the
    /// system choose.
    pub async fn start(
        id: Identity,
        quic_addr: SocketAddr,
        http_addr: Option<SocketAddr>,
    ) -> Result<Broker, StartError> {
        Broker::start_with(
            id,
            Options {
                quic: quic_addr,
                http: http_addr,
                ..Options::default()
            },
        )
        .await
    }

    /// Binds and starts serving.
    pub async fn start_with(id: Identity, opts: Options) -> Result<Broker, StartError> {
        let quic_err = |source| StartError::Quic {
            addr: opts.quic,
            source,
        };
        let endpoint = quic::server_endpoint(opts.quic, &id).map_err(quic_err)?;
        let quic_addr = endpoint.local_addr().map_err(|source| {
            quic_err(quic::QuicError::Bind {
                addr: opts.quic,
                source,
            })
        })?;
        let registry = Registry::with_tokens(Box::new(random_token));
        let state: grid::Shared = Arc::new(Mutex::new(Core::new(registry, opts.probe_interval)));
        let l = &opts.limits;
        {
            let mut core = lock(&state);
            core.registry
                .set_limits(l.registrations_per_job, l.registrations_per_cluster);
            core.registry.set_encrypt(opts.encrypt.clone());
            core.lost_node_grace = opts.lost_node_grace;
            core.book.jobs.set_limits(l.jobs.clone());
        }
        let ctx = Ctx::new(state.clone(), opts.probe_interval);
        if let Some(path) = &opts.database {
            let db_err = |source| StartError::Database {
                path: path.clone(),
                source,
            };
            let mut store = store::Store::open(path).map_err(db_err)?;
            ctx.book().jobs.set_stored(true);
            let now = std::time::Instant::now();
            let records = {
                let book = ctx.book();
                store
                    .load(|r| book.jobs.wanted_in_memory(r, now))
                    .map_err(db_err)?
            };
            let n = records.len();
            let refused = ctx.book().jobs.restore(records, std::time::Instant::now());
            for (job, why) in &refused {
                tracing::error!(%job, error = %why, "stored job not taken back");
            }
            let owners = store.run_owners().map_err(db_err)?;
            let users = owners.len();
            ctx.core().registry.restore_users(owners);
            // Info when there were jobs to take back; the start-up line says the rest.
            if n > 0 || users > 0 {
                tracing::info!(database = %path.display(), jobs = n - refused.len(), qcg_run_jobs = users, "jobs taken back");
            } else {
                tracing::debug!(database = %path.display(), "no jobs to take back");
            }
            *lock(&ctx.store) = Some(store);
        }
        let cancel = ctx.cancel.clone();
        let tracker = ctx.tasks.clone();
        let nofile = qcg_proto::limits::nofile();

        let http_addr = match opts.http {
            Some(addr) => {
                let (listener, addr) = bind(addr, "HTTP API", "http_listen").await?;
                let caps = http::plain_caps(nofile);
                lock(&ctx.listeners).push(("http", caps.clone()));
                ctx.spawn(
                    "HTTP accept loop",
                    http::serve(
                        listener,
                        http::app(ctx.clone()),
                        caps,
                        cancel.clone(),
                        tracker.clone(),
                    ),
                );
                Some(addr)
            }
            None => None,
        };

        // Every change of the revocation list, for the HTTPS connections to check
        // their peer against (the QUIC ones are checked below).
        let crl_changes = id.crl.clone().map(|crl| {
            let (tx, rx) = tokio::sync::watch::channel(crl.generation());
            let (w, c) = (crl.clone(), cancel.clone());
            ctx.spawn("CRL watch", async move {
                let mut every = tokio::time::interval(quic::CRL_POLL);
                loop {
                    tokio::select! {
                        _ = c.cancelled() => break,
                        _ = every.tick() => {
                            tx.send_if_modified(|g| {
                                let now = w.generation();
                                std::mem::replace(g, now) != now
                            });
                        }
                    }
                }
            });
            (crl, rx)
        });

        let https_addr = match opts.https {
            Some(addr) => {
                let (listener, addr) = bind(addr, "HTTPS API", "https_listen").await?;
                let mut tls = id.server_config()?;
                tls.alpn_protocols = vec![b"http/1.1".to_vec()];
                let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
                let caps = http::tls_caps(nofile);
                lock(&ctx.listeners).push(("https", caps.clone()));
                ctx.spawn(
                    "HTTPS accept loop",
                    serve_https(
                        listener,
                        acceptor,
                        ctx.clone(),
                        crl_changes,
                        caps,
                        cancel.clone(),
                        tracker.clone(),
                    ),
                );
                Some(addr)
            }
            None => None,
        };

        let ep = endpoint.clone();
        let (cx, c) = (ctx.clone(), cancel.clone());
        let caps = qcg_proto::limits::Caps::new(QUIC_PER_ADDRESS, QUIC_TOTAL);
        lock(&ctx.listeners).push(("quic", caps.clone()));
        ctx.spawn("QUIC accept loop", async move {
            loop {
                let incoming = tokio::select! {
                    _ = c.cancelled() => break,
                    i = ep.accept() => match i { Some(i) => i, None => break },
                };
                let peer = incoming.remote_address();
                let Some(permit) = qcg_proto::limits::admit(&caps, "QUIC", peer.ip()) else {
                    incoming.refuse();
                    continue;
                };
                let (cx, cx2) = (cx.clone(), cx.clone());
                let span = tracing::info_span!("quic", %peer);
                cx2.spawn("quic connection", async move {
                    let _permit = permit;
                    match incoming.await {
                        Ok(conn) => {
                            if quic::check_peer_role(&conn, Role::Frontal).is_ok() {
                                serve_frontal(conn, cx).await
                            } else if quic::check_peer_role(&conn, Role::Proxy).is_ok() {
                                serve_proxy(conn, cx).await
                            } else {
                                qcg_proto::limits::warn_summed(
                                    &HANDSHAKES_REFUSED,
                                    "QUIC connections refused: neither a frontal nor a proxy certificate",
                                    peer,
                                );
                                conn.close(1u32.into(), b"a frontal certificate is required");
                            }
                        }
                        Err(e) => qcg_proto::limits::warn_summed(
                            &HANDSHAKES_REFUSED,
                            "QUIC handshakes failed",
                            format_args!("{peer}: {e}"),
                        ),
                    }
                }.instrument(span));
            }
        });

        // A revocation cuts the live connections of the peers it names, at once.
        if let Some(crl) = id.crl.clone() {
            let (fr, px, c) = (ctx.frontals.clone(), ctx.proxies.clone(), cancel.clone());
            ctx.spawn("revocation cut", async move {
                let conns = move || {
                    let mut all: Vec<(quinn::Connection, String)> = lock(&fr)
                        .iter()
                        .map(|(name, c)| (c.clone(), format!("frontal of cluster {name}")))
                        .collect();
                    all.extend(
                        lock(&px)
                            .iter()
                            .map(|(addr, c)| (c.clone(), format!("relay proxy at {addr}"))),
                    );
                    all
                };
                tokio::select! {
                    _ = c.cancelled() => {}
                    _ = quic::cut_revoked(crl, conns) => {}
                }
            });
        }

        // The clock: probes and given-up processes.
        let (cx, c) = (ctx.clone(), cancel.clone());
        ctx.spawn("clock", async move {
            let mut every = tokio::time::interval(Duration::from_millis(500));
            let mut purge = tokio::time::interval(STORED_PURGE);
            loop {
                tokio::select! {
                    _ = c.cancelled() => break,
                    _ = every.tick() => cx.tick(),
                    _ = purge.tick() => cx.purge_stored(),
                }
            }
        });
        // Debug: the service's "QUIC on" line is its one start-up line.
        tracing::debug!(%quic_addr, ?http_addr, ?https_addr, "broker started");
        Ok(Broker {
            quic_addr,
            http_addr,
            https_addr,
            state,
            ctx,
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

async fn serve_https(
    listener: tokio::net::TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
    ctx: Ctx,
    crl: Option<(Arc<CrlWatch>, tokio::sync::watch::Receiver<u64>)>,
    caps: qcg_proto::limits::Caps<std::net::IpAddr>,
    cancel: CancellationToken,
    tracker: TaskTracker,
) {
    let serve = move |tcp, peer: SocketAddr, permit| {
        let (acceptor, ctx, crl) = (acceptor.clone(), ctx.clone(), crl.clone());
        let span = tracing::debug_span!("https", %peer);
        async move {
            let _permit = permit;
            let tls = match tokio::time::timeout(http::TLS_HANDSHAKE, acceptor.accept(tcp)).await {
                Ok(Ok(t)) => t,
                Ok(Err(e)) => {
                    tracing::debug!(%peer, error = %e, "HTTPS handshake refused");
                    return;
                }
                Err(_) => return,
            };
            let cert = tls
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|c| c.first())
                .cloned();
            let caller = match &cert {
                Some(cert) => caller::Caller::of(cert),
                None => Err(caller::CallerError::Role),
            };
            let app = match caller {
                Ok(caller) => {
                    tracing::debug!(%peer, caller = %caller.name, admin = caller.admin, "HTTPS caller");
                    api::app(ctx, caller)
                }
                Err(e) => {
                    tracing::warn!(%peer, error = %e, "HTTPS peer refused");
                    api::forbidden(e.to_string())
                }
            };
            let conn = http::serve_connection(tls, app, http::HTTPS_HEAD);
            // A keep-alive connection lives no longer than its certificate: dropping
            // the connection closes it, whatever request is under way.
            let revoked = async {
                match (crl, cert) {
                    (Some((crl, changes)), Some(cert)) => revoked(&crl, changes, &cert).await,
                    _ => std::future::pending().await,
                }
            };
            tokio::select! {
                r = conn => if let Err(e) = r {
                    tracing::debug!(%peer, error = %e, "HTTPS connection ended");
                },
                serial = revoked => tracing::warn!(
                    %peer,
                    %serial,
                    "certificate revoked: closing its live HTTPS connection"
                ),
            }
        }
        .instrument(span)
    };
    http::accept_loop(listener, "HTTPS API", caps, cancel, tracker, serve).await
}

/// Returns (with the serial) once the revocation list, at one of its `changes`,
/// revokes `cert`; never otherwise.
async fn revoked(
    crl: &CrlWatch,
    mut changes: tokio::sync::watch::Receiver<u64>,
    cert: &[u8],
) -> String {
    loop {
        if let Some(serial) = crl.revokes(cert) {
            return serial;
        }
        if changes.changed().await.is_err() {
            return std::future::pending().await;
        }
    }
}

async fn serve_frontal(conn: quinn::Connection, ctx: Ctx) {
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
    let cx = ctx.clone();
    let handler = move |req: Request| {
        let (ctx, cluster, conn) = (cx.clone(), cl.clone(), c2.clone());
        let current = lock(&cluster).clone();
        let span = tracing::debug_span!(
            "request",
            kind = req.kind(),
            cluster = current.as_deref().unwrap_or("")
        );
        async move {
            tracing::debug!("request");
            let name = match &req {
                Request::RegisterCluster(c) => Some(c.name.clone()),
                _ => None,
            };
            let resp = ctx
                .step(Input::Frontal {
                    cluster: current,
                    req,
                })
                .await
                .unwrap_or_else(|| {
                    Response::error(ErrorKind::Internal, "the broker gave no answer")
                });
            if let (Some(name), Response::Ok) = (name, &resp) {
                *lock(&cluster) = Some(name.clone());
                lock(&ctx.frontals).insert(name.clone(), conn);
                ctx.feed(Input::FrontalUp {
                    cluster: name.clone(),
                });
                tracing::info!(cluster = %name, "cluster registered");
            }
            resp
        }
        .instrument(span)
    };
    let why = quic::serve(conn.clone(), handler).await;
    if let Some(name) = lock(&cluster).clone() {
        let mut f = lock(&ctx.frontals);
        if f.get(&name)
            .is_some_and(|c| c.stable_id() == conn.stable_id())
        {
            f.remove(&name);
            drop(f);
            ctx.feed(Input::FrontalGone { cluster: name });
        }
    }
    tracing::info!(reason = %why, "frontal disconnected");
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// How often finished jobs that live only in the database are looked at for
/// `job_record_keep_secs` (and at start).
const STORED_PURGE: Duration = Duration::from_secs(60);

async fn serve_proxy(conn: quinn::Connection, ctx: Ctx) {
    let peer = conn.remote_address();
    let offered: Arc<Mutex<Option<SocketAddr>>> = Default::default();
    let (cx, of, c2) = (ctx.clone(), offered.clone(), conn.clone());
    let handler = move |req: Request| {
        let (cx, of, c2) = (cx.clone(), of.clone(), c2.clone());
        let span = tracing::debug_span!("proxy_request", kind = req.kind());
        async move {
            match req {
                Request::RegisterProxy { addr } => {
                    lock(&cx.proxies).insert(addr, c2);
                    cx.feed(Input::ProxyUp { addr });
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
        .instrument(span)
    };
    let why = quic::serve(conn.clone(), handler).await;
    if let Some(addr) = *lock(&offered) {
        ctx.feed(Input::ProxyGone { addr });
        let mut p = lock(&ctx.proxies);
        if p.get(&addr)
            .is_some_and(|c| c.stable_id() == conn.stable_id())
        {
            p.remove(&addr);
        }
    }
    tracing::info!(%peer, reason = %why, "proxy disconnected");
}
