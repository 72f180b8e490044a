//! `qcg-lab check`: measures every WAN link of a running lab with real traffic and
//! compares with the topology file.
//!
//! Per link A–B: the median RTT of UDP echoes from a node of A to a host of B, against
//! twice the one-way delay; then a bulk TCP transfer each way, whose goodput is compared
//! with the bandwidth less the headers (tc counts whole Ethernet frames; a full TCP
//! segment carries 1448 bytes of data in a 1514-byte frame). Either off by more than
//! [`TOLERANCE`] fails the check.
//!
//! The far end is a node of B when B's firewall lets the probe's port in and B has no
//! NAT; otherwise B's gateway, which sits behind the same WAN link but in front of the
//! firewall. Either way the packets cross the core, the delay line and the shaper.

use super::error::{LabError, Result};
use super::plan;
use super::state::State;
use super::sys;
use super::topo::{self, Nat, Topology};
use qcg_proto::Policy;
use std::io::{BufRead, BufReader};
use std::net::{Ipv4Addr, SocketAddr};
use std::process::{Child, Command, Stdio};

/// Largest relative error accepted.
pub const TOLERANCE: f64 = 0.10;
/// Smallest absolute RTT error always accepted, in ms: the lab's own hops (veths, two
/// routers, the delay line's wake-up) cost some tens of microseconds, which is more
/// than 10% of a sub-millisecond RTT.
pub const RTT_FLOOR_MS: f64 = 0.5;
/// Data in a full TCP segment over its frame on the wire (timestamps on, MTU 1500).
pub const GOODPUT_RATIO: f64 = 1448.0 / 1514.0;
/// Port probes use, unless the site's port range says otherwise.
pub const PROBE_PORT: u16 = 47000;

/// Measured figures of one WAN link.
#[derive(Clone, Debug)]
pub struct LinkFigures {
    /// `A-B`.
    pub link: String,
    /// From the file.
    pub delay_ms: f64,
    /// From the file.
    pub bandwidth_mbit: f64,
    /// Median measured RTT.
    pub rtt_ms: f64,
    /// Goodput A → B.
    pub goodput_ab: f64,
    /// Goodput B → A.
    pub goodput_ba: f64,
}

/// The problems with a link's figures; empty when within tolerance.
pub fn judge(f: &LinkFigures) -> Vec<String> {
    let mut v = Vec::new();
    let want_rtt = 2.0 * f.delay_ms;
    let off = f.rtt_ms - want_rtt;
    if off.abs() > (TOLERANCE * want_rtt).max(RTT_FLOOR_MS) {
        v.push(format!(
            "link {}: RTT {:.2} ms, expected {:.2} ms (2 × {} ms), off by {:+.1}%",
            f.link,
            f.rtt_ms,
            want_rtt,
            f.delay_ms,
            100.0 * off / want_rtt.max(1e-9)
        ));
    }
    let want_bw = f.bandwidth_mbit * GOODPUT_RATIO;
    for (dir, got) in [("→", f.goodput_ab), ("←", f.goodput_ba)] {
        let off = (got - want_bw) / want_bw;
        if off.abs() > TOLERANCE {
            v.push(format!(
                "link {} ({dir}): goodput {:.1} Mbit/s, expected {:.1} ({} Mbit/s on the wire), off by {:+.1}%",
                f.link,
                got,
                want_bw,
                f.bandwidth_mbit,
                100.0 * off
            ));
        }
    }
    v
}

/// One line of figures for a link.
pub fn describe(f: &LinkFigures) -> String {
    let want_rtt = 2.0 * f.delay_ms;
    let want_bw = f.bandwidth_mbit * GOODPUT_RATIO;
    format!(
        "{:<22} rtt {:>7.2} ms (want {:>6.2}, {:+5.1}%)   goodput → {:>6.1} ← {:>6.1} Mbit/s (want {:>6.1} = {} Mbit/s on the wire, {:+5.1}% {:+5.1}%)",
        f.link,
        f.rtt_ms,
        want_rtt,
        100.0 * (f.rtt_ms - want_rtt) / want_rtt.max(1e-9),
        f.goodput_ab,
        f.goodput_ba,
        want_bw,
        f.bandwidth_mbit,
        100.0 * (f.goodput_ab - want_bw) / want_bw,
        100.0 * (f.goodput_ba - want_bw) / want_bw,
    )
}

/// The host of site `i` that accepts probes from other sites, and the port.
pub fn probe_target(t: &Topology, i: u8) -> (String, Ipv4Addr, u16) {
    let Some(site) = t.site(i) else {
        return (String::new(), Ipv4Addr::UNSPECIFIED, PROBE_PORT);
    };
    let (node_ok, port) = match site.firewall {
        Policy::Open => (true, PROBE_PORT),
        Policy::PortRange { lo, .. } => (true, lo),
        Policy::SynBlock | Policy::Closed => (false, PROBE_PORT),
    };
    if node_ok && site.nat == Nat::None {
        (format!("{}-1", site.name), topo::node_addr(i, 1), port)
    } else {
        (format!("{}-gw", site.name), topo::gateway_addr(i), port)
    }
}

/// A server started in a namespace, stopped on drop.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn in_ns(st: &State, host: &str, args: &[&str]) -> Result<Command> {
    let exe = crate::qcg_lab_exe().map_err(|e| LabError::io("finding qcg-lab", e))?;
    let mut c = Command::new("ip");
    c.args(["netns", "exec", &plan::ns_name(&st.prefix, host)])
        .arg(exe)
        .args(args);
    Ok(c)
}

fn start_server(st: &State, host: &str, port: u16, secs: u64) -> Result<Server> {
    let mut child = in_ns(
        st,
        host,
        &[
            "serve",
            "--port",
            &port.to_string(),
            "--for-secs",
            &secs.to_string(),
        ],
    )?
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .map_err(|e| LabError::io(format!("starting a probe server on {host}"), e))?;
    let mut line = String::new();
    if let Some(out) = child.stdout.take() {
        let _ = BufReader::new(out).read_line(&mut line);
    }
    let server = Server(child);
    if line.trim() != "listening" {
        return Err(LabError::Probe(format!(
            "the probe server on {host} (port {port}) did not start"
        )));
    }
    Ok(server)
}

fn run_client(st: &State, host: &str, args: &[&str]) -> Result<String> {
    let out = in_ns(st, host, args)?
        .stdin(Stdio::null())
        .output()
        .map_err(|e| LabError::io(format!("running a probe on {host}"), e))?;
    if !out.status.success() {
        return Err(LabError::Probe(format!(
            "probe `{}` on {host} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Value after `key=` in `text`.
pub fn field(text: &str, key: &str) -> Option<f64> {
    text.split_whitespace()
        .find_map(|w| w.strip_prefix(key)?.strip_prefix('=')?.parse().ok())
}

fn goodput(st: &State, from: u8, to: u8, secs: f64) -> Result<f64> {
    let t = &st.topology;
    let client = format!("{}-1", t.site(from).map_or("", |s| s.name.as_str()));
    let (host, addr, port) = probe_target(t, to);
    let _server = start_server(st, &host, port, 60)?;
    let out = run_client(
        st,
        &client,
        &[
            "source",
            &SocketAddr::from((addr, port)).to_string(),
            "--secs",
            &secs.to_string(),
        ],
    )?;
    field(&out, "goodput_mbit")
        .ok_or_else(|| LabError::Probe(format!("no goodput in `{}`", out.trim())))
}

/// Measures one link.
pub fn measure(st: &State, a: u8, b: u8, secs: f64) -> Result<LinkFigures> {
    let t = &st.topology;
    let (Some(sa), Some(sb), Some(link)) = (t.site(a), t.site(b), t.link(a, b)) else {
        return Err(LabError::Probe(format!(
            "no link between sites {a} and {b}"
        )));
    };
    let name = format!("{}-{}", sa.name, sb.name);
    let (host, addr, port) = probe_target(t, b);
    let rtt_out = {
        let _server = start_server(st, &host, port, 60)?;
        run_client(
            st,
            &format!("{}-1", sa.name),
            &[
                "rtt",
                &SocketAddr::from((addr, port)).to_string(),
                "--count",
                "30",
            ],
        )?
    };
    let rtt_ms = field(&rtt_out, "median")
        .ok_or_else(|| LabError::Probe(format!("no RTT in `{}`", rtt_out.trim())))?;
    sys::check_interrupted()?;
    let goodput_ab = goodput(st, a, b, secs)?;
    sys::check_interrupted()?;
    let goodput_ba = goodput(st, b, a, secs)?;
    Ok(LinkFigures {
        link: name,
        delay_ms: link.delay_ms,
        bandwidth_mbit: link.bandwidth_mbit,
        rtt_ms,
        goodput_ab,
        goodput_ba,
    })
}

/// Measures every WAN link; prints a line per link to `out` as it goes. Returns the
/// figures and the problems found.
pub fn check(
    st: &State,
    secs: f64,
    out: &mut dyn std::io::Write,
) -> Result<(Vec<LinkFigures>, Vec<String>)> {
    let mut problems = Vec::new();
    match st.delay_line_pid {
        Some(pid) if sys::alive(pid) => {}
        _ => problems.push("the delay line is not running: run down and up again".to_string()),
    }
    let mut all = Vec::new();
    for w in &st.topology.wan {
        sys::check_interrupted()?;
        let (Some(a), Some(b)) = (st.topology.site_index(&w.a), st.topology.site_index(&w.b))
        else {
            continue;
        };
        let f = measure(st, a, b, secs)?;
        let _ = writeln!(out, "{}", describe(&f));
        problems.extend(judge(&f));
        all.push(f);
    }
    Ok((all, problems))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fig(rtt: f64, ab: f64, ba: f64) -> LinkFigures {
        LinkFigures {
            link: "a-b".into(),
            delay_ms: 10.0,
            bandwidth_mbit: 100.0,
            rtt_ms: rtt,
            goodput_ab: ab,
            goodput_ba: ba,
        }
    }

    #[test]
    fn judges_within_ten_percent() {
        let good = 100.0 * GOODPUT_RATIO;
        assert!(judge(&fig(20.5, good, good * 0.95)).is_empty());
        let p = judge(&fig(23.0, good, good));
        assert_eq!(p.len(), 1);
        assert!(p[0].contains("link a-b: RTT 23.00 ms"), "{p:?}");
        let p = judge(&fig(20.0, good * 0.8, good));
        assert!(p[0].contains("goodput") && p[0].contains("-20.0%"), "{p:?}");
    }

    #[test]
    fn parses_fields() {
        assert_eq!(
            field("rtt_ms min=1.5 median=2.25 max=3", "median"),
            Some(2.25)
        );
        assert_eq!(field("goodput_mbit=99.5", "goodput_mbit"), Some(99.5));
        assert_eq!(field("x=1", "y"), None);
    }
}
