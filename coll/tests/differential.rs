//! Every operation and algorithm against a sequential reference on random grids.

#![allow(clippy::unwrap_used)] // test crate: helpers outside #[test] unwrap too

mod common;

use std::collections::HashSet;

use common::{perm_bytes, random_topology, reference, Rng, REDS};
use qcg_coll::{schedule, schedule_for, sim, Algorithm, Collective, Op, ScheduleError, Topology};

struct Case {
    seed: u64,
    topo: Topology,
    coll: Collective,
    alg: Algorithm,
    flits: usize,
    red: usize,
}

fn random_case(seed: u64, big: bool) -> Case {
    let mut rng = Rng(seed);
    let (mut topo, _) = random_topology(&mut rng, 6);
    if big {
        // At most 8 ranks, picked at random: also exercises `subset`.
        let mut ranks: Vec<usize> = (0..topo.size()).collect();
        rng.shuffle(&mut ranks);
        ranks.truncate(rng.range(1, 8));
        topo = topo.subset(&ranks).unwrap();
    }
    let op = Op::ALL[rng.range(0, Op::ALL.len() - 1)];
    let alg = Algorithm::ALL[rng.range(0, 3)];
    let red = if op.is_reduction() {
        rng.range(0, REDS.len() - 1)
    } else {
        1 // sum_u8: unused
    };
    let elem = if op.is_reduction() {
        REDS[red].elem
    } else {
        [1, 1, 2, 4, 8][rng.range(0, 4)]
    };
    let block_op = !matches!(op, Op::Bcast | Op::Reduce | Op::Allreduce | Op::Barrier);
    let elems = match (big, rng.range(0, 19)) {
        (false, 14..=18) if block_op => rng.range(65, 300),
        (false, 14..=18) if elem > 4 => rng.range(65, 500),
        (true, _) => rng.range(1 << 16, (4 << 20) / elem),
        (false, 0..=13) => rng.range(0, 64),
        (false, 14..=18) => rng.range(65, 2000),
        _ => [0, 1, 2, 3, 5, 7, 11, 13, 251, 509, 1021][rng.range(0, 10)],
    };
    let commutative = if op.is_reduction() {
        REDS[red].commutative && rng.range(0, 3) != 0
    } else {
        rng.range(0, 1) == 0
    };
    let coll = Collective::new(op, rng.range(0, topo.size() - 1), elems * elem)
        .elem_size(elem)
        .commutative(commutative);
    Case {
        seed,
        topo,
        coll,
        alg,
        flits: rng.range(1, 16),
        red,
    }
}

/// Runs one case; returns false when the combination is unsupported.
fn check(case: &Case) -> bool {
    let Case {
        seed,
        topo,
        coll,
        alg,
        flits,
        red,
    } = case;
    let ctx = format!(
        "seed {seed:#x}: {:?} {alg:?} flits {flits} P {} root {} bytes {} elem {} comm {} red {}",
        coll.op,
        topo.size(),
        coll.root,
        coll.bytes,
        coll.elem_size,
        coll.commutative,
        REDS[*red].name
    );
    let scheds = match schedule(coll, topo, *alg, *flits) {
        Ok(s) => s,
        Err(ScheduleError::Unsupported(Op::Alltoall, a)) if a != Algorithm::FlatLinear => {
            return false
        }
        Err(e) => panic!("{ctx}: {e}"),
    };
    let mut rng = Rng(seed ^ 0xABCD);
    let inputs: Vec<Vec<u8>> = scheds
        .iter()
        .map(|s| {
            if REDS[*red].name == "perm8" && coll.op.is_reduction() {
                perm_bytes(&mut rng, s.input_len)
            } else {
                rng.bytes(s.input_len)
            }
        })
        .collect();
    let report = sim::run(&scheds, topo, &inputs, coll.elem_size, &REDS[*red].f)
        .unwrap_or_else(|e| panic!("{ctx}: {e}"));
    let root_inputs: Vec<Vec<u8>> = inputs.clone();
    let want = reference(
        coll.op,
        topo.size(),
        coll.root,
        coll.bytes,
        &root_inputs,
        REDS[*red].f,
    );
    for (r, (got, want)) in report.outputs.iter().zip(&want).enumerate() {
        assert!(got == want, "{ctx}: rank {r} output differs");
    }
    let mut seen = HashSet::new();
    for m in &report.messages {
        assert!(
            seen.insert((m.from, m.to, m.tag)),
            "{ctx}: tag reused {m:?}"
        );
        assert!(m.tag < 1 << 18, "{ctx}: tag too large");
    }
    let r = rng.range(0, topo.size() - 1);
    let one = schedule_for(r, coll, topo, *alg, *flits).unwrap();
    assert_eq!(one, scheds[r], "{ctx}: schedule_for({r}) differs");
    true
}

#[test]
fn random_small_cases_match_reference() {
    let base: u64 = std::env::var("QCG_COLL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5EED_2026);
    let cases = 3000;
    let mut ran = 0;
    for i in 0..cases {
        let seed = base.wrapping_mul(1_000_003).wrapping_add(i);
        if check(&random_case(seed, false)) {
            ran += 1;
        }
    }
    assert!(ran > cases * 3 / 4, "too many unsupported cases: {ran}");
}

#[test]
fn a_few_big_cases_match_reference() {
    for i in 0..6 {
        let seed = 0xB16_0000 + i;
        let mut case = random_case(seed, true);
        // Keep P·n modest for the block operations.
        if !matches!(case.coll.op, Op::Bcast | Op::Reduce | Op::Allreduce) {
            case.coll.op = [Op::Bcast, Op::Reduce, Op::Allreduce][i as usize % 3];
            case.red = 1;
            case.coll.elem_size = 1;
        }
        check(&case);
    }
}

#[test]
fn prime_sizes_up_to_4_mib() {
    // 4 MiB − 3 is prime; elem size 1 so every byte count is allowed.
    let topo = Topology::uniform(3, 2, 2);
    for (op, alg, flits, bytes) in [
        (Op::Bcast, Algorithm::Hierarchical, 8, 4_194_301),
        (Op::Allreduce, Algorithm::Chain, 13, 1_000_003),
        (Op::Reduce, Algorithm::FlatBinomial, 7, 65_521),
        (Op::Gather, Algorithm::Hierarchical, 5, 65_521),
        (Op::Scatter, Algorithm::Chain, 16, 8_191),
        (Op::Allgather, Algorithm::FlatLinear, 3, 8_191),
        (Op::Alltoall, Algorithm::FlatLinear, 2, 4_093),
        (Op::Alltoall, Algorithm::Hierarchical, 3, 4_093),
    ] {
        let case = Case {
            seed: bytes as u64,
            topo: topo.clone(),
            coll: Collective::new(op, 5, bytes),
            alg,
            flits,
            red: 1,
        };
        assert!(check(&case));
    }
}

#[test]
fn every_op_and_algorithm_on_a_noncontiguous_grid() {
    // Three sites whose ranks interleave: 0,3,6,.. / 1,4,7,.. / 2,5,8,..
    let paths: Vec<Vec<String>> = (0..18)
        .map(|r| vec![format!("s{}", r % 3), format!("n{}", r % 2)])
        .collect();
    let topo = Topology::from_paths(&paths, Topology::grid5000_costs().to_vec()).unwrap();
    for op in Op::ALL {
        for alg in Algorithm::ALL {
            for red in [0, 6, 7] {
                for flits in [1, 3, 16] {
                    let elem = if op.is_reduction() { REDS[red].elem } else { 1 };
                    let case = Case {
                        seed: 7,
                        topo: topo.clone(),
                        coll: Collective::new(op, 4, 40 * elem)
                            .elem_size(elem)
                            .commutative(REDS[red].commutative),
                        alg,
                        flits,
                        red,
                    };
                    check(&case);
                }
            }
        }
    }
}

/// Large allreduces over a slow WAN split the site representatives' exchange
/// (Rabenseifner: reduce-scatter, then allgather, the `PHASE_SPREAD` messages); the
/// results are the sequential reference's for every reduction, commutative or not,
/// on random site counts, ranks per site, sizes and flit counts.
#[test]
fn split_exchange_allreduces_match_reference() {
    use qcg_coll::{LinkCost, Step, PHASE_SPREAD};
    let wan = LinkCost::from_bandwidth(10e-3, 100e6);
    let lan = LinkCost::from_bandwidth(50e-6, 10e9);
    let mut rng = Rng(0x5B11_7000);
    let mut split = 0;
    for i in 0..30u64 {
        let sites = rng.range(2, 6);
        let topo = Topology::uniform(sites, rng.range(1, 4), 1)
            .with_costs(vec![wan, lan, lan])
            .unwrap();
        let red = rng.range(0, REDS.len() - 1);
        let elem = REDS[red].elem;
        // Mostly large (where the split pays), some just above one element per site.
        let elems = match rng.range(0, 3) {
            0 => rng.range(sites, 4 * sites),
            _ => rng.range(50_000 / elem, 400_000 / elem),
        };
        let coll = Collective::new(Op::Allreduce, 0, elems * elem)
            .elem_size(elem)
            .commutative(REDS[red].commutative);
        let case = Case {
            seed: 0x5B11_7000 + i,
            topo,
            coll,
            alg: Algorithm::Hierarchical,
            flits: rng.range(1, 12),
            red,
        };
        assert!(check(&case));
        let scheds = schedule(&case.coll, &case.topo, case.alg, case.flits).unwrap();
        let spreads = scheds.iter().any(|s| {
            s.steps
                .iter()
                .any(|st| matches!(st, Step::Send { tag, .. } if tag >> 16 == PHASE_SPREAD))
        });
        split += usize::from(spreads);
    }
    assert!(
        split >= 10,
        "the split exchange was chosen in {split} of 30 cases"
    );
}

/// A large allreduce between the ranks of one node with a core each (libqcg's
/// shared-memory costs) splits the vector between all of them, each rank's input sent
/// as it is: every rank sends a block to every other, combines its own block and
/// hands it out, and the handed-out blocks land straight in the output (no step
/// touched them before). Results are the sequential reference's for every
/// reduction, commutative or not. Small vectors, and a crowded node (more ranks than
/// cores: each message waits for a core), keep the tree.
#[test]
fn one_node_allreduces_split_between_all_ranks_and_match_reference() {
    use qcg_coll::exec::{direct_receives, fills_output};
    use qcg_coll::{Buf, LinkCost, Step, PHASE_SPREAD};
    let node = LinkCost::from_bandwidth(0.6e-6, 64e9);
    let crowded = LinkCost::from_bandwidth(100e-6, 8e9);
    let splits = |topo: &Topology, coll: &Collective, flits: usize| {
        let scheds = schedule(coll, topo, Algorithm::Hierarchical, flits).unwrap();
        scheds
            .iter()
            .flat_map(|s| &s.steps)
            .any(|st| matches!(st, Step::Send { tag, .. } if tag >> 16 == PHASE_SPREAD))
    };
    let mut rng = Rng(0x0DE5_1000);
    for i in 0..24u64 {
        let p = rng.range(2, 20);
        let topo = Topology::uniform(1, 1, p)
            .with_costs(vec![node; 3])
            .unwrap();
        let red = rng.range(0, REDS.len() - 1);
        let elem = REDS[red].elem;
        let elems = rng.range(300_000 / elem, 1_100_000 / elem);
        let coll = Collective::new(Op::Allreduce, 0, elems * elem)
            .elem_size(elem)
            .commutative(REDS[red].commutative);
        let choice =
            qcg_coll::auto::choose_among(&coll, &topo, &[Algorithm::Hierarchical]).unwrap();
        let case = Case {
            seed: 0x0DE5_1000 + i,
            topo,
            coll,
            alg: Algorithm::Hierarchical,
            flits: choice.flits,
            red,
        };
        assert!(check(&case), "case {i}: {p} ranks, {} bytes", coll.bytes);
        let scheds = schedule(&case.coll, &case.topo, case.alg, case.flits).unwrap();
        for s in &scheds {
            let ctx = format!("case {i}: rank {} of {p}, {} flits", s.rank, case.flits);
            let mut to = HashSet::new();
            let mut spreads = 0;
            for st in &s.steps {
                if let Step::Send {
                    to: q, tag, buf, ..
                } = st
                {
                    to.insert(*q);
                    if tag >> 16 == PHASE_SPREAD {
                        spreads += 1;
                        assert_eq!(*buf, Buf::Output, "{ctx}");
                    } else {
                        assert_eq!(*buf, Buf::Input, "{ctx}: the input goes out as it is");
                    }
                }
            }
            assert_eq!(to.len(), p - 1, "{ctx}: sends to every other rank");
            assert!(
                spreads >= p - 1,
                "{ctx}: hands its block to every other rank"
            );
            let direct = direct_receives(s, 1);
            for (st, d) in s.steps.iter().zip(&direct) {
                if let Step::Recv {
                    buf: Buf::Output, ..
                } = st
                {
                    assert!(d, "{ctx}: a handed-out block lands in place");
                }
            }
            assert!(fills_output(s), "{ctx}");
        }
        // Not on a crowded node (where the split measured up to 2× slower).
        let topo = Topology::uniform(1, 1, p)
            .with_costs(vec![crowded; 3])
            .unwrap();
        let choice =
            qcg_coll::auto::choose_among(&coll, &topo, &[Algorithm::Hierarchical]).unwrap();
        assert!(
            !splits(&topo, &coll, choice.flits),
            "case {i}: crowded, {p} ranks"
        );
    }
    // A vector of fewer elements than ranks cannot be split.
    let topo = Topology::uniform(1, 1, 8)
        .with_costs(vec![node; 3])
        .unwrap();
    let coll = Collective::new(Op::Allreduce, 0, 7 * 8).elem_size(8);
    assert!(!splits(&topo, &coll, 1), "a tree, not a split");
}
