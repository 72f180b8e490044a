//! Datatypes: sizes, extents, derived types, commit and free.
#![allow(unsafe_code)]
#![allow(clippy::missing_safety_doc)]
#![allow(clippy::too_many_arguments)]

use super::*;

// ---- datatypes -----------------------------------------------------------------

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_size(datatype: c_int, size: *mut c_int) -> c_int {
    call("MPI_Type_size", 1, || {
        let t = match types::predefined(datatype) {
            Some(t) => t.size,
            None => state::with(|s| s.any_ty(datatype))?.size,
        };
        // SAFETY: an output int.
        unsafe { put(size, t as c_int) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_get_extent(
    datatype: c_int,
    lb: *mut isize,
    extent: *mut isize,
) -> c_int {
    call("MPI_Type_get_extent", 1, || {
        let t = match types::predefined(datatype) {
            Some(t) => Arc::new(t),
            None => state::with(|s| s.any_ty(datatype))?,
        };
        // SAFETY: output MPI_Aints.
        unsafe {
            put(lb, t.lb)?;
            put(extent, t.extent)
        }
    })
}

fn new_type(newtype: *mut c_int, t: Result<TypeInfo, MpiError>) -> Result<(), MpiError> {
    let t = t?;
    let h = state::with(|s| Ok(s.add_type(t)))?;
    // SAFETY: an output handle.
    unsafe { put(newtype, h) }
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_contiguous(
    count: c_int,
    oldtype: c_int,
    newtype: *mut c_int,
) -> c_int {
    call("MPI_Type_contiguous", 1, || {
        let old = state::with(|s| s.any_ty(oldtype))?;
        new_type(newtype, types::contiguous(count, &old))
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_vector(
    count: c_int,
    blocklength: c_int,
    stride: c_int,
    oldtype: c_int,
    newtype: *mut c_int,
) -> c_int {
    call("MPI_Type_vector", 1, || {
        let old = state::with(|s| s.any_ty(oldtype))?;
        new_type(newtype, types::vector(count, blocklength, stride, &old))
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_create_struct(
    count: c_int,
    blocklengths: *const c_int,
    displacements: *const isize,
    types_: *const c_int,
    newtype: *mut c_int,
) -> c_int {
    call("MPI_Type_create_struct", 1, || {
        let n = state::count(count)?;
        // SAFETY: three arrays of `count` elements.
        let (lens, disps, hs) = unsafe {
            if n > 0 && displacements.is_null() {
                return Err(MpiError::new(Class::Arg, "the displacement array is NULL"));
            }
            (
                ints(blocklengths, n, "the block length array")?,
                if n == 0 {
                    &[][..]
                } else {
                    std::slice::from_raw_parts(displacements, n)
                },
                ints(types_, n, "the type array")?,
            )
        };
        let olds = state::with(|s| {
            hs.iter()
                .map(|&h| s.any_ty(h))
                .collect::<Result<Vec<_>, _>>()
        })?;
        let blocks: Vec<(i32, isize, &TypeInfo)> =
            (0..n).map(|i| (lens[i], disps[i], &*olds[i])).collect();
        new_type(newtype, types::create_struct(&blocks))
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_commit(datatype: *mut c_int) -> c_int {
    call("MPI_Type_commit", 1, || {
        // SAFETY: a datatype handle.
        let h = unsafe { get(datatype, "the datatype")? };
        state::with(|s| s.commit_type(h))
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_free(datatype: *mut c_int) -> c_int {
    call("MPI_Type_free", 1, || {
        // SAFETY: a datatype handle.
        let h = unsafe { get(datatype, "the datatype")? };
        state::with(|s| s.free_type(h))?;
        // SAFETY: read above.
        unsafe { datatype.write(0) };
        Ok(())
    })
}
