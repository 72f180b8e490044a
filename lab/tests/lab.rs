//! The lab: topology files (pure, fast), then real labs in network namespaces proving
//! with real traffic that each firewall, NAT and WAN delay does what the file says.
//!
//! The lab tests need root, iproute2, nftables and /dev/net/tun. They install what is
//! missing through `scripts/lab-deps.sh` and FAIL (never skip) when they cannot run.
//! Each lab has its own prefix, so tests run in parallel; a guard takes it down on drop,
//! also when a test fails.

#![allow(clippy::unwrap_used)]

mod common;
use common::*;

use qcg_lab::topo::{self, Topology};
use qcg_lab::{check, sys};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

// ---------------------------------------------------------------- topology files

fn parse_err(text: &str) -> String {
    topo::parse(Path::new("lab.toml"), text)
        .map(|_| ())
        .unwrap_err()
        .to_string()
}

const SITES: &str = r#"
[[site]]
name = "a"
nodes = 1
nat = "none"
firewall = "open"

[[site]]
name = "b"
nodes = 1
nat = "none"
firewall = "closed"
"#;

fn with_wan(wan: &str) -> String {
    format!("{SITES}\n[[wan]]\n{wan}")
}

/// Line of `needle` in `text`, from 1.
fn line_of(text: &str, needle: &str) -> usize {
    text.lines().position(|l| l.contains(needle)).unwrap() + 1
}

#[test]
fn unknown_key_is_named_with_its_line() {
    let text = SITES.replace(
        "nodes = 1\nnat = \"none\"\nfirewall = \"closed\"",
        "nodes = 1\nnat = \"none\"\nfirewall = \"closed\"\nfirewal = \"open\"",
    );
    let e = parse_err(&text);
    let line = line_of(&text, "firewal =");
    assert!(e.starts_with(&format!("lab.toml:{line}:")), "{e}");
    assert!(e.contains("unknown field") && e.contains("firewal"), "{e}");

    let text = format!("{SITES}\nlatency = 3\n");
    let e = parse_err(&text);
    assert!(e.contains("unknown field") && e.contains("latency"), "{e}");
}

#[test]
fn negative_delay_is_refused_with_its_line() {
    let text = with_wan("sites = [\"a\", \"b\"]\ndelay_ms = -1.5\nbandwidth_mbit = 10\n");
    let e = parse_err(&text);
    let line = line_of(&text, "delay_ms");
    assert!(e.starts_with(&format!("lab.toml:{line}:")), "{e}");
    assert!(e.contains("delay_ms") && e.contains("-1.5"), "{e}");
}

#[test]
fn non_numeric_delay_is_refused_with_its_line() {
    for bad in ["\"fast\"", "true", "[1, 2]"] {
        let text = with_wan(&format!(
            "sites = [\"a\", \"b\"]\ndelay_ms = {bad}\nbandwidth_mbit = 10\n"
        ));
        let e = parse_err(&text);
        let line = line_of(&text, "delay_ms");
        assert!(e.starts_with(&format!("lab.toml:{line}:")), "{bad}: {e}");
        assert!(e.contains("delay_ms"), "{bad}: {e}");
    }
}

#[test]
fn delay_with_a_unit_is_refused_with_its_line() {
    let text = with_wan("sites = [\"a\", \"b\"]\ndelay_ms = \"10ms\"\nbandwidth_mbit = 10\n");
    let e = parse_err(&text);
    let line = line_of(&text, "delay_ms");
    assert!(e.starts_with(&format!("lab.toml:{line}:")), "{e}");
    assert!(e.contains("`10ms`") && e.contains("without unit"), "{e}");
    // A bandwidth with a unit too.
    let text = with_wan("sites = [\"a\", \"b\"]\ndelay_ms = 10\nbandwidth_mbit = \"136Mbit\"\n");
    let e = parse_err(&text);
    assert!(
        e.contains(&format!(":{}:", line_of(&text, "bandwidth_mbit"))),
        "{e}"
    );
}

#[test]
fn duplicate_site_names_are_refused_with_the_second_line() {
    let text = SITES.replace("name = \"b\"", "name = \"a\"");
    let e = parse_err(&text);
    let second = text.match_indices("name = \"a\"").nth(1).unwrap().0;
    let line = text[..second].matches('\n').count() + 1;
    assert!(e.starts_with(&format!("lab.toml:{line}:")), "{e}");
    assert!(e.contains("duplicate name `a`"), "{e}");
    // A public host may not take a site's name either.
    let text = format!("{SITES}\n[[public]]\nname = \"b\"\n");
    let e = parse_err(&text);
    assert!(e.contains("duplicate name `b`"), "{e}");
}

#[test]
fn wan_link_to_an_unknown_site_is_refused_with_its_line() {
    let text = with_wan("sites = [\"a\", \"nowhere\"]\ndelay_ms = 1\nbandwidth_mbit = 10\n");
    let e = parse_err(&text);
    let line = line_of(&text, "nowhere");
    assert!(e.starts_with(&format!("lab.toml:{line}:")), "{e}");
    assert!(e.contains("unknown site `nowhere`"), "{e}");
}

#[test]
fn other_bad_values_are_refused() {
    let e = parse_err(&SITES.replace("firewall = \"open\"", "firewall = \"port-range 9-3\""));
    assert!(e.contains("9 is above 3"), "{e}");
    let e = parse_err(&SITES.replace(
        "nat = \"none\"\nfirewall = \"open\"",
        "nat = \"full-cone\"\nfirewall = \"open\"",
    ));
    assert!(e.contains("nat") && e.contains("full-cone"), "{e}");
    let e = parse_err(&SITES.replace(
        "nodes = 1\nnat = \"none\"\nfirewall = \"open\"",
        "nodes = 0\nnat = \"none\"\nfirewall = \"open\"",
    ));
    assert!(e.contains("0 nodes"), "{e}");
    let e = parse_err(&with_wan(
        "sites = [\"a\", \"a\"]\ndelay_ms = 1\nbandwidth_mbit = 10\n",
    ));
    assert!(e.contains("to itself"), "{e}");
    let e = parse_err(&with_wan(
        "sites = [\"a\", \"b\"]\ndelay_ms = 1\nbandwidth_mbit = 0\n",
    ));
    assert!(e.contains("bandwidth"), "{e}");
    let e = parse_err(&format!("prefix = \"Bad-Prefix\"\n{SITES}"));
    assert!(e.contains("lab.toml:1:") && e.contains("bad prefix"), "{e}");
    let e = parse_err(&SITES.replace("name = \"a\"", "name = \"a-1\""));
    assert!(e.contains("bad site name"), "{e}");
}

fn checked_in(name: &str) -> Topology {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("topologies")
        .join(name);
    topo::load(&path).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn checked_in_topologies_parse_with_the_papers_figures() {
    let paper = checked_in("paper.toml");
    let delay = |a: &str, b: &str| {
        let (a, b) = (paper.site_index(a).unwrap(), paper.site_index(b).unwrap());
        let l = paper.link(a, b).unwrap();
        (l.delay_ms, l.bandwidth_mbit)
    };
    assert_eq!(delay("orsay", "rennes"), (10.3, 136.0));
    assert_eq!(delay("orsay", "bordeaux"), (7.8, 136.0));
    assert_eq!(delay("rennes", "bordeaux"), (8.0, 136.0));
    assert!(paper.host("broker").is_some());
    assert_eq!(
        paper.host("proxy").unwrap().addr,
        Ipv4Addr::new(198, 19, 1, 11),
        "the proxy hangs off orsay's gateway"
    );

    let four = checked_in("four-sites.toml");
    assert_eq!(four.sites.len(), 4);
    assert!(four.sites.iter().all(|s| s.nodes == 4));
    assert_eq!(four.wan.len(), 6);
    assert!(four
        .wan
        .iter()
        .all(|w| w.delay_ms == 10.0 && w.bandwidth_mbit == 100.0));

    let small = checked_in("four-sites-small.toml");
    assert_eq!(small.sites.len(), 4);
    assert!(small.sites.iter().all(|s| s.nodes == 1));
    assert_eq!(small.wan.len(), 6);

    let tech = checked_in("techniques.toml");
    assert_eq!(tech.wan.len(), 7);
    assert!(tech.host("proxy").is_some());
}

// ---------------------------------------------------------------- real labs

/// One site of each firewall and NAT kind, a client site `cli` linked to each, and a
/// public host.
const KINDS: &str = r#"
[[site]]
name = "cli"
nodes = 1
nat = "none"
firewall = "open"

[[site]]
name = "open"
nodes = 2
nat = "none"
firewall = "open"

[[site]]
name = "range"
nodes = 1
nat = "none"
firewall = "port-range 20000-20099"

[[site]]
name = "syn"
nodes = 1
nat = "none"
firewall = "syn-block"

[[site]]
name = "closed"
nodes = 2
nat = "none"
firewall = "closed"

[[site]]
name = "pp"
nodes = 1
nat = "port-preserving"
firewall = "open"

[[site]]
name = "rp"
nodes = 1
nat = "random-port"
firewall = "open"

[[public]]
name = "world"

[[wan]]
sites = ["cli", "open"]
delay_ms = 0.5
bandwidth_mbit = 100

[[wan]]
sites = ["cli", "range"]
delay_ms = 0.5
bandwidth_mbit = 100

[[wan]]
sites = ["cli", "syn"]
delay_ms = 0.5
bandwidth_mbit = 100

[[wan]]
sites = ["cli", "closed"]
delay_ms = 0.5
bandwidth_mbit = 100
"#;

#[test]
fn lab_nodes_of_a_site_reach_each_other() {
    let lab = Lab::up("in", KINDS);
    // Even behind a closed firewall, the LAN is not filtered.
    for site in ["open", "closed"] {
        let (a, b) = (format!("{site}-1"), format!("{site}-2"));
        let _s = lab.serve(&b, &[5000]);
        let seen = lab.connect(&a, at(lab.addr(&b), 5000), None);
        assert_eq!(
            seen.map(|s| s.ip()),
            Ok(std::net::IpAddr::V4(lab.addr(&a))),
            "{a} → {b}"
        );
    }
}

#[test]
fn lab_open_site_accepts_from_another_site() {
    let lab = Lab::up("op", KINDS);
    let _s = lab.serve("open-1", &[5000]);
    let seen = lab.connect("cli-1", at(lab.addr("open-1"), 5000), None);
    assert_eq!(seen.map(|s| s.ip()), Ok(lab.addr("cli-1").into()));
}

#[test]
fn lab_port_range_site_accepts_inside_and_drops_outside() {
    let lab = Lab::up("pr", KINDS);
    let _s = lab.serve("range-1", &[20000, 20099, 19999, 5000]);
    let to = lab.addr("range-1");
    for p in [20000, 20099] {
        assert!(
            lab.connect("cli-1", at(to, p), None).is_ok(),
            "port {p} is in the range"
        );
    }
    for p in [19999, 5000] {
        assert_eq!(
            lab.connect("cli-1", at(to, p), None),
            Err(TIMEOUT),
            "port {p} is outside the range"
        );
    }
}

#[test]
fn lab_syn_block_drops_inbound_syn_but_lets_outbound_through() {
    let lab = Lab::up("sb", KINDS);
    let _in = lab.serve("syn-1", &[5000]);
    assert_eq!(
        lab.connect("cli-1", at(lab.addr("syn-1"), 5000), None),
        Err(TIMEOUT)
    );
    let _out = lab.serve("cli-1", &[5001]);
    assert!(lab
        .connect("syn-1", at(lab.addr("cli-1"), 5001), None)
        .is_ok());
    // Stateless: the gateway has no conntrack rule at all.
    let rules = Command::new("ip")
        .args([
            "netns",
            "exec",
            &format!("{}-syn-gw", lab.prefix),
            "nft",
            "list",
            "ruleset",
        ])
        .output()
        .unwrap();
    let rules = String::from_utf8_lossy(&rules.stdout);
    assert!(
        rules.contains("syn") && !rules.contains("ct state"),
        "{rules}"
    );
}

#[test]
fn lab_closed_site_drops_inbound_but_lets_outbound_through() {
    let lab = Lab::up("cl", KINDS);
    let _in = lab.serve("closed-1", &[5000, 20000]);
    for p in [5000, 20000] {
        assert_eq!(
            lab.connect("cli-1", at(lab.addr("closed-1"), p), None),
            Err(TIMEOUT)
        );
    }
    let _out = lab.serve("cli-1", &[5001]);
    assert!(lab
        .connect("closed-1", at(lab.addr("cli-1"), 5001), None)
        .is_ok());
    // From the public side too.
    assert_eq!(
        lab.connect("world", at(lab.addr("closed-1"), 5000), None),
        Err(TIMEOUT)
    );
}

#[test]
fn lab_nat_keeps_or_changes_the_source_port() {
    let lab = Lab::up("nat", KINDS);
    let _s = lab.serve("world", &[5000]);
    let to = at(lab.addr("world"), 5000);
    for (i, port) in [41000u16, 41001, 41002].into_iter().enumerate() {
        let seen = lab.connect("pp-1", to, Some(port)).unwrap();
        assert_eq!(
            seen,
            at(topo::gateway_addr(6), port),
            "port-preserving NAT, try {i}"
        );
    }
    let mut kept = 0;
    for port in [41000u16, 41001, 41002] {
        let seen = lab.connect("rp-1", to, Some(port)).unwrap();
        assert_eq!(seen.ip(), std::net::IpAddr::V4(topo::gateway_addr(7)));
        kept += usize::from(seen.port() == port);
    }
    assert!(
        kept <= 1,
        "a random-port NAT changes the source port ({kept} of 3 kept)"
    );
    // A NATed node is not reachable from outside.
    let _t = lab.serve("pp-1", &[5002]);
    assert!(lab
        .connect("world", at(lab.addr("pp-1"), 5002), None)
        .is_err());
}

#[test]
fn lab_wan_rtt_is_twice_the_one_way_delay() {
    let text = r#"
[[site]]
name = "near"
nodes = 1
nat = "none"
firewall = "open"
[[site]]
name = "far"
nodes = 1
nat = "port-preserving"
firewall = "closed"
[[public]]
name = "world"
[[public]]
name = "relay"
site = "near"
[[wan]]
sites = ["near", "far"]
delay_ms = 15
bandwidth_mbit = 20
"#;
    let lab = Lab::up("rtt", text);
    let _s = lab.serve("near-1", &[5000]);
    let out = lab.exec(
        "far-1",
        &[
            "rtt",
            &at(lab.addr("near-1"), 5000).to_string(),
            "--count",
            "40",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    // What is checked is that the delay is applied, once each way: no packet comes
    // back sooner than the two delays (less what the delay line may send early),
    // and the fastest of 40 is not two round trips late. The exact figure is for
    // `qcg-lab check`: a loaded machine only adds time, so a tight upper bound here
    // would test the machine, not the lab.
    let floor = 30.0 - 2.0 * qcg_lab::delay::MAX_EARLY.as_secs_f64() * 1e3 - 0.05;
    let min = check::field(&text, "min").unwrap();
    assert!(
        min >= floor,
        "RTT {min} ms, below the 30 ms of the WAN link: {text}"
    );
    assert!(
        min < 60.0,
        "fastest RTT {min} ms: the delay is applied more than once: {text}"
    );
    // The public host is not behind the WAN link: no delay.
    let _w = lab.serve("world", &[5001]);
    let out = lab.exec(
        "near-1",
        &[
            "rtt",
            &at(lab.addr("world"), 5001).to_string(),
            "--count",
            "10",
        ],
    );
    let min = check::field(&String::from_utf8_lossy(&out.stdout), "min").unwrap();
    assert!(
        min < 15.0,
        "RTT to the public host {min} ms: the WAN delay is applied"
    );

    // A public host in near's DMZ reaches far over near's WAN link.
    let _g = lab.serve("far-gw", &[5002]);
    let out = lab.exec(
        "relay",
        &[
            "rtt",
            &at(lab.addr("far-gw"), 5002).to_string(),
            "--count",
            "10",
        ],
    );
    let min = check::field(&String::from_utf8_lossy(&out.stdout), "min").unwrap();
    assert!(
        (floor..60.0).contains(&min),
        "RTT from near's DMZ to far {min} ms: not over the 30 ms WAN link"
    );

    // And `qcg-lab check` agrees, bandwidth included.
    let out = Command::new(QCG_LAB)
        .args(["check", "--prefix", &lab.prefix, "--secs", "1.5"])
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    eprintln!("qcg-lab check:\n{stdout}{stderr}");
    assert!(
        stdout.contains("near-far"),
        "no figures for near-far: {stdout}{stderr}"
    );
    // A busy machine can only make the link look slower (a longer RTT, a lower
    // goodput): that is left to `qcg-lab check` on a quiet one. A link faster than
    // its file, or a delay line that is not running, is the lab's fault.
    let problems: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("qcg-lab check: "))
        .collect();
    assert!(
        out.status.success() || !problems.is_empty(),
        "check failed: {stderr}"
    );
    for p in problems {
        let slower = (p.contains(": RTT ") && p.contains("off by +"))
            || (p.contains(": goodput ") && p.contains("off by -"));
        assert!(slower, "the lab does not match its file: {p}");
    }

    // A lab that does not match its file fails the check, naming the link and figures:
    // the state now claims 25 ms while the delay line keeps 15 ms.
    let path = qcg_lab::state::file(&lab.prefix);
    let mut st = qcg_lab::state::State::load(&lab.prefix).unwrap().unwrap();
    st.topology.wan[0].delay_ms = 25.0;
    std::fs::write(&path, serde_json::to_string(&st).unwrap()).unwrap();
    let out = Command::new(QCG_LAB)
        .args(["check", "--prefix", &lab.prefix, "--secs", "1"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("link near-far: RTT") && err.contains("expected 50.00 ms"),
        "{err}"
    );
}

#[test]
fn lab_exec_runs_in_the_host_and_passes_on_its_status() {
    let lab = Lab::up("ex", KINDS);
    let run = |host: &str, script: &str| {
        Command::new(QCG_LAB)
            .args([
                "exec",
                "--prefix",
                &lab.prefix,
                host,
                "--",
                "sh",
                "-c",
                script,
            ])
            .output()
            .unwrap()
    };
    let out = run("pp-1", "ip -4 -o addr show dev eth0");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("10.6.0.2/24"),
        "{out:?}"
    );
    assert_eq!(run("open-2", "exit 7").status.code(), Some(7));
    let out = run("nowhere", "true");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no host `nowhere`"),
        "{out:?}"
    );
    let out = Command::new(QCG_LAB)
        .args(["hosts", "--prefix", &lab.prefix])
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains(&format!("{}-rp-1", lab.prefix)) && table.contains("198.18.7.2"),
        "{table}"
    );
}

fn leftovers(prefix: &str) -> Vec<String> {
    let mut v: Vec<String> = sys::list_namespaces()
        .unwrap()
        .into_iter()
        .filter(|n| n.starts_with(&format!("{prefix}-")))
        .collect();
    let dir: PathBuf = qcg_lab::state::dir(prefix);
    if dir.exists() {
        v.push(dir.display().to_string());
    }
    v
}

#[test]
fn lab_down_removes_every_namespace_process_and_file() {
    let lab = Lab::up("dn", KINDS);
    let st = qcg_lab::state::State::load(&lab.prefix).unwrap().unwrap();
    let delay_line = st.delay_line_pid.unwrap();
    assert!(sys::alive(delay_line));
    assert_eq!(leftovers(&lab.prefix).len(), st.namespaces.len() + 1);
    // A process left running in the lab, as a user's `exec … &` would.
    let server = lab.serve("open-1", &[5000]);
    let out = lab.down();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    drop(server);
    assert_eq!(leftovers(&lab.prefix), Vec::<String>::new());
    assert!(!sys::alive(delay_line), "the delay line outlived down");
    // A second down says there is nothing.
    let again = lab.down();
    assert!(again.status.success());
    assert!(
        String::from_utf8_lossy(&again.stdout).contains("nothing"),
        "{:?}",
        again
    );
}

#[test]
fn lab_failed_up_removes_what_it_built() {
    require_lab();
    let prefix = format!("tfail{}", std::process::id() % 100_000);
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("topologies/paper.toml");
    let out = Command::new(QCG_LAB)
        .args(["up", "--prefix", &prefix])
        .arg(&path)
        .env("QCG_LAB_FAIL_AFTER", "namespaces")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("injected"),
        "{:?}",
        out
    );
    assert_eq!(leftovers(&prefix), Vec::<String>::new());
}

#[test]
fn lab_sigterm_during_up_removes_what_it_built() {
    require_lab();
    let prefix = format!("tterm{}", std::process::id() % 100_000);
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("topologies/four-sites.toml");
    let child = Command::new(QCG_LAB)
        .args(["up", "--prefix", &prefix])
        .arg(&path)
        .env("QCG_LAB_STEP_PAUSE_MS", "300")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Let it build some of the lab first.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while leftovers(&prefix).len() < 5 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(leftovers(&prefix).len() >= 5, "up did not start building");
    let pid = child.id().to_string();
    Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("interrupted"),
        "{:?}",
        out
    );
    assert_eq!(leftovers(&prefix), Vec::<String>::new());
}

#[test]
fn lab_down_without_a_lab_says_so() {
    require_lab();
    let out = Command::new(QCG_LAB)
        .args(["down", "--prefix", "tnone0"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("no lab `tnone0`"),
        "{out:?}"
    );
}
