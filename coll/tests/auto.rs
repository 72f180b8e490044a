//! What the cost model picks. The crossovers come out of the α/β stage model in `sim`;
//! these tests pin them so a change to the model or the schedules shows up.

#![allow(clippy::unwrap_used)] // test crate: helpers outside #[test] unwrap too

use qcg_coll::auto::{choose, choose_among, estimate_time};
use qcg_coll::{model, Algorithm, Collective, LinkCost, Op, Topology};

/// The QCG cluster of the paper (Table 3a): 4 nodes × 8 processes, TCP between nodes
/// (89.6 Mb/s, 0.1 ms), shared memory inside (3979 Mb/s, 0.02 ms).
fn qcg_cluster() -> Topology {
    let tcp = LinkCost::from_bandwidth(0.1e-3, 89.61e6);
    let shm = LinkCost::from_bandwidth(0.02e-3, 3979.46e6);
    Topology::uniform(1, 4, 8)
        .with_costs(vec![tcp, tcp, shm])
        .unwrap()
}

/// Two sites whose WAN is as fast as their LAN (894 Mb/s, 0.1 ms), 4 nodes × 4 processes.
fn fast_wan() -> Topology {
    let lan = LinkCost::from_bandwidth(0.1e-3, 894.39e6);
    let shm = LinkCost::from_bandwidth(0.02e-3, 3979.46e6);
    Topology::uniform(2, 4, 4)
        .with_costs(vec![lan, lan, shm])
        .unwrap()
}

fn first_size_choosing(topo: &Topology, op: Op, alg: Algorithm) -> Option<usize> {
    (10..=22).map(|e| 1usize << e).find(|&bytes| {
        choose(&Collective::new(op, 0, bytes), topo)
            .unwrap()
            .algorithm
            == alg
    })
}

#[test]
fn reduce_on_a_cluster_of_multicores_switches_to_a_flat_pipeline_near_100_kb() {
    // QCG-OMPI saw the flat pipeline beat the hierarchy for reduce above ~100 kB. In our
    // model the hierarchy wins small reductions and the pipelined chain wins from 16 KiB
    // on this cluster (a sender is busy only its overhead and the bytes' time per flit,
    // not the whole latency, so pipelines pay off a little earlier than the paper saw).
    let topo = qcg_cluster();
    let small = choose(&Collective::new(Op::Reduce, 0, 1024), &topo).unwrap();
    assert_eq!(small.algorithm, Algorithm::Hierarchical);
    let big = choose(&Collective::new(Op::Reduce, 0, 4 << 20), &topo).unwrap();
    assert_eq!(big.algorithm, Algorithm::Chain);
    assert!(big.flits >= 16, "{big:?}");
    let cross = first_size_choosing(&topo, Op::Reduce, Algorithm::Chain).unwrap();
    assert!(
        (16 << 10..=256 << 10).contains(&cross),
        "crossover at {cross}"
    );
}

#[test]
fn fast_wan_large_reduce_and_allreduce_pick_the_chain() {
    let topo = fast_wan();
    for op in [Op::Reduce, Op::Allreduce, Op::Bcast] {
        let big = choose(&Collective::new(op, 3, 4 << 20), &topo).unwrap();
        assert_eq!(big.algorithm, Algorithm::Chain, "{op:?}");
        let small = choose(&Collective::new(op, 3, 64), &topo).unwrap();
        assert_ne!(small.algorithm, Algorithm::Chain, "{op:?}");
    }
}

#[test]
fn slow_wan_bcast_crosses_the_wan_once_and_pipelines_large_messages() {
    // Grid'5000 Orsay–Bordeaux (Table 3b), 2 sites × 16 nodes: small messages cross the
    // WAN once (the hierarchy, or the root sending to everyone, which here is as good);
    // from 16 KiB on the hierarchy wins, as in the paper, with flits.
    let topo = Topology::uniform(2, 16, 1);
    let wan = topo.costs()[0].alpha;
    for e in [3, 10] {
        let c = choose(&Collective::new(Op::Bcast, 0, 1 << e), &topo).unwrap();
        assert!(
            matches!(c.algorithm, Algorithm::Hierarchical | Algorithm::FlatLinear),
            "2^{e} bytes: {c:?}"
        );
        assert!(c.time < 1.1 * wan, "2^{e} bytes: {c:?}");
    }
    for e in [14, 17, 20, 22] {
        let c = choose(&Collective::new(Op::Bcast, 0, 1 << e), &topo).unwrap();
        assert_eq!(c.algorithm, Algorithm::Hierarchical, "2^{e} bytes: {c:?}");
        assert!(c.flits > 1, "2^{e} bytes: {c:?}");
    }
    // Honest note: with the WAN the bottleneck the model keeps reduce hierarchical too;
    // it does not reproduce the paper's reduce crossover on the grid.
    let r = choose(&Collective::new(Op::Reduce, 0, 4 << 20), &topo).unwrap();
    assert_eq!(r.algorithm, Algorithm::Hierarchical);
}

#[test]
fn the_choice_is_the_cheapest_candidate() {
    let topo = fast_wan();
    for op in Op::ALL {
        for bytes in [0, 8, 4096, 1 << 18] {
            let coll = Collective::new(op, 5, bytes);
            let c = choose(&coll, &topo).unwrap();
            assert_eq!(
                model::time(&coll, &topo, c.algorithm, c.flits).unwrap(),
                c.time
            );
            let sim = estimate_time(&coll, &topo, c.algorithm, c.flits).unwrap();
            // Alltoall is priced round by round: within a factor two (see `model`).
            let tolerance = if op == Op::Alltoall { 1.0 } else { 0.05 };
            assert!(
                (sim - c.time).abs() <= tolerance * sim,
                "{op:?} {bytes}: sim {sim} vs {c:?}"
            );
            for alg in Algorithm::ALL {
                if let Ok(other) = choose_among(&coll, &topo, &[alg]) {
                    assert!(c.time <= other.time, "{op:?} {bytes}: {c:?} vs {other:?}");
                }
                for k in [1, 2, 4] {
                    if let Ok(t) = model::time(&coll, &topo, alg, k) {
                        assert!(c.time <= t, "{op:?} {bytes} {alg:?}/{k}: {c:?} vs {t}");
                    }
                }
            }
        }
    }
}

/// Sixteen ranks on a two-core node (libqcg's crowded costs: 100 µs a hop, the node's
/// bandwidth shared): one flit at every size, though the same costs without the
/// crowded mark pipeline a large bcast and allreduce (the chain of 32 flits the model
/// priced cheapest measured 1.7× a one-flit tree on such a node).
#[test]
fn a_crowded_node_does_not_pipeline() {
    let cost = LinkCost::from_bandwidth(100e-6, 8e9);
    let plain = Topology::uniform(1, 1, 16)
        .with_costs(vec![cost; 3])
        .unwrap();
    let crowded = Topology::uniform(1, 1, 16)
        .with_costs(vec![cost.on_crowded_node(); 3])
        .unwrap();
    for op in [Op::Bcast, Op::Allreduce, Op::Reduce, Op::Allgather] {
        for e in 3..=20 {
            let c = Collective::new(op, 0, 1 << e).elem_size(8);
            assert_eq!(choose(&c, &crowded).unwrap().flits, 1, "{op:?} 2^{e}");
        }
    }
    for op in [Op::Bcast, Op::Allreduce] {
        let c = Collective::new(op, 0, 1 << 20).elem_size(8);
        assert!(
            choose(&c, &plain).unwrap().flits > 1,
            "{op:?}: the flag decides"
        );
    }
    // Ranks on several nodes pipeline as before, whatever a node's flag.
    let two = Topology::uniform(1, 2, 8)
        .with_costs(vec![cost, cost, cost.on_crowded_node()])
        .unwrap();
    let c = Collective::new(Op::Bcast, 0, 1 << 20);
    assert_eq!(
        choose(&c, &two).unwrap(),
        choose(
            &c,
            &Topology::uniform(1, 2, 8)
                .with_costs(vec![cost; 3])
                .unwrap()
        )
        .unwrap()
    );
}
