//! The lab harness ([`qcg_lab::harness`]) for the benchmarks' lab tests.

#![allow(dead_code, unused_imports)]

pub use qcg_lab::harness::{at, require_lab, Lab, Server, TIMEOUT};
