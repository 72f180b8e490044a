//! qcg-lab: the network lab, a tool of its own (the `qcg-lab` binary) that the
//! benchmarks also use as a library.
//!
//! ```no_run
//! use qcg_lab::{ops, topo};
//! let t = topo::load(std::path::Path::new("lab/topologies/paper.toml"))?;
//! for h in t.hosts() {
//!     println!("{} {}", h.name, h.addr);
//! }
//! let lab = ops::up(std::path::Path::new("lab/topologies/paper.toml"), Some("demo"))?;
//! ops::down(&lab.prefix)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The network lab: a grid of sites built from Linux network namespaces, with real
//! firewalls and NATs (nftables), WAN delay (a userspace delay line on a TUN device,
//! since the kernel here has no netem) and WAN bandwidth (htb).
//!
//! ```text
//!   node ─┐                                                  ┌─ node
//!   node ─┤ lan (bridge)  site gw   wan        wan  site gw  ├─ node
//!         └──────────────[nft: fw, NAT]──s1─┐ ┌─s2──[nft]────┘
//!                                          core ── pub (bridge) ── broker, …
//!                               delay line (TUN "dline") + htb per source site
//! ```
//!
//! # Addressing
//!
//! Site `i` (from 1, in file order) has its LAN 10.i.0.0/24 (gateway .1, node `k` at
//! .k+1), its WAN link 198.18.i.0/24 (core .1, gateway .2: the NAT address), and, when
//! public hosts are attached there, a DMZ 198.19.i.0/24 (gateway .1, hosts .10+).
//! The internet segment is 198.18.0.0/24 (core .1, public hosts .10+). 198.18.0.0/15
//! is reserved for benchmarking. No namespace has a route out of the lab.
//!
//! # Names
//!
//! Hosts are `SITE-K` (nodes), `SITE-gw`, `core` and the public hosts' names; each is a
//! namespace `PREFIX-HOST`. Devices live inside those namespaces (`eth0`, `wan`, `lan`,
//! `s1`, `dline`, …), so two labs with different prefixes never share a name.
//!
//! # Modules
//!
//! [`topo`] parses the file (pure), [`plan`] turns it into commands (pure), [`ops`]
//! runs them and tears down, [`delay`] is the delay line, [`probe`] the traffic tools,
//! [`check`] the measurement of every WAN link.

#![deny(unsafe_code)]

pub mod check;
pub mod delay;
pub mod error;
pub mod grid;
pub mod harness;
pub mod ops;
pub mod plan;
pub mod probe;
pub mod state;
pub mod sys;
pub mod topo;

pub use error::{LabError, Result};

/// The `qcg-lab` binary: this one, or the one beside it (when the lab is driven from
/// `qcg-bench`).
pub fn qcg_lab_exe() -> std::io::Result<std::path::PathBuf> {
    let me = std::env::current_exe()?;
    if me.file_stem().is_some_and(|s| s == "qcg-lab") {
        return Ok(me);
    }
    let beside = me.with_file_name("qcg-lab");
    if beside.exists() {
        Ok(beside)
    } else {
        Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!(
                "{} not found (build it: cargo build -p qcg-lab)",
                beside.display()
            ),
        ))
    }
}
