//! The lab harness shared by the lab tests: bring a lab up under a unique prefix,
//! run probes in its hosts, and always take it down.

#![allow(dead_code)]

use qcg_lab::sys;
use qcg_lab::topo::{self, Topology};
use std::io::{BufRead, BufReader};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::Mutex;

pub const QCG_LAB: &str = env!("CARGO_BIN_EXE_qcg-lab");

static DEPS: Mutex<Option<Result<(), String>>> = Mutex::new(None);

/// Makes sure the lab can run here, installing what is missing; panics (never skips)
/// with what to do when it cannot.
pub fn require_lab() {
    if !sys::is_root() {
        panic!("the lab tests need root (network namespaces, nftables, tc): run `cargo test -p qcg-lab` as root");
    }
    let mut deps = DEPS.lock().unwrap_or_else(|e| e.into_inner());
    let result = deps.get_or_insert_with(|| {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/lab-deps.sh");
        let out = Command::new("bash").arg(&script).output();
        match out {
            Ok(o) if o.status.success() => sys::preflight().map_err(|e| e.to_string()),
            Ok(o) => Err(format!(
                "{} failed: {}",
                script.display(),
                String::from_utf8_lossy(&o.stderr).trim()
            )),
            Err(e) => Err(format!("cannot run {}: {e}", script.display())),
        }
    });
    if let Err(e) = result {
        panic!("the lab cannot run here: {e} (as root: bash scripts/lab-deps.sh)");
    }
}

/// A running lab, taken down on drop.
pub struct Lab {
    pub prefix: String,
    pub topo: Topology,
    _file: tempfile::NamedTempFile,
}

impl Lab {
    /// Brings up `text` under a prefix unique to this test and process.
    pub fn up(tag: &str, text: &str) -> Lab {
        require_lab();
        let prefix = format!("t{tag}{}", std::process::id() % 100_000);
        let mut file = tempfile::NamedTempFile::new().unwrap();
        std::io::Write::write_all(&mut file, text.as_bytes()).unwrap();
        let topo = topo::parse(file.path(), text).unwrap();
        let out = Command::new(QCG_LAB)
            .args(["up", "--prefix", &prefix])
            .arg(file.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "qcg-lab up failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Lab {
            prefix,
            topo,
            _file: file,
        }
    }

    pub fn addr(&self, host: &str) -> Ipv4Addr {
        self.topo.host(host).unwrap().addr
    }

    pub fn exec(&self, host: &str, args: &[&str]) -> Output {
        Command::new(QCG_LAB)
            .args(["exec", "--prefix", &self.prefix, host, "--", QCG_LAB])
            .args(args)
            .output()
            .unwrap()
    }

    /// Starts a probe server on `host`, stopped on drop.
    pub fn serve(&self, host: &str, ports: &[u16]) -> Server {
        let mut args = vec!["serve".to_string(), "--for-secs".into(), "60".into()];
        for p in ports {
            args.extend(["--port".to_string(), p.to_string()]);
        }
        let mut child = Command::new(QCG_LAB)
            .args(["exec", "--prefix", &self.prefix, host, "--", QCG_LAB])
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let server = Server(child);
        assert_eq!(line.trim(), "listening", "probe server on {host}");
        server
    }

    /// Connects from `host` to `to`; Ok(address the server saw) or Err(exit status).
    pub fn connect(
        &self,
        host: &str,
        to: SocketAddr,
        from_port: Option<u16>,
    ) -> Result<SocketAddr, i32> {
        let mut args = vec![
            "connect".to_string(),
            to.to_string(),
            "--timeout-ms".into(),
            "1000".into(),
        ];
        if let Some(p) = from_port {
            args.extend(["--from-port".to_string(), p.to_string()]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = self.exec(host, &args);
        match out.status.code() {
            Some(0) => {
                let s = String::from_utf8_lossy(&out.stdout);
                Ok(s.trim().strip_prefix("seen_as=").unwrap().parse().unwrap())
            }
            Some(c) => Err(c),
            None => Err(-1),
        }
    }

    pub fn down(&self) -> Output {
        Command::new(QCG_LAB)
            .args(["down", "--prefix", &self.prefix])
            .output()
            .unwrap()
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = self.down();
    }
}

pub struct Server(pub Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub const TIMEOUT: i32 = qcg_lab::probe::EXIT_TIMEOUT;

pub fn at(ip: Ipv4Addr, port: u16) -> SocketAddr {
    SocketAddr::from((ip, port))
}
