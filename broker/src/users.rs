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

use qcg_proto::{LocalUser, ProcName, Request};
use std::collections::HashMap;

/// Jobs whose user is remembered at once; past it, the jobs with no registered
/// process are forgotten first, and a registration for yet another job is refused.
pub const MAX_JOBS: usize = crate::registry::MAX_REPORTED;

/// A job's user and the cluster it first registered from.
#[derive(Clone, Debug, PartialEq, Eq)]
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
            return Ok(());
        }
        if self.owners.len() >= MAX_JOBS {
            self.owners.retain(|j, _| registered(j));
        }
        if self.owners.len() >= MAX_JOBS {
            return Err(format!(
                "the broker keeps the user of {MAX_JOBS} jobs with processes registered already; job {job} cannot start"
            ));
        }
        self.owners.insert(
            job.to_string(),
            Owner {
                user: user.clone(),
                cluster: cluster.to_string(),
            },
        );
        Ok(())
    }

    /// The job ended: anyone may use its id again.
    pub fn forget(&mut self, job: &str) {
        self.owners.remove(job);
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
    fn a_full_table_forgets_jobs_without_processes_first() {
        let mut t = JobUsers::default();
        let u = user(1, "m", "n");
        for i in 0..MAX_JOBS {
            t.claim(&format!("j{i}"), &u, "c", |_| true).unwrap();
        }
        let e = t.claim("new", &u, "c", |_| true).unwrap_err();
        assert!(e.contains("job new cannot start"), "{e}");
        // Every job but j0 lost its processes.
        t.claim("new", &u, "c", |j| j == "j0").unwrap();
        assert_eq!(t.len(), 2);
    }
}
