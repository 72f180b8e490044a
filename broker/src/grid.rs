//! The async shell around the pure cores: it keeps the frontals' connections,
//! feeds the job table ([`crate::jobs`]) and the topology book
//! ([`crate::topology`]) with what frontals report, carries out their actions
//! (launch, kill, probe) over QUIC, and runs the clock.

use crate::http::Shared;
use crate::jobs::{Action, JobError, Jobs, Submission};
use crate::registry::Invalidation;
use crate::topology::TopoBook;
use qcg_jobprofile::profile::JobProfile;
use qcg_jobprofile::topology::ResourceTopology;
use qcg_proto::quic;
use qcg_proto::{ErrorKind, Request, Response};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

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

/// Everything the broker's tasks and handlers share. Locks are taken registry first,
/// then book, never the other way.
#[derive(Clone)]
pub struct Ctx {
    /// Clusters and processes.
    pub registry: Shared,
    /// Jobs and resources.
    pub book: Arc<Mutex<Book>>,
    /// Frontal connections.
    pub frontals: Frontals,
    /// Relay proxy connections.
    pub proxies: Proxies,
    /// Bumped whenever a job changes (output, state), for long polls.
    pub changed: Arc<tokio::sync::watch::Sender<u64>>,
    /// How often each pair of clusters is measured.
    pub probe_interval: Duration,
    /// Where jobs are kept across restarts, if anywhere.
    pub store: Arc<Mutex<Option<crate::store::Store>>>,
    /// How long the helper of a node running a job may stay away before the job
    /// fails ([`DEFAULT_LOST_NODE_GRACE`]).
    pub lost_node_grace: Duration,
    /// Since when each node (cluster, node) where a job runs has been away.
    pub away: Arc<Mutex<HashMap<(String, String), Instant>>>,
    /// The caps of the broker's listeners by name (`quic`, `http`, `https`), for
    /// the connection metrics.
    pub listeners: Arc<Mutex<Vec<Listener>>>,
}

/// A listener's name and its caps.
pub type Listener = (&'static str, qcg_proto::limits::Caps<std::net::IpAddr>);

/// Default [`Ctx::lost_node_grace`].
pub const DEFAULT_LOST_NODE_GRACE: Duration = Duration::from_secs(30);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Ctx {
    /// A fresh context.
    pub fn new(registry: Shared, probe_interval: Duration) -> Ctx {
        Ctx {
            registry,
            book: Default::default(),
            frontals: Default::default(),
            proxies: Default::default(),
            changed: Arc::new(tokio::sync::watch::channel(0).0),
            probe_interval,
            store: Default::default(),
            lost_node_grace: DEFAULT_LOST_NODE_GRACE,
            away: Default::default(),
            listeners: Default::default(),
        }
    }

    /// Writes what changed in the jobs since the last call to the database (and
    /// deletes what retention dropped). The changes are taken under the store's
    /// lock, so they reach the database in the order they happened; the book's lock
    /// is not held while the database writes (or compacts).
    pub fn persist(&self) {
        let mut store = lock(&self.store);
        let changes = self.book().jobs.take_changes();
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
    /// ([`crate::jobs`]' `stored`). Takes the store's lock, then the book's, as
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

    /// The book, locked.
    pub fn book(&self) -> MutexGuard<'_, Book> {
        lock(&self.book)
    }

    pub(crate) fn bump(&self) {
        self.changed.send_modify(|v| *v = v.wrapping_add(1));
    }

    /// The resource topology jobs are scheduled on.
    pub fn topology(&self) -> ResourceTopology {
        let (configs, relay) = {
            let r = lock(&self.registry);
            (r.clusters(), r.proxies().iter().any(|p| p.alive))
        };
        self.book().topo.topology(&configs, relay)
    }

    /// Submits a parsed profile for `owner`; returns the job id.
    pub fn submit(
        &self,
        profile: JobProfile,
        source: String,
        workdir: Option<String>,
        owner: String,
    ) -> Result<String, JobError> {
        let topo = self.topology();
        let id = crate::new_job_id();
        let submission = Submission {
            profile,
            secret_hex: crate::new_secret_hex(),
            workdir,
            owner: owner.clone(),
            source,
        };
        let actions = self.book().jobs.submit(id.clone(), submission, &topo)?;
        tracing::info!(job = %id, %owner, launches = actions.len(), "job submitted");
        self.persist();
        self.execute(actions);
        self.bump();
        Ok(id)
    }

    /// Cancels a job.
    pub fn cancel(&self, id: &str) -> Result<(), JobError> {
        let actions = self.book().jobs.cancel(id, Instant::now())?;
        tracing::info!(job = %id, "job cancelled");
        self.persist();
        self.execute(actions);
        self.bump();
        Ok(())
    }

    fn frontal(&self, cluster: &str) -> Option<quinn::Connection> {
        lock(&self.frontals).get(cluster).cloned()
    }

    /// Carries out what the job table asked for (after saving what changed).
    pub fn execute(&self, actions: Vec<Action>) {
        self.persist();
        for a in actions {
            match a {
                Action::Launch { cluster, spec } => {
                    let ctx = self.clone();
                    tokio::spawn(async move {
                        let result = match ctx.frontal(&cluster) {
                            None => {
                                Err(format!("the frontal of cluster {cluster} is not connected"))
                            }
                            Some(conn) => {
                                match quic::request(&conn, &Request::Launch(Box::new(spec.clone())))
                                    .await
                                {
                                    Ok(Response::Ok) => Ok(()),
                                    Ok(Response::Error(e)) => Err(e.message),
                                    Ok(other) => {
                                        Err(format!("unexpected answer to launch: {other:?}"))
                                    }
                                    Err(e) => Err(format!("the frontal of cluster {cluster}: {e}")),
                                }
                            }
                        };
                        if let Err(e) = &result {
                            tracing::warn!(job = %spec.job, rank = spec.rank, error = %e, "launch failed");
                        }
                        let more =
                            ctx.book()
                                .jobs
                                .launched(&spec.job, spec.rank, result, Instant::now());
                        ctx.execute(more);
                        ctx.bump();
                    });
                }
                Action::Kill { job, clusters } => {
                    for cluster in clusters {
                        let Some(conn) = self.frontal(&cluster) else {
                            tracing::warn!(%job, %cluster, "cannot kill: frontal not connected");
                            continue;
                        };
                        let req = Request::Kill { job: job.clone() };
                        tokio::spawn(async move {
                            if let Err(e) = quic::request(&conn, &req).await {
                                tracing::warn!(%cluster, error = %e, "kill not delivered");
                            }
                        });
                    }
                }
                Action::Ended { job } => {
                    tracing::info!(%job, "job ended; its slots are free");
                    let inv = lock(&self.registry).end_job(&job);
                    push_invalidation(&self.frontals, inv);
                    let topo = self.topology();
                    let more = self.book().jobs.start_queued(&topo);
                    self.execute(more);
                    self.bump();
                }
            }
        }
    }

    /// The refusal of a request from the frontal of `cluster` that acts for a rank of
    /// a submitted job away from where the job was placed, or ends a submitted job
    /// ([`crate::placed`]); logged. Else the request to hand on: for a submitted job,
    /// without the sender a helper named ([`crate::users`] keeps only the jobs the
    /// broker did not place).
    pub fn admit(&self, cluster: &str, req: Request) -> Result<Request, Response> {
        let Some(acts) = crate::placed::acts(&req) else {
            return Ok(req);
        };
        let job = match acts {
            crate::placed::Acts::As(p, _) => p.job.as_str(),
            crate::placed::Acts::Ends(j) => j,
        };
        let (verdict, submitted) = {
            let book = self.book();
            let known = match book.jobs.get(job) {
                None => crate::placed::Known::Unknown,
                Some(j) => match &j.mapping {
                    Some(m) => crate::placed::Known::Placed(m),
                    None => crate::placed::Known::Unplaced,
                },
            };
            let submitted = !matches!(known, crate::placed::Known::Unknown);
            (crate::placed::check(cluster, &req, known), submitted)
        };
        if let Err(why) = verdict {
            tracing::warn!(%cluster, request = req.kind(), %job, reason = %why, "request refused: not where the job was placed");
            return Err(Response::error(
                ErrorKind::Forbidden,
                format!("`{}` refused: {why}", req.kind()),
            ));
        }
        Ok(match req {
            Request::ForUser { request, .. } if submitted => *request,
            req => req,
        })
    }

    /// Handles what a frontal reports about its nodes and its processes; `None` for
    /// requests that are the registry's business.
    pub fn frontal_report(&self, cluster: &str, req: &Request) -> Option<Response> {
        let now = Instant::now();
        let resp = match req {
            Request::ClusterNodes { nodes, internal } => {
                self.book()
                    .topo
                    .set_nodes(cluster, nodes.clone(), *internal);
                tracing::info!(%cluster, nodes = nodes.len(), "cluster nodes reported");
                let topo = self.topology();
                let more = self.book().jobs.start_queued(&topo);
                self.execute(more);
                Response::Ok
            }
            Request::Output { job, rank, lines } => {
                match self.book().jobs.output(job, *rank, cluster, lines.clone()) {
                    Ok(()) => Response::Ok,
                    Err(e) => Response::error(ErrorKind::Forbidden, e.to_string()),
                }
            }
            Request::Running { nodes, processes } => {
                let actions = self.book().jobs.running(cluster, nodes, processes, now);
                self.execute(actions);
                Response::Ok
            }
            Request::ProcessExited { job, rank, exit } => {
                let r = self
                    .book()
                    .jobs
                    .exited(job, *rank, cluster, exit.clone(), now);
                match r {
                    Ok(actions) => {
                        self.execute(actions);
                        Response::Ok
                    }
                    Err(e) => Response::error(ErrorKind::Forbidden, e.to_string()),
                }
            }
            _ => return None,
        };
        self.bump();
        Some(resp)
    }

    /// One turn of the clock: probes that are due, processes given up.
    pub fn tick(&self) {
        let now = Instant::now();
        let conns: HashMap<String, quinn::Connection> = lock(&self.frontals).clone();
        let names: Vec<String> = conns.keys().cloned().collect();
        let due = self.book().topo.due(&names, now, self.probe_interval);
        for (a, b) in due {
            let (Some(ca), Some(cb)) = (conns.get(&a).cloned(), conns.get(&b)) else {
                continue;
            };
            let addr = cb.remote_address();
            let fallback = crate::topology::estimate(ca.rtt(), cb.rtt());
            let ctx = self.clone();
            tokio::spawn(async move {
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
                let failure = outcome.as_ref().err().cloned();
                if let Ok(q) = &outcome {
                    tracing::debug!(%a, %b, latency_ms = q.latency_ms, bandwidth_mbps = q.bandwidth_mbps, "link measured");
                }
                let news = ctx
                    .book()
                    .topo
                    .record(&a, &b, outcome, fallback, Instant::now());
                if let Some(e) = failure {
                    if news {
                        tracing::warn!(%a, %b, error = %e, latency_ms = fallback.latency_ms, bandwidth_mbps = fallback.bandwidth_mbps, "the gateways cannot probe each other (processes still link); the link is estimated from their round trips to the broker until a probe succeeds");
                    } else {
                        tracing::debug!(%a, %b, error = %e, "probe failed again");
                    }
                }
                let topo = ctx.topology();
                let more = ctx.book().jobs.start_queued(&topo);
                ctx.execute(more);
            });
        }
        self.start_checks(&conns, now);
        let topo = self.topology();
        let mut actions = self.lost_nodes(&topo, now);
        actions.extend(self.book().jobs.tick(&topo, now));
        if !actions.is_empty() {
            self.execute(actions);
            self.bump();
        }
        // Output offsets and whatever else changed without an action.
        self.persist();
    }
}

impl Ctx {
    /// Jobs with a live rank on a node whose helper has been away from `topo` (its
    /// frontal reports the nodes whose helper is connected) for the grace fail,
    /// naming the node: a lost node never leaves a job running unseen.
    fn lost_nodes(&self, topo: &ResourceTopology, now: Instant) -> Vec<Action> {
        let present: std::collections::HashSet<(&str, &str)> = topo
            .clusters
            .iter()
            .flat_map(|c| c.nodes.iter().map(|n| (c.name.as_str(), n.name.as_str())))
            .collect();
        let mut book = self.book();
        let mut away = lock(&self.away);
        let mut wanted = std::collections::HashSet::new();
        for job in book.jobs.all() {
            if job.state != crate::jobs::JobState::Running {
                continue;
            }
            for r in job.mapping.iter().flat_map(|m| m.ranks.iter()) {
                let live = matches!(
                    job.ranks.get(r.rank),
                    Some(crate::jobs::RankState::Starting | crate::jobs::RankState::Running)
                );
                if live && !present.contains(&(r.cluster.as_str(), r.node.as_str())) {
                    wanted.insert((r.cluster.clone(), r.node.clone()));
                }
            }
        }
        away.retain(|k, _| wanted.contains(k));
        let grace = self.lost_node_grace;
        let mut actions = Vec::new();
        for key in wanted {
            let since = *away.entry(key.clone()).or_insert(now);
            if now.saturating_duration_since(since) < grace {
                continue;
            }
            away.remove(&key);
            let (cluster, node) = key;
            let reason = format!(
                "was lost: the helper of node {node} (cluster `{cluster}`) was lost for {} s",
                grace.as_secs()
            );
            tracing::warn!(%cluster, %node, grace_s = grace.as_secs(), "a node running jobs stayed away past the grace; its jobs fail");
            actions.extend(book.jobs.node_lost(&cluster, &node, &reason, now));
        }
        actions
    }

    /// Starts the reachability checks that are due ([`crate::reach`]).
    fn start_checks(&self, frontals: &HashMap<String, quinn::Connection>, now: Instant) {
        let (configs, live) = {
            let r = lock(&self.registry);
            let live: Vec<std::net::SocketAddr> = r
                .proxies()
                .into_iter()
                .filter(|p| p.alive)
                .map(|p| p.addr)
                .collect();
            (r.clusters(), live)
        };
        let proxy = {
            let p = lock(&self.proxies);
            live.iter().find_map(|a| p.get(a).cloned().map(|c| (*a, c)))
        };
        let due = {
            let mut book = self.book();
            let clusters: Vec<_> = configs
                .into_iter()
                .filter(|c| frontals.contains_key(&c.name))
                .map(|c| {
                    let node = book.topo.first_node(&c.name);
                    (c, node)
                })
                .collect();
            book.checks.due(&clusters, proxy.is_some(), now)
        };
        for (config, node) in due {
            let (Some(frontal), Some((proxy_addr, proxy))) =
                (frontals.get(&config.name).cloned(), proxy.clone())
            else {
                continue;
            };
            let ctx = self.clone();
            tokio::spawn(async move {
                let nat = check_nat(&frontal, &proxy_addr, &config, &node).await;
                let inbound = if crate::plan::accepts_inbound(&config) {
                    check_reach(&frontal, &proxy, &config, &node).await
                } else {
                    None
                };
                let ran = nat.is_some() || inbound.is_some();
                tracing::debug!(cluster = %config.name, %node, ?inbound, ?nat, "cluster checked");
                lock(&ctx.registry).checked(&config.name, &config, inbound, nat);
                ctx.book().checks.done(&config, ran, Instant::now());
            });
        }
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

/// Tells every frontal to forget cached answers.
pub fn push_invalidation(frontals: &Frontals, inv: Invalidation) {
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
