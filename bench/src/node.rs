//! `qcg-bench node`: ranks of one node, qcg beside Open MPI in the same run (the
//! targets of issue 20).
//!
//! - Two ranks: `bench/mpi/osu_p2p.c` (the OSU micro-benchmarks' `osu_latency` and
//!   `osu_bw` method, see its header) built with `qcg-mpicc` and with Open MPI's
//!   `mpicc`, run under `qcg run -n 2` (the embedded grid on loopback: one cluster of
//!   one node, so both ranks are on this node), under `mpirun -np 2` (Open MPI's
//!   defaults: its shared-memory transport) and under
//!   `mpirun --mca pml ob1 --mca btl tcp,self` (Open MPI over TCP).
//!   qcg runs twice: as it comes (a waiting rank polls for `QCG_SPIN_US`, 1 ms by
//!   default, before it sleeps: busy-polling for these exchanges, as Open MPI's) and
//!   with `QCG_SPIN_US=0` (it sleeps in the kernel at once: "sleeping"). Open MPI's
//!   shared memory has no sleeping regime. A third run, `QCG_SHM=read`, has the
//!   receiver copy large messages alone, as Open MPI does ("qcg read"), where by
//!   default the sender copies part of them ("Sharing a large copy" in libqcg's
//!   `engine/shm.rs`).
//! - `--coll-ranks` ranks (16): `bench/mpi/coll_osu.c` (OSU's method, every call from
//!   a common start instant, see `coll`), MPI_Allreduce and MPI_Bcast from 8 B to
//!   `--coll-max`, built both ways: `qcg run -n N` (busy-polling, then sleeping)
//!   against `mpirun -np N` with Open MPI's defaults (`--oversubscribe` when the ranks
//!   outnumber the cores).
//!
//! A table per measure (qcg, qcg sleeping, Open MPI sm, Open MPI tcp, and qcg / Open
//! MPI sm), the targets' ratios, and a CSV (`--out`).

use crate::coll_lab;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const P2P: &str = include_str!("../mpi/osu_p2p.c");
const COLL: &str = include_str!("../mpi/coll_osu.c");

/// qcg as it comes (spins 1 ms before sleeping).
pub const QCG: &str = "qcg";
/// qcg with `QCG_SPIN_US=0`.
pub const QCG_SLEEPING: &str = "qcg-sleeping";
/// qcg with `QCG_SHM=read` (the receiver copies large messages alone).
pub const QCG_READ: &str = "qcg-read";
/// Open MPI's defaults (its shared-memory transport on one node).
pub const OMPI_SM: &str = "ompi-sm";
/// Open MPI over TCP (`--mca pml ob1 --mca btl tcp,self`).
pub const OMPI_TCP: &str = "ompi-tcp";
/// The columns, in order.
const IMPLS: [&str; 5] = [QCG, QCG_SLEEPING, QCG_READ, OMPI_SM, OMPI_TCP];
/// The collectives measured.
const COLL_OPS: [&str; 2] = ["allreduce", "bcast"];

/// What `qcg-bench node` measures.
#[derive(Clone, Debug, clap::Args)]
pub struct NodeArgs {
    /// Largest point-to-point message, bytes (sizes 1, 8, 64, 1 KiB, 8 KiB, 64 KiB,
    /// 256 KiB, 1 MiB, 4 MiB up to it).
    #[arg(long, default_value_t = 4 << 20)]
    pub max: usize,
    /// Timed ping-pong round trips per size up to 8 KiB (OSU's 10,000; a tenth above,
    /// and osu_bw's rounds are a hundredth of it).
    #[arg(long, default_value_t = 10_000)]
    pub iters: usize,
    /// Warm-up round trips per size up to 8 KiB (OSU's 100; a tenth above).
    #[arg(long, default_value_t = 100)]
    pub skip: usize,
    /// Trials of each point-to-point measure; the best is kept.
    #[arg(long, default_value_t = 3)]
    pub trials: usize,
    /// Rounds: every run (qcg, Open MPI sm, Open MPI tcp, qcg sleeping; then the
    /// collectives) this many times over, the best figure of each kept. On a shared
    /// machine the noise drifts over minutes; alternating keeps one side from getting
    /// only the quiet (or the noisy) moments.
    #[arg(long, default_value_t = 1)]
    pub rounds: usize,
    /// Messages in flight in the bandwidth test (osu_bw's window).
    #[arg(long, default_value_t = 64)]
    pub window: usize,
    /// Ranks of the collectives.
    #[arg(long, default_value_t = 16)]
    pub coll_ranks: usize,
    /// Largest collective message, bytes (sizes 8, 16, … up to it).
    #[arg(long, default_value_t = 1 << 20)]
    pub coll_max: usize,
    /// Timed collective calls per size (a tenth above 8 KiB).
    #[arg(long, default_value_t = 100)]
    pub coll_iters: usize,
    /// Leave out the collectives.
    #[arg(long)]
    pub skip_coll: bool,
    /// Leave out the two ranks' latency and bandwidth (the collectives only).
    #[arg(long)]
    pub skip_p2p: bool,
    /// Leave out Open MPI (qcg's figures only; no mpicc needed).
    #[arg(long)]
    pub no_mpi: bool,
    /// The CSV written (`measure,unit,bytes,impl,value`).
    #[arg(long, default_value = "bench-out/node.csv")]
    pub out: PathBuf,
}

/// Figures: measure (`lat`, `bw`, `allreduce`, `bcast`) → bytes → implementation →
/// value (µs, or MB/s for `bw`).
pub type Figures = BTreeMap<String, BTreeMap<usize, BTreeMap<String, f64>>>;

/// A line without the `[RANK] ` that `qcg run` puts before what a rank prints.
pub fn unprefixed(line: &str) -> &str {
    let l = line.trim();
    l.strip_prefix('[')
        .and_then(|r| r.split_once("] "))
        .filter(|(n, _)| n.parse::<u32>().is_ok())
        .map_or(l, |(_, rest)| rest.trim())
}

/// The figures in the output of `osu_p2p` (`p2p,lat|bw,SIZE,VALUE`) and `coll_osu`
/// (`op,size,avg,min,max,late`: the mean over ranks is kept), with or without
/// `qcg run`'s prefixes, into `into` under `name`; where `into` has a figure already
/// (an earlier round), the better one is kept (the larger bandwidth, the shorter
/// time). Other lines are ignored. Returns how many figures were read.
pub fn parse_into(text: &str, name: &str, into: &mut Figures) -> usize {
    let mut n = 0;
    let mut put = |measure: &str, bytes: usize, v: f64| {
        into.entry(measure.to_string())
            .or_default()
            .entry(bytes)
            .or_default()
            .entry(name.to_string())
            .and_modify(|old| {
                *old = if measure == "bw" {
                    old.max(v)
                } else {
                    old.min(v)
                }
            })
            .or_insert(v);
        n += 1;
    };
    let plain: Vec<&str> = text.lines().map(unprefixed).collect();
    for l in &plain {
        let f: Vec<&str> = l.split(',').collect();
        if let ["p2p", m @ ("lat" | "bw"), size, v] = f.as_slice() {
            if let (Ok(size), Ok(v)) = (size.parse(), v.parse()) {
                put(m, size, v);
            }
        }
    }
    for p in coll_lab::parse_mpi(&plain.join("\n")) {
        put(&p.op, p.bytes, p.avg);
    }
    n
}

/// What a measure is, and its unit.
fn describe(measure: &str) -> (&'static str, &'static str) {
    match measure {
        "lat" => (
            "two ranks, one-way latency (osu_latency: half the round trip)",
            "us",
        ),
        "bw" => ("two ranks, windowed bandwidth (osu_bw)", "MB/s"),
        "allreduce" => ("MPI_Allreduce, mean over ranks", "us"),
        "bcast" => ("MPI_Bcast, mean over ranks", "us"),
        _ => ("", ""),
    }
}

fn cell(v: Option<f64>, w: usize, p: usize) -> String {
    v.map_or(format!("{:>w$}", "-"), |v| format!("{v:>w$.p$}"))
}

/// qcg / Open MPI sm at one size.
fn ratio(row: &BTreeMap<String, f64>) -> Option<f64> {
    match (row.get(QCG), row.get(OMPI_SM)) {
        (Some(q), Some(o)) if *o > 0.0 => Some(q / o),
        _ => None,
    }
}

/// The tables, one per measure, then the targets of issue 20 read from them.
pub fn report(f: &Figures, coll_ranks: usize) -> String {
    let mut s = String::new();
    let order = ["lat", "bw", "allreduce", "bcast"];
    for m in order.iter().filter(|m| f.contains_key(**m)) {
        let (what, unit) = describe(m);
        let ranks = if order[..2].contains(m) {
            String::new()
        } else {
            format!(", {coll_ranks} ranks")
        };
        let _ = writeln!(s, "# {what}{ranks}, {unit}");
        let _ = writeln!(
            s,
            "{:<9}{:>11}{:>14}{:>11}{:>11}{:>11}{:>13}",
            "size", "qcg", "qcg sleeping", "qcg read", "ompi sm", "ompi tcp", "qcg/ompi-sm"
        );
        for (bytes, row) in &f[*m] {
            let _ = writeln!(
                s,
                "{bytes:<9}{}{}{}{}{}{}",
                cell(row.get(QCG).copied(), 11, 2),
                cell(row.get(QCG_SLEEPING).copied(), 14, 2),
                cell(row.get(QCG_READ).copied(), 11, 2),
                cell(row.get(OMPI_SM).copied(), 11, 2),
                cell(row.get(OMPI_TCP).copied(), 11, 2),
                cell(ratio(row), 13, 2)
            );
        }
        s.push('\n');
    }
    let at = |m: &str, b: usize| f.get(m).and_then(|r| r.get(&b)).and_then(ratio);
    let x = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}"));
    let _ = writeln!(
        s,
        "# targets (issue 20), qcg / Open MPI sm: 1 B latency {} (<= 1.5); bandwidth 1 MiB {}, 4 MiB {} (>= 0.9)",
        x(at("lat", 1)),
        x(at("bw", 1 << 20)),
        x(at("bw", 4 << 20))
    );
    for op in COLL_OPS {
        let worst = f.get(op).and_then(|rows| {
            rows.iter()
                .filter_map(|(b, r)| Some((*b, ratio(r)?)))
                .max_by(|a, b| a.1.total_cmp(&b.1))
        });
        if let Some((b, r)) = worst {
            let _ = writeln!(
                s,
                "# targets: {op}, {coll_ranks} ranks: worst qcg / Open MPI sm {r:.2} at {b} B (<= 1.2 at every size)"
            );
        }
    }
    s
}

/// The CSV: `measure,unit,bytes,impl,value`.
pub fn csv(f: &Figures) -> String {
    let mut s = String::from("measure,unit,bytes,impl,value\n");
    for (m, rows) in f {
        let (_, unit) = describe(m);
        for (bytes, row) in rows {
            for name in IMPLS {
                if let Some(v) = row.get(name) {
                    let _ = writeln!(s, "{m},{unit},{bytes},{name},{v:.3}");
                }
            }
        }
    }
    s
}

/// The binaries `node` runs: `qcg` and `qcg-mpicc` beside this one.
struct Bins {
    qcg: PathBuf,
    mpicc: PathBuf,
}

impl Bins {
    fn beside_me() -> anyhow::Result<Bins> {
        let exe = std::env::current_exe()?;
        let dir = exe
            .parent()
            .ok_or_else(|| anyhow::anyhow!("no folder for {}", exe.display()))?;
        let (qcg, mpicc) = (dir.join("qcg"), dir.join("qcg-mpicc"));
        for b in [&qcg, &mpicc] {
            anyhow::ensure!(
                b.exists(),
                "{} is missing: qcg-bench node runs the qcg and qcg-mpicc beside it (cargo build --release -p qcg-bench -p qcg-cli -p qcg-mpi)",
                b.display()
            );
        }
        Ok(Bins { qcg, mpicc })
    }
}

/// How long one run may take (`qcg run --timeout`, and `QCG_MPIRUN_TIMEOUT` unless set).
const RUN_TIMEOUT_S: u64 = 1800;

/// `qcg run -n N -- program args` on its embedded grid (one node); `spin_us`:
/// `QCG_SPIN_US` for the ranks (`None`: the default), `shm`: `QCG_SHM` (the same).
/// Rank 0's lines, prefixed.
fn qcg_run(
    qcg: &Path,
    n: usize,
    program: &Path,
    args: &[String],
    spin_us: Option<&str>,
    shm: Option<&str>,
) -> anyhow::Result<String> {
    let mut c = Command::new(qcg);
    c.args(["run", "-n", &n.to_string()])
        .args(["--timeout", &RUN_TIMEOUT_S.to_string(), "--"])
        .arg(program)
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit());
    for (var, v) in [
        (qcg::env::vars::SPIN_US, spin_us),
        (qcg::env::vars::SHM, shm),
    ] {
        match v {
            Some(v) => c.env(var, v),
            None => c.env_remove(var),
        };
    }
    let out = c
        .output()
        .map_err(|e| anyhow::anyhow!("{}: {e}", qcg.display()))?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    anyhow::ensure!(
        out.status.success(),
        "qcg run -n {n} -- {} failed ({}); it printed:\n{text}",
        program.display(),
        out.status
    );
    Ok(text)
}

/// `mpirun -np N [extra] -- program args` on this machine, its output kept in `file`.
fn mpirun(
    n: usize,
    cores: usize,
    extra: &[&str],
    program: &Path,
    args: &[String],
    file: &Path,
) -> anyhow::Result<String> {
    let status = coll_lab::bounded_mpirun(
        || {
            let mut c = Command::new("mpirun");
            c.arg("--allow-run-as-root");
            if n > cores {
                c.arg("--oversubscribe");
            }
            c.args(extra)
                .args(["-np", &n.to_string()])
                .arg(program)
                .args(args);
            c
        },
        file,
        &format!("{n} ranks"),
    )?;
    let text = std::fs::read_to_string(file)?;
    anyhow::ensure!(
        status.success(),
        "mpirun -np {n} {} {} failed ({status}); it printed:\n{text}",
        extra.join(" "),
        program.display()
    );
    Ok(text)
}

/// Fails when a run gave no figure (a harness that printed something else).
fn expect_figures(read: usize, what: &str, text: &str) -> anyhow::Result<()> {
    anyhow::ensure!(read > 0, "{what} printed no figure:\n{text}");
    Ok(())
}

/// Runs everything and prints the report.
pub fn run(a: &NodeArgs) -> anyhow::Result<()> {
    anyhow::ensure!(a.max >= 1, "--max must be at least 1 byte");
    anyhow::ensure!(
        a.iters >= 1 && a.trials >= 1 && a.window >= 1,
        "--iters, --trials and --window must be at least 1"
    );
    anyhow::ensure!(
        !(a.skip_coll && a.skip_p2p),
        "--skip-coll with --skip-p2p measures nothing"
    );
    anyhow::ensure!(
        a.skip_coll || (a.coll_ranks >= 2 && a.coll_max >= 8 && a.coll_iters >= 1),
        "--coll-ranks must be at least 2, --coll-max at least 8 and --coll-iters at least 1 (or pass --skip-coll)"
    );
    if std::env::var_os("QCG_MPIRUN_TIMEOUT").is_none() {
        std::env::set_var("QCG_MPIRUN_TIMEOUT", RUN_TIMEOUT_S.to_string());
    }
    let bins = Bins::beside_me()?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let tmp = tempfile::Builder::new()
        .prefix("qcg-bench-node-")
        .tempdir()?;
    let dir = tmp.path();
    let mpicc = Path::new("mpicc");
    let p2p_qcg = coll_lab::build_c(&bins.mpicc, P2P, dir, "osu_p2p_qcg")?;
    let p2p_ompi = if a.no_mpi {
        None
    } else {
        Some(coll_lab::build_c(mpicc, P2P, dir, "osu_p2p_ompi")?)
    };
    let mut f = Figures::new();
    let p2p_args = [
        a.max.to_string(),
        a.iters.to_string(),
        a.skip.to_string(),
        a.trials.to_string(),
        a.window.to_string(),
    ];
    if cores < 2 {
        eprintln!("# warning: 2 ranks on {cores} core: they share it, busy-polling slows both");
    }
    let n = a.coll_ranks;
    let coll_args = [
        COLL_OPS.join(","),
        "8".to_string(),
        a.coll_max.to_string(),
        a.coll_iters.to_string(),
        (a.coll_iters / 10).max(1).to_string(),
    ];
    let coll = if a.skip_coll {
        None
    } else {
        if n > cores {
            eprintln!(
                "# warning: {n} ranks on {cores} cores: the ranks share the cores, and a rank that polls takes time from the one it waits for (both sides)"
            );
        }
        let q = coll_lab::build_c(&bins.mpicc, COLL, dir, "coll_osu_qcg")?;
        let o = if a.no_mpi {
            None
        } else {
            Some(coll_lab::build_c(mpicc, COLL, dir, "coll_osu_ompi")?)
        };
        Some((q, o))
    };
    let tcp = ["--mca", "pml", "ob1", "--mca", "btl", "tcp,self"];
    for round in 1..=a.rounds.max(1) {
        let r = format!("round {round} of {}", a.rounds.max(1));
        if !a.skip_p2p {
            eprintln!("# {r}: two ranks, qcg (busy-polling)");
            let t = qcg_run(&bins.qcg, 2, &p2p_qcg, &p2p_args, None, None)?;
            expect_figures(parse_into(&t, QCG, &mut f), "qcg run -n 2 osu_p2p", &t)?;
            if let Some(p2p_ompi) = &p2p_ompi {
                eprintln!("# {r}: two ranks, Open MPI defaults (shared memory)");
                let t = mpirun(2, cores, &[], p2p_ompi, &p2p_args, &dir.join("sm.out"))?;
                expect_figures(parse_into(&t, OMPI_SM, &mut f), "mpirun osu_p2p", &t)?;
                eprintln!("# {r}: two ranks, Open MPI over TCP");
                let t = mpirun(2, cores, &tcp, p2p_ompi, &p2p_args, &dir.join("tcp.out"))?;
                expect_figures(parse_into(&t, OMPI_TCP, &mut f), "mpirun (tcp) osu_p2p", &t)?;
            }
            eprintln!("# {r}: two ranks, qcg sleeping (QCG_SPIN_US=0)");
            let t = qcg_run(&bins.qcg, 2, &p2p_qcg, &p2p_args, Some("0"), None)?;
            expect_figures(parse_into(&t, QCG_SLEEPING, &mut f), "qcg run osu_p2p", &t)?;
            eprintln!("# {r}: two ranks, qcg with the receiver copying alone (QCG_SHM=read)");
            let t = qcg_run(&bins.qcg, 2, &p2p_qcg, &p2p_args, None, Some("read"))?;
            expect_figures(parse_into(&t, QCG_READ, &mut f), "qcg run osu_p2p", &t)?;
        }
        let Some((coll_qcg, coll_ompi)) = &coll else {
            continue;
        };
        eprintln!("# {r}: {n} ranks, qcg collectives");
        let t = qcg_run(&bins.qcg, n, coll_qcg, &coll_args, None, None)?;
        expect_figures(parse_into(&t, QCG, &mut f), "qcg run coll_osu", &t)?;
        if let Some(coll_ompi) = coll_ompi {
            eprintln!("# {r}: {n} ranks, Open MPI defaults collectives");
            let t = mpirun(n, cores, &[], coll_ompi, &coll_args, &dir.join("coll.out"))?;
            expect_figures(parse_into(&t, OMPI_SM, &mut f), "mpirun coll_osu", &t)?;
        }
        eprintln!("# {r}: {n} ranks, qcg collectives, sleeping (QCG_SPIN_US=0)");
        let t = qcg_run(&bins.qcg, n, coll_qcg, &coll_args, Some("0"), None)?;
        expect_figures(parse_into(&t, QCG_SLEEPING, &mut f), "qcg run coll_osu", &t)?;
    }

    if let Some(parent) = a.out.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(&a.out, csv(&f))?;
    println!(
        "# qcg-bench node: ranks of one node ({cores} cores), qcg (qcg run) beside Open MPI {} in one run; OSU's method, best of {} trials for two ranks, best of {} rounds",
        if a.no_mpi { "(left out: --no-mpi)" } else { "(mpirun)" },
        a.trials,
        a.rounds.max(1)
    );
    print!("{}", report(&f, a.coll_ranks));
    println!("# wrote {}", a.out.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixed_and_plain_lines_parse_and_others_are_ignored() {
        let qcg = "[0] p2p,lat,1,6.812\n[0] p2p,bw,1048576,2100.5\n[1] warning: something\n[0] allreduce,8,40.000,35.000,45.000,0\n[12] p2p,lat,oops,1\n";
        let ompi = "p2p,lat,1,0.160\np2p,bw,1048576,12400.0\nallreduce,8,20.000,18.000,22.000,0\n[0] p2p,lat\n";
        let mut f = Figures::new();
        assert_eq!(parse_into(qcg, QCG, &mut f), 3);
        assert_eq!(parse_into(ompi, OMPI_SM, &mut f), 3);
        assert_eq!(f["lat"][&1][QCG], 6.812);
        assert_eq!(f["lat"][&1][OMPI_SM], 0.16);
        assert_eq!(f["bw"][&(1 << 20)][OMPI_SM], 12400.0);
        assert_eq!(f["allreduce"][&8][QCG], 40.0);
        assert_eq!(unprefixed("[x] p2p,lat,1,2"), "[x] p2p,lat,1,2");
        // A second round keeps the better figure of each.
        let again = "[0] p2p,lat,1,7.5\n[0] p2p,bw,1048576,2000.0\n[0] allreduce,8,39.000,1,1,0\n";
        assert_eq!(parse_into(again, QCG, &mut f), 3);
        assert_eq!(f["lat"][&1][QCG], 6.812);
        assert_eq!(f["bw"][&(1 << 20)][QCG], 2100.5);
        assert_eq!(f["allreduce"][&8][QCG], 39.0);
        let r = report(&f, 16);
        assert!(r.contains("1 B latency 42.58 (<= 1.5)"), "{r}");
        assert!(r.contains("bandwidth 1 MiB 0.17, 4 MiB -"), "{r}");
        assert!(r.contains("worst qcg / Open MPI sm 1.95 at 8 B"), "{r}");
        let c = csv(&f);
        assert!(
            c.contains("lat,us,1,qcg,6.812\nlat,us,1,ompi-sm,0.160\n"),
            "{c}"
        );
        assert!(c.contains("bw,MB/s,1048576,ompi-sm,12400.000\n"), "{c}");
    }
}
