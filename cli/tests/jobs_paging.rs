//! `qcg jobs` reads the job list a page at a time (`GET /v1/jobs?limit=&after=`):
//! with more jobs than a page, every job is listed once, in id order; a page size
//! out of range is refused naming the option. Bob's jobs stay out of alice's list
//! whatever the paging. Real binaries on loopback (broker with its database,
//! frontal, helper).

#![allow(clippy::unwrap_used)]

mod common;
use common::*;
use qcg_grid::services::{Cluster, Node, ServiceGrid};

use std::time::{Duration, Instant};

fn submit(g: &ServiceGrid, who: &str) -> String {
    let xml = r#"<grmsJob appId="paged"><task taskId="t"><resourcesDescription><topology>
<group groupId="g"><processes><processesCount><value>1</value></processesCount></processes></group>
</topology></resourcesDescription><execution type="x"><executable>/bin/true</executable>
</execution></task></grmsJob>"#;
    let client = g.client(who).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let a = rt
        .block_on(client.request("POST", "/v1/jobs?workdir=/tmp", xml.as_bytes().to_vec()))
        .unwrap();
    assert_eq!(a.status, 201, "{}", String::from_utf8_lossy(&a.body));
    a.json()["id"].as_str().unwrap().to_string()
}

/// The job ids of `qcg jobs` as `who` with `extra` arguments, in the order listed.
fn listed(g: &ServiceGrid, who: &str, extra: &[&str]) -> Vec<String> {
    let o = std::process::Command::new(bin("qcg"))
        .arg("jobs")
        .args(extra)
        .args(g.qcg_args(who))
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    out.lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

#[test]
fn qcg_jobs_lists_every_job_a_page_at_a_time() {
    let g = ServiceGrid::builder()
        .no_http()
        .cluster(Cluster::new("alpha").node(Node::new("a1").slots(2)))
        .cert("client", "alice")
        .cert("client", "bob")
        .start()
        .unwrap();
    // Jobs are placed once the frontal reported its node.
    let t0 = Instant::now();
    let mut mine = loop {
        let client = g.client("alice").unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let t = rt
            .block_on(client.request("GET", "/v1/topology", Vec::new()))
            .unwrap();
        if String::from_utf8_lossy(&t.body).contains("\"a1\"") {
            break Vec::new();
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "node a1 never reported"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    for _ in 0..7 {
        mine.push(submit(&g, "alice"));
    }
    let bobs = submit(&g, "bob");
    mine.sort();

    // Pages of 2 (four requests), of 7 (a full page, then an empty one), of 1000.
    for page in ["2", "3", "7", "1000"] {
        let got = listed(&g, "alice", &["--page", page]);
        assert_eq!(got, mine, "--page {page}");
    }
    assert_eq!(listed(&g, "bob", &["--page", "1"]), [bobs]);

    for bad in ["0", "10001", "-1", "abc"] {
        let o = std::process::Command::new(bin("qcg"))
            .arg("jobs")
            .arg(format!("--page={bad}"))
            .args(g.qcg_args("alice"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "--page {bad}");
        assert!(err.contains("--page"), "--page {bad}: {err}");
    }
}
