//! `qcg-bench queue`: issue 21's retention and fair-share findings on real services
//! (broker, frontal, helper started from config files, as `attacks` does).
//!
//! 1. Retention: `jobs` jobs (one `/bin/true` process, a profile padded to
//!    `profile_bytes`) submitted and run to their end; the broker's database file
//!    and resident memory are printed before, once all have finished, and while
//!    the retention passes (output and profiles after `output_keep_secs`, records
//!    after `job_record_keep_secs`, the file compacted at most once a minute);
//!    `rounds` times, so that a bound shows as memory that does not grow.
//! 2. Fair share: carol queues 30 jobs of 4 processes (`sleep`) on a node of 5
//!    slots; alice then submits one of 1 process, which fits the free slot. Prints
//!    how long alice's job took to start (strict first-come order: until carol's 30
//!    had run).

use crate::attacks::{mib, status_kib};
use anyhow::{bail, Result};
use qcg_grid::services::{Cluster, Node, ServiceGrid};
use std::time::{Duration, Instant};

fn profile(procs: u32, exe: &str, args: &[&str]) -> String {
    let args: String = args.iter().map(|a| format!("<value>{a}</value>")).collect();
    format!(
        r#"<grmsJob appId="bench"><task taskId="t"><resourcesDescription><topology>
<group groupId="g"><processes><processesCount><value>{procs}</value></processesCount></processes></group>
</topology></resourcesDescription><execution type="x"><executable>{exe}</executable>
<arguments>{args}</arguments></execution></task></grmsJob>"#
    )
}

/// Runs both measurements.
pub fn run(jobs: usize, profile_bytes: usize, record_keep: u64, rounds: usize) -> Result<()> {
    let output_keep = (record_keep / 4).max(1);
    let g = ServiceGrid::builder()
        .no_http()
        .log_filter("error")
        .broker_config(&format!(
            "output_keep_secs = {output_keep}\njob_record_keep_secs = {record_keep}\n\
             max_queued_jobs_per_client = {}\nmax_profile_bytes_per_client = {}",
            jobs + 100,
            (jobs + 100) * (profile_bytes + 4096),
        ))
        .cluster(Cluster::new("alpha").node(Node::new("a1").slots(5)))
        .cert("client", "alice")
        .cert("client", "carol")
        .start()?;
    let db = g.dir().join("state/broker.redb");
    let broker = g.service("broker")?.pid();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let alice = g.client("alice")?;
    let carol = g.client("carol")?;
    let size = || std::fs::metadata(&db).map_or(0, |m| m.len()) as f64 / 1048576.0;
    let rss = || mib(status_kib(broker, "VmRSS:"));
    let list = |c: &qcg_grid::client::Client| -> Result<(usize, usize)> {
        let a = rt.block_on(c.request("GET", "/v1/jobs", vec![]))?;
        let all = a.json();
        let all = all.as_array().cloned().unwrap_or_default();
        let done = all.iter().filter(|j| j["finished"] == true).count();
        Ok((all.len(), done))
    };

    println!("# qcg-bench queue: real services on loopback (broker pid {broker})");
    println!(
        "# retention: output and profiles {output_keep} s, records {record_keep} s after a job's end; compaction at most once a minute"
    );
    println!(
        "{:<44} {:>8} {:>10} {:>10}",
        "moment", "records", "db MiB", "rss MiB"
    );
    let row = |what: &str, n: usize| {
        println!("{:<44} {:>8} {:>10.2} {:>10.1}", what, n, size(), rss());
    };
    row("started", 0);
    let pad = "p".repeat(profile_bytes);
    let xml = profile(1, "/bin/true", &[&pad]);
    // The node is offered once its helper has reached the frontal.
    let t0 = Instant::now();
    let offered = |t: &serde_json::Value| {
        t["clusters"].as_array().is_some_and(|c| {
            c.iter()
                .any(|c| c["nodes"].as_array().is_some_and(|n| !n.is_empty()))
        })
    };
    while !offered(
        &rt.block_on(alice.request("GET", "/v1/topology", vec![]))?
            .json(),
    ) {
        if t0.elapsed() > Duration::from_secs(30) {
            bail!("the node was not offered within 30 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    for round in 1..=rounds {
        let t0 = Instant::now();
        for i in 0..jobs {
            let a = rt.block_on(alice.request(
                "POST",
                "/v1/jobs?workdir=/tmp",
                xml.clone().into_bytes(),
            ))?;
            if a.status != 201 {
                bail!("job {i} refused: {} {}", a.status, a.error_message());
            }
        }
        row(
            &format!(
                "round {round}: {jobs} submitted ({:.1} s)",
                t0.elapsed().as_secs_f64()
            ),
            jobs,
        );
        loop {
            let (n, done) = list(&alice)?;
            if done == n {
                break;
            }
            if t0.elapsed() > Duration::from_secs(1200) {
                bail!("only {done} of {n} jobs finished in 20 min");
            }
            std::thread::sleep(Duration::from_secs(1));
        }
        let finished = Instant::now();
        row(
            &format!(
                "round {round}: all finished ({:.1} s)",
                t0.elapsed().as_secs_f64()
            ),
            jobs,
        );
        // Retention passes: the last deletion waits for the compaction interval.
        let deadline = finished + Duration::from_secs(record_keep + 75);
        let mut last = (usize::MAX, 0u64);
        while Instant::now() < deadline {
            std::thread::sleep(Duration::from_secs(1));
            let (n, _) = list(&alice)?;
            let bytes = std::fs::metadata(&db).map_or(0, |m| m.len());
            if bytes != last.1 || (n == 0 && last.0 != 0) {
                row(
                    &format!(
                        "round {round}: +{:.0} s after the last end",
                        finished.elapsed().as_secs_f64()
                    ),
                    n,
                );
                last = (n, bytes);
            }
            if n == 0 && finished.elapsed() > Duration::from_secs(record_keep + 65) {
                break;
            }
        }
    }

    // Fair share: carol's backlog, alice's one fitting job.
    println!("# fair share: node of 5 slots; carol queues 30 jobs of 4 processes (sleep 3)");
    let sleep = profile(4, "/bin/sleep", &["3"]);
    let mut carols = Vec::new();
    for _ in 0..30 {
        let a = rt.block_on(carol.request(
            "POST",
            "/v1/jobs?workdir=/tmp",
            sleep.clone().into_bytes(),
        ))?;
        if a.status != 201 {
            bail!("carol's job refused: {}", a.error_message());
        }
        carols.push(a.json()["id"].as_str().unwrap_or_default().to_string());
    }
    std::thread::sleep(Duration::from_millis(500));
    let t0 = Instant::now();
    let a = rt.block_on(alice.request(
        "POST",
        "/v1/jobs?workdir=/tmp",
        profile(1, "/bin/sleep", &["1"]).into_bytes(),
    ))?;
    if a.status != 201 {
        bail!("alice's job refused: {}", a.error_message());
    }
    let id = a.json()["id"].as_str().unwrap_or_default().to_string();
    let started = loop {
        let a = rt.block_on(alice.request("GET", &format!("/v1/jobs/{id}"), vec![]))?;
        let j = a.json();
        let running = j["ranks"].as_array().is_some_and(|r| {
            r.iter()
                .any(|r| r["state"] == "running" || r["state"] == "exited")
        });
        if running {
            break t0.elapsed();
        }
        if t0.elapsed() > Duration::from_secs(200) {
            bail!("alice's job did not start in 200 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let (queued, _) = list(&carol)?;
    println!(
        "alice's 1-process job started {:.0} ms after its submission, behind carol's {} jobs (strict first-come order: after all of them, 30 x 3 s)",
        started.as_secs_f64() * 1e3,
        queued
    );
    for c in carols {
        let _ = rt.block_on(carol.request("DELETE", &format!("/v1/jobs/{c}"), vec![]));
    }
    Ok(())
}
