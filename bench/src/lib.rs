//! Library side of `qcg-bench`: the network lab behind `qcg-lab` (see [`lab`]).
//!
//! ```no_run
//! use qcg_bench::lab::{ops, topo};
//! let t = topo::load(std::path::Path::new("bench/topologies/paper.toml"))?;
//! for h in t.hosts() {
//!     println!("{} {}", h.name, h.addr);
//! }
//! let lab = ops::up(std::path::Path::new("bench/topologies/paper.toml"), Some("demo"))?;
//! ops::down(&lab.prefix)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![forbid(unsafe_code)]

pub mod lab;
