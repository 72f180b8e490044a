//! Submitted jobs: a pure state machine. The async shell feeds it events
//! (submission, launch outcomes, output, process ends, cancellation, the clock) and
//! carries out the [`Action`]s it returns (launch and kill requests to frontals).
//!
//! A job is scheduled with [`qcg_jobprofile::sched::schedule`] on the topology and
//! the free slots, waiting jobs in the order and with the backfill
//! [`crate::queue::decide`] chooses; its slots are held from the moment it starts until every one of
//! its processes is known to have ended (or [`KILL_GRACE`] after it was killed,
//! when a node stays silent). A job that fits the grid but not the free slots waits
//! in a queue; one that cannot fit even on an empty grid is refused with the
//! scheduler's reason and reserves nothing.
//!
//! Each job keeps the newest lines of its output up to a cap of bytes (the oldest
//! are dropped and counted, so a reader can be told), freed a while after its end;
//! records, profiles and output are forgotten on schedule ([`JobLimits`]).
//! Every change marks the job dirty; the shell writes [`Jobs::take_changes`] to the
//! database ([`crate::store`]) and gives the records ([`JobRecord`]) back to
//! [`Jobs::restore`] after a restart, where running jobs wait [`RESTORE_GRACE`] for
//! their processes to report.

use qcg_jobprofile::profile::JobProfile;
use qcg_jobprofile::sched::{schedule, FreeSlots, Mapping, Strategy};
use qcg_jobprofile::topology::ResourceTopology;
use qcg_proto::{ExitReport, LaunchSpec, OutputLine, Stream};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

mod retention;
mod stored;
pub use retention::{
    Anchor, Changes, JobLimits, DEFAULT_OUTPUT_TOTAL_CAP, DEFAULT_PROFILE_BYTES_PER_CLIENT,
    DEFAULT_QUEUED_PER_CLIENT, DEFAULT_RECORD_KEEP,
};

/// How long after a kill a silent process is given up as lost (its slot freed).
pub const KILL_GRACE: Duration = Duration::from_secs(15);
/// Bytes of output kept per job by default; past it the oldest lines are dropped
/// (and counted, and the reader told).
pub const DEFAULT_OUTPUT_CAP: usize = 16 << 20;
/// How long a finished job's output is kept by default.
pub const DEFAULT_OUTPUT_KEEP: Duration = Duration::from_secs(3600);
/// How long after a broker restart the processes of a running job have to report
/// (an output line, an end, a launch answer) before the job is failed, naming them.
pub const RESTORE_GRACE: Duration = Duration::from_secs(60);
/// What a kept line costs besides its text (rank, stream, the queue's slot), so
/// that a flood of empty lines is bounded too.
pub const LINE_OVERHEAD: usize = 48;

/// Where a job stands.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "state")]
pub enum JobState {
    /// Waiting for free slots.
    Queued,
    /// Processes started or starting.
    Running,
    /// Every process exited with status 0.
    Succeeded,
    /// A process failed; the others were stopped.
    Failed {
        /// The first rank that failed.
        rank: u32,
        /// How it failed.
        reason: String,
    },
    /// Cancelled by the user; every process was stopped.
    Cancelled,
}

impl JobState {
    /// Whether the job's outcome is decided.
    pub fn is_terminal(&self) -> bool {
        !matches!(self, JobState::Queued | JobState::Running)
    }
}

/// One process of a job.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "state")]
pub enum RankState {
    /// Not launched yet.
    Pending,
    /// Launch request sent.
    Starting,
    /// Running.
    Running,
    /// Ended.
    Exited {
        /// How.
        exit: ExitReport,
    },
    /// Its node never reported its end after a kill.
    Lost,
}

impl RankState {
    fn is_over(&self) -> bool {
        matches!(self, RankState::Exited { .. } | RankState::Lost)
    }
}

/// A line of a job's output, as the submitter sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct JobLine {
    /// The rank that printed it.
    pub rank: u32,
    /// Its stream.
    pub stream: Stream,
    /// Its text.
    pub text: String,
}

/// What to run, besides the profile.
#[derive(Clone, Debug)]
pub struct Submission {
    /// The parsed profile.
    pub profile: JobProfile,
    /// The job's secret, 64 hex digits.
    pub secret_hex: String,
    /// Working directory when the profile gives none.
    pub workdir: Option<String>,
    /// The identity that submitted it (its client certificate's name): only it, or
    /// an admin, may see the job.
    pub owner: String,
    /// The profile as submitted (XML), kept so the job survives a restart.
    pub source: String,
}

/// A job.
#[derive(Clone, Debug)]
pub struct Job {
    /// Its id.
    pub id: String,
    /// What was submitted.
    pub submission: Submission,
    /// Where its processes run, once started.
    pub mapping: Option<Mapping>,
    /// Its state.
    pub state: JobState,
    /// Each rank's state.
    pub ranks: Vec<RankState>,
    /// Output kept: the newest lines, at most the cap's worth of bytes.
    pub output: VecDeque<JobLine>,
    /// The number (from 0, over every line the job printed) of `output`'s first line.
    pub first_line: u64,
    /// Bytes `output` holds, [`LINE_OVERHEAD`] per line included.
    pub output_bytes: usize,
    /// Lines dropped to stay under the cap, or freed after the job ended.
    pub dropped_lines: u64,
    /// Their bytes (text only).
    pub dropped_bytes: u64,
    /// When its outcome was decided.
    pub decided_at: Option<Instant>,
    /// Whether its slots were given back. The mapping stays (the API shows where
    /// the ranks ran), so this flag, not the mapping, says a release happened: a late
    /// or duplicate end report must not give the same slots back twice.
    pub released: bool,
    /// Ranks that have not reported since the broker restarted, and when it did.
    pub unconfirmed: Option<(BTreeSet<u32>, Instant)>,
    /// Bytes of its profile as submitted.
    pub profile_bytes: usize,
    /// Whether the database still holds its profile (until `output_keep` after
    /// its end).
    pub profile_kept: bool,
    /// When it started (after a restart: when the broker came back).
    pub started_at: Option<Instant>,
    /// Whether it started ahead of a job it might have delayed ([`crate::queue`]).
    /// Not stored: after a restart every running job counts as an ordinary one
    /// (and clients' past usage starts from nothing).
    pub backfilled: bool,
}

/// What the database keeps of a job: everything but its output lines and clocks.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobRecord {
    /// Its id.
    pub id: String,
    /// Who submitted it.
    pub owner: String,
    /// The profile (XML). The database keeps it apart (written once, deleted
    /// `output_keep` after the job's end): empty in a stored record, and in one
    /// read back for a finished job.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub profile: String,
    /// The profile's `appId`.
    #[serde(default)]
    pub app_id: String,
    /// Bytes of the profile as submitted.
    #[serde(default)]
    pub profile_bytes: usize,
    /// When its outcome was decided, in milliseconds since the Unix epoch.
    #[serde(default)]
    pub decided_unix_ms: Option<u64>,
    /// The job's secret.
    pub secret_hex: String,
    /// Working directory when the profile gives none.
    pub workdir: Option<String>,
    /// Its state.
    pub state: JobState,
    /// Each rank's state.
    pub ranks: Vec<RankState>,
    /// Where its ranks run (the slots it reserves until released).
    pub mapping: Option<Mapping>,
    /// Whether its slots were given back.
    pub released: bool,
    /// Lines printed (the output offset a reader resumes from).
    pub lines_printed: u64,
    /// Bytes of output dropped.
    pub dropped_bytes: u64,
    /// Its place in the queue of submissions (older first).
    pub seq: u64,
}

impl Job {
    /// Lines the job printed, kept or not.
    pub fn lines_printed(&self) -> u64 {
        self.first_line + self.output.len() as u64
    }

    /// Drops the oldest kept line.
    fn drop_oldest(&mut self) -> bool {
        let Some(l) = self.output.pop_front() else {
            return false;
        };
        self.first_line += 1;
        self.output_bytes -= l.text.len() + LINE_OVERHEAD;
        self.dropped_lines += 1;
        self.dropped_bytes += l.text.len() as u64;
        true
    }

    /// Whether nothing of the job runs any more and its slots are free.
    pub fn finished(&self) -> bool {
        self.state.is_terminal()
            && self
                .ranks
                .iter()
                .all(|r| r.is_over() || *r == RankState::Pending)
    }
}

/// What the shell must do.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Ask the frontal of `cluster` to start a process.
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
        /// Clusters where it has processes.
        clusters: Vec<String>,
    },
    /// The job is over: forget its processes in the registry.
    Ended {
        /// The job.
        job: String,
    },
}

/// Why a submission or a request about a job was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum JobError {
    /// The job can never run on this grid.
    #[error("the job cannot run on this grid: {0}")]
    Infeasible(String),
    /// The profile lacks what is needed to start processes.
    #[error("{0}")]
    Incomplete(String),
    /// No such job.
    #[error("no job `{0}`")]
    Unknown(String),
    /// A report about a rank from a cluster that does not run it.
    #[error("{0}")]
    Forbidden(String),
    /// The client has as many jobs waiting as it may.
    #[error("{0}")]
    TooMany(String),
    /// The client's stored profiles would pass what it may store.
    #[error("{0}")]
    TooLarge(String),
}

/// Every job the broker knows, and the slots they hold.
#[derive(Debug)]
pub struct Jobs {
    jobs: BTreeMap<String, Job>,
    queue: VecDeque<String>,
    /// Slots held, by (cluster, node).
    used: BTreeMap<(String, String), u32>,
    /// What is kept at most, and for how long.
    limits: JobLimits,
    /// Ties `now` to the wall clock, for records' ages across restarts.
    anchor: Anchor,
    /// Jobs whose profile is new since the last [`Jobs::take_changes`], with the
    /// profile of those that finished meanwhile.
    new_profiles: BTreeMap<String, Option<String>>,
    /// Jobs whose profile the database is to forget.
    forget_profiles: BTreeSet<String>,
    /// Jobs the database is to forget.
    forget: BTreeSet<String>,
    /// Clients' past usage, for the queue's fair share.
    usage: crate::queue::Usage,
    /// The latest `now` seen (the queue's clock; [`Jobs::start_queued`] has none).
    clock: Instant,
    /// Bytes of output kept, all jobs together.
    output_bytes: usize,
    /// Jobs changed since the last [`Jobs::take_dirty`].
    dirty: BTreeSet<String>,
    /// Submission order, by job.
    seq: BTreeMap<String, u64>,
    /// Whether a database keeps the jobs (finished ones then leave memory,
    /// [`stored`]).
    stored: bool,
}

impl Default for Jobs {
    fn default() -> Self {
        Jobs {
            jobs: BTreeMap::new(),
            queue: VecDeque::new(),
            used: BTreeMap::new(),
            limits: JobLimits::default(),
            anchor: Anchor::now(),
            new_profiles: BTreeMap::new(),
            forget_profiles: BTreeSet::new(),
            forget: BTreeSet::new(),
            usage: crate::queue::Usage::default(),
            clock: Instant::now(),
            output_bytes: 0,
            dirty: BTreeSet::new(),
            seq: BTreeMap::new(),
            stored: false,
        }
    }
}

/// The part of `topo` where `owner`'s jobs may run: the nodes whose helpers map
/// `owner` to a local account (every node, unless some helper restricts).
pub fn for_owner<'a>(
    topo: &'a ResourceTopology,
    owner: &str,
) -> std::borrow::Cow<'a, ResourceTopology> {
    let all = |c: &qcg_jobprofile::topology::Cluster| c.nodes.iter().all(|n| n.runs_jobs_of(owner));
    if topo.clusters.iter().all(all) {
        return std::borrow::Cow::Borrowed(topo);
    }
    let mut t = topo.clone();
    for c in &mut t.clusters {
        c.nodes.retain(|n| n.runs_jobs_of(owner));
    }
    std::borrow::Cow::Owned(t)
}

/// `cluster/node` of every node of `topo` that does not run `owner`'s jobs.
fn refusing_nodes(topo: &ResourceTopology, owner: &str) -> Vec<String> {
    topo.clusters
        .iter()
        .flat_map(|c| {
            c.nodes
                .iter()
                .filter(|n| !n.runs_jobs_of(owner))
                .map(move |n| format!("{}/{}", c.name, n.name))
        })
        .collect()
}

/// Free slots of `topo` once `used` are taken.
pub fn free_slots(topo: &ResourceTopology, used: &BTreeMap<(String, String), u32>) -> FreeSlots {
    let counts = topo
        .clusters
        .iter()
        .map(|c| {
            c.nodes
                .iter()
                .map(|n| {
                    let u = used
                        .get(&(c.name.clone(), n.name.clone()))
                        .copied()
                        .unwrap_or(0);
                    n.slots.saturating_sub(u)
                })
                .collect()
        })
        .collect();
    // The counts are built from the topology itself, so they always match it.
    FreeSlots::from_counts(topo, counts).unwrap_or_else(|_| FreeSlots::all(topo))
}

impl Jobs {
    /// A job by id.
    pub fn get(&self, id: &str) -> Option<&Job> {
        self.jobs.get(id)
    }

    /// Every job, by id.
    pub fn all(&self) -> impl Iterator<Item = &Job> {
        self.jobs.values()
    }

    /// The jobs whose id comes after `after` (all when `None`), by id.
    pub fn after<'a>(&'a self, after: Option<&str>) -> impl Iterator<Item = &'a Job> + 'a {
        use std::ops::Bound;
        let from = match after {
            Some(a) => Bound::Excluded(a.to_string()),
            None => Bound::Unbounded,
        };
        self.jobs.range((from, Bound::Unbounded)).map(|(_, j)| j)
    }

    /// Bytes of output the broker holds, all jobs together (the figure the cap
    /// bounds: at most the cap per job whose output is still kept).
    pub fn output_bytes(&self) -> usize {
        self.output_bytes
    }

    /// The records of the jobs changed since the last call, to store.
    pub fn take_dirty(&mut self) -> Vec<JobRecord> {
        let ids = std::mem::take(&mut self.dirty);
        ids.iter().filter_map(|id| self.record(id)).collect()
    }

    /// What the database keeps of job `id`, with its profile while it is held.
    pub fn record(&self, id: &str) -> Option<JobRecord> {
        self.record_of(id, true)
    }

    fn record_of(&self, id: &str, with_profile: bool) -> Option<JobRecord> {
        let j = self.jobs.get(id)?;
        Some(JobRecord {
            id: j.id.clone(),
            owner: j.submission.owner.clone(),
            profile: if with_profile {
                j.submission.source.clone()
            } else {
                String::new()
            },
            app_id: j.submission.profile.app_id.clone(),
            profile_bytes: j.profile_bytes,
            decided_unix_ms: j.decided_at.map(|t| self.anchor.unix_ms(t)),
            secret_hex: j.submission.secret_hex.clone(),
            workdir: j.submission.workdir.clone(),
            state: j.state.clone(),
            ranks: j.ranks.clone(),
            mapping: j.mapping.clone(),
            released: j.released,
            lines_printed: j.lines_printed(),
            dropped_bytes: j.dropped_bytes,
            seq: self.seq.get(id).copied().unwrap_or(0),
        })
    }

    /// Takes back the jobs a previous run stored, at `now`: their slots are held
    /// again, queued jobs queue again in submission order, and a running job's ranks
    /// have [`RESTORE_GRACE`] to report before the job is failed naming them (see
    /// [`Jobs::tick`]). Output lines are not kept across a restart: a reader is told
    /// they were dropped. A finished job comes back without its profile (only its
    /// `appId`); one past `record_keep` does not come back (the database is told
    /// to forget it). Returns the records that could not be taken back, and why.
    pub fn restore(&mut self, records: Vec<JobRecord>, now: Instant) -> Vec<(String, String)> {
        self.at(now);
        let mut refused = Vec::new();
        let mut records = records;
        records.sort_by_key(|r| r.seq);
        let wall_now = self.anchor.unix_ms(now);
        for r in records {
            let age = r
                .decided_unix_ms
                .map(|t| Duration::from_millis(wall_now.saturating_sub(t)));
            let terminal = r.state.is_terminal();
            let running = r.state == JobState::Running;
            if terminal && age.is_some_and(|a| a >= self.limits.record_keep) && r.released {
                self.forget_profiles.insert(r.id.clone());
                self.forget.insert(r.id);
                continue;
            }
            let profile_kept = !(terminal && age.is_some_and(|a| a >= self.limits.output_keep));
            if !profile_kept {
                self.forget_profiles.insert(r.id.clone());
            }
            let profile = if terminal {
                retention::stub_profile(r.app_id.clone())
            } else if r.profile.is_empty() {
                refused.push((r.id, "its profile is missing from the database".into()));
                continue;
            } else {
                match JobProfile::parse(&r.profile) {
                    Ok(p) => p,
                    Err(e) => {
                        refused.push((r.id, format!("its profile no longer parses: {e}")));
                        continue;
                    }
                }
            };
            let source = if terminal { String::new() } else { r.profile };
            if !r.released {
                for p in r.mapping.iter().flat_map(|m| m.ranks.iter()) {
                    *self
                        .used
                        .entry((p.cluster.clone(), p.node.clone()))
                        .or_default() += 1;
                }
            }
            let unconfirmed = (r.state == JobState::Running).then(|| {
                let ranks = r
                    .ranks
                    .iter()
                    .enumerate()
                    .filter(|(_, s)| matches!(s, RankState::Starting | RankState::Running))
                    .map(|(i, _)| i as u32)
                    .collect();
                (ranks, now)
            });
            if r.state == JobState::Queued {
                self.queue.push_back(r.id.clone());
            }
            self.seq.insert(r.id.clone(), r.seq);
            let job = Job {
                id: r.id.clone(),
                submission: Submission {
                    profile,
                    secret_hex: r.secret_hex,
                    workdir: r.workdir,
                    owner: r.owner,
                    source,
                },
                mapping: r.mapping,
                // An age from before this machine's boot cannot be an `Instant`: such
                // a job starts its retention again from now.
                decided_at: terminal.then(|| age.and_then(|a| now.checked_sub(a)).unwrap_or(now)),
                state: r.state,
                ranks: r.ranks,
                output: VecDeque::new(),
                first_line: r.lines_printed,
                output_bytes: 0,
                dropped_lines: r.lines_printed,
                dropped_bytes: r.dropped_bytes,
                released: r.released,
                unconfirmed,
                profile_bytes: r.profile_bytes,
                profile_kept,
                started_at: running.then_some(now),
                backfilled: false,
            };
            self.jobs.insert(r.id, job);
        }
        refused
    }

    /// A report about `rank` of job `id` came: it lives (or lived) on.
    fn confirm(&mut self, id: &str, rank: u32) {
        self.dirty.insert(id.to_string());
        if let Some(job) = self.jobs.get_mut(id) {
            if let Some((left, _)) = &mut job.unconfirmed {
                left.remove(&rank);
                if left.is_empty() {
                    job.unconfirmed = None;
                }
            }
        }
    }

    /// `cluster` says which processes run on `nodes` (a frontal or a helper that
    /// (re)connected). Each listed process of a job taken back after a restart is
    /// confirmed; a rank of such a job placed on one of `nodes` and not listed is
    /// gone, and its job fails now, naming it and its node, instead of after
    /// [`RESTORE_GRACE`]. Jobs that did not come from a restart are left alone (their
    /// ends are reported one by one).
    pub fn running(
        &mut self,
        cluster: &str,
        nodes: &[String],
        processes: &[qcg_proto::ProcName],
        now: Instant,
    ) -> Vec<Action> {
        self.at(now);
        for p in processes {
            let placed_here = self
                .jobs
                .get(&p.job)
                .and_then(|j| j.mapping.as_ref())
                .and_then(|m| m.ranks.get(p.rank as usize))
                .is_some_and(|r| r.cluster == cluster && nodes.contains(&r.node));
            if placed_here {
                self.confirm(&p.job, p.rank);
            }
        }
        let mut actions = Vec::new();
        let ids: Vec<String> = self
            .jobs
            .values()
            .filter(|j| j.state == JobState::Running && j.unconfirmed.is_some())
            .map(|j| j.id.clone())
            .collect();
        for id in ids {
            let Some(job) = self.jobs.get_mut(&id) else {
                continue;
            };
            let (Some(mapping), Some((left, _))) = (&job.mapping, &job.unconfirmed) else {
                continue;
            };
            let gone: Vec<(u32, String)> = left
                .iter()
                .filter_map(|&r| {
                    let p = mapping.ranks.get(r as usize)?;
                    (p.cluster == cluster && nodes.contains(&p.node))
                        .then(|| (r, format!("rank {r} on {}/{}", p.cluster, p.node)))
                })
                .collect();
            let Some((first, _)) = gone.first().cloned() else {
                continue;
            };
            self.dirty.insert(id.clone());
            for (r, _) in &gone {
                if let Some(s) = job.ranks.get_mut(*r as usize) {
                    *s = RankState::Lost;
                }
            }
            let names: Vec<String> = gone.into_iter().map(|(_, n)| n).collect();
            job.unconfirmed = None;
            job.state = JobState::Failed {
                rank: first,
                reason: format!(
                    "was lost across a broker restart: {} no longer ran when the broker came back",
                    names.join(", ")
                ),
            };
            job.decided_at = Some(now);
            actions.push(kill(job));
            actions.extend(self.release_if_finished(&id));
        }
        actions
    }

    /// Slots held, by (cluster, node).
    pub fn used(&self) -> &BTreeMap<(String, String), u32> {
        &self.used
    }

    /// Submits a job under `id`: refused when it cannot run even on an empty grid,
    /// started when the free slots allow, queued otherwise.
    pub fn submit(
        &mut self,
        id: String,
        submission: Submission,
        topo: &ResourceTopology,
    ) -> Result<Vec<Action>, JobError> {
        if submission.profile.task.execution.is_none() {
            return Err(JobError::Incomplete(
                "the profile has no <execution> with an <executable>: nothing to run".into(),
            ));
        }
        self.check_client_limits(&submission.owner, submission.source.len())?;
        let mine = for_owner(topo, &submission.owner);
        if let Err(e) = schedule(
            &submission.profile,
            &mine,
            &FreeSlots::all(&mine),
            Strategy::Spread,
        ) {
            let without = refusing_nodes(topo, &submission.owner);
            if without.is_empty() {
                return Err(JobError::Infeasible(e.to_string()));
            }
            return Err(JobError::Infeasible(format!(
                "{e}; {} node(s) do not run jobs of `{}`, no local account being mapped to it \
                 ([accounts] of their helpers): {}",
                without.len(),
                submission.owner,
                without.join(", ")
            )));
        }
        let n = usize::try_from(submission.profile.total_processes()).unwrap_or(usize::MAX);
        let seq = self.seq.values().max().map_or(0, |s| s + 1);
        self.seq.insert(id.clone(), seq);
        self.dirty.insert(id.clone());
        self.new_profiles.insert(id.clone(), None);
        let profile_bytes = submission.source.len();
        self.jobs.insert(
            id.clone(),
            Job {
                id: id.clone(),
                submission,
                mapping: None,
                state: JobState::Queued,
                ranks: vec![RankState::Pending; n],
                output: VecDeque::new(),
                first_line: 0,
                output_bytes: 0,
                dropped_lines: 0,
                dropped_bytes: 0,
                decided_at: None,
                released: false,
                unconfirmed: None,
                profile_bytes,
                profile_kept: true,
                started_at: None,
                backfilled: false,
            },
        );
        self.queue.push_back(id);
        Ok(self.start_queued(topo))
    }

    /// Moves the clock the queue's fair share reads forward to `now`.
    pub(crate) fn at(&mut self, now: Instant) {
        self.clock = self.clock.max(now);
    }

    /// What running jobs hold, for [`crate::queue::decide`].
    fn held(&self) -> crate::queue::Held {
        let mut held = crate::queue::Held {
            used: self.used.clone(),
            ..Default::default()
        };
        for j in self.jobs.values().filter(|j| !j.released) {
            let Some(m) = &j.mapping else {
                continue;
            };
            *held.by_owner.entry(j.submission.owner.clone()).or_default() += m.ranks.len() as u32;
            if j.backfilled {
                for r in &m.ranks {
                    *held
                        .backfilled
                        .entry((r.cluster.clone(), r.node.clone()))
                        .or_default() += 1;
                }
            }
        }
        held
    }

    /// Each client's recent usage at `now`: what its ended jobs used (decayed) and
    /// what its running ones used so far.
    fn recent_usage(&self, now: Instant) -> BTreeMap<String, f64> {
        let mut by: BTreeMap<String, f64> = BTreeMap::new();
        for j in self.jobs.values().filter(|j| !j.released) {
            if let (Some(t), Some(m)) = (j.started_at, &j.mapping) {
                *by.entry(j.submission.owner.clone()).or_default() +=
                    m.ranks.len() as f64 * now.saturating_duration_since(t).as_secs_f64();
            }
        }
        for j in self.queue.iter().filter_map(|id| self.jobs.get(id)) {
            let o = &j.submission.owner;
            let past = self.usage.get(o, now);
            *by.entry(o.clone()).or_default() += past;
        }
        by
    }

    /// Starts the waiting jobs [`crate::queue::decide`] picks: fair share between
    /// clients, and backfill around the first job that does not fit.
    pub fn start_queued(&mut self, topo: &ResourceTopology) -> Vec<Action> {
        if self.queue.is_empty() {
            return Vec::new();
        }
        let now = self.clock;
        let usage = self.recent_usage(now);
        let held = self.held();
        let waiting: Vec<crate::queue::Waiting<'_>> = self
            .queue
            .iter()
            .filter_map(|id| self.jobs.get(id))
            .map(|j| crate::queue::Waiting {
                id: &j.id,
                owner: &j.submission.owner,
                profile: &j.submission.profile,
                seq: self.seq.get(&j.id).copied().unwrap_or(0),
            })
            .collect();
        let starts = crate::queue::decide(&waiting, topo, &held, |o| {
            usage.get(o).copied().unwrap_or(0.0)
        });
        let mut actions = Vec::new();
        for s in starts {
            let Some(job) = self.jobs.get_mut(&s.id) else {
                continue;
            };
            self.queue.retain(|q| *q != s.id);
            self.dirty.insert(s.id.clone());
            for r in &s.mapping.ranks {
                *self
                    .used
                    .entry((r.cluster.clone(), r.node.clone()))
                    .or_default() += 1;
            }
            actions.extend(launches(job, &s.mapping));
            job.ranks = vec![RankState::Starting; s.mapping.ranks.len()];
            job.mapping = Some(s.mapping);
            job.state = JobState::Running;
            job.started_at = Some(now);
            job.backfilled = s.backfilled;
        }
        actions
    }

    /// A launch request was answered.
    pub fn launched(
        &mut self,
        id: &str,
        rank: u32,
        result: Result<(), String>,
        now: Instant,
    ) -> Vec<Action> {
        self.at(now);
        self.confirm(id, rank);
        let Some(job) = self.jobs.get_mut(id) else {
            return Vec::new();
        };
        let Some(slot) = job.ranks.get_mut(rank as usize) else {
            return Vec::new();
        };
        match result {
            Ok(()) => {
                if *slot == RankState::Starting {
                    *slot = RankState::Running;
                }
                if job.state.is_terminal() {
                    // Started after the job was stopped: stop it too.
                    return vec![kill(job)];
                }
                Vec::new()
            }
            Err(why) => {
                if !slot.is_over() {
                    *slot = RankState::Exited {
                        exit: ExitReport::not_started(why),
                    };
                }
                self.after_exit(id, rank, now)
            }
        }
    }

    fn check_cluster(&self, id: &str, rank: u32, cluster: &str) -> Result<(), JobError> {
        let job = self
            .jobs
            .get(id)
            .ok_or_else(|| JobError::Unknown(id.into()))?;
        let placed = job
            .mapping
            .as_ref()
            .and_then(|m| m.ranks.get(rank as usize))
            .map(|r| r.cluster.as_str());
        if placed != Some(cluster) {
            return Err(JobError::Forbidden(format!(
                "rank {rank} of job {id} does not run in cluster `{cluster}`"
            )));
        }
        Ok(())
    }

    /// Lines printed by a rank, reported by the frontal of `cluster`.
    pub fn output(
        &mut self,
        id: &str,
        rank: u32,
        cluster: &str,
        lines: Vec<OutputLine>,
    ) -> Result<(), JobError> {
        self.check_cluster(id, rank, cluster)?;
        self.confirm(id, rank);
        let cap = self.limits.output_cap;
        if let Some(job) = self.jobs.get_mut(id) {
            let before = job.output_bytes;
            for l in lines {
                let mut text = l.text;
                if text.len() + LINE_OVERHEAD > cap {
                    // One line longer than the whole cap keeps only its start.
                    let mut cut = cap - LINE_OVERHEAD;
                    while !text.is_char_boundary(cut) {
                        cut -= 1;
                    }
                    job.dropped_bytes += (text.len() - cut) as u64;
                    text.truncate(cut);
                }
                let cost = text.len() + LINE_OVERHEAD;
                while job.output_bytes + cost > cap && job.drop_oldest() {}
                job.output_bytes += cost;
                job.output.push_back(JobLine {
                    rank,
                    stream: l.stream,
                    text,
                });
            }
            self.output_bytes = self.output_bytes - before + job.output_bytes;
            self.enforce_total_cap(id);
        }
        Ok(())
    }

    /// A rank ended, reported by the frontal of `cluster`.
    pub fn exited(
        &mut self,
        id: &str,
        rank: u32,
        cluster: &str,
        exit: ExitReport,
        now: Instant,
    ) -> Result<Vec<Action>, JobError> {
        self.at(now);
        self.check_cluster(id, rank, cluster)?;
        self.confirm(id, rank);
        if let Some(slot) = self
            .jobs
            .get_mut(id)
            .and_then(|j| j.ranks.get_mut(rank as usize))
        {
            *slot = RankState::Exited { exit };
        }
        Ok(self.after_exit(id, rank, now))
    }

    fn after_exit(&mut self, id: &str, rank: u32, now: Instant) -> Vec<Action> {
        let mut actions = Vec::new();
        let Some(job) = self.jobs.get_mut(id) else {
            return actions;
        };
        if let Some(RankState::Exited { exit }) = job.ranks.get(rank as usize) {
            if !exit.success() && job.state == JobState::Running {
                job.state = JobState::Failed {
                    rank,
                    reason: exit.to_string(),
                };
                job.decided_at = Some(now);
                actions.push(kill(job));
            }
        }
        if job.state == JobState::Running && job.ranks.iter().all(RankState::is_over) {
            job.state = JobState::Succeeded;
            job.decided_at = Some(now);
        }
        actions.extend(self.release_if_finished(id));
        actions
    }

    /// Frees the slots of a finished job and starts what now fits.
    fn release_if_finished(&mut self, id: &str) -> Vec<Action> {
        let Some(job) = self.jobs.get_mut(id) else {
            return Vec::new();
        };
        if job.released || !job.finished() {
            return Vec::new();
        }
        job.released = true;
        if let (Some(t), Some(m)) = (job.started_at, &job.mapping) {
            let end = job.decided_at.unwrap_or(self.clock).max(t);
            let core_seconds = m.ranks.len() as f64 * (end - t).as_secs_f64();
            self.usage
                .charge(&job.submission.owner, core_seconds, self.clock);
        }
        if let Some(mapping) = &job.mapping {
            for r in &mapping.ranks {
                let key = (r.cluster.clone(), r.node.clone());
                if let Some(u) = self.used.get_mut(&key) {
                    *u = u.saturating_sub(1);
                    if *u == 0 {
                        self.used.remove(&key);
                    }
                }
            }
        }
        self.lighten(id);
        vec![Action::Ended {
            job: id.to_string(),
        }]
    }

    /// Cancels a job: queued, it is dropped; running, its processes are killed.
    pub fn cancel(&mut self, id: &str, now: Instant) -> Result<Vec<Action>, JobError> {
        self.at(now);
        self.dirty.insert(id.to_string());
        let job = self
            .jobs
            .get_mut(id)
            .ok_or_else(|| JobError::Unknown(id.into()))?;
        match job.state {
            JobState::Queued => {
                job.state = JobState::Cancelled;
                job.decided_at = Some(now);
                self.queue.retain(|q| q != id);
                self.lighten(id);
                Ok(Vec::new())
            }
            JobState::Running => {
                job.state = JobState::Cancelled;
                job.decided_at = Some(now);
                let mut actions = vec![kill(job)];
                actions.extend(self.release_if_finished(id));
                Ok(actions)
            }
            _ => Ok(Vec::new()),
        }
    }

    /// The frontal of `cluster` went away: its processes cannot be reached (nor their
    /// ends reported), so every job running there fails, naming the first such rank,
    /// and its other processes are stopped.
    pub fn cluster_lost(&mut self, cluster: &str, now: Instant) -> Vec<Action> {
        self.at(now);
        let ids: Vec<String> = self
            .jobs
            .values()
            .filter(|j| !j.finished())
            .filter(|j| {
                j.mapping
                    .as_ref()
                    .is_some_and(|m| m.ranks.iter().any(|r| r.cluster == cluster))
            })
            .map(|j| j.id.clone())
            .collect();
        let mut actions = Vec::new();
        for id in ids {
            self.dirty.insert(id.clone());
            let Some(job) = self.jobs.get_mut(&id) else {
                continue;
            };
            let ranks: Vec<usize> = job
                .mapping
                .iter()
                .flat_map(|m| m.ranks.iter())
                .filter(|r| r.cluster == cluster)
                .map(|r| r.rank)
                .collect();
            for &r in &ranks {
                if let Some(s) = job.ranks.get_mut(r) {
                    if !s.is_over() {
                        *s = RankState::Lost;
                    }
                }
            }
            if job.state == JobState::Running {
                job.state = JobState::Failed {
                    rank: ranks.first().copied().unwrap_or(0) as u32,
                    reason: format!("was lost: the frontal of cluster `{cluster}` went away"),
                };
                job.decided_at = Some(now);
                actions.push(kill(job));
            }
            actions.extend(self.release_if_finished(&id));
        }
        actions
    }

    /// The helper of `node` (in `cluster`) stayed away past the broker's grace: every
    /// running job with a live rank there fails with `reason`, naming the first such
    /// rank, and its other processes are stopped.
    pub fn node_lost(
        &mut self,
        cluster: &str,
        node: &str,
        reason: &str,
        now: Instant,
    ) -> Vec<Action> {
        let here =
            |r: &&qcg_jobprofile::sched::RankPlacement| r.cluster == cluster && r.node == node;
        let ids: Vec<String> = self
            .jobs
            .values()
            .filter(|j| j.state == JobState::Running)
            .filter(|j| {
                j.mapping
                    .as_ref()
                    .is_some_and(|m| m.ranks.iter().any(|r| here(&r)))
            })
            .map(|j| j.id.clone())
            .collect();
        let mut actions = Vec::new();
        for id in ids {
            self.dirty.insert(id.clone());
            let Some(job) = self.jobs.get_mut(&id) else {
                continue;
            };
            let ranks: Vec<usize> = job
                .mapping
                .iter()
                .flat_map(|m| m.ranks.iter())
                .filter(here)
                .map(|r| r.rank)
                .filter(|&r| job.ranks.get(r).is_some_and(|s| !s.is_over()))
                .collect();
            if ranks.is_empty() {
                continue;
            }
            for &r in &ranks {
                job.ranks[r] = RankState::Lost;
            }
            job.state = JobState::Failed {
                rank: ranks[0] as u32,
                reason: reason.to_string(),
            };
            job.decided_at = Some(now);
            actions.push(kill(job));
            actions.extend(self.release_if_finished(&id));
        }
        actions
    }

    /// The clock: processes of a stopped job that stayed silent past [`KILL_GRACE`]
    /// are given up, and their slots freed; finished jobs' output, profiles and
    /// records past their retention are dropped ([`JobLimits`]).
    pub fn tick(&mut self, topo: &ResourceTopology, now: Instant) -> Vec<Action> {
        self.at(now);
        let stale: Vec<String> = self
            .jobs
            .values()
            .filter(|j| {
                !j.finished()
                    && j.decided_at
                        .is_some_and(|t| now.saturating_duration_since(t) >= KILL_GRACE)
            })
            .map(|j| j.id.clone())
            .collect();
        let mut actions = Vec::new();
        // Running jobs taken back after a restart whose processes stayed silent.
        let silent: Vec<String> = self
            .jobs
            .values()
            .filter(|j| {
                j.state == JobState::Running
                    && j.unconfirmed
                        .as_ref()
                        .is_some_and(|(_, t)| now.saturating_duration_since(*t) >= RESTORE_GRACE)
            })
            .map(|j| j.id.clone())
            .collect();
        for id in silent {
            self.dirty.insert(id.clone());
            let Some(job) = self.jobs.get_mut(&id) else {
                continue;
            };
            let Some((left, _)) = job.unconfirmed.take() else {
                continue;
            };
            for &r in &left {
                if let Some(s) = job.ranks.get_mut(r as usize) {
                    *s = RankState::Lost;
                }
            }
            let names: Vec<String> = left.iter().map(|r| r.to_string()).collect();
            job.state = JobState::Failed {
                rank: left.first().copied().unwrap_or(0),
                reason: format!(
                    "was lost across a broker restart: rank(s) {} did not report within {} s",
                    names.join(", "),
                    RESTORE_GRACE.as_secs()
                ),
            };
            job.decided_at = Some(now);
            actions.push(kill(job));
            actions.extend(self.release_if_finished(&id));
        }
        self.expire(now);
        self.usage.prune(now);
        for id in stale {
            self.dirty.insert(id.clone());
            if let Some(job) = self.jobs.get_mut(&id) {
                for r in job.ranks.iter_mut() {
                    if !r.is_over() && *r != RankState::Pending {
                        *r = RankState::Lost;
                    }
                }
            }
            actions.extend(self.release_if_finished(&id));
        }
        if actions.iter().any(|a| matches!(a, Action::Ended { .. })) {
            actions.extend(self.start_queued(topo));
        }
        actions
    }
}

fn kill(job: &Job) -> Action {
    let mut clusters: Vec<String> = job
        .mapping
        .iter()
        .flat_map(|m| m.ranks.iter().map(|r| r.cluster.clone()))
        .collect();
    clusters.sort();
    clusters.dedup();
    Action::Kill {
        job: job.id.clone(),
        clusters,
    }
}

fn launches(job: &Job, mapping: &Mapping) -> Vec<Action> {
    let p = &job.submission.profile;
    let Some(exec) = &p.task.execution else {
        return Vec::new();
    };
    let groups: Vec<(String, u32)> = p
        .task
        .groups
        .iter()
        .map(|g| (g.id.clone(), g.processes))
        .collect();
    let groups = qcg_proto::groups::encode(&groups);
    let size = mapping.ranks.len() as u32;
    // Where every rank runs (cluster/node, `;` between ranks), for the collectives;
    // the same form `qcg run` gives (QCG_TOPOLOGY).
    let clean = |x: &str| x.replace(['/', ';'], "_");
    let topology = mapping
        .ranks
        .iter()
        .map(|r| format!("{}/{}", clean(&r.cluster), clean(&r.node)))
        .collect::<Vec<_>>()
        .join(";");
    mapping
        .ranks
        .iter()
        .map(|r| {
            let mut env: Vec<(String, String)> = exec
                .environment
                .iter()
                .map(|v| (v.name.clone(), v.value.clone()))
                .collect();
            let vars = qcg_proto::env::JobVars {
                job: job.id.clone(),
                rank: r.rank as u32,
                size,
                secret_hex: job.submission.secret_hex.clone(),
                groups: Some(groups.clone()),
                topology: Some(topology.clone()),
            };
            env.extend(vars.pairs().into_iter().map(|(k, v)| (k.to_string(), v)));
            Action::Launch {
                cluster: r.cluster.clone(),
                spec: LaunchSpec {
                    job: job.id.clone(),
                    rank: r.rank as u32,
                    node: r.node.clone(),
                    executable: exec.executable.clone(),
                    args: exec.arguments.clone(),
                    env,
                    working_directory: exec
                        .working_directory
                        .clone()
                        .or_else(|| job.submission.workdir.clone()),
                    owner: Some(job.submission.owner.clone()),
                },
            }
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use qcg_jobprofile::topology::{Cluster, LinkQuality, Node};
    use qcg_proto::ProcName;

    pub(crate) fn topo(clusters: usize, slots: u32) -> ResourceTopology {
        let q = LinkQuality {
            latency_ms: 0.1,
            bandwidth_mbps: 1000.0,
        };
        ResourceTopology {
            clusters: (0..clusters)
                .map(|c| Cluster {
                    name: format!("c{c}"),
                    nodes: vec![Node {
                        name: format!("c{c}-n0"),
                        slots,
                        cpu_speed_mhz: 2000.0,
                        memory_mib: 4096.0,
                        submitters: None,
                    }],
                    internal: q,
                })
                .collect(),
            links: (0..clusters)
                .flat_map(|a| (a + 1..clusters).map(move |b| (a, b)))
                .map(|(a, b)| qcg_jobprofile::topology::InterLink {
                    a: format!("c{a}"),
                    b: format!("c{b}"),
                    quality: LinkQuality {
                        latency_ms: 1.0,
                        bandwidth_mbps: 100.0,
                    },
                })
                .collect(),
        }
    }

    pub(crate) fn sub(procs: u32) -> Submission {
        let xml = format!(
            r#"<grmsJob appId="t"><task taskId="t"><resourcesDescription><topology>
            <group groupId="g"><processes><processesCount><value>{procs}</value></processesCount></processes></group>
            </topology></resourcesDescription><execution type="x"><executable>/bin/true</executable></execution></task></grmsJob>"#
        );
        Submission {
            profile: JobProfile::parse(&xml).unwrap(),
            secret_hex: "00".repeat(32),
            workdir: Some("/tmp".into()),
            owner: "alice".into(),
            source: xml.clone(),
        }
    }

    pub(crate) fn launched_all(jobs: &mut Jobs, id: &str, actions: &[Action], now: Instant) {
        for a in actions {
            if let Action::Launch { spec, .. } = a {
                if spec.job == id {
                    assert!(jobs.launched(id, spec.rank, Ok(()), now).is_empty());
                }
            }
        }
    }

    pub(crate) fn ok() -> ExitReport {
        ExitReport {
            code: Some(0),
            ..Default::default()
        }
    }

    #[test]
    fn a_submitter_no_helper_maps_is_refused_at_submission_naming_the_nodes() {
        let mut t = topo(2, 2);
        t.clusters[0].nodes[0].submitters = Some(vec!["bob".into()]);
        let mut jobs = Jobs::default();
        // Two processes fit on c1, the node that runs anyone's jobs.
        let a = jobs.submit("a".into(), sub(2), &t).unwrap();
        assert!(a
            .iter()
            .all(|x| matches!(x, Action::Launch { cluster, .. } if cluster == "c1")));
        // Four need c0's node too, which has no account for alice.
        let e = jobs.submit("b".into(), sub(4), &t).unwrap_err().to_string();
        assert!(
            e.contains("do not run jobs of `alice`") && e.contains("c0/c0-n0"),
            "{e}"
        );
        // No node at all for alice: refused, never queued.
        t.clusters[1].nodes[0].submitters = Some(vec![]);
        let e = jobs.submit("c".into(), sub(1), &t).unwrap_err().to_string();
        assert!(e.contains("c0/c0-n0, c1/c1-n0"), "{e}");
        // Bob's job goes to c0 while alice's holds c1.
        let mut bob = sub(2);
        bob.owner = "bob".into();
        let b = jobs.submit("d".into(), bob, &t).unwrap();
        assert!(b
            .iter()
            .all(|x| matches!(x, Action::Launch { cluster, .. } if cluster == "c0")));
        assert_eq!(jobs.queue.len(), 0);
    }

    #[test]
    fn a_job_runs_reserves_and_frees_its_slots() {
        let t = topo(1, 4);
        let now = Instant::now();
        let mut jobs = Jobs::default();
        let a = jobs.submit("a".into(), sub(3), &t).unwrap();
        assert_eq!(a.len(), 3);
        let Action::Launch { spec, cluster } = &a[0] else {
            panic!("{a:?}")
        };
        assert_eq!(cluster, "c0");
        let env: BTreeMap<_, _> = spec.env.iter().cloned().collect();
        assert_eq!(env["QCG_SIZE"], "3");
        assert_eq!(env["QCG_GROUPS"], "g:3");
        assert_eq!(env["QCG_TOPOLOGY"].split(';').count(), 3);
        assert_eq!(spec.working_directory.as_deref(), Some("/tmp"));
        assert_eq!(jobs.used().values().sum::<u32>(), 3);
        // A second job of 3 does not fit in the one free slot: it waits.
        assert!(jobs.submit("b".into(), sub(3), &t).unwrap().is_empty());
        assert_eq!(jobs.get("b").unwrap().state, JobState::Queued);
        launched_all(&mut jobs, "a", &a, now);
        // Output from the wrong cluster is refused.
        assert!(jobs.output("a", 0, "c9", vec![]).is_err());
        for r in 0..3 {
            let acts = jobs.exited("a", r, "c0", ok(), now).unwrap();
            if r < 2 {
                assert!(acts.is_empty(), "{acts:?}");
            } else {
                assert_eq!(acts[0], Action::Ended { job: "a".into() });
                // ... and b starts on the freed slots.
                assert_eq!(acts.len(), 1);
            }
        }
        assert_eq!(jobs.get("a").unwrap().state, JobState::Succeeded);
        assert!(jobs.used().is_empty());
        let started = jobs.start_queued(&t);
        assert_eq!(started.len(), 3);
        assert_eq!(jobs.get("b").unwrap().state, JobState::Running);
    }

    #[test]
    fn an_infeasible_job_is_refused_and_reserves_nothing() {
        let t = topo(2, 2);
        let mut jobs = Jobs::default();
        let e = jobs.submit("x".into(), sub(5), &t).unwrap_err();
        assert!(matches!(e, JobError::Infeasible(_)), "{e}");
        assert!(e.to_string().contains("5 processes"), "{e}");
        assert!(jobs.used().is_empty());
        assert!(jobs.get("x").is_none());
    }

    #[test]
    fn a_failing_rank_stops_the_job_and_the_slots_wait_for_every_end() {
        let t = topo(2, 2);
        let now = Instant::now();
        let mut jobs = Jobs::default();
        let a = jobs.submit("a".into(), sub(4), &t).unwrap();
        launched_all(&mut jobs, "a", &a, now);
        let bad = ExitReport {
            code: Some(3),
            ..Default::default()
        };
        let acts = jobs.exited("a", 1, "c0", bad, now).unwrap();
        assert_eq!(
            acts,
            vec![Action::Kill {
                job: "a".into(),
                clusters: vec!["c0".into(), "c1".into()]
            }]
        );
        let j = jobs.get("a").unwrap();
        assert_eq!(
            j.state,
            JobState::Failed {
                rank: 1,
                reason: "exited with status 3".into()
            }
        );
        assert!(!j.finished());
        assert_eq!(jobs.used().values().sum::<u32>(), 4);
        // Two silent ranks are given up after the grace period.
        let killed = ExitReport {
            signal: Some(9),
            ..Default::default()
        };
        jobs.exited("a", 0, "c0", killed, now).unwrap();
        assert!(jobs.tick(&t, now + Duration::from_secs(1)).is_empty());
        let acts = jobs.tick(&t, now + KILL_GRACE);
        assert_eq!(acts, vec![Action::Ended { job: "a".into() }]);
        assert!(jobs.used().is_empty());
    }

    #[test]
    fn a_lost_cluster_fails_its_jobs() {
        let t = topo(2, 2);
        let now = Instant::now();
        let mut jobs = Jobs::default();
        let a = jobs.submit("a".into(), sub(4), &t).unwrap();
        launched_all(&mut jobs, "a", &a, now);
        let acts = jobs.cluster_lost("c1", now);
        assert!(
            matches!(&acts[0], Action::Kill { clusters, .. } if clusters.len() == 2),
            "{acts:?}"
        );
        match &jobs.get("a").unwrap().state {
            JobState::Failed { rank, reason } => {
                assert_eq!(*rank, 2);
                assert!(reason.contains("`c1` went away"), "{reason}");
            }
            s => panic!("{s:?}"),
        }
        for r in 0..2 {
            jobs.exited("a", r, "c0", ok(), now).unwrap();
        }
        assert!(jobs.get("a").unwrap().finished());
        assert!(jobs.used().is_empty());
    }

    #[test]
    fn a_launch_failure_fails_the_job_and_cancel_kills() {
        let t = topo(1, 4);
        let now = Instant::now();
        let mut jobs = Jobs::default();
        jobs.submit("a".into(), sub(2), &t).unwrap();
        jobs.launched("a", 0, Ok(()), now);
        let acts = jobs.launched("a", 1, Err("no such file".into()), now);
        assert!(matches!(acts[0], Action::Kill { .. }), "{acts:?}");
        match &jobs.get("a").unwrap().state {
            JobState::Failed { rank, reason } => {
                assert_eq!(*rank, 1);
                assert!(reason.contains("no such file"), "{reason}");
            }
            s => panic!("{s:?}"),
        }
        jobs.submit("b".into(), sub(2), &t).unwrap();
        let acts = jobs.cancel("b", now).unwrap();
        assert!(matches!(acts[0], Action::Kill { .. }), "{acts:?}");
        assert_eq!(jobs.get("b").unwrap().state, JobState::Cancelled);
        // A launch answered after the cancel is killed again.
        assert!(matches!(
            jobs.launched("b", 0, Ok(()), now)[0],
            Action::Kill { .. }
        ));
        assert!(jobs.cancel("nope", now).is_err());
    }

    #[test]
    fn output_is_bounded_in_bytes_oldest_dropped_and_freed_after_the_end() {
        let t = topo(1, 4);
        let now = Instant::now();
        let mut jobs = Jobs::default();
        let cap = 4 << 20;
        jobs.set_limits(JobLimits {
            output_cap: cap,
            output_keep: Duration::from_secs(60),
            ..JobLimits::default()
        });
        let a = jobs.submit("a".into(), sub(1), &t).unwrap();
        launched_all(&mut jobs, "a", &a, now);
        // The issue's flood: 100,000 lines of 16 KB (1.6 GB), in batches.
        let line = "x".repeat(16 << 10);
        for batch in 0..1000 {
            let lines = (0..100)
                .map(|i| OutputLine {
                    stream: Stream::Stdout,
                    text: if batch == 999 && i == 99 {
                        "the last line".into()
                    } else {
                        line.clone()
                    },
                })
                .collect();
            jobs.output("a", 0, "c0", lines).unwrap();
            assert!(jobs.output_bytes() <= cap, "{}", jobs.output_bytes());
        }
        let j = jobs.get("a").unwrap();
        assert_eq!(j.lines_printed(), 100_000);
        assert_eq!(jobs.output_bytes(), j.output_bytes);
        let kept = j.output.len() as u64;
        assert!(kept > 200 && kept < 300, "{kept}");
        assert_eq!(j.dropped_lines, 100_000 - kept);
        assert_eq!(j.dropped_bytes, j.dropped_lines * (16 << 10));
        assert_eq!(j.first_line, j.dropped_lines);
        assert_eq!(j.output.back().unwrap().text, "the last line");
        // One line larger than the cap keeps its start only.
        jobs.output(
            "a",
            0,
            "c0",
            vec![OutputLine {
                stream: Stream::Stderr,
                text: "é".repeat(cap),
            }],
        )
        .unwrap();
        assert!(jobs.output_bytes() <= cap);
        assert_eq!(jobs.get("a").unwrap().output.len(), 1);
        // Freed a while after the end, not before.
        jobs.exited("a", 0, "c0", ok(), now).unwrap();
        jobs.tick(&t, now + Duration::from_secs(59));
        assert!(jobs.output_bytes() > 0);
        jobs.tick(&t, now + Duration::from_secs(60));
        assert_eq!(jobs.output_bytes(), 0);
        let j = jobs.get("a").unwrap();
        assert!(j.output.is_empty());
        assert_eq!(j.lines_printed(), 100_001);
        assert_eq!(j.dropped_lines, 100_001);
    }

    /// Issue 12, item 2: after a restart the frontals' lists of running processes
    /// decide at once (not after RESTORE_GRACE) which jobs live on.
    #[test]
    fn after_a_restart_the_running_lists_keep_live_jobs_and_fail_gone_ones_at_once() {
        let t = topo(2, 2);
        let now = Instant::now();
        let mut jobs = Jobs::default();
        let a = jobs.submit("a".into(), sub(2), &t).unwrap();
        launched_all(&mut jobs, "a", &a, now);
        let b = jobs.submit("b".into(), sub(2), &t).unwrap();
        launched_all(&mut jobs, "b", &b, now);
        let on = |j: &Jobs, id: &str| -> Vec<(String, String)> {
            let m = j.get(id).unwrap().mapping.as_ref().unwrap();
            m.ranks
                .iter()
                .map(|r| (r.cluster.clone(), r.node.clone()))
                .collect()
        };
        let (pa, pb) = (on(&jobs, "a"), on(&jobs, "b"));
        let later = now + Duration::from_secs(5);
        let mut back = Jobs::default();
        assert!(back.restore(jobs.take_dirty(), later).is_empty());
        let procs = |id: &str, ranks: &[u32]| -> Vec<ProcName> {
            ranks.iter().map(|&r| ProcName::new(id, r)).collect()
        };
        // Each cluster lists what runs on its node: all of a, none of b's.
        for c in ["c0", "c1"] {
            let node = format!("{c}-n0");
            let mine = |p: &[(String, String)]| -> Vec<u32> {
                (0..p.len() as u32)
                    .filter(|&r| p[r as usize].0 == c)
                    .collect()
            };
            let b_was_running = back.get("b").unwrap().state == JobState::Running;
            let acts = back.running(c, &[node], &procs("a", &mine(&pa)), later);
            // b fails, and is told to stop, on the first cluster that had one of it.
            let killed = acts
                .iter()
                .any(|x| matches!(x, Action::Kill { job, .. } if job == "b"));
            assert_eq!(killed, b_was_running && !mine(&pb).is_empty(), "{acts:?}");
        }
        assert_eq!(back.get("a").unwrap().state, JobState::Running);
        assert!(back.get("a").unwrap().unconfirmed.is_none());
        match &back.get("b").unwrap().state {
            JobState::Failed { reason, .. } => {
                assert!(
                    reason.contains("no longer ran when the broker came back"),
                    "{reason}"
                );
                assert!(reason.contains("rank 0 on c"), "{reason}");
            }
            s => panic!("{s:?}"),
        }
        // Nothing waits for the grace period any more.
        assert!(back.tick(&t, later + RESTORE_GRACE).is_empty());
        // A report naming processes of a job on another cluster confirms nothing.
        let mut before = Jobs::default();
        let c = before.submit("c".into(), sub(1), &t).unwrap();
        launched_all(&mut before, "c", &c, now);
        let mut again = Jobs::default();
        again.restore(before.take_dirty(), later);
        let home = on(&before, "c")[0].0.clone();
        let other = if home == "c0" { "c1" } else { "c0" };
        again.running(other, &[format!("{other}-n0")], &procs("c", &[0]), later);
        assert!(again.get("c").unwrap().unconfirmed.is_some());
    }

    #[test]
    fn jobs_survive_a_restart_and_silent_ones_fail_naming_their_ranks() {
        let t = topo(1, 4);
        let now = Instant::now();
        let mut jobs = Jobs::default();
        let a = jobs.submit("a".into(), sub(2), &t).unwrap();
        launched_all(&mut jobs, "a", &a, now);
        let b = jobs.submit("b".into(), sub(1), &t).unwrap();
        launched_all(&mut jobs, "b", &b, now);
        jobs.submit("q".into(), sub(3), &t).unwrap();
        jobs.output(
            "a",
            1,
            "c0",
            vec![OutputLine {
                stream: Stream::Stdout,
                text: "hello".into(),
            }],
        )
        .unwrap();
        let records = jobs.take_dirty();
        assert_eq!(records.len(), 3);
        assert!(jobs.take_dirty().is_empty());
        // Through JSON, as the store keeps them.
        let records: Vec<JobRecord> = records
            .iter()
            .map(|r| serde_json::from_slice(&serde_json::to_vec(r).unwrap()).unwrap())
            .collect();

        let later = now + Duration::from_secs(1000);
        let mut back = Jobs::default();
        assert!(back.restore(records, later).is_empty());
        // The same slots are held: the queued job still waits, nothing else fits.
        assert_eq!(back.used(), jobs.used());
        assert!(back.start_queued(&t).is_empty());
        assert_eq!(back.get("q").unwrap().state, JobState::Queued);
        let ja = back.get("a").unwrap();
        assert_eq!(ja.state, JobState::Running);
        assert_eq!(ja.submission.owner, "alice");
        assert_eq!((ja.lines_printed(), ja.dropped_lines), (1, 1));
        // b's process reports; a's stay silent past the grace period.
        back.exited("b", 0, "c0", ok(), later).unwrap();
        assert!(back.tick(&t, later + RESTORE_GRACE / 2).is_empty());
        let acts = back.tick(&t, later + RESTORE_GRACE);
        assert!(
            matches!(&acts[0], Action::Kill { job, .. } if job == "a"),
            "{acts:?}"
        );
        match &back.get("a").unwrap().state {
            JobState::Failed { rank, reason } => {
                assert_eq!(*rank, 0);
                assert!(reason.contains("rank(s) 0, 1 did not report"), "{reason}");
            }
            s => panic!("{s:?}"),
        }
        assert_eq!(back.get("b").unwrap().state, JobState::Succeeded);
        // Both released: the queued job starts on the freed slots.
        assert_eq!(back.get("q").unwrap().state, JobState::Running);
    }

    #[test]
    fn a_late_or_duplicate_exit_report_frees_nothing_twice() {
        let t = topo(1, 4);
        let now = Instant::now();
        let mut jobs = Jobs::default();
        let a = jobs.submit("a".into(), sub(2), &t).unwrap();
        let b = jobs.submit("b".into(), sub(2), &t).unwrap();
        launched_all(&mut jobs, "a", &a, now);
        launched_all(&mut jobs, "b", &b, now);
        for r in 0..2 {
            jobs.exited("a", r, "c0", ok(), now).unwrap();
        }
        assert!(jobs.get("a").unwrap().finished());
        assert_eq!(jobs.used().values().sum::<u32>(), 2, "b holds its 2 slots");
        // The same end reported again, and a late one: b's slots stay held.
        for r in [0, 1, 0] {
            let acts = jobs.exited("a", r, "c0", ok(), now).unwrap();
            assert!(acts.is_empty(), "{acts:?}");
        }
        let acts = jobs.launched("a", 1, Err("late".into()), now);
        assert!(acts.is_empty(), "{acts:?}");
        assert!(jobs.tick(&t, now + KILL_GRACE * 2).is_empty());
        assert_eq!(
            jobs.used().values().sum::<u32>(),
            2,
            "b still holds its 2 slots"
        );
        // The whole grid is not free: a job of 4 must wait for b.
        assert!(jobs.submit("c".into(), sub(4), &t).unwrap().is_empty());
        assert_eq!(jobs.get("c").unwrap().state, JobState::Queued);
    }

    /// Issue 21: one client's 30 queued 4-process jobs kept another's 1-process job
    /// waiting although it fitted the free slots; the job table now asks
    /// [`crate::queue::decide`], and charges usage when a job ends.
    #[test]
    fn another_clients_fitting_job_starts_behind_a_backlog_and_usage_is_charged() {
        let t = topo(2, 3);
        let now = Instant::now();
        let mut jobs = Jobs::default();
        jobs.at(now);
        let mut carol = sub(4);
        carol.owner = "carol".into();
        let a = jobs.submit("carol-0".into(), carol.clone(), &t).unwrap();
        launched_all(&mut jobs, "carol-0", &a, now);
        for i in 1..30 {
            let acts = jobs
                .submit(format!("carol-{i}"), carol.clone(), &t)
                .unwrap();
            assert!(acts.is_empty(), "carol-{i} does not fit: {acts:?}");
        }
        assert_eq!(jobs.used().values().sum::<u32>(), 4);
        let acts = jobs.submit("alice".into(), sub(1), &t).unwrap();
        assert_eq!(acts.len(), 1, "{acts:?}");
        assert_eq!(jobs.get("alice").unwrap().state, JobState::Running);
        // Ahead by fair share (carol holds 4 slots, alice none), not backfilled.
        assert!(!jobs.get("alice").unwrap().backfilled);
        // carol-0 ends after 10 s: 40 core-seconds charged to carol.
        let later = now + Duration::from_secs(10);
        for r in 0..4 {
            let c = jobs.get("carol-0").unwrap().mapping.as_ref().unwrap().ranks[r]
                .cluster
                .clone();
            jobs.exited("carol-0", r as u32, &c, ok(), later).unwrap();
        }
        let u = jobs.usage.get("carol", later);
        assert!((u - 40.0).abs() < 0.01, "{u}");
        // The next of carol's starts on the freed slots (around alice's).
        let acts = jobs.start_queued(&t);
        assert_eq!(acts.len(), 4, "{acts:?}");
        assert_eq!(jobs.get("carol-1").unwrap().state, JobState::Running);
    }
}
