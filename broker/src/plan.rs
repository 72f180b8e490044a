//! Which techniques link two clusters: a pure function of their configurations.
//!
//! New techniques (reversed, traversed, punched, relayed) arrive as new arms here;
//! nothing else in the broker needs to change to offer them.

use qcg_proto::{AccessPoint, Attempt, ClusterConfig, Plan, Policy, Technique};

/// The techniques to try, in order, for a process in `src` to reach one in `dst`.
/// Empty when this build knows no way.
pub fn choose(src: &ClusterConfig, dst: &ClusterConfig) -> Vec<Technique> {
    if src.name == dst.name {
        // Inside a cluster nodes reach each other; the gateway is not on the path.
        return vec![Technique::Direct];
    }
    match (dst.policy, dst.nat) {
        (Policy::Open, false) => vec![Technique::Direct],
        // An open port range is forwarded by the gateway when there is a NAT, so it
        // works with or without one.
        (Policy::PortRange { .. }, _) => vec![Technique::PortRange],
        (Policy::Open, true) | (Policy::SynBlock, _) | (Policy::Closed, _) => Vec::new(),
    }
}

/// A plan for reaching `target` from a process of cluster `src`, or why there is none.
pub fn plan(
    src: &ClusterConfig,
    dst: &ClusterConfig,
    target: &AccessPoint,
) -> Result<Plan, String> {
    let techniques = choose(src, dst);
    if techniques.is_empty() {
        return Err(format!(
            "no technique links cluster `{}` to cluster `{}` (policy {}{}): this broker offers direct and port-range links only",
            src.name,
            dst.name,
            dst.policy,
            if dst.nat { ", behind NAT" } else { "" }
        ));
    }
    let inside = src.name == dst.name;
    let attempts = techniques
        .into_iter()
        .map(|technique| Attempt {
            technique,
            addr: if inside {
                target.private()
            } else {
                target.public()
            },
        })
        .collect();
    Ok(Plan {
        target: target.process.clone(),
        attempts,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use qcg_proto::ProcName;

    fn cluster(name: &str, policy: Policy, nat: bool) -> ClusterConfig {
        ClusterConfig {
            name: name.into(),
            policy,
            nat,
            public_address: nat.then(|| [192, 0, 2, 1].into()),
        }
    }

    /// The whole table: every policy and NAT setting on both sides, inside and across
    /// clusters.
    #[test]
    fn technique_table_over_all_pairs() {
        for sp in Policy::ALL {
            for snat in [false, true] {
                for dp in Policy::ALL {
                    for dnat in [false, true] {
                        let (s, d) = (cluster("a", sp, snat), cluster("b", dp, dnat));
                        let expected: &[Technique] = match (dp, dnat) {
                            (Policy::Open, false) => &[Technique::Direct],
                            (Policy::PortRange { .. }, _) => &[Technique::PortRange],
                            _ => &[],
                        };
                        assert_eq!(
                            choose(&s, &d),
                            expected,
                            "{sp} nat={snat} -> {dp} nat={dnat}"
                        );
                        // Inside one cluster, always direct.
                        let same = cluster("b", dp, dnat);
                        assert_eq!(choose(&same, &d), [Technique::Direct]);
                    }
                }
            }
        }
    }

    #[test]
    fn plans_use_private_inside_and_public_across() {
        let ap = AccessPoint {
            process: ProcName::new("j", 1),
            cluster: "b".into(),
            node: "n".into(),
            private_addr: [10, 0, 0, 5].into(),
            public_addr: Some([192, 0, 2, 1].into()),
            port: 20001,
        };
        let b = cluster(
            "b",
            Policy::PortRange {
                lo: 20000,
                hi: 20099,
            },
            true,
        );
        let a = cluster("a", Policy::Closed, false);
        let p = plan(&a, &b, &ap).unwrap();
        assert_eq!(p.attempts[0].addr, "192.0.2.1:20001".parse().unwrap());
        let p = plan(&b, &b, &ap).unwrap();
        assert_eq!(p.attempts[0].addr, "10.0.0.5:20001".parse().unwrap());
        let err = plan(&b, &a, &ap).unwrap_err();
        assert!(err.contains("`b` to cluster `a` (policy closed)"), "{err}");
    }
}
