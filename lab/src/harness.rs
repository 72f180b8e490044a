//! A lab for tests: brought up under a prefix unique to the test and process, probed
//! from inside its hosts, and always taken down (on drop, so also when the test
//! fails). Used by this crate's tests and by the benchmarks' lab tests; it panics with
//! what is wrong rather than returning errors, as a test would.

use crate::sys;
use crate::topo::{self, Topology};
use std::io::{BufRead, BufReader};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::Mutex;

/// The `qcg-lab` binary, built beside the running test's (`target/PROFILE/`).
pub fn exe() -> &'static str {
    static EXE: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        let test = std::env::current_exe().expect("the test binary's path");
        let p = test
            .parent()
            .and_then(|d| d.parent())
            .expect("the target folder")
            .join("qcg-lab");
        assert!(
            p.exists(),
            "{} is missing: run `cargo build --workspace --bins` first",
            p.display()
        );
        p.display().to_string()
    });
    &EXE
}

static DEPS: Mutex<Option<Result<(), String>>> = Mutex::new(None);

/// Makes sure the lab can run here, installing what is missing; panics (never skips)
/// with what to do when it cannot.
pub fn require_lab() {
    if !sys::is_root() {
        panic!("the lab tests need root (network namespaces, nftables, tc): run the tests as root");
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
    /// The prefix of its namespaces.
    pub prefix: String,
    /// Its topology.
    pub topo: Topology,
    _file: tempfile::NamedTempFile,
}

impl Lab {
    /// Brings up `text` under a prefix unique to this test and process.
    pub fn up(tag: &str, text: &str) -> Lab {
        Lab::up_with_env(tag, text, &[])
    }

    /// As [`Lab::up`], with `env` set for `qcg-lab up` and what it starts (the delay
    /// line's test hooks, e.g. [`crate::delay::TAMPER_VAR`]).
    pub fn up_with_env(tag: &str, text: &str, env: &[(&str, &str)]) -> Lab {
        require_lab();
        let prefix = format!("t{tag}{}", std::process::id() % 100_000);
        let mut file = tempfile::NamedTempFile::new().expect("a temporary topology file");
        std::io::Write::write_all(&mut file, text.as_bytes()).expect("the topology written");
        let topo = topo::parse(file.path(), text).expect("a valid topology");
        let out = Command::new(exe())
            .args(["up", "--prefix", &prefix])
            .arg(file.path())
            .envs(env.iter().copied())
            .output()
            .expect("qcg-lab up runs");
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

    /// The address of `host`.
    pub fn addr(&self, host: &str) -> Ipv4Addr {
        self.topo.host(host).expect("a host of the lab").addr
    }

    /// Runs `qcg-lab ARGS` inside `host`.
    pub fn exec(&self, host: &str, args: &[&str]) -> Output {
        Command::new(exe())
            .args(["exec", "--prefix", &self.prefix, host, "--", exe()])
            .args(args)
            .output()
            .expect("qcg-lab exec runs")
    }

    /// Starts a probe server on `host`, stopped on drop.
    pub fn serve(&self, host: &str, ports: &[u16]) -> Server {
        let mut args = vec!["serve".to_string(), "--for-secs".into(), "60".into()];
        for p in ports {
            args.extend(["--port".to_string(), p.to_string()]);
        }
        let mut child = Command::new(exe())
            .args(["exec", "--prefix", &self.prefix, host, "--", exe()])
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("qcg-lab exec runs");
        let mut line = String::new();
        if let Some(out) = child.stdout.take() {
            BufReader::new(out)
                .read_line(&mut line)
                .expect("the probe server's first line");
        }
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
                let seen = s.trim().strip_prefix("seen_as=").unwrap_or_default();
                Ok(seen.parse().expect("the address the server saw"))
            }
            Some(c) => Err(c),
            None => Err(-1),
        }
    }

    /// Takes the lab down.
    pub fn down(&self) -> Output {
        Command::new(exe())
            .args(["down", "--prefix", &self.prefix])
            .output()
            .expect("qcg-lab down runs")
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = self.down();
    }
}

/// A probe server, stopped on drop.
pub struct Server(pub Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A probe's exit status when its connection timed out.
pub const TIMEOUT: i32 = crate::probe::EXIT_TIMEOUT;

/// `ip:port`.
pub fn at(ip: Ipv4Addr, port: u16) -> SocketAddr {
    SocketAddr::from((ip, port))
}
