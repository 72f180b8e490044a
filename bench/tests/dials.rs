//! Two ranks that dial each other at once end on the best technique their sites allow,
//! never on the relay (issue 20). In the lab of `topologies/techniques.toml`, over the
//! real services, for each pair of sites whose best technique is punched, traversed,
//! reversed or direct: the test first proves the simpler techniques are really
//! blocked, then runs a C program built with `qcg-mpicc` whose two ranks, one on each
//! site, send to each other at the same moment (`MPI_Sendrecv`, then `MPI_Barrier`;
//! a third rank beside one of them takes part in `MPI_Init`, which links every rank
//! to rank 0 first, so that the two have no link yet when they exchange). Each rank
//! says which technique made the links it made (its `qcg::link` debug lines), and the
//! broker's `/v1/links` must count no relayed link.
//!
//! Runs per pair: `QCG_TEST_DIAL_RUNS` (5 by default, the target is 20). The
//! sites swap every other run, so that each rank dials from both sides.

#![allow(clippy::unwrap_used)]

mod common;
use common::*;

use qcg_lab::grid::{self, LabGrid};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// What the test runs from `target/PROFILE` besides the services.
const BINS: &[&str] = &["qcg-lab", "qcg-mpicc"];

/// Links made, attempts failed and upgrades from the relay so far, by technique (the
/// initiators' reports).
fn links_made(g: &LabGrid) -> BTreeMap<String, (u64, u64, u64)> {
    let v: serde_json::Value = serde_json::from_str(&g.broker_view("/v1/links").unwrap()).unwrap();
    v.as_object()
        .unwrap()
        .iter()
        .map(|(t, c)| {
            let n = |k: &str| c[k].as_u64().unwrap_or(0);
            (t.clone(), (n("ok"), n("failed"), n("upgraded")))
        })
        .collect()
}

/// Whether a rank's log says it dialled `peer` (its link set-up started: no link
/// to the peer existed when it first sent).
fn dialled(log: &str, peer: u32) -> bool {
    log.lines()
        .map(plain)
        .any(|l| l.contains("dialing") && l.contains(&format!("dest={peer} ")))
}

/// `line` without its terminal colour codes (`ESC [ … m`).
fn plain(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The links a rank made, from its `qcg::link` debug lines: (peer, technique), the
/// technique `relayed then X` for a relayed link that moved to X.
fn links_in(log: &str) -> Vec<(u32, String)> {
    let field = |line: &str, key: &str| -> Option<String> {
        let at = line.find(&format!("{key}="))? + key.len() + 1;
        Some(line[at..].split(char::is_whitespace).next()?.to_string())
    };
    let mut links: Vec<(u32, String)> = Vec::new();
    for line in log.lines().map(plain) {
        let line = line.as_str();
        let (Some(dest), Some(how)) = (field(line, "dest"), field(line, "technique")) else {
            continue;
        };
        let Ok(dest) = dest.parse::<u32>() else {
            continue;
        };
        if line.contains("link made") {
            links.push((dest, how));
        } else if line.contains("link moved off the relay") {
            match links.iter_mut().find(|(d, t)| *d == dest && t == "relayed") {
                Some(l) => l.1 = format!("relayed then {how}"),
                None => links.push((dest, format!("relayed then {how}"))),
            }
        }
    }
    links
}

#[test]
fn ranks_dialling_each_other_at_once_end_on_the_best_technique() {
    let bins = bins(BINS);
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../lab/topologies/techniques.toml"),
    )
    .unwrap();
    let runs: usize = std::env::var("QCG_TEST_DIAL_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let lab = Lab::up("dl", &text);

    // (a site, the other site, the technique the broker plans first from a to b, the
    // techniques that may make the link: the first of the plan each way).
    let pairs: [(&str, &str, &str, &[&str]); 4] = [
        ("punch1", "punch2", "punched", &["punched"]),
        ("trav1", "trav2", "traversed", &["traversed", "punched"]),
        ("rev1", "rev2", "reversed", &["reversed", "direct"]),
        ("direct1", "direct2", "direct", &["direct"]),
    ];
    for (a, b, technique, _) in pairs {
        prove_blocked(&lab, a, b, technique);
    }

    let t = lab.topo.clone();
    let grid = LabGrid::start(&lab.prefix, &t, &bins, &grid::as_built).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("at_once");
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/at_once.c");
    let o = Command::new(bins.join("qcg-mpicc"))
        .args(["-O1", "-Wall", "-Werror"])
        .arg(&source)
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "qcg-mpicc at_once.c failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );

    let mut failures = Vec::new();
    let mut summary = Vec::new();
    // `QCG_TEST_DIAL_PAIRS=punch1,trav1`: only the pairs of those sites (to look at one).
    let only = std::env::var("QCG_TEST_DIAL_PAIRS").ok();
    for (p, (a, b, technique, allowed)) in pairs.iter().enumerate() {
        if only
            .as_ref()
            .is_some_and(|o| !o.split(',').any(|x| x == *a))
        {
            continue;
        }
        // How each run ended: the techniques that made the links across the pair.
        let mut ends: BTreeMap<String, usize> = BTreeMap::new();
        let mut failed_attempts: BTreeMap<String, u64> = BTreeMap::new();
        let mut upgrades: BTreeMap<String, u64> = BTreeMap::new();
        for n in 0..runs {
            // Ranks 0 and 2 on one site, rank 1 on the other; sides swap every run.
            let sites = if n % 2 == 0 { [a, b, a] } else { [b, a, b] };
            let job = format!("dl{p}-{n}");
            let out = |r: u32, ext: &str| dir.path().join(format!("{job}-{r}.{ext}"));
            let before = links_made(&grid);
            // Ranks 1 and 2 send their first message at this instant (launching the
            // ranks and MPI_Init take well under it; a late rank says so).
            let start = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                + Duration::from_millis(3000);
            let mut ranks: Vec<Child> = (0..3u32)
                .map(|r| {
                    grid.rank(&format!("{}-1", sites[r as usize]), &job, r, 3, &exe)
                        // The library found by the program's rpath, not cargo's deps folder.
                        .env_remove("LD_LIBRARY_PATH")
                        .env("QCG_LOG", "warn,qcg::link=debug")
                        .env("AT_ONCE_START", start.as_nanos().to_string())
                        .stdin(Stdio::null())
                        .stdout(std::fs::File::create(out(r, "out")).unwrap())
                        .stderr(std::fs::File::create(out(r, "err")).unwrap())
                        .spawn()
                        .unwrap()
                })
                .collect();
            let ok = wait_all(&mut ranks, Duration::from_secs(60));
            let after = links_made(&grid);
            for (tech, (_, failed_after, upgraded_after)) in &after {
                let (_, failed_before, upgraded_before) =
                    before.get(tech).copied().unwrap_or_default();
                if *failed_after > failed_before {
                    *failed_attempts.entry(tech.clone()).or_default() +=
                        failed_after - failed_before;
                }
                if *upgraded_after > upgraded_before {
                    *upgrades.entry(tech.clone()).or_default() += upgraded_after - upgraded_before;
                }
            }
            let relayed = after["relayed"].0 - before.get("relayed").map_or(0, |c| c.0);
            let logs: Vec<String> = (0..3)
                .map(|r| std::fs::read_to_string(out(r, "err")).unwrap_or_default())
                .collect();
            // The links across the pair (0-1 made in MPI_Init, 1-2 at once), by the
            // technique each rank says it made them with.
            let mut made: Vec<String> = Vec::new();
            for (r, log) in logs.iter().enumerate() {
                for (dest, how) in links_in(log) {
                    if sites[r] != sites[dest as usize] {
                        made.push(how);
                    }
                }
            }
            made.sort();
            made.dedup();
            let end = if made.is_empty() {
                "none".to_string()
            } else {
                made.join(", ")
            };
            *ends.entry(end.clone()).or_default() += 1;
            let late = logs.iter().any(|l| l.contains("late for the start"));
            // Both ranks of the exchange dialled: the dials really were at once.
            let both = dialled(&logs[1], 2) && dialled(&logs[2], 1);
            let good = ok.iter().all(|&x| x)
                && both
                && relayed == 0
                && !late
                && !made.is_empty()
                && made.iter().all(|m| allowed.contains(&m.as_str()));
            if !good {
                let read =
                    |r: u32, ext: &str| std::fs::read_to_string(out(r, ext)).unwrap_or_default();
                failures.push(format!(
                    "{a} <-> {b} run {n} (rank 1 on {}): ranks ok {ok:?}, links by {end}, \
                     {relayed} relayed in /v1/links (want {allowed:?}){}{}\n{}",
                    sites[1],
                    if late {
                        ", a rank was late for the start"
                    } else {
                        ""
                    },
                    if both {
                        ""
                    } else {
                        ", ranks 1 and 2 did not both dial"
                    },
                    (0..3)
                        .map(|r| format!("rank {r}:\n{}{}", read(r, "out"), read(r, "err")))
                        .collect::<String>()
                ));
            }
        }
        let line = format!(
            "{a} <-> {b} ({technique}): {runs} runs ended on {ends:?}; attempts failed {failed_attempts:?}; upgrades from the relay {upgrades:?}"
        );
        eprintln!("{line}");
        summary.push(line);
    }
    drop(grid);
    assert!(
        failures.is_empty(),
        "{}\n\n{}",
        summary.join("\n"),
        failures.join("\n\n")
    );
}
