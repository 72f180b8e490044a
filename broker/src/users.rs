//! Who a job the broker did not place belongs to.
//!
//! A job of `qcg run` is started by one user on one machine: `qcg run` starts every
//! rank itself, as that user, and each rank registers through a helper of that
//! machine. The broker places no such job, so it cannot say where its ranks may act
//! from; it can say who they are. Helpers name the sender of every request for a job
//! they did not start the sender for ([`qcg_proto::Request::ForUser`]), and this table
//! gives a job to the first user that registers one of its processes, then refuses
//! every request for it from another user or another machine: a local user of any
//! node cannot register a rank of another's job, look its ranks up, or end it.
//!
//! A user is a uid on one machine ([`LocalUser::same`]): one `qcg run` may use the
//! helpers of several clusters on its machine (the embedded grid does), so the
//! cluster is not part of who a user is; it is told in refusals.
//!
//! Requests that name no sender come from processes a helper started for a job the
//! broker placed (checked by [`crate::placed`]), or straight from a frontal; they
//! pass here.
//!
//! A job's user outlives a broker restart: each claim and each forgetting is a
//! change ([`JobUsers::take_changes`]) the shell writes to the database before it
//! answers the request that made it ([`crate::store`]'s `run_owners` table), and a
//! broker started again takes them back ([`JobUsers::restore`]). Otherwise the first
//! registration to reach a restarted broker would claim the job again: a window in
//! which another local user, faster than the frontals sending their processes'
//! registrations again, could take it. A user taken back whose job has no process
//! registered once its cluster's frontal has been back for [`RESTORED_KEEP`] is
//! forgotten ([`JobUsers::prune_restored`]): that job ended while the broker was
//! away (its `qcg run` killed, say), and nothing else would ever end it.

use qcg_proto::{LocalUser, ProcName, Request};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::time::Duration;

/// How long after its cluster's frontal came back a job taken back from the
/// database may have none of its processes registered before its user is
/// forgotten. The frontal sends its processes' registrations again as soon as it
/// is connected, so a live job is claimed again within seconds; an hour leaves a
/// job whose processes all left for a while (between two phases) its user.
pub const RESTORED_KEEP: Duration = Duration::from_secs(3600);

/// Jobs whose user is remembered at once; past it, the jobs with no registered
/// process are forgotten first, and a registration for yet another job is refused.
pub const MAX_JOBS: usize = crate::registry::MAX_REPORTED;

/// A job's user and the cluster it first registered from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Owner {
    /// The user.
    pub user: LocalUser,
    /// The cluster of its first registration.
    pub cluster: String,
}

/// The user of each job the broker did not place, while the job lasts.
#[derive(Debug, Default)]
pub struct JobUsers {
    owners: HashMap<String, Owner>,
    /// What changed since the last [`JobUsers::take_changes`]: a job's user, or
    /// `None` for a job forgotten.
    changes: Vec<(String, Option<Owner>)>,
    /// Jobs taken back from the database that no registration has claimed again.
    restored: HashSet<String>,
}

/// The jobs a request acts for: one, or two for a request between two processes.
pub fn jobs_of(req: &Request) -> Vec<&str> {
    fn pair<'r>(a: &'r ProcName, b: &'r ProcName) -> Vec<&'r str> {
        if a.job == b.job {
            vec![a.job.as_str()]
        } else {
            vec![a.job.as_str(), b.job.as_str()]
        }
    }
    match req {
        Request::Register(ap) => vec![ap.process.job.as_str()],
        Request::Unregister { process } | Request::Subscribe { process } => {
            vec![process.job.as_str()]
        }
        Request::JobEnd { job } => vec![job.as_str()],
        Request::Lookup { from, target }
        | Request::Report { from, target, .. }
        | Request::Rendezvous { from, target, .. }
        | Request::WatchSyn { from, target, .. }
        | Request::Syn { from, target, .. } => pair(from, target),
        _ => Vec::new(),
    }
}

impl JobUsers {
    /// Whether `user`, through the frontal of `cluster`, may send `req`: every job
    /// it acts for is unclaimed or `user`'s. The error names the job, its user and
    /// the sender.
    pub fn check(&self, cluster: &str, user: &LocalUser, req: &Request) -> Result<(), String> {
        for job in jobs_of(req) {
            match self.owners.get(job) {
                Some(o) if !o.user.same(user) => {
                    let machine = if o.user.machine == user.machine {
                        ""
                    } else {
                        " of another machine"
                    };
                    return Err(format!(
                        "job {job} was started by {} (cluster `{}`): {user}{machine} (cluster `{cluster}`) may not act for it",
                        o.user, o.cluster
                    ));
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// `job`'s owner, if it has one.
    pub fn get(&self, job: &str) -> Option<&Owner> {
        self.owners.get(job)
    }

    /// Gives `job` to `user` if it has no owner yet. When the table is full, the
    /// jobs `registered` says have no process left are forgotten first; if it is
    /// still full, the job is not taken and the error says so.
    pub fn claim(
        &mut self,
        job: &str,
        user: &LocalUser,
        cluster: &str,
        registered: impl Fn(&str) -> bool,
    ) -> Result<(), String> {
        if self.owners.contains_key(job) {
            // `check` passed: it is the same user, back.
            if !self.restored.is_empty() {
                self.restored.remove(job);
            }
            return Ok(());
        }
        if self.owners.len() >= MAX_JOBS {
            let changes = &mut self.changes;
            self.owners.retain(|j, _| {
                let keep = registered(j);
                if !keep {
                    changes.push((j.clone(), None));
                }
                keep
            });
            let owners = &self.owners;
            self.restored.retain(|j| owners.contains_key(j));
        }
        if self.owners.len() >= MAX_JOBS {
            return Err(format!(
                "the broker keeps the user of {MAX_JOBS} jobs with processes registered already; job {job} cannot start"
            ));
        }
        let owner = Owner {
            user: user.clone(),
            cluster: cluster.to_string(),
        };
        self.changes.push((job.to_string(), Some(owner.clone())));
        self.owners.insert(job.to_string(), owner);
        Ok(())
    }

    /// The job ended: anyone may use its id again.
    pub fn forget(&mut self, job: &str) {
        if self.owners.remove(job).is_some() {
            self.restored.remove(job);
            self.changes.push((job.to_string(), None));
        }
    }

    /// Takes back the users a broker stored before a restart (as
    /// [`JobUsers::take_changes`] gave them); each counts as restored until a
    /// registration of its job comes again.
    pub fn restore(&mut self, owners: impl IntoIterator<Item = (String, Owner)>) {
        for (job, owner) in owners {
            self.restored.insert(job.clone());
            self.owners.insert(job, owner);
        }
    }

    /// Whether a change waits for [`JobUsers::take_changes`].
    pub fn changed(&self) -> bool {
        !self.changes.is_empty()
    }

    /// How many changes wait for [`JobUsers::take_changes`].
    pub fn pending(&self) -> usize {
        self.changes.len()
    }

    /// What changed since the last call, in order: `(job, Some(user))` to store,
    /// `(job, None)` to delete.
    pub fn take_changes(&mut self) -> Vec<(String, Option<Owner>)> {
        std::mem::take(&mut self.changes)
    }

    /// Forgets the users taken back from the database whose job has no process
    /// `registered` although the frontal of its cluster is `back` (connected for
    /// [`RESTORED_KEEP`]): those jobs ended while the broker was away. Returns how
    /// many were forgotten.
    pub fn prune_restored(
        &mut self,
        back: impl Fn(&str) -> bool,
        registered: impl Fn(&str) -> bool,
    ) -> usize {
        if self.restored.is_empty() {
            return 0;
        }
        let gone: Vec<String> = self
            .restored
            .iter()
            .filter(|j| {
                self.owners
                    .get(j.as_str())
                    .is_none_or(|o| back(&o.cluster) && !registered(j))
            })
            .cloned()
            .collect();
        for j in &gone {
            self.restored.remove(j);
            self.forget(j);
        }
        gone.len()
    }

    /// Users taken back from the database that no registration claimed yet.
    pub fn restored(&self) -> usize {
        self.restored.len()
    }

    /// Jobs with an owner.
    pub fn len(&self) -> usize {
        self.owners.len()
    }

    /// Whether no job has an owner.
    pub fn is_empty(&self) -> bool {
        self.owners.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(uid: u32, machine: &str, node: &str) -> LocalUser {
        LocalUser {
            uid,
            machine: machine.into(),
            node: node.into(),
        }
    }

    fn lookup(job: &str) -> Request {
        Request::Lookup {
            from: ProcName::new(job, 1),
            target: ProcName::new(job, 0),
        }
    }

    #[test]
    fn a_job_is_its_first_users_on_its_machine() {
        let mut t = JobUsers::default();
        let alice = user(1000, "m1", "orsay-1");
        t.claim("j", &alice, "orsay", |_| true).unwrap();
        // Her own ranks, through any helper of her machine and any cluster.
        t.check("rennes", &user(1000, "m1", "rennes-1"), &lookup("j"))
            .unwrap();
        // Another uid on her machine.
        let e = t
            .check("orsay", &user(65534, "m1", "orsay-2"), &lookup("j"))
            .unwrap_err();
        assert!(
            e.contains("job j was started by uid 1000 on node orsay-1 (cluster `orsay`)"),
            "{e}"
        );
        assert!(
            e.contains("uid 65534 on node orsay-2 (cluster `orsay`) may not act for it"),
            "{e}"
        );
        // Her uid on another machine is someone else.
        let e = t
            .check(
                "rennes",
                &user(1000, "m2", "rennes-1"),
                &Request::JobEnd { job: "j".into() },
            )
            .unwrap_err();
        assert!(e.contains("of another machine"), "{e}");
        // A second claim changes nothing.
        t.claim("j", &user(65534, "m1", "x"), "orsay", |_| true)
            .unwrap();
        assert_eq!(t.get("j").unwrap().user, alice);
        // Other jobs are free; a request between two jobs is checked for both.
        t.check("orsay", &user(65534, "m1", "x"), &lookup("k"))
            .unwrap();
        let across = Request::Lookup {
            from: ProcName::new("k", 0),
            target: ProcName::new("j", 0),
        };
        assert!(t.check("orsay", &user(65534, "m1", "x"), &across).is_err());
        t.forget("j");
        t.check("orsay", &user(65534, "m1", "x"), &lookup("j"))
            .unwrap();
    }

    #[test]
    fn claims_and_forgettings_are_changes_and_a_restored_user_keeps_its_job() {
        let mut t = JobUsers::default();
        let alice = user(1000, "m1", "orsay-1");
        t.claim("j", &alice, "orsay", |_| true).unwrap();
        t.claim("j", &alice, "orsay", |_| true).unwrap();
        t.claim("k", &alice, "orsay", |_| true).unwrap();
        t.forget("k");
        t.forget("never");
        let owner = Owner {
            user: alice.clone(),
            cluster: "orsay".into(),
        };
        assert_eq!(
            t.take_changes(),
            vec![
                ("j".into(), Some(owner.clone())),
                ("k".into(), Some(owner.clone())),
                ("k".into(), None)
            ]
        );
        assert!(!t.changed());

        // A broker started again: the stored user, not the first to come, has it.
        let mut back = JobUsers::default();
        back.restore([("j".to_string(), owner.clone())]);
        assert_eq!(back.restored(), 1);
        let mallory = user(65534, "m1", "orsay-2");
        assert!(back.check("orsay", &mallory, &lookup("j")).is_err());
        assert!(back
            .check("orsay", &mallory, &Request::JobEnd { job: "j".into() })
            .is_err());
        assert!(!back.changed(), "a refusal changes nothing");
        // Her registration comes again: hers, and no longer only restored.
        back.check("orsay", &alice, &lookup("j")).unwrap();
        back.claim("j", &alice, "orsay", |_| true).unwrap();
        assert_eq!(back.restored(), 0);
        assert!(!back.changed(), "already stored");
        assert_eq!(back.prune_restored(|_| true, |_| false), 0);
        assert_eq!(back.get("j"), Some(&owner));
    }

    #[test]
    fn a_restored_user_is_forgotten_once_its_cluster_is_back_without_its_processes() {
        let owner = |cluster: &str| Owner {
            user: user(1000, "m1", "n"),
            cluster: cluster.into(),
        };
        let mut t = JobUsers::default();
        t.restore([
            ("live".to_string(), owner("orsay")),
            ("ended".to_string(), owner("orsay")),
            ("away".to_string(), owner("rennes")),
        ]);
        // Only orsay's frontal is back; only `live` has a process registered.
        let n = t.prune_restored(|c| c == "orsay", |j| j == "live");
        assert_eq!(n, 1);
        assert!(t.get("ended").is_none());
        assert!(t.get("live").is_some() && t.get("away").is_some());
        assert_eq!(t.take_changes(), vec![("ended".to_string(), None)]);
        assert_eq!(t.restored(), 2);
    }

    #[test]
    fn a_full_table_forgets_jobs_without_processes_first() {
        let mut t = JobUsers::default();
        let u = user(1, "m", "n");
        for i in 0..MAX_JOBS {
            t.claim(&format!("j{i}"), &u, "c", |_| true).unwrap();
        }
        let e = t.claim("new", &u, "c", |_| true).unwrap_err();
        assert!(e.contains("job new cannot start"), "{e}");
        // Every job but j0 lost its processes.
        t.take_changes();
        t.claim("new", &u, "c", |j| j == "j0").unwrap();
        assert_eq!(t.len(), 2);
        // Each forgotten job is a deletion for the database, then the new claim.
        let c = t.take_changes();
        assert_eq!(c.len(), MAX_JOBS);
        assert_eq!(c.iter().filter(|(_, o)| o.is_none()).count(), MAX_JOBS - 1);
        assert_eq!(c.last().unwrap().0, "new");
    }
}
