//! `qcg-bench coll --lab` end to end on a small lab: the qcg ranks and Open MPI's
//! (built here with mpicc, started by mpirun through the lab's namespaces) both
//! report every point, the times include the WAN delay the lab really adds (so the
//! common start instant works on both sides), and the lab is gone afterwards.
//! Installs Open MPI through `scripts/bench-deps.sh` when it is missing; fails (never
//! skips) when it cannot run.

#![allow(clippy::unwrap_used)]

mod common;
use common::*;

use std::path::Path;
use std::process::Command;

const QCG_BENCH: &str = env!("CARGO_BIN_EXE_qcg-bench");

const TWO_SITES: &str = r#"
[[site]]
name = "east"
nodes = 2
nat = "none"
firewall = "open"

[[site]]
name = "west"
nodes = 2
nat = "none"
firewall = "open"

[[public]]
name = "broker"

[[wan]]
sites = ["east", "west"]
delay_ms = 5
bandwidth_mbit = 100
"#;

fn require_open_mpi() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/bench-deps.sh");
    let out = Command::new("bash").arg(&script).output().unwrap();
    assert!(
        out.status.success(),
        "{} failed (Open MPI is needed): {}",
        script.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn lab_coll_runs_qcg_and_open_mpi_side_by_side() {
    require_lab();
    require_open_mpi();
    let dir = tempfile::tempdir().unwrap();
    let topo = dir.path().join("two-sites.toml");
    std::fs::write(&topo, TWO_SITES).unwrap();
    let out_dir = dir.path().join("out");
    let child = Command::new(QCG_BENCH)
        .args(["coll", "--lab"])
        .arg(&topo)
        .args([
            "--ops=bcast,allreduce",
            "--algo=hier,auto",
            "--max-size=8",
            "--iters=3",
            "--skip=1",
        ])
        .arg(format!("--out={}", out_dir.display()))
        // Open MPI's launch hangs now and then: a hung mpirun is killed and run again.
        .env("QCG_MPIRUN_TIMEOUT", "60")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "qcg-bench coll --lab failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The lab it built (prefix co<pid>) is gone.
    let ns = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let prefix = format!("co{}-", pid % 10_000);
    assert!(
        !String::from_utf8_lossy(&ns.stdout).contains(&prefix),
        "namespaces {prefix}* left behind"
    );
    assert!(stdout.contains("Open MPI / hier up to 64 KiB"), "{stdout}");
    let csv = std::fs::read_to_string(out_dir.join("coll-lab.csv")).unwrap();
    for op in ["bcast", "allreduce"] {
        for algo in ["hier", "auto", "ompi"] {
            for size in [1, 2, 4, 8] {
                let row = csv
                    .lines()
                    .find(|l| l.starts_with(&format!("{op},{algo},{size},")))
                    .unwrap_or_else(|| panic!("no {op} {algo} {size} in\n{csv}"));
                let f: Vec<f64> = row.split(',').skip(3).map(|x| x.parse().unwrap()).collect();
                let (avg, min, max) = (f[0], f[1], f[2]);
                // Half the ranks are a 5 ms WAN away from the data they need: the slowest
                // rank waits that long, whoever runs the collective, less what the delay
                // line may release a packet early (it keeps the mean at 5 ms by waking
                // up to MAX_EARLY ahead of due times, as its timed waits overshoot).
                let floor = 5000.0 - qcg_lab::delay::MAX_EARLY.as_secs_f64() * 1e6;
                assert!(max >= floor, "{row}: slowest rank under the WAN delay");
                assert!(min <= avg && avg <= max, "{row}");
            }
        }
    }
    assert!(out_dir.join("coll-bcast.svg").exists());
}
