//! Group arithmetic (MPI 3.1 §6.3): groups are ordered lists of distinct job ranks,
//! and every operation here is pure set logic over them, so that `ffi` only turns
//! C arrays into slices and handles into lists.

use crate::error::{Class, MpiError};
use crate::state::{PROC_NULL, UNDEFINED};

/// `MPI_IDENT`.
pub const IDENT: i32 = 0;
/// `MPI_SIMILAR`.
pub const SIMILAR: i32 = 2;
/// `MPI_UNEQUAL`.
pub const UNEQUAL: i32 = 3;

/// Checks the ranks of `MPI_Group_incl`/`excl` in a group of `n`: each in `0..n`,
/// none repeated.
pub fn ranks(rs: &[i32], n: usize) -> Result<Vec<usize>, MpiError> {
    let mut seen = vec![false; n];
    rs.iter()
        .map(|&r| match usize::try_from(r) {
            Ok(i) if i < n && !seen[i] => {
                seen[i] = true;
                Ok(i)
            }
            _ => Err(MpiError::new(
                Class::Rank,
                format!("rank {r} is not in the group (size {n}) or repeated"),
            )),
        })
        .collect()
}

/// The ranks a list of `(first, last, stride)` triples names in a group of `n`, in
/// order (`MPI_Group_range_incl`/`excl`): each rank valid, none named twice.
pub fn ranges(triples: &[[i32; 3]], n: usize) -> Result<Vec<usize>, MpiError> {
    let mut seen = vec![false; n];
    let mut out = Vec::new();
    let bad = |r: i64| {
        MpiError::new(
            Class::Rank,
            format!("rank {r} is not in the group (size {n}) or named twice"),
        )
    };
    for &[first, last, stride] in triples {
        if stride == 0 {
            return Err(MpiError::new(
                Class::Arg,
                format!("the range ({first}, {last}, {stride}) has stride 0"),
            ));
        }
        if (stride > 0 && first > last) || (stride < 0 && first < last) {
            return Err(MpiError::new(
                Class::Rank,
                format!("the range ({first}, {last}, {stride}) never reaches its last rank"),
            ));
        }
        let (mut r, last, stride) = (i64::from(first), i64::from(last), i64::from(stride));
        while (stride > 0 && r <= last) || (stride < 0 && r >= last) {
            let i = usize::try_from(r)
                .ok()
                .filter(|&i| i < n && !seen[i])
                .ok_or_else(|| bad(r))?;
            seen[i] = true;
            out.push(i);
            r += stride;
        }
    }
    Ok(out)
}

/// The members of `g` at positions `picked`, in that order.
pub fn incl(g: &[u32], picked: &[usize]) -> Vec<u32> {
    picked.iter().map(|&i| g[i]).collect()
}

/// The members of `g` but those at positions `picked`, in `g`'s order.
pub fn excl(g: &[u32], picked: &[usize]) -> Vec<u32> {
    g.iter()
        .enumerate()
        .filter(|(i, _)| !picked.contains(i))
        .map(|(_, &x)| x)
        .collect()
}

/// `MPI_Group_union`: `a`'s members, then `b`'s that are not in `a`.
pub fn union(a: &[u32], b: &[u32]) -> Vec<u32> {
    let mut out = a.to_vec();
    out.extend(b.iter().filter(|x| !a.contains(x)));
    out
}

/// `MPI_Group_intersection`: `a`'s members that are in `b`, in `a`'s order.
pub fn intersection(a: &[u32], b: &[u32]) -> Vec<u32> {
    a.iter().copied().filter(|x| b.contains(x)).collect()
}

/// `MPI_Group_difference`: `a`'s members that are not in `b`, in `a`'s order.
pub fn difference(a: &[u32], b: &[u32]) -> Vec<u32> {
    a.iter().copied().filter(|x| !b.contains(x)).collect()
}

/// `MPI_Group_translate_ranks`: each rank of `a` as a rank of `b`
/// (`MPI_UNDEFINED` if that process is not in `b`; `MPI_PROC_NULL` stays).
pub fn translate(a: &[u32], ranks: &[i32], b: &[u32]) -> Result<Vec<i32>, MpiError> {
    ranks
        .iter()
        .map(|&r| {
            if r == PROC_NULL {
                return Ok(PROC_NULL);
            }
            let x = usize::try_from(r)
                .ok()
                .and_then(|i| a.get(i))
                .ok_or_else(|| {
                    MpiError::new(
                        Class::Rank,
                        format!("rank {r} is not in the first group (size {})", a.len()),
                    )
                })?;
            Ok(b.iter()
                .position(|y| y == x)
                .map_or(UNDEFINED, |p| p as i32))
        })
        .collect()
}

/// `MPI_Group_compare`: the same members in the same order are `MPI_IDENT`, in
/// another order `MPI_SIMILAR`, else `MPI_UNEQUAL`.
pub fn compare(a: &[u32], b: &[u32]) -> i32 {
    if a == b {
        return IDENT;
    }
    let (mut x, mut y) = (a.to_vec(), b.to_vec());
    x.sort_unstable();
    y.sort_unstable();
    if x == y {
        SIMILAR
    } else {
        UNEQUAL
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn ranges_follow_their_strides() {
        assert_eq!(ranges(&[[0, 6, 2]], 8).unwrap(), vec![0, 2, 4, 6]);
        assert_eq!(ranges(&[[7, 1, -3]], 8).unwrap(), vec![7, 4, 1]);
        assert_eq!(ranges(&[[1, 1, 5], [3, 4, 1]], 8).unwrap(), vec![1, 3, 4]);
        assert_eq!(ranges(&[[0, 5, 4]], 8).unwrap(), vec![0, 4]);
        assert_eq!(ranges(&[], 8).unwrap(), Vec::<usize>::new());
    }

    #[test]
    fn bad_ranges_are_refused_with_their_class() {
        let class = |t: &[[i32; 3]]| ranges(t, 4).map_err(|e| e.class);
        assert_eq!(class(&[[0, 3, 0]]), Err(Class::Arg));
        assert_eq!(class(&[[0, 4, 1]]), Err(Class::Rank));
        assert_eq!(class(&[[-1, 2, 1]]), Err(Class::Rank));
        assert_eq!(class(&[[0, 2, 1], [2, 3, 1]]), Err(Class::Rank));
        assert_eq!(class(&[[3, 1, 1]]), Err(Class::Rank));
        assert_eq!(class(&[[1, 3, -1]]), Err(Class::Rank));
    }

    #[test]
    fn listed_ranks_are_checked() {
        assert_eq!(ranks(&[2, 0], 3).unwrap(), vec![2, 0]);
        assert_eq!(ranks(&[3], 3).map_err(|e| e.class), Err(Class::Rank));
        assert_eq!(ranks(&[-1], 3).map_err(|e| e.class), Err(Class::Rank));
        assert_eq!(ranks(&[1, 1], 3).map_err(|e| e.class), Err(Class::Rank));
    }

    #[test]
    fn set_operations_keep_the_standards_order() {
        let (a, b) = ([5, 1, 3, 7], [3, 9, 5]);
        assert_eq!(union(&a, &b), vec![5, 1, 3, 7, 9]);
        assert_eq!(intersection(&a, &b), vec![5, 3]);
        assert_eq!(difference(&a, &b), vec![1, 7]);
        assert_eq!(difference(&b, &a), vec![9]);
        assert_eq!(incl(&a, &[3, 0]), vec![7, 5]);
        assert_eq!(excl(&a, &[3, 0]), vec![1, 3]);
    }

    #[test]
    fn translation_knows_undefined_and_proc_null() {
        let (a, b) = ([5, 1, 3], [3, 5]);
        assert_eq!(
            translate(&a, &[0, 1, 2, PROC_NULL], &b).unwrap(),
            vec![1, UNDEFINED, 0, PROC_NULL]
        );
        assert_eq!(
            translate(&a, &[3], &b).map_err(|e| e.class),
            Err(Class::Rank)
        );
    }

    #[test]
    fn compare_tells_ident_similar_unequal() {
        assert_eq!(compare(&[1, 2], &[1, 2]), IDENT);
        assert_eq!(compare(&[], &[]), IDENT);
        assert_eq!(compare(&[1, 2], &[2, 1]), SIMILAR);
        assert_eq!(compare(&[1, 2], &[1, 3]), UNEQUAL);
        assert_eq!(compare(&[1, 2], &[1]), UNEQUAL);
    }

    /// A group of distinct ranks, shuffled.
    fn group() -> impl Strategy<Value = Vec<u32>> {
        proptest::sample::subsequence((0u32..24).collect::<Vec<_>>(), 0..24).prop_shuffle()
    }

    proptest! {
        #[test]
        fn set_laws_hold(a in group(), b in group()) {
            let u = union(&a, &b);
            let i = intersection(&a, &b);
            let d = difference(&a, &b);
            // The union has no repeats and holds both groups.
            let mut s = u.clone();
            s.sort_unstable();
            s.dedup();
            prop_assert_eq!(s.len(), u.len());
            prop_assert!(a.iter().chain(&b).all(|x| u.contains(x)));
            // a splits into its intersection with b and its difference with b.
            prop_assert_eq!(i.len() + d.len(), a.len());
            prop_assert_eq!(compare(&union(&i, &d), &a) != UNEQUAL, true);
            // Translating a into the union finds every member.
            let all: Vec<i32> = (0..a.len() as i32).collect();
            let t = translate(&a, &all, &u).unwrap();
            prop_assert!(t.iter().zip(&a).all(|(&r, x)| u[r as usize] == *x));
        }

        #[test]
        fn a_range_with_stride_one_is_excl_of_the_rest(n in 1usize..20, lo in 0usize..20, len in 0usize..20) {
            let lo = lo % n;
            let hi = (lo + len).min(n - 1);
            let g: Vec<u32> = (0..n as u32).map(|x| x * 3).collect();
            let picked = ranges(&[[lo as i32, hi as i32, 1]], n).unwrap();
            let kept = excl(&g, &picked);
            prop_assert_eq!(kept.len() + picked.len(), n);
            prop_assert_eq!(union(&incl(&g, &picked), &kept).len(), n);
        }
    }
}
