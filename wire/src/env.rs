//! The job environment: the variables every launcher (`qcg run`, the broker's jobs
//! through a frontal and a helper, the lab) sets for each process of a job, and the
//! settings libqcg reads from it. One list, so that launchers and the library cannot
//! drift apart.
//!
//! ```
//! use qcg_wire::env::{JobVars, RANK, SIZE};
//! let vars = JobVars {
//!     job: "j1".into(),
//!     rank: 2,
//!     size: 4,
//!     secret_hex: "5a".repeat(32),
//!     groups: None,
//!     topology: None,
//! }
//! .pairs();
//! assert!(vars.contains(&(RANK, "2".to_string())));
//! assert!(vars.contains(&(SIZE, "4".to_string())));
//! ```

/// Job identifier.
pub const JOB: &str = "QCG_JOB";
/// This process's rank.
pub const RANK: &str = "QCG_RANK";
/// Number of processes in the job.
pub const SIZE: &str = "QCG_SIZE";
/// The job's secret, 64 hex digits: proves on every link that both ends belong to
/// the job; never sent over the network.
pub const SECRET: &str = "QCG_JOB_SECRET";
/// The node helper's unix socket (set by whoever starts the process on its node).
pub const HELPER: &str = "QCG_HELPER";
/// The job's process groups in rank order, `NAME:COUNT,…` ([`crate::groups`]).
pub const GROUPS: &str = crate::groups::ENV_GROUPS;
/// Where each rank runs, one path per rank separated by `;`, levels by `/`
/// (`orsay/node1;rennes/node4`): the topology the collectives are built on.
pub const TOPOLOGY: &str = "QCG_TOPOLOGY";

// Settings a user may give a job (read by libqcg; each has a default).

/// Link costs per topology level for the collectives' model, `LATENCY_US:MBITS`
/// from the top level down, separated by `,`.
pub const TOPOLOGY_COSTS: &str = "QCG_TOPOLOGY_COSTS";
/// Largest message sent at once, in bytes (default 64 KiB); larger ones wait for
/// the receiver.
pub const EAGER_LIMIT: &str = "QCG_EAGER_LIMIT";
/// Bytes of unexpected messages a process keeps before senders wait (default 64 MiB).
pub const UNEXPECTED_LIMIT: &str = "QCG_UNEXPECTED_LIMIT";
/// Seconds of silence after which a peer is lost (default 30).
pub const LIVENESS: &str = "QCG_LIVENESS";
/// `0` leaves glibc's malloc as it comes; otherwise (the default) `MPI_Init` keeps
/// freed memory of up to 64 MiB in the process rather than handing it back at once.
pub const KEEP_MEMORY: &str = "QCG_KEEP_MEMORY";
/// Whether a rank pins itself to its share of its node's cores: `auto` (the default:
/// only when the job puts more ranks on the node than it has cores) or `none`.
pub const BIND: &str = "QCG_BIND";
/// The longest a waiting call polls before it sleeps, in µs (default 1000).
pub const SPIN_US: &str = "QCG_SPIN_US";
/// Links between ranks of one node: shared memory, large messages copied once
/// from the sender's memory, the receiver reading part and the sender writing the
/// rest when the node has a core per rank (default, `1`); `read`: the same, the
/// receiver copying alone; `copy`: shared memory, large messages streamed through
/// it; `0`: TCP over loopback as between nodes.
pub const SHM: &str = "QCG_SHM";
/// Which TCP links are encrypted and authenticated: `wan` (links between sites, the
/// default; the broker's plan may say otherwise for a pair of clusters), `all` or
/// `none`. Set, it wins over the plan (benchmarks, tests).
pub const ENCRYPT: &str = "QCG_ENCRYPT";
/// TCP congestion control for links whose two ends are on one machine (loopback, or
/// the machine's own address): default `reno`; `system` keeps the system's default.
pub const LOCAL_TCP_CC: &str = "QCG_LOCAL_TCP_CC";
/// The collectives' algorithm: `auto` (default), `hier`, `flat`, `linear`, `chain`.
pub const COLL_ALGO: &str = "QCG_COLL_ALGO";
/// Flits a collective's message is cut into (default: chosen by the model).
pub const COLL_FLITS: &str = "QCG_COLL_FLITS";
/// Seconds a collective waits for a peer before failing naming it (default 60).
pub const COLL_TIMEOUT: &str = "QCG_COLL_TIMEOUT";
/// Log filter (`tracing` syntax, e.g. `debug`).
pub const LOG: &str = "QCG_LOG";

/// What a launcher tells one process of a job (the helper's socket is added by the
/// one that starts it on its node).
#[derive(Clone, Debug)]
pub struct JobVars {
    /// Job identifier.
    pub job: String,
    /// The process's rank.
    pub rank: u32,
    /// Number of processes.
    pub size: u32,
    /// The job's secret, 64 hex digits.
    pub secret_hex: String,
    /// The groups, encoded ([`crate::groups::encode`]); `None`: one group, `all`.
    pub groups: Option<String>,
    /// Where each rank runs ([`TOPOLOGY`]); `None`: a flat topology.
    pub topology: Option<String>,
}

impl JobVars {
    /// The variables, name and value.
    pub fn pairs(&self) -> Vec<(&'static str, String)> {
        let mut v = vec![
            (JOB, self.job.clone()),
            (RANK, self.rank.to_string()),
            (SIZE, self.size.to_string()),
            (SECRET, self.secret_hex.clone()),
        ];
        if let Some(g) = &self.groups {
            v.push((GROUPS, g.clone()));
        }
        if let Some(t) = &self.topology {
            v.push((TOPOLOGY, t.clone()));
        }
        v
    }
}
