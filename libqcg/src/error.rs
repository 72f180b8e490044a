//! What can go wrong in a qcg program.

use std::path::PathBuf;

/// A libqcg error, with what a user needs to find the cause.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The job's environment is missing or wrong (the process was not started by
    /// `qcg run` or a frontal?).
    #[error("environment variable {var}: {message}")]
    Env {
        /// The variable.
        var: &'static str,
        /// What is wrong with it.
        message: String,
    },
    /// The node's helper cannot be reached.
    #[error("helper at {}: {message}", socket.display())]
    Helper {
        /// Its socket.
        socket: PathBuf,
        /// Why.
        message: String,
    },
    /// The grid refused a request.
    #[error("the grid refused {request}: {reply}")]
    Refused {
        /// Which request.
        request: &'static str,
        /// Its answer.
        reply: qcg_wire::ErrorReply,
    },
    /// No technique of the plan linked us to `rank`.
    #[error("cannot link to rank {rank}: {}", attempts.join("; "))]
    NoLink {
        /// The peer.
        rank: u32,
        /// What each attempt gave.
        attempts: Vec<String>,
    },
    /// Binding the process's listener failed.
    #[error("cannot bind a listener on {addr}: {message}")]
    Bind {
        /// Address or range tried.
        addr: String,
        /// Why.
        message: String,
    },
    /// A rank outside `0..size`.
    #[error("rank {rank} is not in this job (size {size})")]
    InvalidRank {
        /// The rank.
        rank: u32,
        /// Job size.
        size: u32,
    },
    /// The link to a peer broke while we still expected data from it.
    #[error("rank {rank} is gone: {reason}")]
    PeerLost {
        /// The peer.
        rank: u32,
        /// What happened.
        reason: String,
    },
    /// Sending to a peer failed.
    #[error("sending to rank {rank} failed: {source}")]
    Send {
        /// The peer.
        rank: u32,
        /// Why.
        source: std::io::Error,
    },
    /// A collective call failed on this rank.
    #[error("{op}: {message}")]
    Collective {
        /// The operation.
        op: &'static str,
        /// What went wrong, naming the rank at fault where known.
        message: String,
    },
    /// The ranks called a collective differently (another operation, root, size or
    /// collective settings), found from the call's own messages: the call fails
    /// rather than take another call's bytes for this one's.
    #[error("{op}: {message}")]
    Disagreement {
        /// The operation.
        op: &'static str,
        /// What the ranks disagree on.
        on: crate::callsig::Disagree,
        /// Which rank called what.
        message: String,
    },
    /// A message is longer than the buffer posted for it. The message is not lost:
    /// a receive with a large enough buffer still gets it.
    #[error("a message of {len} bytes from rank {from} (tag {tag}) does not fit a buffer of {capacity} bytes")]
    Truncated {
        /// Its sender.
        from: u32,
        /// Its tag.
        tag: u32,
        /// Its length.
        len: u64,
        /// The buffer's length.
        capacity: usize,
    },
    /// An argument makes no sense.
    #[error("{0}")]
    InvalidArgument(String),
    /// A message lent by its sender (see the engine's `SendBuf::Lent`) was taken back
    /// before this rank copied it: the sender's call failed.
    #[error("rank {rank} took its message back before it was copied (its call failed)")]
    Withdrawn {
        /// The sender.
        rank: u32,
    },
    /// Nothing arrived in time.
    #[error("timed out after {secs:.1} s waiting for {what}")]
    Timeout {
        /// What we waited for.
        what: String,
        /// How long.
        secs: f64,
    },
}

/// Result with a libqcg [`Error`].
pub type Result<T> = std::result::Result<T, Error>;
