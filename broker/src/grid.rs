//! The async shell around the pure [`crate::core::Core`]: it keeps the frontals' and
//! proxies' connections, feeds the core what happens (requests, outcomes of what it
//! asked for, the clock) under one lock, and carries out what the core answers over
//! QUIC in tasks it tracks: shutdown stops them all, and a task that panics is
//! logged.

use crate::core::{Answer, Core, Input, Output, Peer};
use crate::jobs::{JobError, Jobs, Submission};
use crate::registry::Invalidation;
use crate::topology::TopoBook;
use qcg_jobprofile::profile::JobProfile;
use qcg_jobprofile::topology::ResourceTopology;
use qcg_proto::quic;
use qcg_proto::{Request, Response};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

/// Connections of the registered frontals, by cluster.
pub type Frontals = Arc<Mutex<HashMap<String, quinn::Connection>>>;

/// Connections of the registered relay proxies, by the address they offer.
pub type Proxies = Arc<Mutex<HashMap<std::net::SocketAddr, quinn::Connection>>>;

/// Jobs and resources.
#[derive(Debug, Default)]
pub struct Book {
    /// What the frontals reported and measured.
    pub topo: TopoBook,
    /// Submitted jobs.
    pub jobs: Jobs,
    /// When each cluster's reachability was last checked.
    pub checks: crate::reach::Checks,
}

/// The core, behind the broker's one lock.
pub type Shared = Arc<Mutex<Core>>;

/// Everything the broker's tasks and handlers share. The core has the one lock that
/// decisions take; the store's lock, when both are needed, is taken first.
#[derive(Clone)]
pub struct Ctx {
    /// Registry, jobs, topology and checks.
    pub core: Shared,
    /// Frontal connections.
    pub frontals: Frontals,
    /// Relay proxy connections.
    pub proxies: Proxies,
    /// Bumped whenever a job changes (output, state), for long polls.
    pub changed: Arc<tokio::sync::watch::Sender<u64>>,
    /// Where jobs are kept across restarts, if anywhere.
    pub store: Arc<Mutex<Option<crate::store::Store>>>,
    /// The caps of the broker's listeners by name (`quic`, `http`, `https`), for
    /// the connection metrics.
    pub listeners: Arc<Mutex<Vec<Listener>>>,
    /// Every task the broker runs.
    pub tasks: TaskTracker,
    /// Cancelled at shutdown: every task in [`Ctx::tasks`] stops.
    pub cancel: CancellationToken,
}

/// A listener's name and its caps.
pub type Listener = (&'static str, qcg_proto::limits::Caps<std::net::IpAddr>);

/// Default lost-node grace ([`Core::lost_node_grace`]).
pub const DEFAULT_LOST_NODE_GRACE: Duration = crate::core::DEFAULT_LOST_NODE_GRACE;

/// How long the broker waits for a proxy or a frontal to take a pushed request.
const PUSH_TIMEOUT: Duration = Duration::from_secs(3);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The core's [`Book`], locked (the whole core is).
pub struct BookGuard<'a>(MutexGuard<'a, Core>);

impl std::ops::Deref for BookGuard<'_> {
    type Target = Book;
    fn deref(&self) -> &Book {
        &self.0.book
    }
}

impl std::ops::DerefMut for BookGuard<'_> {
    fn deref_mut(&mut self) -> &mut Book {
        &mut self.0.book
    }
}

async fn push(conn: &quinn::Connection, req: &Request) -> Result<Response, String> {
    match tokio::time::timeout(PUSH_TIMEOUT, quic::request(conn, req)).await {
        Ok(Ok(r)) => Ok(r),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no answer in {} s", PUSH_TIMEOUT.as_secs())),
    }
}

impl Ctx {
    /// A fresh context around `core`.
    pub fn new(core: Shared, probe_interval: Duration) -> Ctx {
        lock(&core).probe_interval = probe_interval;
        Ctx {
            core,
            frontals: Default::default(),
            proxies: Default::default(),
            changed: Arc::new(tokio::sync::watch::channel(0).0),
            store: Default::default(),
            listeners: Default::default(),
            tasks: TaskTracker::new(),
            cancel: CancellationToken::new(),
        }
    }

    /// The core, locked.
    pub fn core(&self) -> MutexGuard<'_, Core> {
        lock(&self.core)
    }

    /// The core's book, locked.
    pub fn book(&self) -> BookGuard<'_> {
        BookGuard(self.core())
    }

    /// Runs `task` (called `what` in the log) until it ends or the broker stops; a
    /// panic in it is logged.
    pub fn spawn<F>(&self, what: &'static str, task: F)
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        let span = tracing::debug_span!("task", what);
        let cancel = self.cancel.clone();
        let mut inner = tokio::spawn(task.instrument(span.clone()));
        self.tasks.spawn(
            async move {
                tokio::select! {
                    r = &mut inner => if let Err(e) = r {
                        if e.is_panic() {
                            tracing::error!(task = what, error = %e, "a broker task panicked");
                        }
                    },
                    _ = cancel.cancelled() => inner.abort(),
                }
            }
            .instrument(span),
        );
    }

    /// Feeds `input` to the core now and carries out what it says, pushing what it
    /// waits on; the answer, if the input wants one.
    pub async fn step(&self, input: Input) -> Option<Response> {
        let (mut answer, out) = self.core().handle(input, Instant::now());
        self.run(out);
        loop {
            match answer {
                Answer::Reply(r) => return Some(r),
                Answer::Push { to, req, then } => {
                    let outcome = self.push_to(&to, &req).await;
                    let (next, out) = self
                        .core()
                        .handle(Input::Pushed { then, outcome }, Instant::now());
                    self.run(out);
                    answer = next;
                }
                // Nothing, or an answer for the job API: no response to send.
                _ => return None,
            }
        }
    }

    /// Feeds the core an input that wants no answer, and carries out what it says.
    pub fn feed(&self, input: Input) {
        let (answer, out) = self.core().handle(input, Instant::now());
        debug_assert!(matches!(answer, Answer::Nothing), "{answer:?}");
        self.run(out);
    }

    async fn push_to(&self, to: &Peer, req: &Request) -> Result<Response, String> {
        let conn = match to {
            Peer::Proxy(a) => lock(&self.proxies).get(a).cloned(),
            Peer::Frontal(c) => lock(&self.frontals).get(c).cloned(),
        };
        match conn {
            Some(c) => push(&c, req).await,
            None => Err(match to {
                Peer::Proxy(_) => "not connected".into(),
                Peer::Frontal(_) => "its frontal is not connected".into(),
            }),
        }
    }

    /// Writes what changed in the jobs (and in the users of `qcg run` jobs) since
    /// the last call to the database (and deletes what retention dropped). The changes are taken under the store's
    /// lock, so they reach the database in the order they happened; the core's lock
    /// is not held while the database writes (or compacts).
    pub fn persist(&self) {
        let mut store = lock(&self.store);
        let changes = self.core().take_changes();
        let Some(store) = store.as_mut() else {
            // Nothing to save to: the changes are forgotten.
            return;
        };
        if changes.is_empty() {
            // A compaction put off (one a minute at most) is done once due.
            if let Err(e) = store.compact_if_due() {
                tracing::error!(error = %e, "database not compacted");
            }
            return;
        }
        if let Err(e) = store.apply(&changes) {
            tracing::error!(error = %e, jobs = changes.records.len(), "jobs not saved");
        }
    }

    /// Finished job `id` from the database, when it is no longer in memory
    /// ([`crate::jobs`]' `stored`). Takes the store's lock, then the core's, as
    /// [`Ctx::persist`] does.
    pub fn stored_job(&self, id: &str) -> Option<crate::jobs::Job> {
        let store = lock(&self.store);
        let r = match store.as_ref()?.record(id) {
            Ok(r) => r?,
            Err(e) => {
                tracing::error!(job = %id, error = %e, "cannot read a finished job's record");
                return None;
            }
        };
        let book = self.book();
        let now = Instant::now();
        // One still in memory (a restart took it back) is shown from there.
        (r.state.is_terminal() && book.jobs.get(id).is_none()).then(|| book.jobs.stored_job(r, now))
    }

    /// The finished jobs that live only in the database whose owner `see` accepts.
    pub fn stored_jobs(&self, see: impl Fn(&str) -> bool) -> Vec<crate::jobs::Job> {
        let store = lock(&self.store);
        let Some(store) = store.as_ref() else {
            return Vec::new();
        };
        let records = match store.finished(|r| see(&r.owner)) {
            Ok(r) => r,
            Err(e) => {
                tracing::error!(error = %e, "cannot read finished jobs' records");
                return Vec::new();
            }
        };
        let book = self.book();
        let now = Instant::now();
        records
            .into_iter()
            .filter(|r| book.jobs.get(&r.id).is_none())
            .map(|r| book.jobs.stored_job(r, now))
            .collect()
    }

    /// A page of the jobs `caller` may see, as the job API shows them: at most
    /// `limit`, by id, from the first id past `after`; those in memory (the core's
    /// answer to [`Input::List`]) and those only in the database together. Only the
    /// page's jobs are read and built.
    pub fn jobs_page(
        &self,
        caller: &crate::caller::Caller,
        after: Option<&str>,
        limit: usize,
    ) -> Vec<crate::api::JobView> {
        let store = lock(&self.store);
        let input = Input::List {
            caller: caller.clone(),
            after: after.map(str::to_string),
            limit: Some(limit),
        };
        let (live, in_memory) = match self.ask(input) {
            Answer::Jobs { views, in_memory } => (views, in_memory),
            other => {
                tracing::error!(answer = ?other, "the core did not list jobs");
                return Vec::new();
            }
        };
        let stored = match store.as_ref() {
            None => Vec::new(),
            Some(store) => {
                match store.finished_page(after, limit, |r| {
                    caller.may_see(&r.owner) && !in_memory.contains(&r.id)
                }) {
                    Ok(r) => r,
                    Err(e) => {
                        tracing::error!(error = %e, "cannot read finished jobs' records");
                        Vec::new()
                    }
                }
            }
        };
        drop(store);
        let now = Instant::now();
        let mut all = live;
        {
            let book = self.book();
            all.extend(
                stored
                    .into_iter()
                    .map(|r| crate::api::JobView::of(&book.jobs.stored_job(r, now))),
            );
        }
        all.sort_by(|a, b| a.id.cmp(&b.id));
        all.truncate(limit);
        all
    }

    /// Deletes from the database the finished jobs past `job_record_keep_secs`
    /// that live only there.
    pub fn purge_stored(&self) {
        let mut store = lock(&self.store);
        let Some(store) = store.as_mut() else {
            return;
        };
        let before = self.book().jobs.expired_before_ms(Instant::now());
        match store.expired_before(before) {
            Ok(0) => {}
            Ok(n) => tracing::info!(jobs = n, "finished jobs past job_record_keep_secs deleted"),
            Err(e) => tracing::error!(error = %e, "finished jobs' records not purged"),
        }
    }

    pub(crate) fn bump(&self) {
        self.changed.send_modify(|v| *v = v.wrapping_add(1));
    }

    /// The resource topology jobs are scheduled on.
    pub fn topology(&self) -> ResourceTopology {
        self.core().topology()
    }

    /// Feeds the core an input of the job API now and carries out what it says;
    /// the core's answer.
    pub fn ask(&self, input: Input) -> Answer {
        let (answer, out) = self.core().handle(input, Instant::now());
        self.run(out);
        answer
    }

    /// Submits a parsed profile for `owner`; returns the job id.
    pub fn submit(
        &self,
        profile: JobProfile,
        source: String,
        workdir: Option<String>,
        owner: String,
    ) -> Result<String, JobError> {
        let id = crate::new_job_id();
        let submission = Box::new(Submission {
            profile,
            secret_hex: crate::new_secret_hex(),
            workdir,
            owner,
            source,
        });
        match self.ask(Input::Submit {
            id: id.clone(),
            submission,
        }) {
            Answer::Done(r) => r.map(|()| id),
            other => Err(JobError::Incomplete(format!(
                "the broker's core gave no outcome to the submission: {other:?}"
            ))),
        }
    }

    /// Cancels job `id` for `caller` (a job it may not see is unknown to it).
    pub fn cancel(&self, id: &str, caller: &crate::caller::Caller) -> Result<(), JobError> {
        match self.ask(Input::Cancel {
            id: id.to_string(),
            caller: caller.clone(),
        }) {
            Answer::Done(r) => r,
            other => Err(JobError::Incomplete(format!(
                "the broker's core gave no outcome to the cancellation: {other:?}"
            ))),
        }
    }

    fn frontal(&self, cluster: &str) -> Option<quinn::Connection> {
        lock(&self.frontals).get(cluster).cloned()
    }

    /// Carries out what the core asked for (after saving what changed in the jobs,
    /// when it says so). Never called with the core locked.
    pub fn run(&self, outputs: Vec<Output>) {
        if outputs.is_empty() {
            return;
        }
        if outputs.contains(&Output::Save) {
            self.persist();
        }
        let mut changed = false;
        for o in outputs {
            match o {
                Output::Save => {}
                Output::Changed => changed = true,
                Output::Invalidate(inv) => self.invalidate(inv),
                Output::Launch { cluster, spec } => {
                    let ctx = self.clone();
                    let span =
                        tracing::info_span!("launch", job = %spec.job, rank = spec.rank, %cluster);
                    self.spawn(
                        "launch",
                        async move {
                            let result = match ctx.frontal(&cluster) {
                                None => Err(format!(
                                    "the frontal of cluster {cluster} is not connected"
                                )),
                                Some(conn) => {
                                    let req = Request::Launch(Box::new(spec.clone()));
                                    match quic::request(&conn, &req).await {
                                        Ok(Response::Ok) => Ok(()),
                                        Ok(Response::Error(e)) => Err(e.message),
                                        Ok(other) => {
                                            Err(format!("unexpected answer to launch: {other:?}"))
                                        }
                                        Err(e) => {
                                            Err(format!("the frontal of cluster {cluster}: {e}"))
                                        }
                                    }
                                }
                            };
                            if let Err(e) = &result {
                                tracing::warn!(error = %e, "launch failed");
                            }
                            ctx.feed(Input::Launched {
                                job: spec.job,
                                rank: spec.rank,
                                result,
                            });
                        }
                        .instrument(span),
                    );
                }
                Output::Kill { job, clusters } => {
                    for cluster in clusters {
                        let Some(conn) = self.frontal(&cluster) else {
                            tracing::warn!(%job, %cluster, "cannot kill: frontal not connected");
                            continue;
                        };
                        let req = Request::Kill { job: job.clone() };
                        self.spawn("kill", async move {
                            if let Err(e) = quic::request(&conn, &req).await {
                                tracing::warn!(%cluster, error = %e, "kill not delivered");
                            }
                        });
                    }
                }
                Output::Probe { a, b } => {
                    let (Some(ca), Some(cb)) = (self.frontal(&a), self.frontal(&b)) else {
                        // A frontal that went as the probe came due: the probe is
                        // not left in flight.
                        let none = crate::topology::estimate(Duration::ZERO, Duration::ZERO);
                        self.feed(Input::Probed {
                            a,
                            b,
                            outcome: Err("a frontal is not connected".into()),
                            fallback: none,
                        });
                        continue;
                    };
                    let addr = cb.remote_address();
                    let fallback = crate::topology::estimate(ca.rtt(), cb.rtt());
                    let ctx = self.clone();
                    let span = tracing::debug_span!("probe", %a, %b);
                    self.spawn(
                        "probe",
                        async move {
                            let req = Request::ProbePeer {
                                cluster: b.clone(),
                                addr,
                            };
                            let outcome = match quic::request(&ca, &req).await {
                                Ok(Response::Measured(q)) => Ok(q),
                                Ok(Response::Error(e)) => Err(e.message),
                                Ok(other) => Err(format!("unexpected answer to probe: {other:?}")),
                                Err(e) => Err(e.to_string()),
                            };
                            ctx.feed(Input::Probed {
                                a,
                                b,
                                outcome,
                                fallback,
                            });
                        }
                        .instrument(span),
                    );
                }
                Output::Check {
                    config,
                    node,
                    proxy: proxy_addr,
                } => {
                    let frontal = self.frontal(&config.name);
                    let proxy = lock(&self.proxies).get(&proxy_addr).cloned();
                    let (Some(frontal), Some(proxy)) = (frontal, proxy) else {
                        // One went as the check came due: tried again later.
                        self.feed(Input::Checked {
                            config,
                            inbound: None,
                            nat: None,
                        });
                        continue;
                    };
                    let ctx = self.clone();
                    let span = tracing::debug_span!("check", cluster = %config.name, %node);
                    self.spawn(
                        "check",
                        async move {
                            let nat = check_nat(&frontal, &proxy_addr, &config, &node).await;
                            let inbound = if crate::plan::accepts_inbound(&config) {
                                check_reach(&frontal, &proxy, &config, &node).await
                            } else {
                                None
                            };
                            ctx.feed(Input::Checked {
                                config,
                                inbound,
                                nat,
                            });
                        }
                        .instrument(span),
                    );
                }
            }
        }
        if changed {
            self.bump();
        }
    }

    /// Tells every frontal to forget cached answers.
    fn invalidate(&self, inv: Invalidation) {
        let conns: Vec<_> = lock(&self.frontals).values().cloned().collect();
        for conn in conns {
            let req = Request::Invalidate {
                job: inv.job.clone(),
                rank: inv.rank,
            };
            self.spawn("invalidate", async move {
                if let Err(e) = quic::request(&conn, &req).await {
                    tracing::warn!(peer = %conn.remote_address(), error = %e, "invalidation not delivered");
                }
            });
        }
    }

    /// One turn of the clock: probes and checks that are due, nodes lost, jobs timed
    /// out; then whatever changed without an action (output offsets) is saved.
    pub fn tick(&self) {
        self.feed(Input::Tick);
        self.persist();
    }
}

/// The NAT check of `config`'s cluster: a helper of `node` connects to the relay
/// proxy at `proxy` and learns where it is seen from. `None` if it could not run.
async fn check_nat(
    frontal: &quinn::Connection,
    proxy: &std::net::SocketAddr,
    config: &qcg_proto::ClusterConfig,
    node: &str,
) -> Option<crate::registry::NatSeen> {
    let req = Request::NatCheck {
        node: node.to_string(),
        proxy: *proxy,
    };
    match tokio::time::timeout(Duration::from_secs(15), quic::request(frontal, &req)).await {
        Ok(Ok(Response::Seen { local, seen })) => Some(crate::registry::NatSeen {
            nat: crate::reach::nat_seen(local, seen),
            public: seen.ip(),
            how: format!(
                "a connection from node {node} at {local} reached a relay proxy from {seen}"
            ),
        }),
        other => {
            tracing::debug!(cluster = %config.name, %node, outcome = ?other, "NAT check could not run");
            None
        }
    }
}

/// One reachability check of `config`'s cluster: a helper of `node` listens, a
/// relay proxy dials it from outside. `None` when the check could not run.
async fn check_reach(
    frontal: &quinn::Connection,
    proxy: &quinn::Connection,
    config: &qcg_proto::ClusterConfig,
    node: &str,
) -> Option<Result<(), String>> {
    let ports = match config.policy {
        qcg_proto::Policy::PortRange { lo, hi } => Some((lo, hi)),
        _ => None,
    };
    let req = Request::OpenCheck {
        node: node.to_string(),
        ports,
    };
    let addr = match tokio::time::timeout(Duration::from_secs(5), quic::request(frontal, &req))
        .await
    {
        Ok(Ok(Response::Listening { addr })) => addr,
        other => {
            tracing::debug!(cluster = %config.name, %node, outcome = ?other, "reachability check could not start");
            return None;
        }
    };
    // From outside, a NAT's gateway forwards an open range at its public address.
    let public = std::net::SocketAddr::new(config.public_address.unwrap_or(addr.ip()), addr.port());
    let dial = Request::DialCheck { addr: public };
    match tokio::time::timeout(Duration::from_secs(10), quic::request(proxy, &dial)).await {
        Ok(Ok(Response::Ok)) => Some(Ok(())),
        Ok(Ok(Response::Error(e))) => Some(Err(format!(
            "a relay proxy dialled node {node} at {public}: {}",
            e.message
        ))),
        other => {
            tracing::debug!(cluster = %config.name, %node, outcome = ?other, "reachability check: no answer from the proxy");
            None
        }
    }
}
