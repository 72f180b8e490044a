//! The C ABI of process topologies (MPI 3.1 chapter 7): `MPI_Dims_create`,
//! Cartesian grids, graphs, distributed graphs, `MPI_Topo_test` (the
//! neighbourhood collectives are [`super::neighbor`]'s). The logic is
//! [`crate::topo`]'s; here the pointers are checked and the communicators made.
//!
//! A topology communicator is made like `MPI_Comm_split`'s (so every collective
//! and point-to-point call works on it) and carries its topology in its
//! [`state::CommEntry`]. `reorder` is accepted and ignored: ranks keep their
//! place, as MPI allows.
#![allow(unsafe_code)]
#![allow(clippy::missing_safety_doc)]
#![allow(clippy::too_many_arguments)]

use super::coll::{ctx, Ctx};
use super::{call, ints, put};
use crate::error::{Class, MpiError};
use crate::state::{self, count, COMM_WORLD, PROC_NULL, UNDEFINED};
use crate::topo::{self, Cart, DistGraph, Graph, Topology};
use libc::c_int;
use std::sync::Arc;

/// `MPI_UNWEIGHTED` is the address of this (`mpi.h`).
#[no_mangle]
#[allow(non_upper_case_globals)]
pub static qcg_mpi_unweighted: [c_int; 1] = [0];
/// `MPI_WEIGHTS_EMPTY` is the address of this.
#[no_mangle]
#[allow(non_upper_case_globals)]
pub static qcg_mpi_weights_empty: [c_int; 1] = [0];

fn is_unweighted(p: *const c_int) -> bool {
    std::ptr::eq(p, qcg_mpi_unweighted.as_ptr())
}

fn is_weights_empty(p: *const c_int) -> bool {
    std::ptr::eq(p, qcg_mpi_weights_empty.as_ptr())
}

/// `n` ints the caller lets us write.
unsafe fn out_ints<'a>(p: *mut c_int, n: usize, what: &str) -> Result<&'a mut [c_int], MpiError> {
    if n == 0 {
        return Ok(&mut []);
    }
    if p.is_null() {
        return Err(MpiError::new(Class::Arg, format!("{what} is NULL")));
    }
    // SAFETY: the caller passes an array of `n` ints.
    Ok(unsafe { std::slice::from_raw_parts_mut(p, n) })
}

/// The topology of communicator `h` (`MPI_ERR_TOPOLOGY` if it has none).
pub(super) fn topo_of(h: c_int) -> Result<Arc<Topology>, MpiError> {
    state::with(|s| {
        s.comm(h)?.topo.clone().ok_or_else(|| {
            MpiError::new(
                Class::Topology,
                format!("communicator {h} has no process topology"),
            )
        })
    })
}

fn cart_of(h: c_int) -> Result<(Arc<Topology>, Cart), MpiError> {
    let t = topo_of(h)?;
    match &*t {
        Topology::Cart(c) => {
            let c = c.clone();
            Ok((t, c))
        }
        _ => Err(MpiError::new(
            Class::Topology,
            format!("communicator {h} has no Cartesian topology"),
        )),
    }
}

fn graph_of(h: c_int) -> Result<Graph, MpiError> {
    match &*topo_of(h)? {
        Topology::Graph(g) => Ok(g.clone()),
        _ => Err(MpiError::new(
            Class::Topology,
            format!("communicator {h} has no graph topology"),
        )),
    }
}

fn dist_of(h: c_int) -> Result<DistGraph, MpiError> {
    match &*topo_of(h)? {
        Topology::DistGraph(g) => Ok(g.clone()),
        _ => Err(MpiError::new(
            Class::Topology,
            format!("communicator {h} has no distributed graph topology"),
        )),
    }
}

/// Splits `comm` (collective) and gives the new communicator `topo`: its handle,
/// or `MPI_COMM_NULL` for a process left out.
fn make(comm: c_int, color: Option<u32>, key: u32, topo: Topology) -> Result<c_int, MpiError> {
    let c = ctx(comm)?;
    match c.comm.split(color, key)? {
        Some(n) => state::with(|s| {
            let e = s.comm(comm)?.errhandler;
            let h = s.add_comm(n, e)?;
            s.set_topo(h, Some(Arc::new(topo)))?;
            Ok(h)
        }),
        None => Ok(0),
    }
}

fn ndims_of(n: c_int) -> Result<usize, MpiError> {
    usize::try_from(n)
        .map_err(|_| MpiError::new(Class::Dims, format!("{n} dimensions is negative")))
}

fn rank_in(r: c_int, n: usize) -> Result<u32, MpiError> {
    u32::try_from(r)
        .ok()
        .filter(|&r| (r as usize) < n)
        .ok_or_else(|| {
            MpiError::new(
                Class::Rank,
                format!("rank {r} is not in the topology (size {n})"),
            )
        })
}

fn or_null(r: Option<u32>) -> c_int {
    r.map_or(PROC_NULL, |r| r as c_int)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Dims_create(nnodes: c_int, ndims: c_int, dims: *mut c_int) -> c_int {
    call("MPI_Dims_create", COMM_WORLD, || {
        let k = ndims_of(ndims)?;
        // SAFETY: an array of `ndims` ints, read then written.
        let d = unsafe { out_ints(dims, k, "dims")? };
        let out = topo::dims_create(nnodes, d)?;
        d.copy_from_slice(&out);
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Cart_create(
    comm_old: c_int,
    ndims: c_int,
    dims: *const c_int,
    periods: *const c_int,
    _reorder: c_int,
    comm_cart: *mut c_int,
) -> c_int {
    call("MPI_Cart_create", comm_old, || {
        let c = ctx(comm_old)?;
        let k = ndims_of(ndims)?;
        // SAFETY: two arrays of `ndims` ints.
        let (d, p) = unsafe { (ints(dims, k, "dims")?, ints(periods, k, "periods")?) };
        let cart = Cart::new(d, p, c.p as u32)?;
        let inside = u64::from(c.me) < cart.size();
        let h = make(comm_old, inside.then_some(0), c.me, Topology::Cart(cart))?;
        // SAFETY: an output handle.
        unsafe { put(comm_cart, h) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Cartdim_get(comm: c_int, ndims: *mut c_int) -> c_int {
    call("MPI_Cartdim_get", comm, || {
        let (_, c) = cart_of(comm)?;
        // SAFETY: an output int.
        unsafe { put(ndims, c.ndims() as c_int) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Cart_get(
    comm: c_int,
    maxdims: c_int,
    dims: *mut c_int,
    periods: *mut c_int,
    coords: *mut c_int,
) -> c_int {
    call("MPI_Cart_get", comm, || {
        let (_, c) = cart_of(comm)?;
        let k = count(maxdims)?.min(c.ndims());
        let mine = c.coords(ctx(comm)?.me);
        // SAFETY: three arrays of at least `min(maxdims, ndims)` ints.
        unsafe {
            out_ints(dims, k, "dims")?.copy_from_slice(&c.dims[..k]);
            for (o, &p) in out_ints(periods, k, "periods")?.iter_mut().zip(&c.periods) {
                *o = c_int::from(p);
            }
            out_ints(coords, k, "coords")?.copy_from_slice(&mine[..k]);
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Cart_rank(
    comm: c_int,
    coords: *const c_int,
    rank: *mut c_int,
) -> c_int {
    call("MPI_Cart_rank", comm, || {
        let (_, c) = cart_of(comm)?;
        // SAFETY: an array of `ndims` ints.
        let co = unsafe { ints(coords, c.ndims(), "coords")? };
        let r = c.rank(co)?;
        // SAFETY: an output int.
        unsafe { put(rank, r as c_int) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Cart_coords(
    comm: c_int,
    rank: c_int,
    maxdims: c_int,
    coords: *mut c_int,
) -> c_int {
    call("MPI_Cart_coords", comm, || {
        let (_, c) = cart_of(comm)?;
        let r = rank_in(rank, c.size() as usize)?;
        let k = count(maxdims)?.min(c.ndims());
        // SAFETY: an array of at least `min(maxdims, ndims)` ints.
        unsafe { out_ints(coords, k, "coords")?.copy_from_slice(&c.coords(r)[..k]) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Cart_shift(
    comm: c_int,
    direction: c_int,
    disp: c_int,
    rank_source: *mut c_int,
    rank_dest: *mut c_int,
) -> c_int {
    call("MPI_Cart_shift", comm, || {
        let (_, c) = cart_of(comm)?;
        let (s, d) = c.shift(ctx(comm)?.me, direction, disp)?;
        // SAFETY: two output ints.
        unsafe {
            put(rank_source, or_null(s))?;
            put(rank_dest, or_null(d))
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Cart_sub(
    comm: c_int,
    remain_dims: *const c_int,
    newcomm: *mut c_int,
) -> c_int {
    call("MPI_Cart_sub", comm, || {
        let (_, c) = cart_of(comm)?;
        // SAFETY: an array of `ndims` ints.
        let keep = unsafe { ints(remain_dims, c.ndims(), "remain_dims")? };
        let keep: Vec<bool> = keep.iter().map(|&k| k != 0).collect();
        let (color, key, sub) = c.sub(&keep, ctx(comm)?.me);
        let h = make(comm, Some(color), key, Topology::Cart(sub))?;
        // SAFETY: an output handle.
        unsafe { put(newcomm, h) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Cart_map(
    comm: c_int,
    ndims: c_int,
    dims: *const c_int,
    periods: *const c_int,
    newrank: *mut c_int,
) -> c_int {
    call("MPI_Cart_map", comm, || {
        let c = ctx(comm)?;
        let k = ndims_of(ndims)?;
        // SAFETY: two arrays of `ndims` ints.
        let (d, p) = unsafe { (ints(dims, k, "dims")?, ints(periods, k, "periods")?) };
        let cart = Cart::new(d, p, c.p as u32)?;
        let r = if u64::from(c.me) < cart.size() {
            c.me as c_int
        } else {
            UNDEFINED
        };
        // SAFETY: an output int.
        unsafe { put(newrank, r) }
    })
}

/// The graph of `MPI_Graph_create` / `MPI_Graph_map`'s arguments, checked.
unsafe fn graph_args(
    c: &Ctx,
    nnodes: c_int,
    index: *const c_int,
    edges: *const c_int,
) -> Result<Graph, MpiError> {
    let n = usize::try_from(nnodes)
        .map_err(|_| MpiError::new(Class::Arg, format!("{nnodes} nodes is negative")))?;
    // SAFETY: `nnodes` ints, then as many as the last of them says.
    unsafe {
        let ix = ints(index, n, "index")?;
        let ne = ix.last().copied().unwrap_or(0);
        let ne = usize::try_from(ne)
            .map_err(|_| MpiError::new(Class::Topology, format!("the index ends at {ne}")))?;
        let e = ints(edges, ne, "edges")?;
        Graph::new(n, ix, e, c.p as u32)
    }
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Graph_create(
    comm_old: c_int,
    nnodes: c_int,
    index: *const c_int,
    edges: *const c_int,
    _reorder: c_int,
    comm_graph: *mut c_int,
) -> c_int {
    call("MPI_Graph_create", comm_old, || {
        let c = ctx(comm_old)?;
        // SAFETY: the caller's arrays.
        let g = unsafe { graph_args(&c, nnodes, index, edges)? };
        let inside = (c.me as usize) < g.nnodes();
        let h = make(comm_old, inside.then_some(0), c.me, Topology::Graph(g))?;
        // SAFETY: an output handle.
        unsafe { put(comm_graph, h) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Graph_map(
    comm: c_int,
    nnodes: c_int,
    index: *const c_int,
    edges: *const c_int,
    newrank: *mut c_int,
) -> c_int {
    call("MPI_Graph_map", comm, || {
        let c = ctx(comm)?;
        // SAFETY: the caller's arrays.
        let g = unsafe { graph_args(&c, nnodes, index, edges)? };
        let r = if (c.me as usize) < g.nnodes() {
            c.me as c_int
        } else {
            UNDEFINED
        };
        // SAFETY: an output int.
        unsafe { put(newrank, r) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Graphdims_get(
    comm: c_int,
    nnodes: *mut c_int,
    nedges: *mut c_int,
) -> c_int {
    call("MPI_Graphdims_get", comm, || {
        let g = graph_of(comm)?;
        // SAFETY: two output ints.
        unsafe {
            put(nnodes, g.nnodes() as c_int)?;
            put(nedges, g.edges.len() as c_int)
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Graph_get(
    comm: c_int,
    maxindex: c_int,
    maxedges: c_int,
    index: *mut c_int,
    edges: *mut c_int,
) -> c_int {
    call("MPI_Graph_get", comm, || {
        let g = graph_of(comm)?;
        let ki = count(maxindex)?.min(g.index.len());
        let ke = count(maxedges)?.min(g.edges.len());
        // SAFETY: arrays of `maxindex` and `maxedges` ints.
        unsafe {
            out_ints(index, ki, "index")?.copy_from_slice(&g.index[..ki]);
            for (o, &e) in out_ints(edges, ke, "edges")?.iter_mut().zip(&g.edges) {
                *o = e as c_int;
            }
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Graph_neighbors_count(
    comm: c_int,
    rank: c_int,
    nneighbors: *mut c_int,
) -> c_int {
    call("MPI_Graph_neighbors_count", comm, || {
        let g = graph_of(comm)?;
        let r = rank_in(rank, g.nnodes())?;
        // SAFETY: an output int.
        unsafe { put(nneighbors, g.neighbors(r).len() as c_int) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Graph_neighbors(
    comm: c_int,
    rank: c_int,
    maxneighbors: c_int,
    neighbors: *mut c_int,
) -> c_int {
    call("MPI_Graph_neighbors", comm, || {
        let g = graph_of(comm)?;
        let r = rank_in(rank, g.nnodes())?;
        let n = g.neighbors(r);
        let k = count(maxneighbors)?.min(n.len());
        // SAFETY: an array of `maxneighbors` ints.
        for (o, &x) in unsafe { out_ints(neighbors, k, "neighbors")? }
            .iter_mut()
            .zip(n)
        {
            *o = x as c_int;
        }
        Ok(())
    })
}

/// A weights argument: `None` for `MPI_UNWEIGHTED`, an empty list for
/// `MPI_WEIGHTS_EMPTY`, else `n` ints.
unsafe fn weights<'a>(
    p: *const c_int,
    n: usize,
    what: &str,
) -> Result<Option<&'a [c_int]>, MpiError> {
    if is_unweighted(p) {
        Ok(None)
    } else if is_weights_empty(p) {
        Ok(Some(&[]))
    } else {
        // SAFETY: `n` ints.
        unsafe { ints(p, n, what).map(Some) }
    }
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Dist_graph_create_adjacent(
    comm_old: c_int,
    indegree: c_int,
    sources: *const c_int,
    sourceweights: *const c_int,
    outdegree: c_int,
    destinations: *const c_int,
    destweights: *const c_int,
    _info: c_int,
    _reorder: c_int,
    comm_dist_graph: *mut c_int,
) -> c_int {
    call("MPI_Dist_graph_create_adjacent", comm_old, || {
        let c = ctx(comm_old)?;
        let (ni, no) = (count(indegree)?, count(outdegree)?);
        // SAFETY: the caller's arrays of `indegree` and `outdegree` ints.
        let g = unsafe {
            let sw = weights(sourceweights, ni, "sourceweights")?;
            let dw = weights(destweights, no, "destweights")?;
            DistGraph::adjacent(
                ints(sources, ni, "sources")?,
                sw.filter(|w| w.len() == ni),
                ints(destinations, no, "destinations")?,
                dw.filter(|w| w.len() == no),
                c.p as u32,
            )?
        };
        let g = DistGraph {
            weighted: !is_unweighted(sourceweights),
            ..g
        };
        let h = make(comm_old, Some(0), c.me, Topology::DistGraph(g))?;
        // SAFETY: an output handle.
        unsafe { put(comm_dist_graph, h) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Dist_graph_create(
    comm_old: c_int,
    n: c_int,
    sources: *const c_int,
    degrees: *const c_int,
    destinations: *const c_int,
    weights_: *const c_int,
    _info: c_int,
    _reorder: c_int,
    comm_dist_graph: *mut c_int,
) -> c_int {
    call("MPI_Dist_graph_create", comm_old, || {
        let c = ctx(comm_old)?;
        let n = count(n)?;
        // SAFETY: `n` sources and degrees, as many destinations (and weights) as
        // the degrees add up to.
        let mine = unsafe {
            let s = ints(sources, n, "sources")?;
            let d = ints(degrees, n, "degrees")?;
            let total: usize = d.iter().map(|&k| count(k)).sum::<Result<_, _>>()?;
            let w = weights(weights_, total, "weights")?.filter(|w| w.len() == total);
            DistGraph::edges_of(
                s,
                d,
                ints(destinations, total, "destinations")?,
                w,
                c.p as u32,
            )?
        };
        // Every process learns every edge: lengths first, then the edges in
        // blocks padded to the longest.
        let mine = topo::encode_edges(&mine);
        let lens = c.comm.allgather(&(mine.len() as u64).to_le_bytes())?;
        let lens: Vec<usize> = lens
            .chunks_exact(8)
            .map(|b| {
                let mut a = [0u8; 8];
                a.copy_from_slice(b);
                u64::from_le_bytes(a) as usize
            })
            .collect();
        let longest = lens.iter().copied().max().unwrap_or(0);
        let mut block = mine;
        block.resize(longest, 0);
        let all = c.comm.allgather(&block)?;
        let mut edges = Vec::new();
        for (q, &len) in lens.iter().enumerate() {
            let at = q * longest;
            edges.extend(topo::decode_edges(all.get(at..at + len).unwrap_or(&[])));
        }
        let g = DistGraph::from_edges(c.me, &edges, !is_unweighted(weights_));
        let h = make(comm_old, Some(0), c.me, Topology::DistGraph(g))?;
        // SAFETY: an output handle.
        unsafe { put(comm_dist_graph, h) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Dist_graph_neighbors_count(
    comm: c_int,
    indegree: *mut c_int,
    outdegree: *mut c_int,
    weighted: *mut c_int,
) -> c_int {
    call("MPI_Dist_graph_neighbors_count", comm, || {
        let g = dist_of(comm)?;
        // SAFETY: three output ints.
        unsafe {
            put(indegree, g.sources.len() as c_int)?;
            put(outdegree, g.destinations.len() as c_int)?;
            put(weighted, c_int::from(g.weighted))
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Dist_graph_neighbors(
    comm: c_int,
    maxindegree: c_int,
    sources: *mut c_int,
    sourceweights: *mut c_int,
    maxoutdegree: c_int,
    destinations: *mut c_int,
    destweights: *mut c_int,
) -> c_int {
    call("MPI_Dist_graph_neighbors", comm, || {
        let g = dist_of(comm)?;
        let ki = count(maxindegree)?.min(g.sources.len());
        let ko = count(maxoutdegree)?.min(g.destinations.len());
        let fill = |p: *mut c_int, v: &[i32], k: usize, what: &str| -> Result<(), MpiError> {
            if is_unweighted(p) || is_weights_empty(p) {
                return Ok(());
            }
            // SAFETY: an array of at least `k` ints.
            unsafe { out_ints(p, k, what)?.copy_from_slice(&v[..k]) };
            Ok(())
        };
        let s: Vec<i32> = g.sources.iter().map(|&x| x as i32).collect();
        let d: Vec<i32> = g.destinations.iter().map(|&x| x as i32).collect();
        fill(sources, &s, ki, "sources")?;
        fill(destinations, &d, ko, "destinations")?;
        if g.weighted {
            fill(sourceweights, &g.source_weights, ki, "sourceweights")?;
            fill(destweights, &g.destination_weights, ko, "destweights")?;
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Topo_test(comm: c_int, status: *mut c_int) -> c_int {
    call("MPI_Topo_test", comm, || {
        let t = state::with(|s| Ok(s.comm(comm)?.topo.as_ref().map(|t| t.kind())))?;
        // SAFETY: an output int.
        unsafe { put(status, t.unwrap_or(UNDEFINED)) }
    })
}
