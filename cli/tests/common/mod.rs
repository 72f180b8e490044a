//! The harness the end-to-end tests share, beside `qcg_grid::services` (grids of
//! service processes from config files): the workspace's binaries, a single
//! service or child started alone (killed when the test ends) and its lines, the
//! `qcg` command, plain HTTP and certificate issuing.

#![allow(dead_code, clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

pub fn bin_dir() -> PathBuf {
    qcg_grid::services::bin_dir()
}

pub fn bin(name: &str) -> PathBuf {
    qcg_grid::services::bin(name).unwrap_or_else(|e| panic!("{e}"))
}

pub fn example(name: &str) -> PathBuf {
    bin(&format!("examples/{name}"))
}

/// Children killed when the test ends, pass or fail.
pub struct Services(pub Vec<Child>);

impl Drop for Services {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Starts a service; its stdout lines arrive on the returned channel.
pub fn start(services: &mut Services, name: &str, config: &Path) -> mpsc::Receiver<String> {
    let mut child = Command::new(bin(name))
        .arg("--config")
        .arg(config)
        .env(
            "RUST_LOG",
            std::env::var("QCG_TEST_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    services.0.push(child);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    rx
}

/// Waits for the line starting with `prefix`; returns the rest of it.
pub fn wait_for(lines: &mpsc::Receiver<String>, prefix: &str) -> String {
    loop {
        let line = lines
            .recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|_| panic!("no line starting with `{prefix}`"));
        if let Some(rest) = line.strip_prefix(prefix) {
            return rest.trim().to_string();
        }
    }
}

pub fn qcg(args: &[&str]) -> Output {
    Command::new(bin("qcg")).args(args).output().unwrap()
}

pub fn http_get(addr: SocketAddr, path: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: qcg\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
    resp.split_once("\r\n\r\n").unwrap().1.to_string()
}

pub fn metric(addr: SocketAddr, name: &str) -> u64 {
    let body = http_get(addr, "/metrics");
    body.lines()
        .find_map(|l| l.strip_prefix(name).map(|v| v.trim().parse().unwrap()))
        .unwrap_or_else(|| panic!("no {name} in\n{body}"))
}

pub fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// A fresh folder with a grid CA in `ca/` (`qcg ca init`) and a certificate for each
/// `(role, name)` in `holders` (`qcg ca issue`).
pub fn grid_ca(holders: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca");
    assert!(qcg(&["ca", "init", "--dir", ca.to_str().unwrap()])
        .status
        .success());
    for (role, name) in holders {
        issue(&ca, role, name);
    }
    dir
}

pub fn issue(ca: &Path, role: &str, name: &str) {
    let o = qcg(&[
        "ca",
        "issue",
        "--dir",
        ca.to_str().unwrap(),
        "--role",
        role,
        "--name",
        name,
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// One request to the helper at `socket` on a new connection; its answer (at most
/// 20 s waited for).
pub fn ask(socket: &Path, req: &qcg_proto::Request) -> std::io::Result<qcg_proto::Response> {
    let mut s = std::os::unix::net::UnixStream::connect(socket)?;
    s.set_read_timeout(Some(Duration::from_secs(20)))?;
    s.write_all(&qcg_proto::frame::encode(req).unwrap())?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some((r, _)) = qcg_proto::frame::decode::<qcg_proto::Response>(&buf).unwrap() {
            return Ok(r);
        }
        let n = s.read(&mut chunk)?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// A process's registration (port `port` on 127.0.0.1), as a helper receives it.
pub fn register(job: &str, rank: u32, cluster: &str, node: &str, port: u16) -> qcg_proto::Request {
    qcg_proto::Request::Register(qcg_proto::AccessPoint {
        process: qcg_proto::ProcName::new(job, rank),
        cluster: cluster.into(),
        node: node.into(),
        private_addr: "127.0.0.1".parse().unwrap(),
        public_addr: None,
        port,
    })
}

/// Rank `from`'s lookup of rank `target` of `job`.
pub fn lookup(job: &str, from: u32, target: u32) -> qcg_proto::Request {
    qcg_proto::Request::Lookup {
        from: qcg_proto::ProcName::new(job, from),
        target: qcg_proto::ProcName::new(job, target),
    }
}
