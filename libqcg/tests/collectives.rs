//! Collectives over real links: random topologies checked against a sequential
//! reference in real processes, message counts read from the links, and failures.

#![allow(clippy::unwrap_used)]

mod common;

use common::{bin, join_with_topology, on_every_rank, open_grid};
use qcg::{Algo, CollOptions, Comm, ReduceOp};
use std::process::Command;
use std::time::Duration;

/// A seed from the clock, printed so a failure can be replayed with COLL_SEED.
fn seed() -> u64 {
    std::env::var("COLL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        })
}

#[test]
fn random_collectives_in_real_processes_match_the_reference() {
    let base = seed();
    eprintln!("COLL_SEED={base}");
    let mut x = base;
    for round in 0..4 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let clusters = 1 + (x >> 33) % 4;
        let nodes = 1 + (x >> 40) % 3;
        let n = clusters + (x >> 45) % 6;
        let s = (x >> 20) % 100_000;
        let o = Command::new(bin("qcg"))
            .args([
                "run",
                "-n",
                &n.to_string(),
                "--clusters",
                &clusters.to_string(),
            ])
            .args([
                "--nodes-per-cluster",
                &nodes.to_string(),
                "--timeout",
                "240",
                "--",
            ])
            .arg(bin("examples/collcheck"))
            .args([s.to_string(), "25".to_string()])
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            o.status.success() && out.contains("matched the sequential reference"),
            "COLL_SEED={base} round {round}: {n} ranks on {clusters} clusters × {nodes} nodes, collcheck seed {s}\n{out}\n{err}"
        );
    }
}

/// Messages each rank sent to ranks of other clusters, summed, during `f`.
fn cross_site_messages(comms: &[Comm], f: impl Fn(&Comm) + Sync) -> u64 {
    let cluster = |c: &Comm, r: u32| c.topology().path(r as usize)[0].clone();
    let before: Vec<_> = comms.iter().map(|c| c.link_stats()).collect();
    std::thread::scope(|s| {
        for c in comms {
            let f = &f;
            s.spawn(move || f(c));
        }
    });
    comms
        .iter()
        .zip(before)
        .map(|(c, b)| {
            c.link_stats()
                .iter()
                .filter(|(&r, _)| cluster(c, r) != cluster(c, c.rank()))
                .map(|(r, st)| st.messages - b.get(r).map_or(0, |x| x.messages))
                .sum::<u64>()
        })
        .sum()
}

#[tokio::test(flavor = "multi_thread")]
async fn hierarchical_bcast_crosses_sites_once_per_cluster_and_flit() {
    let grid = open_grid(3, 2).await;
    let comms = join_with_topology(&grid, "hier", 9).await;
    let counts = tokio::task::spawn_blocking(move || {
        // Make every link first so that setup traffic is not counted.
        for c in &comms {
            for r in 0..c.size() {
                c.send(r, 99, b"").unwrap();
            }
        }
        for c in &comms {
            for _ in 0..c.size() {
                c.recv(None, Some(99)).unwrap();
            }
        }
        let run = |algo: Algo, flits: usize| {
            cross_site_messages(&comms, |c| {
                c.set_coll_options(CollOptions {
                    algo,
                    flits: Some(flits),
                    ..CollOptions::default()
                });
                let mut buf = vec![if c.rank() == 4 { 7u8 } else { 0 }; 10_000];
                c.bcast(4, &mut buf).unwrap();
                assert!(buf.iter().all(|&b| b == 7));
            })
        };
        (
            run(Algo::Hierarchical, 1),
            run(Algo::Hierarchical, 4),
            run(Algo::FlatLinear, 1),
        )
    })
    .await
    .unwrap();
    // 3 clusters: exactly 2 messages per flit cross sites, as the simulator says.
    assert_eq!(counts.0, 2, "hierarchical, 1 flit");
    assert_eq!(counts.1, 8, "hierarchical, 4 flits");
    // The flat algorithm pays a WAN message per remote rank: the count is real.
    assert_eq!(
        counts.2, 6,
        "flat linear: one per rank outside the root's cluster"
    );
    grid.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rank_dying_mid_collective_fails_every_survivor_by_name() {
    let grid = open_grid(2, 1).await;
    let mut comms = join_with_topology(&grid, "dying", 4).await;
    let errors = tokio::task::spawn_blocking(move || {
        std::thread::scope(|s| {
            for c in &comms {
                s.spawn(move || c.barrier().unwrap());
            }
        });
        let dead = comms.remove(2);
        drop(dead);
        on_every_rank(&comms, |c| {
            c.set_coll_options(CollOptions {
                timeout: Duration::from_secs(5),
                ..c.coll_options()
            });
            c.allreduce(&[1u32], ReduceOp::Sum).unwrap_err().to_string()
        })
    })
    .await
    .unwrap();
    assert_eq!(errors.len(), 3);
    for e in &errors {
        assert!(e.contains("rank 2"), "{e}");
    }
    grid.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn mismatched_sizes_and_short_buffers_are_named_on_every_rank() {
    let grid = open_grid(1, 1).await;
    let comms = join_with_topology(&grid, "mismatch", 3).await;
    let (sizes, scatter) = tokio::task::spawn_blocking(move || {
        let sizes = on_every_rank(&comms, |c| {
            c.allgather(&vec![1u8; 10 + c.rank() as usize])
                .unwrap_err()
                .to_string()
        });
        let scatter = on_every_rank(&comms, |c| {
            let data = vec![0u8; 5]; // not 3 blocks of 4
            c.scatter(0, &data, 4).unwrap_err().to_string()
        });
        (sizes, scatter)
    })
    .await
    .unwrap();
    for e in &sizes {
        assert!(e.contains("disagree") || e.contains("failed"), "{e}");
    }
    assert!(
        sizes
            .iter()
            .any(|e| e.contains("bytes per rank where this rank") && e.contains("disagree")),
        "{sizes:?}"
    );
    assert!(scatter[0].contains("not 3 blocks of 4"), "{scatter:?}");
    for e in &scatter[1..] {
        assert!(
            e.contains("rank 0 failed") && e.contains("not 3 blocks"),
            "{e}"
        );
    }
    grid.shutdown().await;
}

/// Issue 10: a root that one rank gets wrong. Every receive of a call is posted before
/// it starts, so a message of the call that none of them takes is one the rank's
/// schedule does not expect: the call fails at once naming its sender, instead of
/// waiting out the collective time-out (60 s by default). No rank ends with bytes
/// that are not the root's.
#[tokio::test(flavor = "multi_thread")]
async fn a_rank_with_another_root_is_named() {
    let grid = open_grid(1, 1).await;
    let comms = join_with_topology(&grid, "roots", 4).await;
    let outcomes = tokio::task::spawn_blocking(move || {
        on_every_rank(&comms, |c| {
            // Rank 2 waits for rank 1 to send, which believes rank 0 does.
            let root = if c.rank() == 2 { 1 } else { 0 };
            let mut buf = vec![c.rank() as u8 + 10; 1000];
            let r = c.bcast(root, &mut buf).map(|()| buf);
            (c.rank(), r.map_err(|e| e.to_string()))
        })
    })
    .await
    .unwrap();
    let summary: Vec<String> = outcomes
        .iter()
        .map(|(rank, r)| match r {
            Ok(buf) => format!("rank {rank}: ok, bytes {:?}", buf.first()),
            Err(e) => format!("rank {rank}: {e}"),
        })
        .collect();
    for (rank, r) in &outcomes {
        match r {
            Ok(buf) => assert!(
                buf.iter().all(|&b| b == 10),
                "rank {rank} kept bytes that are not rank 0's: {summary:?}"
            ),
            Err(e) => assert!(e.contains("disagree"), "{summary:?}"),
        }
    }
    let two = outcomes[2].1.as_ref().err().cloned().unwrap_or_default();
    assert!(
        two.contains(
            "rank 0 called bcast with root 0 where this rank (rank 2) called bcast with root 1"
        ),
        "{summary:?}"
    );
    grid.shutdown().await;
}

/// Issue 10: a rank that names itself root of a broadcast. It waits for nothing, so
/// it cannot learn in the call that the others named another root; but its
/// messages say what it called, so the ranks that get them fail naming it instead of
/// taking its bytes for the root's, and one of its next collectives fails (on the
/// root's bytes meant for it, still unreceived, or on the abort of a rank that failed).
/// With two ranks that each name themselves root, neither receives anything in the
/// call: the messages they leave behind make both their next collectives fail.
#[tokio::test(flavor = "multi_thread")]
async fn a_rank_that_names_itself_root_is_caught() {
    let grid = open_grid(1, 1).await;
    for (size, dissenter, root) in [(4u32, 3u32, 0u32), (2, 1, 0)] {
        let comms = join_with_topology(&grid, &format!("self-root-{size}"), size).await;
        let outcomes = tokio::task::spawn_blocking(move || {
            on_every_rank(&comms, |c| {
                let me = c.rank();
                let r = if me == dissenter { me } else { root };
                let mut buf = vec![me as u8 + 10; 100];
                let first = c.bcast(r, &mut buf).map(|()| buf);
                // The messages that tell the dissenter (the root's bytes for it, an
                // abort from a rank that failed) may still be on their way when its
                // next call ends: it learns within its next few calls.
                let next = (0..5).try_for_each(|_| c.barrier());
                (
                    first.map_err(|e| e.to_string()),
                    next.map_err(|e| e.to_string()),
                )
            })
        })
        .await
        .unwrap();
        let summary = format!("{size} ranks: {outcomes:?}");
        let root_byte = root as u8 + 10;
        for (rank, (first, next)) in outcomes.iter().enumerate() {
            let rank = rank as u32;
            match first {
                // Only the dissenter, which sent its own, or a rank holding the root's.
                Ok(buf) => assert!(
                    rank == dissenter || buf.iter().all(|&b| b == root_byte),
                    "rank {rank} holds bytes that are not the root's: {summary}"
                ),
                Err(e) => assert!(
                    e.contains(&format!("rank {dissenter}")) && e.contains("root"),
                    "{summary}"
                ),
            }
            // The dissenter does not go on as if all were well.
            assert!(
                rank != dissenter || first.is_err() || next.is_err(),
                "rank {rank} never learnt: {summary}"
            );
        }
        assert!(
            outcomes
                .iter()
                .flat_map(|(f, n)| [f.as_ref().err(), n.as_ref().err()])
                .flatten()
                .any(|e| e.contains(&format!("root {dissenter}"))),
            "no error says what rank {dissenter} called: {summary}"
        );
    }
    grid.shutdown().await;
}
