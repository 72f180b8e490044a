//! The broker's state and the pure handling of control-plane requests.
//!
//! [`Registry::handle`] answers a request and lists the [`Effect`]s the async shell
//! must carry out (cache invalidations, notices to a target process, a token to hand
//! to a proxy). Tokens come from a generator the shell provides, so tests are
//! deterministic.

use crate::plan;
use qcg_proto::{
    AccessPoint, ClusterConfig, ErrorKind, Nat, Notice, Policy, ProcName, Request, Response,
    Technique,
};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;

/// How long a relay token is valid, in milliseconds.
pub const RELAY_TOKEN_MS: u64 = 30_000;

/// Longest name a peer may send: job ids, cluster, node and process names.
pub const MAX_NAME: usize = 256;
/// Most nodes one cluster may report.
pub const MAX_NODES: usize = 4096;
/// Most processes one report of a cluster's running processes may list.
pub const MAX_RUNNING: usize = 65_536;
/// Registrations kept per job by default.
pub const DEFAULT_PER_JOB: usize = 4096;
/// Registrations kept per cluster by default.
pub const DEFAULT_PER_CLUSTER: usize = 65_536;

/// Why a request's names are refused, or `Ok`: every name a peer sends is at most
/// [`MAX_NAME`] bytes, so one request cannot make the broker keep megabytes.
pub fn check_names(req: &Request) -> Result<(), String> {
    fn name(what: &str, v: &str) -> Result<(), String> {
        if v.len() > MAX_NAME {
            return Err(format!(
                "{what} is {} bytes long; at most {MAX_NAME} are allowed",
                v.len()
            ));
        }
        Ok(())
    }
    fn proc(what: &str, p: &ProcName) -> Result<(), String> {
        name(&format!("the job id of {what}"), &p.job)
    }
    match req {
        Request::ForUser { user, request } => {
            name("the sender's machine", &user.machine)?;
            name("the sender's node", &user.node)?;
            check_names(request)
        }
        Request::RegisterCluster(c) => name("the cluster name", &c.name),
        Request::Register(ap) => {
            proc("the process", &ap.process)?;
            name("the cluster name", &ap.cluster)?;
            name("the node name", &ap.node)
        }
        Request::Unregister { process } | Request::Subscribe { process } => {
            proc("the process", process)
        }
        Request::Lookup { from, target }
        | Request::Report { from, target, .. }
        | Request::Rendezvous { from, target, .. }
        | Request::WatchSyn { from, target, .. }
        | Request::Syn { from, target, .. } => {
            proc("the initiator", from)?;
            proc("the target", target)
        }
        Request::Notify { target, .. } => proc("the target", target),
        Request::JobEnd { job }
        | Request::Invalidate { job, .. }
        | Request::Kill { job }
        | Request::Output { job, .. }
        | Request::ProcessExited { job, .. } => name("the job id", job),
        Request::RegisterNode(n) => name("the node name", &n.name),
        Request::ClusterNodes { nodes, .. } => {
            if nodes.len() > MAX_NODES {
                return Err(format!(
                    "{} nodes reported; at most {MAX_NODES} are allowed",
                    nodes.len()
                ));
            }
            nodes.iter().try_for_each(|n| name("a node name", &n.name))
        }
        Request::Running { nodes, processes } => {
            if nodes.len() > MAX_NODES {
                return Err(format!(
                    "{} nodes reported; at most {MAX_NODES} are allowed",
                    nodes.len()
                ));
            }
            if processes.len() > MAX_RUNNING {
                return Err(format!(
                    "{} processes reported; at most {MAX_RUNNING} are allowed",
                    processes.len()
                ));
            }
            nodes.iter().try_for_each(|n| name("a node name", n))?;
            processes.iter().try_for_each(|p| proc("a process", p))
        }
        Request::ProbePeer { cluster, .. } => name("the cluster name", cluster),
        Request::Launch(spec) => {
            name("the job id", &spec.job)?;
            name("the node name", &spec.node)
        }
        _ => Ok(()),
    }
}

/// Cache invalidation to push to every frontal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invalidation {
    /// The job.
    pub job: String,
    /// One rank, or the whole job.
    pub rank: Option<u32>,
}

/// Something the shell must do after a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Tell every frontal to forget cached answers.
    Invalidate(Invalidation),
    /// Tell a process (through its cluster's frontal) to act.
    Notify {
        /// The process's cluster.
        cluster: String,
        /// The process.
        target: ProcName,
        /// What to tell it.
        notice: Notice,
    },
    /// Processes of clusters `a` and `b` made a link whose handshake took `rtt_us`
    /// for a round trip: a measurement of the two clusters' link where their
    /// gateways cannot probe each other.
    Measured {
        /// The initiator's cluster.
        a: String,
        /// The target's cluster.
        b: String,
        /// The round trip, µs.
        rtt_us: u64,
    },
    /// Hand a token to a proxy before anyone presents it. Must succeed before the
    /// answer goes out; if the proxy cannot be reached, mark it dead and ask again.
    ExpectRelay {
        /// The proxy.
        proxy: SocketAddr,
        /// The token.
        token: String,
    },
}

/// Attempts and their outcomes, per technique.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LinkCounts {
    /// Links made.
    pub ok: u64,
    /// Attempts that failed.
    pub failed: u64,
    /// Of the links made, those that took over a relayed link (relay first, then
    /// upgrade).
    pub upgraded: u64,
}

/// A cluster as the aggregate views show it: no address, only figures.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ClusterSummary {
    /// Its name.
    pub name: String,
    /// Its announced inbound policy.
    pub policy: qcg_proto::Policy,
    /// Its announced NAT kind.
    pub nat: qcg_proto::Nat,
    /// Processes registered in it.
    pub processes: usize,
    /// Connections dialled into it from other clusters (direct or port-range links)
    /// that were made, and that failed.
    pub inbound_ok: u64,
    /// See `inbound_ok`.
    pub inbound_failed: u64,
    /// The last active check of what the cluster lets in from outside.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checked: Option<String>,
    /// What was observed that the announced config does not say (then links into
    /// the cluster are planned as for a closed one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mismatch: Option<String>,
}

/// Failed inbound dials, with none made, after which a cluster announced reachable
/// is taken as closed.
pub const MISMATCH_AFTER: u64 = 3;

/// Outcomes of the connections other clusters dialled into one cluster.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Inbound {
    /// Made.
    pub ok: u64,
    /// Failed.
    pub failed: u64,
    /// The last active check ([`crate::reach`]): a relay proxy's dial into a node's
    /// check listener, and why it failed.
    pub check: Option<Result<(), String>>,
    /// The address translation a node's connection to a relay proxy went through.
    pub nat: Option<NatSeen>,
}

/// The address translation observed on a connection out of a cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NatSeen {
    /// Its kind ([`crate::reach::nat_seen`]).
    pub nat: Nat,
    /// The source address the proxy saw.
    pub public: std::net::IpAddr,
    /// What was seen, for an admin.
    pub how: String,
}

impl NatSeen {
    /// What in `c` this contradicts, said for an admin. A connection seen untranslated
    /// proves nothing against an announced NAT (the proxy may sit inside the cluster,
    /// or behind the same gateway).
    fn mismatch(&self, c: &ClusterConfig) -> Option<String> {
        if self.nat == Nat::None && c.nat.is_nat() {
            return None;
        }
        if self.nat != c.nat {
            return Some(format!(
                "announced NAT {} but it behaves as {} ({}): planned as {}",
                c.nat, self.nat, self.how, self.nat
            ));
        }
        match c.public_address {
            Some(p) if self.nat.is_nat() && p != self.public => Some(format!(
                "announced public_address {p} but its connections leave from {} ({}): planned with {}",
                self.public, self.how, self.public
            )),
            _ => None,
        }
    }
}

impl Inbound {
    /// Whether what was seen contradicts a config saying the cluster accepts
    /// inbound connections: no dial into it was ever made, and the active check
    /// failed or dials from other clusters kept failing.
    pub fn contradicts(&self, c: &ClusterConfig) -> bool {
        plan::accepts_inbound(c)
            && self.ok == 0
            && (matches!(self.check, Some(Err(_))) || self.failed >= MISMATCH_AFTER)
    }

    /// What contradicts the config, said for an admin.
    fn mismatch(&self, c: &ClusterConfig) -> Option<String> {
        let nat = self.nat.as_ref().and_then(|n| n.mismatch(c));
        let inbound = self.inbound_mismatch(c);
        match (inbound, nat) {
            (Some(a), Some(b)) => Some(format!("{a}; {b}")),
            (a, b) => a.or(b),
        }
    }

    fn inbound_mismatch(&self, c: &ClusterConfig) -> Option<String> {
        if !self.contradicts(c) {
            return None;
        }
        Some(match &self.check {
            Some(Err(e)) => format!(
                "announced {} but a check from outside could not connect to a node: {e}: planned as closed",
                c.policy
            ),
            _ => format!(
                "announced {} but {} connection(s) dialled into it from other clusters failed and none was made: planned as closed",
                c.policy, self.failed
            ),
        })
    }
}

/// A relay proxy the broker knows.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ProxyEntry {
    /// Where processes reach it.
    pub addr: SocketAddr,
    /// Whether it passed its last health check.
    pub alive: bool,
    /// Relayed links handed to it.
    pub assigned: u64,
}

/// One process fewer registered in `cluster`.
fn uncount(in_cluster: &mut HashMap<String, usize>, cluster: &str) {
    if let Some(n) = in_cluster.get_mut(cluster) {
        *n -= 1;
        if *n == 0 {
            in_cluster.remove(cluster);
        }
    }
}

/// Everything the broker knows.
pub struct Registry {
    clusters: BTreeMap<String, ClusterConfig>,
    processes: BTreeMap<ProcName, AccessPoint>,
    /// Registered processes per cluster, kept with `processes` so that the limit
    /// check of a registration does not count them over the whole registry
    /// (`qcg-bench broker`: 375 us a registration at 20,000 processes when it did).
    in_cluster: HashMap<String, usize>,
    links: BTreeMap<Technique, LinkCounts>,
    requests: BTreeMap<&'static str, u64>,
    /// Error answers by kind ([`qcg_proto::metrics::error_kind_name`]).
    errors: BTreeMap<&'static str, u64>,
    lookups: BTreeMap<&'static str, u64>,
    proxies: Vec<ProxyEntry>,
    next_proxy: usize,
    tokens: Box<dyn FnMut() -> String + Send>,
    per_job: usize,
    per_cluster: usize,
    /// Inbound dials observed, by target cluster (reset when its config changes).
    inbound: BTreeMap<String, Inbound>,
    /// Attempts counted there, so that one attempt counts once however often it is
    /// reported (forgotten with its job; at most [`MAX_REPORTED`]).
    reported: std::collections::HashSet<(ProcName, ProcName, Technique)>,
    /// Processes that unregistered while their job goes on: a lookup of one fails
    /// at once instead of being told to wait for it (forgotten with its job, or when
    /// it registers again; at most [`MAX_REPORTED`]).
    left: std::collections::HashSet<ProcName>,
    /// The clusters each job registered processes from (forgotten with the job; at
    /// most [`MAX_REPORTED`] jobs): only those may end it.
    job_clusters: std::collections::HashMap<String, BTreeSet<String>>,
    /// Link outcomes per job and technique, of the jobs still registered (forgotten
    /// with the job, like `reported`): the dashboard's live links.
    job_links: std::collections::HashMap<String, BTreeMap<Technique, LinkCounts>>,
    /// Which links are encrypted (told in each plan).
    encrypt: crate::encrypt::EncryptPolicy,
    /// The user of each job the broker did not place ([`crate::users`]).
    users: crate::users::JobUsers,
}

/// Whether `processes` holds a process of `job`.
fn has_process(processes: &BTreeMap<ProcName, AccessPoint>, job: &str) -> bool {
    processes
        .range(ProcName::new(job, 0)..)
        .next()
        .is_some_and(|(p, _)| p.job == job)
}

/// Attempts remembered at once for [`Registry`]'s observations; past it, reports
/// still count in the link figures but no longer in what a cluster lets in.
pub const MAX_REPORTED: usize = 100_000;

impl Default for Registry {
    fn default() -> Self {
        let mut n = 0u64;
        Registry::with_tokens(Box::new(move || {
            n += 1;
            format!("{n:064x}")
        }))
    }
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("clusters", &self.clusters.len())
            .field("processes", &self.processes.len())
            .finish()
    }
}

fn err(kind: ErrorKind, msg: impl Into<String>) -> (Response, Vec<Effect>) {
    (Response::error(kind, msg), Vec::new())
}

/// Which side of the broker a connection is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Peer<'a> {
    /// A frontal that has registered this cluster (or none yet).
    Frontal(Option<&'a str>),
    /// A relay proxy.
    Proxy,
}

impl Registry {
    /// A registry whose relay tokens come from `tokens` (64 hex digits each).
    pub fn with_tokens(tokens: Box<dyn FnMut() -> String + Send>) -> Self {
        Registry {
            clusters: Default::default(),
            processes: Default::default(),
            in_cluster: Default::default(),
            links: Default::default(),
            requests: Default::default(),
            errors: Default::default(),
            lookups: Default::default(),
            proxies: Vec::new(),
            next_proxy: 0,
            tokens,
            per_job: DEFAULT_PER_JOB,
            per_cluster: DEFAULT_PER_CLUSTER,
            inbound: BTreeMap::new(),
            reported: Default::default(),
            left: Default::default(),
            job_clusters: Default::default(),
            job_links: Default::default(),
            encrypt: Default::default(),
            users: Default::default(),
        }
    }

    /// Sets which links the plans say to encrypt.
    pub fn set_encrypt(&mut self, policy: crate::encrypt::EncryptPolicy) {
        self.encrypt = policy;
    }

    /// Sets how many processes may be registered per job and per cluster.
    pub fn set_limits(&mut self, per_job: usize, per_cluster: usize) {
        self.per_job = per_job;
        self.per_cluster = per_cluster;
    }

    /// Whether one more process of `job` in `cluster` may be registered.
    fn over_limits(&self, job: &str, cluster: &str) -> Option<String> {
        let start = ProcName::new(job, 0);
        let of_job = self
            .processes
            .range(start..)
            .take_while(|(p, _)| p.job == job)
            .count();
        if of_job >= self.per_job {
            return Some(format!(
                "job `{job}` already has {of_job} registered processes, the most the broker keeps per job"
            ));
        }
        let of_cluster = self.in_cluster.get(cluster).copied().unwrap_or(0);
        if of_cluster >= self.per_cluster {
            return Some(format!(
                "cluster `{cluster}` already has {of_cluster} registered processes, the most the broker keeps per cluster"
            ));
        }
        None
    }

    /// Handles one request from the frontal of `cluster` (`None` until the frontal has
    /// registered its cluster). Returns the answer and what the shell must do.
    pub fn handle(&mut self, cluster: Option<&str>, req: Request) -> (Response, Vec<Effect>) {
        *self.requests.entry(req.kind()).or_default() += 1;
        let (resp, effects) = self.answer(cluster, req);
        if let Response::Error(e) = &resp {
            let kind = qcg_proto::metrics::error_kind_name(e.kind);
            *self.errors.entry(kind).or_default() += 1;
        }
        (resp, effects)
    }

    fn answer(&mut self, cluster: Option<&str>, req: Request) -> (Response, Vec<Effect>) {
        if let Err(why) = check_names(&req) {
            return err(ErrorKind::TooLarge, why);
        }
        if let Request::RegisterCluster(c) = &req {
            if let Some(own) = cluster {
                if own != c.name {
                    return err(
                        ErrorKind::Forbidden,
                        format!(
                            "this connection speaks for cluster `{own}`, not `{}`",
                            c.name
                        ),
                    );
                }
            }
            if self.clusters.get(&c.name) != Some(c) {
                self.inbound.remove(&c.name);
            }
            self.clusters.insert(c.name.clone(), c.clone());
            return (Response::Ok, Vec::new());
        }
        let Some(cluster) = cluster else {
            return err(
                ErrorKind::Forbidden,
                "register the cluster (RegisterCluster) before any other request",
            );
        };
        let (req, user) = match req {
            Request::ForUser { user, request } => {
                if let Request::ForUser { .. } = *request {
                    return err(ErrorKind::Forbidden, "a request names its sender twice");
                }
                if let Err(why) = self.users.check(cluster, &user, &request) {
                    return err(
                        ErrorKind::Forbidden,
                        format!("`{}` refused: {why}", request.kind()),
                    );
                }
                (*request, Some(user))
            }
            other => (other, None),
        };
        match req {
            Request::ClusterInfo => match self.clusters.get(cluster) {
                Some(c) => (Response::Cluster(c.clone()), Vec::new()),
                None => err(ErrorKind::Internal, "cluster vanished"),
            },
            Request::Register(ap) => {
                if ap.cluster != cluster {
                    return err(
                        ErrorKind::Forbidden,
                        format!(
                            "the frontal of cluster `{cluster}` cannot register process {} in cluster `{}`",
                            ap.process, ap.cluster
                        ),
                    );
                }
                let name = ap.process.clone();
                if !self.processes.contains_key(&name) {
                    if let Some(why) = self.over_limits(&name.job, cluster) {
                        return err(ErrorKind::Forbidden, why);
                    }
                }
                if let Some(user) = &user {
                    let processes = &self.processes;
                    let registered = |job: &str| has_process(processes, job);
                    if let Err(why) = self.users.claim(&name.job, user, cluster, registered) {
                        return err(ErrorKind::Forbidden, why);
                    }
                }
                self.left.remove(&name);
                if self.job_clusters.len() < MAX_REPORTED
                    || self.job_clusters.contains_key(&name.job)
                {
                    self.job_clusters
                        .entry(name.job.clone())
                        .or_default()
                        .insert(cluster.to_string());
                }
                *self.in_cluster.entry(ap.cluster.clone()).or_default() += 1;
                let old = self.processes.insert(name.clone(), ap);
                if let Some(o) = &old {
                    uncount(&mut self.in_cluster, &o.cluster);
                }
                let effects = old
                    .map(|_| {
                        Effect::Invalidate(Invalidation {
                            job: name.job.clone(),
                            rank: Some(name.rank),
                        })
                    })
                    .into_iter()
                    .collect();
                (Response::Ok, effects)
            }
            Request::Unregister { process } => {
                match self.processes.get(&process) {
                    Some(ap) if ap.cluster != cluster => {
                        return err(
                            ErrorKind::Forbidden,
                            format!("process {process} belongs to cluster `{}`", ap.cluster),
                        )
                    }
                    Some(_) => {}
                    None => {
                        return err(
                            ErrorKind::UnknownProcess,
                            format!("process {process} is not registered"),
                        )
                    }
                }
                if let Some(o) = self.processes.remove(&process) {
                    uncount(&mut self.in_cluster, &o.cluster);
                }
                if self.left.len() < MAX_REPORTED {
                    self.left.insert(process.clone());
                }
                (
                    Response::Ok,
                    vec![Effect::Invalidate(Invalidation {
                        job: process.job,
                        rank: Some(process.rank),
                    })],
                )
            }
            Request::Lookup { from: _, target } => {
                let resp = self.lookup(cluster, &target);
                let result = match &resp {
                    Response::Plan(_) => "plan",
                    Response::Error(e) if e.kind == ErrorKind::UnknownProcess => "unknown",
                    Response::Error(e) if e.kind == ErrorKind::Left => "left",
                    _ => "no_route",
                };
                *self.lookups.entry(result).or_default() += 1;
                (resp, Vec::new())
            }
            Request::Report {
                from,
                technique,
                ok,
                target,
                rtt_us,
                upgrade,
            } => {
                // Only a report on a link between two processes of one job, the
                // first of the reporting cluster, counts; and each attempt once.
                let target_cluster = match self.ends(cluster, &from, &target) {
                    Ok(_) if from.job != target.job => {
                        return err(
                            ErrorKind::Forbidden,
                            format!("{from} and {target} are not of the same job"),
                        )
                    }
                    Ok((_, b)) => b.cluster.clone(),
                    Err(e) => return e,
                };
                let key = (from, target, technique);
                if self.reported.contains(&key) {
                    return (Response::Ok, Vec::new());
                }
                let c = self.links.entry(technique).or_default();
                if ok {
                    c.ok += 1;
                    c.upgraded += u64::from(upgrade);
                } else {
                    c.failed += 1;
                }
                if self.reported.len() < MAX_REPORTED {
                    let j = self.job_links.entry(key.0.job.clone()).or_default();
                    let c = j.entry(technique).or_default();
                    if ok {
                        c.ok += 1;
                        c.upgraded += u64::from(upgrade);
                    } else {
                        c.failed += 1;
                    }
                    self.observe(cluster, &key.1, technique, ok);
                    self.reported.insert(key);
                }
                let effects = match rtt_us {
                    Some(rtt_us) if ok && target_cluster != cluster => vec![Effect::Measured {
                        a: cluster.to_string(),
                        b: target_cluster,
                        rtt_us,
                    }],
                    _ => Vec::new(),
                };
                (Response::Ok, effects)
            }
            Request::JobEnd { job } => {
                if let Some(cs) = self.job_clusters.get(&job) {
                    if !cs.contains(cluster) {
                        let cs: Vec<&str> = cs.iter().map(String::as_str).collect();
                        return err(
                            ErrorKind::Forbidden,
                            format!(
                                "job {job} runs in cluster(s) `{}`: the frontal of cluster `{cluster}` may not end it",
                                cs.join("`, `")
                            ),
                        );
                    }
                }
                self.job_clusters.remove(&job);
                self.users.forget(&job);
                let in_cluster = &mut self.in_cluster;
                self.processes.retain(|p, a| {
                    let keep = p.job != job;
                    if !keep {
                        uncount(in_cluster, &a.cluster);
                    }
                    keep
                });
                self.reported.retain(|(p, _, _)| p.job != job);
                self.job_links.remove(&job);
                self.left.retain(|p| p.job != job);
                (
                    Response::Ok,
                    vec![Effect::Invalidate(Invalidation { job, rank: None })],
                )
            }
            Request::Rendezvous {
                from,
                target,
                technique,
            } => self.rendezvous(cluster, from, target, technique),
            Request::Syn {
                from,
                target,
                packet,
            } => self.syn(cluster, from, target, packet),
            other => err(
                ErrorKind::Forbidden,
                format!("`{}` is not a request a frontal may send", other.kind()),
            ),
        }
    }

    /// The users of jobs the broker did not place ([`crate::users`]): their changes
    /// to store, and those taken back from the database.
    pub fn users(&self) -> &crate::users::JobUsers {
        &self.users
    }

    /// What changed in the users of jobs the broker did not place since the last
    /// call ([`crate::users::JobUsers::take_changes`]).
    pub fn take_user_changes(&mut self) -> Vec<(String, Option<crate::users::Owner>)> {
        self.users.take_changes()
    }

    /// Takes back the users of jobs the broker did not place, as a broker before a
    /// restart stored them.
    pub fn restore_users(
        &mut self,
        owners: impl IntoIterator<Item = (String, crate::users::Owner)>,
    ) {
        self.users.restore(owners);
    }

    /// Forgets the users taken back from the database whose job has no process
    /// registered although its cluster is `back` ([`crate::users::JobUsers::prune_restored`]).
    pub fn prune_restored_users(&mut self, back: impl Fn(&str) -> bool) -> usize {
        let processes = &self.processes;
        self.users
            .prune_restored(back, |job| has_process(processes, job))
    }

    /// A job ended: forget its processes; frontals must forget what they cached.
    pub fn end_job(&mut self, job: &str) -> Invalidation {
        self.job_clusters.remove(job);
        self.users.forget(job);
        let in_cluster = &mut self.in_cluster;
        self.processes.retain(|p, a| {
            let keep = p.job != job;
            if !keep {
                uncount(in_cluster, &a.cluster);
            }
            keep
        });
        self.reported.retain(|(p, _, _)| p.job != job);
        self.job_links.remove(job);
        self.left.retain(|p| p.job != job);
        Invalidation {
            job: job.to_string(),
            rank: None,
        }
    }

    /// The two ends of a link being made, checked: `from` must be registered in the
    /// asking cluster, and `target` anywhere.
    fn ends(
        &self,
        cluster: &str,
        from: &ProcName,
        target: &ProcName,
    ) -> Result<(&AccessPoint, &AccessPoint), (Response, Vec<Effect>)> {
        let a = self.processes.get(from).ok_or_else(|| {
            err(
                ErrorKind::UnknownProcess,
                format!("process {from} is not registered"),
            )
        })?;
        if a.cluster != cluster {
            return Err(err(
                ErrorKind::Forbidden,
                format!("process {from} does not belong to cluster `{cluster}`"),
            ));
        }
        let b = self
            .processes
            .get(target)
            .ok_or_else(|| (self.not_registered(target), Vec::new()))?;
        Ok((a, b))
    }

    /// Whether the plan from `a`'s cluster to `b`'s offers `t`.
    fn offers(&self, a: &AccessPoint, b: &AccessPoint, t: Technique) -> bool {
        match (self.clusters.get(&a.cluster), self.clusters.get(&b.cluster)) {
            (Some(src), Some(dst)) => {
                plan::choose(&self.as_observed(src), &self.as_observed(dst)).contains(&t)
            }
            _ => false,
        }
    }

    fn rendezvous(
        &mut self,
        cluster: &str,
        from: ProcName,
        target: ProcName,
        technique: Technique,
    ) -> (Response, Vec<Effect>) {
        let (a, b) = match self.ends(cluster, &from, &target) {
            Ok(x) => x,
            Err(e) => return e,
        };
        if !self.offers(a, b, technique) {
            return err(
                ErrorKind::Forbidden,
                format!("the plan from {from} to {target} does not offer {technique}"),
            );
        }
        let (a_public, b_cluster) = (self.public_of(a), b.cluster.clone());
        match technique {
            Technique::Reversed | Technique::Punched => {
                let notice = if technique == Technique::Reversed {
                    Notice::ConnectBack {
                        from: from.clone(),
                        addr: a_public,
                    }
                } else {
                    Notice::Punch {
                        from: from.clone(),
                        addr: a_public,
                    }
                };
                (
                    Response::Ok,
                    vec![Effect::Notify {
                        cluster: b_cluster,
                        target,
                        notice,
                    }],
                )
            }
            Technique::Relayed => {
                let Some(proxy) = self.pick_proxy() else {
                    return err(ErrorKind::NoRoute, "no relay proxy is alive");
                };
                let token = (self.tokens)();
                (
                    Response::Relay {
                        proxy,
                        token: token.clone(),
                    },
                    vec![
                        Effect::ExpectRelay {
                            proxy,
                            token: token.clone(),
                        },
                        Effect::Notify {
                            cluster: b_cluster,
                            target,
                            notice: Notice::Relay { from, proxy, token },
                        },
                    ],
                )
            }
            other => err(ErrorKind::Forbidden, format!("{other} needs no rendezvous")),
        }
    }

    /// A captured SYN: forwarded only if it is the SYN of a link the plan between the
    /// two processes makes by traversal, from the initiator's access point to the
    /// target's.
    fn syn(
        &mut self,
        cluster: &str,
        from: ProcName,
        target: ProcName,
        packet: Vec<u8>,
    ) -> (Response, Vec<Effect>) {
        let (a, b) = match self.ends(cluster, &from, &target) {
            Ok(x) => x,
            Err(e) => return e,
        };
        if !self.offers(a, b, Technique::Traversed) {
            return err(
                ErrorKind::Forbidden,
                format!("no plan from {from} to {target} uses Traversing TCP: SYN refused"),
            );
        }
        let Some(syn) = qcg_proto::packet::parse_syn(&packet) else {
            return err(ErrorKind::Malformed, "not an IPv4 TCP SYN packet");
        };
        let (want_src, want_dst) = (self.public_of(a), self.public_of(b));
        // The initiator's NAT (if any) keeps ports; its address becomes the public one.
        if syn.src.port() != want_src.port() || syn.dst != want_dst {
            return err(
                ErrorKind::Forbidden,
                format!(
                    "SYN {} -> {} does not match the link {from} ({want_src}) -> {target} ({want_dst})",
                    syn.src, syn.dst
                ),
            );
        }
        let packet = if syn.src.ip() != want_src.ip() {
            qcg_proto::packet::rewrite_source(&packet, want_src.ip()).unwrap_or(packet)
        } else {
            packet
        };
        let b_cluster = b.cluster.clone();
        (
            Response::Ok,
            vec![Effect::Notify {
                cluster: b_cluster,
                target,
                notice: Notice::Inject { packet },
            }],
        )
    }

    /// The outcome of an active check of `cluster` made under `config` ([`crate::reach`]):
    /// the dial into it (`inbound`), the NAT its connections go through (`nat`), each
    /// if it ran. Ignored if the cluster announced another config since. Says so,
    /// once, when it comes to contradict the config.
    pub fn checked(
        &mut self,
        cluster: &str,
        config: &ClusterConfig,
        inbound: Option<Result<(), String>>,
        nat: Option<NatSeen>,
    ) {
        let Some(cfg) = self.clusters.get(cluster).filter(|c| *c == config) else {
            return;
        };
        let o = self.inbound.entry(cluster.to_string()).or_default();
        let before = o.mismatch(cfg).is_some();
        if inbound.is_some() {
            o.check = inbound;
        }
        if nat.is_some() {
            o.nat = nat;
        }
        if o.mismatch(cfg).is_some() && !before {
            tracing::warn!(
                cluster,
                announced = %cfg.policy,
                mismatch = o.mismatch(cfg).unwrap_or_default(),
                "the cluster's config does not match what it lets in: check its firewall and NAT settings; links into it are now planned as for a closed cluster"
            );
        }
    }

    /// Notes a dial from `from` into the cluster of `target`; says so, once, when the
    /// outcomes come to contradict what that cluster announced.
    fn observe(&mut self, from: &str, target: &ProcName, technique: Technique, ok: bool) {
        if !matches!(technique, Technique::Direct | Technique::PortRange) {
            return;
        }
        let Some(dst) = self.processes.get(target).map(|a| a.cluster.clone()) else {
            return;
        };
        let Some(cfg) = self.clusters.get(&dst) else {
            return;
        };
        if dst == from {
            return;
        }
        let o = self.inbound.entry(dst.clone()).or_default();
        let before = o.contradicts(cfg);
        if ok {
            o.ok += 1;
        } else {
            o.failed += 1;
        }
        if o.contradicts(cfg) && !before {
            tracing::warn!(
                cluster = %dst,
                announced = %cfg.policy,
                failed = o.failed,
                "the cluster is announced reachable from outside, but no connection into it was made: check its firewall and NAT settings; links into it are now planned as for a closed cluster"
            );
        }
    }

    /// The config links into `c` are planned with: the announced one, or a closed
    /// cluster when what was observed contradicts it.
    fn as_observed(&self, c: &ClusterConfig) -> ClusterConfig {
        let mut c = c.clone();
        let Some(o) = self.inbound.get(&c.name) else {
            return c;
        };
        if let Some(seen) = o.nat.as_ref().filter(|n| n.mismatch(&c).is_some()) {
            c.nat = seen.nat;
            if seen.nat.is_nat() {
                c.public_address = Some(seen.public);
            }
        }
        if o.contradicts(&c) {
            c.policy = Policy::Closed;
        }
        c
    }

    /// Where a process is reached from outside its cluster: its access point's public
    /// address, or the one its connections were seen leaving from when the cluster's
    /// announced NAT was found wrong.
    fn public_of(&self, ap: &AccessPoint) -> SocketAddr {
        let observed = self.clusters.get(&ap.cluster).map(|c| self.as_observed(c));
        match observed {
            Some(c) if c.nat.is_nat() && c.public_address.is_some() => {
                let announced = self
                    .clusters
                    .get(&ap.cluster)
                    .and_then(|a| a.public_address);
                if c.public_address != announced {
                    return SocketAddr::new(c.public_address.unwrap_or(ap.private_addr), ap.port);
                }
                ap.public()
            }
            _ => ap.public(),
        }
    }

    /// The answer for a process that is not registered: it left, or may yet come.
    fn not_registered(&self, target: &ProcName) -> Response {
        if self.left.contains(target) {
            Response::error(
                ErrorKind::Left,
                format!("process {target} has left its job (it unregistered)"),
            )
        } else {
            Response::error(
                ErrorKind::UnknownProcess,
                format!("process {target} is not registered"),
            )
        }
    }

    fn lookup(&self, cluster: &str, target: &ProcName) -> Response {
        let Some(ap) = self.processes.get(target) else {
            return self.not_registered(target);
        };
        let (Some(src), Some(dst)) = (self.clusters.get(cluster), self.clusters.get(&ap.cluster))
        else {
            return Response::error(
                ErrorKind::Internal,
                format!("cluster `{}` of process {target} is unknown", ap.cluster),
            );
        };
        let mut target = ap.clone();
        target.public_addr = Some(self.public_of(ap).ip());
        let mut plan = plan::plan(&self.as_observed(src), &self.as_observed(dst), &target);
        plan.encrypt = Some(self.encrypt.between(&src.name, &dst.name));
        let relay_only = plan
            .attempts
            .iter()
            .all(|a| a.technique == Technique::Relayed);
        if relay_only && !self.proxies.iter().any(|p| p.alive) {
            return Response::error(
                ErrorKind::NoRoute,
                format!(
                    "no technique links cluster `{}` to cluster `{}` (policy {}{}): only relaying would, and no relay proxy is alive",
                    src.name,
                    dst.name,
                    dst.policy,
                    if dst.nat.is_nat() { ", behind NAT" } else { "" }
                ),
            );
        }
        Response::Plan(plan)
    }

    /// A proxy offers relaying (again).
    pub fn add_proxy(&mut self, addr: SocketAddr) {
        match self.proxies.iter_mut().find(|p| p.addr == addr) {
            Some(p) => p.alive = true,
            None => self.proxies.push(ProxyEntry {
                addr,
                alive: true,
                assigned: 0,
            }),
        }
    }

    /// Records a proxy's health.
    pub fn set_proxy_alive(&mut self, addr: SocketAddr, alive: bool) {
        if let Some(p) = self.proxies.iter_mut().find(|p| p.addr == addr) {
            p.alive = alive;
        }
    }

    /// The next live proxy, round-robin.
    pub fn pick_proxy(&mut self) -> Option<SocketAddr> {
        let n = self.proxies.len();
        for i in 0..n {
            let k = (self.next_proxy + i) % n;
            if self.proxies[k].alive {
                self.next_proxy = (k + 1) % n;
                self.proxies[k].assigned += 1;
                return Some(self.proxies[k].addr);
            }
        }
        None
    }

    /// The proxies.
    pub fn proxies(&self) -> Vec<ProxyEntry> {
        self.proxies.clone()
    }

    /// Every known cluster.
    pub fn clusters(&self) -> Vec<ClusterConfig> {
        self.clusters.values().cloned().collect()
    }

    /// Every known cluster, summed up without addresses.
    pub fn cluster_summaries(&self) -> Vec<ClusterSummary> {
        self.clusters
            .values()
            .map(|c| ClusterSummary {
                name: c.name.clone(),
                policy: c.policy,
                nat: c.nat,
                processes: self
                    .processes
                    .values()
                    .filter(|p| p.cluster == c.name)
                    .count(),
                inbound_ok: self.inbound.get(&c.name).map_or(0, |o| o.ok),
                inbound_failed: self.inbound.get(&c.name).map_or(0, |o| o.failed),
                checked: self
                    .inbound
                    .get(&c.name)
                    .map(|o| {
                        let dial = o.check.clone().map(|r| match r {
                            Ok(()) => "a relay proxy connected to a node from outside".to_string(),
                            Err(e) => e,
                        });
                        let nat = o.nat.as_ref().map(|n| n.how.clone());
                        [dial, nat]
                            .into_iter()
                            .flatten()
                            .collect::<Vec<_>>()
                            .join("; ")
                    })
                    .filter(|t| !t.is_empty()),
                mismatch: self.inbound.get(&c.name).and_then(|o| o.mismatch(c)),
            })
            .collect()
    }

    /// Every registered process.
    pub fn processes(&self) -> Vec<AccessPoint> {
        self.processes.values().cloned().collect()
    }

    /// The cluster of a registered process.
    pub fn cluster_of(&self, p: &ProcName) -> Option<String> {
        self.processes.get(p).map(|a| a.cluster.clone())
    }

    /// Link outcomes per technique (every known technique listed).
    pub fn links(&self) -> BTreeMap<&'static str, LinkCounts> {
        Technique::ALL
            .iter()
            .map(|t| (t.name(), self.links.get(t).copied().unwrap_or_default()))
            .collect()
    }
    /// Link outcomes per technique of each job still registered (only the
    /// techniques it reported on).
    pub fn job_links(&self) -> BTreeMap<String, BTreeMap<&'static str, LinkCounts>> {
        self.job_links
            .iter()
            .map(|(job, l)| (job.clone(), l.iter().map(|(t, c)| (t.name(), *c)).collect()))
            .collect()
    }

    /// Prometheus text exposition of the counters.
    pub fn metrics(&self) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# HELP qcg_broker_requests_total Control-plane requests handled, by kind."
        );
        let _ = writeln!(out, "# TYPE qcg_broker_requests_total counter");
        for (k, v) in &self.requests {
            let _ = writeln!(out, "qcg_broker_requests_total{{kind=\"{k}\"}} {v}");
        }
        let _ = writeln!(
            out,
            "# HELP qcg_broker_error_answers_total Control-plane requests answered with an error, by error kind."
        );
        let _ = writeln!(out, "# TYPE qcg_broker_error_answers_total counter");
        for k in qcg_proto::metrics::ERROR_KINDS {
            let k = qcg_proto::metrics::error_kind_name(k);
            let v = self.errors.get(k).copied().unwrap_or(0);
            let _ = writeln!(out, "qcg_broker_error_answers_total{{kind=\"{k}\"}} {v}");
        }
        let _ = writeln!(
            out,
            "# HELP qcg_broker_lookups_total Lookups answered, by result."
        );
        let _ = writeln!(out, "# TYPE qcg_broker_lookups_total counter");
        for r in ["plan", "unknown", "left", "no_route"] {
            let v = self.lookups.get(r).copied().unwrap_or(0);
            let _ = writeln!(out, "qcg_broker_lookups_total{{result=\"{r}\"}} {v}");
        }
        let _ = writeln!(
            out,
            "# HELP qcg_broker_links_total Link attempts reported, by technique and outcome."
        );
        let _ = writeln!(out, "# TYPE qcg_broker_links_total counter");
        for (t, c) in self.links() {
            let _ = writeln!(
                out,
                "qcg_broker_links_total{{technique=\"{t}\",outcome=\"ok\"}} {}",
                c.ok
            );
            let _ = writeln!(
                out,
                "qcg_broker_links_total{{technique=\"{t}\",outcome=\"failed\"}} {}",
                c.failed
            );
        }
        let _ = writeln!(
            out,
            "# HELP qcg_broker_link_upgrades_total Relayed links moved off the proxy, by the technique that took them over."
        );
        let _ = writeln!(out, "# TYPE qcg_broker_link_upgrades_total counter");
        for (t, c) in self.links() {
            let _ = writeln!(
                out,
                "qcg_broker_link_upgrades_total{{technique=\"{t}\"}} {}",
                c.upgraded
            );
        }
        let _ = writeln!(out, "# HELP qcg_broker_clusters Clusters known.");
        let _ = writeln!(out, "# TYPE qcg_broker_clusters gauge");
        let _ = writeln!(out, "qcg_broker_clusters {}", self.clusters.len());
        let _ = writeln!(out, "# HELP qcg_broker_proxies_alive Relay proxies alive.");
        let _ = writeln!(out, "# TYPE qcg_broker_proxies_alive gauge");
        let _ = writeln!(
            out,
            "qcg_broker_proxies_alive {}",
            self.proxies.iter().filter(|p| p.alive).count()
        );
        let _ = writeln!(out, "# HELP qcg_broker_processes Processes registered.");
        let _ = writeln!(out, "# TYPE qcg_broker_processes gauge");
        let _ = writeln!(out, "qcg_broker_processes {}", self.processes.len());
        out
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use qcg_proto::Policy;

    /// A cluster of `policy`, no NAT, no public address.
    pub(crate) fn cluster(name: &str, policy: Policy) -> ClusterConfig {
        ClusterConfig {
            name: name.into(),
            policy,
            nat: qcg_proto::Nat::None,
            public_address: None,
        }
    }

    fn ap(job: &str, rank: u32, cluster: &str) -> AccessPoint {
        AccessPoint {
            process: ProcName::new(job, rank),
            cluster: cluster.into(),
            node: "n0".into(),
            private_addr: [127, 0, 0, 1].into(),
            public_addr: None,
            port: 4000 + rank as u16,
        }
    }

    fn setup() -> Registry {
        let mut r = Registry::default();
        for (c, p) in [("a", Policy::Open), ("b", Policy::Closed)] {
            assert_eq!(
                r.handle(None, Request::RegisterCluster(cluster(c, p))).0,
                Response::Ok
            );
        }
        r
    }

    fn by(uid: u32, node: &str, req: Request) -> Request {
        Request::ForUser {
            user: qcg_proto::LocalUser {
                uid,
                machine: "m".into(),
                node: node.into(),
            },
            request: Box::new(req),
        }
    }

    #[test]
    fn a_job_the_broker_did_not_place_is_its_first_users() {
        let mut r = setup();
        let look = |from| Request::Lookup {
            from: ProcName::new("j", from),
            target: ProcName::new("j", 0),
        };
        // Alice's ranks, from two clusters of her machine.
        let (resp, _) = r.handle(
            Some("a"),
            by(1000, "a1", Request::Register(ap("j", 0, "a"))),
        );
        assert_eq!(resp, Response::Ok);
        let (resp, _) = r.handle(
            Some("b"),
            by(1000, "b1", Request::Register(ap("j", 1, "b"))),
        );
        assert_eq!(resp, Response::Ok);
        assert!(matches!(
            r.handle(Some("b"), by(1000, "b1", look(1))).0,
            Response::Plan(_)
        ));
        // Another user, anywhere: refused, naming both, and nothing changes.
        let before = r.processes();
        for (c, req) in [
            ("a", Request::Register(ap("j", 1, "a"))),
            ("a", look(0)),
            (
                "a",
                Request::Unregister {
                    process: ProcName::new("j", 0),
                },
            ),
            ("a", Request::JobEnd { job: "j".into() }),
            ("b", Request::JobEnd { job: "j".into() }),
        ] {
            let kind_of = req.kind();
            let (resp, effects) = r.handle(Some(c), by(65534, "x", req));
            let Response::Error(e) = resp else {
                panic!("{kind_of}: {resp:?}")
            };
            assert_eq!(e.kind, ErrorKind::Forbidden);
            assert!(e.message.contains(&format!("`{kind_of}` refused")), "{e}");
            assert!(
                e.message
                    .contains("job j was started by uid 1000 on node a1 (cluster `a`)"),
                "{e}"
            );
            assert!(e.message.contains("uid 65534 on node x"), "{e}");
            assert!(effects.is_empty());
        }
        assert_eq!(r.processes(), before);
        // Nested senders are refused; a frontal's own request (no sender) passes.
        let nested = by(1000, "a1", by(1000, "a1", look(0)));
        assert_eq!(
            kind(&r.handle(Some("a"), nested).0),
            Some(ErrorKind::Forbidden)
        );
        assert!(matches!(r.handle(Some("a"), look(0)).0, Response::Plan(_)));
        // Her job end frees the id.
        let (resp, _) = r.handle(
            Some("a"),
            by(1000, "a1", Request::JobEnd { job: "j".into() }),
        );
        assert_eq!(resp, Response::Ok);
        let (resp, _) = r.handle(
            Some("a"),
            by(65534, "x", Request::Register(ap("j", 0, "a"))),
        );
        assert_eq!(resp, Response::Ok);
    }

    fn kind(resp: &Response) -> Option<ErrorKind> {
        match resp {
            Response::Error(e) => Some(e.kind),
            _ => None,
        }
    }

    #[test]
    fn long_names_and_registrations_past_the_limits_are_refused() {
        let mut r = setup();
        // The attack: 100 registrations with 1 MB job names.
        let big = "j".repeat(1 << 20);
        for rank in 0..100 {
            let (resp, _) = r.handle(Some("a"), Request::Register(ap(&big, rank, "a")));
            match resp {
                Response::Error(e) => {
                    assert_eq!(e.kind, ErrorKind::TooLarge);
                    assert!(e.message.contains("job id"), "{}", e.message);
                    assert!(e.message.contains("1048576 bytes"), "{}", e.message);
                }
                other => panic!("{other:?}"),
            }
        }
        assert!(r.processes().is_empty());
        let (resp, _) = r.handle(
            Some("a"),
            Request::Lookup {
                from: ProcName::new("j", 0),
                target: ProcName::new(&big, 0),
            },
        );
        assert_eq!(kind(&resp), Some(ErrorKind::TooLarge));
        let mut node = ap("j", 0, "a");
        node.node = "n".repeat(MAX_NAME + 1);
        assert_eq!(
            kind(&r.handle(Some("a"), Request::Register(node)).0),
            Some(ErrorKind::TooLarge)
        );
        // A name of the longest length is fine.
        let longest = "k".repeat(MAX_NAME);
        assert_eq!(
            r.handle(Some("a"), Request::Register(ap(&longest, 0, "a")))
                .0,
            Response::Ok
        );

        r.set_limits(3, 5);
        for rank in 0..3 {
            let resp = r.handle(Some("a"), Request::Register(ap("j", rank, "a"))).0;
            assert_eq!(resp, Response::Ok);
        }
        let (resp, _) = r.handle(Some("a"), Request::Register(ap("j", 3, "a")));
        match resp {
            Response::Error(e) => assert!(e.message.contains("per job"), "{}", e.message),
            other => panic!("{other:?}"),
        }
        // Registering the same process again is no new registration.
        assert_eq!(
            r.handle(Some("a"), Request::Register(ap("j", 2, "a"))).0,
            Response::Ok
        );
        // Cluster a holds 4; one more job's process fits, the next does not.
        assert_eq!(
            r.handle(Some("a"), Request::Register(ap("other", 0, "a")))
                .0,
            Response::Ok
        );
        match r
            .handle(Some("a"), Request::Register(ap("other", 1, "a")))
            .0
        {
            Response::Error(e) => assert!(e.message.contains("per cluster"), "{}", e.message),
            other => panic!("{other:?}"),
        }
        // Other clusters are not affected.
        assert_eq!(
            r.handle(Some("b"), Request::Register(ap("other", 1, "b")))
                .0,
            Response::Ok
        );
        assert_eq!(r.processes().len(), 6);
        // Places in a cluster are given back when a process leaves or its job ends.
        let gone = r.handle(
            Some("a"),
            Request::Unregister {
                process: ProcName::new("other", 0),
            },
        );
        assert_eq!(gone.0, Response::Ok);
        let reg = |r: &mut Registry, job: &str, rank| {
            r.handle(Some("a"), Request::Register(ap(job, rank, "a"))).0
        };
        assert_eq!(reg(&mut r, "other", 1), Response::Ok);
        r.end_job("j");
        for rank in 0..3 {
            assert_eq!(reg(&mut r, "k2", rank), Response::Ok, "{rank}");
        }
        match reg(&mut r, "z", 0) {
            Response::Error(e) => assert!(e.message.contains("already has 5"), "{}", e.message),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn requests_before_registering_the_cluster_are_refused() {
        let mut r = Registry::default();
        let (resp, _) = r.handle(None, Request::Register(ap("j", 0, "a")));
        assert_eq!(kind(&resp), Some(ErrorKind::Forbidden));
    }

    /// Issue 12, item 6: a cluster announced open whose firewall drops what other
    /// clusters dial is seen to be so from the links' reports, said in its summary,
    /// and planned as closed from then on; a config change starts over.
    #[test]
    fn dials_that_keep_failing_into_a_cluster_announced_open_make_it_planned_closed() {
        let mut r = Registry::default();
        for c in ["a", "b"] {
            r.handle(None, Request::RegisterCluster(cluster(c, Policy::Open)));
        }
        // Ranks 0 and 10.. in a, 1.. in b.
        r.handle(Some("a"), Request::Register(ap("j", 0, "a")));
        for rank in 10..30 {
            r.handle(Some("a"), Request::Register(ap("j", rank, "a")));
        }
        r.handle(Some("b"), Request::Register(ap("j", 1, "b")));
        let first = |r: &mut Registry| match r
            .handle(
                Some("a"),
                Request::Lookup {
                    from: ProcName::new("j", 0),
                    target: ProcName::new("j", 1),
                },
            )
            .0
        {
            Response::Plan(p) => p.attempts[0].technique,
            other => panic!("{other:?}"),
        };
        let report = |r: &mut Registry, from: u32, target: u32, ok: bool| {
            r.handle(
                Some("a"),
                Request::Report {
                    from: ProcName::new("j", from),
                    target: ProcName::new("j", target),
                    technique: Technique::Direct,
                    ok,
                    rtt_us: None,
                    upgrade: false,
                },
            )
            .0
        };
        assert_eq!(first(&mut r), Technique::Direct);
        // Dials inside a cluster say nothing of its firewall.
        for _ in 0..5 {
            report(&mut r, 0, 10, false);
        }
        // One attempt reported again and again counts once.
        for _ in 0..5 {
            report(&mut r, 0, 1, false);
        }
        assert_eq!(first(&mut r), Technique::Direct);
        for n in 1..MISMATCH_AFTER {
            report(&mut r, 10 + n as u32, 1, false);
            if n + 1 < MISMATCH_AFTER {
                assert_eq!(first(&mut r), Technique::Direct, "after {n}");
            }
        }
        let summary = |r: &Registry, c: &str| {
            r.cluster_summaries()
                .into_iter()
                .find(|s| s.name == c)
                .unwrap()
        };
        let b = summary(&r, "b");
        assert_eq!((b.inbound_ok, b.inbound_failed), (0, MISMATCH_AFTER));
        assert!(
            b.mismatch.as_deref().unwrap().contains("announced open"),
            "{b:?}"
        );
        assert_eq!(summary(&r, "a").mismatch, None);
        assert_ne!(first(&mut r), Technique::Direct);
        // The admin fixes the config: what was seen is forgotten.
        r.handle(None, Request::RegisterCluster(cluster("b", Policy::Closed)));
        assert_eq!(summary(&r, "b").inbound_failed, 0);
        r.handle(None, Request::RegisterCluster(cluster("b", Policy::Open)));
        // One dial that worked: the announcement holds, whatever failed besides.
        report(&mut r, 20, 1, true);
        for n in 21..30 {
            report(&mut r, n, 1, false);
        }
        assert_eq!(summary(&r, "b").mismatch, None);
        assert_eq!(first(&mut r), Technique::Direct);
    }

    /// Issue 22: each running job's links by technique, for the dashboard; a
    /// repeated report counts once, and the job's ending forgets them.
    #[test]
    fn links_are_counted_per_job_until_it_ends() {
        let mut r = Registry::default();
        for c in ["a", "b"] {
            r.handle(None, Request::RegisterCluster(cluster(c, Policy::Open)));
        }
        for (job, c) in [("j", "a"), ("j", "b"), ("k", "a"), ("k", "b")] {
            let rank = u32::from(c == "b");
            r.handle(Some(c), Request::Register(ap(job, rank, c)));
        }
        let report = |r: &mut Registry, job: &str, technique: Technique, ok: bool| {
            r.handle(
                Some("a"),
                Request::Report {
                    from: ProcName::new(job, 0),
                    target: ProcName::new(job, 1),
                    technique,
                    ok,
                    rtt_us: None,
                    upgrade: false,
                },
            )
        };
        report(&mut r, "j", Technique::Direct, false);
        report(&mut r, "j", Technique::Reversed, true);
        report(&mut r, "j", Technique::Reversed, true);
        report(&mut r, "k", Technique::Direct, true);
        let links = r.job_links();
        assert_eq!(links["j"]["direct"].failed, 1);
        assert_eq!(links["j"]["reversed"].ok, 1);
        assert!(!links["j"].contains_key("relayed"));
        assert_eq!(links["k"]["direct"].ok, 1);
        r.end_job("j");
        assert_eq!(r.job_links().keys().collect::<Vec<_>>(), ["k"]);
        r.handle(Some("a"), Request::JobEnd { job: "k".into() });
        assert!(r.job_links().is_empty());
    }

    /// Issue 12, item 6: the active check (a relay proxy dialling a node's check
    /// listener) decides at once, before any job; a dial that a process of another
    /// cluster made outweighs it; a check made under an old config is ignored.
    #[test]
    fn a_failed_reachability_check_makes_a_cluster_announced_open_planned_closed() {
        let mut r = Registry::default();
        for c in ["a", "b"] {
            r.handle(None, Request::RegisterCluster(cluster(c, Policy::Open)));
        }
        let summary = |r: &Registry| {
            r.cluster_summaries()
                .into_iter()
                .find(|s| s.name == "b")
                .unwrap()
        };
        let open = cluster("b", Policy::Open);
        r.checked(
            "b",
            &cluster("b", Policy::Closed),
            Some(Err("stale".into())),
            None,
        );
        assert_eq!(summary(&r).checked, None);
        r.checked("b", &open, Some(Ok(())), None);
        assert_eq!(summary(&r).mismatch, None);
        let why = "a relay proxy dialled node b1 at 10.0.0.1:4000: connect timed out after 3 s";
        r.checked("b", &open, Some(Err(why.into())), None);
        let s = summary(&r);
        assert_eq!(s.checked.as_deref(), Some(why));
        let m = s.mismatch.unwrap();
        assert!(m.contains("announced open") && m.contains(why), "{m}");
        r.handle(Some("a"), Request::Register(ap("j", 0, "a")));
        r.handle(Some("b"), Request::Register(ap("j", 1, "b")));
        let (resp, _) = r.handle(
            Some("a"),
            Request::Lookup {
                from: ProcName::new("j", 0),
                target: ProcName::new("j", 1),
            },
        );
        match resp {
            Response::Plan(p) => assert_ne!(p.attempts[0].technique, Technique::Direct),
            other => panic!("{other:?}"),
        }
        // A process of another cluster got in after all: the config holds.
        r.handle(
            Some("a"),
            Request::Report {
                from: ProcName::new("j", 0),
                target: ProcName::new("j", 1),
                technique: Technique::Direct,
                ok: true,
                rtt_us: None,
                upgrade: false,
            },
        );
        assert_eq!(summary(&r).mismatch, None);
    }

    /// Issue 12, item 6: the NAT a cluster's connections really go through is the
    /// one links are planned with: a random-port NAT announced port-preserving is
    /// offered no punch (it would fail), a port-preserving one announced random-port
    /// is offered one, at the address its connections were seen from.
    #[test]
    fn the_nat_seen_is_the_one_planned_with() {
        let mut r = Registry::default();
        let nat = |name: &str, n: Nat| ClusterConfig {
            name: name.into(),
            policy: Policy::Closed,
            nat: n,
            public_address: Some([192, 0, 2, 1].into()),
        };
        let a = cluster("a", Policy::Closed);
        let b = nat("b", Nat::PortPreserving);
        r.handle(None, Request::RegisterCluster(a));
        r.handle(None, Request::RegisterCluster(b.clone()));
        r.add_proxy("192.0.2.50:9000".parse().unwrap());
        r.handle(Some("a"), Request::Register(ap("j", 0, "a")));
        r.handle(Some("b"), Request::Register(ap("j", 1, "b")));
        let plan = |r: &mut Registry| match r
            .handle(
                Some("a"),
                Request::Lookup {
                    from: ProcName::new("j", 0),
                    target: ProcName::new("j", 1),
                },
            )
            .0
        {
            Response::Plan(p) => p,
            other => panic!("{other:?}"),
        };
        let techniques =
            |p: &qcg_proto::Plan| p.attempts.iter().map(|a| a.technique).collect::<Vec<_>>();
        assert_eq!(
            techniques(&plan(&mut r)),
            vec![Technique::Punched, Technique::Relayed]
        );
        let seen = NatSeen {
            nat: Nat::RandomPort,
            public: [192, 0, 2, 7].into(),
            how: "a connection from node b1 at 10.0.0.2:40000 reached a relay proxy from 192.0.2.7:61000".into(),
        };
        r.checked("b", &b, None, Some(seen));
        assert_eq!(techniques(&plan(&mut r)), vec![Technique::Relayed]);
        let s = r
            .cluster_summaries()
            .into_iter()
            .find(|s| s.name == "b")
            .unwrap();
        let m = s.mismatch.unwrap();
        assert!(
            m.contains("announced NAT port-preserving but it behaves as random-port"),
            "{m}"
        );
        // Rendezvous follow the same plan: a punch is refused now.
        let (resp, _) = r.handle(
            Some("a"),
            Request::Rendezvous {
                from: ProcName::new("j", 0),
                target: ProcName::new("j", 1),
                technique: Technique::Punched,
            },
        );
        assert!(matches!(resp, Response::Error(_)), "{resp:?}");
        // The other way: port-preserving, announced random-port, seen from another
        // address than announced: punched, toward the address seen.
        let b2 = nat("b", Nat::RandomPort);
        r.handle(None, Request::RegisterCluster(b2.clone()));
        assert_eq!(techniques(&plan(&mut r)), vec![Technique::Relayed]);
        let seen = NatSeen {
            nat: Nat::PortPreserving,
            public: [192, 0, 2, 9].into(),
            how: "seen".into(),
        };
        r.checked("b", &b2, None, Some(seen));
        let p = plan(&mut r);
        assert_eq!(techniques(&p), vec![Technique::Punched, Technique::Relayed]);
        assert_eq!(
            p.attempts[0].addr.ip(),
            std::net::IpAddr::from([192, 0, 2, 9])
        );
        // Seen untranslated (a proxy inside the cluster, or behind its gateway): that
        // proves nothing against the NAT announced.
        let inside = NatSeen {
            nat: Nat::None,
            public: [10, 0, 0, 2].into(),
            how: "inside".into(),
        };
        r.checked("b", &b2, None, Some(inside));
        let s = r
            .cluster_summaries()
            .into_iter()
            .find(|s| s.name == "b")
            .unwrap();
        assert_eq!(s.mismatch, None);
        assert_eq!(techniques(&plan(&mut r)), vec![Technique::Relayed]);
    }

    /// A frontal may only report links its own processes tried: a report in the
    /// name of another cluster's process, or about processes of two jobs, is
    /// refused and counts for nothing (a hostile frontal could otherwise make any
    /// cluster look closed).
    #[test]
    fn reports_count_only_for_the_reporting_clusters_own_processes() {
        let mut r = Registry::default();
        for c in ["a", "b", "c"] {
            r.handle(None, Request::RegisterCluster(cluster(c, Policy::Open)));
        }
        r.handle(Some("a"), Request::Register(ap("j", 0, "a")));
        r.handle(Some("b"), Request::Register(ap("j", 1, "b")));
        r.handle(Some("c"), Request::Register(ap("k", 0, "c")));
        for n in 0..10 {
            let (from, target) = if n % 2 == 0 {
                (ProcName::new("j", 0), ProcName::new("j", 1))
            } else {
                (ProcName::new("k", 0), ProcName::new("j", 1))
            };
            let (resp, effects) = r.handle(
                Some("c"),
                Request::Report {
                    from,
                    target,
                    technique: Technique::Direct,
                    ok: false,
                    rtt_us: None,
                    upgrade: false,
                },
            );
            match resp {
                Response::Error(e) => assert_eq!(e.kind, ErrorKind::Forbidden, "{}", e.message),
                other => panic!("{other:?}"),
            }
            assert!(effects.is_empty());
        }
        let b = r
            .cluster_summaries()
            .into_iter()
            .find(|s| s.name == "b")
            .unwrap();
        assert_eq!((b.inbound_failed, b.mismatch), (0, None));
        // A made link with its round trip measures the two clusters' link.
        let (_, effects) = r.handle(
            Some("a"),
            Request::Report {
                from: ProcName::new("j", 0),
                target: ProcName::new("j", 1),
                technique: Technique::Punched,
                ok: true,
                rtt_us: Some(21_000),
                upgrade: false,
            },
        );
        assert_eq!(
            effects,
            vec![Effect::Measured {
                a: "a".into(),
                b: "b".into(),
                rtt_us: 21_000
            }]
        );
    }

    /// Links made, attempts failed and upgrades from the relay, per technique, in
    /// `/v1/links` and `/metrics`.
    #[test]
    fn upgrades_from_the_relay_are_counted_per_technique() {
        let mut r = Registry::default();
        for c in ["a", "b"] {
            r.handle(None, Request::RegisterCluster(cluster(c, Policy::Closed)));
        }
        r.handle(Some("a"), Request::Register(ap("j", 0, "a")));
        r.handle(Some("b"), Request::Register(ap("j", 1, "b")));
        let report = |technique, ok, upgrade| Request::Report {
            from: ProcName::new("j", 0),
            target: ProcName::new("j", 1),
            technique,
            ok,
            rtt_us: None,
            upgrade,
        };
        // The relay first, then a punch takes the link over; a traversal failed.
        for req in [
            report(Technique::Relayed, true, false),
            report(Technique::Punched, true, true),
            report(Technique::Traversed, false, false),
        ] {
            assert_eq!(r.handle(Some("a"), req).0, Response::Ok);
        }
        let links = r.links();
        let counts = |t: Technique| {
            let c = links[t.name()];
            (c.ok, c.failed, c.upgraded)
        };
        assert_eq!(counts(Technique::Relayed), (1, 0, 0));
        assert_eq!(counts(Technique::Punched), (1, 0, 1));
        assert_eq!(counts(Technique::Traversed), (0, 1, 0));
        let m = r.metrics();
        assert!(
            m.contains("qcg_broker_link_upgrades_total{technique=\"punched\"} 1"),
            "{m}"
        );
        assert!(
            m.contains("qcg_broker_links_total{technique=\"traversed\",outcome=\"failed\"} 1"),
            "{m}"
        );
    }

    /// Error answers are counted by kind in `/metrics`, every kind listed.
    #[test]
    fn error_answers_are_counted_by_kind() {
        let mut r = setup();
        let lookup = Request::Lookup {
            from: ProcName::new("j", 0),
            target: ProcName::new("j", 9),
        };
        for _ in 0..2 {
            assert_eq!(
                kind(&r.handle(Some("a"), lookup.clone()).0),
                Some(ErrorKind::UnknownProcess)
            );
        }
        let m = r.metrics();
        assert!(
            m.contains("\nqcg_broker_error_answers_total{kind=\"unknown_process\"} 2\n"),
            "{m}"
        );
        assert!(
            m.contains("\nqcg_broker_error_answers_total{kind=\"forbidden\"} 0\n"),
            "{m}"
        );
    }

    #[test]
    fn lookup_of_unknown_process_is_named() {
        let mut r = setup();
        let (resp, _) = r.handle(
            Some("a"),
            Request::Lookup {
                from: ProcName::new("j", 0),
                target: ProcName::new("j", 9),
            },
        );
        match resp {
            Response::Error(e) => {
                assert_eq!(e.kind, ErrorKind::UnknownProcess);
                assert!(e.message.contains("j/9"), "{}", e.message);
            }
            other => panic!("{other:?}"),
        }
    }

    /// A process that unregistered is not waited for: a lookup says it left, until
    /// it registers again or its job ends.
    #[test]
    fn a_lookup_of_a_process_that_left_says_so() {
        let mut r = setup();
        r.handle(Some("a"), Request::Register(ap("j", 0, "a")));
        r.handle(Some("b"), Request::Register(ap("j", 1, "b")));
        let look = |r: &mut Registry| {
            r.handle(
                Some("a"),
                Request::Lookup {
                    from: ProcName::new("j", 0),
                    target: ProcName::new("j", 1),
                },
            )
            .0
        };
        assert!(matches!(look(&mut r), Response::Plan(_)));
        let (resp, _) = r.handle(
            Some("b"),
            Request::Unregister {
                process: ProcName::new("j", 1),
            },
        );
        assert_eq!(resp, Response::Ok);
        match look(&mut r) {
            Response::Error(e) => {
                assert_eq!(e.kind, ErrorKind::Left);
                assert!(e.message.contains("j/1 has left"), "{}", e.message);
            }
            other => panic!("{other:?}"),
        }
        r.handle(Some("b"), Request::Register(ap("j", 1, "b")));
        assert!(matches!(look(&mut r), Response::Plan(_)));
        r.handle(
            Some("b"),
            Request::Unregister {
                process: ProcName::new("j", 1),
            },
        );
        r.end_job("j");
        assert_eq!(kind(&look(&mut r)), Some(ErrorKind::UnknownProcess));
        let m = r.metrics();
        assert!(
            m.contains("qcg_broker_lookups_total{result=\"left\"} 1"),
            "{m}"
        );
    }

    #[test]
    fn only_a_cluster_the_job_runs_in_ends_it() {
        let mut r = setup();
        r.handle(Some("a"), Request::Register(ap("j", 0, "a")));
        let (resp, inv) = r.handle(Some("b"), Request::JobEnd { job: "j".into() });
        assert_eq!(kind(&resp), Some(ErrorKind::Forbidden), "{resp:?}");
        let Response::Error(e) = &resp else { panic!() };
        assert!(e.message.contains("job j runs in cluster(s) `a`"), "{e}");
        assert!(inv.is_empty());
        assert_eq!(r.processes().len(), 1);
        // Once ended (by its own cluster), nothing is known of it: anyone's end is a
        // no-op.
        assert_eq!(
            r.handle(Some("a"), Request::JobEnd { job: "j".into() }).0,
            Response::Ok
        );
        assert!(r.processes().is_empty());
        assert_eq!(
            r.handle(Some("b"), Request::JobEnd { job: "j".into() }).0,
            Response::Ok
        );
    }

    #[test]
    fn a_frontal_registers_only_its_own_processes() {
        let mut r = setup();
        let (resp, _) = r.handle(Some("a"), Request::Register(ap("j", 0, "b")));
        assert_eq!(kind(&resp), Some(ErrorKind::Forbidden));
        assert!(r.processes().is_empty());
    }

    #[test]
    fn lookups_follow_the_plan_and_endings_invalidate() {
        let mut r = setup();
        r.handle(Some("a"), Request::Register(ap("j", 0, "a")));
        r.handle(Some("b"), Request::Register(ap("j", 1, "b")));
        let look = |r: &mut Registry, from: &str, rank| {
            r.handle(
                Some(from),
                Request::Lookup {
                    from: ProcName::new("j", 9),
                    target: ProcName::new("j", rank),
                },
            )
            .0
        };
        assert!(matches!(look(&mut r, "b", 0), Response::Plan(_)));
        // a (open) to b (closed): b connects back, or punch, or relay.
        match look(&mut r, "a", 1) {
            Response::Plan(p) => assert_eq!(
                p.attempts.iter().map(|a| a.technique).collect::<Vec<_>>(),
                [Technique::Reversed, Technique::Punched, Technique::Relayed]
            ),
            other => panic!("{other:?}"),
        }
        assert!(matches!(look(&mut r, "b", 1), Response::Plan(_)));
        // Re-registering a name invalidates cached answers about it.
        let (_, inv) = r.handle(Some("a"), Request::Register(ap("j", 0, "a")));
        assert_eq!(
            inv,
            [Effect::Invalidate(Invalidation {
                job: "j".into(),
                rank: Some(0)
            })]
        );
        let (_, inv) = r.handle(Some("a"), Request::JobEnd { job: "j".into() });
        assert_eq!(
            inv,
            [Effect::Invalidate(Invalidation {
                job: "j".into(),
                rank: None
            })]
        );
        assert!(r.processes().is_empty());
        let m = r.metrics();
        assert!(
            m.contains("qcg_broker_lookups_total{result=\"plan\"} 3"),
            "{m}"
        );
        assert!(
            m.contains("qcg_broker_lookups_total{result=\"plan\"} 3"),
            "{m}"
        );
    }

    #[test]
    fn relays_go_round_robin_over_live_proxies_with_fresh_tokens() {
        let mut r = setup();
        r.handle(Some("a"), Request::Register(ap("j", 0, "a")));
        r.handle(Some("b"), Request::Register(ap("j", 1, "b")));
        let rv = |r: &mut Registry, t| {
            r.handle(
                Some("a"),
                Request::Rendezvous {
                    from: ProcName::new("j", 0),
                    target: ProcName::new("j", 1),
                    technique: t,
                },
            )
        };
        assert_eq!(
            kind(&rv(&mut r, Technique::Relayed).0),
            Some(ErrorKind::NoRoute)
        );
        let (p1, p2): (SocketAddr, SocketAddr) = (
            "10.9.0.1:9000".parse().unwrap(),
            "10.9.0.2:9000".parse().unwrap(),
        );
        r.add_proxy(p1);
        r.add_proxy(p2);
        let mut seen = Vec::new();
        for _ in 0..3 {
            match rv(&mut r, Technique::Relayed) {
                (Response::Relay { proxy, token }, fx) => {
                    assert!(fx.contains(&Effect::ExpectRelay {
                        proxy,
                        token: token.clone()
                    }));
                    assert!(fx.iter().any(|e| matches!(e, Effect::Notify { cluster, notice: Notice::Relay { token: t, .. }, .. } if cluster == "b" && *t == token)));
                    seen.push((proxy, token));
                }
                other => panic!("{other:?}"),
            }
        }
        assert_eq!([seen[0].0, seen[1].0, seen[2].0], [p1, p2, p1]);
        assert!(seen[0].1 != seen[1].1 && seen[1].1 != seen[2].1);
        r.set_proxy_alive(p2, false);
        for _ in 0..2 {
            assert!(
                matches!(rv(&mut r, Technique::Relayed).0, Response::Relay { proxy, .. } if proxy == p1)
            );
        }
        // The target connects back: a notice to b's frontal with a's address.
        let (resp, fx) = rv(&mut r, Technique::Reversed);
        assert_eq!(resp, Response::Ok);
        assert!(
            matches!(&fx[..], [Effect::Notify { notice: Notice::ConnectBack { addr, .. }, .. }] if addr.port() == 4000)
        );
        // Traversal is not in this plan (b is closed, not syn-block).
        assert_eq!(
            kind(&rv(&mut r, Technique::Traversed).0),
            Some(ErrorKind::Forbidden)
        );
    }

    #[test]
    fn syns_nobody_asked_for_are_refused() {
        let mut r = Registry::default();
        r.handle(None, Request::RegisterCluster(cluster("a", Policy::Closed)));
        r.handle(
            None,
            Request::RegisterCluster(cluster("s", Policy::SynBlock)),
        );
        r.handle(None, Request::RegisterCluster(cluster("o", Policy::Open)));
        r.handle(Some("a"), Request::Register(ap("j", 0, "a")));
        r.handle(Some("s"), Request::Register(ap("j", 1, "s")));
        r.handle(Some("o"), Request::Register(ap("j", 2, "o")));
        let syn = |sport: u16, dport: u16| {
            let mut p = vec![0u8; 40];
            p[0] = 0x45;
            p[2..4].copy_from_slice(&40u16.to_be_bytes());
            p[9] = 6;
            p[12..16].copy_from_slice(&[127, 0, 0, 1]);
            p[16..20].copy_from_slice(&[127, 0, 0, 1]);
            p[20..22].copy_from_slice(&sport.to_be_bytes());
            p[22..24].copy_from_slice(&dport.to_be_bytes());
            p[32] = 5 << 4;
            p[33] = 0x02;
            p
        };
        let send = |r: &mut Registry, target: u32, packet: Vec<u8>| {
            r.handle(
                Some("a"),
                Request::Syn {
                    from: ProcName::new("j", 0),
                    target: ProcName::new("j", target),
                    packet,
                },
            )
        };
        // The right SYN to a syn-block cluster is forwarded for injection.
        let (resp, fx) = send(&mut r, 1, syn(4000, 4001));
        assert_eq!(resp, Response::Ok);
        assert!(matches!(
            &fx[..],
            [Effect::Notify {
                notice: Notice::Inject { .. },
                ..
            }]
        ));
        // To an open cluster nobody traverses; wrong ports; not a SYN.
        assert_eq!(
            kind(&send(&mut r, 2, syn(4000, 4002)).0),
            Some(ErrorKind::Forbidden)
        );
        assert_eq!(
            kind(&send(&mut r, 1, syn(4000, 9999)).0),
            Some(ErrorKind::Forbidden)
        );
        assert_eq!(
            kind(&send(&mut r, 1, syn(5555, 4001)).0),
            Some(ErrorKind::Forbidden)
        );
        assert_eq!(
            kind(&send(&mut r, 1, vec![1, 2, 3]).0),
            Some(ErrorKind::Malformed)
        );
        // From another cluster's frontal: refused.
        let (resp, _) = r.handle(
            Some("s"),
            Request::Syn {
                from: ProcName::new("j", 0),
                target: ProcName::new("j", 1),
                packet: syn(4000, 4001),
            },
        );
        assert_eq!(kind(&resp), Some(ErrorKind::Forbidden));
    }
}
