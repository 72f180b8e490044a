//! Who may ask what on the helper's unix socket.
//!
//! The socket is mode 0660 (owner the helper's user, group the configured
//! `socket_group`), so only members of that group reach it at all. Each connection's
//! peer credentials (SO_PEERCRED) are then checked against every request that acts
//! for a job (register, unregister, look up, report, rendezvous, watch a SYN,
//! subscribe, end a job):
//!
//! - root may act for any job;
//! - a process the helper started for job J, or any descendant of one, may act for J
//!   only;
//! - any other process acts for the jobs of its user: the first user to act for a job
//!   on this node owns it there, and others are refused. A job the helper launched is
//!   owned by its processes alone. `qcg run` starts its ranks itself, as the user who
//!   runs it, so its ranks (and `qcg run`'s own `JobEnd`) pass by the owner rule.
//!
//! A node sees only its own users, and a job of `qcg run` (which the broker does not
//! place) may be acted for from any node. So each request such a process sends up
//! names its uid and this machine ([`for_user`], [`qcg_proto::LocalUser`]): the
//! broker gives the job to the first user that registers one of its processes (the
//! user that runs `qcg run`, on its machine) and refuses every other one, on any
//! node. Requests of the processes the helper started go up as they are: the broker
//! placed those jobs and checks where they act from.
//!
//! A request naming two processes (`from` and `target`) must keep to one job: a
//! process does not look up, report on or rendezvous with another job's processes.
//!
//! [`decide`] is the pure rule; the rest reads `/proc` and keeps the owners.

use qcg_proto::Request;
use std::collections::HashMap;

/// Most jobs remembered with their owner; past it, unknown jobs are refused to
/// non-root users until a job ends.
pub const MAX_OWNED_JOBS: usize = 65_536;

/// The owner mark of a job the helper launched: no user owns it, only its processes.
pub const LAUNCHED: u32 = u32::MAX;

/// The peer of a connection on the socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Peer {
    /// User id.
    pub uid: u32,
    /// Process id, when the kernel gave one.
    pub pid: Option<u32>,
}

/// The job a request acts for, if it acts for one. Requests naming two processes
/// of different jobs are refused here.
pub fn job_of(req: &Request) -> Result<Option<&str>, String> {
    fn pair<'r>(
        req: &Request,
        from: &'r qcg_proto::ProcName,
        target: &qcg_proto::ProcName,
    ) -> Result<Option<&'r str>, String> {
        if from.job == target.job {
            Ok(Some(from.job.as_str()))
        } else {
            Err(format!(
                "`{}` from job {} about job {}: a process may only ask about its own job",
                req.kind(),
                from.job,
                target.job
            ))
        }
    }
    match req {
        Request::Register(ap) => Ok(Some(ap.process.job.as_str())),
        Request::Unregister { process } | Request::Subscribe { process } => {
            Ok(Some(process.job.as_str()))
        }
        Request::JobEnd { job } => Ok(Some(job.as_str())),
        Request::Lookup { from, target }
        | Request::Report { from, target, .. }
        | Request::Rendezvous { from, target, .. }
        | Request::WatchSyn { from, target, .. } => pair(req, from, target),
        _ => Ok(None),
    }
}

/// Whether `peer` may act for `job`. `launched_job` is the job of the helper-started
/// process `peer` descends from, if any. May record `peer` as the job's owner.
pub fn decide(
    peer: Peer,
    launched_job: Option<&str>,
    job: &str,
    owners: &mut HashMap<String, u32>,
) -> Result<(), String> {
    let who = match peer.pid {
        Some(p) => format!("process {p} (uid {})", peer.uid),
        None => format!("a process of uid {}", peer.uid),
    };
    if peer.uid == 0 {
        // Root may do anything; a job root starts acting for is root's, so that
        // nobody else can take it over.
        if owners.len() < MAX_OWNED_JOBS && !owners.contains_key(job) {
            owners.insert(job.to_string(), 0);
        }
        return Ok(());
    }
    if let Some(own) = launched_job {
        return if own == job {
            Ok(())
        } else {
            Err(format!(
                "{who} was started for job {own} and may not act for job {job}"
            ))
        };
    }
    match owners.get(job) {
        Some(&u) if u == peer.uid => Ok(()),
        Some(&LAUNCHED) => Err(format!(
            "{who} is not one of job {job}'s processes and may not act for it"
        )),
        Some(_) => Err(format!(
            "{who} may not act for job {job}: it belongs to another user"
        )),
        None if owners.len() >= MAX_OWNED_JOBS => Err(format!(
            "{who} may not start acting for job {job}: this helper tracks {MAX_OWNED_JOBS} jobs already"
        )),
        None => {
            owners.insert(job.to_string(), peer.uid);
            Ok(())
        }
    }
}

/// `req` as it goes up to the frontal: naming `user`, when given, as the sender
/// ([`Request::ForUser`]).
pub fn for_user(req: Request, user: Option<qcg_proto::LocalUser>) -> Request {
    match user {
        Some(user) => Request::ForUser {
            user,
            request: Box::new(req),
        },
        None => req,
    }
}

/// This machine's boot id: what tells one machine's uid 1000 from another's. Node
/// images are often cloned with their `/etc/machine-id`; the boot id is drawn at
/// each boot. Empty when `/proc` does not have it (the broker then tells machines
/// apart by nothing but the uid).
pub fn machine_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// The parent pid in the text of `/proc/PID/stat` (the field after the command,
/// which is in parentheses and may itself hold spaces and parentheses).
pub fn parent_from_stat(stat: &str) -> Option<u32> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// `pid` and its ancestors (at most 64), nearest first, from `/proc`.
pub fn lineage(pid: u32) -> Vec<u32> {
    let mut out = vec![pid];
    let mut p = pid;
    for _ in 0..64 {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
            break;
        };
        match parent_from_stat(&stat) {
            Some(pp) if pp > 1 => {
                out.push(pp);
                p = pp;
            }
            _ => break,
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use qcg_proto::ProcName;

    const USER: Peer = Peer {
        uid: 1000,
        pid: Some(42),
    };
    const OTHER: Peer = Peer {
        uid: 65534,
        pid: Some(43),
    };

    #[test]
    fn root_may_do_anything() {
        let mut o = HashMap::from([("j".to_string(), 1000)]);
        let root = Peer { uid: 0, pid: None };
        assert!(decide(root, Some("k"), "j", &mut o).is_ok());
        decide(root, None, "r", &mut o).unwrap();
        assert!(decide(USER, None, "r", &mut o).is_err());
    }

    #[test]
    fn the_first_user_owns_a_job_and_others_are_refused() {
        let mut o = HashMap::new();
        decide(USER, None, "j", &mut o).unwrap();
        decide(USER, None, "j", &mut o).unwrap();
        let e = decide(OTHER, None, "j", &mut o).unwrap_err();
        assert!(e.contains("job j") && e.contains("another user"), "{e}");
        decide(OTHER, None, "mine", &mut o).unwrap();
    }

    #[test]
    fn launched_processes_act_for_their_job_only() {
        let mut o = HashMap::from([("j".to_string(), LAUNCHED)]);
        decide(OTHER, Some("j"), "j", &mut o).unwrap();
        let e = decide(OTHER, Some("j"), "k", &mut o).unwrap_err();
        assert!(e.contains("started for job j"), "{e}");
        let e = decide(USER, None, "j", &mut o).unwrap_err();
        assert!(e.contains("not one of job j's processes"), "{e}");
    }

    #[test]
    fn a_request_about_another_job_is_refused() {
        let req = Request::Lookup {
            from: ProcName::new("a", 0),
            target: ProcName::new("b", 1),
        };
        assert!(job_of(&req).unwrap_err().contains("about job b"));
        assert_eq!(job_of(&Request::NodeInfo).unwrap(), None);
    }

    #[test]
    fn parent_pid_survives_odd_command_names() {
        assert_eq!(parent_from_stat("12 (a) b) c) S 7 12 12 0"), Some(7));
        assert_eq!(parent_from_stat("garbage"), None);
        let me = std::process::id();
        let l = lineage(me);
        assert_eq!(l[0], me);
        assert!(l.len() >= 2, "{l:?}");
    }
}
