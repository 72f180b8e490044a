//! Message counts per level, pipelining order, and the simulator's checks and time model.

#![allow(clippy::unwrap_used)] // test crate: helpers outside #[test] unwrap too

mod common;

use common::{random_topology, Rng};
use qcg_coll::{
    pieces, schedule, sim, Algorithm, Buf, Collective, LinkCost, Op, RankSchedule, Step, Topology,
};

/// Site (top-level group) of every rank.
fn sites(topo: &Topology) -> Vec<u32> {
    (0..topo.size()).map(|r| topo.group(0, r)).collect()
}

fn wan_sent_per_site(topo: &Topology, report: &sim::SimReport) -> Vec<usize> {
    let site = sites(topo);
    let n = *site.iter().max().unwrap() as usize + 1;
    let mut sent = vec![0; n];
    for m in report.messages.iter().filter(|m| m.level == 0) {
        sent[site[m.from] as usize] += 1;
    }
    sent
}

fn run_counts(topo: &Topology, coll: &Collective, alg: Algorithm, flits: usize) -> sim::SimReport {
    let s = schedule(coll, topo, alg, flits).unwrap();
    let inputs: Vec<Vec<u8>> = s.iter().map(|r| vec![1; r.input_len]).collect();
    sim::run(&s, topo, &inputs, coll.elem_size, &|a, b, o| {
        for ((x, y), o) in a.iter().zip(b).zip(o) {
            *o = x.wrapping_add(*y);
        }
    })
    .unwrap()
}

/// Number of distinct groups at each level, then P (groups of one rank at level depth).
fn groups_per_level(topo: &Topology) -> Vec<usize> {
    let mut g: Vec<usize> = (0..topo.depth())
        .map(|l| {
            let ids: std::collections::HashSet<u32> =
                (0..topo.size()).map(|r| topo.group(l, r)).collect();
            ids.len()
        })
        .collect();
    g.push(topo.size());
    g
}

#[test]
fn hierarchical_bcast_sends_c_minus_1_messages_per_flit_across_sites() {
    let mut rng = Rng(0xBCA5);
    for case in 0..300 {
        let (topo, c) = random_topology(&mut rng, 6);
        let bytes = rng.range(0, 5000);
        let flits = rng.range(1, 16);
        let coll = Collective::new(Op::Bcast, rng.range(0, topo.size() - 1), bytes);
        let k = pieces(bytes, 1, flits).len();
        let rep = run_counts(&topo, &coll, Algorithm::Hierarchical, flits);
        let ctx = format!("case {case}: depth {} {c} sites, {k} flits", topo.depth());
        // Across level l: one message per flit per group of level l beyond the first in
        // its parent group (level 0: C − 1 for C sites), whatever the depth.
        let g = groups_per_level(&topo);
        for (l, count) in rep.levels.iter().enumerate() {
            let before = if l == 0 { 1 } else { g[l - 1] };
            assert_eq!(count.messages, (g[l] - before) * k, "{ctx}: level {l}");
        }
        if topo.depth() > 0 {
            assert_eq!(rep.levels[0].messages, (c - 1) * k, "{ctx}");
        }
        let flat = run_counts(&topo, &coll, Algorithm::FlatBinomial, flits);
        assert!(rep.levels[0].messages <= flat.levels[0].messages, "{ctx}");
    }
}

#[test]
fn hierarchical_collectives_send_one_message_per_flit_per_site_across_sites() {
    let mut rng = Rng(0x0C1A);
    for case in 0..300 {
        let (topo, c) = random_topology(&mut rng, 6);
        if topo.depth() == 0 {
            continue;
        }
        let root = rng.range(0, topo.size() - 1);
        let flits = rng.range(1, 16);
        let ops = [
            Op::Reduce,
            Op::Allreduce,
            Op::Gather,
            Op::Scatter,
            Op::Allgather,
            Op::Barrier,
        ];
        let op = ops[case % ops.len()];
        let elems = rng.range(1, 300);
        let commutative = rng.range(0, 1) == 0;
        let coll = Collective::new(op, root, elems * 4)
            .elem_size(4)
            .commutative(commutative);
        let k = if op == Op::Barrier {
            1
        } else {
            pieces(elems * 4, 4, flits).len()
        };
        let rep = run_counts(&topo, &coll, Algorithm::Hierarchical, flits);
        // One tree edge per non-root site, used once per flit in each direction taken.
        let (up, down) = match op {
            Op::Reduce | Op::Gather => (1, 0),
            Op::Scatter => (0, 1),
            _ => (1, 1),
        };
        let k_down = if op == Op::Allgather {
            pieces(elems * 4 * topo.size(), 4, flits).len()
        } else {
            k
        };
        let ctx = format!("case {case}: {op:?} {c} sites P {} flits {k}", topo.size());
        let wan = rep.levels[0].messages;
        if op == Op::Allreduce && wan == c * (c - 1) * k {
            // The representatives exchanged their partials (one message per flit per
            // ordered pair of sites, one WAN latency): every site sends to each other.
            assert!(wan_sent_per_site(&topo, &rep)
                .iter()
                .all(|&n| n == (c - 1) * k));
            continue;
        }
        if op == Op::Allgather {
            // The representatives exchanged their sites' blocks (one WAN latency): each
            // site sends one message per run of its consecutive ranks to each other
            // site, and nothing else crosses.
            let site = sites(&topo);
            let mut runs = vec![0usize; c];
            for (r, &g) in site.iter().enumerate() {
                if r == 0 || site[r - 1] != g {
                    runs[g as usize] += 1;
                }
            }
            let sent = wan_sent_per_site(&topo, &rep);
            assert!(
                (0..c).all(|g| sent[g] == (c - 1) * runs[g]),
                "{ctx}: sent {sent:?}, runs {runs:?}"
            );
            continue;
        }
        assert_eq!(wan, (c - 1) * (up * k + down * k_down), "{ctx}");
        let tree_root = if op.is_rooted() { root } else { 0 };
        let root_site = topo.group(0, tree_root);
        let sent = wan_sent_per_site(&topo, &rep);
        for (s, &n) in sent.iter().enumerate() {
            // A site sends up once per flit, and down once per flit per child site.
            let mine = if s as u32 == root_site { 0 } else { up * k };
            assert!(
                n >= mine && n <= mine + down * k_down * (c - 1),
                "{ctx}: site {s} sent {n}"
            );
        }
    }
}

#[test]
fn hierarchical_alltoall_sends_one_message_per_flit_per_pair_of_sites() {
    let mut rng = Rng(0xA2A);
    for case in 0..200 {
        let (topo, c) = random_topology(&mut rng, 5);
        let flits = rng.range(1, 8);
        let bytes = rng.range(0, 40);
        let k = pieces(bytes, 1, flits).len();
        let coll = Collective::new(Op::Alltoall, 0, bytes);
        let rep = run_counts(&topo, &coll, Algorithm::Hierarchical, flits);
        let ctx = format!("case {case}: depth {} {c} sites", topo.depth());
        if topo.depth() > 0 {
            assert_eq!(rep.levels[0].messages, c * (c - 1) * k, "{ctx}");
            for (s, &n) in wan_sent_per_site(&topo, &rep).iter().enumerate() {
                assert_eq!(n, (c - 1) * k, "{ctx}: site {s}");
            }
        }
    }
}

#[test]
fn every_flit_is_forwarded_before_the_next_is_received() {
    let mut rng = Rng(0xF117);
    for case in 0..400 {
        let (topo, _) = random_topology(&mut rng, 4);
        let op = Op::ALL[case % 7]; // not alltoall: no forwarding there
        let alg = Algorithm::ALL[rng.range(0, 3)];
        let coll = Collective::new(op, rng.range(0, topo.size() - 1), rng.range(1, 300))
            .commutative(rng.range(0, 1) == 0);
        for rs in schedule(&coll, &topo, alg, rng.range(2, 16)).unwrap() {
            check_pipelined(&rs, &format!("case {case} {op:?} {alg:?}"));
        }
    }
}

/// Within a phase, every send of flit i comes before any receive of flit i+1.
fn check_pipelined(rs: &RankSchedule, ctx: &str) {
    let mut last_send = std::collections::HashMap::new();
    for (idx, st) in rs.steps.iter().enumerate() {
        if let Step::Send { tag, .. } = st {
            last_send.insert(*tag, idx);
        }
    }
    for (idx, st) in rs.steps.iter().enumerate() {
        if let Step::Recv { tag, .. } = st {
            if tag & 0xFFFF == 0 {
                continue;
            }
            if let Some(&s) = last_send.get(&(tag - 1)) {
                assert!(s < idx, "{ctx}: rank {} receives tag {tag:#x} at {idx} before sending flit before it at {s}", rs.rank);
            }
        }
    }
}

fn step_send(to: usize, len: usize) -> Step {
    Step::Send {
        to,
        tag: 0,
        buf: Buf::Output,
        range: 0..len,
    }
}
fn step_recv(from: usize, len: usize) -> Step {
    Step::Recv {
        from,
        tag: 0,
        buf: Buf::Output,
        range: 0..len,
    }
}
fn two(steps0: Vec<Step>, steps1: Vec<Step>) -> Vec<RankSchedule> {
    vec![
        RankSchedule {
            rank: 0,
            input_len: 0,
            output_len: 4,
            temps: vec![],
            steps: steps0,
        },
        RankSchedule {
            rank: 1,
            input_len: 0,
            output_len: 4,
            temps: vec![],
            steps: steps1,
        },
    ]
}

#[test]
fn simulator_rejects_broken_schedules() {
    let topo = Topology::uniform(1, 1, 2);
    let nop: sim::Combine = &|_, _, _| {};
    let inputs = vec![vec![], vec![]];
    let run = |s: Vec<RankSchedule>| sim::run(&s, &topo, &inputs, 1, nop);
    assert!(matches!(
        run(two(vec![step_recv(1, 4)], vec![step_recv(0, 4)])),
        Err(sim::SimError::Deadlock(_))
    ));
    assert!(matches!(
        run(two(vec![step_send(1, 4)], vec![step_recv(0, 3)])),
        Err(sim::SimError::SizeMismatch { .. })
    ));
    assert!(matches!(
        run(two(vec![step_send(1, 4)], vec![])),
        Err(sim::SimError::Unconsumed(_))
    ));
    assert!(matches!(
        run(two(vec![step_send(1, 5)], vec![])),
        Err(sim::SimError::BadStep { .. })
    ));
    assert!(matches!(
        run(two(vec![step_send(0, 1)], vec![])),
        Err(sim::SimError::BadStep { .. })
    ));
    let write_input = Step::Copy {
        dst: Buf::Input,
        dst_range: 0..0,
        src: Buf::Output,
        src_range: 0..0,
    };
    assert!(matches!(
        run(two(vec![write_input], vec![])),
        Err(sim::SimError::BadStep { .. })
    ));
    let overlap = Step::Copy {
        dst: Buf::Output,
        dst_range: 0..2,
        src: Buf::Output,
        src_range: 1..3,
    };
    assert!(matches!(
        run(two(vec![overlap], vec![])),
        Err(sim::SimError::BadStep { .. })
    ));
    assert!(run(two(vec![step_send(1, 4)], vec![step_recv(0, 4)])).is_ok());
}

#[test]
fn chain_time_matches_the_pipelining_formula() {
    // P ranks on one node, chain of P−1 stages, k flits: the first flit takes
    // (P−1)·(α + β·m/k), each next one a sender's busy time later, o + β·m/k with
    // o = min(α, SEND_OVERHEAD).
    let (alpha, beta) = (1e-3, 1e-6);
    let paths: Vec<Vec<&str>> = (0..6).map(|_| vec!["s", "n"]).collect();
    let c = LinkCost::new(alpha, beta);
    let topo = Topology::from_paths(&paths, vec![c, c, c]).unwrap();
    for (k, m) in [(1, 6000), (4, 6000), (8, 8000)] {
        let s = schedule(
            &Collective::new(Op::Bcast, 0, m),
            &topo,
            Algorithm::Chain,
            k,
        )
        .unwrap();
        let t = sim::estimate(&s, &topo).unwrap().time;
        let s = (m / k) as f64;
        let o = alpha.min(qcg_coll::topology::SEND_OVERHEAD);
        let want = 5.0 * (alpha + beta * s) + (k - 1) as f64 * (o + beta * s);
        assert!((t - want).abs() < 1e-9, "k {k}: {t} vs {want}");
    }
}

#[test]
fn noncontiguous_sites_send_one_partial_per_run() {
    // Two sites interleaved 0,2,4 / 1,3,5: ordered reduce must carry three partials per
    // message from the non-root site (runs {1},{3},{5}), commutative one.
    let paths: Vec<Vec<String>> = (0..6)
        .map(|r| vec![format!("s{}", r % 2), "n".into()])
        .collect();
    let topo = Topology::from_paths(&paths, Topology::grid5000_costs().to_vec()).unwrap();
    for (commutative, partials) in [(true, 1), (false, 3)] {
        let coll = Collective::new(Op::Reduce, 0, 64)
            .elem_size(8)
            .commutative(commutative);
        let rep = run_counts(&topo, &coll, Algorithm::Hierarchical, 1);
        assert_eq!(rep.levels[0].messages, 1);
        assert_eq!(rep.levels[0].bytes, 64 * partials);
    }
}

#[test]
fn hierarchical_small_bcast_crosses_a_slow_wan_once_and_large_ones_keep_a_binomial_top() {
    // Four sites joined by a 10 ms WAN: the root's site sends straight to each other
    // site (one WAN latency, MagPIe's flat top), whatever the number of sites; with
    // a fast WAN and long flits the top level stays a binomial tree.
    let wan = LinkCost::from_bandwidth(10e-3, 100e6);
    let lan = LinkCost::from_bandwidth(50e-6, 10e9);
    for sites in [3, 4, 8] {
        let topo = Topology::uniform(sites, 4, 1)
            .with_costs(vec![wan, lan, lan])
            .unwrap();
        let coll = Collective::new(Op::Bcast, 0, 64);
        let s = schedule(&coll, &topo, Algorithm::Hierarchical, 1).unwrap();
        let t = sim::estimate(&s, &topo).unwrap().time;
        assert!(t < 1.1 * wan.alpha, "{sites} sites: {t}");
        let report = run_counts(&topo, &coll, Algorithm::Hierarchical, 1);
        assert_eq!(report.levels[0].messages, sites - 1);
    }
    let fast = LinkCost::from_bandwidth(10e-6, 1e9);
    let topo = Topology::uniform(8, 2, 1)
        .with_costs(vec![fast, lan, lan])
        .unwrap();
    let coll = Collective::new(Op::Bcast, 0, 8 << 20);
    let s = schedule(&coll, &topo, Algorithm::Hierarchical, 16).unwrap();
    let root_wan_sends = s[0]
        .steps
        .iter()
        .filter(|st| matches!(st, Step::Send { to, .. } if topo.level(0, *to) == 0))
        .count();
    assert_eq!(
        root_wan_sends,
        3 * 16,
        "binomial top: the root sends to 3 sites"
    );
}

#[test]
fn hierarchical_small_allreduce_on_a_slow_wan_costs_one_wan_latency() {
    // The site representatives exchange their partials instead of reducing to one
    // and broadcasting back: one WAN latency, not two; every site sends one message
    // per other site. Non-commutative with contiguous sites keeps rank order (the
    // differential tests check the values).
    let wan = LinkCost::from_bandwidth(10e-3, 100e6);
    let lan = LinkCost::from_bandwidth(50e-6, 10e9);
    let topo = Topology::uniform(4, 4, 1)
        .with_costs(vec![wan, lan, lan])
        .unwrap();
    for commutative in [true, false] {
        let coll = Collective::new(Op::Allreduce, 0, 64).commutative(commutative);
        let s = schedule(&coll, &topo, Algorithm::Hierarchical, 1).unwrap();
        let t = sim::estimate(&s, &topo).unwrap().time;
        assert!(t < 1.1 * wan.alpha, "{t}");
        let report = run_counts(&topo, &coll, Algorithm::Hierarchical, 1);
        assert_eq!(report.levels[0].messages, 4 * 3);
    }
}

#[test]
fn on_a_mesh_wan_the_root_feeds_every_site_at_full_bandwidth() {
    // Four sites joined pairwise (a link of 100 Mbit/s each): a 1 MB bcast in flits
    // the sender hands over without waiting reaches every site in about one latency
    // plus one message's time, not three; on a shared uplink, or as one message the
    // sender writes to one link after the other, the three copies queue.
    let lan = LinkCost::from_bandwidth(50e-6, 10e9);
    let wan = LinkCost::from_bandwidth(10e-3, 100e6);
    let m = 1_000_000;
    let time = |wan: LinkCost, flits: usize| {
        let topo = Topology::uniform(4, 1, 1)
            .with_costs(vec![wan, lan, lan])
            .unwrap();
        let s = schedule(
            &Collective::new(Op::Bcast, 0, m),
            &topo,
            Algorithm::FlatLinear,
            flits,
        )
        .unwrap();
        sim::estimate(&s, &topo).unwrap().time
    };
    let one_copy = wan.alpha + wan.beta * m as f64;
    assert!(time(wan.meshed(), 16) < 1.05 * one_copy);
    assert!(time(wan, 16) > 2.9 * wan.beta * m as f64);
    assert!(time(wan.meshed(), 1) > 2.9 * wan.beta * m as f64);
}
