//! Every technique makes a working link on loopback, through the real services.
//!
//! On loopback nothing is really blocked: these tests prove each technique's
//! mechanism (rendezvous, connect-back, simultaneous open, SYN capture and injection,
//! relaying through qcg-proxy) and that the broker's plan picks it first. That the
//! simpler techniques really fail behind the firewalls is proven in the lab tests.

#![allow(clippy::unwrap_used)]

mod common;

use common::pair;
use qcg_grid::Grid;
use qcg_proto::{Nat, Policy, Technique};

/// An embedded grid of two clusters (one node each) with `proxies` relay proxies.
async fn grid(clusters: [(Policy, Nat); 2], proxies: usize) -> Grid {
    Grid::builder()
        .clusters_with_nat(&clusters)
        .nodes_per_cluster(1)
        .proxies(proxies)
        .start()
        .await
        .unwrap()
}

/// Rank 0 of one cluster sends 4 MiB to rank 1 of the other, which echoes it: the
/// link is made with `expected` and nothing else is tried. Both ranks are on this
/// machine: a link that is not relayed then moves into shared memory, once.
async fn check(clusters: [(Policy, Nat); 2], expected: Technique) {
    let grid = grid(clusters, 1).await;
    let (a, b) = pair(&grid, &format!("t-{}", expected.name())).await;
    tokio::task::spawn_blocking(move || {
        let data: Vec<u8> = (0..(4u32 << 20)).map(|i| (i * 7) as u8).collect();
        std::thread::scope(|s| {
            s.spawn(|| {
                let m = b.recv(Some(0), Some(1)).unwrap();
                b.send(0, 2, &m.data).unwrap();
            });
            a.send(1, 1, &data).unwrap();
            let back = a.recv(Some(1), Some(2)).unwrap();
            assert!(back.data == data, "echo differs");
        });
    })
    .await
    .unwrap();
    let links = grid.broker().state.lock().unwrap().links();
    let in_memory = u64::from(expected != Technique::Relayed);
    for t in Technique::ALL {
        let c = links[t.name()];
        let want = match t {
            t if t == expected => (1, 0),
            Technique::SharedMemory => (in_memory, 0),
            _ => (0, 0),
        };
        assert_eq!((c.ok, c.failed), want, "{t}: {links:?}");
    }
    grid.shutdown().await;
}

/// One test per case: its name, the two clusters, the technique the broker's plan
/// must pick first.
macro_rules! cases {
    ($($name:ident: $a:expr, $b:expr => $t:ident;)*) => {$(
        #[tokio::test(flavor = "multi_thread")]
        async fn $name() {
            check([$a, $b], Technique::$t).await;
        }
    )*};
}

cases! {
    reversed_when_only_the_initiator_accepts:
        (Policy::Open, Nat::None), (Policy::Closed, Nat::None) => Reversed;
    traversed_toward_a_syn_blocking_cluster:
        (Policy::Closed, Nat::None), (Policy::SynBlock, Nat::None) => Traversed;
    punched_between_stateful_firewalls:
        (Policy::Closed, Nat::None), (Policy::Closed, Nat::PortPreserving) => Punched;
    relayed_behind_a_random_port_nat:
        (Policy::Closed, Nat::None), (Policy::Closed, Nat::RandomPort) => Relayed;
}

/// Two clusters whose links can only be relayed.
const RELAYED_ONLY: [(Policy, Nat); 2] = [
    (Policy::Closed, Nat::None),
    (Policy::Closed, Nat::RandomPort),
];

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_proxy_is_skipped_for_the_live_one() {
    let mut grid = grid(RELAYED_ONLY, 2).await;
    let dead = grid.remove_proxy(0);
    dead.kill();
    // Round-robin would give every other relay to the dead proxy: all must work.
    for i in 0..2 {
        let (a, b) = pair(&grid, &format!("failover-{i}")).await;
        tokio::task::spawn_blocking(move || {
            a.send(1, 0, b"through the live proxy").unwrap();
            assert_eq!(
                b.recv(Some(0), Some(0)).unwrap().data,
                b"through the live proxy"
            );
        })
        .await
        .unwrap();
    }
    let live = &grid.proxies()[0];
    assert_eq!(
        live.tokens
            .paired
            .load(std::sync::atomic::Ordering::Relaxed),
        2
    );
    let (links, proxies) = {
        let st = grid.broker().state.lock().unwrap();
        (st.links(), st.proxies())
    };
    assert_eq!(links["relayed"].ok, 2, "{links:?}");
    assert_eq!(proxies.iter().filter(|p| p.alive).count(), 1, "{proxies:?}");
    grid.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_proxy_dying_mid_transfer_is_an_error_at_both_ends() {
    let mut grid = grid(RELAYED_ONLY, 1).await;
    let (a, b) = pair(&grid, "cut").await;
    // Make the link first, then cut it in the middle of a large message.
    let (a, b) = tokio::task::spawn_blocking(move || {
        a.send(1, 0, b"hello").unwrap();
        b.recv(Some(0), Some(0)).unwrap();
        (a, b)
    })
    .await
    .unwrap();
    let proxy = grid.remove_proxy(0);
    let results = tokio::task::spawn_blocking(move || {
        std::thread::scope(|s| {
            let sender = s.spawn(|| {
                let big = vec![7u8; 1 << 30];
                let sent = a.send(1, 1, &big);
                // Whether or not the kernel took all of it, the peer's answer never comes.
                let answer = a.recv_timeout(Some(1), Some(2), std::time::Duration::from_secs(30));
                (sent.is_ok(), answer.map(|m| m.data.len()))
            });
            std::thread::sleep(std::time::Duration::from_millis(300));
            proxy.kill();
            let got = b.recv(Some(0), Some(1)).map(|m| m.data.len());
            let _ = b.send(0, 2, b"done");
            (sender.join().unwrap(), got)
        })
    })
    .await
    .unwrap();
    let ((_, answer), got) = results;
    // The receiver gets an error, never a short message taken for a whole one.
    match got {
        Err(e) => assert!(e.to_string().contains("rank 0"), "{e}"),
        Ok(n) => panic!("a {n}-byte message arrived through a dead proxy"),
    }
    assert!(
        answer.is_err(),
        "the sender heard back through a dead proxy"
    );
    grid.shutdown().await;
}
