//! The lab harness ([`qcg_lab::harness`]) for the lab tests.

#![allow(dead_code, unused_imports)]

pub use qcg_lab::harness::{at, require_lab, Lab, Server, TIMEOUT};

pub const QCG_LAB: &str = env!("CARGO_BIN_EXE_qcg-lab");
