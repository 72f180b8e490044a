//! Online backup of the broker's database (issue 22, part 5): a running broker with
//! jobs in it (one finished, one running) is backed up through the HTTPS API by an
//! admin while it keeps taking jobs; a new broker started on the copy shows the jobs
//! of the copy and not the one submitted after it. A client certificate is refused.
//!
//! Real binaries on loopback; needs the workspace's binaries built first.

#![allow(clippy::unwrap_used)]

mod common;
use common::*;
use qcg_grid::services::{tls_fields, Cluster, Node, OtherUser, ServiceGrid};

use std::path::Path;
use std::time::{Duration, Instant};

fn broker_toml(database: &str) -> String {
    format!(
        "listen = \"127.0.0.1:0\"\nhttps_listen = \"127.0.0.1:0\"\ndatabase = \"{database}\"\n{}",
        tls_fields("broker")
    )
}

/// A broker keeping its jobs in `state/broker.redb`, cluster `alpha` with node
/// `a1`, client `alice` and admin `ops`; once the broker's topology holds `a1`.
fn grid() -> (ServiceGrid, String) {
    let g = ServiceGrid::builder()
        .no_http()
        .broker_config("database = \"state/broker.redb\"")
        .cluster(Cluster::new("alpha").node(Node::new("a1")))
        .cert("client", "alice")
        .cert("admin", "ops")
        .start()
        .unwrap();
    let https = g.https().unwrap().to_string();
    // Jobs are placed on the nodes the frontal reported.
    until("node a1 in the broker's topology", || {
        String::from_utf8_lossy(&call(g.dir(), &https, "alice", "GET", "/v1/topology", "").body)
            .contains("\"a1\"")
    });
    (g, https)
}

/// Stops the grid's services, then starts a broker on the database `database`;
/// its HTTPS address.
fn restored(g: &mut ServiceGrid, database: &str) -> String {
    for s in ["helper-a1", "frontal-alpha", "broker"] {
        g.kill(s).unwrap();
    }
    g.start("restored", "qcg-broker", &broker_toml(database))
        .unwrap();
    g.line("restored", "qcg-broker: HTTPS API on https://")
        .unwrap()
}

/// One request to the HTTPS job API at `https` as the holder of `who`'s certificate.
fn call(
    dir: &Path,
    https: &str,
    who: &str,
    method: &str,
    path: &str,
    body: &str,
) -> qcg_grid::client::Answer {
    let ca = dir.join("ca");
    let id = qcg_proto::tls::Identity::load(
        &ca.join(format!("{who}.pem")),
        &ca.join(format!("{who}.key")),
        &ca.join("ca.pem"),
    )
    .unwrap();
    let client = qcg_grid::client::Client::new(&format!("https://{https}"), &id).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(client.request(method, path, body.as_bytes().to_vec()))
        .unwrap()
}

fn submit(dir: &Path, https: &str, script: &str) -> String {
    let xml = format!(
        r#"<grmsJob appId="b"><task taskId="t"><resourcesDescription><topology>
<group groupId="g"><processes><processesCount><value>1</value></processesCount></processes></group>
</topology></resourcesDescription><execution type="x"><executable>/bin/sh</executable>
<arguments><value>-c</value><value>{script}</value></arguments></execution></task></grmsJob>"#
    );
    let a = call(dir, https, "alice", "POST", "/v1/jobs?workdir=/tmp", &xml);
    assert_eq!(a.status, 201, "{}", String::from_utf8_lossy(&a.body));
    a.json()["id"].as_str().unwrap().to_string()
}

fn state(dir: &Path, https: &str, id: &str) -> String {
    let a = call(dir, https, "alice", "GET", &format!("/v1/jobs/{id}"), "");
    assert_eq!(a.status, 200, "{}", String::from_utf8_lossy(&a.body));
    a.json()["status"]["state"].as_str().unwrap().to_string()
}

fn until(what: &str, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "waited 60 s for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_running_broker_is_backed_up_and_a_new_one_restored_from_the_copy_sees_its_jobs() {
    let (mut g, https) = grid();
    let d = g.dir().to_path_buf();
    let d = d.as_path();

    let done = submit(d, &https, "true");
    until("the first job to succeed", || {
        state(d, &https, &done) == "succeeded"
    });
    let running = submit(d, &https, "sleep 600");
    until("the second job to run", || {
        state(d, &https, &running) == "running"
    });

    // A client may not take the database (it holds every job's secret).
    let refused = call(d, &https, "alice", "GET", "/v1/admin/backup", "");
    assert_eq!(refused.status, 403);
    assert!(
        refused.error_message().contains("admin"),
        "{}",
        refused.error_message()
    );

    let copy = call(d, &https, "ops", "GET", "/v1/admin/backup", "");
    assert_eq!(copy.status, 200, "{}", copy.error_message());
    std::fs::write(d.join("restored.redb"), &copy.body).unwrap();
    // The broker goes on while and after it is copied; the next job is not in the copy.
    let after = submit(d, &https, "true");
    until("the job after the backup to succeed", || {
        state(d, &https, &after) == "succeeded"
    });
    assert!(
        !std::fs::read_dir(d.join("state")).unwrap().any(|e| e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .contains("backup")),
        "the temporary copy is removed"
    );

    // A new broker (the old one and its grid stopped) on the copy.
    let https = restored(&mut g, "restored.redb");
    let list = call(d, &https, "ops", "GET", "/v1/jobs", "");
    assert_eq!(list.status, 200);
    let jobs = list.json();
    let ids: Vec<&str> = jobs
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&done.as_str()), "{ids:?}");
    assert!(ids.contains(&running.as_str()), "{ids:?}");
    assert!(
        !ids.contains(&after.as_str()),
        "{ids:?}: taken after the copy"
    );
    assert_eq!(state(d, &https, &done), "succeeded");
}

/// `qcg backup OUT` (the command around `GET /v1/admin/backup`): as an admin it
/// writes a copy only its owner may read, from which a new broker shows the job;
/// as a client it fails, saying an admin certificate is needed, and writes nothing.
#[test]
fn qcg_backup_writes_a_private_copy_a_broker_restores_from() {
    use std::os::unix::fs::PermissionsExt;
    let (mut g, https) = grid();
    let d = g.dir().to_path_buf();
    let d = d.as_path();
    let done = submit(d, &https, "true");
    until("the job to succeed", || {
        state(d, &https, &done) == "succeeded"
    });

    let backup_as = |who: &str, out: &Path| {
        std::process::Command::new(bin("qcg"))
            .arg("backup")
            .arg(out)
            .args(g.qcg_args(who))
            .output()
            .unwrap()
    };
    let refused = d.join("refused.redb");
    let o = backup_as("alice", &refused);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("403") && err.contains("admin"), "{err}");
    assert!(!refused.exists(), "a refused backup leaves no file");
    assert!(
        !d.join(".refused.redb.partial").exists(),
        "nor a partial one"
    );

    let copy = d.join("copy.redb");
    let o = backup_as("ops", &copy);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let meta = std::fs::metadata(&copy).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(said.contains(&format!("{} bytes", meta.len())), "{said}");

    let https = restored(&mut g, "copy.redb");
    assert_eq!(state(d, &https, &done), "succeeded");
}

/// `qcg backup` to where it cannot write: a folder that does not exist, a folder,
/// and a read-only folder (as `nobody` when the test runs as root, which no mode
/// bit stops). Each fails at once with exit status 1, naming the path and why, and
/// leaves nothing behind: no copy, no partial file.
#[test]
fn qcg_backup_to_a_path_it_cannot_write_fails_naming_it_and_leaves_nothing() {
    use std::os::unix::fs::PermissionsExt;
    let (g, _https) = grid();
    let d = g.dir();
    let backup = |cmd: &mut std::process::Command, out: &Path, args: &[String]| {
        let o = cmd.arg("backup").arg(out).args(args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert_eq!(o.status.code(), Some(1), "{}: {err}", out.display());
        err
    };
    let ops = g.qcg_args("ops");

    let missing = d.join("no-such-folder").join("copy.redb");
    let err = backup(&mut std::process::Command::new(bin("qcg")), &missing, &ops);
    assert!(err.contains(&missing.display().to_string()), "{err}");
    assert!(err.contains("does not exist"), "{err}");
    assert!(!d.join("no-such-folder").exists());

    let err = backup(&mut std::process::Command::new(bin("qcg")), d, &ops);
    assert!(err.contains("it is a folder"), "{err}");

    // A read-only folder of a user who is not root, holding an admin's certificate.
    let root = rustix::process::geteuid().is_root();
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let ro = h.join("ro");
    std::fs::create_dir(&ro).unwrap();
    for f in ["ops.pem", "ops.key", "ca.pem"] {
        std::fs::copy(g.ca_dir().join(f), h.join(f)).unwrap();
    }
    let user = OtherUser::NOBODY;
    if root {
        for p in [
            h.to_path_buf(),
            ro.clone(),
            h.join("ops.pem"),
            h.join("ops.key"),
            h.join("ca.pem"),
        ] {
            std::os::unix::fs::chown(&p, Some(user.uid), Some(user.gid)).unwrap();
        }
    }
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o555)).unwrap();
    let args: Vec<String> = vec![
        "--broker".into(),
        g.url(),
        "--cert".into(),
        h.join("ops.pem").display().to_string(),
        "--key".into(),
        h.join("ops.key").display().to_string(),
        "--ca".into(),
        h.join("ca.pem").display().to_string(),
    ];
    let out = ro.join("copy.redb");
    let mut cmd = if root {
        user.command(bin("qcg"))
    } else {
        std::process::Command::new(bin("qcg"))
    };
    let err = backup(&mut cmd, &out, &args);
    assert!(err.contains(&out.display().to_string()), "{err}");
    assert!(err.contains("is not writable"), "{err}");
    assert_eq!(std::fs::read_dir(&ro).unwrap().count(), 0, "{err}");
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o755)).unwrap();
}
