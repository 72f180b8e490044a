//! What a rank passed to a collective, written at the head of every message of the
//! call, so that a receiver learns at no extra message whether its sender called the
//! same collective: the same operation, root, sizes and settings. Without it, a rank
//! that named another root could hand its peers its own bytes, which they would take
//! for the root's. Pure code over bytes.

use qcg_coll::{Algorithm, Collective, Op};

/// Bytes at the head of every collective message.
pub const HEADER: usize = 32;

/// Version of the header's layout (its first byte).
const VERSION: u8 = 2;

/// One rank's view of a collective call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallSig {
    /// The operation.
    pub op: Op,
    /// The root (0 for the unrooted operations).
    pub root: u32,
    /// Bytes per rank (0 for a barrier).
    pub bytes: u64,
    /// Element size of a reduction (1 otherwise).
    pub elem_size: u32,
    /// Whether the reduction may combine in any order.
    pub commutative: bool,
    /// The schedule's shape.
    pub algorithm: Algorithm,
    /// Flits per message.
    pub flits: u32,
    /// What the caller calls the reduction's operation (an MPI operation's handle,
    /// say; 0 for none): ranks that name different ones disagree on the operation.
    pub op_label: u32,
    /// What the caller calls the reduction's elements (a datatype's signature; 0
    /// for none): ranks that name different ones disagree on the elements.
    pub elem_label: u32,
}

/// Which part of a call the ranks disagree on, the most telling first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Disagree {
    /// The operation (or whether it commutes).
    Operation,
    /// The root.
    Root,
    /// The sizes.
    Size,
    /// Only how the collective runs (`QCG_COLL_ALGO`, `QCG_COLL_FLITS`).
    Settings,
    /// The kind of the reduction's elements (their labels, see
    /// [`CallSig::elem_label`]).
    Elements,
}

impl Disagree {
    const ALL: [Disagree; 5] = [
        Disagree::Operation,
        Disagree::Root,
        Disagree::Size,
        Disagree::Settings,
        Disagree::Elements,
    ];

    /// A byte for it (never 0, which stands for no disagreement).
    pub fn code(self) -> u8 {
        Disagree::ALL.iter().position(|&d| d == self).unwrap_or(0) as u8 + 1
    }

    /// The disagreement a byte stands for, if any.
    pub fn from_code(c: u8) -> Option<Disagree> {
        Disagree::ALL.get((c as usize).checked_sub(1)?).copied()
    }
}

/// The name of an operation, as errors print it.
pub fn op_name(op: Op) -> &'static str {
    match op {
        Op::Bcast => "bcast",
        Op::Reduce => "reduce",
        Op::Allreduce => "allreduce",
        Op::Gather => "gather",
        Op::Scatter => "scatter",
        Op::Allgather => "allgather",
        Op::Barrier => "barrier",
        Op::Alltoall => "alltoall",
    }
}

fn algorithm_name(a: Algorithm) -> &'static str {
    match a {
        Algorithm::Hierarchical => "hierarchical",
        Algorithm::FlatBinomial => "flat-binomial",
        Algorithm::FlatLinear => "flat-linear",
        Algorithm::Chain => "chain",
    }
}

impl CallSig {
    /// The signature of `coll` run as `algorithm` in `flits` flits. What the
    /// operation ignores (the root of an unrooted one, a barrier's size, the
    /// element size and order of what is not a reduction) is left out, so that ranks
    /// that differ only there agree.
    pub fn new(coll: &Collective, algorithm: Algorithm, flits: usize) -> CallSig {
        let red = coll.op.is_reduction();
        CallSig {
            op: coll.op,
            root: if coll.op.is_rooted() {
                coll.root as u32
            } else {
                0
            },
            bytes: if coll.op == Op::Barrier {
                0
            } else {
                coll.bytes as u64
            },
            elem_size: if red { coll.elem_size as u32 } else { 1 },
            commutative: !red || coll.commutative,
            algorithm,
            flits: u32::try_from(flits).unwrap_or(u32::MAX),
            op_label: 0,
            elem_label: 0,
        }
    }

    /// The same call with the caller's names for its operation and elements (see
    /// [`CallSig::op_label`]).
    pub fn labelled(self, (op_label, elem_label): (u32, u32)) -> CallSig {
        CallSig {
            op_label,
            elem_label,
            ..self
        }
    }

    /// The header bytes.
    pub fn encode(&self) -> [u8; HEADER] {
        let mut h = [0u8; HEADER];
        h[0] = VERSION;
        h[1] = Op::ALL.iter().position(|&o| o == self.op).unwrap_or(0) as u8;
        h[2] = Algorithm::ALL
            .iter()
            .position(|&a| a == self.algorithm)
            .unwrap_or(0) as u8;
        h[3] = u8::from(self.commutative);
        h[4..8].copy_from_slice(&self.root.to_le_bytes());
        h[8..16].copy_from_slice(&self.bytes.to_le_bytes());
        h[16..20].copy_from_slice(&self.elem_size.to_le_bytes());
        h[20..24].copy_from_slice(&self.flits.to_le_bytes());
        h[24..28].copy_from_slice(&self.op_label.to_le_bytes());
        h[28..32].copy_from_slice(&self.elem_label.to_le_bytes());
        h
    }

    /// Reads a header; `None` if `b` is too short or not a header.
    pub fn decode(b: &[u8]) -> Option<CallSig> {
        let h = b.get(..HEADER)?;
        if h[0] != VERSION || h[3] > 1 {
            return None;
        }
        let word = |i: usize| u32::from_le_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(&h[8..16]);
        Some(CallSig {
            op: *Op::ALL.get(h[1] as usize)?,
            algorithm: *Algorithm::ALL.get(h[2] as usize)?,
            commutative: h[3] == 1,
            root: word(4),
            bytes: u64::from_le_bytes(bytes),
            elem_size: word(16),
            flits: word(20),
            op_label: word(24),
            elem_label: word(28),
        })
    }

    /// What the two calls disagree on (the most telling part), if anything.
    pub fn disagreement(&self, other: &CallSig) -> Option<Disagree> {
        // A label of 0 names nothing (a caller that labels only some calls, such as
        // the MPI layer's large reductions): against it, the sizes tell.
        let labelled = |a: u32, b: u32| a != 0 && b != 0 && a != b;
        if self.op != other.op
            || self.commutative != other.commutative
            || labelled(self.op_label, other.op_label)
        {
            Some(Disagree::Operation)
        } else if self.root != other.root {
            Some(Disagree::Root)
        } else if labelled(self.elem_label, other.elem_label) {
            Some(Disagree::Elements)
        } else if self.bytes != other.bytes || self.elem_size != other.elem_size {
            Some(Disagree::Size)
        } else if self.algorithm != other.algorithm || self.flits != other.flits {
            Some(Disagree::Settings)
        } else if self.op_label != other.op_label || self.elem_label != other.elem_label {
            // Labelled on one side only, all else alike: still not the same call.
            Some(Disagree::Operation)
        } else {
            None
        }
    }

    /// The parts of this call that differ from `other`, in words: "bcast with root
    /// 3", "allreduce of 1024 bytes per rank in elements of 8 bytes".
    pub fn describe_against(&self, other: &CallSig) -> String {
        let mut parts = vec![if self.op.is_rooted() {
            format!("{} with root {}", op_name(self.op), self.root)
        } else {
            op_name(self.op).to_string()
        }];
        if self.op != Op::Barrier && (self.bytes != other.bytes || self.op != other.op) {
            parts.push(format!("of {} bytes per rank", self.bytes));
        }
        if self.op_label != other.op_label && self.op_label != 0 {
            parts.push(format!(
                "with {}",
                label_name(Label::Operation, self.op_label)
            ));
        }
        if self.elem_label != other.elem_label && self.elem_label != 0 {
            parts.push(format!(
                "on {}",
                label_name(Label::Elements, self.elem_label)
            ));
        }
        if self.elem_size != other.elem_size {
            parts.push(format!("in elements of {} bytes", self.elem_size));
        }
        if self.commutative != other.commutative {
            parts.push(if self.commutative {
                "with a commutative operation".to_string()
            } else {
                "with a non-commutative operation".to_string()
            });
        }
        if self.algorithm != other.algorithm || self.flits != other.flits {
            parts.push(format!(
                "run as {} in {} flits",
                algorithm_name(self.algorithm),
                self.flits
            ));
        }
        parts.join(" ")
    }
}

/// Which label of a call ([`CallSig::op_label`], [`CallSig::elem_label`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Label {
    /// The operation's.
    Operation,
    /// The elements'.
    Elements,
}

/// How errors name labels (set once, by [`name_labels`]).
static LABEL_NAMES: std::sync::OnceLock<fn(Label, u32) -> String> = std::sync::OnceLock::new();

/// Says how errors name the caller's labels (an MPI library: "MPI_SUM", "datatype
/// #1f2e3d4c"); without it they read "operation #…" and "elements #…". The first
/// call wins.
pub fn name_labels(names: fn(Label, u32) -> String) {
    let _ = LABEL_NAMES.set(names);
}

fn label_name(which: Label, v: u32) -> String {
    match LABEL_NAMES.get() {
        Some(f) => f(which, v),
        None => match which {
            Label::Operation => format!("operation #{v:08x}"),
            Label::Elements => format!("elements #{v:08x}"),
        },
    }
}

/// The words of an error for a message from rank `from`, which called `theirs`,
/// received by rank `me`, which called `mine`.
pub fn mismatch_text(from: u32, theirs: &CallSig, me: u32, mine: &CallSig) -> String {
    let hint = match theirs.disagreement(mine) {
        Some(Disagree::Settings) => {
            ": the ranks run collectives with other settings (QCG_COLL_ALGO, QCG_COLL_FLITS)"
        }
        _ => ": the ranks disagree on the call",
    };
    format!(
        "rank {from} called {} where this rank (rank {me}) called {}{hint}",
        theirs.describe_against(mine),
        mine.describe_against(theirs)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sig(op: Op, root: usize, bytes: usize) -> CallSig {
        CallSig::new(
            &Collective::new(op, root, bytes),
            Algorithm::Hierarchical,
            1,
        )
    }

    #[test]
    fn a_header_reads_back_as_written_and_garbage_is_refused() {
        for op in Op::ALL {
            for a in Algorithm::ALL {
                let mut c = Collective::new(op, 7, 1 << 33);
                c.elem_size = 8;
                c.commutative = false;
                let s = CallSig::new(&c, a, 12);
                assert_eq!(CallSig::decode(&s.encode()), Some(s));
            }
        }
        let good = sig(Op::Bcast, 1, 10).encode();
        assert_eq!(CallSig::decode(&good[..HEADER - 1]), None);
        for (i, v) in [(0, 1u8), (1, 8), (2, 4), (3, 2)] {
            let mut bad = good;
            bad[i] = v;
            assert_eq!(CallSig::decode(&bad), None, "byte {i} = {v}");
        }
    }

    #[test]
    fn what_an_operation_ignores_is_left_out() {
        assert_eq!(sig(Op::Allreduce, 0, 8), sig(Op::Allreduce, 3, 8));
        assert_eq!(sig(Op::Barrier, 1, 0), sig(Op::Barrier, 0, 99));
        let mut c = Collective::new(Op::Bcast, 2, 8);
        c.elem_size = 4;
        c.commutative = false;
        assert_eq!(
            CallSig::new(&c, Algorithm::Hierarchical, 1),
            sig(Op::Bcast, 2, 8)
        );
        assert_ne!(sig(Op::Bcast, 0, 8), sig(Op::Bcast, 1, 8));
    }

    #[test]
    fn the_error_says_what_each_side_called() {
        let mine = sig(Op::Bcast, 0, 1000);
        let theirs = sig(Op::Bcast, 3, 1000);
        assert_eq!(theirs.disagreement(&mine), Some(Disagree::Root));
        assert_eq!(
            mismatch_text(3, &theirs, 1, &mine),
            "rank 3 called bcast with root 3 where this rank (rank 1) called bcast with root 0: the ranks disagree on the call"
        );
        let t = mismatch_text(2, &sig(Op::Gather, 0, 8), 0, &sig(Op::Gather, 0, 16));
        assert!(t.contains("gather with root 0 of 8 bytes per rank"), "{t}");
        assert!(t.contains("gather with root 0 of 16 bytes per rank"), "{t}");
        let t = mismatch_text(1, &sig(Op::Allreduce, 0, 8), 0, &sig(Op::Barrier, 0, 0));
        assert!(t.contains("called allreduce of 8 bytes per rank"), "{t}");
        let other = CallSig::new(&Collective::new(Op::Allgather, 0, 8), Algorithm::Chain, 4);
        let t = mismatch_text(1, &other, 0, &sig(Op::Allgather, 0, 8));
        assert!(t.contains("run as chain in 4 flits"), "{t}");
        assert!(t.contains("QCG_COLL_ALGO"), "{t}");
        assert_eq!(
            sig(Op::Bcast, 0, 8).disagreement(&sig(Op::Bcast, 0, 8)),
            None
        );
    }

    #[test]
    fn labels_travel_and_name_what_the_ranks_disagree_on() {
        let plain = sig(Op::Allreduce, 0, 1 << 20);
        let sum = plain.labelled((3, 0x1ce4_c9b5));
        assert_eq!(CallSig::decode(&sum.encode()), Some(sum));
        assert_eq!(sum.disagreement(&sum), None);
        let max = plain.labelled((4, 0x1ce4_c9b5));
        assert_eq!(max.disagreement(&sum), Some(Disagree::Operation));
        let long = plain.labelled((3, 0x6f79_0c78));
        assert_eq!(long.disagreement(&sum), Some(Disagree::Elements));
        let t = mismatch_text(1, &long, 0, &sum);
        assert!(t.contains("#6f790c78") && t.contains("#1ce4c9b5"), "{t}");
        let t = mismatch_text(2, &max, 0, &sum);
        assert!(t.contains("#00000004") && t.contains("#00000003"), "{t}");
        // Against a call without labels, the sizes tell.
        let other = sig(Op::Allreduce, 0, 1 << 19);
        assert_eq!(other.disagreement(&sum), Some(Disagree::Size));
        let t = mismatch_text(1, &other, 0, &sum);
        assert!(
            t.contains("524288 bytes") && t.contains("1048576 bytes"),
            "{t}"
        );
    }

    #[test]
    fn a_disagreement_reads_back_from_its_byte() {
        for d in Disagree::ALL {
            assert_eq!(Disagree::from_code(d.code()), Some(d));
        }
        assert_eq!(Disagree::from_code(0), None);
        assert_eq!(Disagree::from_code(6), None);
    }
}
