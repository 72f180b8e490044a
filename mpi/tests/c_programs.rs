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
    // A short collective timeout: the mismatch test waits that long. Errors a
    // program's handler takes are logged with their cause, for a failure's report
    // (a flake once failed MPI_Finalize's barrier with only a class to show).
    Ok(Command::new(qcg()?)
        .env_remove("LD_LIBRARY_PATH")
        .env("QCG_COLL_TIMEOUT", "5")
        .env("QCG_LOG", "warn,qcgmpi=debug")
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
    // Each rank's output in a file of its own: mpirun forwards output in 4 KiB
    // pieces, which splices one rank's line into another's when both print much.
    let dir = out_dir().join(format!("ompi-out-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    let o = Command::new("mpirun")
        .args([
            "--allow-run-as-root",
            "--oversubscribe",
            "-np",
            &RANKS.to_string(),
        ])
        .args(["--mca", "btl", "tcp,self"])
        .arg("--output-filename")
        .arg(&dir)
        .arg(&exe)
        .output()?;
    ensure!(
        o.status.success(),
        "{name} under Open MPI failed ({}):\n{}\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let mut all = Vec::new();
    for r in 0..RANKS {
        let f = dir.join("1").join(format!("rank.{r}")).join("stdout");
        let text = std::fs::read(&f).with_context(|| format!("reading {}", f.display()))?;
        all.extend_from_slice(&text);
        if !all.ends_with(b"\n") {
            all.push(b'\n');
        }
    }
    Ok(lines(&all))
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

/// Handles freed and made again are the new objects at once (libqcgmpi's thread
/// that initialized MPI keeps its last lookup: a change must drop it).
#[test]
fn handles_made_again_are_the_new_ones() -> Result<()> {
    family("handles").map(|_| ())
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

/// Under `MPI_ERRORS_RETURN` the program gets only the class; what was wrong goes to
/// the log at debug level, naming the call, the rank and the cause.
#[test]
fn a_returned_error_is_logged_at_debug_with_its_cause() -> Result<()> {
    // run_qcg logs at debug; errors.c receives from rank np + 3.
    let exe = build(Path::new(MPICC), "errors", "qcg-log")?;
    let o = run_qcg(&exe, &[])?;
    let err = String::from_utf8_lossy(&o.stderr);
    ensure!(
        o.status.success(),
        "errors under qcg ({}):\n{err}",
        o.status
    );
    let cause = format!("MPI_ERR_RANK: rank {}", RANKS + 3);
    let said = err
        .lines()
        .filter(|l| l.contains(r#"call="MPI_Recv""#) && l.contains(&cause))
        .count();
    ensure!(
        said == RANKS,
        "each rank's MPI_Recv from rank {} logged once:\n{err}",
        RANKS + 3
    );
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

/// The same disagreements in a reduction large enough to run on the caller's bytes
/// (no trailers): the ranks fail naming the operations and datatypes each side
/// passed.
#[test]
fn a_large_reduction_with_another_operation_or_datatype_fails_naming_them() -> Result<()> {
    let all = failed_run("bigop")?;
    assert!(
        all.contains("MPI_Allreduce failed on rank")
            && (all.contains("MPI_ERR_OP") || all.contains("MPI_ERR_TYPE"))
            && (all.contains("with MPI_MAX") || all.contains("on datatype #"))
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

/// A profiling library (`profiler.c`, as mpiP would be) that defines `MPI_Send`,
/// `MPI_Allreduce` and `MPI_Finalize` and calls their `PMPI_` names sits between
/// the program and libqcgmpi: its counts are the program's calls, and the program
/// still gets its results.
#[test]
fn a_profiling_library_wraps_the_calls_through_pmpi() -> Result<()> {
    let dir = out_dir();
    let lib = dir.join("libqcgprof.so");
    let src = |n: &str| {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/c")
            .join(n)
    };
    let o = Command::new(MPICC)
        .args(["-shared", "-fPIC", "-Wall", "-Werror"])
        .arg(src("profiler.c"))
        .arg("-o")
        .arg(&lib)
        .output()?;
    ensure!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let exe = dir.join("profiled");
    let o = Command::new(MPICC)
        .args(["-Wall", "-Werror"])
        .arg(src("profiled.c"))
        .arg("-o")
        .arg(&exe)
        .arg(format!("-L{}", dir.display()))
        .arg("-lqcgprof")
        .arg(format!("-Wl,-rpath,{}", dir.display()))
        .output()?;
    ensure!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = run_qcg(&exe, &[])?;
    let got = lines(&o.stdout);
    ensure!(
        o.status.success(),
        "{got:?}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    for r in 0..RANKS {
        let want = format!(
            "rank {r}: profiler counted {} MPI_Send, 2 MPI_Allreduce",
            r + 1
        );
        ensure!(got.contains(&want), "no line {want:?} in {got:?}");
        ensure!(
            got.contains(&format!(
                "rank {r}: sum 6, last from {}",
                (r + RANKS - 1) % RANKS
            )),
            "{got:?}"
        );
    }
    Ok(())
}

/// A call to a function qcg does not provide fails to build with a message naming
/// it, in C and in C++, not with an implicit declaration and a link error.
#[test]
fn a_call_to_a_function_qcg_lacks_fails_to_build_naming_it() -> Result<()> {
    let body = "#include <mpi.h>\nint main(int argc, char **argv) {\n  MPI_Win w;\n  MPI_File f;\n  MPI_Init(&argc, &argv);\n  MPI_Win_create(0, 0, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &w);\n  MPI_File_open(MPI_COMM_WORLD, \"x\", 0, MPI_INFO_NULL, &f);\n  MPI_Finalize();\n  return 0;\n}\n";
    for (wrapper, ext) in [(MPICC, "c"), (env!("CARGO_BIN_EXE_qcg-mpicxx"), "cpp")] {
        let src = out_dir().join(format!("absent.{ext}"));
        std::fs::write(&src, body)?;
        let o = Command::new(wrapper)
            .arg(&src)
            .arg("-o")
            .arg(out_dir().join("absent"))
            .output()?;
        let err = String::from_utf8_lossy(&o.stderr);
        ensure!(!o.status.success(), "{ext}: it built");
        ensure!(
            err.contains(
                "qcg does not provide MPI_Win_create (one-sided communication, MPI 3.1 chapter 11)"
            ) && err.contains("qcg does not provide MPI_File_open (I/O, MPI 3.1 chapter 13)")
                && !err.contains("implicit declaration")
                && !err.contains("undefined reference"),
            "{ext}: {err}"
        );
    }
    Ok(())
}

/// The same in Fortran: gfortran alone says `undefined reference to mpi_file_open_`
/// or `Symbol 'mpi_mode_create' has no IMPLICIT type`; `qcg-mpif90` then names the
/// function or constant and says qcg does not provide it.
#[test]
fn a_fortran_call_to_a_function_qcg_lacks_fails_to_build_naming_it() -> Result<()> {
    gfortran()?;
    let programs = [
        (
            "absent_call",
            "program p\n  use mpi\n  implicit none\n  integer :: fh, ierr\n  call MPI_INIT(ierr)\n  call MPI_FILE_OPEN(MPI_COMM_WORLD, 'x', 5, MPI_INFO_NULL, fh, ierr)\n  call MPI_FINALIZE(ierr)\nend program p\n",
            "qcg-mpif90: qcg does not provide MPI_FILE_OPEN (I/O, MPI 3.1 chapter 13)",
        ),
        (
            "absent_constant",
            "program p\n  use mpi\n  implicit none\n  integer :: ierr, mode\n  call MPI_INIT(ierr)\n  mode = MPI_MODE_CREATE\n  call MPI_FINALIZE(ierr)\nend program p\n",
            "qcg-mpif90: qcg does not provide MPI_MODE_CREATE",
        ),
    ];
    for (name, body, want) in programs {
        let src = out_dir().join(format!("{name}.f90"));
        std::fs::write(&src, body)?;
        let o = Command::new(env!("CARGO_BIN_EXE_qcg-mpif90"))
            .arg(&src)
            .arg("-o")
            .arg(out_dir().join(name))
            .current_dir(out_dir())
            .output()?;
        let err = String::from_utf8_lossy(&o.stderr);
        ensure!(!o.status.success(), "{name}: it built");
        ensure!(err.contains(want), "{name}: {err}");
    }
    Ok(())
}

/// gfortran, installed through apt-get when missing and we are root.
fn gfortran() -> Result<()> {
    static FOUND: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    FOUND
        .get_or_init(|| {
            let have = || {
                Command::new("gfortran")
                    .arg("--version")
                    .output()
                    .is_ok_and(|o| o.status.success())
            };
            if have() {
                return Ok(());
            }
            if !rustix::process::geteuid().is_root() {
                return Err("gfortran is not installed and we are not root to install it (apt-get install gfortran)".into());
            }
            let ok = Command::new("sh")
                .args(["-c", "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gfortran >/dev/null"])
                .status()
                .is_ok_and(|s| s.success());
            if ok && have() {
                Ok(())
            } else {
                Err("installing gfortran with apt-get failed".into())
            }
        })
        .clone()
        .map_err(anyhow::Error::msg)
}

/// A Fortran program (`tests/fortran/basics.f90`, `use mpi`) built with
/// `qcg-mpif90` runs on 4 ranks over 2 clusters: statuses, requests, collectives
/// with `MPI_IN_PLACE`, a split, a vector type, strings; every rank passes and
/// prints the same lines as the same source built with Open MPI's `mpif90`.
#[test]
fn a_fortran_program_runs_as_under_open_mpi() -> Result<()> {
    fortran_as_under_open_mpi("basics", "fortran")
}

/// The same over `use mpi_f08`: derived-type handles, optional `ierror`.
#[test]
fn a_fortran_2008_program_runs_as_under_open_mpi() -> Result<()> {
    fortran_as_under_open_mpi("f08", "f08")
}

/// Attribute caching from Fortran: values as integers, Fortran callbacks.
#[test]
fn fortran_attributes_and_callbacks_run_as_under_open_mpi() -> Result<()> {
    fortran_as_under_open_mpi("attrs", "fortran attributes")
}

/// Builds `tests/fortran/{name}.f90` with qcg-mpif90 and runs it: every rank
/// prints `rank R: {label}: N checks, 0 failed`, and its lines are Open MPI's.
fn fortran_as_under_open_mpi(name: &str, label: &str) -> Result<()> {
    gfortran()?;
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fortran/{name}.f90"));
    let exe = out_dir().join(format!("fortran-{name}"));
    let o = Command::new(env!("CARGO_BIN_EXE_qcg-mpif90"))
        .arg("-O1")
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .output()?;
    ensure!(
        o.status.success(),
        "qcg-mpif90: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = run_qcg(&exe, &[])?;
    let got = lines(&o.stdout);
    let report = format!("{got:#?}\n{}", String::from_utf8_lossy(&o.stderr));
    ensure!(o.status.success(), "{report}");
    for r in 0..RANKS {
        let done = format!("rank {r}: {label}: ");
        ensure!(
            got.iter()
                .any(|l| l.starts_with(&done) && l.ends_with(" 0 failed")),
            "rank {r} did not pass: {report}"
        );
    }
    if open_mpi().is_some() {
        let theirs_exe = out_dir().join(format!("fortran-{name}-ompi"));
        let b = Command::new("mpif90")
            .arg("-O1")
            .arg(&src)
            .arg("-o")
            .arg(&theirs_exe)
            .output()?;
        ensure!(
            b.status.success(),
            "mpif90: {}",
            String::from_utf8_lossy(&b.stderr)
        );
        let t = Command::new("mpirun")
            .args([
                "--allow-run-as-root",
                "--oversubscribe",
                "-np",
                &RANKS.to_string(),
            ])
            .args(["--mca", "btl", "tcp,self"])
            .arg(&theirs_exe)
            .output()?;
        ensure!(t.status.success(), "{}", String::from_utf8_lossy(&t.stderr));
        let theirs = lines(&t.stdout);
        ensure!(
            got == theirs,
            "qcg and Open MPI differ\nqcg:\n{got:#?}\nOpen MPI:\n{theirs:#?}"
        );
    }
    Ok(())
}

#[test]
fn groups_attributes_info_and_names() -> Result<()> {
    let got = family("attrs")?;
    // MPI_COMM_SELF's attribute is deleted by MPI_Finalize on every rank.
    let finals = got
        .iter()
        .filter(|l| l.contains("deleted at finalize on MPI_COMM_SELF: 1"))
        .count();
    assert_eq!(finals, RANKS, "{got:?}");
    assert!(got.contains(&"rank 0: asked MPI_THREAD_MULTIPLE, got 3".to_string()));
    Ok(())
}

#[test]
fn intercommunicators() -> Result<()> {
    let got = family("inter")?;
    ensure!(
        got.iter().any(|l| l == "rank 0: merge 0 gives rank 2 of 4"),
        "{got:?}"
    );
    Ok(())
}

#[test]
fn process_topologies() -> Result<()> {
    let got = family("topo")?;
    // Open MPI's split (MPICH gives 9 x 8 for 72 in two dimensions).
    assert!(got.contains(&"rank 0: dims 72: [72] [12 6] [6 4 3] [4 3 3 2]".to_string()));
    // What Open MPI 4.1 gets wrong or does not check, qcg only.
    let only: Vec<&String> = got.iter().filter(|l| l.contains("qcg-only")).collect();
    assert_eq!(only.len(), 4 * RANKS, "{got:?}");
    for l in only {
        assert!(
            l.ends_with(": ok") || l.ends_with("class 13") || l.ends_with("class 11"),
            "{l}"
        );
    }
    Ok(())
}

#[test]
fn a_neighbor_collective_with_counts_that_do_not_match_fails_naming_the_neighbour() -> Result<()> {
    let all = failed_run("neighbor")?;
    // Rank 0's neighbours on the ring of 4 are ranks 1 and 3.
    let names = |r: u32| {
        all.contains(&format!("MPI_Neighbor_allgather failed on rank {r}"))
            && all.contains(&format!(
                "rank 0 sent 4 bytes where this rank (rank {r}) expects 8"
            ))
    };
    assert!(names(1) || names(3), "{all}");
    Ok(())
}

#[test]
fn a_neighbour_that_never_calls_is_named_after_the_collective_timeout() -> Result<()> {
    let all = failed_run("noneighbor")?;
    // Ranks 1 and 3 wait for rank 2's block; the first to give up names it.
    assert!(
        all.contains("MPI_Neighbor_allgather: neighbour 2 sent nothing in 5 s"),
        "{all}"
    );
    Ok(())
}

/// The rest of MPI 3.1 chapter 3 (buffered, ready, synchronous modes and their I
/// forms, persistent requests, matched probes, Testsome, Request_get_status, status
/// setters, cancel), compared with Open MPI; bad handles answered with their class.
#[test]
fn more_point_to_point() -> Result<()> {
    let got = family("p2p2")?;
    let has = |l: &str| got.contains(&l.to_string());
    for r in 0..RANKS {
        let l = format!(
            "rank {r}: qcg-only: MPI_Grequest_complete after MPI_Request_free: MPI_SUCCESS"
        );
        assert!(has(&l), "{got:?}");
    }
    assert!(
        has("rank 0: 24 messages from ranks 1 and 2 by matched probe (8 by MPI_Improbe)"),
        "{got:?}"
    );
    for r in 0..RANKS {
        for (what, class) in [
            ("MPI_Wait of request 123456", "MPI_ERR_REQUEST"),
            ("MPI_Start of request 123456", "MPI_ERR_REQUEST"),
            ("MPI_Start of a nonpersistent request", "MPI_ERR_REQUEST"),
            ("MPI_Start of an active request", "MPI_ERR_REQUEST"),
            ("MPI_Mrecv of MPI_MESSAGE_NULL", "MPI_ERR_REQUEST"),
            (
                "MPI_Request_get_status of request 123456",
                "MPI_ERR_REQUEST",
            ),
            ("MPI_Testsome of request 123456", "MPI_ERR_REQUEST"),
            ("MPI_Bsend with no buffer attached", "MPI_ERR_BUFFER"),
            ("MPI_Buffer_attach of a second buffer", "MPI_ERR_BUFFER"),
            (
                "MPI_Bsend of 400000 bytes into a buffer of 1024",
                "MPI_ERR_BUFFER",
            ),
        ] {
            let line = format!("rank {r}: qcg-only: {what}: {class}");
            assert!(has(&line), "missing {line:?} in {got:?}");
        }
        assert!(has(&format!(
            "rank {r}: qcg-only: detach gave back the small buffer: 1"
        )));
    }
    Ok(())
}

/// Under the default handler, a matched receive of `MPI_MESSAGE_NULL`, the start of
/// an active persistent request and a buffered send larger than the attached buffer
/// stop the job naming the call, the rank and why (with the sizes).
#[test]
fn more_point_to_point_mistakes_stop_the_job_naming_the_call() -> Result<()> {
    let exe = build(Path::new(MPICC), "p2p2", "qcg-fatal")?;
    for (mode, want) in [
        (
            "mrecvnull",
            [
                "MPI_Mrecv failed on rank 1",
                "MPI_ERR_REQUEST",
                "the message is MPI_MESSAGE_NULL",
            ],
        ),
        (
            "startactive",
            [
                "MPI_Start failed on rank 2",
                "MPI_ERR_REQUEST",
                "is active: complete it",
            ],
        ),
        (
            "bsendfit",
            [
                "MPI_Bsend failed on rank 3",
                "MPI_ERR_BUFFER",
                "a buffered send of 400000 bytes needs 400064 bytes of the attached buffer",
            ],
        ),
    ] {
        let o = run_qcg(&exe, &[mode])?;
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(!o.status.success(), "{mode}: the job succeeded:\n{all}");
        for w in want {
            assert!(all.contains(w), "{mode}: no {w:?} in:\n{all}");
        }
    }
    Ok(())
}

#[test]
fn more_datatypes() -> Result<()> {
    let got = family("datatypes2")?;
    assert!(got.contains(
        &"rank 0: external32 size 8, 10 bytes: 01 02 03 04 ff ff ff fe 05 06".to_string()
    ));
    // MPI_ERR_TYPE and MPI_ERR_COUNT on every rank.
    let bad = "overlapping type: class 3; overflowing count: class 2; MPI 1 names: -10 24 0 8";
    assert_eq!(got.iter().filter(|l| l.contains(bad)).count(), 4, "{got:?}");
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

/// Handle conversions between C and Fortran and MPI 1's names of datatype calls
/// (`MPI_Address`, `MPI_Type_extent`/`lb`/`ub`, `MPI_Type_struct`), as Open MPI
/// has them.
#[test]
fn handle_conversions_and_mpi1_names() -> Result<()> {
    let got = family("compat")?;
    assert!(
        got.iter().any(|l| l == "rank 1: got 1 0.5 ab from 0"),
        "{got:?}"
    );
    Ok(())
}

/// The non-blocking neighbourhood collectives give what the blocking ones give, on
/// a 2x2 periodic grid (one process on both sides of a dimension), a ring and a
/// distributed graph, as under Open MPI.
#[test]
fn nonblocking_neighbourhood_collectives() -> Result<()> {
    let got = family("ineighbor")?;
    assert!(
        got.iter()
            .any(|l| l.starts_with("rank 0: ring alltoall 301 100")),
        "{got:?}"
    );
    Ok(())
}

/// `MPI_Comm_create` with disjoint groups, an `MPI_Comm_idup` that does not wait for
/// the other ranks, and a keyval freed while an attribute uses it (cases of MPICH's
/// test suite that failed here), as under Open MPI.
#[test]
fn disjoint_creates_idup_without_waiting_and_freed_keyvals_in_use() -> Result<()> {
    let got = family("comms2")?;
    assert!(
        got.contains(&"rank 3: parity comm rank 1 of 2, sum 4".to_string()),
        "{got:?}"
    );
    Ok(())
}

/// Runs bind.c with `n` ranks on one node, under `taskset` to `cores`, with
/// `QCG_BIND` set to `bind` (unset for `None`).
fn bind_run(cores: &[usize], n: usize, bind: Option<&str>) -> Result<Output> {
    static EXE: OnceLock<std::result::Result<PathBuf, String>> = OnceLock::new();
    let exe = EXE
        .get_or_init(|| build(Path::new(MPICC), "bind", "qcg").map_err(|e| format!("{e:#}")))
        .clone()
        .map_err(anyhow::Error::msg)?;
    let list: Vec<String> = cores.iter().map(usize::to_string).collect();
    let mut c = Command::new("taskset");
    c.env_remove("LD_LIBRARY_PATH")
        .env_remove("QCG_BIND")
        .args(["-c", &list.join(",")])
        .arg(qcg()?)
        .args(["run", "-n", &n.to_string(), "--timeout", "120", "--"])
        .arg(&exe);
    if let Some(b) = bind {
        c.env("QCG_BIND", b);
    }
    c.output().context("running taskset (util-linux)")
}

/// The cores of a kernel CPU list (`0-3,6`).
fn cpu_list(line: &str) -> Result<Vec<usize>> {
    let mut cores = Vec::new();
    for part in line.trim().split(',') {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        cores.extend(a.parse::<usize>()?..=b.parse::<usize>()?);
    }
    Ok(cores)
}

/// The first (up to) two cores this test may run on.
fn two_cores() -> Result<Vec<usize>> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .context("no Cpus_allowed_list in /proc/self/status")?;
    let mut cores = cpu_list(line)?;
    cores.truncate(2);
    Ok(cores)
}

/// On one node with more ranks than cores (6 ranks held to two cores), broadcasts
/// above the eager limit go from the root to every rank at once, each copying from
/// the root's memory: every size around the limit, from every root, arrives whole.
#[test]
fn broadcasts_on_a_crowded_node_arrive_whole_from_every_root() -> Result<()> {
    let exe = build(Path::new(MPICC), "bcast_node", "qcg")?;
    let cores = two_cores()?;
    ensure!(
        cores.len() == 2,
        "this test needs two cores; it may use {cores:?}"
    );
    let list: Vec<String> = cores.iter().map(usize::to_string).collect();
    let o = Command::new("taskset")
        .env_remove("LD_LIBRARY_PATH")
        .args(["-c", &list.join(",")])
        .arg(qcg()?)
        .args(["run", "-n", "6", "--timeout", "240", "--"])
        .arg(&exe)
        .output()
        .context("running taskset (util-linux)")?;
    let report = format!(
        "bcast_node ({}):\n{}\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    ensure!(o.status.success(), "{report}");
    let got = lines(&o.stdout);
    for r in 0..6 {
        let want = format!("rank {r}: bcast_node: 72 checks, 0 failed");
        ensure!(got.contains(&want), "missing {want:?}: {report}");
    }
    Ok(())
}

#[test]
fn ranks_of_a_crowded_node_are_pinned_to_cores_in_blocks() -> Result<()> {
    let cores = two_cores()?;
    let k = cores.len();
    ensure!(
        k == 2,
        "this test needs two cores to pin ranks to; it may use {cores:?}"
    );
    // More ranks than the machine has cores over the two each may use: else the
    // ranks look split by a launcher already, and are left alone.
    let online = cpu_list(&std::fs::read_to_string("/sys/devices/system/cpu/online")?)?.len();
    let n = (2 * k).max(online / k + 1);
    let o = bind_run(&cores, n, None)?;
    let err = String::from_utf8_lossy(&o.stderr);
    ensure!(o.status.success(), "bind.c ({}):\n{err}", o.status);
    let got = lines(&o.stdout);
    let want: Vec<String> = (0..n)
        .map(|r| format!("rank {r} cores 1 first {}", cores[r * k / n]))
        .collect();
    ensure!(
        got == want,
        "{n} ranks on cores {cores:?}: {got:?}, expected {want:?}\n{err}"
    );

    // Turned off: every rank keeps all the cores it was given.
    let o = bind_run(&cores, n, Some("none"))?;
    let err = String::from_utf8_lossy(&o.stderr);
    ensure!(
        o.status.success(),
        "bind.c, QCG_BIND=none ({}):\n{err}",
        o.status
    );
    let got = lines(&o.stdout);
    let want: Vec<String> = (0..n)
        .map(|r| format!("rank {r} cores {k} first {}", cores[0]))
        .collect();
    ensure!(got == want, "QCG_BIND=none: {got:?}, expected {want:?}");

    // A core per rank: left alone.
    let o = bind_run(&cores, k, None)?;
    let got = lines(&o.stdout);
    let want: Vec<String> = (0..k)
        .map(|r| format!("rank {r} cores {k} first {}", cores[0]))
        .collect();
    ensure!(
        got == want,
        "{k} ranks on {k} cores: {got:?}, expected {want:?}"
    );

    // A wrong value fails the job naming the variable.
    let o = bind_run(&cores, n, Some("sideways"))?;
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    ensure!(!o.status.success(), "QCG_BIND=sideways ran:\n{all}");
    ensure!(
        all.contains("QCG_BIND") && all.contains("sideways"),
        "the error names QCG_BIND and the value:\n{all}"
    );
    Ok(())
}

/// Large allreduces on the ranks of one node (bigreduce.c: a sum and a
/// non-commutative user operation, each element checked): two ranks with a core each
/// split the vector between them (the schedule's choice, `qcg::topo`'s tests), four
/// on this machine's two cores keep the tree.
#[test]
fn large_allreduces_on_one_node_give_the_sequential_result() -> Result<()> {
    let exe = build(Path::new(MPICC), "bigreduce", "qcg")?;
    for n in [2, 4] {
        let o = Command::new(qcg()?)
            .env_remove("LD_LIBRARY_PATH")
            .args(["run", "-n", &n.to_string(), "--timeout", "120", "--"])
            .arg(&exe)
            .output()?;
        let out = String::from_utf8_lossy(&o.stdout);
        let report = || {
            format!(
                "{n} ranks ({}):\n{out}\n{}",
                o.status,
                String::from_utf8_lossy(&o.stderr)
            )
        };
        ensure!(o.status.success(), "{}", report());
        for r in 0..n {
            ensure!(
                out.contains(&format!("rank {r}: bigreduce: 10 checks, 0 failed")),
                "{}",
                report()
            );
        }
    }
    Ok(())
}

/// A collective setting that does not parse fails `MPI_Init` naming the variable
/// and its value, instead of being ignored.
#[test]
fn a_wrong_collective_setting_fails_mpi_init_naming_it() -> Result<()> {
    let exe = build(Path::new(MPICC), "bind", "qcg")?;
    for (var, value, says) in [
        (
            "QCG_COLL_ALGO",
            "fastest",
            "expected auto, hier, flat, linear or chain",
        ),
        ("QCG_COLL_FLITS", "0", "not a flit count"),
        ("QCG_TOPOLOGY_COSTS", "100:4000", "gives 1 level costs"),
    ] {
        let o = Command::new(qcg()?)
            .env_remove("LD_LIBRARY_PATH")
            .env(var, value)
            .args(["run", "-n", "2", "--timeout", "60", "--"])
            .arg(&exe)
            .output()?;
        let err = String::from_utf8_lossy(&o.stderr);
        ensure!(
            !o.status.success() && err.contains(var) && err.contains(value) && err.contains(says),
            "{var}={value} ({}):\n{err}",
            o.status
        );
    }
    Ok(())
}
