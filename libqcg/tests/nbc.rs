//! Non-blocking collectives over real links: they progress while the caller does not
//! call into the library, and every one gives what its blocking twin gives.

#![allow(clippy::unwrap_used)]

mod common;

use common::{join_with_topology, on_every_rank, open_grid};
use qcg::ReduceOp;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread")]
async fn an_iallreduce_completes_while_its_caller_sleeps() {
    let grid = open_grid(2, 2).await;
    let comms = join_with_topology(&grid, "nbc-sleep", 6).await;
    let out = tokio::task::spawn_blocking(move || {
        // Links and schedules first, so that the timed call measures the collective.
        on_every_rank(&comms, |c| {
            c.allreduce(&[1u64; 4096], ReduceOp::Sum).unwrap()
        });
        on_every_rank(&comms, |c| {
            let data = vec![c.rank() as u64 + 1; 4096];
            if c.rank() == 0 {
                let r = c.iallreduce(&data, ReduceOp::Sum).unwrap();
                // Not a single call into the library for 300 ms.
                std::thread::sleep(Duration::from_millis(300));
                let t = Instant::now();
                let out = r.wait().unwrap().into_collective().unwrap();
                (t.elapsed(), Duration::ZERO, out)
            } else {
                // The others' blocking twin: it needs rank 0's part, which only the
                // engine's own thread can move while rank 0 sleeps.
                let t = Instant::now();
                let out = c.allreduce(&data, ReduceOp::Sum).unwrap();
                let bytes: Vec<u8> = out.iter().flat_map(|x| x.to_le_bytes()).collect();
                (Duration::ZERO, t.elapsed(), bytes)
            }
        })
    })
    .await
    .unwrap();
    let want: Vec<u8> = std::iter::repeat_n(21u64, 4096)
        .flat_map(|x| x.to_le_bytes())
        .collect();
    for (r, (wait, blocking, got)) in out.iter().enumerate() {
        assert_eq!(got, &want, "rank {r}'s result");
        assert!(
            *wait < Duration::from_millis(50),
            "rank 0 waited {wait:?} after its sleep"
        );
        assert!(
            *blocking < Duration::from_millis(250),
            "rank {r}'s blocking allreduce took {blocking:?}: it waited for rank 0 to wake"
        );
    }
    grid.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn every_nonblocking_collective_matches_its_blocking_twin_on_random_sizes() {
    let grid = open_grid(2, 2).await;
    let comms = join_with_topology(&grid, "nbc-diff", 5).await;
    let mut seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    eprintln!("seed {seed}");
    let mut next = move || {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        seed >> 33
    };
    let cases: Vec<(usize, u32)> = (0..12)
        .map(|_| ((next() % 70_000) as usize, (next() % 5) as u32))
        .collect();
    tokio::task::spawn_blocking(move || {
        on_every_rank(&comms, |c| {
            let p = c.size() as usize;
            let me = c.rank();
            let sum: qcg::nbc::ElemOp = Arc::new(|a: &mut [u8], b: &[u8]| {
                a[0] = a[0].wrapping_add(b[0]);
            });
            let cat = |a: &mut [u8], b: &[u8]| {
                // Not commutative: the rank order shows.
                a[0] = a[0].wrapping_mul(3).wrapping_add(b[0]);
            };
            let cat_shared: qcg::nbc::ElemOp = Arc::new(cat);
            for &(n, root) in &cases {
                let data: Vec<u8> = (0..n).map(|i| (i as u32 * 7 + me * 13) as u8).collect();
                let got = |r: qcg::Request| r.wait().unwrap().into_collective().unwrap();
                // Several in flight at once, completed in reverse order.
                let reqs = vec![
                    c.ibcast(root, data.clone(), n).unwrap(),
                    c.ireduce_bytes(root, data.clone(), 1, true, sum.clone())
                        .unwrap(),
                    c.iallreduce_bytes(data.clone(), 1, false, cat_shared.clone())
                        .unwrap(),
                    c.igather(root, data.clone()).unwrap(),
                ];
                let mut outs: Vec<Vec<u8>> = reqs.into_iter().rev().map(got).collect();
                outs.reverse();
                let mut b = data.clone();
                c.bcast(root, &mut b).unwrap();
                assert_eq!(outs[0], b, "ibcast n {n} root {root}");
                let f = |a: &mut [u8], b: &[u8]| a[0] = a[0].wrapping_add(b[0]);
                let red = c.reduce_bytes(root, &data, 1, true, &f).unwrap();
                assert_eq!(outs[1], red.unwrap_or_default(), "ireduce n {n}");
                let all = c.allreduce_bytes(&data, 1, false, &cat).unwrap();
                assert_eq!(outs[2], all, "iallreduce n {n}");
                let g = c.gather(root, &data).unwrap();
                assert_eq!(outs[3], g.unwrap_or_default(), "igather n {n}");
                let block = n / p;
                let sdata: Vec<u8> = (0..block * p).map(|i| (i as u32 + me) as u8).collect();
                let s = got(c.iscatter(root, sdata.clone(), block).unwrap());
                assert_eq!(s, c.scatter(root, &sdata, block).unwrap(), "iscatter");
                let ag = got(c.iallgather(data.clone()).unwrap());
                assert_eq!(ag, c.allgather(&data).unwrap(), "iallgather");
                let aa = got(c.ialltoall(sdata.clone()).unwrap());
                assert_eq!(aa, c.alltoall(&sdata).unwrap(), "ialltoall");
                let b = c.ibarrier().unwrap();
                b.wait().unwrap();
            }
        });
    })
    .await
    .unwrap();
    grid.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn caller_made_schedules_exchange_uneven_blocks_and_scan_in_rank_order() {
    let grid = open_grid(2, 1).await;
    let comms = join_with_topology(&grid, "nbc-vector", 4).await;
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    eprintln!("seed {seed}");
    tokio::task::spawn_blocking(move || {
        on_every_rank(&comms, |c| {
            let p = c.size() as usize;
            let me = c.rank() as usize;
            for round in 0..6u64 {
                // size(i, j): bytes rank i sends rank j, some of them zero.
                let size = |i: usize, j: usize| {
                    let h = (seed ^ round)
                        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
                        .wrapping_add(((i * 31 + j) as u64).wrapping_mul(0x2545_f491_4f6c_dd1d));
                    ((h >> 40) % 5000) as usize * ((h >> 20) % 3 != 0) as usize
                };
                let sends: Vec<usize> = (0..p).map(|j| size(me, j)).collect();
                let recvs: Vec<usize> = (0..p).map(|i| size(i, me)).collect();
                let input: Vec<u8> = (0..p)
                    .flat_map(|j| (0..size(me, j)).map(move |k| (me * 50 + j * 7 + k) as u8))
                    .collect();
                let sched = qcg_coll::vector::exchange(me, &sends, &recvs, true);
                let sig = qcg_coll::Collective::new(qcg_coll::Op::Alltoall, 0, 0);
                let r = c.start_schedule(sched, sig, input, None).unwrap();
                let out = r.wait().unwrap().into_collective().unwrap();
                let want: Vec<u8> = (0..p)
                    .flat_map(|i| (0..size(i, me)).map(move |k| (i * 50 + me * 7 + k) as u8))
                    .collect();
                assert_eq!(out, want, "exchange round {round} on rank {me}");
            }
            // a ∘ b = 3a + b per byte: not commutative.
            let f: qcg::nbc::ElemOp = Arc::new(|a: &mut [u8], b: &[u8]| {
                a[0] = a[0].wrapping_mul(3).wrapping_add(b[0]);
            });
            let mine = vec![me as u8 + 1; 100];
            for inclusive in [true, false] {
                let sched = qcg_coll::vector::scan(me, p, 100, inclusive);
                let sig = qcg_coll::Collective::new(qcg_coll::Op::Reduce, 0, 100);
                let comb = qcg::nbc::in_order(1, f.clone());
                let r = c
                    .start_schedule(sched, sig, mine.clone(), Some(comb))
                    .unwrap();
                let out = r.wait().unwrap().into_collective().unwrap();
                let upto = if inclusive { me + 1 } else { me };
                let want = (0..upto).fold(None, |acc: Option<u8>, r| {
                    let x = r as u8 + 1;
                    Some(acc.map_or(x, |a| a.wrapping_mul(3).wrapping_add(x)))
                });
                assert_eq!(
                    out,
                    vec![want.unwrap_or(0); 100],
                    "scan inclusive {inclusive} rank {me}"
                );
            }
        });
    })
    .await
    .unwrap();
    grid.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wait_on_a_collective_a_rank_never_joins_fails_naming_it() {
    let grid = open_grid(1, 1).await;
    let comms = join_with_topology(&grid, "nbc-absent", 3).await;
    let out = tokio::task::spawn_blocking(move || {
        on_every_rank(&comms, |c| {
            c.set_coll_options(qcg::CollOptions {
                algo: qcg::Algo::FlatLinear,
                timeout: Duration::from_secs(1),
                ..qcg::CollOptions::default()
            });
            // Links first, so that the absent rank is only absent from the call.
            c.barrier().unwrap();
            if c.rank() == 2 {
                return None;
            }
            let t = Instant::now();
            let e = c.ibarrier().unwrap().wait().unwrap_err();
            Some((t.elapsed(), e.to_string()))
        })
    })
    .await
    .unwrap();
    // Rank 0 (the root of the flat barrier) waits for rank 2's arrival; rank 1 for
    // rank 0's release.
    let (t0, e0) = out[0].clone().unwrap();
    assert!(e0.contains("rank 2 sent nothing for 1 s"), "{e0}");
    assert!(t0 < Duration::from_secs(5), "rank 0 gave up after {t0:?}");
    let (_, e1) = out[1].clone().unwrap();
    assert!(e1.contains("rank 0 sent nothing"), "{e1}");
    grid.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn barriers_blocking_or_not_wait_for_the_last_rank_to_enter() {
    let grid = open_grid(2, 1).await;
    let comms = join_with_topology(&grid, "nbc-barrier", 4).await;
    let out = tokio::task::spawn_blocking(move || {
        on_every_rank(&comms, |c| {
            c.barrier().unwrap();
            let mut took = Vec::new();
            for nonblocking in [false, true] {
                // Rank 3 enters 300 ms late: nobody may leave before.
                if c.rank() == 3 {
                    std::thread::sleep(Duration::from_millis(300));
                }
                let t = Instant::now();
                if nonblocking {
                    c.ibarrier().unwrap().wait().unwrap();
                } else {
                    c.barrier().unwrap();
                }
                took.push(t.elapsed());
            }
            took
        })
    })
    .await
    .unwrap();
    for (r, took) in out.iter().enumerate().take(3) {
        for (t, kind) in took.iter().zip(["barrier", "ibarrier"]) {
            assert!(
                *t >= Duration::from_millis(250),
                "rank {r} left the {kind} after {t:?}, before rank 3 entered"
            );
        }
    }
    grid.shutdown().await;
}
