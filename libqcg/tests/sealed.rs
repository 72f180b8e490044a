//! Links between clusters are sealed end to end, through a relay: a forwarder in
//! front of the relay proxy (the address the proxy announces to the broker) sees
//! every byte both ranks send and can flip one.
//!
//! One test, in steps: the process's `QCG_ENCRYPT` is set for the last step, and
//! the variable is the whole test binary's.

#![allow(clippy::unwrap_used)]

mod common;

use common::pair;
use qcg::Comm;
use qcg_grid::Grid;
use qcg_proto::{Nat, Policy, Technique};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// What the program sends: a pattern a capture can look for.
const PATTERN: &[u8] = b"QCG-PLAINTEXT-PATTERN-0123456789";
/// Bytes into a connection where the forwarder flips one (past the relay's token
/// and the job handshake, inside the program's data).
const FLIP_AT: usize = 300_000;

/// A forwarder to the relay proxy at `to`: keeps what crosses it, and flips one
/// byte of a connection's upstream at [`FLIP_AT`] while `flip` is on.
struct Forwarder {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<u8>>>,
    flip: Arc<AtomicBool>,
}

fn pump(
    mut from: TcpStream,
    mut to: TcpStream,
    seen: Arc<Mutex<Vec<u8>>>,
    flip: Option<Arc<AtomicBool>>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    let mut at = 0usize;
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if let Some(f) = &flip {
            if f.load(Ordering::SeqCst) && at <= FLIP_AT && FLIP_AT < at + n {
                buf[FLIP_AT - at] ^= 0x20;
            }
        }
        at += n;
        seen.lock().unwrap().extend_from_slice(&buf[..n]);
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(std::net::Shutdown::Write);
}

impl Forwarder {
    fn start() -> (Forwarder, TcpListener) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let f = Forwarder {
            addr: l.local_addr().unwrap(),
            seen: Arc::default(),
            flip: Arc::default(),
        };
        (f, l)
    }

    fn serve(&self, l: TcpListener, proxy: SocketAddr) {
        let (seen, flip) = (self.seen.clone(), self.flip.clone());
        std::thread::spawn(move || {
            for c in l.incoming() {
                let Ok(c) = c else { return };
                let Ok(p) = TcpStream::connect(proxy) else {
                    return;
                };
                let (c2, p2) = (c.try_clone().unwrap(), p.try_clone().unwrap());
                let (s1, s2, f) = (seen.clone(), seen.clone(), flip.clone());
                std::thread::spawn(move || pump(c, p, s1, Some(f)));
                std::thread::spawn(move || pump(p2, c2, s2, None));
            }
        });
    }

    fn saw_pattern(&self) -> bool {
        let seen = self.seen.lock().unwrap();
        seen.windows(PATTERN.len()).any(|w| w == PATTERN)
    }
}

/// Rank 0 sends 1 MiB of the pattern to rank 1: what rank 1 received, or why not.
async fn send_pattern(a: Comm, b: Comm) -> Result<Vec<u8>, String> {
    tokio::task::spawn_blocking(move || {
        let data: Vec<u8> = PATTERN.iter().copied().cycle().take(1 << 20).collect();
        let tx = std::thread::spawn(move || {
            let r = a.send(1, 1, &data).map_err(|e| e.to_string());
            (a, r)
        });
        let got = b
            .recv(Some(0), Some(1))
            .map(|m| m.data)
            .map_err(|e| e.to_string());
        // A failed link fails the sender too (or its send was out already): either
        // way it returns.
        let _ = tx.join().unwrap();
        got
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_relayed_link_between_clusters_carries_only_ciphertext_and_fails_when_altered() {
    // Two clusters that accept nothing, one behind a random-port NAT: only the relay
    // links them.
    let mut grid = Grid::builder()
        .clusters_with_nat(&[
            (Policy::Closed, Nat::None),
            (Policy::Closed, Nat::RandomPort),
        ])
        .nodes_per_cluster(1)
        .proxies(0)
        .start()
        .await
        .unwrap();
    let (fwd, listener) = Forwarder::start();
    let proxy = grid.start_proxy(fwd.addr).await.unwrap();
    fwd.serve(listener, proxy);

    // The broker's default policy (wan): sealed.
    let (a, b) = pair(&grid, "sealed").await;
    let got = send_pattern(a, b).await.unwrap();
    assert!(got.chunks(PATTERN.len()).all(|c| PATTERN.starts_with(c)));
    let relayed = grid.broker().state.lock().unwrap().links()[Technique::Relayed.name()].ok;
    assert_eq!(relayed, 1, "the link did not go through the relay");
    assert!(
        fwd.seen.lock().unwrap().len() > 1 << 20,
        "the forwarder saw too little"
    );
    assert!(
        !fwd.saw_pattern(),
        "the relay path carried the program's plaintext"
    );

    // One byte flipped on the path: the receiver's link fails naming the peer, the
    // program never sees the altered data.
    fwd.flip.store(true, Ordering::SeqCst);
    let (a, b) = pair(&grid, "tampered").await;
    let e = send_pattern(a, b)
        .await
        .expect_err("altered data was delivered");
    assert!(e.contains("rank 0"), "{e}");
    assert!(e.contains("failed authentication"), "{e}");
    fwd.flip.store(false, Ordering::SeqCst);

    // The same path in plaintext (QCG_ENCRYPT=none wins over the plan): the capture
    // does find the pattern, so its absence above means something.
    std::env::set_var(qcg_proto::env::ENCRYPT, "none");
    let (a, b) = pair(&grid, "plain").await;
    send_pattern(a, b).await.unwrap();
    std::env::remove_var(qcg_proto::env::ENCRYPT);
    assert!(fwd.saw_pattern(), "the capture missed plaintext");
    grid.shutdown().await;
}
