//! Finished jobs that live only in the database. With a database, a job finished
//! more than [`JobLimits::output_keep`] ago (its output and profile gone, its slots
//! given back) holds nothing the broker needs to run, place or queue jobs: it leaves
//! memory (and a restarted broker does not read it back), and `qcg jobs`, `qcg
//! status` and `/v1/jobs` read its record from the database when asked. So memory
//! grows with the jobs running, queued or recently finished, not with the finished
//! jobs kept for [`JobLimits::record_keep`]; the database drops those past it
//! ([`crate::store::Store::expired_before`], once a minute).
//!
//! [`JobLimits::output_keep`]: super::JobLimits::output_keep
//! [`JobLimits::record_keep`]: super::JobLimits::record_keep

use super::{retention, Job, JobRecord, Jobs, Submission};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

impl Jobs {
    /// Says whether a database keeps the jobs: only then do finished jobs leave
    /// memory.
    pub fn set_stored(&mut self, on: bool) {
        self.stored = on;
    }

    /// Whether stored record `r` must be in memory: unfinished, holding slots, or
    /// finished less than `output_keep` ago (its profile still counts against its
    /// owner's limit).
    pub fn wanted_in_memory(&self, r: &JobRecord, now: Instant) -> bool {
        if !r.state.is_terminal() || !r.released {
            return true;
        }
        let wall_now = self.anchor.unix_ms(now);
        r.decided_unix_ms
            .is_none_or(|t| wall_now.saturating_sub(t) < self.limits.output_keep.as_millis() as u64)
    }

    /// The wall-clock time (ms since the epoch) before which a stored finished
    /// job's record is past `record_keep`.
    pub fn expired_before_ms(&self, now: Instant) -> u64 {
        let keep = self.limits.record_keep.as_millis() as u64;
        self.anchor.unix_ms(now).saturating_sub(keep)
    }

    /// The finished job of stored record `r`, as the API shows it (no output, only
    /// the profile's `appId`).
    pub fn stored_job(&self, r: JobRecord, now: Instant) -> Job {
        let age = r
            .decided_unix_ms
            .map(|t| Duration::from_millis(self.anchor.unix_ms(now).saturating_sub(t)));
        Job {
            id: r.id,
            submission: Submission {
                profile: retention::stub_profile(r.app_id),
                secret_hex: String::new(),
                workdir: r.workdir,
                owner: r.owner,
                source: String::new(),
            },
            mapping: r.mapping,
            state: r.state,
            ranks: r.ranks,
            output: VecDeque::new(),
            first_line: r.lines_printed,
            output_bytes: 0,
            dropped_lines: r.lines_printed,
            dropped_bytes: r.dropped_bytes,
            decided_at: Some(age.and_then(|a| now.checked_sub(a)).unwrap_or(now)),
            released: r.released,
            unconfirmed: None,
            profile_bytes: r.profile_bytes,
            profile_kept: false,
            started_at: None,
            backfilled: false,
        }
    }

    /// With a database, lets finished jobs past `output_keep` whose record is
    /// written leave memory.
    pub(super) fn evict_stored(&mut self, now: Instant) {
        if !self.stored {
            return;
        }
        let keep = self.limits.output_keep;
        let gone: Vec<String> = self
            .jobs
            .values()
            .filter(|j| j.finished() && j.released && !j.profile_kept)
            .filter(|j| {
                j.decided_at
                    .is_some_and(|t| now.saturating_duration_since(t) >= keep)
            })
            .filter(|j| !self.dirty.contains(&j.id) && !self.new_profiles.contains_key(&j.id))
            .map(|j| j.id.clone())
            .collect();
        for id in gone {
            if let Some(mut job) = self.jobs.remove(&id) {
                self.output_bytes -= job.free_output();
            }
            self.seq.remove(&id);
            self.queue.retain(|q| q != &id);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::jobs::tests::{launched_all, ok, sub, topo};
    use crate::jobs::{JobLimits, Jobs};
    use crate::store::Store;
    use std::time::{Duration, Instant};

    #[test]
    fn a_finished_job_leaves_memory_at_output_keep_and_the_database_at_record_keep() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("broker.redb")).unwrap();
        let t = topo(1, 4);
        let now = Instant::now();
        let mut jobs = Jobs::default();
        jobs.set_stored(true);
        jobs.set_limits(JobLimits {
            output_keep: Duration::from_secs(60),
            record_keep: Duration::from_secs(600),
            ..JobLimits::default()
        });
        for id in ["done", "live"] {
            let a = jobs.submit(id.into(), sub(1), &t).unwrap();
            launched_all(&mut jobs, id, &a, now);
        }
        jobs.exited("done", 0, "c0", ok(), now).unwrap();
        store.apply(&jobs.take_changes()).unwrap();
        jobs.tick(&t, now + Duration::from_secs(30));
        store.apply(&jobs.take_changes()).unwrap();
        assert!(jobs.get("done").is_some(), "kept until output_keep");
        jobs.tick(&t, now + Duration::from_secs(61));
        store.apply(&jobs.take_changes()).unwrap();
        jobs.tick(&t, now + Duration::from_secs(62));
        assert!(jobs.get("done").is_none(), "out of memory past output_keep");
        assert!(jobs.get("live").is_some());
        // Still shown from the database.
        let r = store.record("done").unwrap().unwrap();
        let shown = jobs.stored_job(r.clone(), now + Duration::from_secs(62));
        assert!(shown.finished());
        assert_eq!(shown.submission.owner, r.owner);
        // Not taken back by a restart.
        let later = now + Duration::from_secs(62);
        assert!(!jobs.wanted_in_memory(&r, later));
        // Gone from the database past record_keep.
        let before = jobs.expired_before_ms(now + Duration::from_secs(30));
        assert_eq!(store.expired_before(before).unwrap(), 0);
        let before = jobs.expired_before_ms(now + Duration::from_secs(601));
        assert_eq!(store.expired_before(before).unwrap(), 1);
        assert!(store.record("done").unwrap().is_none());
        assert!(store.record("live").unwrap().is_some());
    }
}
