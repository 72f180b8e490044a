//! The lab harness ([`qcg_lab::harness`]) for the benchmarks' lab tests.

#![allow(dead_code, unused_imports)]

pub use qcg_lab::harness::{at, require_lab, Lab, Server, TIMEOUT};

use qcg_lab::topo::{self, Nat};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// The services every lab test starts.
pub const SERVICES: [&str; 4] = ["qcg-broker", "qcg-frontal", "qcg-helper", "qcg-proxy"];

/// The folder of the workspace's binaries (`target/PROFILE`), once the
/// [`SERVICES`] and each of `more` (`qcg-lab`, `examples/pingpong`, ...) are found
/// there; panics naming the first missing one and the command that builds it.
pub fn bins(more: &[&str]) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().parent().unwrap().to_path_buf();
    for b in SERVICES.iter().chain(more) {
        assert!(
            dir.join(b).exists(),
            "{b} is missing from {}: run `cargo build --workspace --bins --examples` first",
            dir.display()
        );
    }
    dir
}

/// Waits for every child, killing all of them when `limit` passes first; whether
/// each succeeded (false for the killed).
pub fn wait_all(children: &mut [Child], limit: Duration) -> Vec<bool> {
    let start = Instant::now();
    let mut done: Vec<Option<bool>> = vec![None; children.len()];
    while done.iter().any(Option::is_none) {
        for (c, d) in children.iter_mut().zip(done.iter_mut()) {
            if d.is_none() {
                if let Some(st) = c.try_wait().unwrap() {
                    *d = Some(st.success());
                }
            }
        }
        if start.elapsed() > limit {
            for (c, d) in children.iter_mut().zip(done.iter_mut()) {
                if d.is_none() {
                    let _ = c.kill();
                    let _ = c.wait();
                    *d = Some(false);
                }
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    done.into_iter().map(|d| d == Some(true)).collect()
}

/// Two sites of two nodes each, open, 5 ms apart.
pub const TWO_SITES: &str = r#"
[[site]]
name = "east"
nodes = 2
nat = "none"
firewall = "open"

[[site]]
name = "west"
nodes = 2
nat = "none"
firewall = "open"

[[public]]
name = "broker"

[[wan]]
sites = ["east", "west"]
delay_ms = 5
bandwidth_mbit = 100
"#;

/// Installs Open MPI through `scripts/bench-deps.sh` when it is missing; panics
/// (never skips) when it cannot.
pub fn require_open_mpi() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/bench-deps.sh");
    let out = Command::new("bash").arg(&script).output().unwrap();
    assert!(
        out.status.success(),
        "{} failed (Open MPI is needed): {}",
        script.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Proves that the techniques simpler than `technique` are really blocked between
/// the first nodes of sites `a` (initiator) and `b` (target): a raw connect from a's
/// node to b's node (or to its NAT gateway) is dropped or refused, and for the
/// techniques past `reversed`, the other way round too. Panics naming the pair if a
/// connect got through.
pub fn prove_blocked(lab: &Lab, a: &str, b: &str, technique: &str) {
    let t = &lab.topo;
    if technique != "direct" {
        let _srv = lab.serve(&format!("{b}-1"), &[5000]);
        let to = at(lab.addr(&format!("{b}-1")), 5000);
        let i = t.site_index(b).unwrap();
        let target = match t.site(i).unwrap().nat {
            Nat::None => to,
            _ => at(topo::gateway_addr(i), 5000),
        };
        // Dropped (timeout), or refused by a NAT gateway that forwards nothing.
        let r = lab.connect(&format!("{a}-1"), target, None);
        assert!(
            matches!(r, Err(TIMEOUT | qcg_lab::probe::EXIT_REFUSED)),
            "{a} -> {b}: a direct connect got through ({r:?}), so {technique} is not needed"
        );
    }
    if ["traversed", "punched", "relayed"].contains(&technique) {
        let _srv = lab.serve(&format!("{a}-1"), &[5001]);
        assert_eq!(
            lab.connect(
                &format!("{b}-1"),
                at(lab.addr(&format!("{a}-1")), 5001),
                None
            ),
            Err(TIMEOUT),
            "{b} -> {a}: a connect back got through, so {technique} is not needed"
        );
    }
}

/// Runs `qcg-bench KIND --lab` on [`TWO_SITES`] with `args`, its CSV files into a
/// folder of their own (`--out`), without the variables `unset` (and a hung
/// `mpirun` killed after 60 s and run again: Open MPI's launch hangs now and then).
/// Asserts that it succeeded and that the lab it built (namespaces
/// `PREFIX<pid>-…`) is gone; returns what it printed, the output folder, and the
/// folder's guard.
pub fn bench_two_sites(
    kind: &str,
    ns_prefix: &str,
    args: &[&str],
    unset: &[&str],
) -> (String, PathBuf, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let topo = dir.path().join("two-sites.toml");
    std::fs::write(&topo, TWO_SITES).unwrap();
    let out_dir = dir.path().join("out");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_qcg-bench"));
    cmd.args([kind, "--lab"])
        .arg(&topo)
        .args(args)
        .arg(format!("--out={}", out_dir.display()))
        .env("QCG_MPIRUN_TIMEOUT", "60")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    for v in unset {
        cmd.env_remove(v);
    }
    let child = cmd.spawn().unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "qcg-bench {kind} --lab failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ns = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let prefix = format!("{ns_prefix}{}-", pid % 10_000);
    assert!(
        !String::from_utf8_lossy(&ns.stdout).contains(&prefix),
        "namespaces {prefix}* left behind"
    );
    (stdout, out_dir, dir)
}
