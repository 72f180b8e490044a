//! The Fortran bindings' runtime: the sentinels of `mpif.h` (`MPI_BOTTOM`,
//! `MPI_IN_PLACE`, `MPI_STATUS_IGNORE`, `MPI_STATUSES_IGNORE`, in the common block
//! `/qcg_mpi_fortran/`), recognised by their address, and Fortran's blank-padded
//! strings. The `mpi_x_` functions themselves are generated from the API table
//! (`crate::api::fortran_rs`).
//!
//! Fortran passes every argument by reference, handles are the C handles (C ints
//! both), and `MPI_Status` is six default integers, the C struct's layout.
#![allow(unsafe_code)]
#![allow(clippy::missing_safety_doc)]
#![allow(non_upper_case_globals)]

use super::{MpiStatus, IN_PLACE, STATUS_IGNORE};
use libc::{c_char, c_int, c_void};
use std::ffi::CString;

/// The common block `/qcg_mpi_fortran/` of `mpif.h`, defined here so that every
/// Fortran program that includes `mpif.h` (or uses the `mpi` module) shares it.
#[repr(C)]
pub struct Sentinels {
    bottom: c_int,
    in_place: c_int,
    status_ignore: [c_int; 6],
    statuses_ignore: [c_int; 6],
}

/// gfortran's symbol for the common block.
#[no_mangle]
pub static mut qcg_mpi_fortran_: Sentinels = Sentinels {
    bottom: 0,
    in_place: 0,
    status_ignore: [0; 6],
    statuses_ignore: [0; 6],
};

fn sentinel(offset: usize) -> usize {
    std::ptr::addr_of!(qcg_mpi_fortran_) as usize + offset
}

/// A buffer argument: `MPI_BOTTOM` and `MPI_IN_PLACE` become C's.
pub(crate) fn fbuf(p: *const c_void) -> *const c_void {
    let a = p as usize;
    if a == sentinel(std::mem::offset_of!(Sentinels, bottom)) {
        std::ptr::null()
    } else if a == sentinel(std::mem::offset_of!(Sentinels, in_place)) {
        IN_PLACE
    } else {
        p
    }
}

/// A status argument: `MPI_STATUS(ES)_IGNORE` become C's.
pub(crate) fn fstatus(p: *const MpiStatus) -> *const MpiStatus {
    let a = p as usize;
    if a == sentinel(std::mem::offset_of!(Sentinels, status_ignore))
        || a == sentinel(std::mem::offset_of!(Sentinels, statuses_ignore))
    {
        STATUS_IGNORE as *const MpiStatus
    } else {
        p
    }
}

/// Writes `ierror`.
pub(crate) unsafe fn fset(ierror: *mut c_int, r: c_int) {
    if !ierror.is_null() {
        // SAFETY: Fortran's `ierror`, an integer.
        unsafe { ierror.write(r) };
    }
}

/// A Fortran string argument of `len` characters as a C string, trailing blanks
/// dropped (and anything from a NUL on).
pub(crate) unsafe fn fstr_in(p: *const c_char, len: usize) -> CString {
    if p.is_null() {
        return CString::default();
    }
    // SAFETY: Fortran passes `len` characters at `p`.
    let s = unsafe { std::slice::from_raw_parts(p as *const u8, len) };
    let s = s.split(|&b| b == 0).next().unwrap_or(&[]);
    let end = s.iter().rposition(|&b| b != b' ').map_or(0, |i| i + 1);
    CString::new(&s[..end]).unwrap_or_default()
}

/// Copies the C string in `buf` into the Fortran string of `len` characters at
/// `p`, padded with blanks (cut if longer).
pub(crate) unsafe fn fstr_out(p: *mut c_char, len: usize, buf: &[c_char]) {
    if p.is_null() {
        return;
    }
    let n = buf
        .iter()
        .position(|&c| c == 0)
        .unwrap_or(buf.len())
        .min(len);
    // SAFETY: Fortran passes room for `len` characters at `p`.
    let out = unsafe { std::slice::from_raw_parts_mut(p as *mut u8, len) };
    for (i, o) in out.iter_mut().enumerate() {
        *o = if i < n { buf[i] as u8 } else { b' ' };
    }
}

mod generated {
    #![allow(unused_unsafe, unused_imports, clippy::all)]
    use super::super::pmpi_impls::*;
    use super::super::{callbacks, MpiStatus};
    use super::{fbuf, fset, fstatus, fstr_in, fstr_out};
    use libc::{c_char, c_int, c_void};
    include!(concat!(env!("OUT_DIR"), "/fortran.rs"));
}
