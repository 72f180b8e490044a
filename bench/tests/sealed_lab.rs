//! Links between sites are sealed on the wire, and a byte altered on the path fails
//! the job cleanly (issue 23, part 5). In a lab of two sites joined by a WAN, over the
//! real services, a job of two ranks (one a site) sends a known plaintext pattern from
//! rank 0 to rank 1 while tcpdump captures every TCP packet in alpha's gateway:
//! - with `QCG_ENCRYPT=none` the pattern is in the capture (the capture sees the
//!   program's data, so the next check can fail);
//! - under `wan` (the default) the link says it is sealed, as many bytes cross, and
//!   the pattern is nowhere in the capture;
//! - with the delay line's tamper hook (`QCG_LAB_TAMPER_AFTER`), one byte of the
//!   stream flipped on the WAN fails the link with an error naming the peer, no
//!   altered byte reaches the program, and both ranks end nonzero on their own.
//!
//! The job's program is this test binary run again in a lab node (`rank_process`).
//! Installs tcpdump when it is missing; fails (never skips) when it cannot run.

#![allow(clippy::unwrap_used)]

mod common;
use common::*;

use qcg_lab::grid::{self, LabGrid};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Two sites of one node, joined by a WAN.
const TWO_SITES: &str = r#"
[[site]]
name = "alpha"
nodes = 1
nat = "none"
firewall = "open"

[[site]]
name = "beta"
nodes = 1
nat = "none"
firewall = "open"

[[public]]
name = "broker"

[[wan]]
sites = ["alpha", "beta"]
delay_ms = 2
bandwidth_mbit = 100
"#;

/// What the program sends, over and over.
const MARKER: &[u8] = b"QCG-SEALLAB-PLAINTEXT-7f3a9c1e";
/// Set for a rank: the bytes rank 0 sends.
const RANK_VAR: &str = "QCG_SEALLAB_BYTES";
/// Bytes a message carries.
const CHUNK: usize = 256 * 1024;
/// The tamper hook flips the byte after this many of a stream: past what the
/// capture jobs send on one link, well within the tamper job's.
const TAMPER_AFTER: usize = 3 << 20;

fn block() -> Vec<u8> {
    MARKER.iter().copied().cycle().take(CHUNK).collect()
}

/// The job's program, when this binary runs as a rank (`RANK_VAR` set); as a test,
/// it does nothing.
#[test]
fn rank_process() {
    let Ok(bytes) = std::env::var(RANK_VAR) else {
        return;
    };
    let code = match rank_main(bytes.parse().unwrap()) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("seallab rank: error: {e}");
            3
        }
    };
    std::process::exit(code);
}

fn rank_main(bytes: usize) -> Result<(), Box<dyn std::error::Error>> {
    let comm = qcg::init()?;
    let data = block();
    let count = bytes.div_ceil(CHUNK);
    if comm.rank() == 0 {
        for _ in 0..count {
            comm.send(1, 0, &data)?;
        }
        // Asked while the link is up (it goes when rank 1 leaves).
        let sealed = comm.link_sealed(1);
        let answer = comm.recv(Some(1), Some(1))?;
        println!(
            "seallab: sealed={sealed:?} answer={}",
            String::from_utf8_lossy(&answer.data)
        );
    } else {
        for i in 0..count {
            let m = comm.recv(Some(0), Some(0))?;
            if m.data != data {
                // What the test must never see: altered bytes handed to the program.
                println!("seallab: ALTERED message {i} reached the program");
                return Err("altered data".into());
            }
        }
        comm.send(0, 1, b"intact")?;
        println!("seallab: sealed={:?} received {count}", comm.link_sealed(0));
    }
    Ok(())
}

/// What the test runs from `target/PROFILE` besides the services.
const BINS: &[&str] = &["qcg-lab"];

fn apt_install_tcpdump() -> std::process::Output {
    Command::new("apt-get")
        .args(["-o", "DPkg::Lock::Timeout=300", "install", "-y"])
        .args(["--no-install-recommends", "tcpdump"])
        .env("DEBIAN_FRONTEND", "noninteractive")
        .output()
        .unwrap()
}

/// tcpdump, installed (Debian's package) when it is missing.
fn tcpdump() -> &'static Path {
    let p = Path::new("/usr/bin/tcpdump");
    let missing = !p.exists() && !Path::new("/usr/sbin/tcpdump").exists();
    if missing && !apt_install_tcpdump().status.success() {
        let _ = Command::new("apt-get").arg("update").output();
        let o = apt_install_tcpdump();
        assert!(
            o.status.success(),
            "cannot install tcpdump: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    if p.exists() {
        p
    } else {
        Path::new("/usr/sbin/tcpdump")
    }
}

/// tcpdump writing every TCP packet of a lab host to a file; stopped by [`stop`].
struct Capture {
    child: Child,
    file: PathBuf,
}

fn capture(g: &LabGrid, host: &str, file: PathBuf) -> Capture {
    let mut child = g
        .command(host, tcpdump())
        .args(["-i", "any", "-s", "0", "-U", "-w"])
        .arg(&file)
        .arg("tcp")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // It says when it is listening.
    let mut said = String::new();
    let err = child.stderr.take().unwrap();
    let mut r = std::io::BufReader::new(err);
    loop {
        let mut line = String::new();
        if std::io::BufRead::read_line(&mut r, &mut line).unwrap() == 0 {
            panic!("tcpdump in {host} did not start: {said}");
        }
        said.push_str(&line);
        if line.contains("listening") {
            break;
        }
    }
    // Keep reading its stderr so that it never blocks on a full pipe.
    std::thread::spawn(move || std::io::copy(&mut r, &mut std::io::sink()));
    Capture { child, file }
}

impl Capture {
    /// Stops tcpdump (SIGINT: it writes out what it holds) and returns the file.
    fn stop(mut self) -> Vec<u8> {
        // `qcg-lab exec` enters the namespace and execs tcpdump: the pid is its own.
        let _ = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status();
        let start = Instant::now();
        while self.child.try_wait().unwrap().is_none() {
            if start.elapsed() > Duration::from_secs(10) {
                let _ = self.child.kill();
                let _ = self.child.wait();
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        std::fs::read(&self.file).unwrap()
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One run of the job: each rank's (exit success, stdout, stderr), or `None` for a
/// rank still running after `limit` (then killed).
fn job(
    g: &LabGrid,
    name: &str,
    bytes: usize,
    encrypt: Option<&str>,
) -> Vec<Option<(bool, String, String)>> {
    let exe = std::env::current_exe().unwrap();
    let nodes = ["alpha-1", "beta-1"];
    let mut ranks: Vec<Child> = (0..2u32)
        .map(|r| {
            let mut c = g.rank(nodes[r as usize], name, r, 2, &exe);
            c.args(["--exact", "rank_process", "--nocapture", "--test-threads=1"])
                .env(RANK_VAR, bytes.to_string())
                .env("QCG_LOG", "warn,qcg::seal=debug")
                .env("NO_COLOR", "1")
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            if let Some(e) = encrypt {
                c.env("QCG_ENCRYPT", e);
            }
            c.spawn().unwrap()
        })
        .collect();
    // Drain the pipes as the ranks run.
    let readers: Vec<_> = ranks
        .iter_mut()
        .map(|c| {
            let (mut o, mut e) = (c.stdout.take().unwrap(), c.stderr.take().unwrap());
            std::thread::spawn(move || {
                let (mut so, mut se) = (String::new(), String::new());
                let t = std::thread::spawn(move || {
                    let _ = std::io::Read::read_to_string(&mut e, &mut se);
                    se
                });
                let _ = std::io::Read::read_to_string(&mut o, &mut so);
                (so, t.join().unwrap_or_default())
            })
        })
        .collect();
    // A guard against a hang, not a measure: the job takes a few seconds.
    let limit = Duration::from_secs(120);
    let start = Instant::now();
    let mut status: Vec<Option<bool>> = vec![None; 2];
    while status.iter().any(Option::is_none) && start.elapsed() < limit {
        for (c, s) in ranks.iter_mut().zip(status.iter_mut()) {
            if s.is_none() {
                *s = c.try_wait().unwrap().map(|st| st.success());
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    for c in &mut ranks {
        let _ = c.kill();
        let _ = c.wait();
    }
    status
        .into_iter()
        .zip(readers)
        .map(|(s, r)| {
            let (out, err) = r.join().unwrap();
            s.map(|ok| (ok, out, err))
        })
        .collect()
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn wan_links_hide_the_data_and_a_flipped_byte_fails_the_job() {
    if std::env::var(RANK_VAR).is_ok() {
        return;
    }
    let bins = bins(BINS);
    tcpdump();
    let lab = Lab::up_with_env(
        "sl",
        TWO_SITES,
        &[(qcg_lab::delay::TAMPER_VAR, &TAMPER_AFTER.to_string())],
    );
    let t = lab.topo.clone();
    let g = LabGrid::start(&lab.prefix, &t, &bins, &grid::as_built).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let bytes = 2 << 20;

    // 1. Plaintext: the capture sees the program's data.
    let cap = capture(&g, "alpha-gw", dir.path().join("none.pcap"));
    let ends = job(&g, "sl-none", bytes, Some("none"));
    let pcap = cap.stop();
    for (r, e) in ends.iter().enumerate() {
        let (ok, out, err) = e.as_ref().expect("the plaintext job hung");
        assert!(ok, "plaintext job, rank {r} failed: {out}{err}");
        assert!(out.contains("sealed=Some(false)"), "rank {r}: {out}");
    }
    assert!(
        pcap.len() > bytes,
        "the capture holds {} bytes: it did not see the job's {bytes}",
        pcap.len()
    );
    assert!(
        contains(&pcap, MARKER),
        "under QCG_ENCRYPT=none the pattern must be in the capture, or it proves nothing"
    );

    // 2. Sealed (`wan`, the default between sites): as many bytes, no pattern.
    let cap = capture(&g, "alpha-gw", dir.path().join("wan.pcap"));
    let ends = job(&g, "sl-wan", bytes, None);
    let pcap = cap.stop();
    for (r, e) in ends.iter().enumerate() {
        let (ok, out, err) = e.as_ref().expect("the sealed job hung");
        assert!(ok, "sealed job, rank {r} failed: {out}{err}");
        assert!(out.contains("sealed=Some(true)"), "rank {r}: {out}");
    }
    assert!(
        pcap.len() > bytes,
        "the capture holds {} bytes: it did not see the job's {bytes}",
        pcap.len()
    );
    assert!(
        !contains(&pcap, MARKER),
        "the plaintext pattern crossed the WAN under `wan`"
    );
    // Not even a fragment of it (a third of the marker).
    assert!(!contains(&pcap, &MARKER[..10]) && !contains(&pcap, &MARKER[10..20]));
    // The receiver opened the records of its large messages in place.
    let err1 = &ends[1].as_ref().unwrap().2;
    let in_place: u64 = err1
        .lines()
        .filter(|l| l.contains("sealed link closed"))
        .filter_map(|l| l.split("opened_in_place").nth(1))
        .filter_map(|v| {
            // Past the `=` and the log's colour codes, the number.
            let v = &v[v.find('=')? + 1..];
            let v = v.split_once('m').map_or(v, |(_, r)| r);
            let digits: String = v.chars().take_while(char::is_ascii_digit).collect();
            digits.parse::<u64>().ok()
        })
        .sum();
    assert!(
        in_place >= (bytes / 65536) as u64 / 2,
        "rank 1 opened {in_place} records in place: {err1}"
    );
    eprintln!("sealed job: rank 1 opened {in_place} records in place");

    // 3. A byte flipped on the path (the delay line's hook, past TAMPER_AFTER bytes
    // of the stream): the link fails naming the peer, the job ends nonzero.
    let ends = job(&g, "sl-tamper", 4 * TAMPER_AFTER, None);
    let log = std::fs::read_to_string(qcg_lab::state::dir(&lab.prefix).join("delay-line.log"))
        .unwrap_or_default();
    assert!(
        log.contains("tampered: flipped byte"),
        "the delay line did not flip a byte: {log}"
    );
    let (ok1, out1, err1) = ends[1]
        .as_ref()
        .expect("rank 1 hung after the flipped byte");
    assert!(!ok1, "rank 1 must fail: {out1}{err1}");
    assert!(
        !out1.contains("ALTERED"),
        "altered bytes reached the program: {out1}"
    );
    assert!(
        err1.contains("failed authentication") && err1.contains("rank 0"),
        "rank 1 must say the record from rank 0 failed authentication: {err1}"
    );
    let (ok0, out0, err0) = ends[0]
        .as_ref()
        .expect("rank 0 hung after the flipped byte");
    assert!(!ok0, "rank 0 must fail (its peer failed): {out0}{err0}");
    assert!(err0.contains("seallab rank: error"), "rank 0: {err0}");
    eprintln!("rank 1 said: {}", err1.trim());
    eprintln!("rank 0 said: {}", err0.trim());
}
