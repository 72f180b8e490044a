//! Runs random collectives and checks each against a sequential reference computed
//! locally (every rank can make every rank's input from the seed).
//!
//! `qcg run -n 7 --clusters 3 --nodes-per-cluster 2 -- target/debug/examples/collcheck SEED CASES`

use qcg::{Algo, CollOptions, Comm, ReduceOp};

/// A small deterministic generator (splitmix64), the same on every rank.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

fn input(seed: u64, case: u64, rank: u32, len: usize) -> Vec<u8> {
    let mut r = Rng(seed ^ (case << 20) ^ (u64::from(rank) << 40));
    (0..len).map(|_| r.next() as u8).collect()
}

/// 2×2 matrices of wrapping u64: a non-commutative product.
fn matmul(a: &mut [u8], b: &[u8]) {
    let rd =
        |s: &[u8], i: usize| u64::from_le_bytes(s[i * 8..i * 8 + 8].try_into().unwrap_or([0; 8]));
    let (a0, a1, a2, a3) = (rd(a, 0), rd(a, 1), rd(a, 2), rd(a, 3));
    let (b0, b1, b2, b3) = (rd(b, 0), rd(b, 1), rd(b, 2), rd(b, 3));
    let r = [
        a0.wrapping_mul(b0).wrapping_add(a1.wrapping_mul(b2)),
        a0.wrapping_mul(b1).wrapping_add(a1.wrapping_mul(b3)),
        a2.wrapping_mul(b0).wrapping_add(a3.wrapping_mul(b2)),
        a2.wrapping_mul(b1).wrapping_add(a3.wrapping_mul(b3)),
    ];
    for (i, v) in r.iter().enumerate() {
        a[i * 8..i * 8 + 8].copy_from_slice(&v.to_le_bytes());
    }
}

fn check(comm: &Comm, seed: u64, case: u64) -> Result<String, Box<dyn std::error::Error>> {
    let (me, p) = (comm.rank(), comm.size());
    let mut rng = Rng(seed.wrapping_mul(31).wrapping_add(case));
    let algo = [
        Algo::Auto,
        Algo::Hierarchical,
        Algo::FlatBinomial,
        Algo::FlatLinear,
        Algo::Chain,
    ][rng.below(5) as usize];
    let flits = if algo == Algo::Auto {
        None
    } else {
        Some(1 + rng.below(16) as usize)
    };
    comm.set_coll_options(CollOptions {
        algo,
        flits,
        ..comm.coll_options()
    });
    let root = rng.below(u64::from(p)) as u32;
    let sizes = [0usize, 1, 7, 64, 1000, 4099, 65_536, 300_007];
    let op = rng.below(9);
    let all = |len: usize| -> Vec<Vec<u8>> { (0..p).map(|r| input(seed, case, r, len)).collect() };
    let what;
    match op {
        0 => {
            let len = sizes[rng.below(sizes.len() as u64) as usize];
            let src = input(seed, case, root, len);
            let mut buf = if me == root {
                src.clone()
            } else {
                vec![0; len]
            };
            comm.bcast(root, &mut buf)?;
            if buf != src {
                return Err("bcast result differs".into());
            }
            what = format!("bcast {len} B root {root}");
        }
        1 | 2 => {
            let n = sizes[rng.below(sizes.len() as u64) as usize] / 8;
            let ins: Vec<Vec<u64>> = all(n * 8)
                .iter()
                .map(|b| {
                    b.chunks_exact(8)
                        .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
                        .collect()
                })
                .collect();
            let rop = [
                ReduceOp::Sum,
                ReduceOp::Max,
                ReduceOp::BitXor,
                ReduceOp::Min,
            ][rng.below(4) as usize];
            let expect: Vec<u64> = (0..n)
                .map(|i| {
                    ins.iter().skip(1).fold(ins[0][i], |a, x| match rop {
                        ReduceOp::Sum => a.wrapping_add(x[i]),
                        ReduceOp::Max => a.max(x[i]),
                        ReduceOp::Min => a.min(x[i]),
                        _ => a ^ x[i],
                    })
                })
                .collect();
            if op == 1 {
                let r = comm.reduce(root, &ins[me as usize], rop)?;
                if me == root && r.as_deref() != Some(&expect[..]) {
                    return Err(format!("reduce {rop:?} result differs").into());
                }
                what = format!("reduce {rop:?} {n}×u64 root {root}");
            } else {
                let r = comm.allreduce(&ins[me as usize], rop)?;
                if r != expect {
                    return Err(format!("allreduce {rop:?} result differs").into());
                }
                what = format!("allreduce {rop:?} {n}×u64");
            }
        }
        3 => {
            let len = sizes[rng.below(5) as usize];
            let ins = all(len);
            let r = comm.gather(root, &ins[me as usize])?;
            if me == root && r != Some(ins.concat()) {
                return Err("gather result differs".into());
            }
            what = format!("gather {len} B root {root}");
        }
        4 => {
            let len = sizes[rng.below(5) as usize];
            let whole = input(seed, case, root, len * p as usize);
            let r = comm.scatter(root, if me == root { &whole } else { &[] }, len)?;
            if r != whole[me as usize * len..(me as usize + 1) * len] {
                return Err("scatter result differs".into());
            }
            what = format!("scatter {len} B root {root}");
        }
        5 => {
            let len = sizes[rng.below(5) as usize];
            let ins = all(len);
            if comm.allgather(&ins[me as usize])? != ins.concat() {
                return Err("allgather result differs".into());
            }
            what = format!("allgather {len} B");
        }
        6 => {
            let len = sizes[rng.below(4) as usize];
            let ins = all(len * p as usize);
            let expect: Vec<u8> = (0..p as usize)
                .flat_map(|i| ins[i][me as usize * len..(me as usize + 1) * len].to_vec())
                .collect();
            if comm.alltoall(&ins[me as usize])? != expect {
                return Err("alltoall result differs".into());
            }
            what = format!("alltoall {len} B");
        }
        7 => {
            // A non-commutative product of 2×2 matrices: rank order, always.
            let n = 1 + rng.below(40) as usize;
            let ins = all(n * 32);
            let mut expect = ins[0].clone();
            for x in &ins[1..] {
                for (a, b) in expect.chunks_exact_mut(32).zip(x.chunks_exact(32)) {
                    matmul(a, b);
                }
            }
            let r = comm.reduce_bytes(root, &ins[me as usize], 32, false, &matmul)?;
            if me == root && r != Some(expect) {
                return Err("non-commutative reduce result is not in rank order".into());
            }
            what = format!("matrix product {n}×2×2 root {root}");
        }
        _ => {
            comm.barrier()?;
            what = "barrier".into();
        }
    }
    Ok(format!("{what} ({algo:?}, flits {flits:?})"))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let comm = qcg::init()?;
    let seed: u64 = std::env::args().nth(1).map_or(Ok(1), |s| s.parse())?;
    let cases: u64 = std::env::args().nth(2).map_or(Ok(40), |s| s.parse())?;
    let verbose = std::env::var_os("COLLCHECK_VERBOSE").is_some();
    for case in 0..cases {
        match check(&comm, seed, case) {
            Ok(what) => {
                if verbose && comm.rank() == 0 {
                    println!("case {case}: {what}");
                }
            }
            Err(e) => return Err(format!("seed {seed} case {case}: {e}").into()),
        }
    }
    // A split into two halves works and its collectives stay apart from the parent's.
    let half = comm
        .split(Some(comm.rank() % 2), comm.rank())?
        .ok_or("split returned nothing")?;
    let sum = half.allreduce(&[u64::from(comm.rank())], ReduceOp::Sum)?;
    let expect: u64 = (0..comm.size())
        .filter(|r| r % 2 == comm.rank() % 2)
        .map(u64::from)
        .sum();
    if sum[0] != expect {
        return Err(format!("split allreduce gave {} not {expect}", sum[0]).into());
    }
    if comm.rank() == 0 {
        println!("collcheck: seed {seed}: {cases} collectives and a split matched the sequential reference on {} ranks", comm.size());
    }
    Ok(())
}
