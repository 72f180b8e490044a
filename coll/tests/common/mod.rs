//! Shared test helpers: a seeded generator, random topologies, reductions, references.
#![allow(dead_code, clippy::unwrap_used)]

use qcg_coll::{LinkCost, Op, Topology};

/// splitmix64: small, seedable, good enough for test inputs.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in lo..=hi.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next() % (hi - lo + 1) as u64) as usize
    }
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut v = Vec::with_capacity(n + 8);
        while v.len() < n {
            v.extend_from_slice(&self.next().to_le_bytes());
        }
        v.truncate(n);
        v
    }
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.range(0, i);
            v.swap(i, j);
        }
    }
}

/// A random grid of depth 0–3 (mostly 2: sites, nodes, processes): 1–`max_sites` groups
/// at the top, 1–4 (1–3 at depth 3) per group below, 1–4 processes per leaf group, ranks
/// assigned in a random order (groups not contiguous) or, half the time, group by group.
/// Returns the topology and the number of top-level groups (1 at depth 0).
pub fn random_topology(rng: &mut Rng, max_sites: usize) -> (Topology, usize) {
    let depth: usize = [0, 1, 2, 2, 2, 2, 3][rng.range(0, 6)];
    let mut paths: Vec<Vec<String>> = vec![Vec::new()];
    for l in 0..depth {
        let mut next = Vec::new();
        for p in &paths {
            let fan = match l {
                0 => rng.range(1, max_sites),
                _ if depth == 3 => rng.range(1, 3),
                _ => rng.range(1, 4),
            };
            for i in 0..fan {
                let mut q = p.clone();
                q.push(format!("g{l}.{i}"));
                next.push(q);
            }
        }
        paths = next;
    }
    let top: std::collections::HashSet<&String> = paths.iter().filter_map(|p| p.first()).collect();
    let top = top.len().max(1);
    let mut ranks = Vec::new();
    for p in &paths {
        for _ in 0..rng.range(1, 4) {
            ranks.push(p.clone());
        }
    }
    if rng.range(0, 1) == 0 {
        rng.shuffle(&mut ranks);
    }
    let costs = (0..=depth)
        .map(|l| {
            let scale = 10f64.powi(-(l as i32));
            let cost = LinkCost::new(
                1e-3 * scale * rng.range(1, 20) as f64,
                1e-8 * scale * rng.range(1, 10) as f64,
            );
            // A third of the levels join their groups pairwise.
            if rng.range(0, 2) == 0 {
                cost.meshed()
            } else {
                cost
            }
        })
        .collect();
    (Topology::from_paths(&ranks, costs).unwrap(), top)
}

/// A reduction: name, element size, commutative, combine (left ∘ right into out).
pub struct Red {
    pub name: &'static str,
    pub elem: usize,
    pub commutative: bool,
    pub f: fn(&[u8], &[u8], &mut [u8]),
}

fn lanes<const W: usize>(a: &[u8], b: &[u8], out: &mut [u8], f: fn(u64, u64) -> u64) {
    for ((x, y), o) in a.chunks(W).zip(b.chunks(W)).zip(out.chunks_mut(W)) {
        let mut xa = [0u8; 8];
        let mut ya = [0u8; 8];
        xa[..W].copy_from_slice(x);
        ya[..W].copy_from_slice(y);
        let r = f(u64::from_le_bytes(xa), u64::from_le_bytes(ya)).to_le_bytes();
        o.copy_from_slice(&r[..W]);
    }
}

fn sum_u32(a: &[u8], b: &[u8], o: &mut [u8]) {
    lanes::<4>(a, b, o, |x, y| (x as u32).wrapping_add(y as u32) as u64)
}
fn sum_u8(a: &[u8], b: &[u8], o: &mut [u8]) {
    for ((x, y), o) in a.iter().zip(b).zip(o) {
        *o = x.wrapping_add(*y);
    }
}
fn min_u16(a: &[u8], b: &[u8], o: &mut [u8]) {
    lanes::<2>(a, b, o, |x, y| x.min(y))
}
fn max_u8(a: &[u8], b: &[u8], o: &mut [u8]) {
    lanes::<1>(a, b, o, |x, y| x.max(y))
}
fn xor_u64(a: &[u8], b: &[u8], o: &mut [u8]) {
    lanes::<8>(a, b, o, |x, y| x ^ y)
}
fn and_u8(a: &[u8], b: &[u8], o: &mut [u8]) {
    lanes::<1>(a, b, o, |x, y| x & y)
}

fn u64s(x: &[u8]) -> [u64; 4] {
    let mut m = [0u64; 4];
    for (i, c) in x.chunks(8).enumerate() {
        m[i] = u64::from_le_bytes(c.try_into().unwrap());
    }
    m
}

/// 2×2 matrices of wrapping u64, row-major: `out = a · b`.
fn matmul(a: &[u8], b: &[u8], o: &mut [u8]) {
    for ((x, y), out) in a.chunks(32).zip(b.chunks(32)).zip(o.chunks_mut(32)) {
        let (x, y) = (u64s(x), u64s(y));
        let m = [
            x[0].wrapping_mul(y[0])
                .wrapping_add(x[1].wrapping_mul(y[2])),
            x[0].wrapping_mul(y[1])
                .wrapping_add(x[1].wrapping_mul(y[3])),
            x[2].wrapping_mul(y[0])
                .wrapping_add(x[3].wrapping_mul(y[2])),
            x[2].wrapping_mul(y[1])
                .wrapping_add(x[3].wrapping_mul(y[3])),
        ];
        for (i, v) in m.iter().enumerate() {
            out[i * 8..i * 8 + 8].copy_from_slice(&v.to_le_bytes());
        }
    }
}

/// Composition of permutations of 0..8 (one per byte, values taken mod 8):
/// `(a ∘ b)[i] = a[b[i]]`.
fn compose(a: &[u8], b: &[u8], o: &mut [u8]) {
    for ((x, y), out) in a.chunks(8).zip(b.chunks(8)).zip(o.chunks_mut(8)) {
        for i in 0..8 {
            out[i] = x[(y[i] % 8) as usize] % 8;
        }
    }
}

/// Bytes that are permutations of 0..8 per element, for `compose`.
pub fn perm_bytes(rng: &mut Rng, n: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(n);
    while v.len() < n {
        let mut p: Vec<u8> = (0..8).collect();
        rng.shuffle(&mut p);
        v.extend_from_slice(&p);
    }
    v.truncate(n);
    v
}

pub const REDS: [Red; 8] = [
    Red {
        name: "sum_u32",
        elem: 4,
        commutative: true,
        f: sum_u32,
    },
    Red {
        name: "sum_u8",
        elem: 1,
        commutative: true,
        f: sum_u8,
    },
    Red {
        name: "min_u16",
        elem: 2,
        commutative: true,
        f: min_u16,
    },
    Red {
        name: "max_u8",
        elem: 1,
        commutative: true,
        f: max_u8,
    },
    Red {
        name: "xor_u64",
        elem: 8,
        commutative: true,
        f: xor_u64,
    },
    Red {
        name: "and_u8",
        elem: 1,
        commutative: true,
        f: and_u8,
    },
    Red {
        name: "matmul2x2",
        elem: 32,
        commutative: false,
        f: matmul,
    },
    Red {
        name: "perm8",
        elem: 8,
        commutative: false,
        f: compose,
    },
];

/// The expected `Output` of every rank, computed sequentially.
pub fn reference(
    op: Op,
    p: usize,
    root: usize,
    n: usize,
    inputs: &[Vec<u8>],
    f: fn(&[u8], &[u8], &mut [u8]),
) -> Vec<Vec<u8>> {
    let reduced = if op.is_reduction() {
        let mut acc = inputs[0].clone();
        for x in &inputs[1..] {
            let mut out = vec![0; n];
            f(&acc, x, &mut out);
            acc = out;
        }
        acc
    } else {
        Vec::new()
    };
    let concat = if matches!(op, Op::Gather | Op::Allgather) {
        inputs.concat()
    } else {
        Vec::new()
    };
    let reduced = || reduced.clone();
    let concat = || concat.clone();
    (0..p)
        .map(|r| match op {
            Op::Bcast => inputs[root].clone(),
            Op::Reduce if r == root => reduced(),
            Op::Reduce => Vec::new(),
            Op::Allreduce => reduced(),
            Op::Gather if r == root => concat(),
            Op::Gather => Vec::new(),
            Op::Scatter => inputs[root][r * n..(r + 1) * n].to_vec(),
            Op::Allgather => concat(),
            Op::Barrier => Vec::new(),
            Op::Alltoall => (0..p)
                .flat_map(|i| inputs[i][r * n..(r + 1) * n].to_vec())
                .collect(),
        })
        .collect()
}
