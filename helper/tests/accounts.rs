//! Job processes run as the local account their submitter maps to: real processes
//! started through the helper's launcher, their uid, gid and groups read from
//! `/proc`. Refusals (no mapping, root, a folder or program out of reach) name the
//! cause. Switching accounts needs root: as another user these tests only check the
//! refusals that need no switch.

#![allow(clippy::unwrap_used)]

use qcg_helper::accounts::{lookup, Accounts};
use qcg_helper::procs::Procs;
use qcg_proto::quic::{self, Upstream};
use qcg_proto::tls::{Ca, Role};
use qcg_proto::{LaunchSpec, Response};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn upstream() -> Arc<Upstream> {
    let ca = Ca::generate().unwrap();
    let ep = quic::client_endpoint(&ca.identity(Role::Helper, "n").unwrap()).unwrap();
    // Nothing listens there: output and exit reports are lost, which is fine here.
    Arc::new(Upstream::new(
        ep,
        "127.0.0.1:9".parse().unwrap(),
        Role::Frontal,
        None,
        None,
    ))
}

fn spec(owner: Option<&str>, wd: &Path, exe: &str, args: &[&str]) -> LaunchSpec {
    LaunchSpec {
        job: "job-acct".into(),
        rank: 0,
        node: "n".into(),
        executable: exe.into(),
        args: args.iter().map(|a| a.to_string()).collect(),
        env: vec![],
        working_directory: Some(wd.display().to_string()),
        owner: owner.map(String::from),
    }
}

fn accounts() -> Accounts {
    let mut a = Accounts {
        default: None,
        ..Accounts::default()
    };
    a.map.insert("alice".into(), "nobody".into());
    a.map.insert("rooty".into(), "root".into());
    a
}

fn is_root() -> bool {
    rustix::process::getuid().is_root()
}

/// A folder anyone may enter and write to.
fn open_dir() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    d
}

fn refusal(r: Response) -> String {
    match r {
        Response::Error(e) => e.message,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn a_mapped_submitter_runs_as_its_account_with_no_extra_groups() {
    if !is_root() {
        eprintln!("skipped: switching accounts needs root");
        return;
    }
    let procs = Arc::new(Procs::new(accounts()));
    let d = open_dir();
    let out = d.path().join("ids");
    let script = format!(
        "id -u > {o}.tmp; id -g >> {o}.tmp; grep '^Groups:' /proc/self/status >> {o}.tmp; echo $HOME >> {o}.tmp; mv {o}.tmp {o}",
        o = out.display()
    );
    let r = procs.launch(
        &spec(Some("alice"), d.path(), "/bin/sh", &["-c", &script]),
        "n",
        Path::new("/nonexistent.sock"),
        upstream(),
    );
    assert_eq!(r, Response::Ok);
    let start = Instant::now();
    while !out.exists() {
        assert!(start.elapsed() < Duration::from_secs(30), "no output");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let nobody = lookup("nobody").unwrap();
    let text = std::fs::read_to_string(&out).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], nobody.uid.to_string(), "{text}");
    assert_eq!(lines[1], nobody.gid.to_string(), "{text}");
    assert_eq!(lines[2].trim_end(), "Groups:", "{text}");
    assert_eq!(lines[3], nobody.home.display().to_string(), "{text}");
}

#[tokio::test]
async fn refusals_name_the_submitter_the_account_or_the_path() {
    let procs = Arc::new(Procs::new(accounts()));
    let d = open_dir();
    let launch = |s: LaunchSpec| procs.launch(&s, "n", Path::new("/x.sock"), upstream());
    let e = refusal(launch(spec(Some("mallory"), d.path(), "/bin/true", &[])));
    assert!(
        e.contains("submitter `mallory` has no local account"),
        "{e}"
    );
    let e = refusal(launch(spec(Some("rooty"), d.path(), "/bin/true", &[])));
    assert!(e.contains("would run as root"), "{e}");
    assert!(e.contains("allow_root"), "{e}");
    if !is_root() {
        return;
    }
    // A folder nobody may not enter, and a program nobody may not run.
    let closed = tempfile::tempdir().unwrap();
    std::fs::set_permissions(closed.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let e = refusal(launch(spec(Some("alice"), closed.path(), "/bin/true", &[])));
    assert!(
        e.contains(&format!(
            "account `nobody` cannot enter the folder {}",
            closed.path().display()
        )),
        "{e}"
    );
    let prog = d.path().join("prog.sh");
    std::fs::write(&prog, "#!/bin/sh\ntrue\n").unwrap();
    std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o700)).unwrap();
    let e = refusal(launch(spec(Some("alice"), d.path(), "./prog.sh", &[])));
    assert!(e.contains("account `nobody` cannot run"), "{e}");
    assert!(e.contains("prog.sh"), "{e}");
    assert_eq!(procs.len(), 0);
}
