//! What qcg processes and services say to one another: the control-plane messages
//! ([`msg`]), the length-prefixed, versioned frames that carry them ([`frame`]), the
//! resource types they share with the scheduler ([`topo`]), and the job environment
//! every launcher sets and libqcg reads ([`mod@env`], with the rank groups' encoding in
//! [`groups`]).
//!
//! Pure data and codecs: no runtime, no TLS, no XML. libqcg, which every user
//! program links, depends on this crate alone; the services reach it through
//! `qcg-proto`, which adds QUIC, TLS and configuration (and, with the `async`
//! feature, the async frame reader and writer).
//!
//! ```
//! use qcg_wire::frame::{encode, decode};
//! use qcg_wire::msg::{Request, ProcName};
//! let req = Request::Unregister { process: ProcName::new("job1", 3) };
//! let bytes = encode(&req).unwrap();
//! let (back, used): (Request, usize) = decode(&bytes).unwrap().unwrap();
//! assert_eq!(back, req);
//! assert_eq!(used, bytes.len());
//! ```

pub mod env;
pub mod frame;
pub mod groups;
pub mod msg;
pub mod topo;

pub use msg::{
    AccessPoint, Attempt, ClusterConfig, Encrypt, ErrorKind, ErrorReply, ExitReport, LaunchSpec,
    LinkQuality, Nat, NodeSpec, Notice, OutputLine, Plan, Policy, ProcName, Request, Response,
    Stream, Technique,
};
