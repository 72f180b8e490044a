//! The JobProfiles shipped in `jobprofile/examples-xml/`, submitted as they are to the
//! README's grid: the services started from the config files in `configs/` (ports
//! moved to free ones, certificates issued as the README says), the examples'
//! folder on the helpers' PATH as the README puts `target/release/examples` there.
//! Also `qcg submit --detach`, `qcg jobs`, `qcg output [--follow]` and `<stdout>`.
//!
//! Needs the workspace's binaries and examples built first
//! (`cargo build --workspace --bins --examples`), as the test command does.

#![allow(clippy::unwrap_used)]

mod common;
use common::*;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

struct ReadmeGrid {
    dir: tempfile::TempDir,
    _services: Services,
    url: String,
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `configs/NAME` with each `from` replaced by `to` (each must be there), and its
/// metrics listener, if any, on a free port: the tests of this file run grids at
/// once, and the configs' fixed metrics ports (7790-7794) would collide.
fn config(dir: &Path, name: &str, edits: &[(&str, &str)]) -> PathBuf {
    let mut text = std::fs::read_to_string(repo().join("configs").join(name)).unwrap();
    for (from, to) in edits {
        assert!(text.contains(from), "configs/{name} has no `{from}`");
        text = text.replace(from, to);
    }
    let text: String = text
        .lines()
        .map(|l| {
            if l.starts_with("metrics_listen = ") {
                "metrics_listen = \"127.0.0.1:0\"".to_string()
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    write(dir, name, &text)
}

/// The README's grid: broker, proxy, frontals orsay and rennes, one helper each.
fn readme_grid() -> ReadmeGrid {
    readme_grid_with(&[], &[])
}

/// The README's grid with each helper started under `wrap` (a command and its
/// arguments, before the helper's) and its config edited by `helper_edits`.
fn readme_grid_with(wrap: &[String], helper_edits: &[(&str, &str)]) -> ReadmeGrid {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Other accounts' jobs reach the sockets in it (private keys stay 0600).
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    let certs = d.join("certs");
    assert!(qcg(&["ca", "init", "--dir", certs.to_str().unwrap()])
        .status
        .success());
    for (role, name) in [
        ("broker", "broker"),
        ("frontal", "orsay"),
        ("frontal", "rennes"),
        ("helper", "orsay-1"),
        ("helper", "rennes-1"),
        ("proxy", "proxy-1"),
        ("client", "alice"),
    ] {
        issue(&certs, role, name);
    }
    let mut services = Services(Vec::new());
    let free = "127.0.0.1:0";
    let cfg = config(
        d,
        "broker.toml",
        &[
            ("127.0.0.1:7700", free),
            ("127.0.0.1:7780", free),
            ("127.0.0.1:7781", free),
        ],
    );
    let lines = start(&mut services, "qcg-broker", &cfg);
    let broker = wait_for(&lines, "qcg-broker: QUIC on");
    let http: std::net::SocketAddr = wait_for(&lines, "qcg-broker: HTTP API on http://")
        .parse()
        .unwrap();
    let url = format!(
        "https://{}",
        wait_for(&lines, "qcg-broker: HTTPS API on https://")
    );
    let cfg = config(
        d,
        "proxy.toml",
        &[("127.0.0.1:7800", free), ("127.0.0.1:7700", &broker)],
    );
    start(&mut services, "qcg-proxy", &cfg);
    let examples = bin("examples/master_worker")
        .parent()
        .unwrap()
        .to_path_buf();
    let path = format!(
        "{}:{}",
        examples.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for (cluster, port, node) in [("orsay", "7701", "orsay-1"), ("rennes", "7702", "rennes-1")] {
        let cfg = config(
            d,
            &format!("frontal-{cluster}.toml"),
            &[
                ("127.0.0.1:7700", &broker),
                (&format!("127.0.0.1:{port}"), free),
            ],
        );
        let lines = start(&mut services, "qcg-frontal", &cfg);
        let at = wait_for(
            &lines,
            &format!("qcg-frontal: cluster {cluster} serving helpers on"),
        );
        let sock = d.join(format!("{node}.sock"));
        let frontal_at = format!("127.0.0.1:{port}");
        let old_sock = format!("/tmp/qcg-{node}.sock");
        let mut edits = vec![
            (frontal_at.as_str(), at.as_str()),
            (old_sock.as_str(), sock.to_str().unwrap()),
        ];
        edits.extend_from_slice(helper_edits);
        let cfg = config(d, &format!("helper-{node}.toml"), &edits);
        let helper = bin("qcg-helper");
        let mut c = match wrap.split_first() {
            Some((first, rest)) => {
                let mut c = Command::new(first);
                c.args(rest).arg(&helper);
                c
            }
            None => Command::new(&helper),
        };
        c.arg("--config")
            .arg(&cfg)
            .env("RUST_LOG", "warn")
            .env("PATH", &path)
            .stdout(std::process::Stdio::piped());
        let mut child = c.spawn().unwrap();
        let out = child.stdout.take().unwrap();
        services.0.push(child);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for l in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                let _ = tx.send(l);
            }
        });
        wait_for(&rx, &format!("qcg-helper: node {node} serving"));
    }
    // Both clusters with their nodes, and the link between them measured.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let t: serde_json::Value = serde_json::from_str(&http_get(http, "/v1/topology")).unwrap();
        let clusters = t["clusters"].as_array().map_or(0, |c| c.len());
        let links = t["links"].as_array().map_or(0, |l| l.len());
        if clusters == 2 && links == 1 {
            break;
        }
        assert!(Instant::now() < deadline, "topology incomplete: {t}");
        std::thread::sleep(Duration::from_millis(100));
    }
    ReadmeGrid {
        dir,
        _services: services,
        url,
    }
}

impl ReadmeGrid {
    /// `qcg ARGS` as alice, with the README's QCG_* variables, in the grid's folder.
    fn qcg(&self, args: &[&str]) -> Output {
        let certs = self.dir.path().join("certs");
        Command::new(bin("qcg"))
            .args(args)
            .current_dir(self.dir.path())
            .env("QCG_BROKER", &self.url)
            .env("QCG_CA", certs.join("ca.pem"))
            .env("QCG_CERT", certs.join("alice.pem"))
            .env("QCG_KEY", certs.join("alice.key"))
            .output()
            .unwrap()
    }

    fn submit(&self, profile: &Path, extra: &[&str]) -> Output {
        let mut args = vec!["submit", profile.to_str().unwrap()];
        args.extend(extra);
        self.qcg(&args)
    }
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn every_shipped_profile_runs_or_is_refused_with_the_reason() {
    let g = readme_grid();
    let dir = repo().join("jobprofile/examples-xml");
    let mut seen = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        if !name.ends_with(".xml") {
            continue;
        }
        seen.push(name.clone());
        let o = g.submit(&path, &[]);
        let (out, err) = text(&o);
        match name.as_str() {
            "master-worker.xml" => {
                assert_eq!(o.status.code(), Some(0), "{name}\n{out}\n{err}");
                assert!(out.contains("[0] result: 48 chunks"), "{out}");
                assert!(out.contains(": correct"), "{out}");
            }
            "ring.xml" => {
                // <stdout> and <stderr>: the lines went to the files, not here.
                assert_eq!(o.status.code(), Some(0), "{name}\n{out}\n{err}");
                assert_eq!(out, "", "{name}: output not in ring.out");
                let file = std::fs::read_to_string(g.dir.path().join("ring.out")).unwrap();
                assert!(
                    file.contains("round 2: token came back as 4 after visiting 4 ranks"),
                    "{file}"
                );
                assert!(g.dir.path().join("ring.err").exists());
            }
            // Schema examples for bigger grids than the README's (32 processes on
            // 4 GiB hosts; Ray2mesh's and a coupled model's shapes): refused at
            // once, nothing reserved, the scheduler's reason said.
            _ => {
                assert_eq!(o.status.code(), Some(2), "{name}\n{out}\n{err}");
                assert!(err.starts_with("qcg: "), "{name}: {err}");
            }
        }
    }
    seen.sort();
    assert_eq!(
        seen,
        [
            "four-groups.xml",
            "master-worker.xml",
            "ray2mesh.xml",
            "ring.xml",
            "single-group.xml"
        ]
    );
}

#[test]
fn detached_jobs_are_listed_followed_and_cancelled() {
    let g = readme_grid();
    let xml = write(
        g.dir.path(),
        "sleepy.xml",
        r#"<grmsJob appId="sleepy"><task taskId="t"><resourcesDescription><topology>
  <group groupId="g"><processes><processesCount><value>2</value></processesCount></processes></group>
</topology></resourcesDescription>
<execution type="qcg"><executable>/bin/sh</executable>
  <arguments><value>-c</value><value>echo hello from $QCG_RANK; sleep 600</value></arguments>
</execution></task></grmsJob>"#,
    );
    let o = g.submit(&xml, &["--detach"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    let id = out.trim().to_string();
    assert!(id.starts_with("job-"), "{out}");
    // Listed as running, with squeue's columns.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let o = g.qcg(&["jobs"]);
        let (out, _) = text(&o);
        assert!(out.starts_with("JOBID "), "{out}");
        let line = out.lines().find(|l| l.starts_with(&id)).unwrap();
        let cols: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(&cols[1..3], ["sleepy", "alice"], "{line}");
        if cols[3] == "R" && qcg_output(&g, &id).matches("hello from").count() == 2 {
            // TIME, as squeue's M:SS while under an hour; then RANKS.
            let (m, sec) = cols[4].split_once(':').unwrap_or_else(|| panic!("{line}"));
            assert!(m.parse::<u32>().is_ok() && sec.len() == 2, "{line}");
            assert!(sec.parse::<u32>().is_ok_and(|s| s < 60), "{line}");
            assert_eq!(cols[5], "2", "{line}");
            break;
        }
        assert!(Instant::now() < deadline, "{out}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let out = qcg_output(&g, &id);
    assert!(
        out.contains("[0] hello from 0") && out.contains("[1] hello from 1"),
        "{out}"
    );
    // A follower started now sees the same lines, then the end the cancel brings.
    let certs = g.dir.path().join("certs");
    let follower = Command::new(bin("qcg"))
        .args(["output", &id, "--follow"])
        .env("QCG_BROKER", &g.url)
        .env("QCG_CA", certs.join("ca.pem"))
        .env("QCG_CERT", certs.join("alice.pem"))
        .env("QCG_KEY", certs.join("alice.key"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let o = g.qcg(&["cancel", &id]);
    assert!(o.status.success(), "{:?}", text(&o));
    let o = follower.wait_with_output().unwrap();
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(3), "{out}\n{err}");
    assert!(out.contains("[0] hello from 0"), "{out}");
    assert!(err.contains("was cancelled"), "{err}");
    let o = g.qcg(&["jobs"]);
    let (out, _) = text(&o);
    let line = out.lines().find(|l| l.starts_with(&id)).unwrap();
    assert_eq!(line.split_whitespace().nth(3), Some("CA"), "{line}");
    // An unknown job is named.
    let o = g.qcg(&["output", "job-nosuch"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).1.contains("no job `job-nosuch`"), "{:?}", text(&o));
}

fn qcg_output(g: &ReadmeGrid, id: &str) -> String {
    let o = g.qcg(&["output", id]);
    assert!(o.status.success(), "{:?}", text(&o));
    text(&o).0
}

/// The capabilities `deploy/systemd/qcg-helper.service` leaves the helper, as
/// `setpriv` names them (`+setuid,+setgid,...`).
fn unit_capabilities() -> String {
    let unit = std::fs::read_to_string(repo().join("deploy/systemd/qcg-helper.service")).unwrap();
    let line = unit
        .lines()
        .find_map(|l| l.strip_prefix("CapabilityBoundingSet="))
        .expect("the helper's unit names its capabilities");
    line.split_whitespace()
        .map(|c| format!("+{}", c.trim_start_matches("CAP_").to_lowercase()))
        .collect::<Vec<_>>()
        .join(",")
}

/// Helpers limited to `caps` (and nothing inheritable), mapping every submitter
/// to `nobody`, run ring.xml: its output, or the failure.
fn ring_as_nobody(caps: &str) -> (Output, String) {
    let wrap: Vec<String> = [
        "setpriv",
        &format!("--bounding-set=-all,{caps}"),
        "--inh-caps=-all",
        "--",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let g = readme_grid_with(
        &wrap,
        &[
            ("default = \"root\"", "default = \"nobody\""),
            ("allow_root = true", "allow_root = false"),
            // Jobs reach the helper's socket through the account's own group.
            ("# socket_group = \"qcg\"", "socket_group = \"nogroup\""),
        ],
    );
    let o = g.submit(&repo().join("jobprofile/examples-xml/ring.xml"), &[]);
    let read = |f: &str| std::fs::read_to_string(g.dir.path().join(f)).unwrap_or_default();
    (o, format!("{}{}", read("ring.out"), read("ring.err")))
}

/// The systemd unit's capability set is enough for a helper to run a job as the
/// account its config maps the submitter to, and CAP_SETUID is needed for it (the
/// same job fails without it): the unit is neither short of a capability nor is
/// the test blind to one.
#[test]
fn a_helper_with_its_units_capabilities_runs_a_job_as_its_account() {
    let caps = unit_capabilities();
    assert!(caps.contains("+setuid"), "{caps}");
    let (o, out) = ring_as_nobody(&caps);
    let (so, se) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{so}\n{se}\n{out}");
    assert!(
        out.contains("round 2: token came back as 4 after visiting 4 ranks"),
        "{out}"
    );
    let without: Vec<&str> = caps.split(',').filter(|c| *c != "+setuid").collect();
    let (o, _) = ring_as_nobody(&without.join(","));
    let (so, se) = text(&o);
    assert_ne!(
        o.status.code(),
        Some(0),
        "a job ran as nobody without CAP_SETUID"
    );
    assert!(se.contains("Operation not permitted"), "{so}\n{se}");
}

/// Every unit in deploy/systemd passes `systemd-analyze verify` (with its
/// binaries where this build put them); their exposure, as systemd rates it, is
/// printed.
/// `systemd-analyze`, installed through apt-get when missing (CI runs as root).
fn systemd_analyze() {
    let have = Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_ok();
    if !have {
        let ok = Command::new("sh")
            .args([
                "-c",
                "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq systemd >/dev/null",
            ])
            .status()
            .is_ok_and(|s| s.success());
        assert!(
            ok,
            "systemd-analyze is missing and apt-get install systemd failed"
        );
    }
}

#[test]
fn the_systemd_units_verify() {
    systemd_analyze();
    let units = repo().join("deploy/systemd");
    let dir = tempfile::tempdir().unwrap();
    let mut names = Vec::new();
    for entry in std::fs::read_dir(&units).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        if !name.ends_with(".service") {
            continue;
        }
        let service = name.trim_end_matches(".service");
        let unit = std::fs::read_to_string(&path).unwrap().replace(
            &format!("/usr/local/bin/{service}"),
            bin(service).to_str().unwrap(),
        );
        let copy = write(dir.path(), &name, &unit);
        let o = Command::new("systemd-analyze")
            .args(["verify", "--man=no"])
            .arg(&copy)
            .output()
            .expect("systemd-analyze (Debian: apt-get install systemd)");
        let (out, err) = text(&o);
        assert!(
            o.status.success() && err.trim().is_empty(),
            "{name}:\n{out}\n{err}"
        );
        let sec = Command::new("systemd-analyze")
            .args(["security", "--offline=yes", "--no-pager"])
            .arg(&copy)
            .output()
            .unwrap();
        let (out, _) = text(&sec);
        let score = out.lines().last().unwrap_or_default().to_string();
        println!("{name}: {score}");
        names.push(name);
    }
    names.sort();
    assert_eq!(
        names,
        [
            "qcg-broker.service",
            "qcg-frontal.service",
            "qcg-helper.service",
            "qcg-proxy.service"
        ]
    );
}
