//! `qcg-bench`: figures for qcg, side by side with a reference measured in the same run.
//!
//! - `qcg-bench setup`: time to first byte of a new link, through the broker and again
//!   when the frontal has the answer cached (p50, p99).
//! - `qcg-bench pingpong`: 1-byte and 1 MiB ping-pong over a libqcg link and over plain
//!   TCP between the same two processes, with the ratio.
//! - `qcg-bench mpi --lab TOPO`: the C ping-pong and OSU-style collectives built with
//!   `qcg-mpicc` and with Open MPI's `mpicc` (defaults, and with han), side by side.
//! - `qcg-bench broker`: what one broker carries: registrations and lookups per second
//!   (with and without the frontal's cache), memory per process, 10,000 processes over
//!   100 clusters.
//! - `qcg-bench node`: ranks of one node, OSU's point-to-point method for two ranks and
//!   collectives for 16, `qcg run` beside Open MPI's shared memory and TCP.

mod attacks;
mod broker_cap;
mod coll;
mod coll_lab;
mod dos;
mod hijack;
mod lab_run;
mod mpi_lab;
mod netpipe;
mod netpipe_lab;
mod node;
mod queue;
mod svg;

use clap::{Parser, Subcommand};
use qcg::{Comm, JobEnv};
use qcg_grid::Grid;
use qcg_proto::Policy;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Instant;

/// Benchmarks of qcg against plain TCP, on an embedded local grid on loopback.
#[derive(Parser)]
#[command(version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Time to first byte of a new link: through the broker, and from the frontal's cache.
    Setup {
        /// Links to make of each kind.
        #[arg(long, default_value_t = 200)]
        iters: usize,
    },
    /// Ping-pong of 1 byte and 1 MiB: libqcg link against plain TCP, same two processes.
    Pingpong {
        /// Round trips per trial for 1 byte (1 MiB uses a tenth... at least 50).
        #[arg(long, default_value_t = 5000)]
        reps: usize,
        /// Trials per size; the best is reported (as NetPIPE does).
        #[arg(long, default_value_t = 3)]
        trials: usize,
        /// Also run Open MPI's ping-pong (bench/mpi/pingpong.c with mpicc and
        /// `mpirun --mca btl tcp,self`) in the same run, for comparison.
        #[arg(long)]
        mpi: bool,
        /// Rounds: libqcg's trials then Open MPI's, this many times over, the best of
        /// each kept. On a shared machine the noise drifts over seconds; alternating
        /// keeps one side from getting only the quiet (or the noisy) moments.
        #[arg(long, default_value_t = 1)]
        rounds: usize,
    },
    /// Collectives timed with OSU's method, per algorithm, with CSV and SVG output: on
    /// an embedded grid on loopback, or with --lab on the lab beside Open MPI.
    Coll {
        /// Ranks.
        #[arg(short = 'n', long = "np", default_value_t = 16)]
        n: u32,
        /// Clusters of the embedded grid.
        #[arg(long, default_value_t = 4)]
        clusters: usize,
        /// Nodes per cluster.
        #[arg(long, default_value_t = 1)]
        nodes_per_cluster: usize,
        /// Level costs given to the ranks' topology (QCG_TOPOLOGY_COSTS:
        /// LATENCY_US:MBITS per level, top first, and :mesh after a pair for sites
        /// joined pairwise), so `auto` plans for the network the lab would emulate
        /// [default: 10000:100,100:1000,5:10000, or with --lab read from the topology
        /// file].
        #[arg(long)]
        costs: Option<String>,
        /// Run in a lab built from this topology (as root), one rank per node, and
        /// Open MPI's MPI_Bcast, MPI_Reduce, MPI_Allreduce and MPI_Gather on the same
        /// nodes in the same run (Debian openmpi-bin: bash scripts/bench-deps.sh).
        /// Needs the workspace's release binaries beside this one.
        #[arg(long, value_name = "TOPO")]
        lab: Option<std::path::PathBuf>,
        /// With --lab: ranks per node.
        #[arg(long, default_value_t = 1)]
        ppn: usize,
        /// With --lab: skip Open MPI.
        #[arg(long)]
        no_mpi: bool,
        #[command(flatten)]
        args: coll::CollArgs,
    },
    /// C MPI programs on the lab (as root): ping-pong over a direct link (qcg-mpicc,
    /// the Rust API, Open MPI) and OSU-style collectives built with qcg-mpicc and with
    /// Open MPI's mpicc, run under its defaults and with `--mca coll_han_priority 100`,
    /// side by side in one run. Needs the workspace's release binaries and
    /// examples/pingpong beside this one, and Open MPI.
    Mpi {
        /// The lab's topology file.
        #[arg(long, value_name = "TOPO")]
        lab: std::path::PathBuf,
        /// Ranks per node for the collectives.
        #[arg(long, default_value_t = 1)]
        ppn: usize,
        /// Largest ping-pong message, bytes.
        #[arg(long, default_value_t = 4 << 20)]
        pp_max: usize,
        /// Ping-pong round trips per size.
        #[arg(long, default_value_t = 200)]
        pp_reps: usize,
        /// MPI_Iallreduce overlapped with a computation of its own length: bytes (0:
        /// skip), on every rank of the collectives, qcg and Open MPI defaults.
        #[arg(long, default_value_t = 4 << 20)]
        overlap: usize,
        /// Timed rounds of the overlap test (each side: pure, then overlapped).
        #[arg(long, default_value_t = 10)]
        overlap_iters: usize,
        /// Only the overlap test (no ping-pong, no collectives; any number of nodes
        /// per site).
        #[arg(long)]
        overlap_only: bool,
        #[command(flatten)]
        args: coll::CollArgs,
    },
    /// Ranks of one node, qcg beside Open MPI in one run: two ranks with OSU's
    /// latency and windowed bandwidth method (bench/mpi/osu_p2p.c), qcg busy-polling
    /// and sleeping, Open MPI's defaults (shared memory) and over TCP; then 16 ranks'
    /// MPI_Allreduce and MPI_Bcast (bench/mpi/coll_osu.c). Builds both with the
    /// qcg-mpicc beside this binary and with Open MPI's mpicc; runs `qcg run` (the qcg
    /// beside this binary) and `mpirun`. Tables, and a CSV in --out.
    Node {
        #[command(flatten)]
        args: node::NodeArgs,
    },
    /// NetPIPE's method over a libqcg link between two processes (two clusters of an
    /// embedded grid on loopback), and Debian's NPtcp on the same path in the same run:
    /// np.out columns, CSV, an SVG of throughput against size, and the ratios.
    Netpipe {
        /// Smallest message, bytes (NPtcp's -l).
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
        min: u64,
        /// Largest message, bytes.
        #[arg(long, default_value_t = 8 << 20)]
        max: usize,
        /// Seconds per trial (NetPIPE 3 uses 0.1).
        #[arg(long, default_value_t = 0.1)]
        trial: f64,
        /// Skip NPtcp (when netpipe-tcp is not installed).
        #[arg(long)]
        no_nptcp: bool,
        /// Run in a lab built from this topology (as root): within a site, between
        /// every pair of sites, relayed through each proxy, and traversed, with NPtcp on
        /// the same host pairs. Needs the workspace's release binaries beside this one.
        #[arg(long, value_name = "TOPO")]
        lab: Option<std::path::PathBuf>,
        /// With --lab: run only the case of exactly this name (e.g. `beta -> alpha`), or
        /// if none has it, every case whose name contains it (e.g. `relayed`).
        #[arg(long)]
        only: Option<String>,
        /// Folder for np-*.out, netpipe.csv and netpipe.svg.
        #[arg(long, default_value = "bench-out")]
        out: std::path::PathBuf,
    },
    /// (internal) one rank of `netpipe`.
    #[command(hide = true)]
    NetpipeRank {
        #[arg(long, default_value_t = 1)]
        min: usize,
        #[arg(long)]
        max: usize,
        #[arg(long)]
        trial: f64,
        #[arg(long)]
        out: std::path::PathBuf,
    },
    /// (internal) one rank of `coll`.
    #[command(hide = true)]
    CollRank {
        #[command(flatten)]
        args: coll::CollArgs,
    },
    /// Issue 11's attacks on real services started from config files (broker,
    /// frontal, helper, proxy on loopback): deep JobProfiles, registrations with
    /// 1 MB names, a job flooding its output, idle strangers on the proxy; prints how
    /// long each refusal took, the broker's memory (VmRSS, peak VmHWM), the proxy's
    /// threads and descriptors. Needs the service binaries beside this one.
    Attacks {
        /// Lines of 16 KiB the flooding job prints.
        #[arg(long, default_value_t = 100_000)]
        lines: u32,
        /// Idle connections opened to the proxy.
        #[arg(long, default_value_t = 2000)]
        strangers: usize,
        /// Idle stranger connections held on the broker's plain HTTP (issue 21).
        #[arg(long, default_value_t = 2000)]
        http_strangers: usize,
        /// Half-sent frames held on the helper's socket (issue 21).
        #[arg(long, default_value_t = 400)]
        half_frames: usize,
        /// Only issue 21's denial-of-service attacks.
        #[arg(long)]
        dos_only: bool,
        /// Only issue 21's hijacks (of a submitted job and of a `qcg run` job),
        /// revocation and lost nodes.
        #[arg(long, conflicts_with = "dos_only")]
        hijack_only: bool,
    },
    /// (internal) a rank of the `qcg run` job of `attacks`: joins, stays until DONE
    /// exists.
    #[command(name = "hijack-rank", hide = true)]
    HijackRank { done: std::path::PathBuf },
    /// (internal) the other local user of `attacks`: sends the forged requests it
    /// is handed ($QCG_FORGED_REQUESTS) and prints the answers.
    #[command(hide = true)]
    Forged,
    /// (internal) the flooding user of `attacks`: half-sent frames on a helper socket.
    #[command(hide = true)]
    HalfFrames {
        #[arg(long)]
        socket: std::path::PathBuf,
        #[arg(long)]
        count: usize,
    },
    /// What one broker carries: the real qcg-broker driven by simulated frontals over
    /// loopback (QUIC, frontal certificates): registrations/s, lookups/s with and
    /// without the frontal's cache, memory per registered process. Needs qcg-broker
    /// beside this binary (use release builds for figures).
    Broker {
        #[command(flatten)]
        args: broker_cap::Args,
    },
    /// Issue 21's retention and fair share on real services (broker, frontal,
    /// helper): JOBS finished jobs, the database file and the broker's memory
    /// before and through the retention passes; then how long a client's fitting
    /// 1-process job waits behind another's 30 queued 4-process jobs.
    Queue {
        /// Jobs submitted and run to their end.
        #[arg(long, default_value_t = 1000)]
        jobs: usize,
        /// Bytes each job's profile is padded to (an argument of /bin/true).
        #[arg(long, default_value_t = 20_000)]
        profile_bytes: usize,
        /// The broker's job_record_keep_secs (output and profiles: a quarter).
        #[arg(long, default_value_t = 20)]
        record_keep: u64,
        /// Rounds of JOBS jobs, each through retention.
        #[arg(long, default_value_t = 2)]
        rounds: usize,
    },
    /// (internal) one rank of `pingpong`, started by it.
    #[command(hide = true)]
    PingpongRank {
        #[arg(long)]
        reps: usize,
        #[arg(long)]
        trials: usize,
        /// Where rank 0 writes its figures (`SIZE QCG_US TCP_US` per line).
        #[arg(long)]
        out: std::path::PathBuf,
    },
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Setup { iters } => setup(iters),
        Cmd::Attacks {
            lines,
            strangers,
            http_strangers,
            half_frames,
            dos_only,
            hijack_only,
        } => {
            if hijack_only {
                return hijack::run();
            }
            if !dos_only {
                attacks::run(lines, strangers)?;
                hijack::run()?;
            }
            dos::run(http_strangers, half_frames)
        }
        Cmd::HalfFrames { socket, count } => dos::half_frames(&socket, count),
        Cmd::HijackRank { done } => hijack::rank(&done),
        Cmd::Forged => {
            if !qcg_grid::services::forged_child() {
                anyhow::bail!(
                    "{} holds no requests: `forged` is started by `attacks`",
                    qcg_grid::services::FORGED_ENV
                );
            }
            Ok(())
        }
        Cmd::Broker { args } => broker_cap::run(&args),
        Cmd::Queue {
            jobs,
            profile_bytes,
            record_keep,
            rounds,
        } => queue::run(jobs, profile_bytes, record_keep, rounds),
        Cmd::Pingpong {
            reps,
            trials,
            mpi,
            rounds,
        } => pingpong(reps, trials, mpi, rounds),
        Cmd::PingpongRank { reps, trials, out } => pingpong_rank(reps, trials, &out),
        Cmd::Coll {
            lab: Some(topo),
            ppn,
            no_mpi,
            costs,
            args,
            ..
        } => coll_lab::run(&topo, ppn, no_mpi, costs.as_deref(), &args),
        Cmd::Coll {
            n,
            clusters,
            nodes_per_cluster,
            costs,
            args,
            ..
        } => coll_job(
            n,
            clusters,
            nodes_per_cluster,
            costs.as_deref().unwrap_or("10000:100,100:1000,5:10000"),
            &args,
        ),
        Cmd::CollRank { args } => coll::rank(&args),
        Cmd::Mpi {
            lab,
            ppn,
            pp_max,
            pp_reps,
            overlap,
            overlap_iters,
            overlap_only,
            args,
        } => mpi_lab::run(
            &lab,
            ppn,
            &args,
            pp_max,
            pp_reps,
            (overlap, overlap_iters),
            overlap_only,
        ),
        Cmd::Node { args } => node::run(&args),
        Cmd::Netpipe {
            min,
            max,
            trial,
            no_nptcp,
            lab: Some(topo),
            only,
            out,
        } => netpipe_lab::run(
            &topo,
            (min as usize, max),
            trial,
            no_nptcp,
            only.as_deref(),
            &out,
        ),
        Cmd::Netpipe {
            min,
            max,
            trial,
            no_nptcp,
            lab: None,
            out,
            ..
        } => {
            anyhow::ensure!(min as usize <= max, "--min {min} is above --max {max}");
            tcp_inside_the_machine();
            netpipe_job(min as usize, max, trial, no_nptcp, &out)
        }
        Cmd::NetpipeRank {
            min,
            max,
            trial,
            out,
        } => {
            let comm = qcg::init()?;
            if comm.rank() == 0 {
                let pts = netpipe::measure(&comm, min, max, trial)?;
                netpipe::write_outputs(&out, &[("qcg", &pts)], &["qcg"])?;
                let how = comm
                    .link_technique(1)
                    .map_or("accepted".into(), |t| t.to_string());
                println!("# link: {how}");
            } else {
                netpipe::echo(&comm)?;
            }
            Ok(())
        }
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i]
}

fn setup(iters: usize) -> anyhow::Result<()> {
    let rt = tokio::runtime::Runtime::new()?;
    let g = rt.block_on(
        Grid::builder()
            .clusters(&[Policy::Open, Policy::Open])
            .start(),
    )?;
    let (c0, c1) = (g.nodes[0].socket.clone(), g.nodes[1].socket.clone());
    let mut through_broker = Vec::with_capacity(iters);
    let mut from_cache = Vec::with_capacity(iters);
    for i in 0..iters {
        let job = format!("setup-{i}");
        let secret = qcg_grid::secret();
        let env = |rank, helper: &std::path::PathBuf| JobEnv {
            job: job.clone(),
            rank,
            size: 3,
            helper: helper.clone(),
            secret,
        };
        // Ranks 0 and 2 in cluster-0, rank 1 in cluster-1.
        let (e0, e1, e2) = (env(0, &c0), env(1, &c1), env(2, &c0));
        let h1 = std::thread::spawn(move || Comm::connect(e1));
        let (r0, r2) = (Comm::connect(e0)?, Comm::connect(e2)?);
        let r1 = h1
            .join()
            .map_err(|_| anyhow::anyhow!("rank 1 panicked"))??;
        for (sender, out) in [(&r0, &mut through_broker), (&r2, &mut from_cache)] {
            std::thread::scope(|s| -> anyhow::Result<()> {
                let t0 = Instant::now();
                let rx = s.spawn(|| {
                    r1.recv(Some(sender.rank()), Some(0))
                        .map(|_| Instant::now())
                });
                sender.send(1, 0, &[1])?;
                let t1 = rx
                    .join()
                    .map_err(|_| anyhow::anyhow!("receiver panicked"))??;
                out.push((t1 - t0).as_secs_f64() * 1e6);
                Ok(())
            })?;
        }
        drop((r0, r1, r2));
        rt.block_on(qcg_grid::launch::end_job(&c0, &job))?;
    }
    let hits = g.frontals()[0]
        .stats()
        .cache_hits
        .load(std::sync::atomic::Ordering::Relaxed);
    println!("# qcg-bench setup: time to first byte of a new link (lookup, TCP connect, job handshake, 1 byte), {iters} links each, loopback, clusters cluster-0 -> cluster-1");
    println!(
        "{:<28} {:>10} {:>10} {:>10}",
        "path", "p50 (us)", "p99 (us)", "mean (us)"
    );
    for (name, v) in [
        ("through the broker", &mut through_broker),
        ("frontal cache hit", &mut from_cache),
    ] {
        v.sort_by(|a, b| a.total_cmp(b));
        let mean = v.iter().sum::<f64>() / v.len().max(1) as f64;
        println!(
            "{name:<28} {:>10.1} {:>10.1} {:>10.1}",
            percentile(v, 0.5),
            percentile(v, 0.99),
            mean
        );
    }
    println!("# frontal cache hits in cluster-0: {hits}");
    rt.block_on(g.shutdown());
    Ok(())
}

/// Says so (on stderr, `# warning: ...`) when `n` ranks of this machine outnumber its
/// cores: ranks then wait for a core as well as for each other, and the figures
/// measure that sharing too.
fn warn_if_crowded(n: usize) {
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    if n > cores {
        eprintln!(
            "# warning: {n} ranks on {cores} cores: ranks share cores, so the figures include waiting for one"
        );
    }
}

/// Runs `n` ranks of this binary (`args` picks the hidden per-rank subcommand) on an
/// embedded grid of `clusters` open clusters of `nodes` nodes; fails if a rank fails.
/// `pingpong` and `netpipe` on loopback compare a libqcg TCP link with plain TCP:
/// their two ranks, on this machine, keep TCP (`QCG_SHM=0`) unless the caller set
/// `QCG_SHM` (`qcg-bench node` measures the shared-memory link).
fn tcp_inside_the_machine() {
    if std::env::var_os(qcg::env::vars::SHM).is_none() {
        std::env::set_var(qcg::env::vars::SHM, "0");
    }
}

fn run_ranks(clusters: usize, nodes: usize, n: usize, args: Vec<String>) -> anyhow::Result<()> {
    warn_if_crowded(n);
    let rt = tokio::runtime::Runtime::new()?;
    let code = rt.block_on(async {
        let g = Grid::builder()
            .clusters(&vec![Policy::Open; clusters.max(1)])
            .nodes_per_cluster(nodes)
            .start()
            .await?;
        let job = qcg_grid::launch::Job {
            id: qcg_grid::job_id(),
            secret: qcg_grid::secret(),
            program: std::env::current_exe()?,
            args,
            sockets: g.placement(n).into_iter().map(|s| s.socket).collect(),
            io: Default::default(),
        };
        let out = qcg_grid::launch::run(&job).await?;
        g.shutdown().await;
        anyhow::Ok(out.code())
    })?;
    anyhow::ensure!(code == 0, "a rank failed");
    Ok(())
}

fn pingpong(reps: usize, trials: usize, mpi: bool, rounds: usize) -> anyhow::Result<()> {
    let out = std::env::temp_dir().join(format!("qcg-pingpong-{}.txt", std::process::id()));
    let args = vec![
        "pingpong-rank".to_string(),
        format!("--reps={reps}"),
        format!("--trials={trials}"),
        format!("--out={}", out.display()),
    ];
    // Best one-way µs per size: (qcg, tcp, ompi).
    let mut best: Vec<(usize, f64, f64, f64)> = PINGPONG_SIZES
        .iter()
        .map(|&s| (s, f64::INFINITY, f64::INFINITY, f64::INFINITY))
        .collect();
    tcp_inside_the_machine();
    for round in 0..rounds.max(1) {
        run_ranks(2, 1, 2, args.clone())?;
        let text = std::fs::read_to_string(&out)?;
        let _ = std::fs::remove_file(&out);
        for l in text.lines() {
            let v: Vec<f64> = l
                .split_whitespace()
                .filter_map(|x| x.parse().ok())
                .collect();
            if let (Some(b), [_, q, t]) = (
                best.iter_mut().find(|b| v.first() == Some(&(b.0 as f64))),
                v.as_slice(),
            ) {
                b.1 = b.1.min(*q);
                b.2 = b.2.min(*t);
            }
        }
        if mpi {
            if round == 0 {
                println!("# Open MPI, same run: bench/mpi/pingpong.c, mpirun -np 2 --mca btl tcp,self, busy-polling");
                println!("{:>9} {:>14} {:>12}", "bytes", "ompi (us)", "ompi (MB/s)");
            }
            for (size, us) in mpi_pingpong(reps, trials)? {
                println!("{size:>9} {us:>14.2} {:>12.1}", size as f64 / us);
                if let Some(b) = best.iter_mut().find(|b| b.0 == size) {
                    b.3 = b.3.min(us);
                }
            }
        }
    }
    if mpi {
        println!(
            "# best of {} rounds (libqcg then Open MPI each round), one-way µs, loopback, busy-polling both",
            rounds.max(1)
        );
        println!(
            "{:>9} {:>10} {:>10} {:>10} {:>11} {:>11}",
            "bytes", "qcg", "ompi", "qcg/ompi", "qcg MB/s", "ompi MB/s"
        );
        for &(size, q, _, o) in &best {
            println!(
                "{size:>9} {q:>10.2} {o:>10.2} {:>10.2} {:>11.1} {:>11.1}",
                q / o,
                size as f64 / q,
                size as f64 / o
            );
        }
    }
    Ok(())
}

fn coll_job(
    n: u32,
    clusters: usize,
    nodes: usize,
    costs: &str,
    a: &coll::CollArgs,
) -> anyhow::Result<()> {
    // The ranks inherit it from us.
    std::env::set_var(qcg::env::vars::TOPOLOGY_COSTS, costs);
    run_ranks(clusters, nodes, n as usize, coll::rank_args(a))
}

/// Runs NPtcp (receiver and sender) on loopback; returns its points (from the
/// `np-nptcp.out` it writes, with the repetitions it printed).
fn nptcp(min: usize, max: usize, dir: &std::path::Path) -> anyhow::Result<Vec<netpipe::Point>> {
    use std::process::{Command, Stdio};
    let missing = |e: std::io::Error| {
        anyhow::anyhow!("NPtcp: {e}: install Debian's netpipe-tcp (bash scripts/bench-deps.sh), or pass --no-nptcp")
    };
    let range = [
        "-l".to_string(),
        min.to_string(),
        "-u".into(),
        max.to_string(),
    ];
    // Both sides get the range: a receiver without -l hangs up on a sender with it.
    let mut rx = Command::new("NPtcp")
        .args(&range)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(missing)?;
    std::thread::sleep(std::time::Duration::from_millis(300));
    let out = dir.join("np-nptcp.out");
    let sent = Command::new("NPtcp")
        .args(["-h", "127.0.0.1"])
        .args(&range)
        .arg("-o")
        .arg(&out)
        .stdout(Stdio::null())
        .output()
        .map_err(missing);
    let _ = rx.kill();
    let _ = rx.wait();
    let sent = sent?;
    anyhow::ensure!(sent.status.success(), "NPtcp failed");
    let mut pts = netpipe::parse_np_out(&std::fs::read_to_string(&out)?);
    netpipe::nptcp_reps(&String::from_utf8_lossy(&sent.stderr), &mut pts);
    Ok(pts)
}

fn netpipe_job(
    min: usize,
    max: usize,
    trial: f64,
    no_nptcp: bool,
    out: &std::path::Path,
) -> anyhow::Result<()> {
    run_ranks(
        2,
        1,
        2,
        vec![
            "netpipe-rank".into(),
            format!("--min={min}"),
            format!("--max={max}"),
            format!("--trial={trial}"),
            format!("--out={}", out.display()),
        ],
    )?;
    let qcg_pts = netpipe::parse_csv(&std::fs::read_to_string(out.join("netpipe.csv"))?, "qcg");
    if no_nptcp {
        return Ok(());
    }
    let np = nptcp(min, max, out)?;
    netpipe::write_outputs(out, &[("qcg", &qcg_pts), ("NPtcp", &np)], &["qcg"])?;
    let (ql, qp) = netpipe::summary(&qcg_pts);
    let (nl, npk) = netpipe::summary(&np);
    println!("# netpipe on loopback, same run: qcg direct link vs NPtcp");
    println!("{:<12} {:>14} {:>16}", "", "latency (us)", "peak (Mbps)");
    println!("{:<12} {:>14.2} {:>16.1}", "qcg", ql, qp);
    println!("{:<12} {:>14.2} {:>16.1}", "NPtcp", nl, npk);
    println!("{:<12} {:>14.2} {:>16.2}", "qcg/NPtcp", ql / nl, qp / npk);
    println!(
        "# latency: one way at the smallest size ({min} B); wrote {}/np-qcg.out, np-nptcp.out (NPtcp's own), netpipe.csv, netpipe.svg",
        out.display()
    );
    Ok(())
}

/// Best (smallest) one-way time in seconds over `trials` trials of `reps` round trips.
fn best_of(
    trials: usize,
    reps: usize,
    mut round_trip: impl FnMut() -> anyhow::Result<()>,
) -> anyhow::Result<f64> {
    let mut best = f64::INFINITY;
    for _ in 0..trials {
        let t = Instant::now();
        for _ in 0..reps {
            round_trip()?;
        }
        best = best.min(t.elapsed().as_secs_f64() / (2 * reps) as f64);
    }
    Ok(best)
}

/// Sizes of `pingpong`, the issue's: 1 B, 1 KiB, 64 KiB, 1 MiB, 16 MiB.
const PINGPONG_SIZES: [usize; 5] = [1, 1 << 10, 1 << 16, 1 << 20, 1 << 24];

/// Round trips per trial at `size`: fewer for large messages.
fn pingpong_reps(reps: usize, size: usize) -> usize {
    match size {
        s if s >= 1 << 24 => (reps / 200).max(10),
        s if s >= 1 << 20 => (reps / 20).max(50),
        s if s > 1024 => (reps / 4).max(50),
        _ => reps,
    }
}

/// Open MPI's ping-pong (`bench/mpi/pingpong.c`, built with `mpicc`, two ranks on
/// loopback over `btl tcp,self`): one-way µs per size.
fn mpi_pingpong(reps: usize, trials: usize) -> anyhow::Result<Vec<(usize, f64)>> {
    use std::process::Command;
    let dir = std::env::temp_dir().join(format!("qcg-pingpong-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let src = dir.join("pingpong.c");
    std::fs::write(&src, include_str!("../mpi/pingpong.c"))?;
    let exe = dir.join("pingpong");
    let st = Command::new("mpicc")
        .args(["-O2", "-o"])
        .arg(&exe)
        .arg(&src)
        .status()
        .map_err(|e| {
            anyhow::anyhow!(
                "mpicc: {e}: install Open MPI (bash scripts/bench-deps.sh) or leave out --mpi"
            )
        })?;
    anyhow::ensure!(st.success(), "mpicc failed");
    let out = Command::new("mpirun")
        .args(["--allow-run-as-root", "--oversubscribe", "-np", "2"])
        .args(["--mca", "btl", "tcp,self", "--bind-to", "none"])
        .arg(&exe)
        .args([trials.to_string(), reps.to_string()])
        .output()?;
    let _ = std::fs::remove_dir_all(&dir);
    anyhow::ensure!(
        out.status.success(),
        "mpirun failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
        })
        .collect())
}

fn pingpong_rank(reps: usize, trials: usize, out: &std::path::Path) -> anyhow::Result<()> {
    let comm = qcg::init()?;
    anyhow::ensure!(comm.size() == 2, "pingpong runs on exactly 2 ranks");
    let sizes = PINGPONG_SIZES;
    let reps_for = |size: usize| pingpong_reps(reps, size);
    // Plain TCP between the same two processes: rank 1 listens, tells rank 0 where.
    let mut tcp = if comm.rank() == 1 {
        let l = TcpListener::bind("127.0.0.1:0")?;
        comm.send(0, 0, l.local_addr()?.to_string().as_bytes())?;
        l.accept()?.0
    } else {
        let addr = String::from_utf8(comm.recv(Some(1), Some(0))?.data)?;
        TcpStream::connect(addr)?
    };
    tcp.set_nodelay(true)?;
    if comm.rank() == 1 {
        // Echo: libqcg first, then TCP, for every size and trial (warm-up included).
        for &size in &sizes {
            let mut m = vec![0u8; size];
            for _ in 0..(trials + 1) * reps_for(size) {
                comm.recv_into(Some(0), Some(1), &mut m)?;
                comm.send(0, 2, &m)?;
            }
            let mut buf = vec![0u8; size];
            for _ in 0..(trials + 1) * reps_for(size) {
                tcp.read_exact(&mut buf)?;
                tcp.write_all(&buf)?;
            }
        }
        return Ok(());
    }
    let mut figures = String::new();
    println!("# qcg-bench pingpong: best of {trials} trials, one-way time = half the round trip, loopback, two processes in two clusters");
    println!(
        "{:>9} {:>14} {:>14} {:>10} {:>12} {:>12}",
        "bytes", "qcg (us)", "tcp (us)", "qcg/tcp", "qcg (MB/s)", "tcp (MB/s)"
    );
    for &size in &sizes {
        let r = reps_for(size);
        // One buffer sent from and received into, as Open MPI's ping-pong does: the
        // same cache footprint for both (at 1 MiB two buffers no longer fit in L2).
        let mut buf = vec![0x5au8; size];
        let mut qcg_rt = || -> anyhow::Result<()> {
            comm.send(1, 1, &buf)?;
            let st = comm.recv_into(Some(1), Some(2), &mut buf)?;
            anyhow::ensure!(st.len == size, "echo of wrong size");
            Ok(())
        };
        best_of(1, r, &mut qcg_rt)?; // warm-up
        let q = best_of(trials, r, &mut qcg_rt)?;
        let mut tcp_rt = || -> anyhow::Result<()> {
            tcp.write_all(&buf)?;
            tcp.read_exact(&mut buf)?;
            Ok(())
        };
        best_of(1, r, &mut tcp_rt)?;
        let t = best_of(trials, r, &mut tcp_rt)?;
        println!(
            "{size:>9} {:>14.2} {:>14.2} {:>10.2} {:>12.1} {:>12.1}",
            q * 1e6,
            t * 1e6,
            q / t,
            size as f64 / q / 1e6,
            size as f64 / t / 1e6
        );
        figures.push_str(&format!("{size} {} {}\n", q * 1e6, t * 1e6));
    }
    std::fs::write(out, figures)?;
    Ok(())
}
