//! What `up` does, as data: the namespaces, then `ip`, `nft` and `tc` batches per
//! namespace. Pure, so the rules can be read and tested without root.

use super::topo::{self, Nat, Role, Topology};
use qcg_proto::Policy;
use std::fmt::Write as _;

/// The TUN device of the delay line, in the core namespace.
pub const TUN: &str = "dline";
/// Routing table that sends inter-site traffic into the delay line.
pub const WAN_TABLE: u32 = 100;
/// Routing table that drops inter-site traffic if the delay line is gone (so a dead
/// delay line never silently yields a lab without delay).
pub const FALLBACK_TABLE: u32 = 101;

/// Everything `up` runs, in order.
#[derive(Debug, Default)]
pub struct Plan {
    /// Namespace names, created first and deleted by `down`.
    pub namespaces: Vec<String>,
    /// `ip -batch` lines run from the root namespace: the veth pairs, each end created
    /// directly in its namespace.
    pub links: Vec<String>,
    /// Per namespace, `ip -n NS -batch` lines: addresses, bridges, routes.
    pub setup: Vec<(String, Vec<String>)>,
    /// Per namespace, a `sh -c` script writing /proc/sys (forwarding, no IPv6, no
    /// bridge netfilter).
    pub sysctl: Vec<(String, String)>,
    /// Per gateway namespace, an nftables ruleset (firewall and NAT).
    pub nft: Vec<(String, String)>,
    /// Per namespace, `tc -n NS -batch` lines (bandwidth, in the core).
    pub tc: Vec<(String, Vec<String>)>,
    /// `ip -n CORE -batch` lines once the delay line's TUN exists.
    pub wan_routes: Vec<String>,
}

/// Namespace name of a host.
pub fn ns_name(prefix: &str, host: &str) -> String {
    format!("{prefix}-{host}")
}

/// Name of the core's veth toward site `i`.
pub fn core_if(i: u8) -> String {
    format!("s{i}")
}

/// The htb class (hex minor) for traffic coming from site `s`.
fn class_of(s: u8) -> String {
    format!("1:{:x}", 0x100 + u32::from(s))
}

/// The prefixes of site `i` that other sites can route to.
pub fn routable_prefixes(t: &Topology, i: u8) -> Vec<String> {
    let mut v = vec![format!("{}/24", topo::wan_net(i))];
    if t.site(i).is_some_and(|s| s.nat == Nat::None) {
        v.push(format!("{}/24", topo::lan_net(i)));
    }
    if !t.dmz_hosts(i).is_empty() {
        v.push(format!("{}/24", topo::dmz_net(i)));
    }
    v
}

/// The nftables ruleset of site `i`'s gateway.
pub fn gateway_ruleset(t: &Topology, i: u8) -> String {
    let Some(site) = t.site(i) else {
        return String::new();
    };
    let mut r = String::new();
    let inbound = r#"iifname "wan" oifname "lan""#;
    r.push_str("table inet qcglab {\n  chain forward {\n");
    r.push_str("    type filter hook forward priority filter; policy accept;\n");
    match site.firewall {
        Policy::Open => {}
        Policy::PortRange { lo, hi } => {
            let _ = writeln!(r, "    {inbound} ct state established,related accept");
            let _ = writeln!(
                r,
                "    {inbound} meta l4proto {{ tcp, udp }} th dport {lo}-{hi} accept"
            );
            let _ = writeln!(r, "    {inbound} drop");
        }
        // Stateless on purpose: no conntrack match, only the flags of this packet.
        Policy::SynBlock => {
            let _ = writeln!(r, "    {inbound} tcp flags & (syn | ack) == syn drop");
        }
        Policy::Closed => {
            let _ = writeln!(r, "    {inbound} ct state established,related accept");
            let _ = writeln!(r, "    {inbound} drop");
        }
    }
    r.push_str("  }\n}\n");
    if site.nat != Nat::None {
        let how = if site.nat == Nat::RandomPort {
            " random,fully-random"
        } else {
            ""
        };
        r.push_str("table ip qcglab_nat {\n  chain postrouting {\n");
        r.push_str("    type nat hook postrouting priority srcnat; policy accept;\n");
        let _ = writeln!(
            r,
            "    oifname \"wan\" ip saddr {}/24 masquerade{how}",
            topo::lan_net(i)
        );
        r.push_str("  }\n}\n");
    }
    r
}

/// Builds the plan for `t` with namespace prefix `prefix`.
pub fn plan(t: &Topology, prefix: &str) -> Plan {
    let mut p = Plan::default();
    let ns = |h: &str| ns_name(prefix, h);
    let core = ns("core");
    let hosts = t.hosts();
    p.namespaces = hosts.iter().map(|h| ns(&h.name)).collect();

    let base_sysctl = "echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6; \
                       echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6";
    let router_sysctl = format!(
        "{base_sysctl}; echo 1 > /proc/sys/net/ipv4/ip_forward; \
         for f in /proc/sys/net/bridge/bridge-nf-call-*; do [ -e \"$f\" ] && echo 0 > \"$f\"; done; true"
    );

    // The core: one veth per site, a bridge for the internet segment.
    let mut core_setup = vec!["link set lo up".to_string()];
    for (n, s) in t.sites.iter().enumerate() {
        let i = (n + 1) as u8;
        let gw = ns(&format!("{}-gw", s.name));
        let cif = core_if(i);
        p.links.push(format!(
            "link add {cif} netns {core} type veth peer name wan netns {gw}"
        ));
        core_setup.push(format!(
            "addr add {}/24 dev {cif}",
            topo::wan_net_host(i, 1)
        ));
        core_setup.push(format!("link set {cif} up"));
        let via = topo::gateway_addr(i);
        if s.nat == Nat::None {
            core_setup.push(format!("route add {}/24 via {via}", topo::lan_net(i)));
        }
        if !t.dmz_hosts(i).is_empty() {
            core_setup.push(format!("route add {}/24 via {via}", topo::dmz_net(i)));
        }
    }
    core_setup.push("link add pub type bridge".into());
    core_setup.push(format!("addr add {}/24 dev pub", topo::INTERNET_GW));
    core_setup.push("link set pub up".into());
    p.sysctl.push((core.clone(), router_sysctl.clone()));

    for h in &hosts {
        let hns = ns(&h.name);
        match h.role {
            Role::Core => {}
            Role::Gateway(i) => {
                let mut v = vec![
                    "link set lo up".to_string(),
                    format!("addr add {}/24 dev wan", h.addr),
                    "link set wan up".into(),
                    "link add lan type bridge".into(),
                    format!("addr add {}/24 dev lan", topo::lan_gw(i)),
                    "link set lan up".into(),
                ];
                let site_nodes = t.site(i).map_or(0, |s| s.nodes);
                for k in 1..=site_nodes {
                    v.push(format!("link set n{k} master lan"));
                    v.push(format!("link set n{k} up"));
                }
                let dmz = t.dmz_hosts(i);
                if !dmz.is_empty() {
                    v.push("link add dmz type bridge".into());
                    v.push(format!("addr add {}/24 dev dmz", topo::dmz_gw(i)));
                    v.push("link set dmz up".into());
                    for (j, _) in dmz {
                        v.push(format!("link set d{j} master dmz"));
                        v.push(format!("link set d{j} up"));
                    }
                }
                v.push(format!(
                    "route add default via {}",
                    topo::wan_net_host(i, 1)
                ));
                p.setup.push((hns.clone(), v));
                p.sysctl.push((hns.clone(), router_sysctl.clone()));
                p.nft.push((hns, gateway_ruleset(t, i)));
            }
            Role::Node(i, k) => {
                let gw = ns(&format!("{}-gw", t.site(i).map_or("", |s| s.name.as_str())));
                p.links.push(format!(
                    "link add n{k} netns {gw} type veth peer name eth0 netns {hns}"
                ));
                p.setup.push((
                    hns.clone(),
                    vec![
                        "link set lo up".into(),
                        format!("addr add {}/24 dev eth0", h.addr),
                        "link set eth0 up".into(),
                        format!("route add default via {}", topo::lan_gw(i)),
                    ],
                ));
                p.sysctl.push((hns, base_sysctl.to_string()));
            }
            Role::Public(j, site) => {
                let (attach, port, gw_addr) = match site {
                    Some(i) => {
                        let name = t.site(i).map_or("", |s| s.name.as_str());
                        (ns(&format!("{name}-gw")), format!("d{j}"), topo::dmz_gw(i))
                    }
                    None => {
                        core_setup.push(format!("link set p{j} master pub"));
                        core_setup.push(format!("link set p{j} up"));
                        (core.clone(), format!("p{j}"), topo::INTERNET_GW)
                    }
                };
                p.links.push(format!(
                    "link add {port} netns {attach} type veth peer name eth0 netns {hns}"
                ));
                p.setup.push((
                    hns.clone(),
                    vec![
                        "link set lo up".into(),
                        format!("addr add {}/24 dev eth0", h.addr),
                        "link set eth0 up".into(),
                        format!("route add default via {gw_addr}"),
                    ],
                ));
                p.sysctl.push((hns, base_sysctl.to_string()));
            }
        }
    }
    // The core's setup goes first: gateways' default routes need nothing from it, but
    // reading the plan top-down is easier with the core on top.
    p.setup.insert(0, (core.clone(), core_setup));

    // Bandwidth: on the core's veth toward site d, one htb class per site s linked to
    // d, fed by u32 filters on the source prefixes of s. Everything else (the internet
    // segment) goes to an unshaped default class.
    let mut tc = Vec::new();
    for (n, _) in t.sites.iter().enumerate() {
        let d = (n + 1) as u8;
        let links: Vec<(u8, &topo::WanLink)> = (1..=t.sites.len() as u8)
            .filter(|&s| s != d)
            .filter_map(|s| t.link(s, d).map(|l| (s, l)))
            .collect();
        if links.is_empty() {
            continue;
        }
        let dev = core_if(d);
        tc.push(format!("qdisc add dev {dev} root handle 1: htb default 1"));
        tc.push(format!(
            "class add dev {dev} parent 1: classid 1:1 htb rate 10gbit"
        ));
        for (s, l) in links {
            let kbit = (l.bandwidth_mbit * 1000.0).round().max(1.0) as u64;
            let class = class_of(s);
            tc.push(format!(
                "class add dev {dev} parent 1: classid {class} htb rate {kbit}kbit ceil {kbit}kbit"
            ));
            // A queue of twice the bandwidth-delay product (at least 64 KiB): deep
            // enough for TCP to fill the link, not a second of bufferbloat.
            let bdp = l.bandwidth_mbit * 1e6 / 8.0 * (2.0 * l.delay_ms / 1e3);
            let limit = (2.0 * bdp).max(65536.0) as u64;
            tc.push(format!(
                "qdisc add dev {dev} parent {class} bfifo limit {limit}"
            ));
            for pfx in routable_prefixes(t, s) {
                tc.push(format!(
                    "filter add dev {dev} parent 1: protocol ip prio 1 u32 match ip src {pfx} flowid {class}"
                ));
            }
        }
    }
    if !tc.is_empty() {
        p.tc.push((core.clone(), tc));
    }

    // Delay: traffic entering the core from a site and bound for another site is
    // policy-routed into the delay line's TUN; what the delay line writes back comes in
    // on the TUN and is routed by the main table.
    for (n, _) in t.sites.iter().enumerate() {
        let i = (n + 1) as u8;
        for pfx in routable_prefixes(t, i) {
            p.wan_routes
                .push(format!("route add {pfx} dev {TUN} table {WAN_TABLE}"));
            p.wan_routes
                .push(format!("route add blackhole {pfx} table {FALLBACK_TABLE}"));
        }
    }
    for (n, _) in t.sites.iter().enumerate() {
        let cif = core_if((n + 1) as u8);
        p.wan_routes
            .push(format!("rule add iif {cif} lookup {WAN_TABLE} pref 100"));
        p.wan_routes.push(format!(
            "rule add iif {cif} lookup {FALLBACK_TABLE} pref 101"
        ));
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn topo(text: &str) -> Topology {
        topo::parse(Path::new("t.toml"), text).unwrap()
    }

    const T: &str = r#"
[[site]]
name = "a"
nodes = 2
nat = "random-port"
firewall = "syn-block"
[[site]]
name = "b"
nodes = 1
nat = "none"
firewall = "port-range 5000-5100"
[[public]]
name = "broker"
[[wan]]
sites = ["a", "b"]
delay_ms = 5
bandwidth_mbit = 100
"#;

    #[test]
    fn namespaces_carry_the_prefix() {
        let p = plan(&topo(T), "zz");
        assert!(p.namespaces.iter().all(|n| n.starts_with("zz-")));
        assert!(p.namespaces.contains(&"zz-a-2".to_string()));
        assert!(p.namespaces.contains(&"zz-b-gw".to_string()));
        assert!(p.namespaces.contains(&"zz-broker".to_string()));
        for l in &p.links {
            assert!(l.matches(" netns zz-").count() == 2, "{l}");
        }
    }

    #[test]
    fn firewall_and_nat_rules() {
        let t = topo(T);
        let a = gateway_ruleset(&t, 1);
        assert!(a.contains("tcp flags & (syn | ack) == syn drop"), "{a}");
        assert!(!a.contains("ct state"), "syn-block must be stateless: {a}");
        assert!(a.contains("masquerade random,fully-random"), "{a}");
        let b = gateway_ruleset(&t, 2);
        assert!(b.contains("th dport 5000-5100 accept"), "{b}");
        assert!(!b.contains("masquerade"), "{b}");
    }

    #[test]
    fn shaping_and_wan_routes() {
        let p = plan(&topo(T), "zz");
        let tc = &p.tc[0].1;
        assert!(tc
            .iter()
            .any(|l| l.contains("dev s2 parent 1: classid 1:101 htb rate 100000kbit")));
        // Site a is behind NAT: only its WAN prefix is routable and filtered.
        assert!(tc
            .iter()
            .any(|l| l.contains("dev s2") && l.contains("match ip src 198.18.1.0/24")));
        assert!(!tc.iter().any(|l| l.contains("10.1.0.0/24")));
        assert!(p
            .wan_routes
            .iter()
            .any(|l| l == "route add 10.2.0.0/24 dev dline table 100"));
        assert!(p
            .wan_routes
            .iter()
            .any(|l| l == "rule add iif s1 lookup 100 pref 100"));
    }
}
