//! `qcg-bench coll`: collectives timed the way the OSU micro-benchmarks do.
//!
//! For every operation, algorithm and size: a barrier, warm-up calls, then timed calls,
//! each timed on its own with a barrier after it outside the timed part; each rank
//! averages its own times, and the report gives the mean over ranks with the min and
//! max. Output: OSU's `# Size  Avg Latency(us)` columns, a CSV and SVG plots.
//!
//! One change to OSU's method, made on both sides of a comparison (the Open MPI
//! harness `bench/mpi/coll_osu.c` does the same): every call starts at a common
//! instant instead of when a rank leaves the barrier. Ranks leave a barrier up to one
//! WAN latency apart, in an order that depends on the barrier's algorithm; timing from
//! there measures that order, not the collective (a bcast whose root leaves the
//! barrier first would look almost free on a 10 ms WAN). So rank 0 broadcasts a start
//! instant on the wall clock far enough ahead for every rank to have it (twice the
//! worst delay seen in three probes, plus 2 ms), every rank waits for it and times its
//! call from it. Every rank of a run on one machine (loopback, or the lab's
//! namespaces) reads the same clock; across machines it would need synchronised
//! clocks. A rank that gets the instant late counts from it anyway (a slower figure,
//! never a faster one) and the report says how many calls started late.

use crate::svg;
use qcg::{Algo, CollOptions, Comm, ReduceOp};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// What a run measures.
#[derive(Clone, Debug, clap::Args)]
pub struct CollArgs {
    /// Operations: bcast, reduce, allreduce, gather, scatter, allgather, alltoall, barrier;
    /// and fanout (not a collective: rank 0 isends to the first rank of every other site
    /// at once).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "bcast,reduce,allreduce,gather"
    )]
    pub ops: Vec<String>,
    /// Algorithms to compare: auto, hier, flat, linear, chain.
    #[arg(long, value_delimiter = ',', default_value = "hier,flat,auto")]
    pub algo: Vec<String>,
    /// Flits per message (default: the cost model chooses).
    #[arg(long)]
    pub flits: Option<usize>,
    /// Largest message, bytes (sizes go 1, 2, 4, … up to it).
    #[arg(long, default_value_t = 4 << 20)]
    pub max_size: usize,
    /// Smallest message, bytes (rounded down to a power of two).
    #[arg(long, default_value_t = 1)]
    pub min_size: usize,
    /// Timed calls per size (OSU uses 1000; a tenth above 8 KiB).
    #[arg(long, default_value_t = 100)]
    pub iters: usize,
    /// Warm-up calls per size (a tenth above 8 KiB).
    #[arg(long, default_value_t = 10)]
    pub skip: usize,
    /// Also sweep the flit count 1..=16 for bcast, reduce and gather at the largest size.
    #[arg(long)]
    pub flit_sweep: bool,
    /// Folder for coll.csv and the SVG plots.
    #[arg(long, default_value = "bench-out")]
    pub out: PathBuf,
}

fn algo(s: &str) -> anyhow::Result<Algo> {
    s.parse().map_err(|e: String| anyhow::anyhow!(e))
}

/// The command line of one rank of `coll` (the hidden `coll-rank` subcommand).
pub fn rank_args(a: &CollArgs) -> Vec<String> {
    let mut args = vec![
        "coll-rank".to_string(),
        format!("--ops={}", a.ops.join(",")),
        format!("--algo={}", a.algo.join(",")),
        format!("--max-size={}", a.max_size),
        format!("--min-size={}", a.min_size),
        format!("--iters={}", a.iters),
        format!("--skip={}", a.skip),
        format!("--out={}", a.out.display()),
    ];
    if let Some(k) = a.flits {
        args.push(format!("--flits={k}"));
    }
    if a.flit_sweep {
        args.push("--flit-sweep".into());
    }
    args
}

fn sizes(min: usize, max: usize) -> Vec<usize> {
    let mut v = Vec::new();
    let mut s = 1;
    while s * 2 <= min {
        s *= 2;
    }
    while s <= max {
        v.push(s);
        s *= 2;
    }
    v
}

/// The tag of `fanout`'s messages.
const FANOUT_TAG: u32 = 77;

/// Runs `op` once with `size` bytes (rounded to whole u64 for reductions).
fn call(comm: &Comm, op: &str, size: usize, buf: &mut [u8], words: &[u64]) -> anyhow::Result<()> {
    let p = comm.size() as usize;
    match op {
        "bcast" => comm.bcast(0, &mut buf[..size])?,
        "reduce" => {
            comm.reduce(0, &words[..(size / 8).max(1)], ReduceOp::Sum)?;
        }
        "allreduce" => {
            comm.allreduce(&words[..(size / 8).max(1)], ReduceOp::Sum)?;
        }
        "gather" => {
            comm.gather(0, &buf[..size])?;
        }
        "scatter" => {
            let all = vec![1u8; if comm.rank() == 0 { size * p } else { 0 }];
            comm.scatter(0, &all, size)?;
        }
        "allgather" => {
            comm.allgather(&buf[..size])?;
        }
        "alltoall" => {
            comm.alltoall(&vec![1u8; size * p])?;
        }
        "barrier" => comm.barrier()?,
        "fanout" => {
            // Not a collective: rank 0 isends `size` bytes to the first rank of every
            // other site at once (issue 9: concurrent sends to several sites).
            let t = comm.topology();
            let site = |r: usize| t.group(0, r);
            let firsts: Vec<u32> = (0..p)
                .filter(|&r| site(r) != site(0) && (0..r).all(|q| site(q) != site(r)))
                .map(|r| r as u32)
                .collect();
            if comm.rank() == 0 {
                let reqs = firsts
                    .iter()
                    .map(|&d| comm.isend(d, FANOUT_TAG, buf[..size].to_vec()))
                    .collect::<Result<Vec<_>, _>>()?;
                qcg::wait_all(reqs)?;
            } else if firsts.contains(&comm.rank()) {
                comm.recv(Some(0), Some(FANOUT_TAG))?;
            }
        }
        other => anyhow::bail!("unknown operation `{other}`"),
    }
    Ok(())
}

/// Nanoseconds on the wall clock, which every rank on one machine shares.
fn wall_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Waits until `at` (wall-clock ns): sleeps to half a millisecond before, then yields.
/// Returns false when `at` had already passed.
fn wait_until(at: u64) -> bool {
    let now = wall_ns();
    if now >= at {
        return false;
    }
    if at - now > 500_000 {
        std::thread::sleep(Duration::from_nanos(at - now - 500_000));
    }
    while wall_ns() < at {
        std::thread::yield_now();
    }
    true
}

/// How far ahead rank 0 sets the common start: twice the worst time an 8-byte bcast
/// took to reach a rank in three probes, plus 2 ms (same on every rank).
fn start_margin(comm: &Comm) -> anyhow::Result<u64> {
    let mut worst = 0.0f64;
    for _ in 0..3 {
        comm.barrier()?;
        let mut t = wall_ns().to_le_bytes();
        comm.bcast(0, &mut t)?;
        let lag = wall_ns().saturating_sub(u64::from_le_bytes(t)) as f64;
        worst = worst.max(comm.allreduce(&[lag], ReduceOp::Max)?[0]);
    }
    Ok(2 * worst as u64 + 2_000_000)
}

/// Mean, min and max over ranks of each rank's mean time (µs), and the calls that
/// started late, summed over ranks.
pub struct Figures {
    /// Mean over ranks.
    pub avg: f64,
    /// Smallest rank mean.
    pub min: f64,
    /// Largest rank mean.
    pub max: f64,
    /// Calls that started after the common instant.
    pub late: u64,
}

/// One (operation, size) measurement; the figures on rank 0, `None` elsewhere.
fn measure(comm: &Comm, op: &str, size: usize, a: &CollArgs) -> anyhow::Result<Option<Figures>> {
    let (iters, skip) = if size > 8192 {
        ((a.iters / 10).max(5), (a.skip / 10).max(1))
    } else {
        (a.iters, a.skip)
    };
    let mut buf = vec![1u8; size];
    let words = vec![1u64; (size / 8).max(1)];
    let margin = start_margin(comm)?;
    let (mut total, mut late) = (0.0, 0u64);
    for i in 0..skip + iters {
        comm.barrier()?;
        let mut at = (wall_ns() + margin).to_le_bytes();
        comm.bcast(0, &mut at)?;
        let at = u64::from_le_bytes(at);
        let on_time = wait_until(at);
        call(comm, op, size, &mut buf, &words)?;
        let dt = wall_ns().saturating_sub(at) as f64 * 1e-9;
        if i >= skip {
            total += dt;
            late += u64::from(!on_time);
        }
    }
    comm.barrier()?;
    let mine = total / iters as f64 * 1e6;
    let late = comm.reduce(0, &[late], ReduceOp::Sum)?;
    let all = comm.gather(0, &mine.to_le_bytes())?;
    Ok(all.zip(late).map(|(b, late)| {
        let v: Vec<f64> = b
            .chunks_exact(8)
            .map(|c| f64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
            .collect();
        Figures {
            avg: v.iter().sum::<f64>() / v.len() as f64,
            min: v.iter().copied().fold(f64::MAX, f64::min),
            max: v.iter().copied().fold(0.0, f64::max),
            late: late.first().copied().unwrap_or(0),
        }
    }))
}

/// The body of every rank.
pub fn rank(a: &CollArgs) -> anyhow::Result<()> {
    let comm = qcg::init()?;
    let root = comm.rank() == 0;
    let mut csv = String::from("op,algo,flits,bytes,avg_us,min_us,max_us,late\n");
    let mut plots: Vec<(String, Vec<svg::Series>)> = Vec::new();
    if root {
        let t = comm.topology();
        println!(
            "# qcg-bench coll: {} ranks, topology depth {}, OSU method ({} iterations, {} warm-up; a tenth above 8 KiB)",
            comm.size(),
            t.depth(),
            a.iters,
            a.skip
        );
        println!(
            "# Late: timed calls (summed over ranks) whose rank got the common start instant after it had passed; they count from that instant anyway (slower, never faster); 0 when every call started on time"
        );
    }
    for op in &a.ops {
        let mut series = Vec::new();
        for name in &a.algo {
            let al = algo(name)?;
            comm.set_coll_options(CollOptions {
                algo: al,
                flits: a.flits,
                ..comm.coll_options()
            });
            if root {
                println!("# {op} {name}\n# Size      Avg Latency(us)   Min(us)    Max(us)  Late");
            }
            let mut points = Vec::new();
            for size in sizes(a.min_size, a.max_size) {
                if let Some(f) = measure(&comm, op, size, a)? {
                    let Figures {
                        avg,
                        min,
                        max,
                        late,
                    } = f;
                    println!("{size:<10}{avg:>18.2}{min:>10.2}{max:>10.2}{late:>6}");
                    let _ = writeln!(
                        csv,
                        "{op},{name},{},{size},{avg:.3},{min:.3},{max:.3},{late}",
                        a.flits.map_or("auto".into(), |k| k.to_string())
                    );
                    points.push((size as f64, avg));
                }
            }
            series.push(svg::Series {
                name: name.clone(),
                points,
            });
        }
        plots.push((op.clone(), series));
    }
    if a.flit_sweep {
        let size = a.max_size;
        let mut series = Vec::new();
        for op in ["bcast", "reduce", "gather"] {
            let mut points = Vec::new();
            if root {
                println!("# flit sweep: {op} {size} B, hierarchical\n# Flits     Avg Latency(us)");
            }
            for k in 1..=16usize {
                comm.set_coll_options(CollOptions {
                    algo: Algo::Hierarchical,
                    flits: Some(k),
                    ..comm.coll_options()
                });
                if let Some(f) = measure(&comm, op, size, a)? {
                    println!("{k:<10}{:>18.2}", f.avg);
                    let _ = writeln!(
                        csv,
                        "{op},hier-sweep,{k},{size},{:.3},{:.3},{:.3},{}",
                        f.avg, f.min, f.max, f.late
                    );
                    points.push((k as f64, f.avg));
                }
            }
            series.push(svg::Series {
                name: op.into(),
                points,
            });
        }
        if root {
            std::fs::create_dir_all(&a.out)?;
            std::fs::write(
                a.out.join("coll-flits.svg"),
                svg::chart(
                    &format!("Flit sweep at {size} B (hierarchical)"),
                    "flits",
                    "time (us)",
                    &series,
                ),
            )?;
        }
    }
    if root {
        std::fs::create_dir_all(&a.out)?;
        std::fs::write(a.out.join("coll.csv"), csv)?;
        for (op, series) in &plots {
            std::fs::write(
                a.out.join(format!("coll-{op}.svg")),
                svg::chart(
                    &format!("{op}: time against size"),
                    "bytes",
                    "time (us)",
                    series,
                ),
            )?;
        }
        println!("# wrote {}/coll.csv and coll-*.svg", a.out.display());
    }
    Ok(())
}
