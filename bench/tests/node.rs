//! `qcg-bench node --no-mpi` at tiny sizes: the C harnesses are built with the
//! `qcg-mpicc` beside the bench, run under the `qcg run` beside it (two ranks, then
//! three for the collectives, on one node of its embedded grid), busy-polling and
//! sleeping (and, for the two ranks, with the receiver copying alone: `QCG_SHM=read`),
//! and every figure asked for reaches the CSV and the tables; no Open MPI column
//! appears. Needs the workspace's binaries (`cargo build --workspace --bins`,
//! as scripts/test.sh does first).

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Command;

const QCG_BENCH: &str = env!("CARGO_BIN_EXE_qcg-bench");

#[test]
fn node_without_open_mpi_reports_every_size_for_both_regimes_of_qcg() {
    let bins = Path::new(QCG_BENCH).parent().unwrap();
    for b in ["qcg", "qcg-mpicc"] {
        assert!(
            bins.join(b).exists(),
            "{} is missing: run `cargo build --workspace --bins` first",
            bins.join(b).display()
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("sub/node.csv");
    let out = Command::new(QCG_BENCH)
        .args(["node", "--no-mpi", "--max=64", "--iters=20", "--skip=2"])
        .args([
            "--trials=1",
            "--window=4",
            "--coll-ranks=3",
            "--coll-max=16",
        ])
        .args(["--coll-iters=2", "--rounds=2"])
        .arg(format!("--out={}", csv.display()))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "qcg-bench node failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    let text = std::fs::read_to_string(&csv).unwrap();
    let rows: Vec<Vec<&str>> = text
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect())
        .collect();
    let mut want = Vec::new();
    for b in ["1", "8", "64"] {
        want.push(("lat", b));
        want.push(("bw", b));
    }
    for b in ["8", "16"] {
        want.push(("allreduce", b));
        want.push(("bcast", b));
    }
    let mut expected = 0;
    for (measure, bytes) in &want {
        let p2p = ["lat", "bw"].contains(measure);
        let imps: &[&str] = if p2p {
            &["qcg", "qcg-sleeping", "qcg-read"]
        } else {
            &["qcg", "qcg-sleeping"]
        };
        expected += imps.len();
        for &imp in imps {
            let row = rows
                .iter()
                .find(|r| r[0] == *measure && r[2] == *bytes && r[3] == imp)
                .unwrap_or_else(|| panic!("no {measure} {bytes} B {imp} row in\n{text}"));
            let v: f64 = row[4].parse().unwrap();
            assert!(v.is_finite() && v > 0.0, "{measure} {bytes} B {imp}: {v}");
        }
    }
    assert_eq!(rows.len(), expected, "sizes beyond --max?\n{text}");
    assert!(
        !text.contains("ompi"),
        "Open MPI ran with --no-mpi:\n{text}"
    );
    assert!(stdout.contains("# two ranks, one-way latency"), "{stdout}");
    assert!(
        stdout.contains("# MPI_Bcast, mean over ranks, 3 ranks, us"),
        "{stdout}"
    );
    let cores = std::thread::available_parallelism().unwrap().get();
    assert_eq!(
        stderr.contains("warning: 3 ranks on"),
        cores < 3,
        "the warning when ranks outnumber the {cores} cores:\n{stderr}"
    );
}
