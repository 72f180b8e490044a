//! The broker's core: every decision, over plain data, with no socket, task or clock.
//!
//! [`Core`] holds the registry of clusters and processes ([`Registry`]), the job table
//! and the topology book ([`Book`]) and the nodes seen away. The shell
//! ([`crate::grid`], [`crate`]'s serving loops) feeds it [`Input`]s with the time they
//! happened at, and carries out what it answers:
//!
//! - an [`Answer`]: the response to send, or a request to push to a proxy or a
//!   frontal first ([`Answer::Push`]), whose outcome goes back in as
//!   [`Input::Pushed`] until a response comes out. A relay whose proxy does not take
//!   the token marks that proxy dead and is planned again on the next live one
//!   (at most [`RELAY_TRIES`] times): the fail-over lives here, not in the shell;
//! - [`Output`]s: what to send without waiting (launches, kills, cache
//!   invalidations, probes, reachability checks).
//!
//! The job API ([`crate::api`]) asks through it too: a submission, a cancellation and
//! every read of the jobs in memory are inputs ([`Input::Submit`] to
//! [`Input::Processes`]), each answered with what the client is shown, who may see a
//! job decided here; only the jobs that live in the database alone are read by the
//! shell.
//!
//! Tests drive it in virtual time (`now` is an input): see the bottom of this file.

use crate::api::{JobView, OutputPage};
use crate::caller::Caller;
use crate::grid::Book;
use crate::jobs::{Action, JobError, Submission};
use crate::registry::{Effect, Invalidation, NatSeen, Registry};
use qcg_jobprofile::topology::ResourceTopology;
use qcg_proto::{ClusterConfig, ErrorKind, LaunchSpec, LinkQuality, Request, Response};
use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// How often a request is planned again when the relay proxy chosen for it does not
/// take the token.
pub const RELAY_TRIES: u32 = 8;

/// Default [`Core::lost_node_grace`].
pub const DEFAULT_LOST_NODE_GRACE: Duration = Duration::from_secs(30);

/// Something that happened, for the core to decide on.
#[derive(Debug)]
pub enum Input {
    /// A request from the frontal of `cluster` (`None` until it registered one).
    Frontal {
        /// The cluster the connection speaks for.
        cluster: Option<String>,
        /// The request.
        req: Request,
    },
    /// The outcome of an [`Answer::Push`]: `then` as it came with it.
    Pushed {
        /// Where the request stood.
        then: Box<Pending>,
        /// The peer's answer, or why there is none.
        outcome: Result<Response, String>,
    },
    /// The frontal of `cluster` registered it, and its connection is ready for
    /// pushes.
    FrontalUp {
        /// The cluster.
        cluster: String,
    },
    /// The frontal of `cluster` (its live connection) went away.
    FrontalGone {
        /// The cluster.
        cluster: String,
    },
    /// A relay proxy registered, offering relaying at `addr`.
    ProxyUp {
        /// Where processes reach it.
        addr: SocketAddr,
    },
    /// The relay proxy at `addr` went away.
    ProxyGone {
        /// Where processes reached it.
        addr: SocketAddr,
    },
    /// The outcome of an [`Output::Launch`].
    Launched {
        /// The job.
        job: String,
        /// The rank.
        rank: u32,
        /// Whether the frontal took it.
        result: Result<(), String>,
    },
    /// The outcome of an [`Output::Probe`]; `fallback` is the link estimated from
    /// both frontals' round trips to the broker.
    Probed {
        /// The measuring cluster.
        a: String,
        /// The measured one.
        b: String,
        /// The measurement, or why there is none.
        outcome: Result<LinkQuality, String>,
        /// What a failed probe leaves in its place.
        fallback: LinkQuality,
    },
    /// The outcome of an [`Output::Check`].
    Checked {
        /// The cluster's config the check was made under.
        config: ClusterConfig,
        /// The dial from outside, if it ran.
        inbound: Option<Result<(), String>>,
        /// The NAT seen, if that check ran.
        nat: Option<NatSeen>,
    },
    /// A turn of the clock (every half second): probes and checks due, nodes away
    /// too long, jobs timed out.
    Tick,
    /// A client of the job API submits job `id` ([`Answer::Done`]).
    Submit {
        /// The new job's id.
        id: String,
        /// What was submitted, and by whom.
        submission: Box<Submission>,
    },
    /// `caller` cancels job `id` ([`Answer::Done`]; a job it may not see is
    /// unknown to it).
    Cancel {
        /// The job.
        id: String,
        /// Who asks.
        caller: Caller,
    },
    /// `caller` reads job `id` ([`Answer::Job`]).
    Status {
        /// The job.
        id: String,
        /// Who asks.
        caller: Caller,
    },
    /// `caller` lists the jobs in memory it may see ([`Answer::Jobs`]): all, or at
    /// most `limit` by id from the first id past `after`.
    List {
        /// Who asks.
        caller: Caller,
        /// The last id of the page before.
        after: Option<String>,
        /// The page's size; `None`: every job.
        limit: Option<usize>,
    },
    /// `caller` reads job `id`'s output from line `from` ([`Answer::Output`]).
    Output {
        /// The job.
        id: String,
        /// Who asks.
        caller: Caller,
        /// The first line wanted (counted over every line the job printed).
        from: u64,
    },
    /// `caller` reads the registered processes of the jobs it may see (every one
    /// for an admin) ([`Answer::Processes`]).
    Processes {
        /// Who asks.
        caller: Caller,
    },
}

/// Where a pushed request goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Peer {
    /// The relay proxy offering relaying at this address.
    Proxy(SocketAddr),
    /// The frontal of this cluster.
    Frontal(String),
}

/// What the shell answers.
#[derive(Debug)]
pub enum Answer {
    /// Send this.
    Reply(Response),
    /// Push `req` to `to`, then hand its outcome back with `then`
    /// ([`Input::Pushed`]).
    Push {
        /// Where.
        to: Peer,
        /// What.
        req: Request,
        /// Where the request stands.
        then: Box<Pending>,
    },
    /// The input wants no answer.
    Nothing,
    /// A submission or a cancellation was carried out, or why not.
    Done(Result<(), JobError>),
    /// One job as the job API shows it.
    Job(Result<Box<JobView>, JobError>),
    /// Jobs in memory as the job API shows them, by id, and the ids of every job in
    /// memory the caller may see past the page's `after` (those the shell must not
    /// read again from the database).
    Jobs {
        /// The page.
        views: Vec<JobView>,
        /// Ids in memory past `after`.
        in_memory: std::collections::HashSet<String>,
    },
    /// A page of a job's output.
    Output(Result<Box<OutputPage>, JobError>),
    /// Registered processes.
    Processes(Vec<qcg_proto::AccessPoint>),
}

/// A frontal's request waiting on a push: what it asked, what the registry answered
/// and the effects still to carry out. Opaque to the shell.
#[derive(Debug)]
pub struct Pending {
    cluster: Option<String>,
    req: Request,
    tries: u32,
    resp: Response,
    /// The effect whose push is awaited, then the ones after it.
    waiting: Effect,
    rest: VecDeque<Effect>,
}

/// What the shell carries out without waiting.
#[derive(Clone, Debug, PartialEq)]
pub enum Output {
    /// Ask the frontal of `cluster` to start a process; its outcome comes back as
    /// [`Input::Launched`].
    Launch {
        /// The cluster.
        cluster: String,
        /// The process.
        spec: LaunchSpec,
    },
    /// Ask the frontals of `clusters` to kill every process of `job`.
    Kill {
        /// The job.
        job: String,
        /// Where it has processes.
        clusters: Vec<String>,
    },
    /// Tell every frontal to forget what it cached of a job or a rank.
    Invalidate(Invalidation),
    /// Have the frontal of `a` measure its link to the frontal of `b`; the outcome
    /// comes back as [`Input::Probed`].
    Probe {
        /// The measuring cluster.
        a: String,
        /// The measured one.
        b: String,
    },
    /// Check what `config`'s cluster lets in ([`crate::reach`]), with the helper of
    /// `node` and the relay proxy at `proxy`; the outcome comes back as
    /// [`Input::Checked`].
    Check {
        /// The cluster's config.
        config: ClusterConfig,
        /// A node of it.
        node: String,
        /// A live relay proxy.
        proxy: SocketAddr,
    },
    /// Write what changed in the jobs to the database before carrying out the rest
    /// (a launch is saved before it is sent).
    Save,
    /// Jobs changed (state or output): wake those waiting for it.
    Changed,
}

/// Everything the broker decides on.
#[derive(Debug)]
pub struct Core {
    /// Clusters, processes and relay proxies.
    pub registry: Registry,
    /// Jobs, topology and reachability checks.
    pub book: Book,
    /// How often each pair of clusters is measured.
    pub probe_interval: Duration,
    /// How long the helper of a node running a job may stay away before the job
    /// fails.
    pub lost_node_grace: Duration,
    /// Since when each node (cluster, node) where a job runs has been away.
    away: HashMap<(String, String), Instant>,
    /// Clusters whose frontal is connected.
    connected: BTreeSet<String>,
    /// Since when each connected frontal has been (for the users of `qcg run` jobs
    /// taken back from the database, [`crate::users`]).
    up_since: HashMap<String, Instant>,
}

impl Default for Core {
    fn default() -> Self {
        Core::new(Registry::default(), crate::DEFAULT_PROBE_INTERVAL)
    }
}

fn error(kind: ErrorKind, msg: impl Into<String>) -> Answer {
    Answer::Reply(Response::error(kind, msg))
}

impl Core {
    /// A core over `registry`, nothing else known yet.
    pub fn new(registry: Registry, probe_interval: Duration) -> Core {
        Core {
            registry,
            book: Book::default(),
            probe_interval,
            lost_node_grace: DEFAULT_LOST_NODE_GRACE,
            away: HashMap::new(),
            connected: BTreeSet::new(),
            up_since: HashMap::new(),
        }
    }

    /// What the database must change since the last call: the jobs' changes and
    /// those of the users of `qcg run` jobs ([`crate::users`]).
    pub fn take_changes(&mut self) -> crate::jobs::Changes {
        let mut c = self.book.jobs.take_changes();
        c.run_owners = self.registry.take_user_changes();
        c
    }

    /// Decides on `input`, which happened at `now`.
    pub fn handle(&mut self, input: Input, now: Instant) -> (Answer, Vec<Output>) {
        let mut out = Vec::new();
        let answer = match input {
            Input::Frontal { cluster, req } => self.frontal(cluster, req, now, &mut out),
            Input::Pushed { then, outcome } => self.pushed(then, outcome, &mut out),
            Input::FrontalUp { cluster } => {
                self.up_since.entry(cluster.clone()).or_insert(now);
                self.connected.insert(cluster);
                Answer::Nothing
            }
            Input::FrontalGone { cluster } => {
                self.connected.remove(&cluster);
                self.up_since.remove(&cluster);
                // Its nodes cannot be reached to start processes any more.
                let none = LinkQuality {
                    latency_ms: 0.0,
                    bandwidth_mbps: 0.0,
                };
                self.book.topo.set_nodes(&cluster, Vec::new(), none);
                let actions = self.book.jobs.cluster_lost(&cluster, now);
                self.settle(actions, &mut out);
                out.push(Output::Changed);
                Answer::Nothing
            }
            Input::ProxyUp { addr } => {
                self.registry.add_proxy(addr);
                Answer::Nothing
            }
            Input::ProxyGone { addr } => {
                self.registry.set_proxy_alive(addr, false);
                Answer::Nothing
            }
            Input::Launched { job, rank, result } => {
                let more = self.book.jobs.launched(&job, rank, result, now);
                self.settle(more, &mut out);
                out.push(Output::Changed);
                Answer::Nothing
            }
            Input::Probed {
                a,
                b,
                outcome,
                fallback,
            } => {
                let failure = outcome.as_ref().err().cloned();
                if let Ok(q) = &outcome {
                    tracing::debug!(%a, %b, latency_ms = q.latency_ms, bandwidth_mbps = q.bandwidth_mbps, "link measured");
                }
                let news = self.book.topo.record(&a, &b, outcome, fallback, now);
                if let Some(e) = failure {
                    if news {
                        tracing::warn!(%a, %b, error = %e, latency_ms = fallback.latency_ms, bandwidth_mbps = fallback.bandwidth_mbps, "the gateways cannot probe each other (processes still link); the link is estimated from their round trips to the broker until a probe succeeds");
                    } else {
                        tracing::debug!(%a, %b, error = %e, "probe failed again");
                    }
                }
                self.start_queued(&mut out);
                Answer::Nothing
            }
            Input::Checked {
                config,
                inbound,
                nat,
            } => {
                let ran = nat.is_some() || inbound.is_some();
                tracing::debug!(cluster = %config.name, ?inbound, ?nat, "cluster checked");
                self.registry.checked(&config.name, &config, inbound, nat);
                self.book.checks.done(&config, ran, now);
                Answer::Nothing
            }
            Input::Tick => {
                self.tick(now, &mut out);
                Answer::Nothing
            }
            Input::Submit { id, submission } => {
                self.book.jobs.at(now);
                Answer::Done(self.submit_job(id, *submission, &mut out))
            }
            Input::Cancel { id, caller } => {
                let seen = self.visible(&caller, &id).map(|_| ());
                let r = match seen {
                    Ok(()) => self.book.jobs.cancel(&id, now).map(|actions| {
                        tracing::info!(job = %id, by = %caller.name, "job cancelled");
                        self.settle(actions, &mut out);
                        out.push(Output::Changed);
                    }),
                    Err(e) => Err(e),
                };
                Answer::Done(r)
            }
            Input::Status { id, caller } => Answer::Job(
                self.visible(&caller, &id)
                    .map(|j| Box::new(JobView::of_at(j, now))),
            ),
            Input::List {
                caller,
                after,
                limit,
            } => {
                let mine = || {
                    self.book
                        .jobs
                        .after(after.as_deref())
                        .filter(|j| caller.may_see(&j.submission.owner))
                };
                let views = mine()
                    .take(limit.unwrap_or(usize::MAX))
                    .map(|j| JobView::of_at(j, now))
                    .collect();
                let in_memory = match limit {
                    Some(_) => mine().map(|j| j.id.clone()).collect(),
                    None => Default::default(),
                };
                Answer::Jobs { views, in_memory }
            }
            Input::Output { id, caller, from } => Answer::Output(
                self.visible(&caller, &id)
                    .map(|j| Box::new(crate::api::page_of(j, from))),
            ),
            Input::Processes { caller } => {
                let jobs = &self.book.jobs;
                Answer::Processes(
                    self.registry
                        .processes()
                        .into_iter()
                        .filter(|p| {
                            caller.admin
                                || jobs
                                    .get(&p.process.job)
                                    .is_some_and(|j| caller.may_see(&j.submission.owner))
                        })
                        .collect(),
                )
            }
        };
        (answer, out)
    }

    /// Job `id` if `caller` may see it; otherwise the same error as for a job that
    /// does not exist (a client does not learn of others' jobs).
    fn visible(&self, caller: &Caller, id: &str) -> Result<&crate::jobs::Job, JobError> {
        self.book
            .jobs
            .get(id)
            .filter(|j| caller.may_see(&j.submission.owner))
            .ok_or_else(|| JobError::Unknown(id.to_string()))
    }

    fn submit_job(
        &mut self,
        id: String,
        submission: Submission,
        out: &mut Vec<Output>,
    ) -> Result<(), JobError> {
        let owner = submission.owner.clone();
        let topo = self.topology();
        let actions = self.book.jobs.submit(id.clone(), submission, &topo)?;
        let launches = actions
            .iter()
            .filter(|a| matches!(a, Action::Launch { .. }))
            .count();
        tracing::info!(job = %id, %owner, launches, "job submitted");
        self.settle(actions, out);
        out.push(Output::Changed);
        Ok(())
    }

    /// The resource topology jobs are scheduled on.
    pub fn topology(&self) -> ResourceTopology {
        let relay = self.registry.proxies().iter().any(|p| p.alive);
        self.book.topo.topology(&self.registry.clusters(), relay)
    }

    /// Link outcomes per technique ([`Registry::links`]).
    pub fn links(&self) -> std::collections::BTreeMap<&'static str, crate::registry::LinkCounts> {
        self.registry.links()
    }

    /// The relay proxies known ([`Registry::proxies`]).
    pub fn proxies(&self) -> Vec<crate::registry::ProxyEntry> {
        self.registry.proxies()
    }

    /// The registered processes ([`Registry::processes`]).
    pub fn processes(&self) -> Vec<qcg_proto::AccessPoint> {
        self.registry.processes()
    }

    /// Whether the frontal of `cluster` is connected.
    pub fn is_connected(&self, cluster: &str) -> bool {
        self.connected.contains(cluster)
    }

    fn frontal(
        &mut self,
        cluster: Option<String>,
        req: Request,
        now: Instant,
        out: &mut Vec<Output>,
    ) -> Answer {
        if let Err(why) = crate::registry::check_names(&req) {
            return error(ErrorKind::TooLarge, why);
        }
        let req = match &cluster {
            Some(own) => match self.admit(own, req) {
                Ok(req) => req,
                Err(refusal) => return Answer::Reply(refusal),
            },
            None => req,
        };
        if let Some(own) = &cluster {
            if let Some(resp) = self.report(own, &req, now, out) {
                return Answer::Reply(resp);
            }
        }
        self.plan(cluster, req, 0, out)
    }

    /// The refusal of a request from the frontal of `cluster` that acts for a rank
    /// of a submitted job away from where the job was placed, or ends a submitted
    /// job ([`crate::placed`]); logged. Else the request to hand on: for a submitted
    /// job, without the sender a helper named ([`crate::users`] keeps only the jobs
    /// the broker did not place).
    pub fn admit(&self, cluster: &str, req: Request) -> Result<Request, Response> {
        let Some(acts) = crate::placed::acts(&req) else {
            return Ok(req);
        };
        let job = match acts {
            crate::placed::Acts::As(p, _) => p.job.as_str(),
            crate::placed::Acts::Ends(j) => j,
        };
        let known = match self.book.jobs.get(job) {
            None => crate::placed::Known::Unknown,
            Some(j) => match &j.mapping {
                Some(m) => crate::placed::Known::Placed(m),
                None => crate::placed::Known::Unplaced,
            },
        };
        let submitted = !matches!(known, crate::placed::Known::Unknown);
        if let Err(why) = crate::placed::check(cluster, &req, known) {
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

    /// What a frontal reports about its nodes and its processes; `None` for
    /// requests that are the registry's business.
    fn report(
        &mut self,
        cluster: &str,
        req: &Request,
        now: Instant,
        out: &mut Vec<Output>,
    ) -> Option<Response> {
        let resp = match req {
            Request::ClusterNodes { nodes, internal } => {
                self.book.topo.set_nodes(cluster, nodes.clone(), *internal);
                tracing::info!(%cluster, nodes = nodes.len(), "cluster nodes reported");
                self.start_queued(out);
                Response::Ok
            }
            Request::Output { job, rank, lines } => {
                match self.book.jobs.output(job, *rank, cluster, lines.clone()) {
                    Ok(()) => Response::Ok,
                    Err(e) => Response::error(ErrorKind::Forbidden, e.to_string()),
                }
            }
            Request::Running { nodes, processes } => {
                let actions = self.book.jobs.running(cluster, nodes, processes, now);
                self.settle(actions, out);
                Response::Ok
            }
            Request::ProcessExited { job, rank, exit } => {
                match self
                    .book
                    .jobs
                    .exited(job, *rank, cluster, exit.clone(), now)
                {
                    Ok(actions) => {
                        self.settle(actions, out);
                        Response::Ok
                    }
                    Err(e) => Response::error(ErrorKind::Forbidden, e.to_string()),
                }
            }
            _ => return None,
        };
        out.push(Output::Changed);
        Some(resp)
    }

    /// The registry's answer to `req` (planned for the `tries`-th time), and the first
    /// push it waits on, if any.
    fn plan(
        &mut self,
        cluster: Option<String>,
        req: Request,
        tries: u32,
        out: &mut Vec<Output>,
    ) -> Answer {
        if tries >= RELAY_TRIES {
            return error(ErrorKind::NoRoute, "no relay proxy took the link");
        }
        let users_before = self.registry.users().pending();
        let (resp, effects) = self.registry.handle(cluster.as_deref(), req.clone());
        if self.registry.users().pending() > users_before {
            // A job's user claimed or forgotten is stored before the answer goes
            // back: after a crash, no one else can claim it.
            out.push(Output::Save);
        }
        if let (Request::ForUser { user, request }, Response::Error(e)) = (&req, &resp) {
            if e.kind == ErrorKind::Forbidden {
                tracing::warn!(cluster = ?cluster, request = request.kind(), %user, machine = %user.machine, reason = %e.message, "request refused");
            }
        }
        // The proxies must take their tokens before anything else is done: a proxy
        // that fails has the request planned again without it.
        let (relays, others): (Vec<Effect>, Vec<Effect>) = effects
            .into_iter()
            .partition(|e| matches!(e, Effect::ExpectRelay { .. }));
        let mut rest: VecDeque<Effect> = relays.into();
        rest.extend(others);
        self.advance(cluster, req, tries, resp, rest, out)
    }

    /// Carries out effects in order until one must be pushed and waited on.
    fn advance(
        &mut self,
        cluster: Option<String>,
        req: Request,
        tries: u32,
        resp: Response,
        mut rest: VecDeque<Effect>,
        out: &mut Vec<Output>,
    ) -> Answer {
        while let Some(e) = rest.pop_front() {
            let (to, push) = match &e {
                Effect::ExpectRelay { proxy, token } => (
                    Peer::Proxy(*proxy),
                    Request::ExpectRelay {
                        token: token.clone(),
                        valid_ms: crate::registry::RELAY_TOKEN_MS,
                    },
                ),
                Effect::Notify {
                    cluster,
                    target,
                    notice,
                } => (
                    Peer::Frontal(cluster.clone()),
                    Request::Notify {
                        target: target.clone(),
                        notice: notice.clone(),
                    },
                ),
                Effect::Measured { a, b, rtt_us } => {
                    let rtt = Duration::from_micros(*rtt_us);
                    if self.book.topo.observed(a, b, rtt) {
                        tracing::debug!(%a, %b, rtt_ms = rtt.as_secs_f64() * 1e3, "link between clusters measured by a process link");
                    }
                    continue;
                }
                Effect::Invalidate(inv) => {
                    out.push(Output::Invalidate(inv.clone()));
                    continue;
                }
            };
            return Answer::Push {
                to,
                req: push,
                then: Box::new(Pending {
                    cluster,
                    req,
                    tries,
                    resp,
                    waiting: e,
                    rest,
                }),
            };
        }
        Answer::Reply(resp)
    }

    fn pushed(
        &mut self,
        then: Box<Pending>,
        outcome: Result<Response, String>,
        out: &mut Vec<Output>,
    ) -> Answer {
        let Pending {
            cluster,
            req,
            tries,
            resp,
            waiting,
            rest,
        } = *then;
        match waiting {
            Effect::ExpectRelay { proxy, .. } if !matches!(outcome, Ok(Response::Ok)) => {
                tracing::warn!(%proxy, outcome = ?outcome, "proxy failed its check; marking it dead");
                self.registry.set_proxy_alive(proxy, false);
                return self.plan(cluster, req, tries + 1, out);
            }
            Effect::Notify {
                cluster: at,
                target,
                ..
            } => match outcome {
                Ok(Response::Ok) => {}
                Ok(Response::Error(e)) => return Answer::Reply(Response::Error(e)),
                other => {
                    return error(
                        ErrorKind::Unavailable,
                        format!("cannot reach process {target} in cluster `{at}`: {other:?}"),
                    )
                }
            },
            _ => {}
        }
        self.advance(cluster, req, tries, resp, rest, out)
    }

    /// Turns the job table's actions into outputs; a job that ended frees its slots
    /// for the queue.
    fn settle(&mut self, actions: Vec<Action>, out: &mut Vec<Output>) {
        out.push(Output::Save);
        let mut todo: VecDeque<Action> = actions.into();
        while let Some(a) = todo.pop_front() {
            match a {
                Action::Launch { cluster, spec } => out.push(Output::Launch { cluster, spec }),
                Action::Kill { job, clusters } => out.push(Output::Kill { job, clusters }),
                Action::Ended { job } => {
                    tracing::info!(%job, "job ended; its slots are free");
                    out.push(Output::Invalidate(self.registry.end_job(&job)));
                    let topo = self.topology();
                    todo.extend(self.book.jobs.start_queued(&topo));
                    out.push(Output::Changed);
                }
            }
        }
    }

    fn start_queued(&mut self, out: &mut Vec<Output>) {
        let topo = self.topology();
        let more = self.book.jobs.start_queued(&topo);
        self.settle(more, out);
    }

    /// One turn of the clock: probes and checks that are due, nodes away too long,
    /// jobs' time-outs.
    fn tick(&mut self, now: Instant, out: &mut Vec<Output>) {
        let names: Vec<String> = self.connected.iter().cloned().collect();
        for (a, b) in self.book.topo.due(&names, now, self.probe_interval) {
            out.push(Output::Probe { a, b });
        }
        self.checks_due(now, out);
        if self.registry.users().restored() > 0 {
            let grace = crate::users::RESTORED_KEEP;
            let up = &self.up_since;
            let back = |c: &str| {
                up.get(c)
                    .is_some_and(|t| now.saturating_duration_since(*t) >= grace)
            };
            let n = self.registry.prune_restored_users(back);
            if n > 0 {
                tracing::info!(
                    jobs = n,
                    "users of qcg run jobs that ended while the broker was away forgotten"
                );
                out.push(Output::Save);
            }
        }
        let topo = self.topology();
        let mut actions = self.lost_nodes(&topo, now);
        actions.extend(self.book.jobs.tick(&topo, now));
        if !actions.is_empty() {
            self.settle(actions, out);
            out.push(Output::Changed);
        }
    }

    /// The reachability checks due ([`crate::reach`]), through the first live proxy.
    fn checks_due(&mut self, now: Instant, out: &mut Vec<Output>) {
        let proxy = self
            .registry
            .proxies()
            .into_iter()
            .find(|p| p.alive)
            .map(|p| p.addr);
        let clusters: Vec<_> = self
            .registry
            .clusters()
            .into_iter()
            .filter(|c| self.connected.contains(&c.name))
            .map(|c| {
                let node = self.book.topo.first_node(&c.name);
                (c, node)
            })
            .collect();
        let Some(proxy) = proxy else { return };
        for (config, node) in self.book.checks.due(&clusters, true, now) {
            out.push(Output::Check {
                config,
                node,
                proxy,
            });
        }
    }

    /// Jobs with a live rank on a node whose helper has been away from `topo` (its
    /// frontal reports the nodes whose helper is connected) for the grace fail,
    /// naming the node: a lost node never leaves a job running unseen.
    fn lost_nodes(&mut self, topo: &ResourceTopology, now: Instant) -> Vec<Action> {
        let present: HashSet<(&str, &str)> = topo
            .clusters
            .iter()
            .flat_map(|c| c.nodes.iter().map(|n| (c.name.as_str(), n.name.as_str())))
            .collect();
        let mut wanted = HashSet::new();
        for job in self.book.jobs.all() {
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
        self.away.retain(|k, _| wanted.contains(k));
        let grace = self.lost_node_grace;
        let mut actions = Vec::new();
        for key in wanted {
            let since = *self.away.entry(key.clone()).or_insert(now);
            if now.saturating_duration_since(since) < grace {
                continue;
            }
            self.away.remove(&key);
            let (cluster, node) = key;
            let reason = format!(
                "was lost: the helper of node {node} (cluster `{cluster}`) was lost for {} s",
                grace.as_secs()
            );
            tracing::warn!(%cluster, %node, grace_s = grace.as_secs(), "a node running jobs stayed away past the grace; its jobs fail");
            actions.extend(self.book.jobs.node_lost(&cluster, &node, &reason, now));
        }
        actions
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::tests::cluster;
    use qcg_proto::{AccessPoint, LocalUser, Notice, Policy, ProcName, Technique};

    /// The first process of `job` the registry holds, if any.
    fn first_process(core: &Core, job: &str) -> Option<ProcName> {
        core.registry
            .processes()
            .into_iter()
            .map(|a| a.process)
            .find(|p| p.job == job)
    }

    fn ap(job: &str, rank: u32, cluster: &str) -> AccessPoint {
        AccessPoint {
            process: ProcName::new(job, rank),
            cluster: cluster.into(),
            node: format!("{cluster}-1"),
            private_addr: [10, 0, 0, 1].into(),
            public_addr: None,
            port: 4000 + rank as u16,
        }
    }

    fn frontal(cluster: &str, req: Request) -> Input {
        Input::Frontal {
            cluster: Some(cluster.into()),
            req,
        }
    }

    /// A core with two closed clusters `a` and `b` (links between them are relayed)
    /// and a process of job `j` in each.
    fn closed_pair(t0: Instant) -> Core {
        let mut core = Core::default();
        for c in ["a", "b"] {
            let (answer, _) = core.handle(
                Input::Frontal {
                    cluster: None,
                    req: Request::RegisterCluster(cluster(c, Policy::Closed)),
                },
                t0,
            );
            assert!(matches!(answer, Answer::Reply(Response::Ok)), "{answer:?}");
            assert!(!core.is_connected(c));
            core.handle(Input::FrontalUp { cluster: c.into() }, t0);
            assert!(core.is_connected(c));
        }
        for (c, rank) in [("a", 0), ("b", 1)] {
            let (answer, _) = core.handle(frontal(c, Request::Register(ap("j", rank, c))), t0);
            assert!(matches!(answer, Answer::Reply(Response::Ok)), "{answer:?}");
        }
        core
    }

    fn relay() -> Request {
        Request::Rendezvous {
            from: ProcName::new("j", 0),
            target: ProcName::new("j", 1),
            technique: Technique::Relayed,
        }
    }

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([10, 9, 9, 9], port))
    }

    /// `answer` must be a push: hands the core its `outcome` at `t`; where the push
    /// went, what it was, and the core's next answer.
    fn push_answered(
        core: &mut Core,
        answer: Answer,
        outcome: Result<Response, String>,
        t: Instant,
    ) -> (Peer, Request, Answer) {
        let Answer::Push { to, req, then } = answer else {
            panic!("a push was expected: {answer:?}")
        };
        let (next, _) = core.handle(Input::Pushed { then, outcome }, t);
        (to, req, next)
    }

    fn proxy_of(to: Peer) -> SocketAddr {
        match to {
            Peer::Proxy(p) => p,
            other => panic!("a proxy was expected: {other:?}"),
        }
    }

    #[test]
    fn a_relay_fails_over_to_the_next_live_proxy() {
        let t0 = Instant::now();
        let mut core = closed_pair(t0);
        for port in [1, 2] {
            core.handle(Input::ProxyUp { addr: addr(port) }, t0);
        }
        let (answer, _) = core.handle(frontal("a", relay()), t0);
        // The first proxy is asked to expect the token: it does not answer.
        let (to, req, answer) =
            push_answered(&mut core, answer, Err("no answer in 3 s".into()), t0);
        let first = proxy_of(to);
        assert!(matches!(req, Request::ExpectRelay { .. }));
        // Marked dead; the link is planned again on the other one, which takes it.
        let dead = core
            .proxies()
            .into_iter()
            .find(|p| p.addr == first)
            .unwrap();
        assert!(!dead.alive);
        let (to, _, answer) = push_answered(&mut core, answer, Ok(Response::Ok), t0);
        let second = proxy_of(to);
        assert_ne!(first, second);
        // Then the target is told, through its frontal, to meet there.
        let (to, req, answer) = push_answered(&mut core, answer, Ok(Response::Ok), t0);
        assert_eq!(to, Peer::Frontal("b".into()));
        let Request::Notify {
            notice: Notice::Relay { proxy, .. },
            ..
        } = req
        else {
            panic!("{req:?}")
        };
        assert_eq!(proxy, second);
        match answer {
            Answer::Reply(Response::Relay { proxy, .. }) => assert_eq!(proxy, second),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn with_every_proxy_dead_a_relay_has_no_route() {
        let t0 = Instant::now();
        let mut core = closed_pair(t0);
        core.handle(Input::ProxyUp { addr: addr(1) }, t0);
        let (answer, _) = core.handle(frontal("a", relay()), t0);
        let full = Ok(Response::error(ErrorKind::Internal, "full"));
        let (_, _, answer) = push_answered(&mut core, answer, full, t0);
        match answer {
            Answer::Reply(Response::Error(e)) => {
                assert_eq!(e.kind, ErrorKind::NoRoute, "{e}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_unreachable_target_is_named() {
        let t0 = Instant::now();
        let mut core = closed_pair(t0);
        core.handle(Input::ProxyUp { addr: addr(1) }, t0);
        let (answer, _) = core.handle(frontal("a", relay()), t0);
        let (_, _, answer) = push_answered(&mut core, answer, Ok(Response::Ok), t0);
        let gone = Err("its frontal is not connected".into());
        let (to, _, answer) = push_answered(&mut core, answer, gone, t0);
        assert_eq!(to, Peer::Frontal("b".into()));
        match answer {
            Answer::Reply(Response::Error(e)) => {
                assert_eq!(e.kind, ErrorKind::Unavailable);
                assert!(e.message.contains("process j/1 in cluster `b`"), "{e}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_job_end_invalidates_and_a_stranger_changes_nothing() {
        let t0 = Instant::now();
        let mut core = Core::default();
        core.handle(
            Input::Frontal {
                cluster: None,
                req: Request::RegisterCluster(cluster("a", Policy::Open)),
            },
            t0,
        );
        let by = |uid: u32, req: Request| Request::ForUser {
            user: LocalUser {
                uid,
                machine: "m".into(),
                node: "a-1".into(),
            },
            request: Box::new(req),
        };
        let (answer, _) = core.handle(
            frontal("a", by(1000, Request::Register(ap("r", 0, "a")))),
            t0,
        );
        assert!(matches!(answer, Answer::Reply(Response::Ok)), "{answer:?}");
        let (answer, out) = core.handle(
            frontal("a", by(65534, Request::JobEnd { job: "r".into() })),
            t0,
        );
        assert!(
            matches!(answer, Answer::Reply(Response::Error(_))),
            "{answer:?}"
        );
        assert!(out.is_empty(), "{out:?}");
        assert_eq!(first_process(&core, "r"), Some(ProcName::new("r", 0)));
        let (answer, out) = core.handle(
            frontal("a", by(1000, Request::JobEnd { job: "r".into() })),
            t0,
        );
        assert!(matches!(answer, Answer::Reply(Response::Ok)), "{answer:?}");
        // Its user forgotten in the database too, before the frontals are told.
        assert_eq!(
            out,
            vec![
                Output::Save,
                Output::Invalidate(Invalidation {
                    job: "r".into(),
                    rank: None
                })
            ]
        );
        assert_eq!(first_process(&core, "r"), None);
    }

    /// A request of uid `uid` on machine `m1`, seen by the helper of `node`.
    fn by(uid: u32, node: &str, req: Request) -> Request {
        Request::ForUser {
            user: LocalUser {
                uid,
                machine: "m1".into(),
                node: node.into(),
            },
            request: Box::new(req),
        }
    }

    fn refused(answer: &Answer) -> bool {
        matches!(answer, Answer::Reply(Response::Error(e)) if e.kind == ErrorKind::Forbidden)
    }

    #[test]
    fn the_user_of_a_qcg_run_job_is_stored_at_once_and_holds_after_a_restart() {
        let t0 = Instant::now();
        let up = |core: &mut Core, c: &str, at: Instant| {
            core.handle(
                Input::Frontal {
                    cluster: None,
                    req: Request::RegisterCluster(cluster(c, Policy::Open)),
                },
                at,
            );
            core.handle(Input::FrontalUp { cluster: c.into() }, at);
        };
        let mut core = Core::default();
        up(&mut core, "a", t0);
        let (answer, out) = core.handle(
            frontal("a", by(1000, "a-1", Request::Register(ap("r", 0, "a")))),
            t0,
        );
        assert!(matches!(answer, Answer::Reply(Response::Ok)), "{answer:?}");
        assert!(
            out.contains(&Output::Save),
            "stored before the answer: {out:?}"
        );
        let stored = core.take_changes().run_owners;
        assert_eq!(stored.len(), 1);
        assert_eq!(stored[0].0, "r");
        // A second registration of hers is nothing new to store.
        let (_, out) = core.handle(
            frontal("a", by(1000, "a-1", Request::Register(ap("r", 1, "a")))),
            t0,
        );
        assert!(!out.contains(&Output::Save), "{out:?}");

        // The broker restarts: another user's frontal comes back first.
        let owners: Vec<_> = stored
            .into_iter()
            .map(|(j, o)| (j, o.unwrap()))
            .chain([(
                "gone".to_string(),
                crate::users::Owner {
                    user: LocalUser {
                        uid: 1000,
                        machine: "m1".into(),
                        node: "a-1".into(),
                    },
                    cluster: "a".into(),
                },
            )])
            .collect();
        let mut back = Core::default();
        back.registry.restore_users(owners);
        let t1 = t0 + Duration::from_secs(100);
        up(&mut back, "b", t1);
        for req in [
            Request::Register(ap("r", 1, "b")),
            Request::Lookup {
                from: ProcName::new("r", 1),
                target: ProcName::new("r", 0),
            },
            Request::Unregister {
                process: ProcName::new("r", 0),
            },
            Request::JobEnd { job: "r".into() },
        ] {
            let kind = req.kind();
            let (answer, out) = back.handle(frontal("b", by(65534, "b-1", req)), t1);
            assert!(refused(&answer), "{kind}: {answer:?}");
            assert!(!out.contains(&Output::Save), "{kind}: {out:?}");
        }
        assert_eq!(first_process(&back, "r"), None, "nothing registered");
        // Her frontal comes back and registers her processes again: hers.
        up(&mut back, "a", t1);
        for rank in [0, 1] {
            let (answer, _) = back.handle(
                frontal("a", by(1000, "a-1", Request::Register(ap("r", rank, "a")))),
                t1,
            );
            assert!(matches!(answer, Answer::Reply(Response::Ok)), "{answer:?}");
        }
        assert!(back.take_changes().run_owners.is_empty());
        // Job `gone` ended while the broker was away: once her cluster has been back
        // for the grace with none of its processes, its user is forgotten.
        let grace = crate::users::RESTORED_KEEP;
        back.handle(Input::Tick, t1 + grace - Duration::from_millis(1));
        assert_eq!(back.registry.users().restored(), 1);
        let (_, out) = back.handle(Input::Tick, t1 + grace);
        assert!(out.contains(&Output::Save), "{out:?}");
        assert_eq!(back.registry.users().restored(), 0);
        assert_eq!(
            back.take_changes().run_owners,
            vec![("gone".to_string(), None)]
        );
        assert!(back.registry.users().get("r").is_some());
    }

    #[test]
    fn a_job_on_a_node_away_past_the_grace_fails_in_virtual_time() {
        let t0 = Instant::now();
        let mut core = one_node(t0);
        let (answer, out) = core.handle(
            Input::Submit {
                id: "j".into(),
                submission: Box::new(crate::jobs::tests::sub(1)),
            },
            t0,
        );
        assert!(matches!(answer, Answer::Done(Ok(()))), "{answer:?}");
        assert!(out.contains(&Output::Save), "{out:?}");
        let launches: Vec<u32> = out
            .iter()
            .filter_map(|o| match o {
                Output::Launch { cluster, spec } if cluster == "c0" => Some(spec.rank),
                _ => None,
            })
            .collect();
        assert_eq!(launches, [0]);
        core.handle(
            Input::Launched {
                job: "j".into(),
                rank: 0,
                result: Ok(()),
            },
            t0,
        );
        let state = |core: &Core| core.book.jobs.get("j").unwrap().state.clone();
        assert_eq!(state(&core), crate::jobs::JobState::Running);
        // Its helper goes away: the frontal reports the node no more.
        let none = Request::ClusterNodes {
            nodes: Vec::new(),
            internal: LinkQuality {
                latency_ms: 0.1,
                bandwidth_mbps: 1000.0,
            },
        };
        core.handle(frontal("c0", none), t0);
        core.handle(Input::Tick, t0);
        let grace = core.lost_node_grace;
        let (_, out) = core.handle(Input::Tick, t0 + grace - Duration::from_millis(1));
        assert_eq!(state(&core), crate::jobs::JobState::Running, "{out:?}");
        let (_, out) = core.handle(Input::Tick, t0 + grace);
        match state(&core) {
            crate::jobs::JobState::Failed { reason, .. } => {
                assert!(
                    reason.contains("the helper of node c0-n0 (cluster `c0`) was lost"),
                    "{reason}"
                )
            }
            other => panic!("{other:?}"),
        }
        assert!(out.contains(&Output::Changed), "{out:?}");
    }

    fn caller(name: &str, admin: bool) -> Caller {
        Caller {
            name: name.into(),
            admin,
        }
    }

    /// A core with cluster `c0` of one node of 2 slots, its frontal connected.
    fn one_node(t0: Instant) -> Core {
        let mut core = Core::default();
        core.handle(
            Input::Frontal {
                cluster: None,
                req: Request::RegisterCluster(cluster("c0", Policy::Open)),
            },
            t0,
        );
        core.handle(
            Input::FrontalUp {
                cluster: "c0".into(),
            },
            t0,
        );
        let nodes = Request::ClusterNodes {
            nodes: vec![qcg_proto::NodeSpec {
                name: "c0-n0".into(),
                slots: 2,
                cpu_speed_mhz: 2000.0,
                memory_mib: 4096.0,
                submitters: None,
            }],
            internal: LinkQuality {
                latency_ms: 0.1,
                bandwidth_mbps: 1000.0,
            },
        };
        core.handle(frontal("c0", nodes), t0);
        core
    }

    #[test]
    fn the_job_api_asks_the_core_and_a_stranger_sees_and_cancels_nothing() {
        let mut core = one_node(Instant::now());
        // Past the job table's own clock, which started with the core.
        let t0 = Instant::now();
        let (answer, out) = core.handle(
            Input::Submit {
                id: "j".into(),
                submission: Box::new(crate::jobs::tests::sub(1)),
            },
            t0,
        );
        assert!(matches!(answer, Answer::Done(Ok(()))), "{answer:?}");
        assert!(
            out.iter().any(|o| matches!(o, Output::Launch { .. })),
            "{out:?}"
        );
        core.handle(
            Input::Launched {
                job: "j".into(),
                rank: 0,
                result: Ok(()),
            },
            t0,
        );
        let (alice, bob, ops) = (
            caller("alice", false),
            caller("bob", false),
            caller("ops", true),
        );
        let status = |core: &mut Core, who: &Caller, at: Instant| {
            core.handle(
                Input::Status {
                    id: "j".into(),
                    caller: who.clone(),
                },
                at,
            )
            .0
        };
        // Its time counts in virtual time.
        match status(&mut core, &alice, t0 + Duration::from_secs(61)) {
            Answer::Job(Ok(v)) => {
                assert_eq!(v.owner, "alice");
                assert_eq!(v.elapsed_secs, Some(61));
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(status(&mut core, &ops, t0), Answer::Job(Ok(_))));
        let unknown = |a: &Answer| {
            matches!(
                a,
                Answer::Job(Err(JobError::Unknown(_)))
                    | Answer::Done(Err(JobError::Unknown(_)))
                    | Answer::Output(Err(JobError::Unknown(_)))
            )
        };
        assert!(unknown(&status(&mut core, &bob, t0)));
        let (a, _) = core.handle(
            Input::Output {
                id: "j".into(),
                caller: bob.clone(),
                from: 0,
            },
            t0,
        );
        assert!(unknown(&a), "{a:?}");
        let list = |core: &mut Core, who: &Caller| match core
            .handle(
                Input::List {
                    caller: who.clone(),
                    after: None,
                    limit: Some(10),
                },
                t0,
            )
            .0
        {
            Answer::Jobs { views, in_memory } => {
                assert_eq!(views.len(), in_memory.len());
                views.len()
            }
            other => panic!("{other:?}"),
        };
        assert_eq!((list(&mut core, &alice), list(&mut core, &bob)), (1, 0));
        // Bob's cancellation: unknown to him, and nothing is killed.
        let (a, out) = core.handle(
            Input::Cancel {
                id: "j".into(),
                caller: bob,
            },
            t0,
        );
        assert!(unknown(&a), "{a:?}");
        assert!(out.is_empty(), "{out:?}");
        assert_eq!(
            core.book.jobs.get("j").unwrap().state,
            crate::jobs::JobState::Running
        );
        // Hers: every process killed.
        let (a, out) = core.handle(
            Input::Cancel {
                id: "j".into(),
                caller: alice,
            },
            t0,
        );
        assert!(matches!(a, Answer::Done(Ok(()))), "{a:?}");
        assert!(
            out.iter()
                .any(|o| matches!(o, Output::Kill { job, .. } if job == "j")),
            "{out:?}"
        );
    }

    #[test]
    fn probes_come_due_in_virtual_time_among_connected_frontals() {
        let t0 = Instant::now();
        let mut core = closed_pair(t0);
        let probes = |out: &[Output]| {
            out.iter()
                .filter(|o| matches!(o, Output::Probe { .. }))
                .count()
        };
        let (_, out) = core.handle(Input::Tick, t0);
        assert_eq!(probes(&out), 1, "{out:?}");
        // In flight: not asked again.
        let (_, out) = core.handle(Input::Tick, t0 + Duration::from_secs(1));
        assert_eq!(probes(&out), 0, "{out:?}");
        let q = LinkQuality {
            latency_ms: 5.0,
            bandwidth_mbps: 1000.0,
        };
        core.handle(
            Input::Probed {
                a: "a".into(),
                b: "b".into(),
                outcome: Ok(q),
                fallback: q,
            },
            t0 + Duration::from_secs(1),
        );
        let later = t0 + Duration::from_secs(1) + core.probe_interval;
        let (_, out) = core.handle(Input::Tick, later - Duration::from_secs(1));
        assert_eq!(probes(&out), 0, "{out:?}");
        let (_, out) = core.handle(Input::Tick, later);
        assert_eq!(probes(&out), 1, "{out:?}");
        // A frontal gone is probed no more.
        core.handle(
            Input::FrontalGone {
                cluster: "b".into(),
            },
            later,
        );
        let (_, out) = core.handle(Input::Tick, later + core.probe_interval * 2);
        assert_eq!(probes(&out), 0, "{out:?}");
    }
}
