//! libqcg: what a qcg program links.
//!
//! A program started by `qcg run` (or by a frontal for a submitted job) calls
//! [`init`], which reads the job, rank, size, helper socket and job secret from the
//! environment, binds the process's listener and registers it with the grid. The
//! returned [`Comm`] sends and receives messages of any size (0 bytes to well over
//! 1 GiB) to and from the other ranks. Links are made on first use through the
//! grid's negotiation, and every link starts with a handshake proving that both ends
//! belong to the job ([`handshake`]); anything else knocking on the listener is
//! dropped and logged.
//!
//! ```no_run
//! fn main() -> Result<(), qcg::Error> {
//!     let comm = qcg::init()?;
//!     let (rank, size) = (comm.rank(), comm.size());
//!     if rank == 0 {
//!         comm.send(1 % size, 7, b"hello")?;
//!     }
//!     if rank == 1 % size {
//!         let msg = comm.recv(None, Some(7))?;
//!         println!("rank {rank} got {:?} from {}", msg.data, msg.source);
//!     }
//!     Ok(())
//! }
//! ```

pub(crate) mod affinity;
pub mod callsig;
pub mod coll;
pub mod comm;
pub mod control;
pub mod engine;
pub mod env;
pub mod error;
pub mod groups;
pub mod handshake;
pub(crate) mod link;
pub mod mailbox;
pub mod nbc;
pub mod request;
pub mod seal;
pub mod topo;

pub use coll::{Algo, CollOptions, Number, ReduceOp, Reduction};
pub use comm::{Comm, LinkStats};
pub use env::JobEnv;
pub use error::{Error, Result};
pub use mailbox::Message;
pub use request::{test_all, wait_all, wait_any, Completer, Completion, Request, Status};

/// Joins the job this process was started for, from its environment (see
/// [`mod@env`]). Also installs a logger on stderr (level from `QCG_LOG`, default `warn`)
/// unless the program installed its own, so that dropped strangers and broken links
/// are reported.
pub fn init() -> Result<Comm> {
    let filter = tracing_subscriber::EnvFilter::try_from_env(qcg_wire::env::LOG)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    // Colours only for a terminal (and not under `NO_COLOR`): under `qcg run` stderr
    // is a pipe to the launcher, and escape codes would land in job logs and between
    // a field and its value.
    let colour = std::io::IsTerminal::is_terminal(&std::io::stderr())
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(colour)
        .with_writer(std::io::stderr)
        .try_init();
    Comm::connect(JobEnv::from_env()?)
}
