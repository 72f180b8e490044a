//! Topology-aware collective schedules, after QCG-OMPI (Sect. 3.3 and 4.3) and MagPIe.
//!
//! A collective is a *schedule*: for every rank, an ordered list of [`Step`]s over a few
//! byte buffers. [`schedule`] (all ranks) and [`schedule_for`] (one rank) make them;
//! [`sim`] runs them in memory (real bytes, deadlock and size checks, message counts per
//! level, a time estimate); [`model`] prices a schedule in closed form and [`auto`] uses
//! it to pick an algorithm and a flit count from the level costs of the [`Topology`].
//! This crate does no I/O and holds no clocks or threads: an executor runs the steps
//! (its local steps through [`exec`]).
//!
//! ```
//! use qcg_coll::{schedule, sim, Algorithm, Collective, Op, Topology};
//!
//! // 2 sites × 2 nodes × 2 processes; broadcast 10 bytes from rank 5 in 3 flits.
//! let topo = Topology::uniform(2, 2, 2);
//! let coll = Collective::new(Op::Bcast, 5, 10);
//! let ranks = schedule(&coll, &topo, Algorithm::Hierarchical, 3)?;
//! let inputs: Vec<Vec<u8>> = ranks.iter().map(|r| vec![7; r.input_len]).collect();
//! let report = sim::run(&ranks, &topo, &inputs, 1, &|_, _, _| {})?;
//! assert!(report.outputs.iter().all(|o| o == &vec![7; 10]));
//! assert_eq!(report.levels[0].messages, 3); // one WAN message per flit
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Buffers
//! A [`RankSchedule`] names three kinds of buffers, all byte arrays owned by the rank:
//! * [`Buf::Input`], `input_len` bytes: the caller's data. Steps only read it.
//! * [`Buf::Output`], `output_len` bytes: the result. Zero-filled before the first step
//!   (the schedule writes every byte of it that is part of the result).
//! * [`Buf::Temp`]`(i)`, `temps[i]` bytes: scratch, zero-filled before the first step.
//!
//! `Input` and `Output` are distinct (for an in-place MPI call the executor copies).
//! Sizes per operation, with P ranks and `n = Collective::bytes`:
//!
//! | op | input | output |
//! |---|---|---|
//! | Bcast | n at the root, 0 elsewhere | n |
//! | Reduce | n | n at the root, 0 elsewhere |
//! | Allreduce | n | n |
//! | Gather | n | P·n at the root (block r at r·n), 0 elsewhere |
//! | Scatter | P·n at the root (block r for rank r), 0 elsewhere | n |
//! | Allgather | n | P·n |
//! | Alltoall | P·n (block j for rank j) | P·n (block i from rank i) |
//! | Barrier | 0 | 0 |
//!
//! # Steps
//! A rank's steps take effect in order: a receive's bytes are in place before any later
//! step reads or writes them, and a send takes its bytes as the steps before it left them
//! (how an executor overlaps them is the *Rounds* rule below).
//! * `Send { to, tag, buf, range }`: sends the bytes `buf[range]` *as they are when the
//!   step runs* to rank `to` with `tag` (the executor copies or queues them; later
//!   steps may overwrite `buf[range]`). A send is started, never waited for before the
//!   end of the schedule, and may be a rendezvous: it need not complete before the
//!   receiver has posted the matching receive (see *Rounds* below). Zero-byte
//!   messages are real messages and must be delivered.
//! * `Recv { from, tag, buf, range }`: waits for the oldest undelivered message from
//!   `from` with `tag` (messages match on (source, tag), FIFO per pair) and stores it in
//!   `buf[range]`. The message has exactly `range.len()` bytes; anything else is an error.
//! * `Copy { dst, dst_range, src, src_range }`: `dst[dst_range] = src[src_range]`.
//! * `Reduce { dst, dst_range, src, src_range, order }`: elementwise over elements of
//!   `Collective::elem_size` bytes (both ranges are whole elements), element by element
//!   `d = d ∘ s` for [`Order::DstFirst`] or `d = s ∘ d` for [`Order::SrcFirst`].
//!
//! Ranges of a local step have equal lengths and never overlap when in the same buffer;
//! `dst` is never `Input`. All ranges are within their buffers.
//!
//! # Tags
//! `tag = phase << 16 | flit` with phase [`PHASE_UP`] (towards the root or a site's
//! representative), [`PHASE_DOWN`] (away from it), [`PHASE_PAIRWISE`] (alltoall between
//! two ranks) or [`PHASE_EXCHANGE`] (alltoall between representatives). Within one
//! collective call each
//! (sender, receiver, tag) triple occurs at most once, so tags stay below 2^18 and an
//! executor may add a per-call sequence number above bit 18 to keep consecutive
//! collectives apart.
//!
//! # Flits and pipelining
//! The per-rank vector (or block) of `n` bytes is cut into `k = min(flits, n / elem_size)`
//! (at least 1) nearly equal pieces on element boundaries ([`pieces`]). Every tree
//! schedule handles piece i completely (receive, combine, forward) before it receives
//! piece i+1, so piece i travels on while piece i+1 is still upstream. A message carries
//! one flit: for a gather it carries flit i of every block of the sender's subtree.
//! Allreduce, allgather and barrier go all the way up (every flit), then down; the down
//! half of allgather cuts the whole `P·n` result into `min(flits, P·n / elem_size)`
//! pieces. Alltoall cuts each block into flits.
//!
//! # Algorithms
//! Every operation except alltoall runs over a spanning tree of the ranks rooted at
//! `Collective::root` (rank 0 for allreduce, allgather and barrier; `root` is then
//! ignored). A parent sends to its children in the order of [`Algorithm`]'s tree (largest
//! subtree and slowest level first) and receives from them in the reverse order.
//! * [`Algorithm::Hierarchical`]: at level 0 the sites are ordered by their smallest rank
//!   and their representatives (the root for the root's site, else the smallest rank)
//!   form a binomial tree, or a flat one (the first sends to each) when the level's
//!   latency makes that faster for the flit size; inside every group the same is done
//!   one level down, and the processes of a leaf group form a binomial or flat tree.
//!   Any depth. A hierarchical allreduce whose sites can combine in rank order may
//!   instead reduce inside each site, have the representatives exchange their sites'
//!   partials (one message per flit per ordered pair of sites) and broadcast inside
//!   each site, when the model finds that faster.
//! * [`Algorithm::FlatBinomial`]: a binomial tree by recursive halving over ranks
//!   `0..P`: every subtree is an interval of ranks.
//! * [`Algorithm::FlatLinear`]: the root is everyone's parent. Alltoall is the pairwise
//!   exchange (round s: send block to `r+s`, receive from `r−s`, mod P).
//! * Hierarchical alltoall aggregates at the top level only: members send their blocks
//!   for other sites to the site's representative (its smallest rank), representatives
//!   exchange one message per flit per pair of sites, and hand the result out; ranks of
//!   one site exchange directly and pairwise. FlatBinomial and Chain have no alltoall.
//! * [`Algorithm::Chain`]: a path through all ranks, in topology order, or in rank order
//!   for non-commutative reductions.
//!
//! # Rounds (the contract between schedules and executors)
//! A rank's steps fall into *rounds* ([`exec::rounds`]): a round ends just before the
//! first step, other than a receive, that reads or writes bytes a receive of the same
//! round writes, or that comes after a zero-byte receive of the round (it needs that
//! message: a zero-byte message carries only an order, as a barrier's arrivals do). An executor runs a round by posting **every
//! receive of the round before any of its sends**, then running the round's other
//! steps in order (sends are started, not awaited); it moves to the next round when
//! the round's receives have landed, and waits for its sends only at the end of the
//! schedule. libqcg's executors post the receives of *all* rounds at the start, which
//! satisfies the rule a fortiori; its non-blocking collectives advance the rounds from
//! the engine's progress loop as receives land. The rule a schedule must meet: it
//! completes under that executor with rendezvous sends, i.e. without any message being
//! buffered before its receive is posted and without a round waiting on a later round
//! of a peer. [`sim::check_rounds`] checks this, and [`sim::run`] calls it for every
//! schedule it runs; local steps run through the one executor of [`exec::local`] in
//! the simulator and in libqcg alike.
//!
//! # Deadlock freedom
//! Under the rounds rule every schedule completes: receives wait only on messages sent
//! earlier along a tree edge, a pairwise round or a representative's relay, and every
//! send is started before its rank waits on anything after it. A send that blocks the
//! sender until it completes (MPI's synchronous mode inside a round) is not supported.
//! [`sim::run`] proves this for every tested case.
//!
//! # Non-commutative reductions
//! The result is always `x_0 ∘ x_1 ∘ … ∘ x_{P−1}` when [`Collective::commutative`] is
//! false. Every subtree sends up one partial result per *run* (maximal interval of
//! consecutive ranks) of its ranks, in rank order, each flit of all runs in one message.
//! A rank merges its own value and its children's runs, combining only neighbouring
//! intervals (`DstFirst` for the interval to the right, `SrcFirst` for the one to the
//! left). The flat binomial tree and the ordered chain have contiguous subtrees (one run
//! each). A hierarchical subtree (a site) whose ranks are not contiguous sends one
//! message per flit with one partial per run: still one message per cluster, but more
//! bytes. With `commutative: true`, every subtree folds into one partial. The operation
//! must be associative. Allreduce computes the result once, at rank 0, and broadcasts it,
//! so every rank gets the same bits (floating point included). `commutative` is ignored
//! by operations that do not reduce.

mod alltoall;
pub mod auto;
pub mod exec;
pub mod model;
mod schedule;
pub mod sim;
mod step;
pub mod topology;
mod tree;
pub mod vector;

pub use schedule::{
    pieces, schedule, schedule_for, tag, MAX_FLITS, PHASE_DOWN, PHASE_EXCHANGE, PHASE_PAIRWISE,
    PHASE_SPREAD, PHASE_UP,
};
pub use step::{Algorithm, Buf, Collective, Op, Order, RankSchedule, ScheduleError, Step};
pub use topology::{LinkCost, Topology, TopologyError};
