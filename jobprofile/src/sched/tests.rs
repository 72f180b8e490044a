//! Scheduler tests on small crafted topologies whose answer is known.

use super::*;
use crate::profile::{Bounds, ComputingTemplate, Group, GroupConnection, NetworkTemplate, Task};
use crate::topology::{Cluster, InterLink, LinkQuality, Node};

fn q(latency_ms: f64, bandwidth_mbps: f64) -> LinkQuality {
    LinkQuality {
        latency_ms,
        bandwidth_mbps,
    }
}

/// Clusters as (name, nodes, slots per node, internal latency, internal bandwidth).
fn topo(
    clusters: &[(&str, usize, u32, f64, f64)],
    links: &[(&str, &str, f64, f64)],
) -> ResourceTopology {
    ResourceTopology {
        clusters: clusters
            .iter()
            .map(|&(name, nodes, slots, lat, bw)| Cluster {
                name: name.into(),
                nodes: (0..nodes)
                    .map(|i| Node {
                        name: format!("{name}-{i}"),
                        slots,
                        cpu_speed_mhz: 2000.0,
                        memory_mib: 4096.0,
                        submitters: None,
                    })
                    .collect(),
                internal: q(lat, bw),
            })
            .collect(),
        links: links
            .iter()
            .map(|&(a, b, lat, bw)| InterLink {
                a: a.into(),
                b: b.into(),
                quality: q(lat, bw),
            })
            .collect(),
    }
}

fn net(id: &str, lat_max: Option<f64>, bw_min: Option<f64>) -> NetworkTemplate {
    NetworkTemplate {
        id: id.into(),
        latency: lat_max.map(|m| Bounds {
            min: None,
            max: Some(m),
        }),
        bandwidth: bw_min.map(|m| Bounds {
            min: Some(m),
            max: None,
        }),
    }
}

fn group(
    id: &str,
    n: u32,
    comp: Option<&str>,
    intra: Option<&str>,
    conns: &[(&str, &str)],
) -> Group {
    Group {
        id: id.into(),
        processes: n,
        computing_template: comp.map(Into::into),
        network_template: intra.map(Into::into),
        connections: conns
            .iter()
            .map(|&(e, t)| GroupConnection {
                endpoint: e.into(),
                network_template: t.into(),
            })
            .collect(),
    }
}

fn job(
    nets: Vec<NetworkTemplate>,
    comps: Vec<ComputingTemplate>,
    groups: Vec<Group>,
) -> JobProfile {
    JobProfile {
        app_id: "test".into(),
        network_templates: nets,
        computing_templates: comps,
        task: Task {
            id: "t".into(),
            groups,
            execution: None,
        },
    }
}

/// Three clusters of 8 slots, a and c 3 ms apart, b 30 ms from both; a job of two
/// connected groups of 8: the best mapping puts them on a and c.
fn near_pair() -> (ResourceTopology, JobProfile) {
    let t = topo(
        &[
            ("a", 2, 4, 0.1, 1000.0),
            ("b", 2, 4, 0.1, 1000.0),
            ("c", 2, 4, 0.1, 1000.0),
        ],
        &[
            ("a", "b", 30.0, 1000.0),
            ("a", "c", 3.0, 1000.0),
            ("b", "c", 30.0, 1000.0),
        ],
    );
    let p = job(
        vec![net("any", None, None)],
        vec![],
        vec![
            group("m", 8, None, Some("any"), &[("w", "any")]),
            group("w", 8, None, Some("any"), &[]),
        ],
    );
    (t, p)
}

fn mem_min(id: &str, min: f64) -> ComputingTemplate {
    ComputingTemplate {
        id: id.into(),
        cpucount: None,
        cpuspeed: None,
        memory: Some(Bounds {
            min: Some(min),
            max: None,
        }),
    }
}

fn run(p: &JobProfile, t: &ResourceTopology, s: Strategy) -> Result<Mapping, ScheduleError> {
    schedule(p, t, &FreeSlots::all(t), s)
}

fn clusters_of(m: &Mapping) -> Vec<Vec<&str>> {
    m.groups
        .iter()
        .map(|g| g.clusters.iter().map(|(c, _)| c.as_str()).collect())
        .collect()
}

#[test]
fn latency_levels_are_orders_of_magnitude() {
    assert_eq!(latency_level(0.0), 0);
    assert_eq!(latency_level(0.05), 1);
    assert_eq!(latency_level(0.5), 2);
    assert_eq!(latency_level(5.0), 3);
    assert_eq!(latency_level(12.4), 4);
    assert_eq!(latency_level(5000.0), 6);
}

#[test]
fn ray2mesh_lands_on_clusters_meeting_its_requirements() {
    let p = JobProfile::parse(include_str!("../../examples-xml/ray2mesh.xml")).unwrap();
    let t = topo(
        &[
            ("nancy", 4, 2, 0.05, 1000.0),
            ("rennes", 8, 2, 12.4, 1000.0),
            ("lyon", 3, 4, 0.08, 1000.0),
        ],
        &[
            ("nancy", "rennes", 10.0, 1000.0),
            ("nancy", "lyon", 8.0, 200.0),
            ("rennes", "lyon", 9.0, 1000.0),
        ],
    );
    let m = run(&p, &t, Strategy::Concentrate).unwrap();
    assert!(m.exhaustive);
    assert_eq!(m.ranks.len(), 13);
    // rennes is too slow inside; the master shares a cluster with a group
    let cl = clusters_of(&m);
    assert!(cl.iter().flatten().all(|c| *c != "rennes"), "{cl:?}");
    assert_eq!(cl[0], cl[1]);
    assert_eq!(m.cost.intra_level, 1);
    assert_eq!(m.cost.inter_max_ms, 8.0);
    // ranks are numbered group by group in document order
    assert_eq!(m.ranks[0].group, "central_master");
    assert!(m.ranks[1..7]
        .iter()
        .all(|r| r.group == "group1" && r.group_index == 1));
    assert!(m.ranks[7..].iter().all(|r| r.group == "group2"));
    assert!(m.ranks.iter().enumerate().all(|(i, r)| r.rank == i));
}

#[test]
fn the_only_feasible_mapping_is_found() {
    // g1 needs big memory, only in "a"; g2 must be 1 ms from g1, only "b" is.
    let mut t = topo(
        &[
            ("a", 2, 2, 0.1, 1000.0),
            ("b", 2, 2, 0.1, 1000.0),
            ("c", 4, 4, 0.1, 1000.0),
        ],
        &[
            ("a", "b", 1.0, 1000.0),
            ("a", "c", 20.0, 1000.0),
            ("b", "c", 0.5, 1000.0),
        ],
    );
    for n in &mut t.clusters[0].nodes {
        n.memory_mib = 16384.0;
    }
    let p = job(
        vec![net("near", Some(1.0), None)],
        vec![mem_min("big", 8192.0)],
        vec![
            group("g2", 4, None, None, &[("g1", "near")]),
            group("g1", 4, Some("big"), None, &[]),
        ],
    );
    let m = run(&p, &t, Strategy::Spread).unwrap();
    assert_eq!(clusters_of(&m), [["b"], ["a"]]);
    assert_eq!(m.cost.inter_max_ms, 1.0);
    assert!(m.exhaustive);
}

#[test]
fn full_search_succeeds_where_greedy_fails() {
    // Taking the best cluster "x" for g1 leaves no cluster within 2 ms for g2.
    let t = topo(
        &[
            ("x", 2, 2, 0.01, 1000.0),
            ("y", 2, 2, 0.2, 1000.0),
            ("z", 2, 2, 0.2, 1000.0),
        ],
        &[
            ("x", "y", 50.0, 1000.0),
            ("x", "z", 50.0, 1000.0),
            ("y", "z", 1.0, 1000.0),
        ],
    );
    let p = job(
        vec![net("lan", Some(2.0), None)],
        vec![],
        vec![
            group("g1", 4, None, Some("lan"), &[("g2", "lan")]),
            group("g2", 4, None, Some("lan"), &[]),
        ],
    );
    let m = run(&p, &t, Strategy::Spread).unwrap();
    let mut cl: Vec<&str> = clusters_of(&m).into_iter().flatten().collect();
    cl.sort_unstable();
    assert_eq!(cl, ["y", "z"]);
    assert!(m.explored > 2, "the search had to backtrack");
}

#[test]
fn cost_prefers_low_latency_between_connected_groups() {
    let (t, p) = near_pair();
    let m = run(&p, &t, Strategy::Spread).unwrap();
    let mut cl: Vec<&str> = clusters_of(&m).into_iter().flatten().collect();
    cl.sort_unstable();
    assert_eq!(cl, ["a", "c"]);
    assert_eq!(m.cost.inter_mean_ms, 3.0);
}

#[test]
fn spread_and_concentrate_place_nodes_differently() {
    let t = topo(&[("c", 3, 4, 0.1, 1000.0)], &[]);
    let p = job(vec![], vec![], vec![group("g", 6, None, None, &[])]);
    let nodes = |m: &Mapping| m.ranks.iter().map(|r| r.node_index).collect::<Vec<_>>();
    let spread = run(&p, &t, Strategy::Spread).unwrap();
    assert_eq!(nodes(&spread), [0, 1, 2, 0, 1, 2]);
    assert_eq!(spread.ranks[4].node, "c-1");
    let conc = run(&p, &t, Strategy::Concentrate).unwrap();
    assert_eq!(nodes(&conc), [0, 0, 0, 0, 1, 1]);
    // spread favours the least used node
    let mut free = FreeSlots::all(&t);
    free.set(0, 0, 1);
    let m = schedule(&p, &t, &free, Strategy::Spread).unwrap();
    assert_eq!(nodes(&m), [1, 2, 1, 2, 1, 2]);
    free.reserve(&m);
    assert_eq!(free.total(), 3);
}

#[test]
fn a_group_is_split_only_over_links_meeting_its_requirement() {
    let t = topo(
        &[
            ("a", 2, 2, 0.1, 1000.0),
            ("b", 2, 2, 0.1, 1000.0),
            ("c", 2, 2, 0.1, 1000.0),
        ],
        &[
            ("a", "b", 0.8, 1000.0),
            ("a", "c", 9.0, 1000.0),
            ("b", "c", 9.0, 1000.0),
        ],
    );
    let p = job(
        vec![net("lan", Some(1.0), None)],
        vec![],
        vec![group("g", 7, None, Some("lan"), &[])],
    );
    let m = run(&p, &t, Strategy::Concentrate).unwrap();
    assert_eq!(m.groups[0].clusters.len(), 2);
    assert_eq!(m.cost.intra_max_ms, 0.8);
    let p = job(
        vec![net("lan", Some(1.0), None)],
        vec![],
        vec![group("g", 9, None, Some("lan"), &[])],
    );
    let e = run(&p, &t, Strategy::Concentrate).unwrap_err();
    assert_eq!(
        e.to_string(),
        "group \"g\" needs latency <= 1 ms inside the group; no cluster has 9 free slots and the \
         largest set of clusters whose links meet it offers 8 (\"a\", \"b\")"
    );
}

#[test]
fn intra_group_latency_failure_names_the_best_cluster() {
    let t = topo(
        &[
            ("nancy", 2, 2, 0.1, 1000.0),
            ("rennes", 3, 2, 12.4, 1000.0),
            ("lyon", 8, 1, 20.0, 1000.0),
        ],
        &[],
    );
    let p = job(
        vec![net("local", Some(5.0), None)],
        vec![],
        vec![group("group1", 6, None, Some("local"), &[])],
    );
    let e = run(&p, &t, Strategy::Spread).unwrap_err();
    assert_eq!(
        e.to_string(),
        "group \"group1\" needs latency <= 5 ms inside the group; the best cluster with 6 free slots \
         offers 12.4 ms (cluster \"rennes\")"
    );
    let p = job(
        vec![net("fat", None, Some(10000.0))],
        vec![],
        vec![group("group1", 6, None, Some("fat"), &[])],
    );
    let e = run(&p, &t, Strategy::Spread).unwrap_err();
    assert!(e.to_string().contains("needs bandwidth >= 10000 Mbit/s inside the group; the best cluster with 6 free slots offers 1000 Mbit/s"), "{e}");
}

#[test]
fn computing_and_slot_failures_name_the_best_node() {
    let t = topo(&[("a", 2, 2, 0.1, 1000.0)], &[]);
    let p = job(
        vec![],
        vec![mem_min("big", 8192.0)],
        vec![group("g", 2, Some("big"), None, &[])],
    );
    let e = run(&p, &t, Strategy::Spread).unwrap_err();
    assert_eq!(
        e.to_string(),
        "group \"g\" needs memory >= 8192 MiB (template \"big\"); the best node offers 4096 MiB (node \"a-0\" in cluster \"a\")"
    );
    let fast = ComputingTemplate {
        id: "fast".into(),
        cpucount: None,
        cpuspeed: Some(Bounds {
            min: Some(3000.0),
            max: None,
        }),
        memory: None,
    };
    let p = job(
        vec![],
        vec![fast],
        vec![group("g", 2, Some("fast"), None, &[])],
    );
    assert!(run(&p, &t, Strategy::Spread)
        .unwrap_err()
        .to_string()
        .contains("cpuspeed >= 3000 MHz"));
    let quad = ComputingTemplate {
        id: "quad".into(),
        cpucount: Some(Bounds {
            min: Some(4.0),
            max: None,
        }),
        cpuspeed: None,
        memory: None,
    };
    let p = job(
        vec![],
        vec![quad],
        vec![group("g", 2, Some("quad"), None, &[])],
    );
    let e = run(&p, &t, Strategy::Spread).unwrap_err();
    assert!(
        e.to_string()
            .contains("needs cpucount >= 4 (template \"quad\"); the best node offers 2 free slots"),
        "{e}"
    );
    let p = job(vec![], vec![], vec![group("g", 5, None, None, &[])]);
    let e = run(&p, &t, Strategy::Spread).unwrap_err();
    assert_eq!(
        e.to_string(),
        "group \"g\" needs 5 processes; only 4 free slots in the whole topology"
    );
}

#[test]
fn connection_failures_name_the_best_pair_of_clusters() {
    let t = topo(
        &[("a", 2, 2, 0.1, 1000.0), ("b", 2, 2, 0.1, 1000.0)],
        &[("a", "b", 25.0, 40.0)],
    );
    let p = job(
        vec![
            net("close", Some(10.0), None),
            net("wide", None, Some(100.0)),
        ],
        vec![],
        vec![
            group("m", 4, None, None, &[("w", "close")]),
            group("w", 4, None, None, &[]),
        ],
    );
    let e = run(&p, &t, Strategy::Spread).unwrap_err();
    assert_eq!(
        e.to_string(),
        "groups \"m\" and \"w\" need latency <= 10 ms between them; the best placement offers 25 ms (clusters \"a\" and \"b\")"
    );
    let p = job(
        vec![net("wide", None, Some(100.0))],
        vec![],
        vec![
            group("m", 4, None, None, &[("w", "wide")]),
            group("w", 4, None, None, &[]),
        ],
    );
    let e = run(&p, &t, Strategy::Spread).unwrap_err();
    assert!(
        e.to_string().contains(
            "need bandwidth >= 100 Mbit/s between them; the best placement offers 40 Mbit/s"
        ),
        "{e}"
    );
    // no measured link at all
    let t = topo(&[("a", 2, 2, 0.1, 1000.0), ("b", 2, 2, 0.1, 1000.0)], &[]);
    let e = run(&p, &t, Strategy::Spread).unwrap_err();
    assert!(matches!(e, ScheduleError::Connection { .. }), "{e}");
}

#[test]
fn joint_infeasibility_and_budget_are_reported() {
    // both groups fit "a" alone but not together; "b" is too slow inside
    let t = topo(
        &[("a", 2, 2, 0.1, 1000.0), ("b", 4, 4, 8.0, 1000.0)],
        &[("a", "b", 1.0, 1000.0)],
    );
    let p = job(
        vec![net("lan", Some(1.0), None)],
        vec![],
        vec![
            group("g1", 3, None, Some("lan"), &[]),
            group("g2", 2, None, Some("lan"), &[]),
        ],
    );
    let e = run(&p, &t, Strategy::Spread).unwrap_err();
    assert!(matches!(e, ScheduleError::Unsatisfiable { .. }), "{e}");
    assert!(e
        .to_string()
        .starts_with("no mapping meets all requirements together"));
    let p = job(vec![], vec![], vec![group("g", 2, None, None, &[])]);
    let e = schedule_with_limits(
        &p,
        &t,
        &FreeSlots::all(&t),
        Strategy::Spread,
        Limits { max_placements: 0 },
    )
    .unwrap_err();
    assert!(matches!(e, ScheduleError::BudgetExhausted { .. }), "{e}");
}

#[test]
fn bad_inputs_are_rejected() {
    let t = topo(&[("a", 2, 2, 0.1, 1000.0)], &[]);
    let p = job(vec![], vec![], vec![group("g", 2, Some("nope"), None, &[])]);
    assert!(matches!(
        run(&p, &t, Strategy::Spread),
        Err(ScheduleError::Profile(_))
    ));
    let p = job(vec![], vec![], vec![group("g", 2, None, None, &[])]);
    assert!(FreeSlots::from_counts(&t, vec![vec![3, 0]]).is_err());
    assert!(FreeSlots::from_counts(&t, vec![vec![1]]).is_err());
    let free = FreeSlots::from_counts(&t, vec![vec![1, 1]]).unwrap();
    assert_eq!(
        schedule(&p, &t, &free, Strategy::Spread)
            .unwrap()
            .ranks
            .len(),
        2
    );
    let mut bad = t.clone();
    bad.links.push(InterLink {
        a: "a".into(),
        b: "zz".into(),
        quality: q(1.0, 1.0),
    });
    assert!(matches!(
        run(&p, &bad, Strategy::Spread),
        Err(ScheduleError::Topology(_))
    ));
}

#[test]
fn budget_returns_the_best_mapping_found_so_far() {
    let (t, p) = near_pair();
    let limits = Limits { max_placements: 2 };
    let m = schedule_with_limits(&p, &t, &FreeSlots::all(&t), Strategy::Spread, limits).unwrap();
    assert!(!m.exhaustive);
    assert_eq!(m.explored, 2);
    assert_eq!(m.ranks.len(), 16);
}

#[test]
fn four_group_example_is_scheduled_on_two_sites() {
    let p = JobProfile::parse(include_str!("../../examples-xml/four-groups.xml")).unwrap();
    let mut t = topo(
        &[
            ("paris", 8, 4, 0.05, 10000.0),
            ("lille", 4, 2, 0.2, 1000.0),
            ("nice", 4, 4, 2.0, 1000.0),
        ],
        &[
            ("paris", "lille", 6.0, 500.0),
            ("paris", "nice", 15.0, 100.0),
            ("lille", "nice", 20.0, 40.0),
        ],
    );
    for n in &mut t.clusters[0].nodes[..4] {
        n.memory_mib = 16384.0;
    }
    let m = run(&p, &t, Strategy::Concentrate).unwrap();
    assert!(m.exhaustive);
    assert_eq!(m.ranks.len(), 36);
    // atmosphere needs fat nodes: the first four nodes of paris
    assert_eq!(m.groups[0].clusters, [("paris".to_string(), 16)]);
    assert!(m.ranks[..16].iter().all(|r| r.node_index < 4));
    // "nice" is too slow inside for ocean and land (lan: 1 ms)
    for g in [1, 3] {
        assert!(m.groups[g].clusters.iter().all(|(c, _)| c != "nice"));
    }
}
