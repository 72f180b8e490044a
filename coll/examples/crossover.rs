//! Prints what `auto::choose` picks for a few operations and sizes on three grids: the
//! Grid'5000 pair of sites and the QCG cluster of the QCG-OMPI paper, and two sites
//! with a WAN as fast as their LAN. `cargo run --release -p qcg-coll --example crossover`

use std::error::Error;

use qcg_coll::{auto, Algorithm, Collective, LinkCost, Op, Topology};

fn main() -> Result<(), Box<dyn Error>> {
    let lan = LinkCost::from_bandwidth(0.1e-3, 894.39e6);
    let tcp = LinkCost::from_bandwidth(0.1e-3, 89.61e6);
    let shm = LinkCost::from_bandwidth(0.02e-3, 3979.46e6);
    let grids = [
        ("grid5000 2x16x1", Topology::uniform(2, 16, 1)),
        (
            "fast-wan 2x4x4",
            Topology::uniform(2, 4, 4).with_costs(vec![lan, lan, shm])?,
        ),
        (
            "qcg 1x4x8",
            Topology::uniform(1, 4, 8).with_costs(vec![tcp, tcp, shm])?,
        ),
    ];
    for (name, topo) in &grids {
        for op in [Op::Bcast, Op::Reduce, Op::Gather, Op::Allreduce] {
            for bytes in [8usize, 1 << 10, 1 << 14, 1 << 17, 1 << 20, 1 << 22] {
                let coll = Collective::new(op, 0, bytes);
                let best = auto::choose(&coll, topo)?;
                let each: Vec<String> = Algorithm::ALL
                    .iter()
                    .filter_map(|&a| auto::choose_among(&coll, topo, &[a]).ok())
                    .map(|c| format!("{:?}/{}={:.2}ms", c.algorithm, c.flits, c.time * 1e3))
                    .collect();
                println!(
                    "{name} {op:?} {bytes}: {:?} x{} {:.2} ms  [{}]",
                    best.algorithm,
                    best.flits,
                    best.time * 1e3,
                    each.join(" ")
                );
            }
        }
    }
    Ok(())
}
