//! Large messages cross a sealed link intact: the engine's direct receive opens
//! each large record in the posted buffer (`Sealed::read_in_place`), small ones and
//! the ends of messages through the link's own buffer. Two clusters on loopback
//! (the broker's default policy, `wan`, seals the link between them; `QCG_SHM=0`
//! keeps the two ranks off shared memory); messages of
//! sizes around the record and in-place limits, both ways, each checked byte for
//! byte.

#![allow(clippy::unwrap_used)]

mod common;

use qcg::Comm;
use qcg_grid::Grid;
use qcg_proto::{Nat, Policy};

/// Sizes around a record (64 KiB), the in-place limit (16 KiB) and many records.
const SIZES: [usize; 9] = [
    1,
    16 * 1024 - 1,
    16 * 1024,
    65_536,
    65_537,
    200_000,
    1_000_003,
    8 << 20,
    3,
];

/// The bytes of message `i` from `rank`: different for every message and offset.
fn body(rank: u32, i: usize, n: usize) -> Vec<u8> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ (u64::from(rank) << 32) ^ i as u64;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Sends every size to `peer`, while receiving every size from it.
fn exchange(c: &Comm, peer: u32) -> Result<(), String> {
    std::thread::scope(|s| {
        let tx = s.spawn(|| {
            for (i, &n) in SIZES.iter().enumerate() {
                c.send(peer, i as u32, &body(c.rank(), i, n))
                    .map_err(|e| e.to_string())?;
            }
            Ok::<(), String>(())
        });
        for (i, &n) in SIZES.iter().enumerate() {
            let m = c
                .recv(Some(peer), Some(i as u32))
                .map_err(|e| e.to_string())?;
            if m.data != body(peer, i, n) {
                return Err(format!("message {i} ({n} bytes) from rank {peer} differs"));
            }
        }
        tx.join().unwrap()
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn large_messages_cross_a_sealed_link_intact_both_ways() {
    // Both ranks are on this machine: without this, shared memory would carry them
    // (plaintext: it never leaves the node). The test binary's only test.
    std::env::set_var(qcg_proto::env::SHM, "0");
    let grid = Grid::builder()
        .clusters_with_nat(&[(Policy::Open, Nat::None), (Policy::Open, Nat::None)])
        .nodes_per_cluster(1)
        .proxies(0)
        .start()
        .await
        .unwrap();
    let slots = grid.placement(2);
    assert_ne!(slots[0].cluster, slots[1].cluster);
    let mut envs = common::envs(&grid, "sealed-large", 2).into_iter();
    let (e0, e1) = (envs.next().unwrap(), envs.next().unwrap());
    let results = tokio::task::spawn_blocking(move || {
        let h = std::thread::spawn(move || {
            let c = Comm::connect(e1).unwrap();
            let r = exchange(&c, 0);
            // Asked before either leaves (the link goes with the first to leave).
            let sealed = c.link_sealed(0);
            c.barrier().unwrap();
            (sealed, r)
        });
        let c = Comm::connect(e0).unwrap();
        let r = exchange(&c, 1);
        let sealed = c.link_sealed(1);
        c.barrier().unwrap();
        [(sealed, r), h.join().unwrap()]
    })
    .await
    .unwrap();
    for (rank, (sealed, r)) in results.into_iter().enumerate() {
        assert_eq!(sealed, Some(true), "rank {rank}: the link is not sealed");
        r.unwrap_or_else(|e| panic!("rank {rank}: {e}"));
    }
    grid.shutdown().await;
}
