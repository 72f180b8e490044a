//! Datatypes as plain data: the predefined C types, derived types (every
//! constructor of MPI 3.1 §4.1, in [`derived`]) compiled to runs of bytes, packing
//! to and from the wire's form (and external32's byte order), and the predefined
//! reduction operations on packed elements. No pointers, no I/O.
//!
//! On the wire a message is always *packed*: each element's data bytes in type-map
//! order, without gaps (`size` bytes per element). A type whose one run starts at 0
//! and covers its extent is sent straight from the caller's buffer.

use crate::error::{Class, MpiError};
use std::sync::Arc;

pub mod derived;
pub use derived::*;

/// A number the predefined operations compute on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Num {
    /// Signed integers of 1, 2, 4, 8 bytes.
    I8,
    /// 16-bit signed.
    I16,
    /// 32-bit signed.
    I32,
    /// 64-bit signed.
    I64,
    /// Unsigned integers.
    U8,
    /// 16-bit unsigned.
    U16,
    /// 32-bit unsigned.
    U32,
    /// 64-bit unsigned.
    U64,
    /// `float`.
    F32,
    /// `double`.
    F64,
    /// `long double` (x86-64: 80-bit extended precision in 16 bytes), computed by
    /// C code ([`crate::longdouble`]).
    LongDouble,
}

impl Num {
    /// Its size in bytes.
    pub fn size(self) -> usize {
        match self {
            Num::I8 | Num::U8 => 1,
            Num::I16 | Num::U16 => 2,
            Num::I32 | Num::U32 | Num::F32 => 4,
            Num::I64 | Num::U64 | Num::F64 => 8,
            Num::LongDouble => crate::longdouble::SIZE,
        }
    }

    fn is_float(self) -> bool {
        matches!(self, Num::F32 | Num::F64 | Num::LongDouble)
    }
}

/// What one packed element is, for the reduction operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `n` numbers.
    Nums(Num, usize),
    /// `n` C `_Bool`s.
    Bools(usize),
    /// `n` bytes (`MPI_BYTE`: bitwise operations only).
    Bytes(usize),
    /// A (value, int) pair of MAXLOC/MINLOC types.
    Pair(Num),
    /// A C complex number of two parts (sum and product only).
    Complex(Num),
    /// No predefined operation applies (derived types).
    Opaque,
}

/// How a datatype was made (`MPI_Type_get_envelope`'s combiner); the values are
/// `mpi.h`'s `MPI_COMBINER_*`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Combiner {
    /// A predefined type.
    Named = 1,
    /// `MPI_Type_dup`.
    Dup = 2,
    /// `MPI_Type_contiguous`.
    Contiguous = 3,
    /// `MPI_Type_vector`.
    Vector = 4,
    /// `MPI_Type_create_hvector`.
    Hvector = 6,
    /// `MPI_Type_indexed`.
    Indexed = 7,
    /// `MPI_Type_create_hindexed`.
    Hindexed = 9,
    /// `MPI_Type_create_indexed_block`.
    IndexedBlock = 10,
    /// `MPI_Type_create_struct`.
    Struct = 12,
    /// `MPI_Type_create_subarray`.
    Subarray = 13,
    /// `MPI_Type_create_darray`.
    Darray = 14,
    /// `MPI_Type_create_resized`.
    Resized = 18,
    /// `MPI_Type_create_hindexed_block`.
    HindexedBlock = 19,
}

/// The arguments a derived type was made with (`MPI_Type_get_contents`), in the
/// standard's order for its combiner (MPI 3.1 §4.1.13).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Envelope {
    /// The constructor.
    pub combiner: Combiner,
    /// Its integer arguments.
    pub ints: Vec<i32>,
    /// Its address arguments.
    pub aints: Vec<isize>,
    /// Its datatype arguments.
    pub types: Vec<Arc<TypeInfo>>,
}

/// A datatype: its data as runs of bytes relative to an element's origin.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TypeInfo {
    /// The name, for messages.
    pub name: String,
    /// Bytes of data per element (what `MPI_Type_size` reports).
    pub size: usize,
    /// Lower bound.
    pub lb: isize,
    /// Extent: the stride between consecutive elements in a buffer.
    pub extent: isize,
    /// Lower bound of the data itself (`MPI_Type_get_true_extent`).
    pub true_lb: isize,
    /// Extent of the data itself.
    pub true_extent: isize,
    /// Data runs (offset from the origin, length), in type-map order, adjacent
    /// runs coalesced: one element's, or one block's when `reps` > 1.
    pub runs: Vec<(isize, usize)>,
    /// How many times an element repeats `runs` (a vector's blocks), ...
    pub reps: usize,
    /// ... and how many bytes apart.
    pub rep_stride: isize,
    /// Alignment of the largest basic type inside.
    pub align: usize,
    /// Whether the bounds were set by `MPI_Type_create_resized` (or a subarray or
    /// darray) somewhere inside: such bounds are sticky (MPI 3.1 §4.1.7), and no
    /// alignment padding is added to them.
    pub explicit_bounds: bool,
    /// Whether two runs of one element cover the same bytes (the type cannot be
    /// received into).
    pub overlaps: bool,
    /// Basic elements per element (`MPI_Get_elements`).
    pub basics: usize,
    /// What the predefined operations see in a packed element.
    pub kind: Kind,
    /// Whether the type may be used in communication.
    pub committed: bool,
    /// The handle of a predefined type (0 for a derived one).
    pub handle: i32,
    /// How it was made.
    pub envelope: Envelope,
}

impl TypeInfo {
    fn basic(h: i32, name: &str, size: usize, kind: Kind) -> TypeInfo {
        TypeInfo {
            name: name.into(),
            size,
            lb: 0,
            extent: size as isize,
            true_lb: 0,
            true_extent: size as isize,
            runs: vec![(0, size)],
            reps: 1,
            rep_stride: 0,
            align: size.clamp(1, 16),
            explicit_bounds: false,
            overlaps: false,
            basics: 1,
            kind,
            committed: true,
            handle: h,
            envelope: Envelope::named(),
        }
    }

    fn pair(h: i32, name: &str, value: usize, extent: usize, kind: Kind) -> TypeInfo {
        let int_at = value.max(4);
        TypeInfo {
            size: value + 4,
            extent: extent as isize,
            true_extent: (int_at + 4) as isize,
            runs: merge(vec![(0, value), (int_at as isize, 4)]),
            align: value.clamp(4, 16),
            basics: 2,
            ..TypeInfo::basic(h, name, value, kind)
        }
    }

    fn complex(h: i32, name: &str, part: Num) -> TypeInfo {
        let mut t = TypeInfo::basic(h, name, 2 * part.size(), Kind::Complex(part));
        t.align = part.size().clamp(1, 16);
        t
    }

    /// Whether an element's data is one run filling its extent from offset 0 (the
    /// buffer can go to the wire as it is).
    pub fn is_contiguous(&self) -> bool {
        self.lb == 0
            && self.extent == self.size as isize
            && (self.size == 0 || (self.reps == 1 && self.runs == [(0, self.size)]))
    }

    /// The bytes `count` elements touch, relative to the buffer's address:
    /// `(first offset, length)`.
    pub fn span(&self, count: usize) -> (isize, usize) {
        if count == 0 || self.runs.is_empty() {
            return (0, 0);
        }
        let lo = self.true_lb;
        let hi = self.true_lb + self.true_extent;
        let last = (count as isize - 1) * self.extent;
        let first = lo.min(lo + last);
        let end = hi.max(hi + last);
        (first, (end - first) as usize)
    }

    /// The data runs of `count` elements, relative to the buffer's address, in
    /// the order their bytes are packed.
    pub fn runs_of(&self, count: usize) -> impl Iterator<Item = (isize, usize)> + '_ {
        let (reps, stride) = (self.reps as isize, self.rep_stride);
        (0..count as isize).flat_map(move |i| {
            (0..reps).flat_map(move |r| {
                let at = i * self.extent + r * stride;
                self.runs.iter().map(move |&(off, len)| (at + off, len))
            })
        })
    }

    /// Packs `count` elements from `buf`, which starts at offset `span(count).0` of
    /// the user's buffer.
    pub fn pack(&self, buf: &[u8], count: usize) -> Vec<u8> {
        let base = self.span(count).0;
        let mut out = Vec::with_capacity(self.size * count);
        for (off, len) in self.runs_of(count) {
            let at = (off - base) as usize;
            out.extend_from_slice(&buf[at..at + len]);
        }
        out
    }

    /// Unpacks `packed` into at most `count` elements of `buf` (which starts at
    /// offset `span(count).0`), the last one partly if the data ends inside it
    /// (MPI 3.1 §3.3.2 receives what came); returns the bytes used.
    pub fn unpack(&self, packed: &[u8], buf: &mut [u8], count: usize) -> usize {
        let base = self.span(count).0;
        let mut p = 0;
        for (off, len) in self.runs_of(count) {
            if p == packed.len() {
                break;
            }
            let len = len.min(packed.len() - p);
            let at = (off - base) as usize;
            buf[at..at + len].copy_from_slice(&packed[p..p + len]);
            p += len;
        }
        p
    }

    /// Checks that `count` elements can be described: their bytes and extents
    /// fit an `isize` (MPI_ERR_COUNT otherwise).
    pub fn check_count(&self, count: usize) -> Result<(), MpiError> {
        let fits = isize::try_from(count)
            .ok()
            .and_then(|n| n.checked_mul(self.size as isize))
            .is_some()
            && isize::try_from(count)
                .ok()
                .and_then(|n| n.checked_mul(self.extent))
                .is_some();
        if fits {
            Ok(())
        } else {
            Err(MpiError::new(
                Class::Count,
                format!(
                    "{count} elements of {} ({} bytes each) overflow the address space",
                    self.name, self.size
                ),
            ))
        }
    }

    /// Checks that `count` elements can be received into: no byte is written
    /// twice (MPI 3.1 §4.1.10: overlapping receive types are erroneous).
    pub fn check_recv(&self, count: usize) -> Result<(), MpiError> {
        self.check_count(count)?;
        let bad = (count > 0 && self.overlaps)
            || (count > 1
                && self.size > 0
                && self.extent.unsigned_abs() < self.true_extent.unsigned_abs()
                // Elements interleave: look at every byte range (bounded work).
                && count.saturating_mul(self.runs.len() * self.reps) <= 1 << 20
                && overlapping(self.runs_of(count).collect()));
        if bad {
            Err(MpiError::new(
                Class::Type,
                format!(
                    "datatype {} overlaps itself{}: it cannot be received into",
                    self.name,
                    if self.overlaps {
                        String::new()
                    } else {
                        format!(" across {count} elements")
                    }
                ),
            ))
        } else {
            Ok(())
        }
    }

    /// Every basic element of one element, in type-map order: (offset, size,
    /// unit of its numbers for byte order). The reference the runs are checked
    /// against, and the map that `MPI_Get_elements` and external32 follow.
    pub fn type_map(&self) -> Vec<(isize, usize, usize)> {
        if self.envelope.combiner == Combiner::Named {
            return match self.kind {
                Kind::Nums(n, _) => vec![(0, self.size, n.size())],
                Kind::Complex(n) => vec![(0, self.size, n.size())],
                Kind::Pair(n) => vec![(0, n.size(), n.size()), (n.size().max(4) as isize, 4, 4)],
                _ => vec![(0, self.size, 1)],
            };
        }
        let mut out = Vec::new();
        for (d, len, old) in derived::placements(&self.envelope) {
            let map = old.type_map();
            for j in 0..len as isize {
                let at = d + j * old.extent;
                out.extend(map.iter().map(|&(o, s, u)| (o + at, s, u)));
            }
        }
        out
    }

    /// The basic elements of one element in packed order, as (size, unit of its
    /// numbers): a block of them and how many times it repeats (a vector's
    /// blocks, without listing them all).
    fn units(&self) -> (Vec<(usize, usize)>, usize) {
        if let (Combiner::Dup | Combiner::Resized, Some(old)) =
            (self.envelope.combiner, self.envelope.types.first())
        {
            // Their data is the old type's, repeats included.
            return old.units();
        }
        if let (true, Some(old), Some(&len)) = (
            self.reps > 1,
            self.envelope.types.first(),
            self.envelope.ints.get(1),
        ) {
            let one: Vec<(usize, usize)> = old.type_map().iter().map(|&(_, s, u)| (s, u)).collect();
            return (one.repeat(len as usize), self.reps);
        }
        let map = self.type_map();
        (map.into_iter().map(|(_, s, u)| (s, u)).collect(), 1)
    }

    /// `MPI_Get_elements`: how many basic elements `bytes` of packed data hold
    /// (None when they end inside one: MPI_UNDEFINED).
    pub fn elements(&self, bytes: usize) -> Option<usize> {
        if self.size == 0 {
            return Some(0);
        }
        let (whole, mut rest) = (bytes / self.size, bytes % self.size);
        let mut n = whole * self.basics;
        if rest > 0 {
            let (seq, reps) = self.units();
            'walk: for _ in 0..reps {
                for &(s, _) in &seq {
                    if rest < s {
                        break 'walk;
                    }
                    rest -= s;
                    n += 1;
                    if rest == 0 {
                        break 'walk;
                    }
                }
            }
        }
        (rest == 0).then_some(n)
    }

    /// `MPI_Status_set_elements`: the bytes of packed data that hold the first
    /// `n` basic elements (the inverse of [`elements`](Self::elements)); None
    /// past the address space.
    pub fn bytes_of_elements(&self, n: usize) -> Option<usize> {
        if self.basics == 0 {
            return (n == 0).then_some(0);
        }
        let (whole, mut rest) = (n / self.basics, n % self.basics);
        let mut bytes = whole.checked_mul(self.size)?;
        if rest > 0 {
            let (seq, reps) = self.units();
            // Whole repeats first, then single elements.
            let per = seq.len();
            let rep_bytes: usize = seq.iter().map(|&(s, _)| s).sum();
            bytes += rest / per * rep_bytes;
            rest %= per;
            debug_assert!(reps > 0);
            bytes += seq[..rest].iter().map(|&(s, _)| s).sum::<usize>();
        }
        Some(bytes)
    }

    /// Turns packed elements (native byte order) into external32's big-endian
    /// form, or back: the same swap both ways.
    pub fn swap_external32(&self, packed: &mut [u8]) {
        if cfg!(target_endian = "big") || self.size == 0 {
            return;
        }
        let (seq, reps) = self.units();
        let mut p = 0;
        'walk: loop {
            for _ in 0..reps {
                for &(s, u) in &seq {
                    if p >= packed.len() {
                        break 'walk;
                    }
                    let end = (p + s).min(packed.len());
                    if u > 1 {
                        for chunk in packed[p..end].chunks_exact_mut(u) {
                            chunk.reverse();
                        }
                    }
                    p = end;
                }
            }
        }
    }
}

impl Envelope {
    fn named() -> Envelope {
        Envelope {
            combiner: Combiner::Named,
            ints: Vec::new(),
            aints: Vec::new(),
            types: Vec::new(),
        }
    }
}

/// Whether two of `runs` share a byte.
fn overlapping(mut runs: Vec<(isize, usize)>) -> bool {
    runs.retain(|r| r.1 > 0);
    runs.sort_unstable();
    runs.windows(2).any(|w| w[0].0 + w[0].1 as isize > w[1].0)
}

fn merge(runs: Vec<(isize, usize)>) -> Vec<(isize, usize)> {
    let mut out: Vec<(isize, usize)> = Vec::with_capacity(runs.len());
    for (off, len) in runs {
        if len == 0 {
            continue;
        }
        match out.last_mut() {
            Some(last) if last.0 + last.1 as isize == off => last.1 += len,
            _ => out.push((off, len)),
        }
    }
    out
}

/// Highest handle of a predefined datatype.
pub const LAST_PREDEFINED: i32 = 58;

/// `MPI_PACKED`'s handle.
pub const PACKED: i32 = 35;

/// The predefined datatype of handle `h` (the numbering of `mpi.h`).
pub fn predefined(h: i32) -> Option<TypeInfo> {
    use Kind::*;
    use Num::*;
    let t = |name: &str, n: Num| TypeInfo::basic(h, name, n.size(), Nums(n, 1));
    let pair = |name: &str, value: usize, extent: usize, n: Num| {
        TypeInfo::pair(h, name, value, extent, Pair(n))
    };
    Some(match h {
        1 => t("MPI_CHAR", I8),
        2 => t("MPI_SIGNED_CHAR", I8),
        3 => t("MPI_UNSIGNED_CHAR", U8),
        4 => TypeInfo::basic(h, "MPI_BYTE", 1, Bytes(1)),
        5 => t("MPI_SHORT", I16),
        6 => t("MPI_UNSIGNED_SHORT", U16),
        7 => t("MPI_INT", I32),
        8 => t("MPI_UNSIGNED", U32),
        9 => t("MPI_LONG", I64),
        10 => t("MPI_UNSIGNED_LONG", U64),
        11 => t("MPI_LONG_LONG", I64),
        12 => t("MPI_UNSIGNED_LONG_LONG", U64),
        13 => t("MPI_FLOAT", F32),
        14 => t("MPI_DOUBLE", F64),
        15 => t("MPI_LONG_DOUBLE", LongDouble),
        16 => t("MPI_INT8_T", I8),
        17 => t("MPI_INT16_T", I16),
        18 => t("MPI_INT32_T", I32),
        19 => t("MPI_INT64_T", I64),
        20 => t("MPI_UINT8_T", U8),
        21 => t("MPI_UINT16_T", U16),
        22 => t("MPI_UINT32_T", U32),
        23 => t("MPI_UINT64_T", U64),
        24 => TypeInfo::basic(h, "MPI_C_BOOL", 1, Bools(1)),
        25 => t("MPI_WCHAR", I32),
        26 => pair("MPI_FLOAT_INT", 4, 8, F32),
        27 => pair("MPI_DOUBLE_INT", 8, 16, F64),
        28 => pair("MPI_LONG_INT", 8, 16, I64),
        29 => pair("MPI_2INT", 4, 8, I32),
        30 => pair("MPI_SHORT_INT", 2, 8, I16),
        31 => pair("MPI_LONG_DOUBLE_INT", 16, 32, LongDouble),
        32 => t("MPI_AINT", I64),
        33 => t("MPI_COUNT", I64),
        34 => t("MPI_OFFSET", I64),
        PACKED => TypeInfo::basic(h, "MPI_PACKED", 1, Opaque),
        36 => TypeInfo::complex(h, "MPI_C_FLOAT_COMPLEX", F32),
        37 => TypeInfo::complex(h, "MPI_C_DOUBLE_COMPLEX", F64),
        38 => TypeInfo::complex(h, "MPI_C_LONG_DOUBLE_COMPLEX", LongDouble),
        39 => TypeInfo::basic(h, "MPI_CXX_BOOL", 1, Bools(1)),
        40 => TypeInfo::complex(h, "MPI_CXX_FLOAT_COMPLEX", F32),
        41 => TypeInfo::complex(h, "MPI_CXX_DOUBLE_COMPLEX", F64),
        42 => TypeInfo::complex(h, "MPI_CXX_LONG_DOUBLE_COMPLEX", LongDouble),
        // Fortran's types, also named in C (MPI 3.1 §3.2.2, §17.2.5).
        43 => t("MPI_INTEGER", I32),
        44 => t("MPI_REAL", F32),
        45 => t("MPI_DOUBLE_PRECISION", F64),
        46 => t("MPI_LOGICAL", I32),
        47 => t("MPI_CHARACTER", I8),
        48 => TypeInfo::complex(h, "MPI_COMPLEX", F32),
        49 => TypeInfo::complex(h, "MPI_DOUBLE_COMPLEX", F64),
        50 => pair("MPI_2INTEGER", 4, 8, I32),
        51 => t("MPI_INTEGER1", I8),
        52 => t("MPI_INTEGER2", I16),
        53 => t("MPI_INTEGER4", I32),
        54 => t("MPI_INTEGER8", I64),
        55 => t("MPI_REAL4", F32),
        56 => t("MPI_REAL8", F64),
        57 => TypeInfo::complex(h, "MPI_COMPLEX8", F32),
        58 => TypeInfo::complex(h, "MPI_COMPLEX16", F64),
        _ => return None,
    })
}

/// The predefined reduction operations (handles of `mpi.h`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `MPI_MAX`
    Max,
    /// `MPI_MIN`
    Min,
    /// `MPI_SUM`
    Sum,
    /// `MPI_PROD`
    Prod,
    /// `MPI_LAND`
    Land,
    /// `MPI_BAND`
    Band,
    /// `MPI_LOR`
    Lor,
    /// `MPI_BOR`
    Bor,
    /// `MPI_LXOR`
    Lxor,
    /// `MPI_BXOR`
    Bxor,
    /// `MPI_MINLOC`
    Minloc,
    /// `MPI_MAXLOC`
    Maxloc,
}

impl Op {
    /// The operation of handle `h`.
    pub fn from_handle(h: i32) -> Option<Op> {
        use Op::*;
        Some(match h {
            1 => Max,
            2 => Min,
            3 => Sum,
            4 => Prod,
            5 => Land,
            6 => Band,
            7 => Lor,
            8 => Bor,
            9 => Lxor,
            10 => Bxor,
            11 => Minloc,
            12 => Maxloc,
            _ => return None,
        })
    }

    /// Whether the operation applies to elements of `kind`.
    pub fn applies(self, kind: Kind) -> bool {
        use Op::*;
        match kind {
            Kind::Nums(n, _) => match self {
                Max | Min | Sum | Prod => true,
                Land | Lor | Lxor | Band | Bor | Bxor => !n.is_float(),
                Minloc | Maxloc => false,
            },
            Kind::Bools(_) => matches!(self, Land | Lor | Lxor),
            Kind::Bytes(_) => matches!(self, Band | Bor | Bxor),
            Kind::Pair(_) => matches!(self, Minloc | Maxloc),
            Kind::Complex(Num::LongDouble) => matches!(self, Sum),
            Kind::Complex(_) => matches!(self, Sum | Prod),
            Kind::Opaque => false,
        }
    }

    /// Whether [`Op::apply`] takes any number of whole elements of `kind` at once
    /// (numbers but `long double`, bools, bytes), not exactly one.
    pub fn takes_runs(kind: Kind) -> bool {
        match kind {
            Kind::Nums(n, _) => n != Num::LongDouble,
            Kind::Bools(_) | Kind::Bytes(_) => true,
            Kind::Pair(_) | Kind::Complex(_) | Kind::Opaque => false,
        }
    }

    /// `a = a ∘ b` for one packed element of `kind` (the operation must apply), or
    /// for as many as `a` holds where [`Op::takes_runs`].
    pub fn apply(self, kind: Kind, a: &mut [u8], b: &[u8]) {
        match kind {
            Kind::Nums(Num::LongDouble, _) => {
                let h = match self {
                    Op::Max => 1,
                    Op::Min => 2,
                    Op::Sum => 3,
                    Op::Prod => 4,
                    _ => return,
                };
                crate::longdouble::apply(h, a, b);
            }
            Kind::Nums(n, _) => nums_op(self, n, a, b),
            Kind::Bools(_) | Kind::Bytes(_) => {
                for (x, y) in a.iter_mut().zip(b) {
                    let (p, q) = (*x != 0, *y != 0);
                    *x = match self {
                        Op::Land => u8::from(p && q),
                        Op::Lor => u8::from(p || q),
                        Op::Lxor => u8::from(p != q),
                        Op::Band => *x & y,
                        Op::Bor => *x | y,
                        Op::Bxor => *x ^ y,
                        _ => *x,
                    };
                }
            }
            Kind::Pair(n) => {
                let s = n.size();
                let (ai, bi) = (i32_at(&a[s..]), i32_at(&b[s..]));
                // How b's value compares with a's.
                let ord = if n == Num::LongDouble {
                    crate::longdouble::compare(&b[..s], &a[..s])
                } else {
                    to_f64(n, &b[..s]).partial_cmp(&to_f64(n, &a[..s]))
                };
                use std::cmp::Ordering::{Equal, Greater, Less};
                let take_b = match (self, ord) {
                    (Op::Maxloc, Some(Greater)) | (Op::Minloc, Some(Less)) => true,
                    (Op::Maxloc | Op::Minloc, Some(Equal)) => bi < ai,
                    _ => false,
                };
                if take_b {
                    a.copy_from_slice(b);
                }
            }
            Kind::Complex(n) => complex_op(self, n, a, b),
            Kind::Opaque => {}
        }
    }
}

/// Sum or product of two complex numbers of parts `n`.
fn complex_op(op: Op, n: Num, a: &mut [u8], b: &[u8]) {
    let s = n.size();
    if n == Num::LongDouble {
        if op == Op::Sum {
            crate::longdouble::apply(3, &mut a[..s], &b[..s]);
            crate::longdouble::apply(3, &mut a[s..2 * s], &b[s..2 * s]);
        }
        return;
    }
    let get = |x: &[u8]| to_f64(n, x);
    let (ar, ai, br, bi) = (get(&a[..s]), get(&a[s..]), get(&b[..s]), get(&b[s..]));
    let (r, i) = match op {
        Op::Sum => (ar + br, ai + bi),
        Op::Prod => (ar * br - ai * bi, ar * bi + ai * br),
        _ => return,
    };
    let put = |x: &mut [u8], v: f64| match n {
        Num::F32 => x.copy_from_slice(&(v as f32).to_ne_bytes()),
        _ => x.copy_from_slice(&v.to_ne_bytes()),
    };
    put(&mut a[..s], r);
    put(&mut a[s..], i);
}

fn i32_at(b: &[u8]) -> i32 {
    i32::from_ne_bytes([b[0], b[1], b[2], b[3]])
}

/// A pair's value as f64, exact for every value type of the pair types but
/// `long`, whose comparison is still exact for |v| < 2^53 and monotone beyond.
fn to_f64(n: Num, b: &[u8]) -> f64 {
    match n {
        Num::I16 => f64::from(i16::from_ne_bytes([b[0], b[1]])),
        Num::I32 => f64::from(i32_at(b)),
        Num::I64 => i64::from_ne_bytes(arr8(b)) as f64,
        Num::F32 => f64::from(f32::from_ne_bytes([b[0], b[1], b[2], b[3]])),
        Num::F64 => f64::from_ne_bytes(arr8(b)),
        _ => 0.0,
    }
}

fn arr8(b: &[u8]) -> [u8; 8] {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    a
}

/// `a[i] = f(a[i], b[i])` over every whole element of type `$t` the two buffers
/// hold. One loop per (type, operation) pair, decided once per call rather than per
/// element, so the compiler turns sums, minima and the like into vector code: a 4
/// MiB reduction is a few hundred microseconds, not milliseconds.
macro_rules! lanes {
    ($t:ty, $x:expr, $y:expr, |$a:ident, $b:ident| $e:expr) => {{
        const S: usize = std::mem::size_of::<$t>();
        for (x, y) in $x.chunks_exact_mut(S).zip($y.chunks_exact(S)) {
            let $a = <$t>::from_ne_bytes((&*x).try_into().unwrap_or([0; S]));
            let $b = <$t>::from_ne_bytes(y.try_into().unwrap_or([0; S]));
            x.copy_from_slice(&($e).to_ne_bytes());
        }
    }};
}

macro_rules! int_ops {
    ($t:ty, $op:expr, $x:expr, $y:expr) => {
        match $op {
            Op::Max => lanes!($t, $x, $y, |a, b| a.max(b)),
            Op::Min => lanes!($t, $x, $y, |a, b| a.min(b)),
            Op::Sum => lanes!($t, $x, $y, |a, b| a.wrapping_add(b)),
            Op::Prod => lanes!($t, $x, $y, |a, b| a.wrapping_mul(b)),
            Op::Land => lanes!($t, $x, $y, |a, b| <$t>::from(a != 0 && b != 0)),
            Op::Lor => lanes!($t, $x, $y, |a, b| <$t>::from(a != 0 || b != 0)),
            Op::Lxor => lanes!($t, $x, $y, |a, b| <$t>::from((a != 0) != (b != 0))),
            Op::Band => lanes!($t, $x, $y, |a, b| a & b),
            Op::Bor => lanes!($t, $x, $y, |a, b| a | b),
            Op::Bxor => lanes!($t, $x, $y, |a, b| a ^ b),
            Op::Minloc | Op::Maxloc => {}
        }
    };
}

macro_rules! float_ops {
    ($t:ty, $op:expr, $x:expr, $y:expr) => {
        match $op {
            Op::Max => lanes!($t, $x, $y, |a, b| a.max(b)),
            Op::Min => lanes!($t, $x, $y, |a, b| a.min(b)),
            Op::Sum => lanes!($t, $x, $y, |a, b| a + b),
            Op::Prod => lanes!($t, $x, $y, |a, b| a * b),
            _ => {}
        }
    };
}

/// `a = a op b` over every value of kind `n` the two buffers hold, the operation
/// chosen once per call.
fn nums_op(op: Op, n: Num, a: &mut [u8], b: &[u8]) {
    match n {
        Num::I8 => int_ops!(i8, op, a, b),
        Num::I16 => int_ops!(i16, op, a, b),
        Num::I32 => int_ops!(i32, op, a, b),
        Num::I64 => int_ops!(i64, op, a, b),
        Num::U8 => int_ops!(u8, op, a, b),
        Num::U16 => int_ops!(u16, op, a, b),
        Num::U32 => int_ops!(u32, op, a, b),
        Num::U64 => int_ops!(u64, op, a, b),
        Num::F32 => float_ops!(f32, op, a, b),
        Num::F64 => float_ops!(f64, op, a, b),
        Num::LongDouble => {}
    }
}

/// One value at a time: what a run must equal (tests).
#[cfg(test)]
fn num_op(op: Op, n: Num, x: &mut [u8], y: &[u8]) {
    let s = n.size();
    nums_op(op, n, &mut x[..s], &y[..s]);
}

/// Checks that `op` applies to datatype `t`.
pub fn check_op(op: Op, t: &TypeInfo) -> Result<(), MpiError> {
    if op.applies(t.kind) {
        Ok(())
    } else {
        Err(MpiError::new(
            Class::Op,
            format!("{op:?} does not apply to datatype {}", t.name),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One integer element, sign-extended or zero-extended to i128.
    fn int_at(n: Num, b: &[u8]) -> i128 {
        let mut w = [0u8; 8];
        w[..b.len()].copy_from_slice(b);
        let u = u64::from_ne_bytes(w);
        let bits = 8 * b.len() as u32;
        let signed = matches!(n, Num::I8 | Num::I16 | Num::I32 | Num::I64);
        if signed && bits < 64 {
            ((u << (64 - bits)) as i64 >> (64 - bits)) as i128
        } else if signed {
            u as i64 as i128
        } else {
            u as i128
        }
    }

    /// The element-by-element reference for integers: i128 arithmetic, then cut.
    fn int_reference(op: Op, n: Num, a: &[u8], b: &[u8]) -> Vec<u8> {
        let s = n.size();
        let mut out = a.to_vec();
        for (k, (x, y)) in a.chunks_exact(s).zip(b.chunks_exact(s)).enumerate() {
            let (p, q) = (int_at(n, x), int_at(n, y));
            let r: i128 = match op {
                Op::Max => p.max(q),
                Op::Min => p.min(q),
                Op::Sum => p + q,
                Op::Prod => p.wrapping_mul(q),
                Op::Land => i128::from(p != 0 && q != 0),
                Op::Lor => i128::from(p != 0 || q != 0),
                Op::Lxor => i128::from((p != 0) != (q != 0)),
                Op::Band => p & q,
                Op::Bor => p | q,
                Op::Bxor => p ^ q,
                Op::Minloc | Op::Maxloc => p,
            };
            out[k * s..(k + 1) * s].copy_from_slice(&r.to_ne_bytes()[..s]);
        }
        out
    }

    const INT_OPS: [Op; 10] = [
        Op::Max,
        Op::Min,
        Op::Sum,
        Op::Prod,
        Op::Land,
        Op::Lor,
        Op::Lxor,
        Op::Band,
        Op::Bor,
        Op::Bxor,
    ];

    proptest::proptest! {
        /// The whole-buffer loops give what one element at a time gives, for every
        /// integer kind and operation, remainder bytes left alone.
        #[test]
        fn integer_reductions_match_an_element_by_element_reference(
            a in proptest::collection::vec(proptest::num::u8::ANY, 0..300),
            b in proptest::collection::vec(proptest::num::u8::ANY, 0..300),
        ) {
            let len = a.len().min(b.len());
            let (a, b) = (&a[..len], &b[..len]);
            for n in [Num::I8, Num::I16, Num::I32, Num::I64, Num::U8, Num::U16, Num::U32, Num::U64] {
                for op in INT_OPS {
                    let mut got = a.to_vec();
                    op.apply(Kind::Nums(n, 1), &mut got, b);
                    proptest::prop_assert_eq!(&got, &int_reference(op, n, a, b), "{:?} {:?}", op, n);
                }
            }
        }

        /// Floating sums, products, minima and maxima as one element at a time does
        /// them (the f32 reference computes in f64, exact for one + or *, then rounds).
        #[test]
        fn float_reductions_match_an_element_by_element_reference(
            a in proptest::collection::vec(-1e6f64..1e6, 0..100),
            b in proptest::collection::vec(-1e6f64..1e6, 0..100),
        ) {
            let len = a.len().min(b.len());
            for op in [Op::Max, Op::Min, Op::Sum, Op::Prod] {
                let f = |p: f64, q: f64| match op {
                    Op::Max => p.max(q),
                    Op::Min => p.min(q),
                    Op::Sum => p + q,
                    _ => p * q,
                };
                let bytes = |v: &[f64]| v.iter().flat_map(|x| x.to_ne_bytes()).collect::<Vec<u8>>();
                let mut got = bytes(&a[..len]);
                op.apply(Kind::Nums(Num::F64, 1), &mut got, &bytes(&b[..len]));
                let want: Vec<f64> = (0..len).map(|k| f(a[k], b[k])).collect();
                proptest::prop_assert_eq!(got, bytes(&want));
                let a32: Vec<f32> = a[..len].iter().map(|x| *x as f32).collect();
                let b32: Vec<f32> = b[..len].iter().map(|x| *x as f32).collect();
                let bytes32 = |v: &[f32]| v.iter().flat_map(|x| x.to_ne_bytes()).collect::<Vec<u8>>();
                let mut got = bytes32(&a32);
                op.apply(Kind::Nums(Num::F32, 1), &mut got, &bytes32(&b32));
                let want: Vec<f32> = (0..len).map(|k| f(a32[k] as f64, b32[k] as f64) as f32).collect();
                proptest::prop_assert_eq!(got, bytes32(&want));
            }
        }
    }

    fn t(h: i32) -> Arc<TypeInfo> {
        Arc::new(predefined(h).expect("predefined"))
    }

    #[test]
    fn a_run_of_numbers_combines_as_each_number_alone() {
        use Op::*;
        let nums = [
            Num::I8,
            Num::I16,
            Num::I32,
            Num::I64,
            Num::U8,
            Num::U16,
            Num::U32,
            Num::U64,
            Num::F32,
            Num::F64,
        ];
        // Bytes that make every kind of value: negative, NaN, infinities, zero.
        let x: Vec<u8> = (0..512u32)
            .map(|i| (i.wrapping_mul(0x9E37) >> 3) as u8)
            .collect();
        let y: Vec<u8> = (0..512u32)
            .map(|i| (i.wrapping_mul(0x85EB) >> 5) as u8)
            .collect();
        for n in nums {
            let kind = Kind::Nums(n, 1);
            for op in [Max, Min, Sum, Prod, Land, Band, Lor, Bor, Lxor, Bxor] {
                if !op.applies(kind) {
                    continue;
                }
                let mut run = x.clone();
                op.apply(kind, &mut run, &y);
                let mut one = x.clone();
                for (a, b) in one.chunks_exact_mut(n.size()).zip(y.chunks_exact(n.size())) {
                    num_op(op, n, a, b);
                }
                // Compared as bits: a NaN's sign or payload must not change either.
                assert_eq!(run, one, "{op:?} on {n:?}");
            }
        }
        assert!(Op::takes_runs(Kind::Nums(Num::F64, 1)));
        assert!(!Op::takes_runs(Kind::Nums(Num::LongDouble, 1)));
        assert!(!Op::takes_runs(Kind::Pair(Num::F64)));
    }

    #[test]
    fn predefined_sizes_follow_the_c_abi() {
        assert_eq!(t(7).size, 4);
        assert!(t(7).is_contiguous());
        let di = t(27);
        assert_eq!((di.size, di.extent), (12, 16));
        assert!(!di.is_contiguous());
        assert_eq!(t(30).runs, vec![(0, 2), (4, 4)]);
    }

    #[test]
    fn vector_packs_the_strided_elements_and_unpacks_them_back() {
        // 3 blocks of 2 ints, stride 4 ints: ints 0,1, 4,5, 8,9.
        let v = vector(3, 2, 4, &t(7)).expect("vector");
        assert_eq!(v.size, 24);
        assert_eq!(v.extent, 40);
        let src: Vec<u8> = (0..12i32).flat_map(|i| i.to_ne_bytes()).collect();
        let packed = v.pack(&src[..v.span(1).1], 1);
        let ints: Vec<i32> = packed.chunks(4).map(i32_at).collect();
        assert_eq!(ints, vec![0, 1, 4, 5, 8, 9]);
        let mut back = vec![0u8; 40];
        assert_eq!(v.unpack(&packed, &mut back, 1), 24);
        assert_eq!(&back[16..24], &src[16..24]);
        assert_eq!(&back[8..16], &[0u8; 8]);
    }

    #[test]
    fn struct_extent_is_rounded_to_its_alignment() {
        let s = Arc::new(create_struct(&[(1, 0, t(14)), (1, 8, t(1))]).expect("struct"));
        assert_eq!((s.size, s.extent), (9, 16));
        assert_eq!(s.kind, Kind::Opaque);
        let c = contiguous(3, &s).expect("contiguous");
        assert_eq!((c.size, c.extent, c.runs.len()), (27, 48, 3));
    }

    #[test]
    fn predefined_ops_refuse_derived_types_as_the_standard_says() {
        let c = contiguous(3, &t(7)).expect("contiguous");
        assert!(c.is_contiguous());
        assert!(!Op::Sum.applies(c.kind));
    }

    #[test]
    fn ops_compute_as_c_does() {
        let mut a = 7i32.to_ne_bytes();
        Op::Sum.apply(Kind::Nums(Num::I32, 1), &mut a, &(-9i32).to_ne_bytes());
        assert_eq!(i32::from_ne_bytes(a), -2);
        let mut f = 1.5f64.to_ne_bytes();
        Op::Max.apply(Kind::Nums(Num::F64, 1), &mut f, &2.5f64.to_ne_bytes());
        assert_eq!(f64::from_ne_bytes(f), 2.5);
        // MAXLOC: equal values keep the smaller index.
        let pair = |v: f64, i: i32| {
            let mut b = v.to_ne_bytes().to_vec();
            b.extend_from_slice(&i.to_ne_bytes());
            b
        };
        let mut a = pair(3.0, 5);
        Op::Maxloc.apply(Kind::Pair(Num::F64), &mut a, &pair(3.0, 2));
        assert_eq!(a, pair(3.0, 2));
        Op::Minloc.apply(Kind::Pair(Num::F64), &mut a, &pair(4.0, 0));
        assert_eq!(a, pair(3.0, 2));
        assert!(!Op::Band.applies(Kind::Nums(Num::F64, 1)));
        assert!(!Op::Sum.applies(Kind::Opaque));
    }

    /// An x87 extended value: sign 0, biased exponent, 64-bit mantissa (integer bit
    /// explicit), in 16 bytes.
    #[cfg(target_arch = "x86_64")]
    fn ext(exp: i32, mantissa: u64) -> Vec<u8> {
        let mut b = mantissa.to_le_bytes().to_vec();
        b.extend_from_slice(&((16383 + exp) as u16).to_le_bytes());
        b.resize(16, 0);
        b
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn long_double_keeps_the_bits_a_double_would_lose() {
        let ld = t(15);
        assert_eq!(ld.kind, Kind::Nums(Num::LongDouble, 1));
        assert!(Op::Sum.applies(ld.kind) && !Op::Band.applies(ld.kind));
        // 1 + 2^-60 = 1 + 2^-60, not 1.
        let mut a = ext(0, 1 << 63);
        Op::Sum.apply(ld.kind, &mut a, &ext(-60, 1 << 63));
        assert_eq!(&a[..10], &ext(0, (1 << 63) | (1 << 3))[..10]);
        // max(1, 1 + 2^-60) and MAXLOC on the pair type tell them apart.
        let mut m = ext(0, 1 << 63);
        Op::Max.apply(ld.kind, &mut m, &a);
        assert_eq!(&m[..10], &a[..10]);
        let pair = |v: Vec<u8>, i: i32| {
            let mut p = v;
            p.extend_from_slice(&i.to_ne_bytes());
            p
        };
        let ldi = t(31);
        assert_eq!((ldi.size, ldi.extent), (20, 32));
        let mut p = pair(ext(0, 1 << 63), 0);
        Op::Maxloc.apply(ldi.kind, &mut p, &pair(a.clone(), 3));
        assert_eq!(i32_at(&p[16..]), 3);
        Op::Minloc.apply(ldi.kind, &mut p, &pair(ext(0, 1 << 63), 5));
        assert_eq!(i32_at(&p[16..]), 5);
    }
}
