//! The helper's socket against another local user: a real broker, frontal and
//! helper (processes, from config files), and requests sent by a real process running
//! as `nobody`. Needs root (the tests set the child's uid); skipped otherwise.

#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use qcg_grid::services::{
    forged_child, shown, test_child_args, tls_fields, Cluster, Limits, OtherUser, ServiceGrid,
    NOBODY,
};
use qcg_proto::tls::Role;
use qcg_proto::{AccessPoint, ProcName, Request, Response};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

/// The other user's side: this binary started again by [`as_user`].
#[test]
fn access_child() {
    forged_child();
}

/// Runs `reqs` as uid/gid in a real child process; the answers, as JSON text.
fn as_user(uid: u32, gid: u32, socket: &Path, reqs: &[Request]) -> Vec<String> {
    let reqs: Vec<_> = reqs
        .iter()
        .map(|r| (socket.to_path_buf(), r.clone()))
        .collect();
    let answers = OtherUser { uid, gid }
        .ask(&reqs, &test_child_args("access_child"))
        .unwrap();
    answers.iter().map(shown).collect()
}

fn ap(job: &str, rank: u32) -> Request {
    Request::Register(AccessPoint {
        process: ProcName::new(job, rank),
        cluster: "orsay".into(),
        node: "orsay-1".into(),
        private_addr: "127.0.0.1".parse().unwrap(),
        public_addr: None,
        port: 40000 + rank as u16,
    })
}

#[test]
fn another_user_cannot_act_for_a_job_not_its_own() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let mut g = ServiceGrid::builder()
        .dir_mode(0o755)
        .no_http()
        .no_https()
        .cluster(Cluster::new("orsay").frontal_config("nat = false"))
        .start()
        .unwrap();
    g.issue(Role::Helper, "orsay-1").unwrap();
    let socket = g.dir().join("helper.sock");
    let helper_cfg = format!(
        "node = \"orsay-1\"\nfrontal = \"{}\"\nsocket = \"helper.sock\"\n\
         socket_group = \"{NOBODY}\"\nbind_address = \"127.0.0.1\"\n{}",
        g.frontal("orsay").unwrap(),
        tls_fields("orsay-1")
    );
    // A careless umask: the socket must still be 0660.
    let careless = Limits {
        umask: Some(0),
        ..Limits::default()
    };
    g.start_with("helper", "qcg-helper", &helper_cfg, careless)
        .unwrap();
    let ready = g.line("helper", "qcg-helper:").ok();
    assert!(
        ready.is_some_and(|l| l.contains("serving processes")),
        "the helper did not start"
    );

    let meta = std::fs::metadata(&socket).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o660);
    assert_eq!((meta.uid(), meta.gid()), (0, NOBODY));

    // Root (this test) runs job `victim`.
    assert_eq!(ask(&socket, &ap("victim", 0)).unwrap(), Response::Ok);

    let forbidden = [
        ap("victim", 1),
        Request::Unregister {
            process: ProcName::new("victim", 0),
        },
        Request::Lookup {
            from: ProcName::new("victim", 1),
            target: ProcName::new("victim", 0),
        },
        Request::Subscribe {
            process: ProcName::new("victim", 0),
        },
        Request::JobEnd {
            job: "victim".into(),
        },
        Request::Lookup {
            from: ProcName::new("mine", 0),
            target: ProcName::new("victim", 0),
        },
    ];
    let answers = as_user(NOBODY, NOBODY, &socket, &forbidden);
    assert_eq!(answers.len(), forbidden.len(), "{answers:?}");
    for (req, a) in forbidden.iter().zip(&answers) {
        assert!(a.contains("forbidden"), "{}: {a}", req.kind());
        assert!(a.contains("victim"), "{}: {a}", req.kind());
        assert!(a.contains(req.kind()), "{}: {a}", req.kind());
    }
    // Its own job and the node's figures: served.
    let own = as_user(NOBODY, NOBODY, &socket, &[ap("mine", 0), Request::NodeInfo]);
    assert_eq!(
        own[0],
        serde_json::to_string(&Response::Ok).unwrap(),
        "{own:?}"
    );
    assert!(own[1].contains("orsay-1"), "{own:?}");

    // A user outside the socket's group cannot even connect.
    let out = as_user(NOBODY, 12345, &socket, &[Request::NodeInfo]);
    assert!(out[0].contains("Permission denied"), "{out:?}");

    // The helper kept serving: victim's registration is intact.
    let r = ask(
        &socket,
        &Request::Lookup {
            from: ProcName::new("victim", 0),
            target: ProcName::new("victim", 0),
        },
    )
    .unwrap();
    assert!(
        !matches!(r, Response::Error(_)),
        "victim's registration is gone: {r:?}"
    );
}
