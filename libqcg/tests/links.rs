//! Links between real processes' communicators on an embedded grid (real QUIC
//! control plane, real TCP links on loopback).

#![allow(clippy::unwrap_used)]

mod common;

use common::{join, open_grid};
use qcg::Error;
use qcg_grid::Grid;
use qcg_proto::Policy;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.unwrap()
}

fn links_json(grid: &Grid) -> serde_json::Value {
    let links = grid.broker().state.lock().unwrap().links();
    serde_json::to_value(links).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn messages_keep_order_per_source_and_tag_and_match_any() {
    let grid = open_grid(2, 1).await;
    let comms = join(&grid, "order", 3).await;
    blocking(move || {
        // Ranks 1 and 2 each send 50 messages on two tags, interleaved.
        std::thread::scope(|s| {
            for sender in [&comms[1], &comms[2]] {
                s.spawn(move || {
                    for i in 0u32..50 {
                        let tag = i % 2;
                        let mut m = sender.rank().to_le_bytes().to_vec();
                        m.extend_from_slice(&i.to_le_bytes());
                        sender.send(0, tag, &m).unwrap();
                    }
                });
            }
        });
        let c0 = &comms[0];
        // Tag 1 from rank 2 first: must come in send order.
        let mut last = None;
        for _ in 0..25 {
            let m = c0.recv(Some(2), Some(1)).unwrap();
            let i = u32::from_le_bytes(m.data[4..8].try_into().unwrap());
            assert!(
                last.is_none_or(|l| i > l),
                "out of order: {i} after {last:?}"
            );
            last = Some(i);
        }
        // Then anything: 75 messages left, per (source, tag) still in order.
        let mut seen = std::collections::HashMap::<(u32, u32), u32>::new();
        for _ in 0..75 {
            let m = c0.recv(None, None).unwrap();
            assert_ne!((m.source, m.tag), (2, 1));
            let i = u32::from_le_bytes(m.data[4..8].try_into().unwrap());
            assert_eq!(
                u32::from_le_bytes(m.data[..4].try_into().unwrap()),
                m.source
            );
            if let Some(prev) = seen.insert((m.source, m.tag), i) {
                assert!(i > prev);
            }
        }
        assert!(c0
            .recv_timeout(None, None, Duration::from_millis(50))
            .is_err());
        // Sending to oneself works and to a rank outside the job is refused.
        c0.send(0, 9, b"me").unwrap();
        assert_eq!(c0.recv(Some(0), Some(9)).unwrap().data, b"me");
        assert!(matches!(
            c0.send(3, 0, b""),
            Err(Error::InvalidRank { rank: 3, size: 3 })
        ));
    })
    .await;
    assert!(links_json(&grid)["direct"]["ok"].as_u64().unwrap() >= 2);
    grid.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn empty_and_one_gib_messages_cross_intact() {
    let grid = open_grid(2, 1).await;
    let comms = join(&grid, "big", 2).await;
    blocking(move || {
        let (a, b) = (&comms[0], &comms[1]);
        assert_ne!(a.cluster().name, b.cluster().name);
        let big: Vec<u8> = (0..(1usize << 30)).map(|i| (i % 251) as u8).collect();
        std::thread::scope(|s| {
            s.spawn(|| {
                a.send(1, 0, &[]).unwrap();
                a.send(1, 1, &big).unwrap();
            });
            let m = b.recv(Some(0), Some(0)).unwrap();
            assert!(m.data.is_empty());
            let m = b.recv(Some(0), Some(1)).unwrap();
            assert_eq!(m.data.len(), 1 << 30);
            assert!(m.data == big, "1 GiB message altered");
        });
    })
    .await;
    grid.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn port_range_cluster_binds_inside_its_range_and_is_reached_through_it() {
    let range = Policy::PortRange {
        lo: 42100,
        hi: 42119,
    };
    let grid = Grid::builder()
        .clusters(&[Policy::Open, range])
        .nodes_per_cluster(1)
        .start()
        .await
        .unwrap();
    let comms = join(&grid, "range", 4).await;
    for c in &comms {
        let port = c.local_addr().port();
        if c.cluster().name == "cluster-1" {
            assert!(
                (42100..=42119).contains(&port),
                "rank {} bound {port}",
                c.rank()
            );
        }
    }
    blocking(move || {
        // Rank 0 (cluster-0) reaches rank 3 (cluster-1) across the port range.
        comms[0].send(3, 0, b"across").unwrap();
        assert_eq!(comms[3].recv(Some(0), None).unwrap().data, b"across");
    })
    .await;
    let l = links_json(&grid);
    assert_eq!(l["port-range"]["ok"], 1, "{l}");
    grid.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn unreachable_cluster_gets_a_clear_error() {
    // Both closed behind NATs that change ports, and no relay proxy: nothing links
    // them.
    let closed = (Policy::Closed, qcg_proto::Nat::RandomPort);
    let grid = Grid::builder()
        .clusters_with_nat(&[closed, closed])
        .nodes_per_cluster(1)
        .proxies(0)
        .start()
        .await
        .unwrap();
    let comms = join(&grid, "closed", 2).await;
    let err = blocking(move || comms[0].send(1, 0, b"x").unwrap_err()).await;
    let msg = err.to_string();
    assert!(
        msg.contains("no technique links cluster `cluster-0` to cluster `cluster-1`"),
        "{msg}"
    );
    grid.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn strangers_and_other_jobs_are_dropped_and_the_job_goes_on() {
    let grid = open_grid(1, 1).await;
    let comms = join(&grid, "guarded", 2).await;
    let target = comms[1].local_addr();
    blocking(move || {
        // A stranger speaking HTTP.
        let mut s = TcpStream::connect(target).unwrap();
        s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut buf = [0u8; 16];
        assert_eq!(s.read(&mut buf).unwrap_or(0), 0, "a stranger got an answer");
        // A process of the same job id without the secret: the handshake fails.
        let mut s = TcpStream::connect(target).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let r = qcg::handshake::initiate(&mut s, "guarded", &[0u8; 32], 0, 1, false);
        assert!(r.is_err(), "handshake with a wrong secret succeeded");
        // A connection that says nothing is dropped after the handshake timeout, and
        // meanwhile the real job links and talks.
        let _silent = TcpStream::connect(target).unwrap();
        comms[0].send(1, 5, b"still here").unwrap();
        assert_eq!(comms[1].recv(Some(0), Some(5)).unwrap().data, b"still here");
        comms[1].send(0, 5, b"me too").unwrap();
        assert_eq!(comms[0].recv(Some(1), Some(5)).unwrap().data, b"me too");
    })
    .await;
    grid.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dead_peer_is_named_not_waited_for() {
    let grid = open_grid(1, 1).await;
    let mut comms = join(&grid, "dying", 2).await;
    let survivor = comms.remove(0);
    let dying = comms.remove(0);
    let err = blocking(move || {
        survivor.send(1, 0, b"hello").unwrap();
        assert_eq!(dying.recv(Some(0), Some(0)).unwrap().data, b"hello");
        drop(dying);
        survivor.recv(Some(1), Some(0)).unwrap_err()
    })
    .await;
    assert!(matches!(err, Error::PeerLost { rank: 1, .. }), "{err}");
    grid.shutdown().await;
}
