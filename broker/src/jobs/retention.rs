//! What the job table forgets, and when: the pure half of retention.
//!
//! A finished job keeps its output lines and its profile for
//! [`JobLimits::output_keep`] after its end, and its record (state, ranks,
//! placement, offsets) for [`JobLimits::record_keep`]; then [`Jobs::tick`] drops
//! them and lists them in [`Changes`] for the shell to delete from the database
//! (which it then compacts, [`crate::store`]). All jobs' output together stays
//! under [`JobLimits::output_total_cap`]: past it the output of the job that ended
//! first goes (named in the log), and while no finished job holds any, the oldest
//! lines of the job that is printing. The profile of a finished job is dropped from
//! memory at once (only its `appId` is shown after the end); the database keeps it
//! until `output_keep`, and a restarted broker does not read it back.
//!
//! Each client may have at most [`JobLimits::queued_per_client`] jobs waiting, and
//! at most [`JobLimits::profile_bytes_per_client`] bytes of profiles stored (those
//! of its jobs not yet past `output_keep`); a submission past either is refused
//! with the limit and the config field that sets it.

use super::{Job, JobError, JobRecord, Jobs};
use std::collections::VecDeque;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How long a finished job's record is kept by default (a week, as long as the
/// submitter is likely to ask `qcg status` about it).
pub const DEFAULT_RECORD_KEEP: Duration = Duration::from_secs(7 * 24 * 3600);
/// Bytes of output kept by default, all jobs together.
pub const DEFAULT_OUTPUT_TOTAL_CAP: usize = 256 << 20;
/// Jobs one client may have waiting by default.
pub const DEFAULT_QUEUED_PER_CLIENT: usize = 200;
/// Bytes of profiles one client may have stored by default.
pub const DEFAULT_PROFILE_BYTES_PER_CLIENT: usize = 64 << 20;

/// What the job table keeps at most, and for how long.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobLimits {
    /// Bytes of output kept per job (config `output_cap_bytes`).
    pub output_cap: usize,
    /// Bytes of output kept, all jobs together (`output_total_cap_bytes`).
    pub output_total_cap: usize,
    /// How long after its end a job's output and profile are kept
    /// (`output_keep_secs`).
    pub output_keep: Duration,
    /// How long after its end a job's record is kept (`job_record_keep_secs`).
    pub record_keep: Duration,
    /// Jobs one client may have waiting (`max_queued_jobs_per_client`).
    pub queued_per_client: usize,
    /// Bytes of profiles one client may have stored
    /// (`max_profile_bytes_per_client`).
    pub profile_bytes_per_client: usize,
    /// How long it takes a client's past usage to count half in the queue's fair
    /// share (`fair_share_half_life_secs`, [`crate::queue`]).
    pub fair_share_half_life: Duration,
}

impl Default for JobLimits {
    fn default() -> Self {
        JobLimits {
            output_cap: super::DEFAULT_OUTPUT_CAP,
            output_total_cap: DEFAULT_OUTPUT_TOTAL_CAP,
            output_keep: super::DEFAULT_OUTPUT_KEEP,
            record_keep: DEFAULT_RECORD_KEEP,
            queued_per_client: DEFAULT_QUEUED_PER_CLIENT,
            profile_bytes_per_client: DEFAULT_PROFILE_BYTES_PER_CLIENT,
            fair_share_half_life: crate::queue::DEFAULT_HALF_LIFE,
        }
    }
}

/// What the database must change: records and profiles to write, and those to
/// delete (after the writes).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Changes {
    /// Records of the jobs that changed, without their profile.
    pub records: Vec<JobRecord>,
    /// Profiles of new jobs: (job, XML).
    pub profiles: Vec<(String, String)>,
    /// Jobs whose profile is to be deleted.
    pub forget_profiles: Vec<String>,
    /// Jobs whose record is to be deleted.
    pub forget: Vec<String>,
    /// Users of jobs the broker did not place ([`crate::users`]), in the order they
    /// changed: `(job, Some(user))` to store, `(job, None)` to delete.
    pub run_owners: Vec<(String, Option<crate::users::Owner>)>,
}

impl Changes {
    /// Whether there is nothing to do.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
            && self.profiles.is_empty()
            && self.forget_profiles.is_empty()
            && self.forget.is_empty()
            && self.run_owners.is_empty()
    }
}

/// Ties the monotonic clock the core runs on to the wall clock records keep, so
/// that an age survives a restart.
#[derive(Clone, Copy, Debug)]
pub struct Anchor {
    /// A moment of the monotonic clock...
    pub instant: Instant,
    /// ...and the same moment in milliseconds since the Unix epoch.
    pub unix_ms: u64,
}

impl Anchor {
    /// The clocks now.
    pub fn now() -> Anchor {
        Anchor {
            instant: Instant::now(),
            unix_ms: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
        }
    }

    /// `t` in milliseconds since the epoch.
    pub fn unix_ms(&self, t: Instant) -> u64 {
        match t.checked_duration_since(self.instant) {
            Some(d) => self.unix_ms.saturating_add(d.as_millis() as u64),
            None => self
                .unix_ms
                .saturating_sub((self.instant - t).as_millis() as u64),
        }
    }
}

/// A profile that holds only the `appId`, for a job that no longer needs the rest.
pub(super) fn stub_profile(app_id: String) -> qcg_jobprofile::profile::JobProfile {
    qcg_jobprofile::profile::JobProfile {
        app_id,
        network_templates: Vec::new(),
        computing_templates: Vec::new(),
        task: qcg_jobprofile::profile::Task {
            id: String::new(),
            groups: Vec::new(),
            execution: None,
        },
    }
}

impl Job {
    /// Drops what only running needed: the profile (its `appId` stays). Returns the
    /// profile's text.
    fn lighten(&mut self) -> String {
        let app_id = std::mem::take(&mut self.submission.profile.app_id);
        self.submission.profile = stub_profile(app_id);
        std::mem::take(&mut self.submission.source)
    }

    /// Frees every kept line (counted as dropped); returns the bytes freed.
    pub(super) fn free_output(&mut self) -> usize {
        let bytes = self.output_bytes;
        while self.drop_oldest() {}
        self.output = VecDeque::new();
        bytes
    }
}

impl Jobs {
    /// Sets what the table keeps at most, and for how long.
    pub fn set_limits(&mut self, limits: JobLimits) {
        self.usage.set_half_life(limits.fair_share_half_life);
        self.limits = JobLimits {
            output_cap: limits.output_cap.max(super::LINE_OVERHEAD + 1),
            ..limits
        };
    }

    /// What the table keeps at most.
    pub fn limits(&self) -> &JobLimits {
        &self.limits
    }

    /// Sets the clocks' anchor (tests give a fixed one).
    pub fn set_anchor(&mut self, anchor: Anchor) {
        self.anchor = anchor;
    }

    /// Drops the profile of finished job `id` from memory; one not yet written to
    /// the database waits for [`Jobs::take_changes`] apart.
    pub(super) fn lighten(&mut self, id: &str) {
        let Some(job) = self.jobs.get_mut(id) else {
            return;
        };
        let source = job.lighten();
        if let Some(pending) = self.new_profiles.get_mut(id) {
            *pending = Some(source);
        }
    }

    /// Refuses a submission by `owner` of a profile of `bytes` bytes that would pass
    /// a per-client limit.
    pub(super) fn check_client_limits(&self, owner: &str, bytes: usize) -> Result<(), JobError> {
        let l = &self.limits;
        let queued = self
            .queue
            .iter()
            .filter_map(|id| self.jobs.get(id))
            .filter(|j| j.submission.owner == owner)
            .count();
        if queued >= l.queued_per_client {
            return Err(JobError::TooMany(format!(
                "`{owner}` already has {queued} jobs waiting, the most one client may have \
                 (max_queued_jobs_per_client = {}); submit again when some have started",
                l.queued_per_client
            )));
        }
        let stored: usize = self
            .jobs
            .values()
            .filter(|j| j.profile_kept && j.submission.owner == owner)
            .map(|j| j.profile_bytes)
            .sum();
        if stored.saturating_add(bytes) > l.profile_bytes_per_client {
            return Err(JobError::TooLarge(format!(
                "`{owner}` has {stored} bytes of job profiles stored; this one of {bytes} bytes \
                 would pass the most one client may store (max_profile_bytes_per_client = {}); \
                 a finished job's profile is freed output_keep_secs ({} s) after its end",
                l.profile_bytes_per_client,
                l.output_keep.as_secs()
            )));
        }
        Ok(())
    }

    /// What the database must change since the last call.
    pub fn take_changes(&mut self) -> Changes {
        let ids = std::mem::take(&mut self.dirty);
        let records = ids
            .iter()
            .filter_map(|id| self.record_of(id, false))
            .collect();
        let profiles = std::mem::take(&mut self.new_profiles)
            .into_iter()
            .filter_map(|(id, lightened)| {
                let source = match lightened {
                    Some(s) => s,
                    None => self.jobs.get(&id)?.submission.source.clone(),
                };
                (!source.is_empty()).then_some((id, source))
            })
            .collect();
        Changes {
            records,
            profiles,
            forget_profiles: std::mem::take(&mut self.forget_profiles)
                .into_iter()
                .collect(),
            forget: std::mem::take(&mut self.forget).into_iter().collect(),
            run_owners: Vec::new(),
        }
    }

    /// Drops the output and profiles of jobs finished more than `output_keep` ago,
    /// and the records of those finished more than `record_keep` ago.
    pub(super) fn expire(&mut self, now: Instant) {
        let (output_keep, record_keep) = (self.limits.output_keep, self.limits.record_keep);
        let mut gone = Vec::new();
        for job in self.jobs.values_mut() {
            if !job.finished() {
                continue;
            }
            let Some(t) = job.decided_at else {
                continue;
            };
            let age = now.saturating_duration_since(t);
            if age >= output_keep {
                self.output_bytes -= job.free_output();
                if job.profile_kept {
                    job.profile_kept = false;
                    self.forget_profiles.insert(job.id.clone());
                }
            }
            if age >= record_keep {
                gone.push(job.id.clone());
            }
        }
        for id in gone {
            self.purge(&id);
        }
        self.evict_stored(now);
    }

    /// Forgets job `id` entirely.
    fn purge(&mut self, id: &str) {
        let Some(mut job) = self.jobs.remove(id) else {
            return;
        };
        self.output_bytes -= job.free_output();
        self.seq.remove(id);
        self.dirty.remove(id);
        self.new_profiles.remove(id);
        self.queue.retain(|q| q != id);
        if job.profile_kept {
            self.forget_profiles.insert(id.to_string());
        }
        self.forget.insert(id.to_string());
    }

    /// Keeps all jobs' output under the total cap after `writer` printed: the
    /// output of the finished job that ended first goes first, then the oldest
    /// lines of `writer` itself.
    pub(super) fn enforce_total_cap(&mut self, writer: &str) {
        let cap = self.limits.output_total_cap;
        while self.output_bytes > cap {
            let victim = self
                .jobs
                .values()
                .filter(|j| j.id != writer && j.finished() && !j.output.is_empty())
                .min_by_key(|j| (j.decided_at, self.seq.get(&j.id).copied()))
                .map(|j| j.id.clone());
            let Some(victim) = victim else {
                break;
            };
            if let Some(j) = self.jobs.get_mut(&victim) {
                let freed = j.free_output();
                self.output_bytes -= freed;
                tracing::info!(
                    job = %victim,
                    bytes = freed,
                    output_total_cap_bytes = cap,
                    "output of a finished job dropped: all jobs' output passed the total cap"
                );
            }
        }
        if self.output_bytes > cap {
            if let Some(j) = self.jobs.get_mut(writer) {
                let before = j.output_bytes;
                while self.output_bytes - (before - j.output_bytes) > cap && j.drop_oldest() {}
                self.output_bytes -= before - j.output_bytes;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{launched_all, ok, sub, topo};
    use super::*;
    use crate::jobs::{Action, JobState};
    use qcg_proto::{OutputLine, Stream};

    fn line(n: usize) -> Vec<OutputLine> {
        vec![OutputLine {
            stream: Stream::Stdout,
            text: "o".repeat(n),
        }]
    }

    /// Runs job `id` of one process to its end at `at`, printing `bytes` of output.
    fn run_to_end(jobs: &mut Jobs, id: &str, bytes: usize, at: Instant) {
        let t = topo(1, 4);
        let a = jobs.submit(id.into(), sub(1), &t).unwrap();
        launched_all(jobs, id, &a, at);
        let cluster = match &a[0] {
            Action::Launch { cluster, .. } => cluster.clone(),
            x => panic!("{x:?}"),
        };
        if bytes > 0 {
            jobs.output(id, 0, &cluster, line(bytes)).unwrap();
        }
        jobs.exited(id, 0, &cluster, ok(), at).unwrap();
    }

    #[test]
    fn finished_jobs_lose_output_and_profile_then_their_record_on_schedule() {
        let t = topo(1, 4);
        let now = Instant::now();
        let mut jobs = Jobs::default();
        jobs.set_limits(JobLimits {
            output_keep: Duration::from_secs(60),
            record_keep: Duration::from_secs(600),
            ..JobLimits::default()
        });
        for i in 0..1000 {
            run_to_end(&mut jobs, &format!("j{i}"), 100, now);
        }
        let first = jobs.take_changes();
        assert_eq!((first.records.len(), first.profiles.len()), (1000, 1000));
        assert!(first.records.iter().all(|r| r.profile.is_empty()));
        // Finished: the profile is gone from memory already, the appId stays.
        let j = jobs.get("j7").unwrap();
        assert!(j.submission.source.is_empty() && j.submission.profile.app_id == "t");
        assert_eq!(
            jobs.output_bytes(),
            1000 * (100 + crate::jobs::LINE_OVERHEAD)
        );
        // Not yet.
        jobs.tick(&t, now + Duration::from_secs(59));
        assert!(jobs.output_bytes() > 0);
        assert!(jobs.take_changes().forget_profiles.is_empty());
        // Output and profiles go at output_keep; the records stay.
        jobs.tick(&t, now + Duration::from_secs(60));
        assert_eq!(jobs.output_bytes(), 0);
        let c = jobs.take_changes();
        assert_eq!((c.forget_profiles.len(), c.forget.len()), (1000, 0));
        assert_eq!(jobs.all().count(), 1000);
        assert_eq!(jobs.get("j7").unwrap().state, JobState::Succeeded);
        // Records go at record_keep.
        jobs.tick(&t, now + Duration::from_secs(600));
        assert_eq!(jobs.all().count(), 0);
        let c = jobs.take_changes();
        assert_eq!((c.forget_profiles.len(), c.forget.len()), (0, 1000));
        assert!(c.records.is_empty());
        // A running job is never forgotten, however old.
        let a = jobs.submit("live".into(), sub(1), &t).unwrap();
        launched_all(&mut jobs, "live", &a, now);
        jobs.tick(&t, now + Duration::from_secs(100_000));
        assert_eq!(jobs.get("live").unwrap().state, JobState::Running);
    }

    #[test]
    fn past_the_total_cap_the_output_of_the_job_that_ended_first_goes() {
        let now = Instant::now();
        let mut jobs = Jobs::default();
        let per = 10_000 + crate::jobs::LINE_OVERHEAD;
        jobs.set_limits(JobLimits {
            output_total_cap: 3 * per,
            ..JobLimits::default()
        });
        for i in 0..3 {
            run_to_end(
                &mut jobs,
                &format!("j{i}"),
                10_000,
                now + Duration::from_secs(i),
            );
        }
        assert_eq!(jobs.output_bytes(), 3 * per);
        run_to_end(&mut jobs, "j3", 10_000, now + Duration::from_secs(3));
        assert_eq!(jobs.output_bytes(), 3 * per);
        let j0 = jobs.get("j0").unwrap();
        assert!(j0.output.is_empty());
        assert_eq!((j0.dropped_lines, j0.dropped_bytes), (1, 10_000));
        for i in 1..4 {
            assert_eq!(jobs.get(&format!("j{i}")).unwrap().output.len(), 1);
        }
        // With no finished job holding output, the writer's oldest lines go.
        let t = topo(1, 4);
        let a = jobs.submit("w".into(), sub(1), &t).unwrap();
        launched_all(&mut jobs, "w", &a, now);
        for _ in 0..10 {
            jobs.output("w", 0, "c0", line(10_000)).unwrap();
            assert!(jobs.output_bytes() <= 3 * per, "{}", jobs.output_bytes());
        }
        let w = jobs.get("w").unwrap();
        assert_eq!((w.output.len(), w.lines_printed()), (3, 10));
        assert!((1..4).all(|i| jobs.get(&format!("j{i}")).unwrap().output.is_empty()));
    }

    #[test]
    fn a_client_past_its_limits_is_refused_naming_the_limit_and_others_are_not() {
        let t = topo(1, 1);
        let now = Instant::now();
        let mut jobs = Jobs::default();
        let one = sub(1).source.len();
        jobs.set_limits(JobLimits {
            queued_per_client: 2,
            profile_bytes_per_client: 4 * one,
            output_keep: Duration::from_secs(60),
            ..JobLimits::default()
        });
        // One runs, two wait: the third waiting one is refused.
        for id in ["a", "b", "c"] {
            jobs.submit(id.into(), sub(1), &t).unwrap();
        }
        let e = jobs.submit("d".into(), sub(1), &t).unwrap_err();
        assert!(matches!(e, JobError::TooMany(_)), "{e}");
        assert!(
            e.to_string().contains("max_queued_jobs_per_client = 2"),
            "{e}"
        );
        assert!(jobs.get("d").is_none());
        // Another client is not held back by alice's jobs.
        let mut bob = sub(1);
        bob.owner = "bob".into();
        jobs.submit("e".into(), bob, &t).unwrap();
        // The first ends: one more may wait, and alice stores 4 profiles: no fifth.
        let acts = jobs.launched("a", 0, Ok(()), now);
        assert!(acts.is_empty());
        jobs.exited("a", 0, "c0", ok(), now).unwrap();
        jobs.start_queued(&t);
        jobs.submit("f".into(), sub(1), &t).unwrap();
        let e = jobs.submit("g".into(), sub(1), &t).unwrap_err();
        assert!(matches!(e, JobError::TooMany(_)), "{e}");
        jobs.cancel("f", now).unwrap();
        let e = jobs.submit("g".into(), sub(1), &t).unwrap_err();
        assert!(matches!(e, JobError::TooLarge(_)), "{e}");
        assert!(
            e.to_string().contains("max_profile_bytes_per_client"),
            "{e}"
        );
        // Once the finished ones' profiles are freed, alice may submit again.
        jobs.tick(&t, now + Duration::from_secs(60));
        jobs.submit("g".into(), sub(1), &t).unwrap();
    }

    #[test]
    fn a_restart_takes_finished_jobs_back_light_and_forgets_those_past_retention() {
        let t = topo(1, 4);
        let then = Instant::now();
        let anchor = Anchor {
            instant: then,
            unix_ms: 1_000_000_000,
        };
        let mut jobs = Jobs::default();
        jobs.set_anchor(anchor);
        run_to_end(&mut jobs, "old", 10, then);
        run_to_end(&mut jobs, "recent", 10, then + Duration::from_secs(3000));
        jobs.submit("q".into(), sub(4), &t).unwrap();
        jobs.submit("q2".into(), sub(4), &t).unwrap();
        let records: Vec<JobRecord> = ["old", "recent", "q", "q2"]
            .iter()
            .map(|id| jobs.record(id).unwrap())
            .collect();
        // The broker comes back two hours after the first job's end, in a new boot:
        // its monotonic clock says something else entirely.
        let mut back = Jobs::default();
        let now = then + Duration::from_secs(5);
        back.set_anchor(Anchor {
            instant: now,
            unix_ms: 1_000_000_000 + 7200 * 1000,
        });
        back.set_limits(JobLimits {
            output_keep: Duration::from_secs(3600),
            record_keep: Duration::from_secs(7000),
            ..JobLimits::default()
        });
        assert!(back.restore(records, now).is_empty());
        assert!(back.get("old").is_none());
        let r = back.get("recent").unwrap();
        assert!(r.submission.source.is_empty() && r.submission.profile.task.groups.is_empty());
        assert!(
            !r.profile_kept,
            "its output_keep has passed: its profile goes"
        );
        assert!(!back.get("q").unwrap().submission.source.is_empty());
        let c = back.take_changes();
        assert_eq!(c.forget, vec!["old".to_string()]);
        assert_eq!(
            c.forget_profiles,
            vec!["old".to_string(), "recent".to_string()]
        );
        // "recent" ended 4200 s before the restart: it goes 2800 s after it.
        back.tick(&t, now + Duration::from_secs(2799));
        assert!(back.get("recent").is_some());
        back.tick(&t, now + Duration::from_secs(2800));
        assert!(back.get("recent").is_none());
        assert_eq!(back.take_changes().forget, vec!["recent".to_string()]);
    }
}
