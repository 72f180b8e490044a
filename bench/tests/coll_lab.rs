//! `qcg-bench coll --lab` end to end on a small lab: the qcg ranks and Open MPI's
//! (built here with mpicc, started by mpirun through the lab's namespaces) both
//! report every point, the times include the WAN delay the lab really adds (so the
//! common start instant works on both sides), and the lab is gone afterwards.
//! Installs Open MPI through `scripts/bench-deps.sh` when it is missing; fails (never
//! skips) when it cannot run.

#![allow(clippy::unwrap_used)]

mod common;
use common::*;

#[test]
fn lab_coll_runs_qcg_and_open_mpi_side_by_side() {
    require_lab();
    require_open_mpi();
    let (stdout, out_dir, _dir) = bench_two_sites(
        "coll",
        "co",
        &[
            "--ops=bcast,allreduce",
            "--algo=hier,auto",
            "--max-size=8",
            "--iters=3",
            "--skip=1",
        ],
        &[],
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
