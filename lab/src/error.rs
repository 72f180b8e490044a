//! The lab's errors.

use qcg_proto::config::ConfigError;
use std::path::PathBuf;

/// What went wrong in the lab.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// A bad topology file.
    #[error(transparent)]
    Topology(#[from] ConfigError),
    /// The lab needs root.
    #[error("the lab needs root (network namespaces, nftables, tc): run as root")]
    NotRoot,
    /// A tool or device the lab needs is missing.
    #[error(
        "{what} is missing: run `bash scripts/lab-deps.sh` (as root) to install what the lab needs"
    )]
    Missing {
        /// What is missing.
        what: String,
    },
    /// A command failed.
    #[error("`{cmd}` failed ({status}): {stderr}")]
    Command {
        /// The command line.
        cmd: String,
        /// How it ended.
        status: String,
        /// What it said.
        stderr: String,
    },
    /// A file or process operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The state file of a lab is unreadable.
    #[error("state file {path}: {message}")]
    State {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// No lab is running.
    #[error("no lab is running (nothing under {0})")]
    NoLab(PathBuf),
    /// Several labs run and none was named.
    #[error("several labs are running ({0}): name one with --prefix")]
    ManyLabs(String),
    /// A lab with this prefix is already up.
    #[error("a lab with prefix `{0}` is already up: run `qcg-lab down --prefix {0}` first")]
    AlreadyUp(String),
    /// A bad prefix.
    #[error("{0}")]
    BadPrefix(String),
    /// An unknown host name.
    #[error("no host `{host}` in this lab; hosts: {known}")]
    UnknownHost {
        /// The name asked for.
        host: String,
        /// The names there are.
        known: String,
    },
    /// Interrupted by a signal.
    #[error("interrupted")]
    Interrupted,
    /// A probe between hosts failed.
    #[error("{0}")]
    Probe(String),
}

impl LabError {
    /// An I/O error with what was being done.
    pub fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        LabError::Io {
            what: what.into(),
            source,
        }
    }
}

/// Result of lab operations.
pub type Result<T, E = LabError> = std::result::Result<T, E>;
