//! Times `auto::choose` (temporary).
use qcg_coll::{auto, Collective, Op, Topology};
fn main() {
    for (c, n, p) in [(2, 16, 1), (4, 8, 4), (8, 16, 8)] {
        let topo = Topology::uniform(c, n, p);
        for op in [Op::Bcast, Op::Reduce, Op::Allreduce, Op::Gather] {
            for bytes in [8usize, 1 << 16, 1 << 22] {
                let t0 = std::time::Instant::now();
                let ch = auto::choose(&Collective::new(op, 0, bytes), &topo);
                println!(
                    "P={} {op:?} {bytes}: {:?} in {:?}",
                    topo.size(),
                    ch.map(|c| (c.algorithm, c.flits)),
                    t0.elapsed()
                );
            }
        }
    }
}
