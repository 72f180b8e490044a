//! The C programs of `tests/c/` built with `qcg-mpicc` and run with
//! `qcg run -n 4 --clusters 2` (ranks in two clusters), and — with Open MPI
//! installed (installed here through apt-get when missing and running as root) —
//! built with its `mpicc` and run with `mpirun`: both must print the same lines.
//! Each program checks its results against values computed locally.

use anyhow::{bail, ensure, Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

const MPICC: &str = env!("CARGO_BIN_EXE_qcg-mpicc");
const RANKS: usize = 4;

fn target_dir() -> PathBuf {
    Path::new(MPICC)
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

fn source(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/c")
        .join(format!("{name}.c"))
}

/// `target/debug/qcg`, built once if missing (it belongs to another crate).
fn qcg() -> Result<PathBuf> {
    static BUILT: OnceLock<std::result::Result<PathBuf, String>> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let p = target_dir().join("qcg");
            if !p.exists() {
                let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
                let st = Command::new(cargo)
                    .args(["build", "-p", "qcg-cli", "--bin", "qcg"])
                    .status()
                    .map_err(|e| format!("cannot run cargo to build qcg: {e}"))?;
                if !st.success() || !p.exists() {
                    return Err(format!("building {} failed", p.display()));
                }
            }
            Ok(p)
        })
        .clone()
        .map_err(anyhow::Error::msg)
}

/// Where the programs are built: cargo's folder for test files (reused by every
/// run, so nothing piles up).
fn out_dir() -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("qcg-mpi-c");
    let _ = std::fs::create_dir_all(&d);
    d
}

fn build(cc: &Path, name: &str, tag: &str) -> Result<PathBuf> {
    let exe = out_dir().join(format!("{name}-{tag}"));
    let o = Command::new(cc)
        .args(["-O1", "-Wall", "-Werror"])
        .arg(source(name))
        .arg("-o")
        .arg(&exe)
        .output()
        .with_context(|| format!("running {}", cc.display()))?;
    ensure!(
        o.status.success(),
        "{} {name}.c failed:\n{}",
        cc.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    Ok(exe)
}

fn run_qcg(exe: &Path, args: &[&str]) -> Result<Output> {
    // `cargo test` puts target/debug on LD_LIBRARY_PATH, which would win over the
    // program's rpath (target/debug/deps, where `cargo test` rebuilds the library).
    // A short collective timeout: the mismatch test waits that long.
    Ok(Command::new(qcg()?)
        .env_remove("LD_LIBRARY_PATH")
        .env("QCG_COLL_TIMEOUT", "5")
        .args([
            "run",
            "-n",
            &RANKS.to_string(),
            "--clusters",
            "2",
            "--timeout",
            "240",
            "--",
        ])
        .arg(exe)
        .args(args)
        .output()?)
}

/// The lines the program printed (`rank …`), without `qcg run`'s `[rank] ` prefix.
fn lines(stdout: &[u8]) -> Vec<String> {
    let mut v: Vec<String> = String::from_utf8_lossy(stdout)
        .lines()
        .map(|l| match l.strip_prefix('[') {
            Some(rest) => rest.split_once("] ").map_or(l, |(_, t)| t),
            None => l,
        })
        .filter(|l| l.starts_with("rank "))
        .map(str::to_string)
        .collect();
    v.sort();
    v
}

/// Open MPI's `mpicc`, installed through apt-get when missing and we are root.
fn open_mpi() -> Option<PathBuf> {
    static FOUND: OnceLock<Option<PathBuf>> = OnceLock::new();
    FOUND
        .get_or_init(|| {
            let which = |b: &str| {
                Command::new("sh")
                    .args(["-c", &format!("command -v {b}")])
                    .output()
                    .ok()
                    .filter(|o| o.status.success())
                    .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
            };
            if which("mpicc").is_none() || which("mpirun").is_none() {
                let root = rustix::process::geteuid().is_root();
                if !root {
                    eprintln!("Open MPI is not installed and we are not root: the comparison with Open MPI is skipped");
                    return None;
                }
                let ok = Command::new("sh")
                    .args(["-c", "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openmpi-bin libopenmpi-dev >/dev/null"])
                    .status()
                    .map(|s| s.success())
                    .unwrap_or(false);
                assert!(ok, "installing openmpi-bin libopenmpi-dev with apt-get failed");
            }
            which("mpicc")
        })
        .clone()
}

fn run_open_mpi(mpicc: &Path, name: &str) -> Result<Vec<String>> {
    let exe = build(mpicc, name, "ompi")?;
    let o = Command::new("mpirun")
        .args([
            "--allow-run-as-root",
            "--oversubscribe",
            "-np",
            &RANKS.to_string(),
        ])
        .args(["--mca", "btl", "tcp,self"])
        .arg(&exe)
        .output()?;
    ensure!(
        o.status.success(),
        "{name} under Open MPI failed ({}):\n{}\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    Ok(lines(&o.stdout))
}

/// Builds and runs `name` under qcg, checks every rank passed, compares with Open
/// MPI; returns qcg's lines.
fn family(name: &str) -> Result<Vec<String>> {
    let exe = build(Path::new(MPICC), name, "qcg")?;
    let o = run_qcg(&exe, &[])?;
    let got = lines(&o.stdout);
    let report = || {
        format!(
            "{name} under qcg ({}):\n{}\n{}",
            o.status,
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    };
    ensure!(o.status.success(), "{}", report());
    for r in 0..RANKS {
        let done = format!("rank {r}: {name}: ");
        let line = got.iter().find(|l| l.starts_with(&done));
        match line {
            Some(l) if l.ends_with(" 0 failed") => {}
            _ => bail!("rank {r} did not pass: {}", report()),
        }
    }
    ensure!(!got.iter().any(|l| l.contains("FAIL")), "{}", report());
    if let Some(mpicc) = open_mpi() {
        let ours: Vec<String> = got
            .iter()
            .filter(|l| !l.contains("qcg-only"))
            .cloned()
            .collect();
        let theirs = run_open_mpi(&mpicc, name)?;
        ensure!(
            ours == theirs,
            "{name}: qcg and Open MPI differ\nqcg:\n{}\nOpen MPI:\n{}",
            ours.join("\n"),
            theirs.join("\n")
        );
    }
    Ok(got)
}

#[test]
fn point_to_point() -> Result<()> {
    family("p2p").map(|_| ())
}

#[test]
fn collectives() -> Result<()> {
    let got = family("collectives")?;
    assert!(got.contains(&"rank 0: allreduce SUM of 1..4 = 10".to_string()));
    Ok(())
}

#[test]
fn communicators_and_groups() -> Result<()> {
    let got = family("comms")?;
    // Two clusters of two ranks: each rank's site communicator holds two.
    let sites: Vec<&String> = got.iter().filter(|l| l.contains("qcg-only")).collect();
    assert_eq!(sites.len(), RANKS, "{got:?}");
    for l in sites {
        assert!(
            l.contains("site comm of size 2") && l.contains("members 2"),
            "{l}"
        );
    }
    Ok(())
}

#[test]
fn datatypes() -> Result<()> {
    let got = family("datatypes")?;
    assert!(got.contains(&"rank 0: MPI_DOUBLE_INT size 12 extent 16".to_string()));
    Ok(())
}

#[test]
fn errors_are_returned_under_errors_return() -> Result<()> {
    let got = family("errors")?;
    assert!(got
        .iter()
        .any(|l| l.contains("MPI_ERR_TRUNCATE") && l.starts_with("rank 0: MPI_Recv")));
    Ok(())
}

fn failed_run(mode: &str) -> Result<String> {
    static EXE: OnceLock<std::result::Result<PathBuf, String>> = OnceLock::new();
    let exe = EXE
        .get_or_init(|| build(Path::new(MPICC), "aborts", "qcg").map_err(|e| format!("{e:#}")))
        .clone()
        .map_err(anyhow::Error::msg)?;
    let o = run_qcg(&exe, &[mode])?;
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    ensure!(
        !o.status.success(),
        "mode {mode}: the job succeeded:\n{all}"
    );
    Ok(all)
}

#[test]
fn bad_input_under_the_default_handler_aborts_the_job_naming_call_and_rank() -> Result<()> {
    let all = failed_run("fatal")?;
    assert!(
        all.contains("MPI_Send failed on rank 1")
            && all.contains("rank 9 is not in the communicator")
            && all.contains("rank 1 exited with status"),
        "{all}"
    );
    Ok(())
}

#[test]
fn exiting_without_finalize_fails_the_job_naming_the_rank() -> Result<()> {
    let all = failed_run("nofinalize")?;
    assert!(
        all.contains("rank 2 exited without calling MPI_Finalize")
            && all.contains("rank 2 exited with status 1"),
        "{all}"
    );
    Ok(())
}

#[test]
fn mismatched_v_collectives_fail_naming_a_rank_instead_of_hanging() -> Result<()> {
    let all = failed_run("mismatch")?;
    // Rank 0 (root 0) waits for rank 1, and rank 1 (root 1) for rank 0: both time
    // out alike, and the first to do so names the other.
    let names = |me: u32, other: u32| {
        all.contains(&format!("MPI_Gatherv failed on rank {me}: MPI_ERR_OTHER: MPI_Gatherv: rank {other} sent nothing"))
    };
    assert!(
        (names(0, 1) || names(1, 0)) && all.contains("do not match"),
        "{all}"
    );
    Ok(())
}

#[test]
fn a_reduction_with_another_operation_on_one_rank_fails_naming_it() -> Result<()> {
    let all = failed_run("op")?;
    assert!(
        all.contains("MPI_Allreduce failed on rank")
            && all.contains("MPI_ERR_OP")
            && all.contains("rank 2 is at fault")
            && all.contains("MPI_MAX")
            && !all.contains("allreduce gave"),
        "{all}"
    );
    Ok(())
}

#[test]
fn a_reduction_with_another_root_on_one_rank_fails_naming_it() -> Result<()> {
    let all = failed_run("root")?;
    assert!(
        all.contains("MPI_Reduce failed on rank")
            && all.contains("MPI_ERR_ROOT")
            && all.contains("rank 3 called reduce with root 1 where this rank")
            && !all.contains("MPI_ERR_OTHER"),
        "{all}"
    );
    Ok(())
}

#[test]
fn a_reduction_with_another_datatype_of_the_same_size_fails_naming_it() -> Result<()> {
    let all = failed_run("ldtype")?;
    assert!(
        all.contains("MPI_Allreduce failed on rank")
            && all.contains("MPI_ERR_TYPE")
            && all.contains("rank 1 is at fault")
            && !all.contains("allreduce gave"),
        "{all}"
    );
    Ok(())
}

/// A rank that names itself root of a broadcast receives nothing, so it cannot tell
/// in the call; the ranks its bytes reach fail naming it rather than take them for
/// the root's, and its own next call (here `MPI_Finalize`) fails on what the root
/// sent it.
#[test]
fn a_bcast_whose_rank_names_itself_root_fails_naming_it() -> Result<()> {
    let all = failed_run("bcastroot")?;
    assert!(
        all.contains("MPI_ERR_ROOT")
            && all.contains("called bcast with root 3")
            && (0..3).all(|r| !all.contains(&format!("rank {r}: bcast gave 103"))),
        "{all}"
    );
    Ok(())
}

#[test]
fn alltoallv_with_counts_that_do_not_match_fails_naming_the_sender() -> Result<()> {
    let all = failed_run("a2av")?;
    assert!(
        all.contains("MPI_Alltoallv failed on rank 1")
            && all.contains("rank 0 sent 4 bytes where this rank (rank 1) expects 8"),
        "{all}"
    );
    Ok(())
}

#[test]
fn mpi_abort_stops_the_job_with_its_code() -> Result<()> {
    let all = failed_run("abort")?;
    assert!(
        all.contains("MPI_Abort called on rank 3 with error code 7")
            && all.contains("rank 3 exited with status 7"),
        "{all}"
    );
    Ok(())
}

#[test]
fn the_wrapper_shows_its_command_and_builds_a_program_that_runs() -> Result<()> {
    let o = Command::new(MPICC).args(["--showme", "x.c"]).output()?;
    let shown = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{shown}");
    assert!(
        shown.contains("-lqcgmpi") && shown.contains("-Wl,-rpath,") && shown.contains("/include"),
        "{shown}"
    );
    let exe = build(Path::new(MPICC), "aborts", "ok")?;
    let o = run_qcg(&exe, &["ok"])?;
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // The benchmark's ping-pong, checking every byte, as a smoke test.
    let pp = out_dir().join("pingpong");
    let b = Command::new(MPICC)
        .arg("-O2")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/pingpong.c"))
        .arg("-o")
        .arg(&pp)
        .status()?;
    assert!(b.success());
    let o = run_qcg(&pp, &["65536", "3"])?;
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success() && out.contains("65536"), "{out}");
    Ok(())
}

#[test]
fn the_cxx_wrapper_builds_a_cxx_program() -> Result<()> {
    let src = out_dir().join("hello.cpp");
    std::fs::write(
        &src,
        "#include <mpi.h>\n#include <vector>\nint main(int argc, char **argv) {\n  MPI_Init(&argc, &argv);\n  int n = 0;\n  MPI_Comm_size(MPI_COMM_WORLD, &n);\n  std::vector<int> v(n, 1), w(n);\n  MPI_Allreduce(v.data(), w.data(), n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);\n  MPI_Finalize();\n  return w[0] == n ? 0 : 1;\n}\n",
    )?;
    let exe = out_dir().join("hello-cxx");
    let b = Command::new(env!("CARGO_BIN_EXE_qcg-mpicxx"))
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .output()?;
    assert!(b.status.success(), "{}", String::from_utf8_lossy(&b.stderr));
    let o = run_qcg(&exe, &[])?;
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    Ok(())
}

#[test]
fn nonblocking_collectives() -> Result<()> {
    let got = family("nbc")?;
    // Under qcg the collective moved on while rank 0 slept without calling MPI:
    // the others' waits returned during the sleep, and rank 0's returned at once.
    let progress: Vec<&String> = got
        .iter()
        .filter(|l| l.contains("qcg-only: iallreduce done"))
        .collect();
    ensure!(
        progress.len() == RANKS && progress.iter().all(|l| l.contains(": yes")),
        "the iallreduce did not progress during rank 0's sleep:\n{}",
        got.join("\n")
    );
    Ok(())
}
