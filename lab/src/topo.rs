//! The topology file: parsing into validated types, and the lab's addressing plan.
//!
//! Parsing is pure: `parse(path, text)` never touches the system, so every rule about
//! what a file may say is tested without root.

use qcg_proto::config::{self, ConfigError};
use qcg_proto::Policy;
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::fmt;
use std::net::Ipv4Addr;
use std::ops::Range;
use std::path::Path;
use toml::Spanned;

/// Most nodes a site may have (addresses 10.S.0.2 ..).
pub const MAX_NODES: u32 = 200;
/// Most sites a lab may have (third octet of 198.18.S.0/24).
pub const MAX_SITES: usize = 250;
/// Most public hosts, in all (10 .. 250 in the last octet).
pub const MAX_PUBLIC: usize = 200;
/// Longest one-way delay accepted, in milliseconds.
pub const MAX_DELAY_MS: f64 = 10_000.0;
/// Highest bandwidth accepted, in Mbit/s.
pub const MAX_BANDWIDTH_MBIT: f64 = 10_000.0;

/// Network address translation at a site's gateway, for traffic from its nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Nat {
    /// Nodes have routable addresses.
    None,
    /// Nodes leave with the gateway's address and, when it is free, their own port.
    PortPreserving,
    /// Nodes leave with the gateway's address and a random port per connection.
    RandomPort,
}

impl fmt::Display for Nat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Nat::None => "none",
            Nat::PortPreserving => "port-preserving",
            Nat::RandomPort => "random-port",
        })
    }
}

/// A site: a gateway, its nodes on a LAN, a NAT and a firewall.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Site {
    /// Name, unique in the lab; nodes are `NAME-1` .., the gateway `NAME-gw`.
    pub name: String,
    /// Number of nodes.
    pub nodes: u32,
    /// NAT for the nodes' outbound traffic.
    pub nat: Nat,
    /// Inbound firewall toward the nodes (the gateway itself is not filtered).
    pub firewall: Policy,
}

/// A host on the public side: on the lab's internet segment, or in a site's DMZ.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PublicHost {
    /// Name, unique among all hosts.
    pub name: String,
    /// When set, the host hangs off this site's gateway (a DMZ: public address, no
    /// firewall, no NAT) and reaches other sites over that site's WAN links.
    pub site: Option<String>,
}

/// A WAN link between two sites.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WanLink {
    /// One end.
    pub a: String,
    /// The other end.
    pub b: String,
    /// One-way delay, milliseconds.
    pub delay_ms: f64,
    /// Bandwidth each way, Mbit/s (10^6 bit/s, counted on the wire as tc does).
    pub bandwidth_mbit: f64,
}

/// A validated topology.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Topology {
    /// Prefix for namespace names, when the file gives one.
    pub prefix: Option<String>,
    /// Sites, in file order (site `i` in this list has index `i + 1`).
    pub sites: Vec<Site>,
    /// Public hosts, in file order.
    pub public: Vec<PublicHost>,
    /// WAN links.
    pub wan: Vec<WanLink>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTopology {
    prefix: Option<Spanned<String>>,
    #[serde(default)]
    site: Vec<RawSite>,
    #[serde(default)]
    public: Vec<RawPublic>,
    #[serde(default)]
    wan: Vec<RawWan>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSite {
    name: Spanned<String>,
    nodes: Spanned<u32>,
    nat: Nat,
    firewall: Policy,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPublic {
    name: Spanned<String>,
    site: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWan {
    sites: Spanned<[Spanned<String>; 2]>,
    delay_ms: Spanned<Number>,
    bandwidth_mbit: Spanned<Number>,
}

/// A plain number: TOML integer or float, never a string with a unit.
struct Number(f64);

impl<'de> Deserialize<'de> for Number {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Number;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a plain number (milliseconds or Mbit/s, no unit), e.g. 10.3")
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Number, E> {
                Ok(Number(v))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Number, E> {
                Ok(Number(v as f64))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Number, E> {
                Ok(Number(v as f64))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Number, E> {
                Err(E::custom(format!(
                    "`{v}` is a string: write a plain number without unit or quotes \
                     (delay_ms = 10.3, bandwidth_mbit = 136)"
                )))
            }
        }
        d.deserialize_any(V)
    }
}

/// An error at a byte span of `text`.
fn at(path: &Path, text: &str, span: Range<usize>, field: &str, msg: String) -> ConfigError {
    let start = span.start.min(text.len());
    let before = &text[..start];
    let line = before.matches('\n').count() + 1;
    let col = start - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    ConfigError {
        path: path.to_path_buf(),
        line: Some(line),
        column: Some(col),
        field: Some(field.to_string()),
        message: msg,
    }
}

/// Whether `s` is a valid name: lowercase ASCII letter, then letters and digits.
fn valid_name(s: &str, max: usize) -> bool {
    let mut c = s.chars();
    c.next().is_some_and(|c| c.is_ascii_lowercase())
        && s.len() <= max
        && c.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
}

/// Checks a lab prefix: 1-12 lowercase letters and digits, starting with a letter.
pub fn check_prefix(p: &str) -> Result<(), String> {
    if valid_name(p, 12) {
        Ok(())
    } else {
        Err(format!(
            "bad prefix `{p}`: 1-12 lowercase letters and digits, starting with a letter"
        ))
    }
}

/// Parses and validates a topology read from `path`.
pub fn parse(path: &Path, text: &str) -> Result<Topology, ConfigError> {
    let raw: RawTopology = config::parse(path, text)?;
    let err = |span: Range<usize>, field: &str, msg: String| at(path, text, span, field, msg);

    if let Some(p) = &raw.prefix {
        check_prefix(p.get_ref()).map_err(|m| err(p.span(), "prefix", m))?;
    }
    if raw.site.is_empty() {
        return Err(ConfigError {
            path: path.to_path_buf(),
            line: None,
            column: None,
            field: Some("site".into()),
            message: "no [[site]]: a lab needs at least one site".into(),
        });
    }
    if raw.site.len() > MAX_SITES {
        return Err(err(
            raw.site[MAX_SITES].name.span(),
            "site",
            format!("too many sites: at most {MAX_SITES}"),
        ));
    }
    let mut names: HashSet<String> = HashSet::new();
    names.insert("core".into());
    let mut sites = Vec::new();
    for s in &raw.site {
        let name = s.name.get_ref();
        if !valid_name(name, 20) {
            return Err(err(
                s.name.span(),
                "name",
                format!(
                    "bad site name `{name}`: 1-20 lowercase letters and digits, \
                     starting with a letter"
                ),
            ));
        }
        if !names.insert(name.clone()) {
            return Err(err(
                s.name.span(),
                "name",
                format!("duplicate name `{name}` (names of sites and public hosts are unique; `core` is taken)"),
            ));
        }
        let nodes = *s.nodes.get_ref();
        if nodes == 0 || nodes > MAX_NODES {
            return Err(err(
                s.nodes.span(),
                "nodes",
                format!("{nodes} nodes: a site has 1 to {MAX_NODES}"),
            ));
        }
        sites.push(Site {
            name: name.clone(),
            nodes,
            nat: s.nat,
            firewall: s.firewall,
        });
    }
    let site_names: HashSet<&str> = sites.iter().map(|s| s.name.as_str()).collect();

    if raw.public.len() > MAX_PUBLIC {
        return Err(err(
            raw.public[MAX_PUBLIC].name.span(),
            "public",
            format!("too many public hosts: at most {MAX_PUBLIC}"),
        ));
    }
    let mut public = Vec::new();
    for p in &raw.public {
        let name = p.name.get_ref();
        if !valid_name(name, 20) {
            return Err(err(
                p.name.span(),
                "name",
                format!(
                    "bad host name `{name}`: 1-20 lowercase letters and digits, \
                     starting with a letter"
                ),
            ));
        }
        if !names.insert(name.clone()) {
            return Err(err(
                p.name.span(),
                "name",
                format!("duplicate name `{name}` (names of sites and public hosts are unique; `core` is taken)"),
            ));
        }
        let site = match &p.site {
            Some(s) if !site_names.contains(s.get_ref().as_str()) => {
                return Err(err(
                    s.span(),
                    "site",
                    format!("unknown site `{}`", s.get_ref()),
                ))
            }
            Some(s) => Some(s.get_ref().clone()),
            None => None,
        };
        public.push(PublicHost {
            name: name.clone(),
            site,
        });
    }

    let mut pairs: HashSet<(String, String)> = HashSet::new();
    let mut wan = Vec::new();
    for w in &raw.wan {
        let [a, b] = w.sites.get_ref();
        for s in [a, b] {
            if !site_names.contains(s.get_ref().as_str()) {
                return Err(err(
                    s.span(),
                    "sites",
                    format!("unknown site `{}`", s.get_ref()),
                ));
            }
        }
        let (a_name, b_name) = (a.get_ref().clone(), b.get_ref().clone());
        if a_name == b_name {
            return Err(err(
                w.sites.span(),
                "sites",
                format!("a WAN link joins two different sites, not `{a_name}` to itself"),
            ));
        }
        let key = if a_name < b_name {
            (a_name.clone(), b_name.clone())
        } else {
            (b_name.clone(), a_name.clone())
        };
        if !pairs.insert(key) {
            return Err(err(
                w.sites.span(),
                "sites",
                format!("a second WAN link between `{a_name}` and `{b_name}`"),
            ));
        }
        let delay = w.delay_ms.get_ref().0;
        if !delay.is_finite() || !(0.0..=MAX_DELAY_MS).contains(&delay) {
            return Err(err(
                w.delay_ms.span(),
                "delay_ms",
                format!("delay {delay} ms: a one-way delay is 0 to {MAX_DELAY_MS} ms"),
            ));
        }
        let bw = w.bandwidth_mbit.get_ref().0;
        if !bw.is_finite() || !(0.01..=MAX_BANDWIDTH_MBIT).contains(&bw) {
            return Err(err(
                w.bandwidth_mbit.span(),
                "bandwidth_mbit",
                format!("bandwidth {bw} Mbit/s: it is 0.01 to {MAX_BANDWIDTH_MBIT} Mbit/s"),
            ));
        }
        wan.push(WanLink {
            a: a_name,
            b: b_name,
            delay_ms: delay,
            bandwidth_mbit: bw,
        });
    }
    Ok(Topology {
        prefix: raw.prefix.map(|p| p.into_inner()),
        sites,
        public,
        wan,
    })
}

/// Reads and parses a topology file.
pub fn load(path: &Path) -> Result<Topology, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
        path: path.to_path_buf(),
        line: None,
        column: None,
        field: None,
        message: format!("cannot read: {e}"),
    })?;
    parse(path, &text)
}

/// What a host is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Role {
    /// The core router: WAN links, the internet segment, the delay line.
    Core,
    /// A site's gateway (index of the site, from 1).
    Gateway(u8),
    /// A node (site index from 1, node number from 1).
    Node(u8, u32),
    /// A public host (its number from 0, and the site index if in a DMZ).
    Public(usize, Option<u8>),
}

/// One host of the lab, with its addresses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Host {
    /// Name used by `qcg-lab exec`.
    pub name: String,
    /// What it is.
    pub role: Role,
    /// Its address (for a gateway, the WAN side).
    pub addr: Ipv4Addr,
    /// The address others see it with, when NAT makes it differ.
    pub public_addr: Option<Ipv4Addr>,
}

/// The internet segment, on a bridge in the core.
pub const INTERNET_NET: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 0);

/// Site `i`'s LAN: 10.i.0.0/24.
pub fn lan_net(i: u8) -> Ipv4Addr {
    Ipv4Addr::new(10, i, 0, 0)
}
/// Site `i`'s WAN link to the core: 198.18.i.0/24 (core .1, gateway .2).
pub fn wan_net(i: u8) -> Ipv4Addr {
    Ipv4Addr::new(198, 18, i, 0)
}
/// Site `i`'s DMZ for public hosts attached there: 198.19.i.0/24 (gateway .1).
pub fn dmz_net(i: u8) -> Ipv4Addr {
    Ipv4Addr::new(198, 19, i, 0)
}
/// Host `h` on site `i`'s WAN link (1 = the core, 2 = the gateway).
pub fn wan_net_host(i: u8, h: u8) -> Ipv4Addr {
    Ipv4Addr::new(198, 18, i, h)
}
/// The gateway's address on its LAN.
pub fn lan_gw(i: u8) -> Ipv4Addr {
    Ipv4Addr::new(10, i, 0, 1)
}
/// The gateway's address on its DMZ.
pub fn dmz_gw(i: u8) -> Ipv4Addr {
    Ipv4Addr::new(198, 19, i, 1)
}
/// The core's address on the internet segment.
pub const INTERNET_GW: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
/// Address of node `k` (from 1) of site `i`.
pub fn node_addr(i: u8, k: u32) -> Ipv4Addr {
    Ipv4Addr::new(10, i, 0, (k + 1) as u8)
}
/// The gateway's address on its WAN link (also its NAT address).
pub fn gateway_addr(i: u8) -> Ipv4Addr {
    Ipv4Addr::new(198, 18, i, 2)
}

/// The site an address belongs to, for the delay line: 10.i/16, 198.18.i/24 (i ≥ 1)
/// and 198.19.i/24 are site `i`; anything else (the internet segment) is none.
pub fn site_of(ip: Ipv4Addr) -> Option<u8> {
    match ip.octets() {
        [10, i, _, _] if i > 0 => Some(i),
        [198, 18, i, _] if i > 0 => Some(i),
        [198, 19, i, _] if i > 0 => Some(i),
        _ => None,
    }
}

impl Topology {
    /// Index (from 1) of a site by name.
    pub fn site_index(&self, name: &str) -> Option<u8> {
        self.sites
            .iter()
            .position(|s| s.name == name)
            .map(|i| (i + 1) as u8)
    }

    /// The site with index `i` (from 1).
    pub fn site(&self, i: u8) -> Option<&Site> {
        self.sites.get(usize::from(i).checked_sub(1)?)
    }

    /// Public hosts attached at site `i`, with their numbers.
    pub fn dmz_hosts(&self, i: u8) -> Vec<(usize, &PublicHost)> {
        self.public
            .iter()
            .enumerate()
            .filter(|(_, p)| p.site.as_deref().and_then(|s| self.site_index(s)) == Some(i))
            .collect()
    }

    /// Every host of the lab: core, then per site its gateway and nodes, then public hosts.
    pub fn hosts(&self) -> Vec<Host> {
        let mut v = vec![Host {
            name: "core".into(),
            role: Role::Core,
            addr: Ipv4Addr::new(198, 18, 0, 1),
            public_addr: None,
        }];
        for (n, s) in self.sites.iter().enumerate() {
            let i = (n + 1) as u8;
            v.push(Host {
                name: format!("{}-gw", s.name),
                role: Role::Gateway(i),
                addr: gateway_addr(i),
                public_addr: None,
            });
            for k in 1..=s.nodes {
                v.push(Host {
                    name: format!("{}-{k}", s.name),
                    role: Role::Node(i, k),
                    addr: node_addr(i, k),
                    public_addr: (s.nat != Nat::None).then(|| gateway_addr(i)),
                });
            }
        }
        for (j, p) in self.public.iter().enumerate() {
            let site = p.site.as_deref().and_then(|s| self.site_index(s));
            let last = (10 + j) as u8;
            let addr = match site {
                Some(i) => Ipv4Addr::new(198, 19, i, last),
                None => Ipv4Addr::new(198, 18, 0, last),
            };
            v.push(Host {
                name: p.name.clone(),
                role: Role::Public(j, site),
                addr,
                public_addr: None,
            });
        }
        v
    }

    /// A host by name.
    pub fn host(&self, name: &str) -> Option<Host> {
        self.hosts().into_iter().find(|h| h.name == name)
    }

    /// The WAN link between sites `a` and `b` (indices from 1), either way round.
    pub fn link(&self, a: u8, b: u8) -> Option<&WanLink> {
        self.wan.iter().find(|w| {
            let (x, y) = (self.site_index(&w.a), self.site_index(&w.b));
            (x == Some(a) && y == Some(b)) || (x == Some(b) && y == Some(a))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
prefix = "ql"

[[site]]
name = "orsay"
nodes = 2
nat = "none"
firewall = "open"

[[site]]
name = "rennes"
nodes = 1
nat = "port-preserving"
firewall = "port-range 5000-5100"

[[public]]
name = "broker"

[[public]]
name = "proxy"
site = "orsay"

[[wan]]
sites = ["orsay", "rennes"]
delay_ms = 10.3
bandwidth_mbit = 136
"#;

    #[test]
    fn parses_and_addresses() {
        let t = parse(Path::new("t.toml"), GOOD).unwrap();
        assert_eq!(t.sites.len(), 2);
        assert_eq!(
            t.sites[1].firewall,
            Policy::PortRange { lo: 5000, hi: 5100 }
        );
        assert_eq!(t.wan[0].delay_ms, 10.3);
        assert_eq!(t.wan[0].bandwidth_mbit, 136.0);
        let hosts = t.hosts();
        let names: Vec<_> = hosts.iter().map(|h| h.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "core",
                "orsay-gw",
                "orsay-1",
                "orsay-2",
                "rennes-gw",
                "rennes-1",
                "broker",
                "proxy"
            ]
        );
        let r1 = t.host("rennes-1").unwrap();
        assert_eq!(r1.addr, Ipv4Addr::new(10, 2, 0, 2));
        assert_eq!(r1.public_addr, Some(Ipv4Addr::new(198, 18, 2, 2)));
        assert_eq!(t.host("proxy").unwrap().addr, Ipv4Addr::new(198, 19, 1, 11));
        assert_eq!(
            t.host("broker").unwrap().addr,
            Ipv4Addr::new(198, 18, 0, 10)
        );
        assert!(t.link(2, 1).is_some());
        assert_eq!(site_of(Ipv4Addr::new(198, 19, 1, 11)), Some(1));
        assert_eq!(site_of(Ipv4Addr::new(198, 18, 0, 10)), None);
    }
}
