//! `qcg-bench mpi --lab TOPO`: the C MPI benchmarks, built with `qcg-mpicc` and with
//! Open MPI's `mpicc`, side by side in one lab run.
//!
//! - Point-to-point over a direct link (two nodes of the file's first site):
//!   `mpi/bench/pingpong.c` built with `qcg-mpicc`, the same source built with
//!   `mpicc` under `mpirun`, and libqcg's Rust `examples/pingpong` (same sizes, same
//!   output): one-way latency and bandwidth, and the C layer's ratios to the Rust API.
//! - Collectives: `bench/mpi/coll_osu.c` (OSU's method, see `coll_lab`) built with
//!   `qcg-mpicc`, one rank per node (`--ppn`), told its place and the level costs as
//!   `coll --lab` tells the Rust ranks; the same source with `mpicc` under `mpirun`
//!   with Open MPI's defaults, and again with its hierarchical component
//!   (`--mca coll_han_priority 100`). The table gives each one's slowest rank and the
//!   ratios Open MPI / qcg.
//!
//! - Overlap (`--overlap BYTES`): `bench/mpi/overlap.c` (OSU's `osu_iallreduce`
//!   method) on the same ranks, built both ways: how much of an `MPI_Iallreduce` a
//!   computation of its own length hides, qcg against Open MPI's defaults.
//!
//! The qcg ranks start as `coll --lab` starts its Rust ranks (each in its node, with
//! the job's environment and its node's helper: what `qcg run` gives a rank).

use crate::coll::CollArgs;
use crate::coll_lab::{self, Point};
use crate::lab_run::LabRun;
use qcg_lab::grid::{self, LabGrid};
use qcg_lab::topo;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Read;
use std::path::Path;
use std::process::{Child, Stdio};

const HARNESS: &str = include_str!("../mpi/coll_osu.c");
const PINGPONG: &str = include_str!("../../mpi/bench/pingpong.c");
const OVERLAP: &str = include_str!("../mpi/overlap.c");

/// A line `bytes,pure_us,compute_us,total_us,overlap_pct,pure_cpu_us` of
/// `bench/mpi/overlap.c`.
pub fn parse_overlap(text: &str) -> Option<[f64; 6]> {
    text.lines().rev().find_map(|l| {
        let f: Vec<f64> = l
            .split(',')
            .map(|x| x.trim().parse().ok())
            .collect::<Option<_>>()?;
        f.try_into().ok()
    })
}

/// The overlap table: qcg's and Open MPI's lines side by side. `cores` is the
/// machine's, where all the lab's ranks run.
pub fn overlap_report(qcg: &[f64; 6], ompi: Option<&[f64; 6]>, cores: usize) -> String {
    let mut s = String::from(
        "# MPI_Iallreduce overlapped with a computation of its own length (OSU's method; slowest rank, us)\n\
         # cpu: processor time of the pure phase, all ranks' threads together, per operation (us);\n\
         # busy: the cores that kept busy on average during it (cpu / pure)\n",
    );
    let _ = writeln!(
        s,
        "{:<10}{:>9}{:>12}{:>12}{:>12}{:>10}{:>12}{:>7}",
        "impl", "bytes", "pure", "compute", "total", "overlap%", "cpu", "busy"
    );
    for (name, v) in [("qcg", Some(qcg)), ("ompi", ompi)] {
        if let Some(v) = v {
            let _ = writeln!(
                s,
                "{name:<10}{:>9}{:>12.1}{:>12.1}{:>12.1}{:>10.1}{:>12.1}{:>7.2}",
                v[0],
                v[1],
                v[2],
                v[3],
                v[4],
                v[5],
                v[5] / v[1].max(1.0)
            );
        }
    }
    let _ = writeln!(
        s,
        "# qcg hides {:.1} % of the communication (target 80 %)",
        qcg[4]
    );
    let busy = qcg[5] / qcg[1].max(1.0);
    if busy > 0.5 * cores as f64 {
        let _ = writeln!(
            s,
            "# the communication alone kept {busy:.2} of this machine's {cores} cores busy: a computation \
             that spins on every rank competes with it for them, so only part of it can be hidden here"
        );
    }
    s
}

/// One ping-pong size: one-way µs and MB/s.
type PingPong = BTreeMap<usize, (f64, f64)>;

/// The lines `BYTES USEC MBS` of `mpi/bench/pingpong.c` and `examples/pingpong`.
pub fn parse_pingpong(text: &str) -> PingPong {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() != 3 {
                return None;
            }
            Some((f[0].parse().ok()?, (f[1].parse().ok()?, f[2].parse().ok()?)))
        })
        .collect()
}

/// Kills the ranks still running on drop.
struct Ranks(Vec<Child>);

impl Drop for Ranks {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Runs `program args` as a qcg job of one rank per entry of `nodes`; rank 0's
/// standard output. `env`: extra variables for every rank.
fn run_ranks(
    g: &LabGrid,
    nodes: &[String],
    job: &str,
    program: &Path,
    args: &[String],
    env: &[(&str, &str)],
) -> anyhow::Result<String> {
    let size = nodes.len() as u32;
    let mut ranks = Ranks(Vec::new());
    for (i, node) in nodes.iter().enumerate() {
        let mut c = g.rank(node, job, i as u32, size, program);
        c.args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(if i == 0 {
                Stdio::piped()
            } else {
                Stdio::null()
            });
        ranks.0.push(c.spawn()?);
    }
    let mut out = ranks.0[0]
        .stdout
        .take()
        .ok_or_else(|| anyhow::anyhow!("no stdout from rank 0"))?;
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let mut failed = None;
    for (i, c) in ranks.0.iter_mut().enumerate() {
        let st = c.wait()?;
        if !st.success() && failed.is_none() {
            failed = Some(format!(
                "{} rank {i} on {} failed ({st})",
                program.display(),
                nodes[i]
            ));
        }
    }
    let text = reader
        .join()
        .map_err(|_| anyhow::anyhow!("reading rank 0's output failed"))?;
    if let Some(f) = failed {
        anyhow::bail!("{f}; rank 0 printed:\n{text}");
    }
    Ok(text)
}

/// The point-to-point table: C over qcg against the Rust API (the target ratios)
/// and Open MPI.
pub fn pingpong_report(c: &PingPong, rust: &PingPong, ompi: &PingPong) -> String {
    let mut s =
        String::from("# point-to-point, direct link: one-way latency (us) and bandwidth (MB/s)\n");
    let _ = writeln!(
        s,
        "{:<9}{:>10}{:>10}{:>10}{:>9}{:>11}{:>11}{:>11}{:>9}",
        "size",
        "qcg-C us",
        "Rust us",
        "ompi us",
        "C/Rust",
        "qcg-C MB/s",
        "Rust MB/s",
        "ompi MB/s",
        "C/Rust"
    );
    let cell = |v: Option<f64>, w: usize, p: usize| {
        v.map_or(format!("{:>w$}", "-"), |v| format!("{v:>w$.p$}"))
    };
    let mut worst_lat = 0.0f64;
    let mut worst_bw = f64::INFINITY;
    for (&n, &(lat, bw)) in c {
        let r = rust.get(&n);
        let o = ompi.get(&n);
        let lat_ratio = r.map(|r| lat / r.0);
        let bw_ratio = r.filter(|r| r.1 > 0.0 && n > 0).map(|r| bw / r.1);
        if n <= 1024 {
            worst_lat = worst_lat.max(lat_ratio.unwrap_or(0.0));
        }
        if n >= 1 << 20 {
            worst_bw = worst_bw.min(bw_ratio.unwrap_or(f64::INFINITY));
        }
        let _ = writeln!(
            s,
            "{n:<9}{}{}{}{}{}{}{}{}",
            cell(Some(lat), 10, 1),
            cell(r.map(|r| r.0), 10, 1),
            cell(o.map(|o| o.0), 10, 1),
            cell(lat_ratio, 9, 2),
            cell(Some(bw), 11, 1),
            cell(r.map(|r| r.1), 11, 1),
            cell(o.map(|o| o.1), 11, 1),
            cell(bw_ratio, 9, 2)
        );
    }
    let _ = writeln!(
        s,
        "# C / Rust: latency up to 1 KiB <= {worst_lat:.2}x (target 1.05), bandwidth from 1 MiB >= {worst_bw:.2}x (target 0.98)"
    );
    s
}

/// The collectives table: the slowest rank of qcg's C harness, of Open MPI's
/// defaults and of Open MPI with han, per operation and size, and the ratios.
pub fn coll_report(points: &[Point]) -> String {
    // op -> size -> implementation -> (mean, slowest rank)
    type Rows<'a> = BTreeMap<usize, BTreeMap<&'a str, (f64, f64)>>;
    let mut by: BTreeMap<&str, Rows> = BTreeMap::new();
    for p in points {
        by.entry(&p.op)
            .or_default()
            .entry(p.bytes)
            .or_default()
            .insert(&p.algo, (p.avg, p.max));
    }
    let mut s = String::new();
    let mut summary = String::new();
    for (op, rows) in &by {
        let _ = writeln!(
            s,
            "# {op}: slowest rank's mean (us); mean over ranks in brackets for qcg; ratios Open MPI / qcg on the slowest ranks"
        );
        let _ = writeln!(
            s,
            "{:<9}{:>12}{:>12}{:>12}{:>12}{:>11}{:>11}",
            "size", "qcg-C", "(mean)", "ompi", "ompi-han", "ompi/qcg", "han/qcg"
        );
        let (mut small_ompi, mut small_han) = (f64::INFINITY, f64::INFINITY);
        let (mut all_ompi, mut all_han) = (f64::INFINITY, f64::INFINITY);
        for (&bytes, t) in rows {
            let get = |a: &str| t.get(a).copied();
            let q = get("qcg");
            let r = |a: &str| match (get(a), q) {
                (Some(o), Some(q)) if q.1 > 0.0 => Some(o.1 / q.1),
                _ => None,
            };
            let (ro, rh) = (r("ompi"), r("ompi-han"));
            if bytes <= 64 << 10 {
                small_ompi = small_ompi.min(ro.unwrap_or(f64::INFINITY));
                small_han = small_han.min(rh.unwrap_or(f64::INFINITY));
            }
            all_ompi = all_ompi.min(ro.unwrap_or(f64::INFINITY));
            all_han = all_han.min(rh.unwrap_or(f64::INFINITY));
            let cell = |v: Option<f64>, w: usize, p: usize| {
                v.map_or(format!("{:>w$}", "-"), |v| format!("{v:>w$.p$}"))
            };
            let _ = writeln!(
                s,
                "{bytes:<9}{}{}{}{}{}{}",
                cell(q.map(|v| v.1), 12, 1),
                cell(q.map(|v| v.0), 12, 1),
                cell(get("ompi").map(|v| v.1), 12, 1),
                cell(get("ompi-han").map(|v| v.1), 12, 1),
                cell(ro, 11, 2),
                cell(rh, 11, 2)
            );
        }
        s.push('\n');
        let x = |v: f64| {
            if v.is_finite() {
                format!("{v:.2}x")
            } else {
                "-".into()
            }
        };
        let _ = writeln!(
            summary,
            "# {op}: up to 64 KiB Open MPI defaults / qcg >= {} (target 2), han / qcg >= {} (target 1.5); at every size >= {} and {} (target 1)",
            x(small_ompi),
            x(small_han),
            x(all_ompi),
            x(all_han)
        );
    }
    s + &summary
}

/// Runs both comparisons.
pub fn run(
    topo_path: &Path,
    ppn: usize,
    a: &CollArgs,
    pp_max: usize,
    pp_reps: usize,
    (overlap, overlap_iters): (usize, usize),
    overlap_only: bool,
) -> anyhow::Result<()> {
    anyhow::ensure!(ppn >= 1, "--ppn must be at least 1");
    anyhow::ensure!(
        !overlap_only || overlap > 0,
        "--overlap-only with --overlap 0 measures nothing"
    );
    let t = topo::load(topo_path)?;
    let first = t
        .sites
        .first()
        .filter(|s| s.nodes >= 2 || overlap_only)
        .ok_or_else(|| anyhow::anyhow!("the first site needs two nodes for the ping-pong"))?;
    let pair = vec![format!("{}-1", first.name), format!("{}-2", first.name)];
    let out = a.out.canonicalize().or_else(|_| {
        std::fs::create_dir_all(&a.out)?;
        a.out.canonicalize()
    })?;
    let costs = coll_lab::costs(&t);
    let (delay, mbit) = coll_lab::slowest_wan(&t);
    let lab = LabRun::up(topo_path, "mp")?;
    let tmp = tempfile::Builder::new()
        .prefix("qcg-bench-mpi-")
        .tempdir()?;
    let dir = tmp.path();
    let qcg_cc = lab.bins.join("qcg-mpicc");
    let mpicc = Path::new("mpicc");
    let coll_qcg = coll_lab::build_c(&qcg_cc, HARNESS, dir, "coll_osu_qcg")?;
    let coll_ompi = coll_lab::build_c(mpicc, HARNESS, dir, "coll_osu_ompi")?;
    let pp_qcg = coll_lab::build_c(&qcg_cc, PINGPONG, dir, "pingpong_qcg")?;
    let pp_ompi = coll_lab::build_c(mpicc, PINGPONG, dir, "pingpong_ompi")?;
    let pp_rust = lab.bins.join("examples/pingpong");
    anyhow::ensure!(
        pp_rust.exists(),
        "{} is missing: cargo build --release -p qcg --example pingpong",
        pp_rust.display()
    );
    let g = LabGrid::start(&lab.prefix, &t, &lab.bins, &grid::as_built)?;

    // Point-to-point, each side twice (the better run kept per size, as NetPIPE does).
    let pp_args = [pp_max.to_string(), pp_reps.to_string()];
    let best = |runs: Vec<PingPong>| -> PingPong {
        let mut b = PingPong::new();
        for r in runs {
            for (n, v) in r {
                b.entry(n)
                    .and_modify(|x: &mut (f64, f64)| {
                        if v.0 < x.0 {
                            *x = v;
                        }
                    })
                    .or_insert(v);
            }
        }
        b
    };
    let mut c_runs = Vec::new();
    let mut r_runs = Vec::new();
    let mut o_runs = Vec::new();
    let rounds = if overlap_only { 0 } else { 2 };
    let np = if overlap_only {
        0
    } else {
        coll_lab::mpirun_setup(&lab, &t, 1, dir, Some(&[&pair[0], &pair[1]]))?
    };
    for k in 0..rounds {
        eprintln!("# ping-pong {} and {}, round {k}", pair[0], pair[1]);
        c_runs.push(parse_pingpong(&run_ranks(
            &g,
            &pair,
            &format!("ppc{k}"),
            &pp_qcg,
            &pp_args,
            &[],
        )?));
        r_runs.push(parse_pingpong(&run_ranks(
            &g,
            &pair,
            &format!("ppr{k}"),
            &pp_rust,
            &pp_args,
            &[],
        )?));
        let file = dir.join(format!("ompi-pingpong-{k}.out"));
        let status = coll_lab::bounded_mpirun(
            || {
                let mut c = coll_lab::mpirun(&lab, dir, np, &[]);
                c.arg(&pp_ompi).args(&pp_args);
                c
            },
            &file,
            "ping-pong",
        )?;
        anyhow::ensure!(
            status.success(),
            "mpirun pingpong failed ({status}); its output is in {}",
            file.display()
        );
        o_runs.push(parse_pingpong(&std::fs::read_to_string(&file)?));
    }
    let pp = pingpong_report(&best(c_runs), &best(r_runs), &best(o_runs));

    // Collectives.
    let places = coll_lab::placement(&t, ppn);
    let nodes: Vec<String> = places.iter().map(|(n, _)| n.clone()).collect();
    let topo_env = places
        .iter()
        .map(|(node, site)| format!("{site}/{node}"))
        .collect::<Vec<_>>()
        .join(";");
    let ops: Vec<&str> = a
        .ops
        .iter()
        .map(String::as_str)
        .filter(|o| coll_lab::MPI_OPS.contains(o) && !overlap_only)
        .collect();
    let mut points: Vec<Point> = Vec::new();
    if !ops.is_empty() {
        let coll_args = [
            ops.join(","),
            a.min_size.to_string(),
            a.max_size.to_string(),
            a.iters.to_string(),
            a.skip.to_string(),
        ];
        eprintln!("# qcg (C, qcg-mpicc): {} ranks, costs {costs}", nodes.len());
        let text = run_ranks(
            &g,
            &nodes,
            "mpic",
            &coll_qcg,
            &coll_args,
            &[
                (qcg::topo::ENV_TOPOLOGY, topo_env.as_str()),
                (qcg::topo::ENV_COSTS, costs.as_str()),
            ],
        )?;
        std::fs::write(out.join("mpi-qcg.out"), &text)?;
        points.extend(coll_lab::parse_mpi(&text).into_iter().map(|p| Point {
            algo: "qcg".into(),
            ..p
        }));
        // Open MPI's outputs (ompi.out, ompi-han.out) go beside ours, so that a run
        // that fails or hangs halfway (mpirun once hung after its ranks had ended)
        // leaves what it measured.
        points.extend(coll_lab::run_mpi_with(
            &lab,
            &t,
            ppn,
            a,
            &out,
            &coll_ompi,
            &[],
            "ompi",
        )?);
        points.extend(coll_lab::run_mpi_with(
            &lab,
            &t,
            ppn,
            a,
            &out,
            &coll_ompi,
            &["--mca", "coll_han_priority", "100"],
            "ompi-han",
        )?);
    }
    // Overlap: qcg's ranks, then Open MPI's defaults, on the same nodes.
    let mut overlap_text = String::new();
    if overlap > 0 {
        let ov_qcg = coll_lab::build_c(&qcg_cc, OVERLAP, dir, "overlap_qcg")?;
        let ov_ompi = coll_lab::build_c(mpicc, OVERLAP, dir, "overlap_ompi")?;
        let ov_args = [overlap.to_string(), overlap_iters.max(1).to_string()];
        eprintln!(
            "# overlap: MPI_Iallreduce of {overlap} bytes, {} ranks",
            nodes.len()
        );
        let text = run_ranks(
            &g,
            &nodes,
            "ovl",
            &ov_qcg,
            &ov_args,
            &[
                (qcg::topo::ENV_TOPOLOGY, topo_env.as_str()),
                (qcg::topo::ENV_COSTS, costs.as_str()),
            ],
        )?;
        let q = parse_overlap(&text)
            .ok_or_else(|| anyhow::anyhow!("no overlap line from qcg's rank 0:\n{text}"))?;
        let np = coll_lab::mpirun_setup(&lab, &t, ppn, dir, None)?;
        let file = out.join("ompi-overlap.out");
        let status = coll_lab::bounded_mpirun(
            || {
                let mut c = coll_lab::mpirun(&lab, dir, np, &[]);
                c.arg(&ov_ompi).args(&ov_args);
                c
            },
            &file,
            "overlap",
        );
        // qcg's figures are in hand: an Open MPI that failed or hung only loses its
        // own column.
        let o = match status {
            Ok(s) if s.success() => parse_overlap(&std::fs::read_to_string(&file)?),
            Ok(s) => {
                eprintln!("# mpirun overlap failed ({s}): Open MPI's column left out");
                None
            }
            Err(e) => {
                eprintln!("# {e}: Open MPI's column left out");
                None
            }
        };
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        overlap_text = overlap_report(&q, o.as_ref(), cores);
    }
    let mut csv = String::from("op,impl,bytes,avg_us,min_us,max_us,late\n");
    for p in &points {
        let _ = writeln!(
            csv,
            "{},{},{},{:.3},{:.3},{:.3},{}",
            p.op, p.algo, p.bytes, p.avg, p.min, p.max, p.late
        );
    }
    std::fs::write(out.join("mpi-lab.csv"), csv)?;
    println!(
        "# qcg-bench mpi --lab {}: C programs built with qcg-mpicc and with Open MPI's mpicc, same lab, same run; {} ranks ({ppn} per node), WAN {delay} ms one way, {mbit} Mbit/s",
        topo_path.display(),
        nodes.len()
    );
    if overlap_only {
        print!("{overlap_text}");
    } else {
        print!("{pp}\n{}\n{overlap_text}", coll_report(&points));
    }
    println!("# wrote {}/mpi-lab.csv", out.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pingpong_lines_parse_and_the_header_is_skipped() {
        let p = parse_pingpong("     bytes   usec/1-way         MB/s\n         0         12.5          0.0\n   1048576       900.0       1165.1\n");
        assert_eq!(p.len(), 2);
        assert_eq!(p[&1048576], (900.0, 1165.1));
        let r = pingpong_report(&p, &p, &PingPong::new());
        assert!(r.contains("latency up to 1 KiB <= 1.00x"), "{r}");
        assert!(r.contains("bandwidth from 1 MiB >= 1.00x"), "{r}");
    }

    #[test]
    fn overlap_lines_parse_and_report() {
        let q = parse_overlap("4194304,1000.0,1001.0,1150.0,85.0,1900.0\n").expect("parses");
        assert_eq!(q[4], 85.0);
        assert!(parse_overlap("garbage\n1,2\n").is_none());
        let r = overlap_report(&q, Some(&[4194304.0, 900.0, 901.0, 1750.0, 5.7, 800.0]), 2);
        assert!(r.contains("qcg hides 85.0 %"), "{r}");
        assert!(r.contains("ompi"), "{r}");
        assert!(r.contains(" 1.90\n"), "{r}");
        assert!(
            r.contains("kept 1.90 of this machine's 2 cores busy"),
            "{r}"
        );
        let idle = overlap_report(&q, None, 16);
        assert!(!idle.contains("cores busy"), "{idle}");
    }

    #[test]
    fn the_collectives_table_gives_open_mpi_over_qcg_on_the_slowest_ranks() {
        let pt = |algo: &str, bytes: usize, max: f64| Point {
            op: "bcast".into(),
            algo: algo.into(),
            bytes,
            avg: max / 2.0,
            min: 0.0,
            max,
            late: 0,
        };
        let r = coll_report(&[
            pt("qcg", 8, 100.0),
            pt("ompi", 8, 300.0),
            pt("ompi-han", 8, 160.0),
            pt("qcg", 1 << 20, 1000.0),
            pt("ompi", 1 << 20, 900.0),
        ]);
        assert!(r.contains("defaults / qcg >= 3.00x"), "{r}");
        assert!(r.contains("han / qcg >= 1.60x"), "{r}");
        assert!(r.contains("at every size >= 0.90x and 1.60x"), "{r}");
    }
}
