//! `qcg-bench coll --lab TOPO`: collectives on the lab, and Open MPI on the same hosts
//! in the same run.
//!
//! The lab comes up from the topology file with the qcg services inside it
//! ([`LabGrid`]); one qcg rank runs on every node (`--ppn` for more), told its place
//! (`QCG_TOPOLOGY`: site/node) and the level costs read from the file
//! (`QCG_TOPOLOGY_COSTS`: the WAN links' delay and bandwidth). Then the C harness
//! `bench/mpi/coll_osu.c`, built here with `mpicc`, times MPI_Bcast, MPI_Reduce,
//! MPI_Gather and MPI_Allreduce with the same OSU method, its ranks on the same nodes:
//! `mpirun` runs in the lab's `broker` host and starts its daemons through an rsh
//! agent that turns `ADDRESS CMD…` into `qcg-lab exec HOST -- sh -c CMD…`. Open MPI
//! keeps its defaults (coll/tuned) except what running 16 ranks on one machine over
//! TCP needs: `btl tcp,self`, no binding, yielding when idle, no tree spawn.

use crate::coll::CollArgs;
use crate::lab_run::LabRun;
use crate::svg;
use qcg_lab::grid::{self, LabGrid};
use qcg_lab::topo::{self, Topology};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// The harness, compiled by the bench at run time.
const HARNESS: &str = include_str!("../mpi/coll_osu.c");

/// Operations the Open MPI harness times.
pub const MPI_OPS: [&str; 5] = ["bcast", "reduce", "allreduce", "gather", "allgather"];

/// One measured point.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    /// Operation.
    pub op: String,
    /// `hier`, `flat`, `auto`, … or `ompi`.
    pub algo: String,
    /// Message size, bytes.
    pub bytes: usize,
    /// Mean over ranks of each rank's mean time, µs.
    pub avg: f64,
    /// Smallest rank mean, µs.
    pub min: f64,
    /// Largest rank mean, µs.
    pub max: f64,
    /// Calls that started after the common instant (see [`crate::coll`]).
    pub late: u64,
}

/// Where each rank runs: `(node, site)`, `ppn` ranks per node, sites in file order.
pub fn placement(t: &Topology, ppn: usize) -> Vec<(String, String)> {
    let mut v = Vec::new();
    for s in &t.sites {
        for k in 1..=s.nodes {
            for _ in 0..ppn {
                v.push((format!("{}-{k}", s.name), s.name.clone()));
            }
        }
    }
    v
}

/// Level costs (`QCG_TOPOLOGY_COSTS`) for ranks placed site/node in the lab: between
/// sites the slowest WAN link of the file (largest delay, smallest bandwidth), a mesh
/// when every pair of sites has its own link; inside a site the lab's unshaped LAN;
/// inside a node, loopback.
pub fn costs(t: &Topology) -> String {
    let n = t.sites.len();
    let mut pairs: Vec<(&str, &str)> = t
        .wan
        .iter()
        .map(|w| {
            let (a, b) = (w.a.as_str(), w.b.as_str());
            if a < b {
                (a, b)
            } else {
                (b, a)
            }
        })
        .collect();
    pairs.sort_unstable();
    pairs.dedup();
    let mesh = if n > 2 && pairs.len() == n * (n - 1) / 2 {
        ":mesh"
    } else {
        ""
    };
    let (delay, bw) = slowest_wan(t);
    format!("{}:{}{mesh},50:10000,5:10000", delay * 1000.0, bw)
}

/// The largest WAN delay (ms) and the smallest WAN bandwidth (Mbit/s) of the file;
/// 10 Gbit/s when it has no WAN link.
pub fn slowest_wan(t: &Topology) -> (f64, f64) {
    let delay = t.wan.iter().map(|w| w.delay_ms).fold(0.0, f64::max);
    let bw = t
        .wan
        .iter()
        .map(|w| w.bandwidth_mbit)
        .fold(f64::INFINITY, f64::min);
    (delay, if bw.is_finite() { bw } else { 10_000.0 })
}

/// The rsh agent `mpirun` starts its daemons with: the first argument is a node's
/// address (from the hostfile), the rest the command line for a remote shell.
pub fn agent_script(qcg_lab: &Path, prefix: &str, hosts: &[(String, String)]) -> String {
    let mut s = String::from(
        "#!/bin/sh\n# rsh agent of qcg-bench coll --lab: ADDRESS CMD... runs CMD in the lab host with that address\nhost=\"$1\"; shift\ncase \"$host\" in\n",
    );
    for (addr, name) in hosts {
        let _ = writeln!(s, "  {addr}) name={name} ;;");
    }
    let _ = write!(
        s,
        "  *) echo \"coll_osu agent: no lab host has address $host\" >&2; exit 1 ;;\nesac\nexec '{}' exec --prefix {prefix} \"$name\" -- sh -c \"$*\"\n",
        qcg_lab.display()
    );
    s
}

/// A point from its text fields `bytes, avg, min, max, late`.
fn point(op: &str, algo: &str, f: &[&str]) -> Option<Point> {
    Some(Point {
        op: op.to_string(),
        algo: algo.to_string(),
        bytes: f.first()?.parse().ok()?,
        avg: f.get(1)?.parse().ok()?,
        min: f.get(2)?.parse().ok()?,
        max: f.get(3)?.parse().ok()?,
        late: f.get(4)?.parse().ok()?,
    })
}

/// The harness's output lines (`op,size,avg,min,max,late`); other lines are ignored.
pub fn parse_mpi(out: &str) -> Vec<Point> {
    out.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.trim().split(',').collect();
            if f.len() != 6 || !MPI_OPS.contains(&f[0]) {
                return None;
            }
            point(f[0], "ompi", &f[1..])
        })
        .collect()
}

/// The qcg ranks' `coll.csv` (`op,algo,flits,bytes,avg_us,min_us,max_us,late`),
/// without the flit sweep's rows.
pub fn parse_csv(text: &str) -> Vec<Point> {
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            if f.len() != 8 || f[1].ends_with("-sweep") {
                return None;
            }
            point(f[0], f[1], &f[3..])
        })
        .collect()
}

/// Size / bandwidth + one latency of the slowest WAN link, µs.
pub fn bound_us(bytes: usize, delay_ms: f64, mbit: f64) -> f64 {
    bytes as f64 * 8.0 / mbit + delay_ms * 1000.0
}

/// Ratio `x / y` when both are there.
fn ratio(x: Option<f64>, y: Option<f64>) -> Option<f64> {
    match (x, y) {
        (Some(x), Some(y)) if y.is_finite() && y > 0.0 => Some(x / y),
        _ => None,
    }
}

fn cell(v: Option<f64>, width: usize, prec: usize) -> String {
    v.map_or(format!("{:>width$}", "-"), |v| format!("{v:>width$.prec$}"))
}

/// Operations whose large-message time the report compares with the bandwidth bound
/// (`fanout`: rank 0's isends to every other site at once, each over its own WAN
/// link; at the bound, each link carries the full bandwidth at the same time).
const BOUNDED: [&str; 4] = ["bcast", "reduce", "allreduce", "fanout"];

/// The side-by-side table of every operation and size, and the figures the targets
/// are read from. Two views of each point: the mean over ranks of each rank's mean
/// time (OSU's figure), and the slowest rank's mean (`max`: when the collective is
/// over for everyone, what the cost model predicts). `best` is the fastest of our
/// fixed algorithms (not `auto`).
pub fn report(points: &[Point], delay_ms: f64, mbit: f64) -> String {
    type Row<'a> = BTreeMap<&'a str, (f64, f64)>;
    let mut by_op: BTreeMap<&str, BTreeMap<usize, Row>> = BTreeMap::new();
    let mut algos: Vec<&str> = Vec::new();
    for p in points {
        by_op
            .entry(&p.op)
            .or_default()
            .entry(p.bytes)
            .or_default()
            .insert(&p.algo, (p.avg, p.max));
        if !algos.contains(&p.algo.as_str()) {
            algos.push(&p.algo);
        }
    }
    // Ours first, in the order measured; Open MPI last.
    algos.sort_by_key(|a| *a == "ompi");
    let ours: Vec<&str> = algos
        .iter()
        .copied()
        .filter(|a| *a != "ompi" && *a != "auto")
        .collect();
    let mut s = String::new();
    let mut summary = String::new();
    for (op, rows) in &by_op {
        let bounded = BOUNDED.contains(op);
        let _ = writeln!(
            s,
            "# {op}: mean over ranks (us); ratios of means, and of the slowest ranks (max){}",
            if bounded {
                "; bound = size / WAN bandwidth + one WAN latency"
            } else {
                ""
            }
        );
        let mut head = format!("{:<9}", "size");
        for a in &algos {
            let _ = write!(head, "{a:>11}");
        }
        let _ = writeln!(
            head,
            "{:>10}{:>10}{:>10}{:>10}{:>11}{:>10}",
            "ompi/hier", "(max)", "auto/best", "(max)", "bound", "max/bound"
        );
        s.push_str(&head);
        let mut worst_vs_ompi = (f64::INFINITY, f64::INFINITY);
        let mut worst_auto = (0.0f64, 0.0f64);
        let mut large = None;
        for (&bytes, t) in rows {
            let mut line = format!("{bytes:<9}");
            for a in &algos {
                line.push_str(&cell(t.get(a).map(|v| v.0), 11, 1));
            }
            let best = |f: fn(&(f64, f64)) -> f64| {
                ours.iter()
                    .filter_map(|a| t.get(a))
                    .map(f)
                    .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.min(v))))
            };
            let (mean, max) = (|v: &(f64, f64)| v.0, |v: &(f64, f64)| v.1);
            let get = |a: &str, f: fn(&(f64, f64)) -> f64| t.get(a).map(f);
            let vs_ompi = (
                ratio(get("ompi", mean), get("hier", mean)),
                ratio(get("ompi", max), get("hier", max)),
            );
            let auto = (
                ratio(get("auto", mean), best(mean)),
                ratio(get("auto", max), best(max)),
            );
            let bound = bounded.then(|| bound_us(bytes, delay_ms, mbit));
            let fastest_max = t
                .iter()
                .filter(|(a, _)| **a != "ompi")
                .map(|(_, v)| v.1)
                .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.min(v))));
            let vs_bound = ratio(fastest_max, bound);
            let _ = writeln!(
                s,
                "{line}{}{}{}{}{}{}",
                cell(vs_ompi.0, 10, 2),
                cell(vs_ompi.1, 10, 2),
                cell(auto.0, 10, 2),
                cell(auto.1, 10, 2),
                cell(bound, 11, 1),
                cell(vs_bound, 10, 2)
            );
            if bytes <= 64 << 10 {
                worst_vs_ompi.0 = worst_vs_ompi.0.min(vs_ompi.0.unwrap_or(f64::INFINITY));
                worst_vs_ompi.1 = worst_vs_ompi.1.min(vs_ompi.1.unwrap_or(f64::INFINITY));
            }
            worst_auto.0 = worst_auto.0.max(auto.0.unwrap_or(0.0));
            worst_auto.1 = worst_auto.1.max(auto.1.unwrap_or(0.0));
            if let Some(r) = vs_bound {
                large = Some((bytes, r));
            }
        }
        let _ = write!(summary, "# {op}:");
        if worst_vs_ompi.0.is_finite() {
            let _ = write!(
                summary,
                " Open MPI / hier up to 64 KiB >= {:.2}x (max {:.2}x);",
                worst_vs_ompi.0, worst_vs_ompi.1
            );
        }
        if worst_auto.0 > 0.0 {
            let _ = write!(
                summary,
                " auto / best of ours <= {:.2} (max {:.2});",
                worst_auto.0, worst_auto.1
            );
        }
        if let Some((b, r)) = large {
            let _ = write!(
                summary,
                " at {b} B the slowest rank of our best is {r:.2}x the bound;"
            );
        }
        let late: u64 = points.iter().filter(|p| p.op == *op).map(|p| p.late).sum();
        let _ = write!(summary, " {late} calls started late");
        summary.push('\n');
        s.push('\n');
    }
    s + &summary
}

/// Every point of `points` as CSV (`op,algo,bytes,avg_us,min_us,max_us,late`).
fn csv(points: &[Point]) -> String {
    let mut s = String::from("op,algo,bytes,avg_us,min_us,max_us,late\n");
    for p in points {
        let _ = writeln!(
            s,
            "{},{},{},{:.3},{:.3},{:.3},{}",
            p.op, p.algo, p.bytes, p.avg, p.min, p.max, p.late
        );
    }
    s
}

/// Kills every child still running on drop.
struct Ranks(Vec<(String, Child)>);

impl Drop for Ranks {
    fn drop(&mut self) {
        for (_, c) in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Ranks {
    /// Waits for every rank; the first failure names the rank and its node.
    fn wait(mut self) -> anyhow::Result<()> {
        let mut failed = None;
        for (i, (node, c)) in self.0.iter_mut().enumerate() {
            let st = c.wait()?;
            if !st.success() && failed.is_none() {
                failed = Some(format!("qcg rank {i} on {node} failed ({st})"));
            }
        }
        match failed {
            Some(f) => anyhow::bail!(f),
            None => Ok(()),
        }
    }
}

/// The qcg side: one rank per placement, `coll-rank` with `a`'s settings; rank 0's
/// report goes to our stdout, its CSV to `out`.
fn run_qcg(
    g: &LabGrid,
    t: &Topology,
    ppn: usize,
    costs: &str,
    a: &CollArgs,
    out: &Path,
) -> anyhow::Result<Vec<Point>> {
    let me = std::env::current_exe()?;
    let places = placement(t, ppn);
    let topo_env = places
        .iter()
        .map(|(node, site)| format!("{site}/{node}"))
        .collect::<Vec<_>>()
        .join(";");
    let mut args = crate::coll::rank_args(a);
    args.retain(|x| !x.starts_with("--out="));
    args.push(format!("--out={}", out.display()));
    let size = places.len() as u32;
    let mut ranks = Ranks(Vec::new());
    for (i, (node, _)) in places.iter().enumerate() {
        let mut c = g.rank(node, "coll", i as u32, size, &me);
        c.args(&args)
            .env(qcg::topo::ENV_TOPOLOGY, &topo_env)
            .env(qcg::topo::ENV_COSTS, costs)
            .stdin(Stdio::null())
            .stdout(if i == 0 {
                Stdio::inherit()
            } else {
                Stdio::null()
            });
        ranks.0.push((node.clone(), c.spawn()?));
    }
    ranks.wait()?;
    let text = std::fs::read_to_string(out.join("coll.csv"))?;
    Ok(parse_csv(&text))
}

/// Builds the harness with `mpicc` into `dir`.
fn build_harness(dir: &Path) -> anyhow::Result<PathBuf> {
    build_c(Path::new("mpicc"), HARNESS, dir, "coll_osu")
}

/// Builds C program `text` with compiler `cc` (`mpicc`, `qcg-mpicc`) into
/// `dir/name`.
pub fn build_c(cc: &Path, text: &str, dir: &Path, name: &str) -> anyhow::Result<PathBuf> {
    let src = dir.join(format!("{name}.c"));
    let bin = dir.join(name);
    std::fs::write(&src, text)?;
    let out = Command::new(cc)
        .args(["-O2", "-o"])
        .arg(&bin)
        .arg(&src)
        .output()
        .map_err(|e| {
            anyhow::anyhow!(
                "{}: {e}: install Open MPI (bash scripts/bench-deps.sh) or pass --no-mpi",
                cc.display()
            )
        })?;
    anyhow::ensure!(
        out.status.success(),
        "{} failed on {}: {}",
        cc.display(),
        src.display(),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(bin)
}

/// The Open MPI side: the harness on the same nodes, `ppn` ranks per node.
fn run_mpi(
    lab: &LabRun,
    t: &Topology,
    ppn: usize,
    a: &CollArgs,
    dir: &Path,
) -> anyhow::Result<Vec<Point>> {
    let bin = build_harness(dir)?;
    run_mpi_with(lab, t, ppn, a, dir, &bin, &[], "ompi")
}

/// Hosts in file order as `(address, name)` with `ppn` slots each, and the rsh
/// agent and hostfile written into `dir`: what `mpirun` needs in the lab.
pub fn mpirun_setup(
    lab: &LabRun,
    t: &Topology,
    ppn: usize,
    dir: &Path,
    only: Option<&[&str]>,
) -> anyhow::Result<usize> {
    let qcg_lab = lab.bins.join("qcg-lab");
    anyhow::ensure!(
        qcg_lab.exists(),
        "{} is missing: build the workspace's release binaries (cargo build --release --workspace --bins)",
        qcg_lab.display()
    );
    let mut hosts = Vec::new();
    let mut hostfile = String::new();
    for s in &t.sites {
        for k in 1..=s.nodes {
            let name = format!("{}-{k}", s.name);
            if only.is_some_and(|o| !o.contains(&name.as_str())) {
                continue;
            }
            let h = t
                .host(&name)
                .ok_or_else(|| anyhow::anyhow!("no lab host {name}"))?;
            let _ = writeln!(hostfile, "{} slots={ppn}", h.addr);
            hosts.push((h.addr.to_string(), name));
        }
    }
    let agent = dir.join("agent.sh");
    std::fs::write(&agent, agent_script(&qcg_lab, &lab.prefix, &hosts))?;
    std::fs::set_permissions(&agent, std::os::unix::fs::PermissionsExt::from_mode(0o755))?;
    std::fs::write(dir.join("hostfile"), &hostfile)?;
    Ok(hosts.len())
}

/// `mpirun` in the lab's broker host with the settings every run shares (see the
/// module docs), `extra` arguments, `np` ranks from `dir/hostfile`.
pub fn mpirun(lab: &LabRun, dir: &Path, np: usize, extra: &[&str]) -> Command {
    let mut c = Command::new(lab.bins.join("qcg-lab"));
    c.args(["exec", "--prefix", &lab.prefix, "broker", "--", "mpirun"])
        .args([
            "--allow-run-as-root",
            "--oversubscribe",
            "--bind-to",
            "none",
        ])
        .args(["--mca", "btl", "tcp,self"])
        .args(["--mca", "mpi_yield_when_idle", "1"])
        .args(["--mca", "plm_rsh_no_tree_spawn", "1"])
        .args(["--mca", "plm_rsh_agent"])
        .arg(dir.join("agent.sh"))
        .args(extra)
        .arg("--hostfile")
        .arg(dir.join("hostfile"))
        .args(["-np", &np.to_string()]);
    c
}

/// How long one `mpirun` of the collectives harness may take by default.
const MPIRUN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1800);

/// Runs the `mpirun` that `make` builds, its output into `file`, bounded: Open MPI's
/// launch now and then hangs (a daemon that never reports, or mpirun waiting on after
/// its ranks ended), so a run still going after `QCG_MPIRUN_TIMEOUT` seconds (default
/// [`MPIRUN_TIMEOUT`]) is killed and tried once more.
pub fn bounded_mpirun(
    mut make: impl FnMut() -> Command,
    file: &Path,
    what: &str,
) -> anyhow::Result<std::process::ExitStatus> {
    let limit = std::env::var("QCG_MPIRUN_TIMEOUT")
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(MPIRUN_TIMEOUT, std::time::Duration::from_secs);
    for attempt in 1..=2 {
        let mut child = make()
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(file)?)
            .stderr(Stdio::inherit())
            .spawn()?;
        let start = std::time::Instant::now();
        loop {
            if let Some(s) = child.try_wait()? {
                return Ok(s);
            }
            if start.elapsed() > limit {
                let _ = child.kill();
                let _ = child.wait();
                eprintln!(
                    "# Open MPI ({what}): mpirun still running after {} s (try {attempt} of 2); killed",
                    limit.as_secs()
                );
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
    anyhow::bail!(
        "mpirun hung twice (over {} s each, QCG_MPIRUN_TIMEOUT); its output is in {}",
        limit.as_secs(),
        file.display()
    )
}

/// The harness `bin` (built with Open MPI's `mpicc`) under `mpirun` with `extra`
/// arguments (e.g. `--mca coll_han_priority 100`), its points named `algo`.
#[allow(clippy::too_many_arguments)]
pub fn run_mpi_with(
    lab: &LabRun,
    t: &Topology,
    ppn: usize,
    a: &CollArgs,
    dir: &Path,
    bin: &Path,
    extra: &[&str],
    algo: &str,
) -> anyhow::Result<Vec<Point>> {
    let hosts = mpirun_setup(lab, t, ppn, dir, None)?;
    let ops: Vec<&str> = a
        .ops
        .iter()
        .map(String::as_str)
        .filter(|o| MPI_OPS.contains(o))
        .collect();
    anyhow::ensure!(
        !ops.is_empty(),
        "none of --ops is timed by the Open MPI harness ({})",
        MPI_OPS.join(", ")
    );
    let np = hosts * ppn;
    let file = dir.join(format!("{algo}.out"));
    eprintln!("# Open MPI ({algo}): {np} ranks, harness {}", bin.display());
    let status = bounded_mpirun(
        || {
            let mut c = mpirun(lab, dir, np, extra);
            c.arg(bin)
                .arg(ops.join(","))
                .arg(a.min_size.to_string())
                .arg(a.max_size.to_string())
                .arg(a.iters.to_string())
                .arg(a.skip.to_string());
            c
        },
        &file,
        algo,
    )?;
    let text = std::fs::read_to_string(&file).unwrap_or_default();
    anyhow::ensure!(
        status.success(),
        "mpirun failed ({status}); its output is in {}",
        file.display()
    );
    let points: Vec<Point> = parse_mpi(&text)
        .into_iter()
        .map(|p| Point {
            algo: algo.to_string(),
            ..p
        })
        .collect();
    anyhow::ensure!(
        !points.is_empty(),
        "mpirun printed no figures; its output is in {}",
        file.display()
    );
    Ok(points)
}

/// Runs the whole comparison; `costs` overrides the level costs read from the file.
pub fn run(
    topo_path: &Path,
    ppn: usize,
    no_mpi: bool,
    costs_override: Option<&str>,
    a: &CollArgs,
) -> anyhow::Result<()> {
    anyhow::ensure!(ppn >= 1, "--ppn must be at least 1");
    let t = topo::load(topo_path)?;
    anyhow::ensure!(!t.sites.is_empty(), "{} has no site", topo_path.display());
    let out = a.out.canonicalize().or_else(|_| {
        std::fs::create_dir_all(&a.out)?;
        a.out.canonicalize()
    })?;
    let costs = match costs_override {
        Some(c) => {
            anyhow::ensure!(
                qcg::topo::parse_costs(c).is_some_and(|v| v.len() == 3),
                "--costs `{c}`: expected three LATENCY_US:MBITS[:mesh] levels (sites, nodes, processes)"
            );
            c.to_string()
        }
        None => costs(&t),
    };
    let (delay, mbit) = slowest_wan(&t);
    let lab = LabRun::up(topo_path, "co")?;
    let mut points = {
        let g = LabGrid::start(&lab.prefix, &t, &lab.bins, &grid::as_built)?;
        eprintln!(
            "# qcg: {} ranks on {} (costs {costs})",
            placement(&t, ppn).len(),
            topo_path.display()
        );
        run_qcg(&g, &t, ppn, &costs, a, &out)?
    };
    if !no_mpi {
        let dir = tempfile::Builder::new().prefix("qcg-coll-mpi-").tempdir()?;
        points.extend(run_mpi(&lab, &t, ppn, a, dir.path())?);
    }
    std::fs::write(out.join("coll-lab.csv"), csv(&points))?;
    for op in &a.ops {
        let mut series: Vec<svg::Series> = Vec::new();
        for p in points.iter().filter(|p| &p.op == op) {
            let name = if p.algo == "ompi" {
                "Open MPI"
            } else {
                &p.algo
            };
            match series.iter_mut().find(|s| s.name == name) {
                Some(s) => s.points.push((p.bytes as f64, p.avg)),
                None => series.push(svg::Series {
                    name: name.to_string(),
                    points: vec![(p.bytes as f64, p.avg)],
                }),
            }
        }
        std::fs::write(
            out.join(format!("coll-{op}.svg")),
            svg::chart(
                &format!("{op} on {}: time against size", topo_path.display()),
                "bytes",
                "time (us)",
                &series,
            ),
        )?;
    }
    println!(
        "# qcg-bench coll --lab {}: {} ranks ({ppn} per node), WAN {delay} ms one way, {mbit} Mbit/s; qcg and Open MPI in the same lab, same run",
        topo_path.display(),
        placement(&t, ppn).len()
    );
    print!("{}", report(&points, delay, mbit));
    println!("# wrote {}/coll-lab.csv and coll-*.svg", out.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn four_sites() -> Topology {
        let text = include_str!("../../lab/topologies/four-sites.toml");
        topo::parse(Path::new("four-sites.toml"), text).unwrap_or_else(|e| panic!("{e}"))
    }

    fn point(op: &str, algo: &str, bytes: usize, avg: f64, max: f64) -> Point {
        Point {
            op: op.into(),
            algo: algo.into(),
            bytes,
            avg,
            min: 0.0,
            max,
            late: 0,
        }
    }

    #[test]
    fn ranks_go_one_per_node_site_by_site_with_the_wan_costs() {
        let t = four_sites();
        let p = placement(&t, 1);
        assert_eq!(p.len(), 16);
        assert_eq!(p[0], ("alpha-1".to_string(), "alpha".to_string()));
        assert_eq!(p[5], ("beta-2".to_string(), "beta".to_string()));
        assert_eq!(placement(&t, 2).len(), 32);
        assert_eq!(costs(&t), "10000:100:mesh,50:10000,5:10000");
        assert_eq!(qcg::topo::parse_costs(&costs(&t)).map(|c| c.len()), Some(3));
    }

    #[test]
    fn the_agent_maps_every_address_and_refuses_others() {
        let hosts = vec![
            ("10.1.0.2".to_string(), "alpha-1".to_string()),
            ("10.2.0.2".to_string(), "beta-1".to_string()),
        ];
        let a = agent_script(Path::new("/opt/qcg-lab"), "co12", &hosts);
        assert!(a.starts_with("#!/bin/sh\n"));
        assert!(a.contains("  10.1.0.2) name=alpha-1 ;;"));
        assert!(a.contains("  10.2.0.2) name=beta-1 ;;"));
        assert!(a.contains("no lab host has address $host"));
        assert!(a.contains("exec '/opt/qcg-lab' exec --prefix co12 \"$name\" -- sh -c \"$*\""));
    }

    #[test]
    fn harness_and_rank_outputs_parse_and_noise_is_skipped() {
        let out = "Warning: something\nbcast,1,10.5,1.0,20.0,0\nreduce,4096,7.25,2,9,3\nfoo,1,2,3,4,5\nbcast,x,1,1,1,0\n";
        let p = parse_mpi(out);
        assert_eq!(p.len(), 2);
        let want = Point {
            min: 2.0,
            late: 3,
            ..point("reduce", "ompi", 4096, 7.25, 9.0)
        };
        assert_eq!(p[1], want);
        let csv = "op,algo,flits,bytes,avg_us,min_us,max_us,late\nbcast,hier,auto,8,1.5,1.0,2.0,0\nbcast,hier-sweep,4,8,1,1,1,0\n";
        let q = parse_csv(csv);
        assert_eq!(q.len(), 1);
        assert_eq!(q[0].algo, "hier");
        assert_eq!(q[0].bytes, 8);
    }

    #[test]
    fn the_report_gives_the_ratios_the_targets_are_read_from() {
        let pts = vec![
            point("bcast", "hier", 1024, 100.0, 200.0),
            point("bcast", "flat", 1024, 150.0, 180.0),
            point("bcast", "auto", 1024, 105.0, 190.0),
            point("bcast", "ompi", 1024, 300.0, 400.0),
            point("bcast", "hier", 4 << 20, 300_000.0, 400_000.0),
            point("bcast", "auto", 4 << 20, 300_000.0, 380_000.0),
        ];
        let r = report(&pts, 10.0, 100.0);
        // Open MPI / hier: 3.00 on means, 2.00 on the slowest ranks; auto against
        // the best fixed algorithm: 105/100 on means, 190/180 on max.
        assert!(
            r.contains("Open MPI / hier up to 64 KiB >= 3.00x (max 2.00x)"),
            "{r}"
        );
        assert!(r.contains("auto / best of ours <= 1.05 (max 1.06)"), "{r}");
        // 4 MiB at 100 Mbit/s: 335544.3 us + 10 ms; the slowest rank of auto 380 ms.
        let bound = bound_us(4 << 20, 10.0, 100.0);
        assert!((bound - 345_544.32).abs() < 0.01);
        assert!(
            r.contains(&format!("{:.2}x the bound", 380_000.0 / bound)),
            "{r}"
        );
    }
}
