//! What every qcg service speaks: the control-plane messages and the frame codec that
//! carries them (from `qcg-wire`, re-exported here with its async frames), the grid
//! CA, and the QUIC + mutual-TLS plumbing.
//!
//! The control plane runs process → helper (unix socket) → frontal → broker (QUIC with
//! mutual TLS under the grid's own CA). Every hop carries the same [`msg::Request`] and
//! [`msg::Response`] values, serialised as JSON inside length-prefixed frames that carry a
//! protocol version ([`frame`]). Over QUIC each request gets its own bidirectional stream.
//!
//! ```
//! use qcg_proto::frame::{encode, decode};
//! use qcg_proto::msg::{Request, ProcName};
//! let req = Request::Unregister { process: ProcName::new("job1", 3) };
//! let bytes = encode(&req).unwrap();
//! let (back, used): (Request, usize) = decode(&bytes).unwrap().unwrap();
//! assert_eq!(back, req);
//! assert_eq!(used, bytes.len());
//! ```
//!
//! This crate holds no policy: which technique links two clusters is the broker's
//! business (`qcg_broker::plan`).

pub mod check;
pub mod config;
pub mod der;
pub mod limits;
pub mod metrics;
pub mod output;
pub mod packet;
pub mod quic;
pub mod revocation;
pub mod service;
pub mod spans;
pub mod tls;

pub use qcg_wire::{env, frame, groups, msg, topo};

pub use msg::{
    AccessPoint, Attempt, ClusterConfig, Encrypt, ErrorKind, ErrorReply, ExitReport, LaunchSpec,
    LinkQuality, LocalUser, Nat, NodeSpec, Notice, OutputLine, Plan, Policy, ProcName, Request,
    Response, Stream, Technique,
};
