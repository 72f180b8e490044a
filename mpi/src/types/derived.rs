//! Derived datatypes (MPI 3.1 §4.1): each constructor checks its arguments and
//! records them as an [`Envelope`]; [`placements`] turns an envelope into the old
//! types' elements and where they go, and [`derive()`] compiles those into runs,
//! bounds and extents. The same placements give the reference type map
//! ([`TypeInfo::type_map`]) that the runs are tested against.
//!
//! A vector or hvector keeps one block's runs and a repeat count, so its size in
//! memory does not grow with its count; other types list every run of an element.
//! Limits, checked before anything is allocated: 2^27 blocks or runs
//! (`MPI_ERR_NO_MEM`), displacements and sizes within 2^60 bytes (`MPI_ERR_COUNT`).

use super::{merge, overlapping, Combiner, Envelope, Kind, TypeInfo};
use crate::error::{Class, MpiError};
use std::sync::Arc;

// The values of Open MPI's mpi.h, so that contents print alike.
/// `MPI_ORDER_C`.
pub const ORDER_C: i32 = 0;
/// `MPI_ORDER_FORTRAN`.
pub const ORDER_FORTRAN: i32 = 1;
/// `MPI_DISTRIBUTE_BLOCK`.
pub const DISTRIBUTE_BLOCK: i32 = 0;
/// `MPI_DISTRIBUTE_CYCLIC`.
pub const DISTRIBUTE_CYCLIC: i32 = 1;
/// `MPI_DISTRIBUTE_NONE`.
pub const DISTRIBUTE_NONE: i32 = 2;
/// `MPI_DISTRIBUTE_DFLT_DARG`.
pub const DISTRIBUTE_DFLT_DARG: i32 = -1;

/// Blocks of old types' elements: (displacement, how many, old type), in
/// type-map order.
pub type Placed<'a> = Vec<(isize, usize, &'a TypeInfo)>;

fn count_arg(what: &str, n: i32) -> Result<usize, MpiError> {
    usize::try_from(n).map_err(|_| MpiError::new(Class::Count, format!("{what} {n} is negative")))
}

fn arg(msg: String) -> MpiError {
    MpiError::new(Class::Arg, msg)
}

fn env(c: Combiner, ints: Vec<i32>, aints: Vec<isize>, types: Vec<Arc<TypeInfo>>) -> Envelope {
    Envelope {
        combiner: c,
        ints,
        aints,
        types,
    }
}

/// `len` elements of `old` from byte `disp` on.
fn block<'a>(out: &mut Placed<'a>, disp: isize, len: usize, old: &'a TypeInfo) {
    out.push((disp, len, old));
}

/// `a * b` in bytes, saturated (a saturated displacement fails [`derive`]'s
/// bounds check instead of wrapping around).
fn mul(a: impl Into<i128>, b: impl Into<i128>) -> isize {
    isize::try_from(a.into() * b.into()).unwrap_or(isize::MAX)
}

/// Where the old types' elements of a derived type go.
pub fn placements(e: &Envelope) -> Placed<'_> {
    let mut out = Vec::new();
    let i = &e.ints;
    let first = e.types.first().map(|t| &**t);
    let Some(old) = first else { return out };
    let ext = old.extent as i128;
    match e.combiner {
        Combiner::Named => {}
        Combiner::Dup | Combiner::Resized => out.push((0, 1, old)),
        Combiner::Contiguous => block(&mut out, 0, i[0] as usize, old),
        Combiner::Vector => {
            for k in 0..i[0] {
                block(
                    &mut out,
                    mul(i128::from(k) * i128::from(i[2]), ext),
                    i[1] as usize,
                    old,
                );
            }
        }
        Combiner::Hvector => {
            for k in 0..i[0] {
                block(&mut out, mul(k, e.aints[0] as i128), i[1] as usize, old);
            }
        }
        Combiner::Indexed => {
            let n = i[0] as usize;
            for k in 0..n {
                block(&mut out, mul(i[1 + n + k], ext), i[1 + k] as usize, old);
            }
        }
        Combiner::Hindexed => {
            for k in 0..i[0] as usize {
                block(&mut out, e.aints[k], i[1 + k] as usize, old);
            }
        }
        Combiner::IndexedBlock => {
            for k in 0..i[0] as usize {
                block(&mut out, mul(i[2 + k], ext), i[1] as usize, old);
            }
        }
        Combiner::HindexedBlock => {
            for k in 0..i[0] as usize {
                block(&mut out, e.aints[k], i[1] as usize, old);
            }
        }
        Combiner::Struct => {
            for k in 0..i[0] as usize {
                block(&mut out, e.aints[k], i[1 + k] as usize, &e.types[k]);
            }
        }
        Combiner::Subarray | Combiner::Darray => {
            let (sizes, owned, c) = grid_args(e);
            grid(&mut out, sizes, &owned, c, old);
        }
    }
    out
}

/// Ranges of indices along one dimension: (start, length).
type Ranges = Vec<(usize, usize)>;

/// A subarray's or darray's array sizes, the ranges of indices it takes along
/// each dimension, and whether the order is C's.
fn grid_args(e: &Envelope) -> (&[i32], Vec<Ranges>, bool) {
    let i = &e.ints;
    if e.combiner == Combiner::Subarray {
        let n = i[0] as usize;
        let (sizes, subs, starts) = (&i[1..1 + n], &i[1 + n..1 + 2 * n], &i[1 + 2 * n..]);
        let owned = (0..n)
            .map(|d| vec![(starts[d] as usize, subs[d] as usize)])
            .collect();
        (sizes, owned, i[1 + 3 * n] == ORDER_C)
    } else {
        let n = i[2] as usize;
        let owned = darray_owned(i[1], &i[3..]);
        (&i[3..3 + n], owned, i[3 + 4 * n] == ORDER_C)
    }
}

/// How many blocks [`placements`] makes, counted without making them.
fn blocks(e: &Envelope) -> i128 {
    match e.combiner {
        Combiner::Named => 0,
        Combiner::Dup | Combiner::Resized | Combiner::Contiguous => 1,
        Combiner::Subarray | Combiner::Darray => {
            let (_, owned, c) = grid_args(e);
            let n = owned.len();
            let fast = if c { n - 1 } else { 0 };
            (0..n)
                .map(|d| {
                    if d == fast {
                        owned[d].len() as i128
                    } else {
                        owned[d].iter().map(|r| r.1 as i128).sum()
                    }
                })
                .product()
        }
        _ => i128::from(e.ints[0]),
    }
}

/// The elements of an array of `sizes` whose index along each dimension is in
/// one of the ranges `owned` gives, in storage order (C: last index fastest); a
/// range along the fastest dimension makes one block.
fn grid<'a>(out: &mut Placed<'a>, sizes: &[i32], owned: &[Ranges], c: bool, old: &'a TypeInfo) {
    let n = sizes.len();
    if n == 0 || owned.iter().any(|o| o.iter().all(|r| r.1 == 0)) {
        return;
    }
    // Dimensions from slowest to fastest, with each one's stride in elements.
    let order: Vec<usize> = if c {
        (0..n).collect()
    } else {
        (0..n).rev().collect()
    };
    let mut stride = vec![1i128; n];
    let mut s = 1i128;
    for &d in order.iter().rev() {
        stride[d] = s;
        s *= sizes[d] as i128;
    }
    let fast = order[n - 1];
    // The indices of the slower dimensions, one by one.
    let slow: Vec<Vec<usize>> = (0..n)
        .map(|d| {
            if d == fast {
                vec![0]
            } else {
                owned[d].iter().flat_map(|&(a, l)| a..a + l).collect()
            }
        })
        .collect();
    let mut idx = vec![0usize; n];
    loop {
        let base: i128 = order[..n - 1]
            .iter()
            .map(|&d| slow[d][idx[d]] as i128 * stride[d])
            .sum();
        for &(start, len) in &owned[fast] {
            if len > 0 {
                out.push((mul(base + start as i128, old.extent as i128), len, old));
            }
        }
        // The next row: the slower dimensions count like digits.
        let mut k = n - 1;
        loop {
            if k == 0 {
                return;
            }
            k -= 1;
            let d = order[k];
            idx[d] += 1;
            if idx[d] < slow[d].len() {
                break;
            }
            idx[d] = 0;
        }
    }
}

/// The ranges (start, length) of global indices process `rank` of a darray
/// owns along each dimension; `rest` is `gsizes, distribs, dargs, psizes`
/// (validated).
fn darray_owned(rank: i32, rest: &[i32]) -> Vec<Ranges> {
    let n = rest.len().saturating_sub(1) / 4;
    let (g, dist, darg, ps) = (
        &rest[..n],
        &rest[n..2 * n],
        &rest[2 * n..3 * n],
        &rest[3 * n..4 * n],
    );
    // Process coordinates in row-major order of the process grid, whatever the
    // array's order (MPI 3.1 §4.1.4).
    let mut coord = vec![0usize; n];
    let mut r = rank as usize;
    for d in (0..n).rev() {
        coord[d] = r % ps[d] as usize;
        r /= ps[d] as usize;
    }
    (0..n)
        .map(|d| {
            let (gs, p, c) = (g[d] as usize, ps[d] as usize, coord[d]);
            match dist[d] {
                DISTRIBUTE_BLOCK => {
                    let b = if darg[d] == DISTRIBUTE_DFLT_DARG {
                        gs.div_ceil(p)
                    } else {
                        darg[d] as usize
                    };
                    let a = (c * b).min(gs);
                    vec![(a, ((c + 1) * b).min(gs) - a)]
                }
                DISTRIBUTE_CYCLIC => {
                    let k = if darg[d] == DISTRIBUTE_DFLT_DARG {
                        1
                    } else {
                        darg[d] as usize
                    };
                    if p == 1 {
                        return vec![(0, gs)];
                    }
                    let mut v = Vec::new();
                    let mut s = c * k;
                    while s < gs {
                        v.push((s, k.min(gs - s)));
                        s += p * k;
                    }
                    v
                }
                _ => vec![(0, gs)],
            }
        })
        .collect()
}

/// Displacements and sizes stay below this (1 EiB), so that sums of a few of
/// them never overflow an `isize`.
const MAX_BYTES: i128 = 1 << 60;
/// Blocks or runs a type may have (16 bytes each in memory).
const MAX_RUNS: i128 = 1 << 27;

/// A vector's or hvector's blocks as one block repeated: (count, stride in
/// bytes, block length, old type); such types keep one block's runs and a
/// repeat count instead of every block's runs.
fn strided(e: &Envelope) -> Option<(usize, isize, usize, &TypeInfo)> {
    let old = e.types.first()?;
    let i = &e.ints;
    let stride = match e.combiner {
        Combiner::Vector => mul(i[2], old.extent as i128),
        Combiner::Hvector => e.aints[0],
        _ => return None,
    };
    (i[0] >= 2 && i[1] > 0).then_some((i[0] as usize, stride, i[1] as usize, &**old))
}

/// Whether one element of `t` is one run filling its extent.
fn dense(t: &TypeInfo) -> bool {
    t.reps == 1 && t.extent == t.size as isize && t.runs == [(0, t.size)]
}

/// Checks that an array of `sizes` elements of `old` (a subarray's or darray's
/// extent) fits in 2^60 bytes.
fn check_array(sizes: &[i32], old: &TypeInfo) -> Result<(), MpiError> {
    let bytes = sizes
        .iter()
        .try_fold(i128::from(old.extent.unsigned_abs() as u64), |a, &g| {
            Some(a * i128::from(g)).filter(|&b| b <= MAX_BYTES)
        });
    match bytes {
        Some(_) => Ok(()),
        None => Err(MpiError::new(
            Class::Count,
            format!(
                "an array of {sizes:?} elements of {} spans more than 2^60 bytes",
                old.name
            ),
        )),
    }
}

/// Checks that the layout of `e` can be compiled: bounded blocks, runs,
/// displacements and size.
fn check_layout(name: &str, e: &Envelope) -> Result<(), MpiError> {
    if matches!(e.combiner, Combiner::Dup | Combiner::Resized) {
        // The old type's layout was checked when it was made.
        return Ok(());
    }
    let too_many = |what: &str, n: i128| {
        MpiError::new(
            Class::NoMem,
            format!("{name} would have {n} {what}; at most {MAX_RUNS} are supported"),
        )
    };
    let (mut runs, mut size) = (0i128, 0i128);
    let mut check = |d: i128, len: usize, t: &TypeInfo| {
        if len == 0 {
            // An empty block takes no place, wherever it says it is.
            return Ok(());
        }
        let (len, ext) = (len as i128, t.extent as i128);
        runs += if dense(t) {
            1
        } else {
            len * (t.runs.len() * t.reps) as i128
        };
        size += len * t.size as i128;
        let far = d.abs() + len * ext.abs() + (t.lb as i128).abs();
        if far > MAX_BYTES || size > MAX_BYTES {
            return Err(MpiError::new(
                Class::Count,
                format!("{name} spans more than 2^60 bytes"),
            ));
        }
        Ok(())
    };
    if let Some((count, stride, len, old)) = strided(e) {
        // One block's runs, and the last block's reach.
        check(0, len, old)?;
        check((count as i128 - 1) * stride as i128, len, old)?;
        size = size / 2 * count as i128;
        runs /= 2;
        if size > MAX_BYTES {
            return Err(MpiError::new(
                Class::Count,
                format!("{name} holds more than 2^60 bytes"),
            ));
        }
    } else {
        let b = blocks(e);
        if b > MAX_RUNS {
            return Err(too_many("blocks", b));
        }
        for (d, len, t) in placements(e) {
            check(d as i128, len, t)?;
        }
    }
    if runs > MAX_RUNS {
        return Err(too_many("runs", runs));
    }
    Ok(())
}

/// What blocks of old types compile to, before the constructor's own bounds.
struct Parts {
    runs: Vec<(isize, usize)>,
    /// lb, ub; the explicit (sticky) ones; the true ones (None: no element
    /// gave any; lb may exceed ub with negative extents).
    bounds: [Option<(isize, isize)>; 3],
    align: usize,
    size: usize,
    basics: usize,
    explicit: bool,
    overlaps: bool,
}

/// A dup's or a resize's parts: the old type's own (the constructor sets the
/// bounds afterwards).
fn inherit(o: &TypeInfo) -> Parts {
    let bounds = (o.lb, o.lb + o.extent);
    Parts {
        runs: o.runs.clone(),
        bounds: [
            Some(bounds),
            o.explicit_bounds.then_some(bounds),
            (o.size > 0).then_some((o.true_lb, o.true_lb + o.true_extent)),
        ],
        align: o.align,
        size: o.size,
        basics: o.basics,
        explicit: o.explicit_bounds,
        overlaps: o.overlaps,
    }
}

fn compile(placed: &Placed<'_>) -> Parts {
    let mut runs = Vec::new();
    let widen = |b: &mut Option<(isize, isize)>, lo: isize, hi: isize| {
        *b = Some(b.map_or((lo, hi), |(l, h)| (l.min(lo), h.max(hi))));
    };
    let [mut b, mut x, mut tb] = [None; 3];
    let (mut align, mut size, mut basics) = (1, 0, 0);
    let (mut explicit, mut overlaps) = (false, false);
    for &(d, len, t) in placed {
        if len == 0 {
            continue;
        }
        if dense(t) {
            runs.push((d, len * t.size));
        } else {
            runs.extend(t.runs_of(len).map(|(o, l)| (o + d, l)));
        }
        // The first and the last element bound the block (extents may be negative).
        let last = d + (len as isize - 1) * t.extent;
        let (lo, hi) = (d.min(last), d.max(last));
        // lb and ub each over the elements (with a negative extent, ub < lb).
        let (l0, l1) = (d + t.lb, last + t.lb);
        let (u0, u1) = (l0 + t.extent, l1 + t.extent);
        widen(&mut b, l0.min(l1), u0.max(u1));
        if t.explicit_bounds {
            explicit = true;
            widen(&mut x, l0.min(l1), u0.max(u1));
        }
        if t.size > 0 {
            widen(&mut tb, lo + t.true_lb, hi + t.true_lb + t.true_extent);
        }
        align = align.max(t.align);
        size += len * t.size;
        basics += len * t.basics;
        overlaps |= t.overlaps;
    }
    let runs = merge(runs);
    overlaps = overlaps || overlapping(runs.clone());
    Parts {
        runs,
        bounds: [b, x, tb],
        align,
        size,
        basics,
        explicit,
        overlaps,
    }
}

/// Whether `count` copies of `runs`, `stride` bytes apart, share a byte: exact
/// when that is cheap, else only the copies the first one can reach are looked at
/// (and beyond a bound of work, none).
fn strided_overlap(runs: &[(isize, usize)], count: usize, stride: isize, span: isize) -> bool {
    let reach = if stride == 0 {
        count
    } else {
        (span.unsigned_abs() / stride.unsigned_abs() + 1).min(count)
    };
    if reach < 2 || reach.saturating_mul(runs.len()) > 1 << 20 {
        return stride == 0 && count > 1 && !runs.is_empty();
    }
    let all = (0..reach as isize)
        .flat_map(|k| runs.iter().map(move |&(o, l)| (o + k * stride, l)))
        .collect();
    overlapping(all)
}

/// Compiles an envelope into a type: runs, bounds, extent (MPI 3.1 §4.1.6-4.1.7,
/// as Open MPI computes them: explicit bounds are sticky, and otherwise the
/// extent is padded to the alignment of the largest basic type inside).
pub fn derive(name: String, e: Envelope) -> Result<TypeInfo, MpiError> {
    check_layout(&name, &e)?;
    if let [lb, extent] = e.aints[..] {
        if e.combiner == Combiner::Resized
            && (lb as i128).abs() + (extent as i128).abs() > MAX_BYTES
        {
            return Err(MpiError::new(
                Class::Arg,
                format!("{name}: bounds beyond 2^60 bytes"),
            ));
        }
    }
    let same = matches!(e.combiner, Combiner::Dup | Combiner::Resized);
    let (mut p, reps, rep_stride) = match (strided(&e), e.types.first()) {
        // A dup or a resize keeps the old type's data as it is compiled (a
        // repeated block stays repeated, however many times).
        (_, Some(o)) if same => (inherit(o), o.reps, o.rep_stride),
        (Some((count, stride, len, old)), _) => {
            let mut p = compile(&vec![(0, len, old)]);
            let span = p.bounds[2].map_or(0, |(lo, hi)| hi - lo);
            let shift = (count as isize - 1) * stride;
            for (lo, hi) in p.bounds.iter_mut().flatten() {
                (*lo, *hi) = ((*lo).min(*lo + shift), (*hi).max(*hi + shift));
            }
            p.size *= count;
            p.basics *= count;
            match p.runs[..] {
                // Blocks that follow each other make one run.
                [(o, l)] if stride == l as isize => {
                    p.runs = vec![(o, l * count)];
                    (p, 1, 0)
                }
                _ => {
                    p.overlaps = p.overlaps || strided_overlap(&p.runs, count, stride, span);
                    (p, count, stride)
                }
            }
        }
        _ => (compile(&placements(&e)), 1, 0),
    };
    let mut explicit = p.explicit;
    let (mut lb, ub) = match p.bounds {
        [_, Some(x), _] if explicit => x,
        [Some(b), _, _] => b,
        _ => (0, 0),
    };
    let (tlb, tub) = p.bounds[2].unwrap_or((0, 0));
    let mut extent = ub - lb;
    if !explicit {
        let a = p.align as isize;
        extent = (extent + a - 1).div_euclid(a) * a;
    }
    let old = e.types.first().cloned();
    match (e.combiner, &old) {
        (Combiner::Resized, _) => {
            (lb, extent, explicit) = (e.aints[0], e.aints[1], true);
        }
        (Combiner::Subarray | Combiner::Darray, Some(o)) => {
            let dims: &[i32] = if e.combiner == Combiner::Subarray {
                &e.ints[1..1 + e.ints[0] as usize]
            } else {
                &e.ints[3..3 + e.ints[2] as usize]
            };
            let n: isize = dims.iter().map(|&g| g as isize).product();
            (lb, extent, explicit) = (0, n * o.extent, true);
        }
        (Combiner::Dup, Some(o)) => {
            (lb, extent, explicit) = (o.lb, o.extent, o.explicit_bounds);
        }
        _ => {}
    }
    // MPI 3.1 §5.9.2: the predefined operations apply to predefined types only
    // (Open MPI refuses them on a dup of MPI_INT too).
    let kind = Kind::Opaque;
    Ok(TypeInfo {
        name,
        size: p.size,
        lb,
        extent,
        true_lb: tlb,
        true_extent: tub - tlb,
        runs: std::mem::take(&mut p.runs),
        reps,
        rep_stride,
        align: p.align,
        explicit_bounds: explicit,
        overlaps: p.overlaps,
        basics: p.basics,
        kind,
        committed: e.combiner == Combiner::Dup && old.as_ref().is_some_and(|o| o.committed),
        handle: 0,
        envelope: e,
    })
}

fn counts(what: &str, v: &[i32]) -> Result<(), MpiError> {
    v.iter().try_for_each(|&n| count_arg(what, n).map(|_| ()))
}

/// `MPI_Type_contiguous`.
pub fn contiguous(count: i32, old: &Arc<TypeInfo>) -> Result<TypeInfo, MpiError> {
    let n = count_arg("count", count)?;
    let e = env(Combiner::Contiguous, vec![count], vec![], vec![old.clone()]);
    derive(format!("contiguous({n}, {})", old.name), e)
}

/// `MPI_Type_vector`: `count` blocks of `blocklength` elements, `stride` elements apart.
pub fn vector(
    count: i32,
    blocklength: i32,
    stride: i32,
    old: &Arc<TypeInfo>,
) -> Result<TypeInfo, MpiError> {
    let n = count_arg("count", count)?;
    let b = count_arg("blocklength", blocklength)?;
    let e = env(
        Combiner::Vector,
        vec![count, blocklength, stride],
        vec![],
        vec![old.clone()],
    );
    derive(format!("vector({n}, {b}, {stride}, {})", old.name), e)
}

/// `MPI_Type_create_hvector`: the stride in bytes.
pub fn hvector(
    count: i32,
    blocklength: i32,
    stride: isize,
    old: &Arc<TypeInfo>,
) -> Result<TypeInfo, MpiError> {
    let n = count_arg("count", count)?;
    let b = count_arg("blocklength", blocklength)?;
    let e = env(
        Combiner::Hvector,
        vec![count, blocklength],
        vec![stride],
        vec![old.clone()],
    );
    derive(format!("hvector({n}, {b}, {stride}, {})", old.name), e)
}

/// `MPI_Type_indexed`: displacements in extents of `old`.
pub fn indexed(lens: &[i32], disps: &[i32], old: &Arc<TypeInfo>) -> Result<TypeInfo, MpiError> {
    counts("block length", lens)?;
    let mut ints = vec![lens.len() as i32];
    ints.extend_from_slice(lens);
    ints.extend_from_slice(disps);
    let e = env(Combiner::Indexed, ints, vec![], vec![old.clone()]);
    derive(format!("indexed({} blocks, {})", lens.len(), old.name), e)
}

/// `MPI_Type_create_hindexed`: displacements in bytes.
pub fn hindexed(lens: &[i32], disps: &[isize], old: &Arc<TypeInfo>) -> Result<TypeInfo, MpiError> {
    counts("block length", lens)?;
    let mut ints = vec![lens.len() as i32];
    ints.extend_from_slice(lens);
    let e = env(Combiner::Hindexed, ints, disps.to_vec(), vec![old.clone()]);
    derive(format!("hindexed({} blocks, {})", lens.len(), old.name), e)
}

/// `MPI_Type_create_indexed_block`.
pub fn indexed_block(len: i32, disps: &[i32], old: &Arc<TypeInfo>) -> Result<TypeInfo, MpiError> {
    count_arg("block length", len)?;
    let mut ints = vec![disps.len() as i32, len];
    ints.extend_from_slice(disps);
    let e = env(Combiner::IndexedBlock, ints, vec![], vec![old.clone()]);
    derive(
        format!("indexed_block({} blocks, {})", disps.len(), old.name),
        e,
    )
}

/// `MPI_Type_create_hindexed_block`.
pub fn hindexed_block(
    len: i32,
    disps: &[isize],
    old: &Arc<TypeInfo>,
) -> Result<TypeInfo, MpiError> {
    count_arg("block length", len)?;
    let ints = vec![disps.len() as i32, len];
    let e = env(
        Combiner::HindexedBlock,
        ints,
        disps.to_vec(),
        vec![old.clone()],
    );
    derive(
        format!("hindexed_block({} blocks, {})", disps.len(), old.name),
        e,
    )
}

/// `MPI_Type_create_struct`.
pub fn create_struct(blocks: &[(i32, isize, Arc<TypeInfo>)]) -> Result<TypeInfo, MpiError> {
    let mut ints = vec![blocks.len() as i32];
    ints.extend(blocks.iter().map(|b| b.0));
    counts("block length", &ints[1..])?;
    let e = env(
        Combiner::Struct,
        ints,
        blocks.iter().map(|b| b.1).collect(),
        blocks.iter().map(|b| b.2.clone()).collect(),
    );
    derive(format!("struct of {} blocks", blocks.len()), e)
}

/// `MPI_Type_create_resized`.
pub fn resized(old: &Arc<TypeInfo>, lb: isize, extent: isize) -> Result<TypeInfo, MpiError> {
    let e = env(
        Combiner::Resized,
        vec![],
        vec![lb, extent],
        vec![old.clone()],
    );
    derive(format!("resized({}, {lb}, {extent})", old.name), e)
}

/// `MPI_Type_dup`.
pub fn dup(old: &Arc<TypeInfo>) -> Result<TypeInfo, MpiError> {
    let e = env(Combiner::Dup, vec![], vec![], vec![old.clone()]);
    derive(format!("dup({})", old.name), e)
}

fn order_arg(order: i32) -> Result<(), MpiError> {
    if order == ORDER_C || order == ORDER_FORTRAN {
        Ok(())
    } else {
        Err(arg(format!(
            "order {order} is neither MPI_ORDER_C nor MPI_ORDER_FORTRAN"
        )))
    }
}

/// `MPI_Type_create_subarray`.
pub fn subarray(
    sizes: &[i32],
    subsizes: &[i32],
    starts: &[i32],
    order: i32,
    old: &Arc<TypeInfo>,
) -> Result<TypeInfo, MpiError> {
    let n = sizes.len();
    if n == 0 {
        return Err(arg("a subarray needs at least one dimension".into()));
    }
    order_arg(order)?;
    for d in 0..n {
        let (s, b, a) = (sizes[d], subsizes[d], starts[d]);
        if s < 1 || b < 1 || b > s || a < 0 || a > s - b {
            return Err(arg(format!(
                "dimension {d}: size {s}, subsize {b}, start {a} do not make a subarray"
            )));
        }
    }
    check_array(sizes, old)?;
    let mut ints = vec![n as i32];
    ints.extend_from_slice(sizes);
    ints.extend_from_slice(subsizes);
    ints.extend_from_slice(starts);
    ints.push(order);
    let e = env(Combiner::Subarray, ints, vec![], vec![old.clone()]);
    derive(format!("subarray({n} dims, {})", old.name), e)
}

/// `MPI_Type_create_darray`.
#[allow(clippy::too_many_arguments)]
pub fn darray(
    size: i32,
    rank: i32,
    gsizes: &[i32],
    distribs: &[i32],
    dargs: &[i32],
    psizes: &[i32],
    order: i32,
    old: &Arc<TypeInfo>,
) -> Result<TypeInfo, MpiError> {
    let n = gsizes.len();
    order_arg(order)?;
    if n == 0 {
        return Err(arg("a darray needs at least one dimension".into()));
    }
    if rank < 0 || rank >= size {
        return Err(MpiError::new(
            Class::Rank,
            format!("rank {rank} is not in a group of {size}"),
        ));
    }
    let procs: i64 = psizes.iter().map(|&p| i64::from(p)).product();
    if psizes.iter().any(|&p| p < 1) || procs != i64::from(size) {
        return Err(arg(format!(
            "the process grid {psizes:?} does not hold {size} processes"
        )));
    }
    for d in 0..n {
        let (g, p, a) = (gsizes[d], psizes[d], dargs[d]);
        if g < 1 {
            return Err(arg(format!("dimension {d}: size {g}")));
        }
        let ok = match distribs[d] {
            DISTRIBUTE_NONE => p == 1,
            DISTRIBUTE_BLOCK => {
                a == DISTRIBUTE_DFLT_DARG || (a >= 1 && i64::from(a) * i64::from(p) >= i64::from(g))
            }
            DISTRIBUTE_CYCLIC => {
                let k = if a == DISTRIBUTE_DFLT_DARG { 1 } else { a };
                if k >= 1 && p > 1 && i128::from(g) / (i128::from(k) * i128::from(p)) > MAX_RUNS {
                    return Err(MpiError::new(
                        Class::NoMem,
                        format!(
                            "dimension {d}: cyclic({k}) over {p} processes makes too many blocks"
                        ),
                    ));
                }
                k >= 1
            }
            _ => false,
        };
        if !ok {
            return Err(arg(format!(
                "dimension {d}: distribution {}, argument {a}, {p} processes for {g} elements",
                distribs[d]
            )));
        }
    }
    check_array(gsizes, old)?;
    let mut ints = vec![size, rank, n as i32];
    for v in [gsizes, distribs, dargs, psizes] {
        ints.extend_from_slice(v);
    }
    ints.push(order);
    let e = env(Combiner::Darray, ints, vec![], vec![old.clone()]);
    derive(format!("darray({n} dims, rank {rank}, {})", old.name), e)
}

#[cfg(test)]
mod tests {
    use super::super::predefined;
    use super::*;
    use proptest::prelude::*;

    fn t(h: i32) -> Arc<TypeInfo> {
        Arc::new(predefined(h).expect("predefined"))
    }

    const INT: i32 = 7;
    const CHAR: i32 = 1;
    const DOUBLE: i32 = 14;

    /// (size, lb, extent, true lb, true extent).
    fn bounds(t: &TypeInfo) -> (usize, isize, isize, isize, isize) {
        (t.size, t.lb, t.extent, t.true_lb, t.true_extent)
    }

    fn st(blocks: &[(i32, isize, Arc<TypeInfo>)]) -> Arc<TypeInfo> {
        Arc::new(create_struct(blocks).expect("struct"))
    }

    /// The figures Open MPI 4.1 gives for the same constructions.
    #[test]
    fn extents_follow_open_mpi() {
        let (int, ch, dbl) = (t(INT), t(CHAR), t(DOUBLE));
        let s = st(&[(1, 0, dbl.clone()), (1, 8, ch.clone())]);
        assert_eq!(bounds(&s), (9, 0, 16, 0, 9));
        let s = st(&[(1, 0, int.clone()), (1, 2, int.clone())]);
        assert_eq!(bounds(&s), (8, 0, 8, 0, 6));
        assert!(s.overlaps);
        let h = hindexed(&[1, 1], &[0, 2], &int).expect("hindexed");
        assert_eq!(bounds(&h), (8, 0, 8, 0, 6));
        let r3 = Arc::new(resized(&int, 0, 3).expect("resized"));
        assert_eq!(bounds(&r3), (4, 0, 3, 0, 4));
        let c = contiguous(2, &r3).expect("contiguous");
        assert_eq!(bounds(&c), (8, 0, 6, 0, 7));
        assert!(c.overlaps && c.check_recv(1).is_err());
        assert!(r3.check_recv(1).is_ok());
        assert!(r3.check_recv(2).is_err(), "elements 3 bytes apart overlap");
        let s = st(&[(1, 0, r3.clone()), (1, 3, ch.clone())]);
        assert_eq!(bounds(&s), (5, 0, 3, 0, 4));
        // Sticky bounds: the double beyond the resized type's bound is ignored.
        let s = st(&[(1, 0, r3.clone()), (1, 8, dbl.clone())]);
        assert_eq!(bounds(&s), (12, 0, 3, 0, 16));
        let s = st(&[(1, 0, ch.clone()), (1, 9, ch.clone())]);
        assert_eq!(bounds(&s), (2, 0, 10, 0, 10));
        let s = st(&[(1, 0, t(15)), (1, 16, ch.clone())]);
        assert_eq!(bounds(&s), (17, 0, 32, 0, 17));
        let v = Arc::new(vector(2, 1, 2, &int).expect("vector"));
        let s = st(&[(1, 0, v), (1, 12, ch.clone())]);
        assert_eq!(bounds(&s), (9, 0, 16, 0, 13));
        assert_eq!(
            bounds(&resized(&int, -4, 16).expect("resized")),
            (4, -4, 16, 0, 4)
        );
        assert_eq!(
            bounds(&vector(3, 1, -2, &int).expect("vector")),
            (12, -16, 20, -16, 20)
        );
        assert_eq!(
            bounds(&hvector(2, 1, -10, &dbl).expect("hvector")),
            (16, -10, 24, -10, 18)
        );
        let s = st(&[(1, 0, int.clone()), (1, 4, t(27))]);
        assert_eq!(bounds(&s), (16, 0, 24, 0, 16));
        assert_eq!(bounds(&t(30)), (6, 0, 8, 0, 8));
        let sub = subarray(&[4, 5], &[2, 3], &[1, 1], ORDER_C, &int).expect("subarray");
        assert_eq!(bounds(&sub), (24, 0, 80, 24, 32));
        let d = darray(
            4,
            3,
            &[5, 7],
            &[DISTRIBUTE_BLOCK, DISTRIBUTE_CYCLIC],
            &[DISTRIBUTE_DFLT_DARG, 2],
            &[2, 2],
            ORDER_C,
            &int,
        )
        .expect("darray");
        assert_eq!(bounds(&d), (24, 0, 140, 92, 48));
        assert_eq!(d.envelope.ints.len(), 12);
    }

    #[test]
    fn darray_blocks_and_cycles_cover_the_array_once() {
        // 5 x 7 ints over a 2 x 2 grid: block rows, cyclic(2) columns.
        let mut seen = vec![0; 35];
        for r in 0..4 {
            let d = darray(
                4,
                r,
                &[5, 7],
                &[DISTRIBUTE_BLOCK, DISTRIBUTE_CYCLIC],
                &[DISTRIBUTE_DFLT_DARG, 2],
                &[2, 2],
                ORDER_C,
                &t(INT),
            )
            .expect("darray");
            for (off, _, _) in d.type_map() {
                seen[off as usize / 4] += 1;
            }
        }
        assert_eq!(seen, vec![1; 35]);
        // Rank 1 (row 0, column 1): rows 0-2, columns 2, 3 and 6.
        let d = darray(
            4,
            1,
            &[5, 7],
            &[DISTRIBUTE_BLOCK, DISTRIBUTE_CYCLIC],
            &[DISTRIBUTE_DFLT_DARG, 2],
            &[2, 2],
            ORDER_C,
            &t(INT),
        )
        .expect("darray");
        let at: Vec<isize> = d.type_map().iter().map(|e| e.0 / 4).collect();
        assert_eq!(at, vec![2, 3, 6, 9, 10, 13, 16, 17, 20]);
        let f = subarray(&[4, 5], &[2, 3], &[1, 1], ORDER_FORTRAN, &t(INT)).expect("f");
        let at: Vec<isize> = f.type_map().iter().map(|e| e.0 / 4).collect();
        assert_eq!(at, vec![5, 6, 9, 10, 13, 14]);
    }

    #[test]
    fn bad_arguments_get_the_standard_classes() {
        let int = t(INT);
        assert_eq!(
            contiguous(-1, &int).map(|_| ()).unwrap_err().class,
            Class::Count
        );
        let e = subarray(&[4], &[5], &[0], ORDER_C, &int).unwrap_err();
        assert_eq!(e.class, Class::Arg);
        let e = darray(
            4,
            4,
            &[8],
            &[DISTRIBUTE_BLOCK],
            &[DISTRIBUTE_DFLT_DARG],
            &[4],
            ORDER_C,
            &int,
        )
        .unwrap_err();
        assert_eq!(e.class, Class::Rank);
        let e = darray(4, 0, &[8], &[DISTRIBUTE_BLOCK], &[1], &[4], ORDER_C, &int).unwrap_err();
        assert_eq!(e.class, Class::Arg);
        let huge = contiguous(1 << 30, &int).expect("big");
        assert_eq!(huge.runs, vec![(0, 4 << 30)]);
        assert_eq!(huge.check_count(1 << 40).unwrap_err().class, Class::Count);
    }

    #[test]
    fn big_subarrays_compile_to_one_run_per_row() {
        let s = subarray(
            &[100, 1000, 1000],
            &[50, 500, 500],
            &[10, 20, 30],
            ORDER_C,
            &t(DOUBLE),
        )
        .expect("subarray");
        assert_eq!(s.runs.len(), 50 * 500);
        assert_eq!(s.runs[0], ((10 * 1_000_000 + 20 * 1000 + 30) * 8, 500 * 8));
        assert_eq!(s.size, 50 * 500 * 500 * 8);
        assert_eq!(s.extent, 100 * 1000 * 1000 * 8);
    }

    #[test]
    fn huge_layouts_are_refused_not_allocated() {
        let (int, ch) = (t(INT), t(CHAR));
        // A vector keeps one block and a repeat count, whatever its count...
        let v = vector(i32::MAX, 1, 2, &int).expect("vector");
        assert_eq!(
            (v.runs.len(), v.reps, v.rep_stride),
            (1, i32::MAX as usize, 8)
        );
        assert_eq!(v.size, 4 * i32::MAX as usize);
        assert!(!v.overlaps && v.check_recv(1).is_ok());
        // ... but a contiguous type of vectors lists every run.
        let v2 = Arc::new(vector(2, 1, 2, &int).expect("vector"));
        assert_eq!(contiguous(1 << 27, &v2).unwrap_err().class, Class::NoMem);
        let g = Arc::new(contiguous(1 << 30, &int).expect("4 GiB"));
        let g = Arc::new(contiguous(1 << 28, &g).expect("2^60 bytes"));
        assert_eq!(contiguous(4, &g).unwrap_err().class, Class::Count);
        assert_eq!(g.check_count(8).unwrap_err().class, Class::Count);
        assert_eq!(
            hvector(2, 1, isize::MAX / 2, &int).unwrap_err().class,
            Class::Count
        );
        assert_eq!(resized(&int, isize::MAX, 1).unwrap_err().class, Class::Arg);
        // Big but plain: one block, not billions of indices.
        let s = subarray(&[i32::MAX], &[i32::MAX - 1], &[1], ORDER_C, &ch).expect("subarray");
        assert_eq!(s.runs, vec![(1, i32::MAX as usize - 1)]);
        let d = darray(
            1,
            0,
            &[i32::MAX],
            &[DISTRIBUTE_CYCLIC],
            &[1],
            &[1],
            ORDER_C,
            &ch,
        );
        assert_eq!(d.expect("darray").runs.len(), 1);
        let d = darray(
            2,
            0,
            &[i32::MAX],
            &[DISTRIBUTE_CYCLIC],
            &[1],
            &[2],
            ORDER_C,
            &ch,
        );
        assert_eq!(d.unwrap_err().class, Class::NoMem);
        let big = [i32::MAX; 3];
        let e = subarray(&big, &[1, 1, 1], &[0, 0, 0], ORDER_C, &ch).unwrap_err();
        assert_eq!(e.class, Class::Count);
        // Strides in extents reach 2^65 bytes: refused, without an i32 overflow.
        let e = vector(3, 1, i32::MAX, &Arc::new(v)).unwrap_err();
        assert_eq!(e.class, Class::Count);
    }

    #[test]
    fn empty_blocks_and_resized_repeats_take_no_room() {
        let int = t(INT);
        // MPICH's indexed_misc: empty blocks at the far end of the address space
        // are no part of the type (neither its bounds nor a count error).
        let far = isize::MAX;
        let h = hindexed(&[0, 4, 0], &[far, 8, far], &int).expect("hindexed");
        assert_eq!((h.lb, h.extent, h.size), (8, 16, 16));
        assert_eq!(h.runs, vec![(8, 16)]);
        let s = create_struct(&[(1, 0, Arc::new(h)), (1, 32, int.clone())]).expect("struct");
        assert_eq!(
            (s.lb, s.size, s.runs.clone()),
            (8, 20, vec![(8, 16), (32, 4)])
        );
        // MPICH's large_count: a resize of a vector of 2^30 blocks keeps one block
        // and a repeat count instead of listing a run per block.
        let c = Arc::new(contiguous(4, &int).expect("contiguous"));
        let v = Arc::new(vector((1 << 30) - 1, 1, 3, &c).expect("vector"));
        let r = resized(&v, -1024, i32::MAX as isize).expect("resized");
        assert_eq!(
            (r.runs.len(), r.reps, r.rep_stride),
            (1, v.reps, v.rep_stride)
        );
        assert_eq!((r.size, r.lb, r.extent), (v.size, -1024, i32::MAX as isize));
        let d = dup(&Arc::new(r)).expect("dup");
        assert_eq!((d.reps, d.size, d.lb), (v.reps, v.size, -1024));
    }

    #[test]
    fn elements_count_basic_elements_and_refuse_partial_ones() {
        let s = st(&[(2, 0, t(INT)), (1, 8, t(DOUBLE))]);
        assert_eq!(s.basics, 3);
        assert_eq!(s.elements(32), Some(6));
        assert_eq!(s.elements(16 + 4), Some(4));
        assert_eq!(s.elements(16 + 6), None);
        assert_eq!(t(27).elements(24), Some(4));
        // MPI_Status_set_elements goes the other way: elements to bytes.
        for n in 0..10 {
            let b = s.bytes_of_elements(n).expect("bytes");
            assert_eq!(s.elements(b), Some(n), "{n} elements are {b} bytes");
        }
        assert_eq!(s.bytes_of_elements(4), Some(20));
        let v = vector(1 << 20, 2, 3, &t(INT)).expect("vector");
        assert_eq!(v.bytes_of_elements(5), Some(20));
        assert_eq!(v.bytes_of_elements(2 << 20), Some(v.size));
    }

    #[test]
    fn external32_is_big_endian_per_basic_element() {
        let s = st(&[(1, 0, t(INT)), (1, 4, t(5))]);
        let mut p = vec![1, 0, 0, 0, 2, 0];
        s.swap_external32(&mut p);
        assert_eq!(p, vec![0, 0, 0, 1, 0, 2]);
    }

    /// A random type: a predefined leaf or a constructor over random types.
    fn arb_type() -> impl Strategy<Value = Arc<TypeInfo>> {
        let leaf = prop::sample::select(vec![1, 5, 7, 14, 27, 30]).prop_map(t);
        leaf.prop_recursive(3, 24, 3, |inner| {
            prop_oneof![
                (0..4i32, inner.clone())
                    .prop_map(|(n, o)| Arc::new(contiguous(n, &o).expect("contiguous"))),
                (0..4i32, 0..3i32, -3..5i32, inner.clone())
                    .prop_map(|(n, b, s, o)| Arc::new(vector(n, b, s, &o).expect("vector"))),
                (0..4i32, 0..3i32, -40..60isize, inner.clone())
                    .prop_map(|(n, b, s, o)| { Arc::new(hvector(n, b, s, &o).expect("hvector")) }),
                (
                    prop::collection::vec((0..3i32, -4..6i32), 0..4),
                    inner.clone()
                )
                    .prop_map(|(bl, o)| {
                        let (l, d): (Vec<i32>, Vec<i32>) = bl.into_iter().unzip();
                        Arc::new(indexed(&l, &d, &o).expect("indexed"))
                    }),
                (
                    0..3i32,
                    prop::collection::vec(-30..50isize, 0..4),
                    inner.clone()
                )
                    .prop_map(|(b, d, o)| Arc::new(
                        hindexed_block(b, &d, &o).expect("hindexed_block")
                    )),
                prop::collection::vec((0..3i32, -30..50isize, inner.clone()), 1..4)
                    .prop_map(|b| Arc::new(create_struct(&b).expect("struct"))),
                (-8..8isize, -40..40isize, inner.clone())
                    .prop_map(|(lb, e, o)| Arc::new(resized(&o, lb, e).expect("resized"))),
                inner.clone().prop_map(|o| Arc::new(dup(&o).expect("dup"))),
                (1..4i32, 1..4i32, inner).prop_map(|(a, b, o)| Arc::new(
                    subarray(&[a + 1, b + 1], &[a, b], &[1, 0], ORDER_C, &o).expect("subarray")
                )),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]

        /// The compiled runs pack and unpack exactly what the type map, expanded
        /// down to every basic element and copied byte by byte, says.
        #[test]
        fn runs_pack_as_the_type_map_says(ty in arb_type(), count in 0..4usize) {
            let map = ty.type_map();
            prop_assert_eq!(map.len(), ty.basics);
            prop_assert_eq!(map.iter().map(|e| e.1).sum::<usize>(), ty.size);
            if ty.size > 0 {
                let lo = map.iter().map(|e| e.0).min().unwrap_or(0);
                let hi = map.iter().map(|e| e.0 + e.1 as isize).max().unwrap_or(0);
                prop_assert_eq!((ty.true_lb, ty.true_extent), (lo, hi - lo));
            }
            // A buffer whose byte i holds i (mod 251), the origin in its middle.
            const ORIGIN: isize = 1 << 15;
            let buf: Vec<u8> = (0..1usize << 16).map(|i| (i % 251) as u8).collect();
            let mut want = Vec::new();
            for i in 0..count as isize {
                for &(o, s, _) in &map {
                    let at = (ORIGIN + i * ty.extent + o) as usize;
                    want.extend_from_slice(&buf[at..at + s]);
                }
            }
            let (first, len) = ty.span(count);
            let from = (ORIGIN + first) as usize;
            let got = ty.pack(&buf[from..from + len], count);
            prop_assert_eq!(&got, &want);
            // MPI_Get_elements and external32 follow the type map too.
            for bytes in [got.len(), got.len().saturating_sub(1), got.len() / 2] {
                let mut rest = bytes;
                let mut n = 0;
                'map: for _ in 0..count {
                    for &(_, s, _) in &map {
                        if rest < s || rest == 0 {
                            break 'map;
                        }
                        rest -= s;
                        n += 1;
                    }
                }
                let want = (rest == 0).then_some(n);
                prop_assert_eq!(ty.elements(bytes), want, "{} bytes", bytes);
            }
            let mut swapped = got.clone();
            ty.swap_external32(&mut swapped);
            let mut by_hand = got.clone();
            let mut at = 0;
            for _ in 0..count {
                for &(_, s, u) in &map {
                    for chunk in by_hand[at..at + s].chunks_exact_mut(u) {
                        chunk.reverse();
                    }
                    at += s;
                }
            }
            prop_assert_eq!(swapped, by_hand);
            // The overlap check is exact at these sizes: two basic elements of the
            // count elements share a byte.
            let ext = ty.extent;
            let mut bytes: Vec<(isize, usize)> = (0..count as isize)
                .flat_map(|i| map.iter().map(move |&(o, s, _)| (i * ext + o, s)))
                .filter(|b| b.1 > 0)
                .collect();
            bytes.sort_unstable();
            let shared = bytes.windows(2).any(|w| w[0].0 + w[0].1 as isize > w[1].0);
            prop_assert_eq!(ty.check_recv(count).is_err(), shared);
            if !shared {
                // Unpacking into a zeroed buffer writes back exactly the mapped bytes.
                let mut out = vec![0u8; len];
                prop_assert_eq!(ty.unpack(&got, &mut out, count), got.len());
                let mut expect = vec![0u8; len];
                for i in 0..count as isize {
                    for &(o, s, _) in &map {
                        let at = (i * ty.extent + o - first) as usize;
                        expect[at..at + s].copy_from_slice(&buf[from + at..from + at + s]);
                    }
                }
                prop_assert_eq!(out, expect);
            }
        }
    }
}
