//! `qcg-bench netpipe --lab TOPO`: the QCG-OMPI paper's layout (its Tables 1 and 2) on
//! the lab: NetPIPE over qcg links within a site, between every pair of sites, relayed
//! through each proxy (in one of the two sites and in a third), and traversed; NPtcp
//! on the same host pairs in the same run; the qcg/NPtcp ratios.

use crate::lab_run::LabRun;
use crate::netpipe::{self, Point};
use qcg_lab::grid::{self, LabGrid};
use qcg_lab::topo::{self, Nat, Site, Topology};
use qcg_proto::Policy;
use std::path::Path;
use std::process::{Command, Stdio};

/// Which plan a case makes the broker choose.
#[derive(Clone, Copy, PartialEq)]
enum Shape {
    /// The lab's firewalls as they are.
    AsBuilt,
    /// Announce both ends unreachable, behind a random-port NAT: only relaying.
    Relay,
    /// Announce the initiator closed and the target syn-block: traversal first.
    Traverse,
}

struct Case {
    name: String,
    a: String,
    b: String,
    shape: Shape,
    /// Who listens for NPtcp (a host of an accepting site), and on which port.
    np_rx: Option<(String, u16)>,
}

fn accepting_port(s: &Site) -> Option<u16> {
    match (s.firewall, s.nat) {
        (Policy::Open, Nat::None) => Some(5002),
        (Policy::PortRange { lo, hi }, _) => Some(lo + (hi - lo) / 2),
        _ => None,
    }
}

fn cases(t: &Topology) -> Vec<Case> {
    let site = |n: &str| t.sites.iter().find(|s| s.name == n);
    let np = |a: &str, b: &str| {
        [(b, a), (a, b)].into_iter().find_map(|(rx, _)| {
            site(rx)
                .and_then(accepting_port)
                .map(|p| (format!("{rx}-1"), p))
        })
    };
    let mut v = Vec::new();
    if let Some(s) = t.sites.iter().find(|s| s.nodes >= 2) {
        v.push(Case {
            name: format!("{} intra-site", s.name),
            a: format!("{}-1", s.name),
            b: format!("{}-2", s.name),
            shape: Shape::AsBuilt,
            np_rx: Some((format!("{}-2", s.name), 5002)),
        });
    }
    let mut pairs: Vec<(String, String)> = Vec::new();
    for w in &t.wan {
        let (a, b): (String, String) = (w.a.clone(), w.b.clone());
        // Initiate from the less reachable side, so that the plan has to work.
        let (a, b) = if site(&a).and_then(accepting_port).is_some() {
            (b, a)
        } else {
            (a, b)
        };
        v.push(Case {
            name: format!("{a} -> {b}"),
            a: format!("{a}-1"),
            b: format!("{b}-1"),
            shape: Shape::AsBuilt,
            np_rx: np(&a, &b),
        });
        pairs.push((a, b));
    }
    for p in t
        .hosts()
        .into_iter()
        .filter(|h| h.name.starts_with("proxy"))
    {
        let home = t
            .public
            .iter()
            .find(|h| h.name == p.name)
            .and_then(|h| h.site.clone());
        // One pair that includes the proxy's site, and one that does not.
        let with = pairs
            .iter()
            .find(|(a, b)| Some(a) == home.as_ref() || Some(b) == home.as_ref());
        let without = pairs
            .iter()
            .find(|(a, b)| Some(a) != home.as_ref() && Some(b) != home.as_ref());
        for (pair, where_) in [
            (with, "in one of the two sites"),
            (without, "in a third site"),
        ] {
            if let Some((a, b)) = pair {
                v.push(Case {
                    name: format!("{a} -> {b} relayed ({} {where_})", p.name),
                    a: format!("{a}-1"),
                    b: format!("{b}-1"),
                    shape: Shape::Relay,
                    np_rx: np(a, b),
                });
            }
        }
    }
    // Traversal toward a site whose real firewall keeps no state (open or syn-block).
    let stateless =
        |s: &Site| matches!(s.firewall, Policy::Open | Policy::SynBlock) && s.nat == Nat::None;
    if let Some((a, b)) = pairs
        .iter()
        .map(|(a, b)| (a, b))
        .chain(pairs.iter().map(|(a, b)| (b, a)))
        .find(|(_, b)| site(b).is_some_and(stateless))
    {
        v.push(Case {
            name: format!("{a} -> {b} traversed"),
            a: format!("{a}-1"),
            b: format!("{b}-1"),
            shape: Shape::Traverse,
            np_rx: np(a, b),
        });
    }
    v
}

fn announce(shape: Shape, a_site: &str, b_site: &str) -> impl Fn(&Site) -> (Policy, Nat) {
    let (a, b) = (a_site.to_string(), b_site.to_string());
    move |s: &Site| match shape {
        Shape::AsBuilt => grid::as_built(s),
        Shape::Relay if s.name == a => (Policy::Closed, Nat::None),
        Shape::Relay if s.name == b => (Policy::Closed, Nat::RandomPort),
        Shape::Traverse if s.name == a => (Policy::Closed, Nat::None),
        Shape::Traverse if s.name == b => (Policy::SynBlock, Nat::None),
        _ => grid::as_built(s),
    }
}

fn site_of(host: &str) -> &str {
    host.rsplit_once('-').map_or(host, |(s, _)| s)
}

fn nptcp(
    g: &LabGrid,
    t: &Topology,
    c: &Case,
    range: (usize, usize),
    out: &Path,
) -> anyhow::Result<Vec<Point>> {
    let Some((rx, port)) = &c.np_rx else {
        anyhow::bail!("no end of {} accepts connections for NPtcp", c.name)
    };
    let tx = if rx == &c.b { &c.a } else { &c.b };
    let addr = t
        .host(rx)
        .map(|h| h.addr)
        .ok_or_else(|| anyhow::anyhow!("no host {rx}"))?;
    let np = Path::new("/usr/bin/NPtcp");
    let (min, max) = range;
    let range = [
        "-l".to_string(),
        min.to_string(),
        "-u".into(),
        max.to_string(),
    ];
    let mut r = g
        .command(rx, np)
        .args(["-P", &port.to_string()])
        .args(&range)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    std::thread::sleep(std::time::Duration::from_millis(500));
    let file = out.join("np-nptcp.out");
    let st = g
        .command(tx, np)
        .args(["-h", &addr.to_string(), "-P", &port.to_string()])
        .args(&range)
        .arg("-o")
        .arg(&file)
        .stdout(Stdio::null())
        .output();
    let _ = r.kill();
    let _ = r.wait();
    let st = st?;
    anyhow::ensure!(st.status.success(), "NPtcp from {tx} to {rx} failed");
    let mut pts = netpipe::parse_np_out(&std::fs::read_to_string(&file)?);
    netpipe::nptcp_reps(&String::from_utf8_lossy(&st.stderr), &mut pts);
    Ok(pts)
}

/// CPU seconds (user and system) of this process's children waited for so far
/// (`/proc/self/stat`'s cutime and cstime, in USER_HZ = 100 ticks).
fn children_cpu_secs() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let f: Vec<f64> = stat
        .rsplit_once(')')
        .map(|(_, r)| {
            r.split_whitespace()
                .filter_map(|x| x.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    // After the state letter (not a number): ppid is f[0], ..., cutime f[12], cstime f[13].
    (f.get(12).unwrap_or(&0.0) + f.get(13).unwrap_or(&0.0)) / 100.0
}

/// The cases `--only` picks, by index: the one whose name is exactly `only` if there
/// is one (so `beta -> alpha` does not also run `beta -> alpha relayed (…)`), else
/// every case whose name contains it; an error listing the names when none does.
fn pick(names: &[&str], only: Option<&str>) -> anyhow::Result<Vec<usize>> {
    let Some(o) = only else {
        return Ok((0..names.len()).collect());
    };
    if let Some(i) = names.iter().position(|n| *n == o) {
        return Ok(vec![i]);
    }
    let some: Vec<usize> = (0..names.len()).filter(|&i| names[i].contains(o)).collect();
    anyhow::ensure!(
        !some.is_empty(),
        "--only {o:?} names no case of this topology; its cases are:\n  {}",
        names.join("\n  ")
    );
    Ok(some)
}

/// Runs every case; prints the table and writes each case's files under `out`.
pub fn run(
    topo_path: &Path,
    range: (usize, usize),
    trial: f64,
    no_nptcp: bool,
    only: Option<&str>,
    out: &Path,
) -> anyhow::Result<()> {
    if !no_nptcp {
        anyhow::ensure!(
            Path::new("/usr/bin/NPtcp").exists(),
            "NPtcp is missing: bash scripts/bench-deps.sh (or --no-nptcp)"
        );
    }
    let t = topo::load(topo_path)?;
    let lab = LabRun::up(topo_path, "np")?;
    let me = std::env::current_exe()?;
    let mut g = LabGrid::start(&lab.prefix, &t, &lab.bins, &grid::as_built)?;
    let mut rows = Vec::new();
    let mut shape_now = (Shape::AsBuilt, String::new(), String::new());
    let all = cases(&t);
    let names: Vec<&str> = all.iter().map(|c| c.name.as_str()).collect();
    let picked = pick(&names, only)?;
    for (n, c) in all.iter().enumerate().filter(|(n, _)| picked.contains(n)) {
        let (sa, sb) = (site_of(&c.a).to_string(), site_of(&c.b).to_string());
        let want = (c.shape, sa.clone(), sb.clone());
        if c.shape != shape_now.0 || (c.shape != Shape::AsBuilt && want != shape_now) {
            g.restart_sites(&t, &announce(c.shape, &sa, &sb))?;
            shape_now = want;
        }
        let dir = out.join(format!("case{n}"));
        std::fs::create_dir_all(&dir)?;
        eprintln!("# {}", c.name);
        let job = format!("np{n}");
        let args = |c: &mut Command| {
            c.args([
                "netpipe-rank",
                &format!("--min={}", range.0),
                &format!("--max={}", range.1),
                &format!("--trial={trial}"),
            ])
            .arg(format!("--out={}", dir.display()));
        };
        let cpu0 = children_cpu_secs();
        let mut r1 = g.rank(&c.b, &job, 1, 2, &me);
        args(&mut r1);
        let r1 = r1.stdout(Stdio::null()).spawn()?;
        let mut r0 = g.rank(&c.a, &job, 0, 2, &me);
        args(&mut r0);
        let o0 = r0.stderr(Stdio::inherit()).output()?;
        let _ = r1.wait_with_output();
        // Both ranks waited for: their CPU time, over the bytes they moved (every
        // round trip of the four trials, both ways).
        let cpu = children_cpu_secs() - cpu0;
        let text = String::from_utf8_lossy(&o0.stdout);
        let how = text
            .lines()
            .find_map(|l| l.strip_prefix("# link: "))
            .unwrap_or("failed")
            .to_string();
        let q = netpipe::parse_csv(
            &std::fs::read_to_string(dir.join("netpipe.csv")).unwrap_or_default(),
            "qcg",
        );
        let np = if no_nptcp {
            Vec::new()
        } else {
            nptcp(&g, &t, c, range, &dir)?
        };
        netpipe::write_outputs(&dir, &[("qcg", &q), ("NPtcp", &np)], &["qcg"])?;
        let moved: f64 = q.iter().map(|p| 8.0 * (p.reps * p.bytes) as f64).sum();
        rows.push((
            c.name.clone(),
            how,
            netpipe::summary(&q),
            netpipe::summary(&np),
            cpu / (moved / 1e9),
        ));
    }
    drop(g);
    println!("# qcg-bench netpipe --lab {}: NetPIPE over qcg links and NPtcp on the same hosts, same run", topo_path.display());
    println!(
        "{:<52} {:<10} {:>10} {:>10} {:>6} {:>10} {:>10} {:>6} {:>9}",
        "path", "link", "qcg us", "NPtcp us", "ratio", "qcg Mbps", "NPtcp", "ratio", "cpu s/GB"
    );
    for (name, how, (ql, qp), (nl, np), cpu) in &rows {
        println!(
            "{name:<52} {how:<10} {ql:>10.1} {nl:>10.1} {:>6.3} {qp:>10.1} {np:>10.1} {:>6.3} {cpu:>9.2}",
            ql / nl,
            qp / np
        );
    }
    println!(
        "# cpu s/GB: both qcg ranks' user and system time over the bytes of all their round trips"
    );
    println!(
        "# per-case np.out, CSV and SVG under {}/caseN/",
        out.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::pick;

    const NAMES: [&str; 4] = [
        "alpha intra-site",
        "beta -> alpha",
        "beta -> alpha relayed (p1 beside alpha)",
        "beta -> alpha traversed",
    ];

    #[test]
    fn only_an_exact_name_runs_that_case_alone() {
        assert_eq!(pick(&NAMES, Some("beta -> alpha")).unwrap(), vec![1]);
    }

    #[test]
    fn only_a_part_of_names_runs_every_case_holding_it() {
        assert_eq!(pick(&NAMES, Some("relayed")).unwrap(), vec![2]);
        assert_eq!(pick(&NAMES, Some("beta")).unwrap(), vec![1, 2, 3]);
        assert_eq!(pick(&NAMES, None).unwrap(), vec![0, 1, 2, 3]);
    }

    #[test]
    fn only_naming_no_case_says_which_cases_there_are() {
        let e = pick(&NAMES, Some("gamma")).unwrap_err().to_string();
        assert!(e.contains("\"gamma\" names no case"), "{e}");
        assert!(e.contains("beta -> alpha traversed"), "{e}");
    }
}
