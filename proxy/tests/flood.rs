//! 2,000 idle connections to a running proxy: its thread count does not move, its
//! pending handshakes stay capped, and a relayed transfer during the flood works.

use anyhow::{ensure, Context, Result};
use qcg_proto::tls::{Ca, Role};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

const FLOOD: usize = 2000;

fn threads() -> Result<usize> {
    Ok(std::fs::read_dir("/proc/self/task")?.count())
}

/// Raises the descriptor limit to what the flood needs (both ends live in this
/// process), or as far as the hard limit allows.
fn enough_descriptors() -> usize {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let mut l = getrlimit(Resource::Nofile);
    let want = (FLOOD as u64) * 2 + 512;
    let hard = l.maximum.unwrap_or(u64::MAX);
    l.current = Some(want.min(hard));
    let _ = setrlimit(Resource::Nofile, l);
    let now = getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX);
    (now.saturating_sub(512) as usize).min(FLOOD)
}

fn present(addr: std::net::SocketAddr, token: &str) -> Result<TcpStream> {
    let mut s = TcpStream::connect(addr)?;
    s.write_all(qcg_proxy::relay::MAGIC)?;
    s.write_all(token.as_bytes())?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    Ok(s)
}

#[test]
fn idle_connections_cost_no_threads_and_a_relay_still_works() -> Result<()> {
    let flood = enough_descriptors();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let ca = Ca::generate()?;
    // No broker at this address: the proxy only warns that it cannot register.
    let proxy = rt.block_on(qcg_proxy::Proxy::start(
        ca.identity(Role::Proxy, "p")?,
        "127.0.0.1:0".parse()?,
        None,
        "127.0.0.1:9".parse()?,
    ))?;
    let addr = proxy.addr;
    // Let the runtime settle (blocking pool, timers), then count.
    std::thread::sleep(Duration::from_millis(300));
    let before = threads()?;

    let started = Instant::now();
    let mut idle = Vec::with_capacity(flood);
    for _ in 0..flood {
        idle.push(TcpStream::connect(addr)?);
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while proxy.gate.accepted.load(Ordering::Relaxed) < flood as u64 {
        ensure!(
            Instant::now() < deadline,
            "the proxy did not accept the flood"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let during = threads()?;
    let pending = proxy.gate.pending.load(Ordering::Relaxed);
    eprintln!(
        "{flood} idle connections in {:?}: threads {before} -> {during}, pending {pending}, dropped {}",
        started.elapsed(),
        proxy.gate.dropped.load(Ordering::Relaxed)
    );
    ensure!(
        during.abs_diff(before) <= 2,
        "threads went from {before} to {during}"
    );
    ensure!(
        pending <= qcg_proxy::gate::MAX_PENDING as u64,
        "{pending} pending"
    );
    ensure!(
        proxy.gate.dropped.load(Ordering::Relaxed) >= (flood - qcg_proxy::gate::MAX_PENDING) as u64
    );

    // A relayed transfer during the flood.
    let token = "ab".repeat(32);
    proxy.tokens.expect(token.clone(), Duration::from_secs(60));
    let mut a = present(addr, &token)?;
    let mut b = present(addr, &token)?;
    let mut k = [0u8; 1];
    a.read_exact(&mut k).context("end a not paired")?;
    b.read_exact(&mut k).context("end b not paired")?;
    let data: Vec<u8> = (0..1 << 20).map(|i: u32| (i % 251) as u8).collect();
    let sent = data.clone();
    let t = Instant::now();
    let w = std::thread::spawn(move || -> std::io::Result<()> {
        a.write_all(&sent)?;
        a.shutdown(std::net::Shutdown::Write)
    });
    let mut got = Vec::new();
    b.read_to_end(&mut got)?;
    w.join().map_err(|_| anyhow::anyhow!("writer panicked"))??;
    eprintln!("1 MiB relayed during the flood in {:?}", t.elapsed());
    ensure!(got == data, "relayed bytes differ");
    drop(idle);
    proxy.kill();
    Ok(())
}
