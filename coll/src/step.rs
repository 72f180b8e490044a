//! The vocabulary of schedules: operations, algorithms, buffers and steps.

use std::fmt;
use std::ops::Range;

/// A collective operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// Root's `Input` (`bytes`) to every rank's `Output` (`bytes`).
    Bcast,
    /// Every rank's `Input` (`bytes`) combined in rank order into root's `Output`.
    Reduce,
    /// Like [`Op::Reduce`], the result in every rank's `Output`.
    Allreduce,
    /// Every rank's `Input` block (`bytes`) into root's `Output` (`P * bytes`, block r at r·bytes).
    Gather,
    /// Root's `Input` (`P * bytes`), block r to rank r's `Output` (`bytes`).
    Scatter,
    /// Every rank's `Input` block (`bytes`) into every rank's `Output` (`P * bytes`).
    Allgather,
    /// No data (`bytes` is ignored); no rank leaves before every rank has entered.
    Barrier,
    /// Every rank's `Input` (`P * bytes`, block j for rank j) to `Output` (`P * bytes`,
    /// block i from rank i). Only `FlatLinear` and `Hierarchical`.
    Alltoall,
}

impl Op {
    /// Every operation.
    pub const ALL: [Op; 8] = [
        Op::Bcast,
        Op::Reduce,
        Op::Allreduce,
        Op::Gather,
        Op::Scatter,
        Op::Allgather,
        Op::Barrier,
        Op::Alltoall,
    ];

    /// Whether the operation combines values (uses `Reduce` steps).
    pub fn is_reduction(self) -> bool {
        matches!(self, Op::Reduce | Op::Allreduce)
    }

    /// Whether `root` matters.
    pub fn is_rooted(self) -> bool {
        matches!(self, Op::Bcast | Op::Reduce | Op::Gather | Op::Scatter)
    }
}

/// The shape of the communication.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// Topology-aware: at every level one representative per group (the root for the
    /// root's groups, else the group's smallest rank); the representatives of sibling
    /// groups form a binomial tree, or a flat one (the first talks to each other
    /// directly) where that is faster for the level's latency, bandwidth and the flit
    /// size (one WAN latency instead of ⌈log₂ sites⌉, as MagPIe does). A group talks to the rest of the machine through its
    /// representative only: one message per flit per group across each level and
    /// direction.
    Hierarchical,
    /// A binomial tree over ranks in rank order (topology-unaware).
    FlatBinomial,
    /// The root talks to every other rank directly.
    FlatLinear,
    /// A pipelined chain through all ranks. Ranks are chained in topology order (the
    /// root's node, then its site, then other sites) unless the operation is a
    /// non-commutative reduction, which chains in rank order (two chains, towards rank 0
    /// and towards rank P−1, when the root is in the middle).
    Chain,
}

impl Algorithm {
    /// Every algorithm.
    pub const ALL: [Algorithm; 4] = [
        Algorithm::Hierarchical,
        Algorithm::FlatBinomial,
        Algorithm::FlatLinear,
        Algorithm::Chain,
    ];
}

/// What to compute: the operation and its parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Collective {
    /// The operation.
    pub op: Op,
    /// The root rank (ignored by unrooted operations, which use rank 0 internally).
    pub root: usize,
    /// Bytes per rank: the message for bcast/reduce/allreduce, the block for the others.
    pub bytes: usize,
    /// Element size in bytes; `bytes` must be a multiple of it and flit boundaries fall on
    /// element boundaries. Reductions are elementwise over elements of this size.
    pub elem_size: usize,
    /// Whether the reduction may combine in any order. When false, the result is
    /// exactly `x_0 ∘ x_1 ∘ … ∘ x_{P−1}` (see the crate documentation).
    pub commutative: bool,
}

impl Collective {
    /// `op` rooted at `root` on `bytes` bytes, element size 1, commutative.
    pub fn new(op: Op, root: usize, bytes: usize) -> Self {
        Collective {
            op,
            root,
            bytes,
            elem_size: 1,
            commutative: true,
        }
    }

    /// Sets the element size.
    pub fn elem_size(mut self, elem_size: usize) -> Self {
        self.elem_size = elem_size;
        self
    }

    /// Sets whether the reduction is commutative.
    pub fn commutative(mut self, commutative: bool) -> Self {
        self.commutative = commutative;
        self
    }

    /// Whether schedules must combine in rank order.
    pub(crate) fn ordered(&self) -> bool {
        self.op.is_reduction() && !self.commutative
    }
}

/// A buffer of one rank's schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Buf {
    /// The caller's data (`RankSchedule::input_len` bytes). Read only.
    Input,
    /// The result (`RankSchedule::output_len` bytes), zero-filled at the start.
    Output,
    /// Scratch buffer `i` (`RankSchedule::temps[i]` bytes), zero-filled at the start.
    Temp(u8),
}

/// Which operand of a [`Step::Reduce`] is on the left of `∘`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Order {
    /// `dst = dst ∘ src`.
    DstFirst,
    /// `dst = src ∘ dst`.
    SrcFirst,
}

/// One step of a rank's schedule (see the crate documentation for the exact semantics).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Step {
    /// Send the current contents of `buf[range]` to rank `to`, with `tag`.
    Send {
        /// Destination rank.
        to: usize,
        /// Message tag.
        tag: u32,
        /// Source buffer.
        buf: Buf,
        /// Bytes sent.
        range: Range<usize>,
    },
    /// Wait for the next message from `from` with `tag`; it has exactly `range.len()`
    /// bytes, stored into `buf[range]`.
    Recv {
        /// Source rank.
        from: usize,
        /// Message tag.
        tag: u32,
        /// Destination buffer.
        buf: Buf,
        /// Bytes received.
        range: Range<usize>,
    },
    /// Elementwise `dst[dst_range] = dst ∘ src` or `src ∘ dst` (see [`Order`]).
    Reduce {
        /// Accumulator buffer.
        dst: Buf,
        /// Accumulator bytes.
        dst_range: Range<usize>,
        /// Operand buffer.
        src: Buf,
        /// Operand bytes (same length).
        src_range: Range<usize>,
        /// Operand order.
        order: Order,
    },
    /// `dst[dst_range] = src[src_range]`.
    Copy {
        /// Destination buffer.
        dst: Buf,
        /// Destination bytes.
        dst_range: Range<usize>,
        /// Source buffer.
        src: Buf,
        /// Source bytes (same length).
        src_range: Range<usize>,
    },
}

/// Everything one rank does in one collective call.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct RankSchedule {
    /// The rank.
    pub rank: usize,
    /// Size of [`Buf::Input`].
    pub input_len: usize,
    /// Size of [`Buf::Output`].
    pub output_len: usize,
    /// Sizes of the scratch buffers [`Buf::Temp`].
    pub temps: Vec<usize>,
    /// The steps, executed in order.
    pub steps: Vec<Step>,
}

impl RankSchedule {
    /// Number of `Send` steps.
    pub fn sends(&self) -> usize {
        self.steps
            .iter()
            .filter(|s| matches!(s, Step::Send { .. }))
            .count()
    }
}

/// Why no schedule could be made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScheduleError {
    /// The root (or the rank asked for) is not a rank of the topology.
    RankOutOfRange {
        /// The rank.
        rank: usize,
        /// Number of ranks.
        size: usize,
    },
    /// The element size is zero.
    ZeroElemSize,
    /// `bytes` is not a multiple of the element size.
    NotWholeElements {
        /// Bytes asked for.
        bytes: usize,
        /// Element size.
        elem_size: usize,
    },
    /// `flits` is zero or above [`crate::MAX_FLITS`].
    BadFlits(usize),
    /// The buffers would not fit in `usize`.
    TooLarge,
    /// This algorithm does not implement this operation.
    Unsupported(Op, Algorithm),
}

impl fmt::Display for ScheduleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScheduleError::RankOutOfRange { rank, size } => {
                write!(f, "rank {rank} is out of range (communicator of {size})")
            }
            ScheduleError::ZeroElemSize => write!(f, "element size is zero"),
            ScheduleError::NotWholeElements { bytes, elem_size } => {
                write!(
                    f,
                    "{bytes} bytes is not a multiple of elements of {elem_size}"
                )
            }
            ScheduleError::BadFlits(k) => {
                write!(f, "{k} flits: must be between 1 and {}", crate::MAX_FLITS)
            }
            ScheduleError::TooLarge => write!(f, "buffer sizes overflow"),
            ScheduleError::Unsupported(op, alg) => {
                write!(f, "{alg:?} does not implement {op:?}")
            }
        }
    }
}

impl std::error::Error for ScheduleError {}
