//! The broker's state and the pure handling of control-plane requests.

use crate::plan;
use qcg_proto::{AccessPoint, ClusterConfig, ErrorKind, ProcName, Request, Response, Technique};
use serde::Serialize;
use std::collections::BTreeMap;

/// Cache invalidation to push to every frontal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invalidation {
    /// The job.
    pub job: String,
    /// One rank, or the whole job.
    pub rank: Option<u32>,
}

/// Attempts and their outcomes, per technique.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LinkCounts {
    /// Links made.
    pub ok: u64,
    /// Attempts that failed.
    pub failed: u64,
}

/// Everything the broker knows.
#[derive(Debug, Default)]
pub struct Registry {
    clusters: BTreeMap<String, ClusterConfig>,
    processes: BTreeMap<ProcName, AccessPoint>,
    links: BTreeMap<Technique, LinkCounts>,
    requests: BTreeMap<&'static str, u64>,
    lookups: BTreeMap<&'static str, u64>,
}

impl Registry {
    /// Handles one request from the frontal of `cluster` (`None` until the frontal has
    /// registered its cluster). Returns the answer and, when cached answers went stale,
    /// what frontals must forget.
    pub fn handle(
        &mut self,
        cluster: Option<&str>,
        req: Request,
    ) -> (Response, Option<Invalidation>) {
        *self.requests.entry(req.kind()).or_default() += 1;
        if let Request::RegisterCluster(c) = &req {
            if let Some(own) = cluster {
                if own != c.name {
                    return (
                        Response::error(
                            ErrorKind::Forbidden,
                            format!(
                                "this connection speaks for cluster `{own}`, not `{}`",
                                c.name
                            ),
                        ),
                        None,
                    );
                }
            }
            self.clusters.insert(c.name.clone(), c.clone());
            return (Response::Ok, None);
        }
        let Some(cluster) = cluster else {
            return (
                Response::error(
                    ErrorKind::Forbidden,
                    "register the cluster (RegisterCluster) before any other request",
                ),
                None,
            );
        };
        match req {
            Request::RegisterCluster(_) => unreachable!("handled above"),
            Request::ClusterInfo => match self.clusters.get(cluster) {
                Some(c) => (Response::Cluster(c.clone()), None),
                None => (
                    Response::error(ErrorKind::Internal, "cluster vanished"),
                    None,
                ),
            },
            Request::Register(ap) => {
                if ap.cluster != cluster {
                    return (
                        Response::error(
                            ErrorKind::Forbidden,
                            format!(
                                "the frontal of cluster `{cluster}` cannot register process {} in cluster `{}`",
                                ap.process, ap.cluster
                            ),
                        ),
                        None,
                    );
                }
                let name = ap.process.clone();
                let old = self.processes.insert(name.clone(), ap);
                let inv = old.map(|_| Invalidation {
                    job: name.job.clone(),
                    rank: Some(name.rank),
                });
                (Response::Ok, inv)
            }
            Request::Unregister { process } => {
                match self.processes.get(&process) {
                    Some(ap) if ap.cluster != cluster => {
                        return (
                            Response::error(
                                ErrorKind::Forbidden,
                                format!("process {process} belongs to cluster `{}`", ap.cluster),
                            ),
                            None,
                        )
                    }
                    Some(_) => {}
                    None => {
                        return (
                            Response::error(
                                ErrorKind::UnknownProcess,
                                format!("process {process} is not registered"),
                            ),
                            None,
                        )
                    }
                }
                self.processes.remove(&process);
                (
                    Response::Ok,
                    Some(Invalidation {
                        job: process.job,
                        rank: Some(process.rank),
                    }),
                )
            }
            Request::Lookup { from: _, target } => {
                let resp = self.lookup(cluster, &target);
                let result = match &resp {
                    Response::Plan(_) => "plan",
                    Response::Error(e) if e.kind == ErrorKind::UnknownProcess => "unknown",
                    _ => "no_route",
                };
                *self.lookups.entry(result).or_default() += 1;
                (resp, None)
            }
            Request::Report { technique, ok, .. } => {
                let c = self.links.entry(technique).or_default();
                if ok {
                    c.ok += 1;
                } else {
                    c.failed += 1;
                }
                (Response::Ok, None)
            }
            Request::JobEnd { job } => {
                self.processes.retain(|p, _| p.job != job);
                (Response::Ok, Some(Invalidation { job, rank: None }))
            }
            other @ (Request::NodeInfo
            | Request::Invalidate { .. }
            | Request::RegisterNode(_)
            | Request::ClusterNodes { .. }
            | Request::ProbePeer { .. }
            | Request::Echo { .. }
            | Request::Launch(_)
            | Request::Kill { .. }
            | Request::Output { .. }
            | Request::ProcessExited { .. }) => (
                Response::error(
                    ErrorKind::Forbidden,
                    format!("`{}` is not a request the broker answers", other.kind()),
                ),
                None,
            ),
        }
    }

    /// A job ended: forget its processes; frontals must forget what they cached.
    pub fn end_job(&mut self, job: &str) -> Invalidation {
        self.processes.retain(|p, _| p.job != job);
        Invalidation {
            job: job.to_string(),
            rank: None,
        }
    }

    fn lookup(&self, cluster: &str, target: &ProcName) -> Response {
        let Some(ap) = self.processes.get(target) else {
            return Response::error(
                ErrorKind::UnknownProcess,
                format!("process {target} is not registered"),
            );
        };
        let (Some(src), Some(dst)) = (self.clusters.get(cluster), self.clusters.get(&ap.cluster))
        else {
            return Response::error(
                ErrorKind::Internal,
                format!("cluster `{}` of process {target} is unknown", ap.cluster),
            );
        };
        match plan::plan(src, dst, ap) {
            Ok(p) => Response::Plan(p),
            Err(msg) => Response::error(ErrorKind::NoRoute, msg),
        }
    }

    /// A frontal went away: its cluster stays known (its processes may still be alive
    /// and reachable), but nothing else changes.
    pub fn clusters(&self) -> Vec<ClusterConfig> {
        self.clusters.values().cloned().collect()
    }

    /// Every registered process.
    pub fn processes(&self) -> Vec<AccessPoint> {
        self.processes.values().cloned().collect()
    }

    /// Link outcomes per technique (every known technique listed).
    pub fn links(&self) -> BTreeMap<&'static str, LinkCounts> {
        Technique::ALL
            .iter()
            .map(|t| (t.name(), self.links.get(t).copied().unwrap_or_default()))
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
            "# HELP qcg_broker_lookups_total Lookups answered, by result."
        );
        let _ = writeln!(out, "# TYPE qcg_broker_lookups_total counter");
        for r in ["plan", "unknown", "no_route"] {
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
        let _ = writeln!(out, "# HELP qcg_broker_clusters Clusters known.");
        let _ = writeln!(out, "# TYPE qcg_broker_clusters gauge");
        let _ = writeln!(out, "qcg_broker_clusters {}", self.clusters.len());
        let _ = writeln!(out, "# HELP qcg_broker_processes Processes registered.");
        let _ = writeln!(out, "# TYPE qcg_broker_processes gauge");
        let _ = writeln!(out, "qcg_broker_processes {}", self.processes.len());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use qcg_proto::Policy;

    fn cluster(name: &str, policy: Policy) -> ClusterConfig {
        ClusterConfig {
            name: name.into(),
            policy,
            nat: false,
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

    fn kind(resp: &Response) -> Option<ErrorKind> {
        match resp {
            Response::Error(e) => Some(e.kind),
            _ => None,
        }
    }

    #[test]
    fn requests_before_registering_the_cluster_are_refused() {
        let mut r = Registry::default();
        let (resp, _) = r.handle(None, Request::Register(ap("j", 0, "a")));
        assert_eq!(kind(&resp), Some(ErrorKind::Forbidden));
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
        assert_eq!(kind(&look(&mut r, "a", 1)), Some(ErrorKind::NoRoute));
        assert!(matches!(look(&mut r, "b", 1), Response::Plan(_)));
        // Re-registering a name invalidates cached answers about it.
        let (_, inv) = r.handle(Some("a"), Request::Register(ap("j", 0, "a")));
        assert_eq!(
            inv,
            Some(Invalidation {
                job: "j".into(),
                rank: Some(0)
            })
        );
        let (_, inv) = r.handle(Some("a"), Request::JobEnd { job: "j".into() });
        assert_eq!(
            inv,
            Some(Invalidation {
                job: "j".into(),
                rank: None
            })
        );
        assert!(r.processes().is_empty());
        let m = r.metrics();
        assert!(
            m.contains("qcg_broker_lookups_total{result=\"plan\"} 2"),
            "{m}"
        );
        assert!(
            m.contains("qcg_broker_lookups_total{result=\"no_route\"} 1"),
            "{m}"
        );
    }
}
