//! temp
use qcg_coll::{model, sim, schedule, Algorithm, Collective, LinkCost, Op, Topology};
fn main() {
    let a = LinkCost::new(1.0, 0.1);
    let paths = vec![vec!["s0", "n0"], vec!["s0", "n1"], vec!["s0", "n1"], vec!["s1", "n0"], vec!["s1", "n0"]];
    let topo = Topology::from_paths(&paths, vec![a, a, a]).unwrap();
    for k in [1, 2] {
        let coll = Collective::new(Op::Gather, 0, 10);
        let m = model::time(&coll, &topo, Algorithm::FlatLinear, k).unwrap();
        let sc = schedule(&coll, &topo, Algorithm::FlatLinear, k).unwrap();
        let r = sim::estimate(&sc, &topo).unwrap();
        println!("k {k}: model {m:.6} sim {:.6}", r.time);
        for st in &sc[0].steps { println!("  {st:?}"); }
    }
}
