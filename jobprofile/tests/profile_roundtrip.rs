//! Property test: writing a profile then parsing it gives the same model.

use proptest::prelude::*;
use proptest::sample::subsequence;
use qcg_jobprofile::profile::{
    Bounds, ComputingTemplate, EnvVar, Execution, Group, GroupConnection, JobProfile,
    NetworkTemplate, Task,
};

/// Text kept verbatim (arguments, variable values); includes markup characters.
fn verbatim() -> impl Strategy<Value = String> {
    "[ -~é€]{0,12}"
}

/// Text that is trimmed on reading: no surrounding space, never empty.
fn token() -> impl Strategy<Value = String> {
    "[!-~é]([ -~]{0,8}[!-~])?"
}

fn figure(whole: bool) -> BoxedStrategy<f64> {
    if whole {
        (0u32..10_000).prop_map(f64::from).boxed()
    } else {
        prop_oneof![
            (0u32..100_000).prop_map(|v| f64::from(v) / 100.0),
            0.0f64..1e12
        ]
        .boxed()
    }
}

fn bounds(whole: bool) -> impl Strategy<Value = Option<Bounds>> {
    proptest::option::of((
        proptest::option::of(figure(whole)),
        proptest::option::of(figure(whole)),
    ))
    .prop_map(|b| {
        b.map(|(min, extra)| Bounds {
            min,
            max: extra.map(|e| min.unwrap_or(0.0) + e),
        })
    })
}

fn execution() -> impl Strategy<Value = Execution> {
    (
        (token(), token()),
        proptest::collection::vec(verbatim(), 0..4),
        proptest::collection::btree_map(token(), verbatim(), 0..4),
        proptest::collection::vec(proptest::option::of(token()), 4),
    )
        .prop_map(|((kind, executable), arguments, env, files)| Execution {
            kind,
            executable,
            arguments,
            environment: env
                .into_iter()
                .map(|(name, value)| EnvVar { name, value })
                .collect(),
            stdin: files[0].clone(),
            stdout: files[1].clone(),
            stderr: files[2].clone(),
            working_directory: files[3].clone(),
        })
}

#[derive(Debug, Clone)]
struct GroupSeed {
    processes: u32,
    computing: Option<usize>,
    network: Option<usize>,
    peers: Vec<(usize, usize)>,
}

fn group_seed() -> impl Strategy<Value = GroupSeed> {
    (
        1u32..5000,
        proptest::option::of(0usize..8),
        proptest::option::of(0usize..8),
        subsequence((0usize..8).collect::<Vec<_>>(), 0..4),
        proptest::collection::vec(0usize..8, 4),
    )
        .prop_map(|(processes, computing, network, peers, nets)| GroupSeed {
            processes,
            computing,
            network,
            peers: peers.into_iter().zip(nets).collect(),
        })
}

fn profile() -> impl Strategy<Value = JobProfile> {
    (
        (token(), token(), "[a-z]{1,4}"),
        proptest::collection::vec((bounds(false), bounds(false)), 1..4),
        proptest::collection::vec((bounds(true), bounds(false), bounds(false)), 0..4),
        proptest::collection::vec(group_seed(), 1..6),
        proptest::option::of(execution()),
    )
        .prop_map(|((app_id, task_id, tag), nets, comps, seeds, execution)| {
            let network_templates: Vec<NetworkTemplate> = nets
                .into_iter()
                .enumerate()
                .map(|(i, (bandwidth, latency))| NetworkTemplate {
                    id: format!("net-{tag}{i}"),
                    bandwidth,
                    latency,
                })
                .collect();
            let computing_templates: Vec<ComputingTemplate> = comps
                .into_iter()
                .enumerate()
                .map(|(i, (cpucount, cpuspeed, memory))| ComputingTemplate {
                    id: format!("host-{tag}{i}"),
                    cpucount,
                    cpuspeed,
                    memory,
                })
                .collect();
            let n = seeds.len();
            let groups = seeds
                .iter()
                .enumerate()
                .map(|(i, s)| Group {
                    id: format!("g{i}-{tag}"),
                    processes: s.processes,
                    computing_template: s
                        .computing
                        .filter(|_| !computing_templates.is_empty())
                        .map(|c| {
                            computing_templates[c % computing_templates.len()]
                                .id
                                .clone()
                        }),
                    network_template: s
                        .network
                        .map(|c| network_templates[c % network_templates.len()].id.clone()),
                    connections: s
                        .peers
                        .iter()
                        .filter(|(p, _)| *p < n && *p != i)
                        .map(|(p, t)| GroupConnection {
                            endpoint: format!("g{p}-{tag}"),
                            network_template: network_templates[t % network_templates.len()]
                                .id
                                .clone(),
                        })
                        .collect(),
                })
                .collect();
            JobProfile {
                app_id,
                network_templates,
                computing_templates,
                task: Task {
                    id: task_id,
                    groups,
                    execution,
                },
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn write_then_parse_is_identity(p in profile()) {
        let xml = p.to_xml();
        let back = JobProfile::parse(&xml);
        prop_assert!(back.is_ok(), "{:?}\n{}", back, xml);
        prop_assert_eq!(back.unwrap(), p);
    }
}
