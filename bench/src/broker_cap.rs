//! `qcg-bench broker`: what one broker carries (issue 22, part 7).
//!
//! The real `qcg-broker` binary (started from a config file, as `attacks` does) is
//! driven by simulated frontals: one QUIC connection per cluster with the cluster's
//! own `frontal` certificate from a fresh grid CA, each from its own loopback address
//! (the broker takes at most 64 connections per address, `QUIC_PER_ADDRESS`), speaking the real protocol: `RegisterCluster`, then the processes'
//! `Register` and `Lookup` requests as a frontal forwards them for its helpers, and
//! answers to what the broker asks of a frontal (`ProbePeer` gets a measurement,
//! `Invalidate` empties its cache). No helper or process runs: what is measured is
//! the broker.
//!
//! Phases, timed apart, each with the broker's CPU time from `/proc/PID/stat` (less
//! noisy than wall time on a shared machine) and its resident memory:
//! 1. the clusters connect and register (the broker then probes every pair of
//!    clusters once, which the phase waits for);
//! 2. every process registers (a job's ranks spread over all clusters);
//! 3. lookups: each process looks up every rank of its job in the next
//!    `peer_clusters` clusters (a neighbour exchange between sites), three times:
//!    without the frontal's cache (each lookup reaches the broker), with the cache of
//!    [`qcg_frontal::cache::PlanCache`] empty at first (the first lookup of a target
//!    from a cluster reaches the broker; the others of that cluster wait for its
//!    answer and share it, as the frontal does), and again with the cache full.

use crate::attacks::{mib, status_kib};
use anyhow::{bail, Context, Result};
use qcg_frontal::cache::PlanCache;
use qcg_grid::services::ServiceGrid;
use qcg_proto::quic;
use qcg_proto::tls::{Ca, Role};
use qcg_proto::{AccessPoint, ClusterConfig, Nat, Policy, ProcName, Request, Response};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What to load the broker with.
#[derive(Clone, Debug, clap::Args)]
pub struct Args {
    /// Clusters (one simulated frontal each).
    #[arg(long, default_value_t = 100)]
    pub clusters: usize,
    /// Processes in all.
    #[arg(long, default_value_t = 10_000)]
    pub processes: usize,
    /// Ranks per job (the broker takes at most `max_registrations_per_job`, 4096 by
    /// default).
    #[arg(long, default_value_t = 1000)]
    pub per_job: usize,
    /// Each process looks up the ranks of its job in this many next clusters.
    #[arg(long, default_value_t = 2)]
    pub peer_clusters: usize,
    /// Requests in flight per frontal.
    #[arg(long, default_value_t = 4)]
    pub inflight: usize,
}

/// A simulated frontal: its connection to the broker and its plan cache.
struct Frontal {
    conn: quinn::Connection,
    cache: Arc<PlanCache>,
    _endpoint: quinn::Endpoint,
}

/// The broker's user+system CPU time so far.
fn cpu(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces) in parentheses.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<u64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    // utime and stime are fields 14 and 15 of the line; 12 and 13 after `) S`.
    let ticks = f.get(11).copied().unwrap_or(0) + f.get(12).copied().unwrap_or(0);
    // In USER_HZ, which Linux fixes at 100 for /proc.
    Duration::from_millis(ticks * 10)
}

/// One phase's figures.
struct Phase {
    name: String,
    requests: usize,
    to_broker: u64,
    wall: Duration,
    cpu: Duration,
    latencies_ms: Vec<f64>,
    failed: u64,
}

impl Phase {
    fn row(&mut self) -> String {
        self.latencies_ms.sort_by(f64::total_cmp);
        let pct = |p: f64| crate::percentile(&self.latencies_ms, p);
        let per_req_us = if self.to_broker == 0 {
            "-".to_string()
        } else {
            format!(
                "{:.0}",
                self.cpu.as_secs_f64() * 1e6 / self.to_broker as f64
            )
        };
        format!(
            "{:<34} {:>9} {:>9} {:>8.2} {:>10.0} {:>11} {:>8.2} {:>8.2} {:>6}",
            self.name,
            self.requests,
            self.to_broker,
            self.wall.as_secs_f64(),
            self.requests as f64 / self.wall.as_secs_f64(),
            per_req_us,
            pct(0.50),
            pct(0.99),
            self.failed
        )
    }
}

/// The cluster a process runs in, its job and its rank.
fn place(a: &Args, i: usize) -> (usize, String, u32) {
    (
        i % a.clusters,
        format!("cap-{:04}", i / a.per_job),
        (i % a.per_job) as u32,
    )
}

/// Process `i`'s lookups: every rank of its job in the next `peer_clusters` clusters.
fn lookups(a: &Args, i: usize) -> Vec<Request> {
    let (c, job, rank) = place(a, i);
    let first = (i / a.per_job) * a.per_job;
    let last = (first + a.per_job).min(a.processes);
    let mut out = Vec::new();
    for k in 1..=a.peer_clusters.min(a.clusters - 1) {
        let peer = (c + k) % a.clusters;
        // The job's processes whose index falls in cluster `peer`.
        let start = first + (peer + a.clusters - first % a.clusters) % a.clusters;
        for j in (start..last).step_by(a.clusters) {
            out.push(Request::Lookup {
                from: ProcName::new(&job, rank),
                target: ProcName::new(&job, (j - first) as u32),
            });
        }
    }
    out
}

/// Process `i`'s registration.
fn register(a: &Args, i: usize) -> Vec<Request> {
    let (c, job, rank) = place(a, i);
    let host = (i / a.clusters) % 250;
    vec![Request::Register(AccessPoint {
        process: ProcName::new(&job, rank),
        cluster: cluster_name(c),
        node: format!("n{host}"),
        private_addr: IpAddr::V4(Ipv4Addr::new(
            10,
            (c / 250) as u8,
            (c % 250) as u8,
            host as u8 + 1,
        )),
        public_addr: None,
        port: 40000 + (i % 20000) as u16,
    })]
}

fn cluster_name(c: usize) -> String {
    format!("c{c:03}")
}

/// Runs the benchmark and prints its table.
pub fn run(a: &Args) -> Result<()> {
    if a.clusters == 0 || a.processes == 0 || a.per_job == 0 || a.inflight == 0 {
        bail!("--clusters, --processes, --per-job and --inflight must be at least 1");
    }
    if a.clusters > 200 * 250 {
        bail!("--clusters: at most 50000 (one loopback address each)");
    }
    let g = ServiceGrid::builder()
        .no_http()
        .no_https()
        .log_filter("error")
        .broker_config(&format!(
            "max_registrations_per_job = {}\nmax_registrations_per_cluster = {}",
            a.per_job.max(1),
            a.processes.max(65536),
        ))
        .start()?;
    let (pid, addr) = (g.service("broker")?.pid(), g.quic()?);
    let ca = g.ca();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let result = rt.block_on(drive(a, ca, addr, pid));
    let load_after = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let (mut phases, mem) = result?;
    let cmd: Vec<String> = std::env::args().collect();
    println!(
        "qcg-bench broker: {} clusters, {} processes ({} jobs of up to {} ranks, each spread over every cluster)",
        a.clusters,
        a.processes,
        a.processes.div_ceil(a.per_job),
        a.per_job
    );
    println!("command: {}", cmd.join(" "));
    println!(
        "load average (1, 5, 15 min) before: {}, after: {}; {} cores",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" "),
        load_after
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" "),
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    println!("the simulated frontals run on the same machine as the broker and share its cores");
    println!();
    println!(
        "{:<34} {:>9} {:>9} {:>8} {:>10} {:>11} {:>8} {:>8} {:>6}",
        "phase",
        "requests",
        "to broker",
        "wall s",
        "per s",
        "CPU us/req",
        "p50 ms",
        "p99 ms",
        "failed"
    );
    for p in &mut phases {
        println!("{}", p.row());
    }
    println!();
    println!(
        "per s: requests answered per second of wall time (to the processes, cache hits included)"
    );
    println!(
        "CPU us/req: the broker's user+system CPU time over the phase per request that reached it"
    );
    println!("clusters row: its CPU also covers the QUIC/TLS handshakes and the broker's first probe of each pair of clusters");
    println!("p50/p99: one request's time as the process sees it (through the frontal's cache when used)");
    println!();
    println!(
        "broker resident memory (VmRSS): started {:.1} MiB, clusters registered {:.1} MiB, processes registered {:.1} MiB, after lookups {:.1} MiB",
        mib(mem[0]),
        mib(mem[1]),
        mib(mem[2]),
        mib(mem[3])
    );
    println!(
        "memory per registered process: {:.0} bytes ((VmRSS after registrations - before) / {})",
        (mem[2].saturating_sub(mem[1])) as f64 * 1024.0 / a.processes as f64,
        a.processes
    );
    let total: Duration = phases.iter().take(3).map(|p| p.wall).sum();
    println!(
        "end to end ({} processes over {} clusters: clusters up, all registered, every lookup answered once by the broker): {:.2} s",
        a.processes,
        a.clusters,
        total.as_secs_f64()
    );
    let failed: u64 = phases.iter().map(|p| p.failed).sum();
    if failed > 0 {
        bail!("{failed} requests failed (see the table)");
    }
    Ok(())
}

/// Answers what the broker asks of a frontal.
async fn answer(conn: quinn::Connection, cache: Arc<PlanCache>, probes: Arc<AtomicU64>) {
    let handler = move |req: Request| {
        let (cache, probes) = (cache.clone(), probes.clone());
        async move {
            match req {
                Request::ProbePeer { .. } => {
                    probes.fetch_add(1, Ordering::Relaxed);
                    Response::Measured(qcg_proto::LinkQuality {
                        latency_ms: 1.0,
                        bandwidth_mbps: 1000.0,
                    })
                }
                Request::Invalidate { job, rank } => {
                    cache.invalidate(&job, rank);
                    Response::Ok
                }
                _ => Response::Ok,
            }
        }
    };
    quic::serve(conn, handler).await;
}

/// The phases; the broker's VmRSS at start, after clusters, after processes, at the
/// end (KiB).
async fn drive(a: &Args, ca: &Ca, broker: SocketAddr, pid: u32) -> Result<(Vec<Phase>, [u64; 4])> {
    let mut mem = [status_kib(pid, "VmRSS:"), 0, 0, 0];
    let probes = Arc::new(AtomicU64::new(0));
    let mut phases = Vec::new();

    // 1. Clusters.
    let ids: Vec<_> = (0..a.clusters)
        .map(|c| ca.identity(Role::Frontal, &cluster_name(c)))
        .collect::<Result<_, _>>()?;
    let cpu0 = cpu(pid);
    let t0 = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    let redials = Arc::new(AtomicU64::new(0));
    for (c, id) in ids.into_iter().enumerate() {
        let (probes, redials) = (probes.clone(), redials.clone());
        tasks.spawn(async move {
            let ip = Ipv4Addr::new(127, 1, (c / 250) as u8, (c % 250 + 1) as u8);
            let ep = quic::server_endpoint(SocketAddr::new(IpAddr::V4(ip), 0), &id)?;
            let t = Instant::now();
            let policy = Policy::ALL[c % Policy::ALL.len()];
            let register = Request::RegisterCluster(ClusterConfig {
                name: cluster_name(c),
                policy,
                nat: Nat::None,
                public_address: None,
            });
            // A frontal whose handshake or registration fails redials after a
            // backoff (as qcg-frontal does); counted.
            let mut attempt = 0;
            let conn = loop {
                let tried = async {
                    let conn = quic::connect(&ep, broker, Role::Broker).await?;
                    let r = quic::request(&conn, &register).await?;
                    anyhow::Ok((conn, r))
                }
                .await;
                match tried {
                    Ok((conn, Response::Ok)) => break conn,
                    Ok((_, r)) => bail!("cluster {}: {r:?}", cluster_name(c)),
                    Err(e) if attempt >= 8 => {
                        return Err(e.context(format!("cluster {}", cluster_name(c))))
                    }
                    Err(_) => {
                        redials.fetch_add(1, Ordering::Relaxed);
                        tokio::time::sleep(quic::backoff(attempt, (c % 10) as f64 / 10.0)).await;
                        attempt += 1;
                    }
                }
            };
            let cache = Arc::new(PlanCache::default());
            tokio::spawn(answer(conn.clone(), cache.clone(), probes));
            let ms = t.elapsed().as_secs_f64() * 1e3;
            anyhow::Ok((
                c,
                Frontal {
                    conn,
                    cache,
                    _endpoint: ep,
                },
                ms,
            ))
        });
    }
    let mut frontals: Vec<Option<Frontal>> = (0..a.clusters).map(|_| None).collect();
    let mut lat = Vec::new();
    while let Some(r) = tasks.join_next().await {
        let (c, f, ms) = r??;
        frontals[c] = Some(f);
        lat.push(ms);
    }
    let frontals: Arc<Vec<Frontal>> = Arc::new(frontals.into_iter().flatten().collect());
    let registered = t0.elapsed();
    // The broker probes each new pair of clusters at its next tick.
    let pairs = (a.clusters * (a.clusters - 1) / 2) as u64;
    let waited = Instant::now();
    while probes.load(Ordering::Relaxed) < pairs && waited.elapsed() < Duration::from_secs(60) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let probed = probes.load(Ordering::Relaxed);
    if probed < pairs {
        eprintln!("qcg-bench broker: {probed} of {pairs} probes of pairs of clusters came in 60 s");
    }
    phases.push(Phase {
        name: format!(
            "clusters connect + register ({} redials)",
            redials.load(Ordering::Relaxed)
        ),
        requests: a.clusters,
        to_broker: a.clusters as u64,
        wall: registered,
        cpu: cpu(pid).saturating_sub(cpu0),
        latencies_ms: lat,
        failed: 0,
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    mem[1] = status_kib(pid, "VmRSS:");

    // 2. Registrations: each frontal's processes, `inflight` at a time.
    let a2 = Arc::new(a.clone());
    let phase = run_phase(&a2, &frontals, pid, "register", register, Mode::Direct).await?;
    phases.push(phase);
    tokio::time::sleep(Duration::from_millis(500)).await;
    mem[2] = status_kib(pid, "VmRSS:");

    // 3. Lookups.
    for (name, mode) in [
        ("lookup, no frontal cache", Mode::Direct),
        ("lookup, frontal cache (empty)", Mode::Cached),
        ("lookup, frontal cache (full)", Mode::Cached),
    ] {
        let phase = run_phase(&a2, &frontals, pid, name, lookups, mode).await?;
        phases.push(phase);
    }
    mem[3] = status_kib(pid, "VmRSS:");
    Ok((phases, mem))
}

/// Whether lookups go through the frontal's cache.
#[derive(Clone, Copy)]
enum Mode {
    Direct,
    Cached,
}

/// Sends every process's requests (`make(args, process index)`) from its cluster's
/// frontal, `inflight` workers per frontal; times the whole.
async fn run_phase(
    a: &Arc<Args>,
    frontals: &Arc<Vec<Frontal>>,
    pid: u32,
    name: &str,
    make: impl Fn(&Args, usize) -> Vec<Request> + Send + Sync + Copy + 'static,
    mode: Mode,
) -> Result<Phase> {
    let to_broker = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let cpu0 = cpu(pid);
    let t0 = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for c in 0..a.clusters {
        for w in 0..a.inflight {
            let (a, frontals) = (a.clone(), frontals.clone());
            let (to_broker, failed) = (to_broker.clone(), failed.clone());
            tasks.spawn(async move {
                let f = &frontals[c];
                let mut lat = Vec::new();
                // This cluster's processes, split among the workers.
                let mine = (c..a.processes)
                    .step_by(a.clusters)
                    .skip(w)
                    .step_by(a.inflight);
                for i in mine {
                    for req in make(&a, i) {
                        let t = Instant::now();
                        let ok = match (mode, &req) {
                            (Mode::Cached, Request::Lookup { target, .. }) => {
                                // What the frontal does (frontal/src/lib.rs, `forward`).
                                let slot = f.cache.slot(target);
                                let mut plan = slot.lock().await;
                                if plan.is_some() {
                                    true
                                } else {
                                    to_broker.fetch_add(1, Ordering::Relaxed);
                                    match quic::request(&f.conn, &req).await {
                                        Ok(Response::Plan(p)) => {
                                            *plan = Some((p, None));
                                            true
                                        }
                                        _ => false,
                                    }
                                }
                            }
                            _ => {
                                to_broker.fetch_add(1, Ordering::Relaxed);
                                matches!(
                                    quic::request(&f.conn, &req).await,
                                    Ok(Response::Ok | Response::Plan(_))
                                )
                            }
                        };
                        if !ok {
                            failed.fetch_add(1, Ordering::Relaxed);
                        }
                        lat.push(t.elapsed().as_secs_f64() * 1e3);
                    }
                }
                lat
            });
        }
    }
    let mut latencies_ms = Vec::new();
    while let Some(r) = tasks.join_next().await {
        latencies_ms.extend(r.context("a frontal's worker")?);
    }
    Ok(Phase {
        name: name.to_string(),
        requests: latencies_ms.len(),
        to_broker: to_broker.load(Ordering::Relaxed),
        wall: t0.elapsed(),
        cpu: cpu(pid).saturating_sub(cpu0),
        latencies_ms,
        failed: failed.load(Ordering::Relaxed),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_spreads_over_every_cluster() {
        let a = Args {
            clusters: 100,
            processes: 10_000,
            per_job: 1000,
            peer_clusters: 2,
            inflight: 4,
        };
        assert_eq!(place(&a, 0), (0, "cap-0000".into(), 0));
        assert_eq!(place(&a, 1001), (1, "cap-0001".into(), 1));
        let mut seen = std::collections::HashSet::new();
        for i in 0..a.processes {
            let (_, job, rank) = place(&a, i);
            assert!(seen.insert((job, rank)));
        }
        // Process 1001 (cluster 1, job 1) looks up the 10 ranks of job 1 in each
        // of clusters 2 and 3.
        let targets: Vec<(usize, u32)> = lookups(&a, 1001)
            .into_iter()
            .map(|r| match r {
                Request::Lookup { target, .. } => {
                    assert_eq!(target.job, "cap-0001");
                    let i = 1000 + target.rank as usize;
                    (place(&a, i).0, target.rank)
                }
                _ => unreachable!(),
            })
            .collect();
        assert_eq!(targets.len(), 20);
        assert!(
            targets.iter().all(|(c, _)| *c == 2 || *c == 3),
            "{targets:?}"
        );
    }
}
