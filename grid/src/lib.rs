//! qcg-grid: a whole qcg grid on one machine, for the `qcg` command, the benchmarks
//! and the tests.
//!
//! - [`Grid`]: the embedded grid, every service (a broker, a frontal per cluster,
//!   helpers, relay proxies) in this process on loopback under an ephemeral CA. What
//!   `qcg run` and `qcg submit` use without a broker, and what libqcg's tests run
//!   their ranks on. Built with [`Grid::builder`]; dropping it stops what it started.
//! - [`services::ServiceGrid`]: the real service binaries as processes, each from a
//!   config file written into a temporary folder, certificates issued there, each
//!   waited for until it says it is ready, all killed on drop (their logs printed
//!   when a test panics). What the end-to-end tests and `qcg-bench`'s attacks run on.
//! - [`launch`]: starts a job's ranks as processes on a grid's helpers and collects
//!   what they print, as mpirun does.
//! - [`client`]: the broker's HTTPS job API over mutual TLS.
//!
//! ```no_run
//! # async fn f() -> Result<(), qcg_grid::GridError> {
//! use qcg_proto::Policy;
//! let grid = qcg_grid::Grid::builder()
//!     .clusters(&[Policy::Open, Policy::Open])
//!     .nodes_per_cluster(2)
//!     .start()
//!     .await?;
//! let sockets: Vec<_> = grid.placement(4).into_iter().map(|s| s.socket).collect();
//! # let _ = sockets;
//! grid.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! It holds no protocol of its own: it starts and wires the services' libraries
//! (or binaries) and talks to them through their public interfaces.

pub mod client;
pub mod launch;
pub mod local;
pub mod services;

pub use local::{job_id, secret, shape_for, ClusterShape, Grid, GridBuilder, GridError, NodeSlot};
