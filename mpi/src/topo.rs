//! Process topologies (MPI 3.1 chapter 7) as plain data: `MPI_Dims_create`'s
//! balanced factorization, Cartesian grids (coordinates, shifts, sub-grids), graphs
//! and distributed graphs, and the neighbour lists the neighbourhood collectives
//! exchange with. Pure: no communicator, no pointer; `ffi::topo` makes the
//! communicators and moves the bytes.
//!
//! Ranks are ranks of the topology's communicator; `None` stands for
//! `MPI_PROC_NULL` where a neighbour may be missing (the edge of a non-periodic
//! grid).

use crate::error::{Class, MpiError};

/// `MPI_GRAPH`, as `MPI_Topo_test` reports it.
pub const GRAPH: i32 = 1;
/// `MPI_CART`.
pub const CART: i32 = 2;
/// `MPI_DIST_GRAPH`.
pub const DIST_GRAPH: i32 = 3;

/// A communicator's topology.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Topology {
    /// `MPI_Cart_create`'s grid.
    Cart(Cart),
    /// `MPI_Graph_create`'s graph.
    Graph(Graph),
    /// `MPI_Dist_graph_create(_adjacent)`'s view of this process's edges.
    DistGraph(DistGraph),
}

impl Topology {
    /// `MPI_CART`, `MPI_GRAPH` or `MPI_DIST_GRAPH`.
    pub fn kind(&self) -> i32 {
        match self {
            Topology::Cart(_) => CART,
            Topology::Graph(_) => GRAPH,
            Topology::DistGraph(_) => DIST_GRAPH,
        }
    }

    /// Who rank `me` exchanges with in a neighbourhood collective.
    pub fn plan(&self, me: u32) -> Plan {
        match self {
            Topology::Cart(c) => c.plan(me),
            Topology::Graph(g) => {
                let n: Vec<Option<u32>> = g.neighbors(me).iter().map(|&x| Some(x)).collect();
                Plan::single_tag(n.clone(), n)
            }
            Topology::DistGraph(d) => Plan::single_tag(
                d.sources.iter().map(|&x| Some(x)).collect(),
                d.destinations.iter().map(|&x| Some(x)).collect(),
            ),
        }
    }
}

/// One block of a neighbourhood collective: the peer (`None` for
/// `MPI_PROC_NULL`: the block's slot is kept but nothing moves) and the tag offset
/// that keeps apart two blocks between the same pair of processes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Edge {
    /// The peer's rank, or `None`.
    pub peer: Option<u32>,
    /// Added to the collective's base tag.
    pub tag: u32,
}

/// The blocks of a neighbourhood collective, in MPI's slot order: receive block
/// `i` comes from `recv[i]`, send block `j` goes to `send[j]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// In-neighbours (the receive buffer's slots).
    pub recv: Vec<Edge>,
    /// Out-neighbours (the send buffer's slots).
    pub send: Vec<Edge>,
}

impl Plan {
    fn single_tag(recv: Vec<Option<u32>>, send: Vec<Option<u32>>) -> Plan {
        let e = |peer| Edge { peer, tag: 0 };
        Plan {
            recv: recv.into_iter().map(e).collect(),
            send: send.into_iter().map(e).collect(),
        }
    }
}

fn err(class: Class, msg: impl Into<String>) -> MpiError {
    MpiError::new(class, msg)
}

/// `MPI_Dims_create`: fills the zero entries of `dims` so that the product of all
/// entries is `nnodes`, the filled ones as close to each other as possible and in
/// non-increasing order; positive entries are kept. Fails with `MPI_ERR_DIMS` when
/// an entry is negative or the positive entries do not divide `nnodes`.
///
/// The split is Open MPI's (see `balanced`), so that a program gets the same
/// grid under both.
pub fn dims_create(nnodes: i32, dims: &[i32]) -> Result<Vec<i32>, MpiError> {
    if nnodes < 0 {
        return Err(err(
            Class::Arg,
            format!("the number of nodes {nnodes} is negative"),
        ));
    }
    if let Some(d) = dims.iter().find(|&&d| d < 0) {
        return Err(err(
            Class::Dims,
            format!("dimension {d} is negative (0 means: choose)"),
        ));
    }
    let fixed: i64 = dims
        .iter()
        .filter(|&&d| d > 0)
        .fold(1i64, |a, &d| a.saturating_mul(i64::from(d)));
    let nfree = dims.iter().filter(|&&d| d == 0).count();
    let n = i64::from(nnodes);
    if n == 0 || fixed == 0 || n % fixed != 0 {
        return Err(err(
            Class::Dims,
            format!("the given dimensions (product {fixed}) do not divide the {nnodes} nodes"),
        ));
    }
    let free = n / fixed;
    if nfree == 0 {
        if free != 1 {
            return Err(err(
                Class::Dims,
                format!("the dimensions multiply to {fixed}, not to the {nnodes} nodes"),
            ));
        }
        return Ok(dims.to_vec());
    }
    let mut split = balanced(free as u64, nfree);
    split.sort_unstable_by(|a, b| b.cmp(a));
    let mut it = split.into_iter();
    Ok(dims
        .iter()
        .map(|&d| {
            if d == 0 {
                it.next().unwrap_or(1) as i32
            } else {
                d
            }
        })
        .collect())
}

/// `k` factors of `n`, sorted non-increasing, as Open MPI splits them: the prime
/// factors, largest first, each multiplied into the smallest factor so far (the
/// first of equal ones). Close to the most balanced split, and the same as Open
/// MPI's everywhere (MPICH's exhaustive search differs for a few sizes, e.g. 72
/// in 2 dimensions: 9 × 8 where this gives 12 × 6).
fn balanced(n: u64, k: usize) -> Vec<u64> {
    let mut bins = vec![1u64; k];
    for p in prime_factors(n).into_iter().rev() {
        let mut smallest = 0;
        for (i, &b) in bins.iter().enumerate() {
            if b < bins[smallest] {
                smallest = i;
            }
        }
        bins[smallest] *= p;
    }
    bins
}

/// The prime factors of `n`, ascending, with repeats.
fn prime_factors(mut n: u64) -> Vec<u64> {
    let mut out = Vec::new();
    let mut d = 2;
    while d * d <= n {
        while n % d == 0 {
            out.push(d);
            n /= d;
        }
        d += 1;
    }
    if n > 1 {
        out.push(n);
    }
    out
}

/// A Cartesian grid: extents and periodicity per dimension, ranks in row-major
/// order (the last dimension varies fastest).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cart {
    /// Extent of each dimension (each at least 1).
    pub dims: Vec<i32>,
    /// Whether each dimension wraps around.
    pub periods: Vec<bool>,
}

impl Cart {
    /// A grid of `dims` with `periods` (non-zero = periodic); `MPI_ERR_DIMS` for
    /// an extent below 1, `MPI_ERR_ARG` (as MPICH and Open MPI) if it holds more
    /// than `size` processes.
    pub fn new(dims: &[i32], periods: &[i32], size: u32) -> Result<Cart, MpiError> {
        if let Some(d) = dims.iter().find(|&&d| d <= 0) {
            return Err(err(
                Class::Dims,
                format!("dimension {d} of the grid is not positive"),
            ));
        }
        let c = Cart {
            dims: dims.to_vec(),
            periods: periods.iter().map(|&p| p != 0).collect(),
        };
        if c.size() > u64::from(size) {
            return Err(err(
                Class::Arg,
                format!(
                    "the grid {:?} holds {} processes, more than the communicator's {size}",
                    c.dims,
                    c.size()
                ),
            ));
        }
        Ok(c)
    }

    /// The number of processes in the grid.
    pub fn size(&self) -> u64 {
        // Saturating: a grid too large to count is larger than any communicator.
        self.dims
            .iter()
            .fold(1u64, |a, &d| a.saturating_mul(d.max(0) as u64))
    }

    /// The number of dimensions.
    pub fn ndims(&self) -> usize {
        self.dims.len()
    }

    /// The coordinates of `rank` (in the grid).
    pub fn coords(&self, rank: u32) -> Vec<i32> {
        let mut r = rank as i64;
        let mut c = vec![0; self.dims.len()];
        for (i, &d) in self.dims.iter().enumerate().rev() {
            c[i] = (r % i64::from(d)) as i32;
            r /= i64::from(d);
        }
        c
    }

    /// The rank at `coords`: periodic coordinates wrap, others out of range are
    /// `MPI_ERR_ARG`.
    pub fn rank(&self, coords: &[i32]) -> Result<u32, MpiError> {
        let mut r: i64 = 0;
        for (i, (&c, &d)) in coords.iter().zip(&self.dims).enumerate() {
            let c = if self.periods[i] {
                i64::from(c).rem_euclid(i64::from(d))
            } else if (0..d).contains(&c) {
                i64::from(c)
            } else {
                return Err(err(
                    Class::Arg,
                    format!("coordinate {c} is outside 0..{d} in non-periodic dimension {i}"),
                ));
            };
            r = r * i64::from(d) + c;
        }
        Ok(r as u32)
    }

    /// `MPI_Cart_shift`: (source, dest) of a shift by `disp` along `direction`;
    /// `None` off the edge of a non-periodic dimension.
    pub fn shift(
        &self,
        rank: u32,
        direction: i32,
        disp: i32,
    ) -> Result<(Option<u32>, Option<u32>), MpiError> {
        let dim = usize::try_from(direction)
            .ok()
            .filter(|&d| d < self.dims.len())
            .ok_or_else(|| {
                err(
                    Class::Arg,
                    format!(
                        "direction {direction} is not a dimension of the grid (0..{})",
                        self.dims.len()
                    ),
                )
            })?;
        let me = self.coords(rank);
        let at = |delta: i64| -> Option<u32> {
            let d = i64::from(self.dims[dim]);
            let mut c = me.clone();
            let x = i64::from(me[dim]) + delta;
            let x = if self.periods[dim] {
                x.rem_euclid(d)
            } else if (0..d).contains(&x) {
                x
            } else {
                return None;
            };
            c[dim] = x as i32;
            self.rank(&c).ok()
        };
        Ok((at(-i64::from(disp)), at(i64::from(disp))))
    }

    /// `MPI_Cart_sub` for `rank`: the split's color (its place among the
    /// sub-grids), key (its rank in its sub-grid) and the sub-grid.
    pub fn sub(&self, remain: &[bool], rank: u32) -> (u32, u32, Cart) {
        let c = self.coords(rank);
        let (mut color, mut key) = (0u64, 0u64);
        let mut sub = Cart {
            dims: Vec::new(),
            periods: Vec::new(),
        };
        for (i, (&d, &x)) in self.dims.iter().zip(&c).enumerate() {
            if remain.get(i).copied().unwrap_or(false) {
                key = key * d as u64 + x as u64;
                sub.dims.push(d);
                sub.periods.push(self.periods[i]);
            } else {
                color = color * d as u64 + x as u64;
            }
        }
        (color as u32, key as u32, sub)
    }

    /// The neighbours of a Cartesian neighbourhood collective: for each
    /// dimension, the −1 then the +1 neighbour. The block sent towards −1 lands in
    /// that neighbour's +1 slot, and the other way round; the tags keep them apart
    /// when both neighbours are one process (a periodic dimension of 1 or 2).
    fn plan(&self, me: u32) -> Plan {
        let mut recv = Vec::new();
        let mut send = Vec::new();
        for d in 0..self.dims.len() {
            let (lo, hi) = self.shift(me, d as i32, 1).unwrap_or((None, None));
            let t = 2 * d as u32;
            recv.push(Edge { peer: lo, tag: t });
            recv.push(Edge {
                peer: hi,
                tag: t + 1,
            });
            send.push(Edge {
                peer: lo,
                tag: t + 1,
            });
            send.push(Edge { peer: hi, tag: t });
        }
        Plan { recv, send }
    }
}

/// `MPI_Graph_create`'s graph: node `i`'s neighbours are
/// `edges[index[i-1]..index[i]]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Graph {
    /// Cumulative neighbour counts.
    pub index: Vec<i32>,
    /// The neighbours, node after node.
    pub edges: Vec<u32>,
}

impl Graph {
    /// Checks a graph of `nnodes` nodes for a communicator of `size` processes:
    /// `MPI_ERR_TOPOLOGY` for an edge to a missing node or a decreasing index,
    /// `MPI_ERR_ARG` for more nodes than processes.
    pub fn new(nnodes: usize, index: &[i32], edges: &[i32], size: u32) -> Result<Graph, MpiError> {
        if nnodes > size as usize {
            return Err(err(
                Class::Arg,
                format!("the graph has {nnodes} nodes, more than the communicator's {size}"),
            ));
        }
        let mut prev = 0;
        for (i, &x) in index.iter().enumerate() {
            if x < prev {
                return Err(err(
                    Class::Topology,
                    format!("index[{i}] = {x} is below index[{}] = {prev}", i.max(1) - 1),
                ));
            }
            prev = x;
        }
        if edges.len() != prev as usize {
            return Err(err(
                Class::Topology,
                format!("the index promises {prev} edges, {} given", edges.len()),
            ));
        }
        let edges = edges
            .iter()
            .map(|&e| {
                u32::try_from(e)
                    .ok()
                    .filter(|&e| (e as usize) < nnodes)
                    .ok_or_else(|| {
                        err(
                            Class::Topology,
                            format!("edge to node {e}, which is not in the graph of {nnodes}"),
                        )
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Graph {
            index: index.to_vec(),
            edges,
        })
    }

    /// The number of nodes.
    pub fn nnodes(&self) -> usize {
        self.index.len()
    }

    /// The neighbours of `rank`, in the order given (an empty list outside the
    /// graph).
    pub fn neighbors(&self, rank: u32) -> &[u32] {
        let r = rank as usize;
        if r >= self.index.len() {
            return &[];
        }
        let lo = if r == 0 {
            0
        } else {
            self.index[r - 1] as usize
        };
        let hi = self.index[r] as usize;
        self.edges.get(lo..hi).unwrap_or(&[])
    }
}

/// A process's edges in a distributed graph.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DistGraph {
    /// In-neighbours, in order.
    pub sources: Vec<u32>,
    /// Their weights (zeros when unweighted).
    pub source_weights: Vec<i32>,
    /// Out-neighbours, in order.
    pub destinations: Vec<u32>,
    /// Their weights.
    pub destination_weights: Vec<i32>,
    /// Whether weights were given.
    pub weighted: bool,
}

/// One edge of `MPI_Dist_graph_create`: from `src` to `dst` with `weight`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DistEdge {
    /// The source process.
    pub src: u32,
    /// The destination.
    pub dst: u32,
    /// Its weight (0 unweighted).
    pub weight: i32,
}

impl DistGraph {
    /// `MPI_Dist_graph_create`'s lists of `sources[i]` each with `degrees[i]`
    /// destinations, as edges: `MPI_ERR_ARG` for a rank outside `0..size` (as
    /// Open MPI and MPICH: these are arrays of ranks, not a rank argument).
    pub fn edges_of(
        sources: &[i32],
        degrees: &[i32],
        destinations: &[i32],
        weights: Option<&[i32]>,
        size: u32,
    ) -> Result<Vec<DistEdge>, MpiError> {
        let rank = |r: i32| {
            u32::try_from(r).ok().filter(|&r| r < size).ok_or_else(|| {
                err(
                    Class::Arg,
                    format!("rank {r} is not in the communicator (size {size})"),
                )
            })
        };
        let mut out = Vec::new();
        let mut k = 0usize;
        for (&s, &deg) in sources.iter().zip(degrees) {
            let s = rank(s)?;
            let deg = usize::try_from(deg)
                .map_err(|_| err(Class::Arg, format!("degree {deg} is negative")))?;
            for _ in 0..deg {
                let d = *destinations.get(k).ok_or_else(|| {
                    err(
                        Class::Arg,
                        "the destination array is shorter than the degrees",
                    )
                })?;
                out.push(DistEdge {
                    src: s,
                    dst: rank(d)?,
                    weight: weights.and_then(|w| w.get(k)).copied().unwrap_or(0),
                });
                k += 1;
            }
        }
        Ok(out)
    }

    /// Process `me`'s view of every process's `edges` (in the order of the
    /// processes that gave them, then the order each gave).
    pub fn from_edges(me: u32, edges: &[DistEdge], weighted: bool) -> DistGraph {
        let ins = edges.iter().filter(|e| e.dst == me);
        let outs = edges.iter().filter(|e| e.src == me);
        DistGraph {
            sources: ins.clone().map(|e| e.src).collect(),
            source_weights: ins.map(|e| e.weight).collect(),
            destinations: outs.clone().map(|e| e.dst).collect(),
            destination_weights: outs.map(|e| e.weight).collect(),
            weighted,
        }
    }

    /// `MPI_Dist_graph_create_adjacent`'s lists, checked: `MPI_ERR_ARG` for a
    /// rank outside `0..size`.
    pub fn adjacent(
        sources: &[i32],
        source_weights: Option<&[i32]>,
        destinations: &[i32],
        destination_weights: Option<&[i32]>,
        size: u32,
    ) -> Result<DistGraph, MpiError> {
        let ranks = |v: &[i32]| {
            v.iter()
                .map(|&r| {
                    u32::try_from(r).ok().filter(|&r| r < size).ok_or_else(|| {
                        err(
                            Class::Arg,
                            format!("rank {r} is not in the communicator (size {size})"),
                        )
                    })
                })
                .collect::<Result<Vec<u32>, _>>()
        };
        let w = |w: Option<&[i32]>, n: usize| w.map_or_else(|| vec![0; n], <[i32]>::to_vec);
        Ok(DistGraph {
            sources: ranks(sources)?,
            source_weights: w(source_weights, sources.len()),
            destinations: ranks(destinations)?,
            destination_weights: w(destination_weights, destinations.len()),
            weighted: source_weights.is_some() || destination_weights.is_some(),
        })
    }
}

/// Serializes edges for the exchange of `MPI_Dist_graph_create` (12 bytes each).
pub fn encode_edges(edges: &[DistEdge]) -> Vec<u8> {
    let mut v = Vec::with_capacity(edges.len() * 12);
    for e in edges {
        v.extend_from_slice(&e.src.to_le_bytes());
        v.extend_from_slice(&e.dst.to_le_bytes());
        v.extend_from_slice(&e.weight.to_le_bytes());
    }
    v
}

/// The edges of [`encode_edges`]' bytes (a trailing partial edge is ignored).
pub fn decode_edges(b: &[u8]) -> Vec<DistEdge> {
    b.chunks_exact(12)
        .map(|c| {
            let w = |i: usize| [c[i], c[i + 1], c[i + 2], c[i + 3]];
            DistEdge {
                src: u32::from_le_bytes(w(0)),
                dst: u32::from_le_bytes(w(4)),
                weight: i32::from_le_bytes(w(8)),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dc(n: i32, k: usize) -> Vec<i32> {
        dims_create(n, &vec![0; k]).expect("dims")
    }

    #[test]
    fn dims_create_balances() {
        let cases: &[(i32, usize, &[i32])] = &[
            (1, 1, &[1]),
            (1, 3, &[1, 1, 1]),
            (4, 2, &[2, 2]),
            (6, 2, &[3, 2]),
            (7, 2, &[7, 1]),
            (8, 3, &[2, 2, 2]),
            (12, 2, &[4, 3]),
            (12, 3, &[3, 2, 2]),
            (16, 2, &[4, 4]),
            (16, 3, &[4, 2, 2]),
            (24, 3, &[4, 3, 2]),
            (30, 2, &[6, 5]),
            (30, 3, &[5, 3, 2]),
            (36, 2, &[6, 6]),
            (60, 3, &[5, 4, 3]),
            (64, 3, &[4, 4, 4]),
            (72, 3, &[6, 4, 3]),
            (100, 2, &[10, 10]),
            (72, 2, &[12, 6]),
            (120, 4, &[5, 4, 3, 2]),
            (180, 2, &[18, 10]),
            (240, 2, &[20, 12]),
            (128, 2, &[16, 8]),
            (1024, 3, &[16, 8, 8]),
        ];
        for &(n, k, want) in cases {
            assert_eq!(dc(n, k), want, "dims_create({n}, {k})");
        }
    }

    #[test]
    fn dims_create_keeps_given_dimensions_and_checks_them() {
        assert_eq!(dims_create(12, &[0, 3, 0]).expect("ok"), vec![2, 3, 2]);
        assert_eq!(dims_create(8, &[2, 4]).expect("ok"), vec![2, 4]);
        let class = |n, d: &[i32]| dims_create(n, d).map_err(|e| e.class);
        assert_eq!(class(10, &[3, 0]), Err(Class::Dims));
        assert_eq!(class(8, &[2, 2]), Err(Class::Dims));
        assert_eq!(class(8, &[-1, 0]), Err(Class::Dims));
        let huge = [i32::MAX; 8];
        assert_eq!(class(8, &huge), Err(Class::Dims));
        assert_eq!(
            Cart::new(&huge, &[0; 8], 4).map_err(|e| e.class),
            Err(Class::Arg)
        );
    }

    #[test]
    fn dims_create_multiplies_out_and_is_non_increasing() {
        for n in 1..=300 {
            for k in 1..=5 {
                let d = dc(n, k);
                assert_eq!(d.iter().product::<i32>(), n, "{n} {k} {d:?}");
                assert!(d.windows(2).all(|w| w[0] >= w[1]), "{n} {k} {d:?}");
            }
        }
    }

    #[test]
    fn coords_and_rank_round_trip() {
        let c = Cart::new(&[3, 4, 2], &[0, 1, 0], 24).expect("grid");
        for r in 0..24 {
            assert_eq!(c.rank(&c.coords(r)).expect("rank"), r);
        }
        assert_eq!(c.coords(5), vec![0, 2, 1]);
        assert_eq!(
            c.rank(&[1, -1, 0]).expect("wraps"),
            c.rank(&[1, 3, 0]).expect("ok")
        );
        assert_eq!(c.rank(&[3, 0, 0]).map_err(|e| e.class), Err(Class::Arg));
    }

    #[test]
    fn shifts_wrap_or_fall_off() {
        let c = Cart::new(&[2, 3], &[1, 0], 6).expect("grid");
        // rank 4 = (1, 1)
        assert_eq!(c.shift(4, 0, 1).expect("ok"), (Some(1), Some(1)));
        assert_eq!(c.shift(4, 1, 1).expect("ok"), (Some(3), Some(5)));
        assert_eq!(c.shift(5, 1, 1).expect("ok"), (Some(4), None));
        assert_eq!(c.shift(3, 1, -1).expect("ok"), (Some(4), None));
        assert_eq!(c.shift(3, 1, 2).expect("ok"), (None, Some(5)));
        assert_eq!(c.shift(3, 2, 1).map_err(|e| e.class), Err(Class::Arg));
    }

    #[test]
    fn sub_grids_number_rows_and_columns() {
        let c = Cart::new(&[2, 3], &[1, 0], 6).expect("grid");
        // Rows: keep dimension 1.
        assert_eq!(c.sub(&[false, true], 4).0, 1);
        assert_eq!(c.sub(&[false, true], 4).1, 1);
        assert_eq!(c.sub(&[false, true], 4).2.dims, vec![3]);
        // Columns: keep dimension 0.
        let (color, key, g) = c.sub(&[true, false], 5);
        assert_eq!((color, key, g.dims, g.periods), (2, 1, vec![2], vec![true]));
        // Nothing kept: one process per sub-grid.
        let (color, key, g) = c.sub(&[false, false], 5);
        assert_eq!((color, key, g.ndims()), (5, 0, 0));
    }

    #[test]
    fn cartesian_plan_pairs_directions() {
        // A periodic ring of 2: both neighbours are the other process; the tags
        // send the -1 block to the peer's +1 slot.
        let c = Cart::new(&[2], &[1], 2).expect("grid");
        let p = Topology::Cart(c).plan(0);
        assert_eq!(
            p.recv,
            vec![
                Edge {
                    peer: Some(1),
                    tag: 0
                },
                Edge {
                    peer: Some(1),
                    tag: 1
                }
            ]
        );
        assert_eq!(p.send[0].tag, 1);
        assert_eq!(p.send[1].tag, 0);
        // Every send matches a receive of the peer with the same tag.
        let c = Cart::new(&[3, 2], &[0, 1], 6).expect("grid");
        let t = Topology::Cart(c);
        for me in 0..6 {
            for s in t.plan(me).send {
                if let Some(q) = s.peer {
                    let back = t.plan(q);
                    assert!(back
                        .recv
                        .iter()
                        .any(|r| r.peer == Some(me) && r.tag == s.tag));
                }
            }
        }
    }

    #[test]
    fn graphs_are_checked() {
        let g = Graph::new(4, &[2, 3, 4, 6], &[1, 3, 0, 3, 0, 2], 4).expect("graph");
        assert_eq!(g.neighbors(0), &[1, 3]);
        assert_eq!(g.neighbors(3), &[0, 2]);
        let class = |n, i: &[i32], e: &[i32]| Graph::new(n, i, e, 4).map_err(|e| e.class);
        assert_eq!(class(2, &[1, 2], &[1, 2]), Err(Class::Topology));
        assert_eq!(class(2, &[2, 1], &[1, 0]), Err(Class::Topology));
        assert_eq!(class(5, &[0; 5], &[]), Err(Class::Arg));
    }

    #[test]
    fn dist_graph_edges_round_trip_and_split() {
        let e =
            DistGraph::edges_of(&[0, 2], &[2, 1], &[1, 2, 0], Some(&[5, 6, 7]), 3).expect("edges");
        assert_eq!(decode_edges(&encode_edges(&e)), e);
        let g = DistGraph::from_edges(0, &e, true);
        assert_eq!(g.sources, vec![2]);
        assert_eq!(g.source_weights, vec![7]);
        assert_eq!(g.destinations, vec![1, 2]);
        assert_eq!(
            DistGraph::edges_of(&[0], &[1], &[3], None, 3).map_err(|e| e.class),
            Err(Class::Arg)
        );
    }

    mod props {
        use super::super::*;
        use proptest::prelude::*;

        fn grid() -> impl Strategy<Value = Cart> {
            prop::collection::vec((1i32..=5, any::<bool>()), 0..=4).prop_map(|v| Cart {
                dims: v.iter().map(|x| x.0).collect(),
                periods: v.iter().map(|x| x.1).collect(),
            })
        }

        proptest! {
            #[test]
            fn coords_and_rank_invert_each_other(c in grid()) {
                for r in 0..c.size() as u32 {
                    let co = c.coords(r);
                    prop_assert!(co.iter().zip(&c.dims).all(|(&x, &d)| (0..d).contains(&x)));
                    prop_assert_eq!(c.rank(&co).expect("in range"), r);
                }
            }

            #[test]
            fn a_shift_is_undone_by_the_opposite_shift(c in grid(), disp in -3i32..=3) {
                for dim in 0..c.ndims() as i32 {
                    for r in 0..c.size() as u32 {
                        let (s, d) = c.shift(r, dim, disp).expect("a dimension");
                        if let Some(q) = d {
                            prop_assert_eq!(c.shift(q, dim, disp).expect("ok").0, Some(r));
                        }
                        if let Some(q) = s {
                            prop_assert_eq!(c.shift(q, dim, disp).expect("ok").1, Some(r));
                        }
                    }
                }
            }

            #[test]
            fn every_neighbourhood_send_meets_one_receive(c in grid()) {
                // Per (from, to, tag): as many sends as receives, so that every
                // block of a neighbourhood collective is taken.
                let t = Topology::Cart(c.clone());
                let mut balance = std::collections::HashMap::new();
                for me in 0..c.size() as u32 {
                    let p = t.plan(me);
                    prop_assert_eq!(p.recv.len(), 2 * c.ndims());
                    for e in p.send {
                        if let Some(q) = e.peer {
                            *balance.entry((me, q, e.tag)).or_insert(0i32) += 1;
                        }
                    }
                    for e in p.recv {
                        if let Some(q) = e.peer {
                            *balance.entry((q, me, e.tag)).or_insert(0i32) -= 1;
                        }
                    }
                }
                prop_assert!(balance.values().all(|&v| v == 0), "{:?}", balance);
            }

            #[test]
            fn sub_grids_partition_the_grid(c in grid(), mask in any::<u8>()) {
                let keep: Vec<bool> = (0..c.ndims()).map(|i| mask & (1 << i) != 0).collect();
                let mut seen = std::collections::HashSet::new();
                for r in 0..c.size() as u32 {
                    let (color, key, sub) = c.sub(&keep, r);
                    prop_assert!(u64::from(key) < sub.size());
                    prop_assert!(seen.insert((color, key)));
                }
            }

            #[test]
            fn dims_create_fills_the_free_dimensions(n in 1i32..5000, k in 1usize..=6, fix in any::<u32>()) {
                // Fix some dimensions to divisors of n.
                let mut rest = n;
                let mut dims: Vec<i32> = (0..k)
                    .map(|i| {
                        let want = (fix >> (4 * i) & 7) as i32;
                        if want > 1 && rest % want == 0 {
                            rest /= want;
                            want
                        } else {
                            0
                        }
                    })
                    .collect();
                // At least one free dimension takes what the fixed ones leave.
                dims[k - 1] = 0;
                let out = dims_create(n, &dims).expect("divisible");
                prop_assert_eq!(out.iter().map(|&d| i64::from(d)).product::<i64>(), i64::from(n));
                let free: Vec<i32> = out.iter().zip(&dims).filter(|(_, &d)| d == 0).map(|(&o, _)| o).collect();
                prop_assert!(free.windows(2).all(|w| w[0] >= w[1]));
                prop_assert!(out.iter().zip(&dims).all(|(&o, &d)| d == 0 || o == d));
            }
        }
    }
}
