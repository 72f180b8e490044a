//! The pieces behind the `qcg` command: an embedded local grid ([`grid`]) and the
//! launcher that starts a job's processes and collects their output ([`launch`]).

pub mod client;
pub mod grid;
pub mod launch;
pub mod mpiargs;
pub mod submit;
