//! Where a submitted job may act from: the broker placed each of its ranks on one
//! node of one cluster, so a request that acts for one of those ranks must come from
//! that cluster (the frontal checks the node, [`qcg_proto::Request::Register`] names
//! it), and the job ends when its processes do, never by a `job_end` sent up from a
//! node. Jobs the broker did not place (those of `qcg run`) are not its business here:
//! their helpers keep them to the user who started them.
//!
//! [`check`] is the pure rule; the core ([`crate::core::Core::admit`]) looks the job up and logs
//! refusals.

use qcg_jobprofile::sched::Mapping;
use qcg_proto::{ProcName, Request};

/// What the broker knows of the job a request names.
#[derive(Clone, Copy, Debug)]
pub enum Known<'a> {
    /// Not a submitted job (a `qcg run` job, or none at all).
    Unknown,
    /// Submitted and waiting for slots: none of its ranks runs anywhere yet.
    Unplaced,
    /// Submitted and placed.
    Placed(&'a Mapping),
}

/// The job a request acts for, if any: the process it acts as (with the node it says
/// it runs on, for a registration), or the job it ends.
pub enum Acts<'r> {
    /// For one process of a job.
    As(&'r ProcName, Option<&'r str>),
    /// Ends a whole job.
    Ends(&'r str),
}

/// What `req` acts for, if it acts for a job.
pub fn acts(req: &Request) -> Option<Acts<'_>> {
    Some(match req.by_user().0 {
        Request::Register(ap) => Acts::As(&ap.process, Some(ap.node.as_str())),
        Request::Unregister { process } => Acts::As(process, None),
        Request::Lookup { from, .. }
        | Request::Report { from, .. }
        | Request::Rendezvous { from, .. }
        | Request::Syn { from, .. } => Acts::As(from, None),
        Request::JobEnd { job } => Acts::Ends(job),
        _ => return None,
    })
}

/// Whether a request `req` from the frontal of `cluster` may act for the job it names,
/// which the broker knows as `known`. The error says what was wrong.
pub fn check(cluster: &str, req: &Request, known: Known<'_>) -> Result<(), String> {
    let Some(acts) = acts(req) else {
        return Ok(());
    };
    let mapping = match known {
        Known::Unknown => return Ok(()),
        Known::Unplaced => {
            let job = match acts {
                Acts::As(p, _) => p.job.as_str(),
                Acts::Ends(j) => j,
            };
            return Err(format!(
                "job {job} was submitted to the broker and is not placed yet: none of its ranks runs in cluster `{cluster}`"
            ));
        }
        Known::Placed(m) => m,
    };
    let (process, node) = match acts {
        Acts::Ends(job) => {
            return Err(format!(
                "job {job} was submitted to the broker: it ends when its processes end or \
                 is cancelled through the job API, not by a `job_end` from cluster `{cluster}`"
            ))
        }
        Acts::As(p, node) => (p, node),
    };
    let Some(placed) = mapping.ranks.get(process.rank as usize) else {
        return Err(format!(
            "job {} has {} ranks: there is no rank {}",
            process.job,
            mapping.ranks.len(),
            process.rank
        ));
    };
    if placed.cluster != cluster {
        return Err(format!(
            "rank {} of job {} was placed on node {} of cluster `{}`, not in cluster `{cluster}`",
            process.rank, process.job, placed.node, placed.cluster
        ));
    }
    if let Some(node) = node.filter(|n| *n != placed.node) {
        return Err(format!(
            "rank {} of job {} was placed on node {}, not on node {node}",
            process.rank, process.job, placed.node
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use qcg_jobprofile::sched::{Cost, RankPlacement};
    use qcg_proto::AccessPoint;

    fn mapping() -> Mapping {
        let rank = |rank, cluster: &str, node: &str| RankPlacement {
            rank,
            group: "g".into(),
            group_index: 0,
            cluster: cluster.into(),
            cluster_index: 0,
            node: node.into(),
            node_index: 0,
        };
        Mapping {
            ranks: vec![rank(0, "orsay", "orsay-1"), rank(1, "orsay", "orsay-1")],
            groups: Vec::new(),
            cost: Cost {
                intra_level: 0,
                inter_max_ms: 0.0,
                inter_mean_ms: 0.0,
                intra_max_ms: 0.0,
            },
            explored: 0,
            exhaustive: true,
        }
    }

    fn register(rank: u32, cluster: &str, node: &str) -> Request {
        Request::Register(AccessPoint {
            process: ProcName::new("j", rank),
            cluster: cluster.into(),
            node: node.into(),
            private_addr: "127.0.0.1".parse().unwrap(),
            public_addr: None,
            port: 9,
        })
    }

    #[test]
    fn a_placed_rank_acts_only_from_its_node_and_cluster() {
        let m = mapping();
        let placed = Known::Placed(&m);
        check("orsay", &register(1, "orsay", "orsay-1"), placed).unwrap();
        let e = check("rennes", &register(1, "rennes", "rennes-1"), placed).unwrap_err();
        assert!(
            e.contains("rank 1 of job j was placed on node orsay-1"),
            "{e}"
        );
        assert!(e.contains("not in cluster `rennes`"), "{e}");
        let e = check("orsay", &register(1, "orsay", "orsay-2"), placed).unwrap_err();
        assert!(e.contains("not on node orsay-2"), "{e}");
        let e = check("orsay", &register(7, "orsay", "orsay-1"), placed).unwrap_err();
        assert!(e.contains("no rank 7"), "{e}");
        let lookup = Request::Lookup {
            from: ProcName::new("j", 0),
            target: ProcName::new("j", 1),
        };
        check("orsay", &lookup, placed).unwrap();
        assert!(check("rennes", &lookup, placed).is_err());
    }

    #[test]
    fn a_submitted_job_is_never_ended_from_a_node() {
        let m = mapping();
        let end = Request::JobEnd { job: "j".into() };
        let e = check("orsay", &end, Known::Placed(&m)).unwrap_err();
        assert!(
            e.contains("job j was submitted") && e.contains("`orsay`"),
            "{e}"
        );
        assert!(check("orsay", &end, Known::Unplaced).is_err());
        assert!(check("orsay", &register(0, "orsay", "x"), Known::Unplaced).is_err());
    }

    #[test]
    fn jobs_the_broker_did_not_place_and_other_requests_pass() {
        check(
            "orsay",
            &Request::JobEnd { job: "j".into() },
            Known::Unknown,
        )
        .unwrap();
        check("rennes", &register(1, "rennes", "r"), Known::Unknown).unwrap();
        let m = mapping();
        check("rennes", &Request::ClusterInfo, Known::Placed(&m)).unwrap();
    }
}
