//! `qcg-bench coll`: collectives timed the way the OSU micro-benchmarks do.
//!
//! For every operation, algorithm and size: a barrier, warm-up calls, then timed calls,
//! each timed on its own with a barrier after it outside the timed part; each rank
//! averages its own times, and the report gives the mean over ranks with the min and
//! max. Output: OSU's `# Size  Avg Latency(us)` columns, a CSV and SVG plots.

use crate::svg;
use qcg::{Algo, CollOptions, Comm, ReduceOp};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Instant;

/// What a run measures.
#[derive(Clone, Debug, clap::Args)]
pub struct CollArgs {
    /// Operations: bcast, reduce, allreduce, gather, scatter, allgather, alltoall, barrier.
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

fn sizes(max: usize) -> Vec<usize> {
    let mut v = Vec::new();
    let mut s = 1;
    while s <= max {
        v.push(s);
        s *= 2;
    }
    v
}

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
        other => anyhow::bail!("unknown operation `{other}`"),
    }
    Ok(())
}

/// One (operation, size) measurement: this rank's mean, then min/mean/max over ranks.
fn measure(
    comm: &Comm,
    op: &str,
    size: usize,
    a: &CollArgs,
) -> anyhow::Result<Option<(f64, f64, f64)>> {
    let (iters, skip) = if size > 8192 {
        ((a.iters / 10).max(5), (a.skip / 10).max(1))
    } else {
        (a.iters, a.skip)
    };
    let mut buf = vec![1u8; size];
    let words = vec![1u64; (size / 8).max(1)];
    comm.barrier()?;
    let mut total = 0.0;
    for i in 0..skip + iters {
        let t = Instant::now();
        call(comm, op, size, &mut buf, &words)?;
        let dt = t.elapsed().as_secs_f64();
        if i >= skip {
            total += dt;
        }
        comm.barrier()?;
    }
    let mine = total / iters as f64 * 1e6;
    let all = comm.gather(0, &mine.to_le_bytes())?;
    Ok(all.map(|b| {
        let v: Vec<f64> = b
            .chunks_exact(8)
            .map(|c| f64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
            .collect();
        let min = v.iter().copied().fold(f64::MAX, f64::min);
        let max = v.iter().copied().fold(0.0, f64::max);
        (v.iter().sum::<f64>() / v.len() as f64, min, max)
    }))
}

/// The body of every rank.
pub fn rank(a: &CollArgs) -> anyhow::Result<()> {
    let comm = qcg::init()?;
    let root = comm.rank() == 0;
    let mut csv = String::from("op,algo,flits,bytes,avg_us,min_us,max_us\n");
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
                println!("# {op} {name}\n# Size      Avg Latency(us)   Min(us)    Max(us)");
            }
            let mut points = Vec::new();
            for size in sizes(a.max_size) {
                if let Some((avg, min, max)) = measure(&comm, op, size, a)? {
                    println!("{size:<10}{avg:>18.2}{min:>10.2}{max:>10.2}");
                    let _ = writeln!(
                        csv,
                        "{op},{name},{},{size},{avg:.3},{min:.3},{max:.3}",
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
                if let Some((avg, min, max)) = measure(&comm, op, size, a)? {
                    println!("{k:<10}{avg:>18.2}");
                    let _ = writeln!(csv, "{op},hier-sweep,{k},{size},{avg:.3},{min:.3},{max:.3}");
                    points.push((k as f64, avg));
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
