//! Checks of the request API and the engine in real processes, one scenario per run:
//! `qcg run -n N -- engine_check SCENARIO`. Each rank prints `ok SCENARIO ...` when its
//! part passed, and panics (failing the job) otherwise.
//!
//! | scenario | ranks | what |
//! |---|---|---|
//! | order | ≥ 3 | many senders, any-source and any-tag receives keep order per (source, tag) |
//! | irecvs | 2 | 10,000 outstanding receives, matched by tag in reverse order |
//! | cancel | 2 | a cancelled receive consumes nothing |
//! | probe | 2 | probe, then `recv_into` of the announced size; a short buffer is an error and the message stays |
//! | sizes | 2 | 0 B, 1 B, eager limit ±1, 1 GiB |
//! | flood | 9 | 8 senders flood a receiver that sleeps: its unexpected bytes stay under the bound |
//! | dying | 3 | a peer dies with requests pending: they fail naming it |
//! | frozen | 3 | a peer stops (SIGSTOP): a receive from it fails after the liveness time |
//! | alltoall | any | every rank sends 1 KiB to every other; prints threads per rank |
//! | dials | any | every rank links to every other at once while a thread of its own samples `/proc/self/task` every millisecond; prints the most threads seen (the sampler not counted) and how each link was made. Run with `QCG_TEST_LINK_DELAY=direct:400`: each link then has two attempts in flight (the held direct one and the relay after a stagger) |
//! | upgrade | ≥ 2 | rank 0 and the last rank stream to each other while their link moves from the relay to a direct link (`QCG_TEST_LINK_DELAY=direct:1500`): order kept both ways |
//! | congestion | 2 | after a 1 MiB ping-pong, prints the congestion control of the link to the other rank (`congestion NAME`) |
//! | strangers | 2 | 2,000 idle connections to rank 1's listener: its threads and descriptors stay put, a 1 MiB ping-pong goes on |

#![allow(clippy::unwrap_used)]

use qcg::{Comm, Completion, Error, Request};
use std::time::{Duration, Instant};

fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").map_or(0, |d| d.count())
}

fn main() {
    let scenario = std::env::args()
        .nth(1)
        .expect("usage: engine_check SCENARIO");
    let comm = qcg::init().unwrap();
    let (rank, size) = (comm.rank(), comm.size());
    match scenario.as_str() {
        "order" => order(&comm),
        "irecvs" => irecvs(&comm),
        "cancel" => cancel(&comm),
        "probe" => probe(&comm),
        "sizes" => sizes(&comm),
        "flood" => flood(&comm),
        "dying" => dying(&comm),
        "frozen" => frozen(&comm),
        "alltoall" => alltoall(&comm),
        "dials" => dials(&comm),
        "strangers" => strangers(&comm),
        "steady" => steady(&comm),
        "upgrade" => upgrade(&comm),
        "congestion" => congestion(&comm),
        "shm" => shm(&comm),
        other => panic!("unknown scenario {other}"),
    }
    println!("ok {scenario} rank {rank} of {size}");
}

fn order(comm: &Comm) {
    let n = 200u32;
    if comm.rank() > 0 {
        // Non-blocking sends: a large message waits for its receive (as in MPI), and
        // rank 0 receives tag 2 first.
        let mut reqs = Vec::new();
        for i in 0..n {
            // Every 40th message is above the eager limit (rendezvous).
            let len = if i % 40 == 7 {
                100_000
            } else {
                8 + (i as usize % 5)
            };
            let mut m = pattern(u64::from(comm.rank()) << 32 | u64::from(i), len);
            m[..4].copy_from_slice(&comm.rank().to_le_bytes());
            m[4..8].copy_from_slice(&i.to_le_bytes());
            reqs.push(comm.isend(0, i % 3, m).unwrap());
        }
        qcg::wait_all(reqs).unwrap();
        return;
    }
    let senders = comm.size() - 1;
    let mut last = std::collections::HashMap::<(u32, u32), u32>::new();
    let mut check = |m: qcg::Message| {
        let src = u32::from_le_bytes(m.data[..4].try_into().unwrap());
        let i = u32::from_le_bytes(m.data[4..8].try_into().unwrap());
        assert_eq!(src, m.source);
        assert_eq!(m.tag, i % 3);
        let mut want = pattern(u64::from(src) << 32 | u64::from(i), m.data.len());
        want[..8].copy_from_slice(&m.data[..8]);
        assert_eq!(m.data, want, "payload of message {i} from {src}");
        if let Some(l) = last.insert((src, m.tag), i) {
            assert!(i > l, "from {src} tag {}: {i} after {l}", m.tag);
        }
    };
    // Tag 2 from anyone first, then everything else from anyone.
    let tag2 = (0..n).filter(|i| i % 3 == 2).count() as u32 * senders;
    for _ in 0..tag2 {
        check(comm.recv(None, Some(2)).unwrap());
    }
    let rest = n * senders - tag2;
    // Requests match in the order they were posted (they may complete in another:
    // a large message's data comes after later small ones).
    let mut reqs: Vec<Request> = (0..rest).map(|_| comm.irecv(None, None).unwrap()).collect();
    let mut got: Vec<Option<qcg::Message>> = (0..rest).map(|_| None).collect();
    for _ in 0..rest {
        let (i, c) = qcg::wait_any(&mut reqs).unwrap();
        got[i] = c.into_message();
    }
    for m in got {
        check(m.unwrap());
    }
}

fn irecvs(comm: &Comm) {
    let n = 10_000u32;
    if comm.rank() == 0 {
        let reqs: Vec<Request> = (0..n)
            .map(|t| comm.irecv_into(Some(1), Some(t), vec![0u8; 8]).unwrap())
            .collect();
        println!("posted {n} receives, threads {}", threads());
        comm.send(1, u32::MAX, b"go").unwrap();
        let done = qcg::wait_all(reqs).unwrap();
        for (t, c) in done.into_iter().enumerate() {
            let Completion::Received(st, buf) = c else {
                panic!("receive {t} ended as {c:?}")
            };
            assert_eq!((st.source, st.tag, st.len), (1, t as u32, 4));
            assert_eq!(buf[..4], (t as u32).to_le_bytes());
        }
    } else if comm.rank() == 1 {
        comm.recv(Some(0), Some(u32::MAX)).unwrap();
        for t in (0..n).rev() {
            comm.send(0, t, &t.to_le_bytes()).unwrap();
        }
    }
}

fn cancel(comm: &Comm) {
    if comm.rank() == 0 {
        let r = comm.irecv(Some(1), Some(5)).unwrap();
        assert!(r.cancel(), "a receive with no message yet is cancelled");
        assert!(matches!(r.wait().unwrap(), Completion::Cancelled(None)));
        // A dropped pending receive is cancelled too.
        drop(comm.irecv_into(Some(1), Some(5), vec![0; 3]).unwrap());
        comm.send(1, 1, b"ready").unwrap();
        let m = comm.recv(Some(1), Some(5)).unwrap();
        assert_eq!(m.data, b"after");
        let r = comm.irecv(Some(1), Some(6)).unwrap();
        comm.send(1, 1, b"again").unwrap();
        // Wait until it has matched; then cancel must say no and it completes. The
        // probe only drives progress: once rank 1 has sent "late" it leaves, and a
        // probe for a message it will never send then says it is gone.
        while !r.is_done() {
            std::thread::sleep(Duration::from_millis(1));
            let _ = comm.iprobe(Some(1), Some(99));
        }
        assert!(!r.cancel());
        assert_eq!(r.wait().unwrap().into_message().unwrap().data, b"late");
        assert_eq!(comm.recv(Some(1), Some(8)).unwrap().data, b"x");
    } else if comm.rank() == 1 {
        comm.recv(Some(0), Some(1)).unwrap();
        comm.send(0, 5, b"after").unwrap();
        comm.recv(Some(0), Some(1)).unwrap();
        // A small send over a link already made is complete when the call returns:
        // a send is never cancelled, its outcome is taken once, and `wait_any`
        // finds it among requests still pending.
        let mut s = comm.isend(0, 6, b"late".to_vec()).unwrap();
        assert!(s.is_done());
        assert!(!s.cancel());
        assert!(matches!(s.test().unwrap(), Some(Completion::Sent)));
        assert!(s.test().is_err(), "a spent send request taken twice");
        let pending = comm.irecv(Some(0), Some(7)).unwrap();
        let sent = comm.isend(0, 8, b"x".to_vec()).unwrap();
        let mut reqs = vec![pending, sent];
        let (i, c) = qcg::wait_any(&mut reqs).unwrap();
        assert_eq!((i, matches!(c, Completion::Sent)), (1, true));
        assert!(reqs[0].cancel());
    }
}

fn probe(comm: &Comm) {
    let sizes = [10usize, 100_000, 70_000, 0];
    if comm.rank() == 1 {
        for (i, &n) in sizes.iter().enumerate() {
            comm.send(0, i as u32 + 1, &pattern(i as u64, n)).unwrap();
        }
        return;
    }
    if comm.rank() != 0 {
        return;
    }
    for (i, &n) in sizes.iter().enumerate() {
        let st = comm.probe(None, None).unwrap();
        assert_eq!((st.source, st.tag, st.len), (1, i as u32 + 1, n));
        if n > 1 {
            let mut short = vec![0u8; n / 2];
            match comm.recv_into(Some(1), Some(st.tag), &mut short) {
                Err(Error::Truncated { len, capacity, .. }) => {
                    assert_eq!((len as usize, capacity), (n, n / 2))
                }
                other => panic!("a short buffer gave {other:?}"),
            }
            // Not lost: still there.
            assert_eq!(comm.iprobe(Some(1), None).unwrap().unwrap().len, n);
        }
        let mut buf = vec![0u8; st.len];
        let got = comm
            .recv_into(Some(st.source), Some(st.tag), &mut buf)
            .unwrap();
        assert_eq!(got, st);
        assert_eq!(buf, pattern(i as u64, n));
    }
    // Nothing left: no message, or (rank 1 may have left by now) none can come.
    match comm.iprobe(None, None) {
        Ok(None) | Err(Error::PeerLost { .. }) => {}
        other => panic!("after the last message: {other:?}"),
    }
}

fn sizes(comm: &Comm) {
    let e = comm.engine_limits().eager;
    let sizes = [0usize, 1, e - 1, e, e + 1, 1 << 30];
    if comm.rank() == 0 {
        for (i, &n) in sizes.iter().enumerate() {
            let data = pattern(i as u64, n);
            if n >= 1 << 20 {
                // A large isend, and the caller's own buffer for the receive.
                comm.isend(1, i as u32, data).unwrap().wait().unwrap();
            } else {
                comm.send(1, i as u32, &data).unwrap();
            }
        }
    } else if comm.rank() == 1 {
        for (i, &n) in sizes.iter().enumerate() {
            let data = if n >= 1 << 20 {
                let mut buf = vec![0u8; n];
                let st = comm.recv_into(Some(0), Some(i as u32), &mut buf).unwrap();
                assert_eq!(st.len, n);
                buf
            } else {
                comm.recv(Some(0), Some(i as u32)).unwrap().data
            };
            assert_eq!(data.len(), n);
            assert!(data == pattern(i as u64, n), "message of {n} bytes differs");
            println!("size {n} ok");
        }
    }
}

fn flood(comm: &Comm) {
    let per = 16 << 20;
    let chunk = 64 * 1024;
    if comm.rank() > 0 {
        let data = pattern(u64::from(comm.rank()), chunk);
        for i in 0..per / chunk {
            let mut m = data.clone();
            m[..4].copy_from_slice(&(i as u32).to_le_bytes());
            comm.send(0, 0, &m).unwrap();
        }
        return;
    }
    let bound = comm.engine_limits().unexpected;
    // Compute (sleep) while the senders flood us.
    std::thread::sleep(Duration::from_secs(3));
    let held = comm.engine_accounting();
    println!(
        "after sleeping: unexpected {} bytes (peak {}, bound {bound}), {} pauses",
        held.unexpected_bytes, held.unexpected_peak, held.stalls
    );
    let mut next = vec![0u32; comm.size() as usize];
    for _ in 0..(comm.size() - 1) as usize * (per / chunk) {
        let m = comm.recv(None, Some(0)).unwrap();
        let i = u32::from_le_bytes(m.data[..4].try_into().unwrap());
        assert_eq!(i, next[m.source as usize], "from {}", m.source);
        next[m.source as usize] += 1;
        assert_eq!(m.data[4..], pattern(u64::from(m.source), chunk)[4..]);
    }
    let a = comm.engine_accounting();
    println!(
        "flood: unexpected peak {} bytes, bound {bound}, pauses {}",
        a.unexpected_peak, a.stalls
    );
    assert!(
        a.unexpected_peak <= bound,
        "peak {} above the bound {bound}",
        a.unexpected_peak
    );
    assert!(a.stalls > 0, "the senders were never made to wait");
    assert_eq!(a.unexpected_bytes, 0);
}

fn dying(comm: &Comm) {
    match comm.rank() {
        2 => {
            comm.send(1, 1, b"here").unwrap();
            comm.recv(Some(1), Some(2)).unwrap();
            // Die without saying goodbye.
            std::process::exit(0);
        }
        1 => {
            comm.recv(Some(2), Some(1)).unwrap();
            let pending_recv = comm.irecv(Some(2), Some(9)).unwrap();
            // Above the eager limit: waits for a receive rank 2 will never post.
            let pending_send = comm.isend(2, 9, vec![1u8; 1 << 20]).unwrap();
            comm.send(2, 2, b"die").unwrap();
            for (what, r) in [("receive", pending_recv), ("send", pending_send)] {
                match r.wait() {
                    Err(Error::PeerLost { rank: 2, reason }) => {
                        println!("pending {what} failed naming rank 2: {reason}")
                    }
                    other => panic!("pending {what}: {other:?}"),
                }
            }
            // Future calls fail at once, naming it.
            assert!(matches!(
                comm.send(2, 3, b"x"),
                Err(Error::PeerLost { rank: 2, .. })
            ));
            assert!(matches!(
                comm.recv(Some(2), None),
                Err(Error::PeerLost { rank: 2, .. })
            ));
        }
        _ => {}
    }
}

fn frozen(comm: &Comm) {
    match comm.rank() {
        2 => {
            comm.send(1, 1, &std::process::id().to_le_bytes()).unwrap();
            // Rank 1 kills us once it has noticed.
            let _ = std::process::Command::new("kill")
                .args(["-STOP", &std::process::id().to_string()])
                .status();
            std::thread::sleep(Duration::from_secs(600));
        }
        1 => {
            let m = comm.recv(Some(2), Some(1)).unwrap();
            let pid = u32::from_le_bytes(m.data[..4].try_into().unwrap());
            let t = Instant::now();
            let r = comm.recv(Some(2), Some(2));
            let waited = t.elapsed().as_secs_f64();
            // Say it (and pass) before the kill: `qcg run` stops the job once rank 2
            // is gone.
            let kill = || {
                let _ = std::process::Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .status();
            };
            match r {
                Err(Error::PeerLost { rank: 2, reason }) => {
                    println!("frozen peer detected after {waited:.1} s: {reason}");
                    println!("ok frozen rank 1 of {}", comm.size());
                    kill();
                    std::process::exit(0);
                }
                other => {
                    kill();
                    panic!("a frozen peer gave {other:?}")
                }
            }
        }
        _ => {}
    }
}

/// Ranks 0 and 1 exchange 1 KiB back and forth for up to two minutes; rank 0 says
/// when the link is up. Something between them that freezes (a relay proxy) must
/// end the exchange within the liveness time, naming the peer.
fn steady(comm: &Comm) {
    let peer = 1 - comm.rank().min(1);
    let t = Instant::now();
    let mut said = false;
    while t.elapsed() < Duration::from_secs(120) {
        if comm.rank() == 0 {
            comm.send(peer, 5, &[7u8; 1024]).unwrap();
            comm.recv(Some(peer), Some(5)).unwrap();
            if !said {
                println!("steady: linked");
                said = true;
            }
        } else {
            let m = comm.recv(Some(peer), Some(5)).unwrap();
            comm.send(peer, 5, &m.data).unwrap();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn alltoall(comm: &Comm) {
    let (rank, size) = (comm.rank(), comm.size());
    let t = Instant::now();
    let mut reqs = Vec::new();
    for p in (0..size).filter(|&p| p != rank) {
        reqs.push(comm.irecv(Some(p), Some(7)).unwrap());
    }
    for p in (0..size).filter(|&p| p != rank) {
        let mut m = pattern(u64::from(rank), 1024);
        m[..4].copy_from_slice(&rank.to_le_bytes());
        reqs.push(comm.isend(p, 7, m).unwrap());
    }
    for c in qcg::wait_all(reqs).unwrap() {
        if let Some(m) = c.into_message() {
            assert_eq!(m.data[..4], m.source.to_le_bytes());
            assert_eq!(m.data[4..], pattern(u64::from(m.source), 1024)[4..]);
        }
    }
    comm.barrier().unwrap();
    println!(
        "alltoall of 1 KiB over {size} ranks in {:.3} s, threads {}",
        t.elapsed().as_secs_f64(),
        threads()
    );
}

fn dials(comm: &Comm) {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;
    let (rank, size) = (comm.rank(), comm.size());
    let before = threads();
    let (stop, most) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicUsize::new(0)),
    );
    let sampler = {
        let (stop, most) = (stop.clone(), most.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                most.fetch_max(threads(), Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(1));
            }
        })
    };
    let mut reqs = Vec::new();
    for p in (0..size).filter(|&p| p != rank) {
        reqs.push(comm.irecv(Some(p), Some(9)).unwrap());
    }
    for p in (0..size).filter(|&p| p != rank) {
        reqs.push(comm.isend(p, 9, rank.to_le_bytes().to_vec()).unwrap());
    }
    qcg::wait_all(reqs).unwrap();
    // Attempts still running after the links were made (the held direct ones that
    // move links off the relay) are sampled too.
    std::thread::sleep(Duration::from_millis(1000));
    comm.barrier().unwrap();
    stop.store(true, Ordering::SeqCst);
    sampler.join().unwrap();
    let made: Vec<String> = (0..size)
        .filter(|&p| p != rank)
        .map(|p| format!("{p}:{:?}", comm.link_technique(p)))
        .collect();
    println!(
        "threads before {before}, at most {} while linking to {} peers; links {}",
        most.load(Ordering::SeqCst) - 1,
        size - 1,
        made.join(" ")
    );
}

fn descriptors() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count())
}

/// Ping-pongs 1 MiB `n` times between ranks 0 and 1; the mean round trip in ms.
fn pingpong_mib(comm: &Comm, n: usize) -> f64 {
    let mut buf = vec![0u8; 1 << 20];
    let t = Instant::now();
    for _ in 0..n {
        if comm.rank() == 0 {
            comm.send(1, 5, &buf).unwrap();
            comm.recv_into(Some(1), Some(5), &mut buf).unwrap();
        } else {
            comm.recv_into(Some(0), Some(5), &mut buf).unwrap();
            comm.send(0, 5, &buf).unwrap();
        }
    }
    t.elapsed().as_secs_f64() * 1e3 / n as f64
}

fn strangers(comm: &Comm) {
    let target = if comm.rank() == 1 {
        comm.send(0, 1, comm.local_addr().to_string().as_bytes())
            .unwrap();
        None
    } else {
        let m = comm.recv(Some(1), Some(1)).unwrap();
        Some(String::from_utf8(m.data).unwrap())
    };
    let quiet = pingpong_mib(comm, 20);
    let before = (threads(), descriptors());
    let mut idle = Vec::new();
    if let Some(addr) = &target {
        for _ in 0..2000 {
            match std::net::TcpStream::connect(addr) {
                Ok(s) => idle.push(s),
                Err(e) => panic!("connect {addr}: {e}"),
            }
        }
    }
    comm.barrier().unwrap();
    let flooded = pingpong_mib(comm, 20);
    let after = (threads(), descriptors());
    comm.barrier().unwrap();
    if comm.rank() == 1 {
        println!(
            "under 2000 idle connections: threads {} -> {}, descriptors {} -> {}, 1 MiB round trip {quiet:.2} ms -> {flooded:.2} ms ({:.2}x)",
            before.0,
            after.0,
            before.1,
            after.1,
            flooded / quiet
        );
        assert_eq!(before.0, after.0, "threads grew under the flood");
        assert!(
            after.1 <= before.1 + qcg::engine::MAX_HANDSHAKES + 8,
            "descriptors: {after:?}"
        );
    }
    drop(idle);
}

/// Links inside the machine get `QCG_LOCAL_TCP_CC`'s congestion control: a 1 MiB
/// ping-pong, then each rank prints what the kernel says its link to the other uses.
fn congestion(comm: &Comm) {
    let peer = 1 - comm.rank();
    let msg = pattern(7, 1 << 20);
    let cc = || {
        comm.link_congestion(peer)
            .expect("the kernel names the link's congestion control")
    };
    // Each asks before it lets the other go (the last two messages), while the link
    // is surely up.
    let got = if comm.rank() == 0 {
        comm.send(peer, 1, &msg).unwrap();
        assert_eq!(comm.recv(Some(peer), Some(2)).unwrap().data, msg);
        let got = cc();
        comm.send(peer, 3, b"done").unwrap();
        comm.recv(Some(peer), Some(4)).unwrap();
        got
    } else {
        let m = comm.recv(Some(peer), Some(1)).unwrap().data;
        assert_eq!(m, msg);
        comm.send(peer, 2, &m).unwrap();
        let got = cc();
        comm.recv(Some(peer), Some(3)).unwrap();
        comm.send(peer, 4, b"done").unwrap();
        got
    };
    println!("congestion {got}");
}

/// Relay first, then upgrade: run with the direct attempt held back
/// (`QCG_TEST_LINK_DELAY=direct:1500`), the relay makes the link and the direct one
/// replaces it about a second later, while rank 0 and the last rank stream numbered
/// messages (eager and rendezvous, three tags) to each other for ~3 s.
fn upgrade(comm: &Comm) {
    let last = comm.size() - 1;
    let peer = match comm.rank() {
        0 => last,
        r if r == last => 0,
        _ => return,
    };
    let n = 3_000u32;
    let msg = |i: u32| {
        let len = if i % 50 == 7 {
            100_000
        } else {
            8 + (i as usize % 100)
        };
        let mut m = pattern(u64::from(comm.rank()) << 32 | u64::from(i), len);
        m[..4].copy_from_slice(&i.to_le_bytes());
        m
    };
    // Rank 0 makes the link (a hello), so that the two do not dial each other.
    if comm.rank() == 0 {
        comm.send(peer, 99, b"hello").unwrap();
    } else {
        comm.recv(Some(0), Some(99)).unwrap();
    }
    let first = comm.link_technique(peer);
    let recvs: Vec<Request> = (0..n)
        .map(|_| comm.irecv(Some(peer), None).unwrap())
        .collect();
    let mut sends = Vec::new();
    for i in 0..n {
        sends.push(comm.isend(peer, i % 3, msg(i)).unwrap());
        if i % 3 == 0 {
            std::thread::sleep(Duration::from_millis(3));
        }
    }
    let done = qcg::wait_all(recvs).unwrap();
    qcg::wait_all(sends).unwrap();
    for (want, c) in done.into_iter().enumerate() {
        let m = c.into_message().unwrap();
        let i = u32::from_le_bytes(m.data[..4].try_into().unwrap());
        assert_eq!(i, want as u32, "message {i} received in place of {want}");
        assert_eq!(m.tag, i % 3);
        let mut expect = pattern(u64::from(peer) << 32 | u64::from(i), m.data.len());
        expect[..4].copy_from_slice(&m.data[..4]);
        assert_eq!(m.data, expect, "payload of message {i}");
    }
    let upgrades = comm.engine_accounting().upgrades;
    println!(
        "link to {peer}: first {first:?}, now {:?}; upgrades {upgrades}; {n} messages each way in order; sealed {:?}",
        comm.link_technique(peer),
        comm.link_sealed(peer)
    );
    assert_eq!(upgrades, 1, "the link did not move off the relay");
}

/// Every rank streams numbered messages of every size class to every other at once,
/// from before its links exist (so the first go on TCP and the rest after the move
/// to shared memory), receiving as it goes; each checks order and bytes, then says
/// what carries each link and how many large messages were copied once.
fn shm(comm: &Comm) {
    let me = comm.rank();
    let n = comm.size();
    let e = comm.engine_limits().eager;
    let sizes = [0usize, 1, 100, e - 1, e, e + 1, 300_000, 1 << 20];
    let count = 160u32;
    let msg = |from: u32, i: u32| {
        let len = sizes[i as usize % sizes.len()];
        let mut m = pattern(u64::from(from) << 32 | u64::from(i), len.max(4));
        m.truncate(len.max(4));
        m[..4].copy_from_slice(&i.to_le_bytes());
        m
    };
    let mut recvs = Vec::new();
    let mut sends = Vec::new();
    for i in 0..count {
        for p in (0..n).filter(|&p| p != me) {
            recvs.push((p, i, comm.irecv(Some(p), Some(i % 3)).unwrap()));
            sends.push(comm.isend(p, i % 3, msg(me, i)).unwrap());
        }
    }
    for s in sends {
        s.wait().unwrap();
    }
    // Per (source, tag), messages arrive in the order sent.
    let mut next: std::collections::HashMap<(u32, u32), u32> = Default::default();
    for (p, i, r) in recvs {
        let m = r.wait().unwrap().into_message().unwrap().data;
        let got = u32::from_le_bytes(m[..4].try_into().unwrap());
        let tag = i % 3;
        let want = next.entry((p, tag)).or_insert(tag);
        assert_eq!(got, *want, "from rank {p}, tag {tag}: out of order");
        *want += 3;
        assert!(m == msg(p, got), "message {got} from rank {p} differs");
    }
    // Asked before the barrier: no peer leaves (closing its links) before it.
    for p in (0..n).filter(|&p| p != me) {
        println!("via {p} {:?}", comm.link_via(p));
    }
    let a = comm.engine_accounting();
    let some = |n: u64| if n > 0 { "some" } else { "none" };
    println!(
        "memory links {} single copies {} shared chunks {}",
        a.memory_links,
        some(a.single_copies),
        some(a.shared_chunks)
    );
    comm.barrier().unwrap();
}
