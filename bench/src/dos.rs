//! `qcg-bench attacks`, issue 21's denial-of-service part: a broker started at
//! `ulimit -n 512` under 2,000 idle stranger connections on its plain-HTTP port (kept
//! at 2,000: the stranger dials again whatever the broker closes), and a helper at
//! `ulimit -n 256` under 400 connections that each send a 4-byte frame header and
//! nothing more (from `nobody` when we are root). Prints what a user and an admin
//! would look at: how long an HTTPS request or a helper request takes during the
//! flood, how many log lines the service wrote, its memory and CPU.

use anyhow::{Context, Result};
use qcg_grid::services::{tls_fields, Limits, ServiceGrid};
use qcg_proto::tls::Role;
use qcg_proto::{Request, Response};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const NOBODY: u32 = 65534;
/// How long each flood lasts.
const FLOOD: Duration = Duration::from_secs(12);

fn rss_mib(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .unwrap_or(0.0)
        / 1024.0
}

/// CPU seconds (user + system) the process used so far.
fn cpu_secs(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces) end with `)`.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 of the whole line: 11 and 12 after `)`.
    (ticks(11) + ticks(12)) / 100.0
}

fn descriptors(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

/// Latencies in ms: (median, max, how many got no answer).
fn summary(mut t: Vec<Option<f64>>) -> (f64, f64, usize) {
    let failed = t.iter().filter(|x| x.is_none()).count();
    let mut ok: Vec<f64> = t.drain(..).flatten().collect();
    ok.sort_by(|a, b| a.total_cmp(b));
    let median = ok.get(ok.len() / 2).copied().unwrap_or(f64::NAN);
    let max = ok.last().copied().unwrap_or(f64::NAN);
    (median, max, failed)
}

/// Holds `n` idle connections to `addr` until `stop`, dialling again each one the
/// far end closed; counts the dials.
fn idle_stranger(addr: SocketAddr, n: usize, stop: Arc<AtomicBool>, dials: Arc<AtomicU64>) {
    let dial = || {
        dials.fetch_add(1, Ordering::Relaxed);
        let s = TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()?;
        s.set_nonblocking(true).ok()?;
        Some(s)
    };
    let mut conns: Vec<Option<TcpStream>> = Vec::with_capacity(n);
    while conns.len() < n && !stop.load(Ordering::Relaxed) {
        conns.push(dial());
    }
    while !stop.load(Ordering::Relaxed) {
        for c in conns.iter_mut() {
            let mut b = [0u8; 64];
            let closed = match c {
                None => true,
                Some(s) => match s.read(&mut b) {
                    Ok(_) => true,
                    Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
                },
            };
            if stop.load(Ordering::Relaxed) {
                break;
            }
            if closed {
                *c = dial();
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The flooding child of the helper attack (run as `nobody` when we are root):
/// holds `n` half-sent frames on `socket` until its stdin closes, sending again
/// whatever the helper closes.
pub fn half_frames(socket: &Path, n: usize) -> Result<()> {
    let open = || {
        let mut s = UnixStream::connect(socket).ok()?;
        s.write_all(&100u32.to_be_bytes()).ok()?;
        s.set_nonblocking(true).ok()?;
        Some(s)
    };
    let stop = Arc::new(AtomicBool::new(false));
    let st = stop.clone();
    std::thread::spawn(move || {
        let mut sink = Vec::new();
        let _ = std::io::stdin().read_to_end(&mut sink);
        st.store(true, Ordering::Relaxed);
    });
    let mut conns: Vec<Option<UnixStream>> = (0..n).map(|_| open()).collect();
    println!("FLOODING {}", conns.iter().flatten().count());
    std::io::stdout().flush()?;
    while !stop.load(Ordering::Relaxed) {
        for c in conns.iter_mut() {
            let mut b = [0u8; 256];
            let closed = match c {
                None => true,
                Some(s) => match s.read(&mut b) {
                    Ok(0) => true,
                    Ok(_) => false,
                    Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
                },
            };
            if closed {
                *c = open();
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}

fn ask(socket: &Path, req: &Request) -> Option<Response> {
    let mut s = UnixStream::connect(socket).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.write_all(&qcg_proto::frame::encode(req).ok()?).ok()?;
    qcg_proto::frame::read_frame_sync::<Response, _>(&mut s)
        .ok()
        .flatten()
}

/// Runs both floods and prints what they cost.
pub fn run(strangers: usize, half: usize) -> Result<()> {
    let mut g = ServiceGrid::new()?;
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(g.dir(), std::fs::Permissions::from_mode(0o755))?;
    }
    for (role, name) in [
        (Role::Broker, "broker"),
        (Role::Frontal, "alpha"),
        (Role::Helper, "a1"),
        (Role::Client, "alice"),
    ] {
        g.issue(role, name)?;
    }
    // Our own descriptors: enough for the strangers.
    {
        use rustix::process::{getrlimit, setrlimit, Resource};
        let mut l = getrlimit(Resource::Nofile);
        l.current = l.maximum;
        let _ = setrlimit(Resource::Nofile, l);
    }
    let limit = |n| Limits {
        nofile: Some(n),
        ..Limits::default()
    };
    g.start_with(
        "broker",
        "qcg-broker",
        &format!(
            "listen = \"127.0.0.1:0\"\nhttp_listen = \"127.0.0.1:0\"\nhttps_listen = \"127.0.0.1:0\"\n{}",
            tls_fields("broker")
        ),
        limit(512),
    )?;
    let quic_at = g.line("broker", "qcg-broker: QUIC on")?;
    let http_at: SocketAddr = g.addr("broker", "qcg-broker: HTTP API on http://")?;
    let url = format!(
        "https://{}",
        g.line("broker", "qcg-broker: HTTPS API on https://")?
    );
    g.start_with(
        "frontal",
        "qcg-frontal",
        &format!(
            "cluster = \"alpha\"\npolicy = \"open\"\nbroker = \"{quic_at}\"\nlisten = \"127.0.0.1:0\"\n{}",
            tls_fields("alpha")
        ),
        limit(1024),
    )?;
    let at = g.line("frontal", "qcg-frontal: cluster alpha serving helpers on")?;
    let root = rustix::process::geteuid().is_root();
    let group = if root {
        format!("socket_group = \"{NOBODY}\"\n")
    } else {
        String::new()
    };
    g.start_with(
        "helper",
        "qcg-helper",
        &format!(
            "node = \"a1\"\nfrontal = \"{at}\"\nsocket = \"a1.sock\"\nbind_address = \"127.0.0.1\"\n{group}{}",
            tls_fields("a1")
        ),
        limit(256),
    )?;
    g.line("helper", "qcg-helper: node a1 serving")?;
    let socket = g.socket("a1");
    let (broker, helper) = (g.service("broker")?, g.service("helper")?);

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let alice = g.identity("alice")?;
    // A new client (and so a new connection) per request: a kept-alive connection
    // opened before the flood would not show whether the broker still accepts.
    let https = || {
        let t0 = Instant::now();
        let client = qcg_grid::client::Client::new(&url, &alice).ok()?;
        let r = rt.block_on(async {
            tokio::time::timeout(
                Duration::from_secs(5),
                client.request("GET", "/v1/jobs", Vec::new()),
            )
            .await
        });
        matches!(r, Ok(Ok(ref a)) if a.status == 200).then(|| t0.elapsed().as_secs_f64() * 1e3)
    };
    println!(
        "# qcg-bench attacks: denial of service (issue 21), real services on loopback; \
         {} s per flood",
        FLOOD.as_secs()
    );

    // 1. Idle strangers on the broker's plain HTTP.
    let quiet = summary((0..5).map(|_| https()).collect());
    let (rss0, cpu0, log0) = (
        rss_mib(broker.pid()),
        cpu_secs(broker.pid()),
        broker.lines_printed(),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let dials = Arc::new(AtomicU64::new(0));
    let (st, di) = (stop.clone(), dials.clone());
    let flood = std::thread::spawn(move || idle_stranger(http_at, strangers, st, di));
    let t0 = Instant::now();
    let mut during = Vec::new();
    let mut fds = 0;
    let mut peak = rss0;
    while t0.elapsed() < FLOOD {
        during.push(https());
        fds = fds.max(descriptors(broker.pid()));
        peak = peak.max(rss_mib(broker.pid()));
        std::thread::sleep(Duration::from_millis(250));
    }
    let cpu = (cpu_secs(broker.pid()) - cpu0) / t0.elapsed().as_secs_f64() * 100.0;
    stop.store(true, Ordering::Relaxed);
    let _ = flood.join();
    let n = during.len();
    let (med, max, failed) = summary(during);
    println!(
        "broker at ulimit -n 512, {strangers} idle plain-HTTP strangers ({} dials):",
        dials.load(Ordering::Relaxed)
    );
    println!(
        "    HTTPS GET /v1/jobs: quiet median {:.1} ms; during the flood median {med:.1} ms, \
         max {max:.1} ms, {failed} of {n} unanswered in 5 s",
        quiet.0
    );
    println!(
        "    log +{} lines, RSS {rss0:.1} -> peak {peak:.1} MiB (+{:.1}), descriptors max {fds}, CPU {cpu:.0} %",
        broker.lines_printed() - log0,
        peak - rss0
    );

    // 2. Half-sent frames on the helper's socket.
    let node_info = || {
        let t0 = Instant::now();
        matches!(
            ask(&socket, &Request::NodeInfo),
            Some(Response::Node { .. })
        )
        .then(|| t0.elapsed().as_secs_f64() * 1e3)
    };
    let quiet = summary((0..5).map(|_| node_info()).collect());
    let (cpu0, log0) = (cpu_secs(helper.pid()), helper.lines_printed());
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.args(["half-frames", "--socket"])
        .arg(&socket)
        .args(["--count", &half.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    if root {
        use std::os::unix::process::CommandExt;
        cmd.uid(NOBODY).gid(NOBODY);
    }
    let mut child = cmd.spawn().context("starting the flooding child")?;
    let mut out = BufReader::new(child.stdout.take().context("no stdout")?);
    let mut l = String::new();
    out.read_line(&mut l)?;
    let held = l
        .trim()
        .strip_prefix("FLOODING ")
        .unwrap_or("?")
        .to_string();
    let t0 = Instant::now();
    let mut during = Vec::new();
    let mut fds = 0;
    while t0.elapsed() < FLOOD {
        during.push(node_info());
        fds = fds.max(descriptors(helper.pid()));
        std::thread::sleep(Duration::from_millis(250));
    }
    let cpu = (cpu_secs(helper.pid()) - cpu0) / t0.elapsed().as_secs_f64() * 100.0;
    drop(child.stdin.take());
    let _ = child.wait();
    let n = during.len();
    let (med, max, failed) = summary(during);
    println!(
        "helper at ulimit -n 256, {half} half-frames from {} ({held} connected at first):",
        if root { "nobody" } else { "our own user" }
    );
    println!(
        "    node_info from {}: quiet median {:.1} ms; during the flood median {med:.1} ms, \
         max {max:.1} ms, {failed} of {n} unanswered in 5 s",
        if root { "root" } else { "the same user" },
        quiet.0
    );
    println!(
        "    log +{} lines, descriptors max {fds}, CPU {cpu:.0} %",
        helper.lines_printed() - log0
    );
    drop(g);
    Ok(())
}
