//! C's `long double` for the predefined reductions: Rust has no such type (x86-64:
//! 80-bit extended precision stored in 16 bytes), so the arithmetic and comparisons
//! are done by a few lines of C (`csrc/longdouble.c`, built by `build.rs` with the
//! system's compiler), never through `f64`. Safe wrappers over packed bytes.
#![allow(unsafe_code)]

use std::cmp::Ordering;

/// Bytes of one `long double` (the layout `types` assumes for `MPI_LONG_DOUBLE`).
pub const SIZE: usize = 16;

extern "C" {
    fn qcg_ld_size() -> usize;
    fn qcg_ld_op(op: i32, a: *mut u8, b: *const u8, n: usize);
    fn qcg_ld_cmp(a: *const u8, b: *const u8) -> i32;
}

/// `sizeof(long double)` as the C compiler lays it out.
pub fn c_size() -> usize {
    // SAFETY: a C function without arguments returning a constant.
    unsafe { qcg_ld_size() }
}

/// `a[i] = a[i] op b[i]` over the packed long doubles of `a` and `b` (equal
/// lengths, whole elements); `op` is mpi.h's handle: 1 max, 2 min, 3 sum, 4 prod.
pub fn apply(op: i32, a: &mut [u8], b: &[u8]) {
    let n = a.len().min(b.len()) / SIZE;
    if n == 0 || c_size() != SIZE {
        return;
    }
    // SAFETY: both buffers hold `n` packed long doubles; the C side reads and
    // writes them with memcpy (no alignment needed) and stays inside them.
    unsafe { qcg_ld_op(op, a.as_mut_ptr(), b.as_ptr(), n) }
}

/// How two packed long doubles compare (`None`: one is a NaN).
pub fn compare(a: &[u8], b: &[u8]) -> Option<Ordering> {
    if a.len() < SIZE || b.len() < SIZE || c_size() != SIZE {
        return None;
    }
    // SAFETY: each buffer holds one long double, read by memcpy on the C side.
    match unsafe { qcg_ld_cmp(a.as_ptr(), b.as_ptr()) } {
        -1 => Some(Ordering::Less),
        0 => Some(Ordering::Equal),
        1 => Some(Ordering::Greater),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_c_compiler_lays_long_double_out_in_16_bytes() {
        assert_eq!(c_size(), SIZE);
    }
}
