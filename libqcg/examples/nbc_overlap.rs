//! Overlapping a non-blocking collective with computation: start an allreduce,
//! compute, wait. Run with `qcg run -n 4 --clusters 2 -- nbc_overlap [MIB]`. Rank 0
//! prints the time of the allreduce alone, of the computation alone, of both
//! overlapped, and the share of the allreduce hidden behind the computation (the
//! engine's progress thread moves the schedule's rounds meanwhile).

use std::time::{Duration, Instant};

/// Busy work for about `d` (no sleeping: the core is really used).
fn compute(d: Duration) -> u64 {
    let t = Instant::now();
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    while t.elapsed() < d {
        for _ in 0..10_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
    }
    x
}

fn main() -> Result<(), qcg::Error> {
    let comm = qcg::init()?;
    let mib: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(8);
    let data = vec![comm.rank() as u64 + 1; (mib << 20) / 8];
    let want = (1..=comm.size() as u64).sum::<u64>();
    // Warm up links and schedules.
    comm.allreduce(&data, qcg::ReduceOp::Sum)?;
    comm.barrier()?;

    // The allreduce alone (started and waited for at once).
    let t = Instant::now();
    comm.iallreduce(&data, qcg::ReduceOp::Sum)?.wait()?;
    let alone = t.elapsed();
    // Every rank computes as long as the slowest rank's allreduce took.
    let slowest = comm.allreduce(&[alone.as_micros() as u64], qcg::ReduceOp::Max)?[0];
    let work = Duration::from_micros(slowest).max(Duration::from_millis(50));
    comm.barrier()?;

    let t = Instant::now();
    std::hint::black_box(compute(work));
    let compute_alone = t.elapsed();
    comm.barrier()?;

    // Both: start, compute, wait.
    let t = Instant::now();
    let r = comm.iallreduce(&data, qcg::ReduceOp::Sum)?;
    std::hint::black_box(compute(work));
    let out = r.wait()?.into_collective().expect("a collective");
    let both = t.elapsed();
    let first = u64::from_le_bytes(out[..8].try_into().expect("8 bytes"));
    assert_eq!(first, want, "the allreduce's result");
    comm.barrier()?;

    if comm.rank() == 0 {
        let hidden = (alone + compute_alone).saturating_sub(both);
        let share = hidden.as_secs_f64() / alone.min(compute_alone).as_secs_f64();
        println!(
            "iallreduce of {mib} MiB on {} ranks: {:.1} ms alone; computation {:.1} ms alone; both {:.1} ms; {:.0} % of the allreduce hidden",
            comm.size(),
            alone.as_secs_f64() * 1e3,
            compute_alone.as_secs_f64() * 1e3,
            both.as_secs_f64() * 1e3,
            share.clamp(0.0, 1.0) * 100.0
        );
    }
    Ok(())
}
