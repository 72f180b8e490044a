//! The lab harness ([`qcg_lab::harness`]) for the benchmarks' lab tests.

#![allow(dead_code, unused_imports)]

pub use qcg_lab::harness::{at, require_lab, Lab, Server, TIMEOUT};

use qcg_lab::topo::{self, Nat};

/// Proves that the techniques simpler than `technique` are really blocked between
/// the first nodes of sites `a` (initiator) and `b` (target): a raw connect from a's
/// node to b's node (or to its NAT gateway) is dropped or refused, and for the
/// techniques past `reversed`, the other way round too. Panics naming the pair if a
/// connect got through.
pub fn prove_blocked(lab: &Lab, a: &str, b: &str, technique: &str) {
    let t = &lab.topo;
    if technique != "direct" {
        let _srv = lab.serve(&format!("{b}-1"), &[5000]);
        let to = at(lab.addr(&format!("{b}-1")), 5000);
        let i = t.site_index(b).unwrap();
        let target = match t.site(i).unwrap().nat {
            Nat::None => to,
            _ => at(topo::gateway_addr(i), 5000),
        };
        // Dropped (timeout), or refused by a NAT gateway that forwards nothing.
        let r = lab.connect(&format!("{a}-1"), target, None);
        assert!(
            matches!(r, Err(TIMEOUT | qcg_lab::probe::EXIT_REFUSED)),
            "{a} -> {b}: a direct connect got through ({r:?}), so {technique} is not needed"
        );
    }
    if ["traversed", "punched", "relayed"].contains(&technique) {
        let _srv = lab.serve(&format!("{a}-1"), &[5001]);
        assert_eq!(
            lab.connect(
                &format!("{b}-1"),
                at(lab.addr(&format!("{a}-1")), 5001),
                None
            ),
            Err(TIMEOUT),
            "{b} -> {a}: a connect back got through, so {technique} is not needed"
        );
    }
}
