//! Which techniques link two clusters: a pure function of their configurations.
//!
//! New techniques (reversed, traversed, punched, relayed) arrive as new arms here;
//! nothing else in the broker needs to change to offer them.

use qcg_proto::{AccessPoint, Attempt, ClusterConfig, Nat, Plan, Policy, Technique};

/// Whether processes of `c` can be dialled from outside the cluster.
pub fn accepts_inbound(c: &ClusterConfig) -> bool {
    match c.policy {
        Policy::Open => !c.nat.is_nat(),
        // An open port range is forwarded by the gateway when there is a NAT.
        Policy::PortRange { .. } => true,
        Policy::SynBlock | Policy::Closed => false,
    }
}

/// The techniques to try, in order, for a process in `src` to reach one in `dst`:
/// simplest first, relaying always last.
pub fn choose(src: &ClusterConfig, dst: &ClusterConfig) -> Vec<Technique> {
    if src.name == dst.name {
        // Inside a cluster nodes reach each other; the gateway is not on the path.
        return vec![Technique::Direct];
    }
    let mut plan = Vec::new();
    match (dst.policy, dst.nat) {
        (Policy::Open, Nat::None) => plan.push(Technique::Direct),
        (Policy::PortRange { .. }, _) => plan.push(Technique::PortRange),
        _ => {
            if accepts_inbound(src) {
                plan.push(Technique::Reversed);
            }
            // The injected SYN's answer must leave through a firewall that keeps no
            // state, and with no translation on the target's side. The initiator's
            // SYN must leave from the port its access point announces (the broker
            // checks it, and the target answers to it): a random-port NAT rewrites
            // it, so traversal from behind one cannot work.
            if dst.policy == Policy::SynBlock && dst.nat == Nat::None && src.nat != Nat::RandomPort
            {
                plan.push(Technique::Traversed);
            }
            // Simultaneous open needs ports that survive translation on both sides,
            // and one side whose firewall lets the other's SYN/ACK through.
            let keeps_ports = src.nat != Nat::RandomPort && dst.nat != Nat::RandomPort;
            let both_stateless = src.policy == Policy::SynBlock && dst.policy == Policy::SynBlock;
            if keeps_ports && !both_stateless {
                plan.push(Technique::Punched);
            }
        }
    }
    plan.push(Technique::Relayed);
    plan
}

/// A plan for reaching `target` from a process of cluster `src`.
pub fn plan(src: &ClusterConfig, dst: &ClusterConfig, target: &AccessPoint) -> Plan {
    let inside = src.name == dst.name;
    let attempts = choose(src, dst)
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
    Plan {
        target: target.process.clone(),
        attempts,
        encrypt: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use qcg_proto::ProcName;

    fn cluster(name: &str, policy: Policy, nat: Nat) -> ClusterConfig {
        ClusterConfig {
            name: name.into(),
            policy,
            nat,
            public_address: nat.is_nat().then(|| [192, 0, 2, 1].into()),
        }
    }

    /// The whole table: every policy and NAT kind on both sides, across clusters;
    /// inside one cluster always direct.
    #[test]
    fn technique_table_over_all_pairs() {
        use Technique::*;
        let nats = [Nat::None, Nat::PortPreserving, Nat::RandomPort];
        for sp in Policy::ALL {
            for sn in nats {
                for dp in Policy::ALL {
                    for dn in nats {
                        let (s, d) = (cluster("a", sp, sn), cluster("b", dp, dn));
                        let src_in = matches!(sp, Policy::PortRange { .. })
                            || (sp == Policy::Open && sn == Nat::None);
                        let mut expected = Vec::new();
                        match (dp, dn) {
                            (Policy::Open, Nat::None) => expected.push(Direct),
                            (Policy::PortRange { .. }, _) => expected.push(PortRange),
                            _ => {
                                if src_in {
                                    expected.push(Reversed);
                                }
                                // The broker checks the captured SYN's source port
                                // against the initiator's access point: only a NAT
                                // that keeps ports (or none) leaves it as announced.
                                if dp == Policy::SynBlock
                                    && dn == Nat::None
                                    && sn != Nat::RandomPort
                                {
                                    expected.push(Traversed);
                                }
                                if sn != Nat::RandomPort
                                    && dn != Nat::RandomPort
                                    && !(sp == Policy::SynBlock && dp == Policy::SynBlock)
                                {
                                    expected.push(Punched);
                                }
                            }
                        }
                        expected.push(Relayed);
                        let got = choose(&s, &d);
                        assert_eq!(got, expected, "{sp} {sn:?} -> {dp} {dn:?}");
                        // Plans are ordered simplest first, and relaying is always last.
                        assert!(got.windows(2).all(|w| w[0] < w[1]));
                        assert_eq!(got.last(), Some(&Relayed));
                        assert_eq!(choose(&d, &cluster("b", sp, sn)), [Direct]);
                    }
                }
            }
        }
    }

    #[test]
    fn the_issue_cases_get_the_expected_first_technique() {
        let open = cluster("a", Policy::Open, Nat::None);
        let first = |s: &ClusterConfig, d: &ClusterConfig| choose(s, d)[0];
        assert_eq!(
            first(&open, &cluster("b", Policy::Closed, Nat::None)),
            Technique::Reversed
        );
        let closed = cluster("a", Policy::Closed, Nat::None);
        assert_eq!(
            first(&closed, &cluster("b", Policy::SynBlock, Nat::None)),
            Technique::Traversed
        );
        assert_eq!(
            first(&closed, &cluster("b", Policy::Closed, Nat::PortPreserving)),
            Technique::Punched
        );
        assert_eq!(
            first(&closed, &cluster("b", Policy::Closed, Nat::RandomPort)),
            Technique::Relayed
        );
        // From a random-port NAT toward a SYN-blocking site, traversal cannot work
        // (the SYN leaves on a port nobody announced): only relaying is left.
        let random = cluster("a", Policy::Closed, Nat::RandomPort);
        assert_eq!(
            choose(&random, &cluster("b", Policy::SynBlock, Nat::None)),
            [Technique::Relayed]
        );
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
            Nat::PortPreserving,
        );
        let a = cluster("a", Policy::Closed, Nat::None);
        let p = plan(&a, &b, &ap);
        assert_eq!(p.attempts[0].addr, "192.0.2.1:20001".parse().unwrap());
        let p = plan(&b, &b, &ap);
        assert_eq!(p.attempts[0].addr, "10.0.0.5:20001".parse().unwrap());
    }
}
