//! Overlapping communication with computation: post the receive and the send, compute,
//! then wait. Run with `qcg run -n 2 -- overlap [MIB]`. Rank 0 prints the time of the
//! exchange alone, of the computation alone, of both overlapped, and the share of the
//! exchange that was hidden behind the computation.

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

fn exchange(comm: &qcg::Comm, data: &[u8]) -> Result<(qcg::Request, qcg::Request), qcg::Error> {
    let peer = 1 - comm.rank();
    let r = comm.irecv(Some(peer), Some(1))?;
    let s = comm.isend(peer, 1, data.to_vec())?;
    Ok((r, s))
}

fn main() -> Result<(), qcg::Error> {
    let comm = qcg::init()?;
    if comm.size() != 2 {
        eprintln!("overlap runs on 2 ranks");
        std::process::exit(2);
    }
    let mib: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(64);
    let data = vec![comm.rank() as u8; mib << 20];
    // Warm up the link.
    let (r, s) = exchange(&comm, &data)?;
    qcg::wait_all(vec![r, s])?;
    comm.barrier()?;

    // The exchange alone.
    let t = Instant::now();
    let (r, s) = exchange(&comm, &data)?;
    qcg::wait_all(vec![r, s])?;
    let comm_alone = t.elapsed();
    comm.barrier()?;

    // The computation alone: as long as the exchange took, at least 50 ms.
    let work = comm_alone.max(Duration::from_millis(50));
    let t = Instant::now();
    std::hint::black_box(compute(work));
    let compute_alone = t.elapsed();
    comm.barrier()?;

    // Both: post, compute, wait.
    let t = Instant::now();
    let (r, s) = exchange(&comm, &data)?;
    std::hint::black_box(compute(work));
    let got = qcg::wait_all(vec![r, s])?;
    let both = t.elapsed();
    let msg = got
        .into_iter()
        .find_map(qcg::Completion::into_message)
        .expect("a message");
    assert!(msg.data.iter().all(|&b| b == 1 - comm.rank() as u8));
    comm.barrier()?;

    if comm.rank() == 0 {
        let hidden = (comm_alone + compute_alone).saturating_sub(both);
        let share = hidden.as_secs_f64() / comm_alone.min(compute_alone).as_secs_f64();
        println!(
            "exchange of {mib} MiB: {:.1} ms alone; computation {:.1} ms alone; both {:.1} ms; overlap {:.0} % of the exchange hidden",
            comm_alone.as_secs_f64() * 1e3,
            compute_alone.as_secs_f64() * 1e3,
            both.as_secs_f64() * 1e3,
            share.clamp(0.0, 1.0) * 100.0
        );
    }
    Ok(())
}
