//! Picks an algorithm and a flit count from the cost model.
//!
//! [`choose`] prices candidates with the closed form of [`crate::model`] (the α/β stage
//! model with pipelining of [`crate::sim`]; exact for one flit, within a few percent of
//! the simulator for more) and keeps the cheapest. Nothing about message sizes is
//! hard-coded: the crossovers (hierarchy for small messages, pipelines for large ones,
//! and the best flit count) come from the topology's level costs.
//!
//! Cost: for each algorithm, every flit count 1, 2, 4, … up to [`MAX_AUTO_FLITS`] (at
//! most one flit per element; one on a crowded node, see [`choose_among`]) is tried: the cost is not convex in the flit count (on a
//! mesh, flits small enough to go out in parallel are suddenly much cheaper), so the
//! search does not stop early. That is at most 4 × 7 evaluations of O(P log P) each
//! (O(P²) for alltoall, like its schedule): about 0.3 ms for 32 ranks, 11 ms for 1024
//! ranks (release build, 2 cores). No cache here: libqcg keeps each answer per
//! communicator and call shape.

use crate::model;
use crate::schedule::schedule;
use crate::sim::estimate;
use crate::step::{Algorithm, Collective, Op, ScheduleError};
use crate::topology::Topology;

/// Largest flit count [`choose`] considers.
pub const MAX_AUTO_FLITS: usize = 64;

/// The answer of [`choose`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Choice {
    /// The algorithm.
    pub algorithm: Algorithm,
    /// The flit count.
    pub flits: usize,
    /// The modelled time in seconds ([`crate::model::time`]).
    pub time: f64,
}

/// The simulator's estimated time of `coll` on `topo` with `alg` and `flits` (builds and
/// runs every rank's schedule: for checking the model, not for every call).
pub fn estimate_time(
    coll: &Collective,
    topo: &Topology,
    alg: Algorithm,
    flits: usize,
) -> Result<f64, ScheduleError> {
    let s = schedule(coll, topo, alg, flits)?;
    // Schedules from `schedule` always simulate; an error here is a bug, priced out.
    Ok(estimate(&s, topo).map_or(f64::INFINITY, |r| r.time))
}

/// The fastest (algorithm, flit count) for `coll` on `topo` according to the model, among
/// `algorithms` (all of them when empty). On one node with more ranks than cores
/// ([`crate::LinkCost::crowded`]) only one flit is tried: every hop of a flit waits
/// for a core there, so more flits add waits instead of overlapping them.
pub fn choose_among(
    coll: &Collective,
    topo: &Topology,
    algorithms: &[Algorithm],
) -> Result<Choice, ScheduleError> {
    let algs: &[Algorithm] = if algorithms.is_empty() {
        &Algorithm::ALL
    } else {
        algorithms
    };
    let elems = coll.bytes / coll.elem_size.max(1);
    let max_k = if coll.op == Op::Barrier || one_crowded_node(topo) {
        1
    } else {
        elems.clamp(1, MAX_AUTO_FLITS)
    };
    let mut best: Option<Choice> = None;
    let mut last_err = None;
    for &alg in algs {
        let mut k = 1;
        while k <= max_k {
            match model::time(coll, topo, alg, k) {
                Ok(time) => {
                    if best.is_none_or(|b| time < b.time) {
                        best = Some(Choice {
                            algorithm: alg,
                            flits: k,
                            time,
                        });
                    }
                }
                Err(e) => {
                    last_err = Some(e);
                    break;
                }
            }
            k *= 2;
        }
    }
    match (best, last_err) {
        (Some(b), _) => Ok(b),
        (None, Some(e)) => Err(e),
        (None, None) => Err(ScheduleError::Unsupported(coll.op, Algorithm::Hierarchical)),
    }
}

/// Whether every rank is on one node whose ranks outnumber its cores
/// ([`crate::LinkCost::crowded`]). There a flit's every hop waits for a core, and more
/// flits add waits instead of overlapping them: 16 ranks on 2 cores, 1 MiB, a bcast
/// tree of one flit took 3.0 ms, of 4 flits 3.7 ms, a chain of 32 flits (the model's
/// choice) 5.1 ms; an allreduce 17.8 ms, 21.4 ms with 2 flits, 23.3 ms as the chain.
/// Such a node gets one flit.
pub fn one_crowded_node(topo: &Topology) -> bool {
    let node = topo.depth();
    topo.costs()[node].crowded && (1..topo.size()).all(|r| topo.level(0, r) == node)
}

/// The fastest (algorithm, flit count) for `coll` on `topo` according to the model.
pub fn choose(coll: &Collective, topo: &Topology) -> Result<Choice, ScheduleError> {
    choose_among(coll, topo, &[])
}
