//! Datatypes: sizes, extents, derived types, envelopes and contents, commit and
//! free, addresses, and packing (`MPI_Pack` and external32).
#![allow(unsafe_code)]
#![allow(clippy::missing_safety_doc)]
#![allow(clippy::too_many_arguments)]

use super::*;
use crate::types::Combiner;

// ---- looking types up ------------------------------------------------------------

fn any(h: c_int) -> Result<Arc<TypeInfo>, MpiError> {
    state::with(|s| s.any_ty(h))
}

/// `n` elements at `p` (none if `n` is 0), or MPI_ERR_ARG naming `what`.
unsafe fn arr<'a, T>(p: *const T, n: usize, what: &str) -> Result<&'a [T], MpiError> {
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(MpiError::new(Class::Arg, format!("{what} is NULL")));
    }
    // SAFETY: the caller passes an array of `n` elements.
    Ok(unsafe { std::slice::from_raw_parts(p, n) })
}

fn new_type(newtype: *mut c_int, t: Result<TypeInfo, MpiError>) -> Result<(), MpiError> {
    let t = t?;
    let h = state::with(|s| Ok(s.add_type(t)))?;
    // SAFETY: an output handle.
    unsafe { put(newtype, h) }
}

fn olds(hs: &[c_int]) -> Result<Vec<Arc<TypeInfo>>, MpiError> {
    state::with(|s| hs.iter().map(|&h| s.any_ty(h)).collect())
}

// ---- sizes and extents -----------------------------------------------------------

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_size(datatype: c_int, size: *mut c_int) -> c_int {
    call("MPI_Type_size", 1, || {
        let t = any(datatype)?;
        let n = c_int::try_from(t.size).unwrap_or(UNDEFINED);
        // SAFETY: an output int.
        unsafe { put(size, n) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_size_x(datatype: c_int, size: *mut i64) -> c_int {
    call("MPI_Type_size_x", 1, || {
        let t = any(datatype)?;
        // SAFETY: an output MPI_Count.
        unsafe { put(size, t.size as i64) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_get_extent(
    datatype: c_int,
    lb: *mut isize,
    extent: *mut isize,
) -> c_int {
    call("MPI_Type_get_extent", 1, || {
        let t = any(datatype)?;
        // SAFETY: output MPI_Aints.
        unsafe {
            put(lb, t.lb)?;
            put(extent, t.extent)
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_get_extent_x(
    datatype: c_int,
    lb: *mut i64,
    extent: *mut i64,
) -> c_int {
    call("MPI_Type_get_extent_x", 1, || {
        let t = any(datatype)?;
        // SAFETY: output MPI_Counts.
        unsafe {
            put(lb, t.lb as i64)?;
            put(extent, t.extent as i64)
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_get_true_extent(
    datatype: c_int,
    true_lb: *mut isize,
    true_extent: *mut isize,
) -> c_int {
    call("MPI_Type_get_true_extent", 1, || {
        let t = any(datatype)?;
        // SAFETY: output MPI_Aints.
        unsafe {
            put(true_lb, t.true_lb)?;
            put(true_extent, t.true_extent)
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_get_true_extent_x(
    datatype: c_int,
    true_lb: *mut i64,
    true_extent: *mut i64,
) -> c_int {
    call("MPI_Type_get_true_extent_x", 1, || {
        let t = any(datatype)?;
        // SAFETY: output MPI_Counts.
        unsafe {
            put(true_lb, t.true_lb as i64)?;
            put(true_extent, t.true_extent as i64)
        }
    })
}

// ---- constructors ----------------------------------------------------------------

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_contiguous(
    count: c_int,
    oldtype: c_int,
    newtype: *mut c_int,
) -> c_int {
    call("MPI_Type_contiguous", 1, || {
        let old = any(oldtype)?;
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
        let old = any(oldtype)?;
        new_type(newtype, types::vector(count, blocklength, stride, &old))
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_create_hvector(
    count: c_int,
    blocklength: c_int,
    stride: isize,
    oldtype: c_int,
    newtype: *mut c_int,
) -> c_int {
    call("MPI_Type_create_hvector", 1, || {
        let old = any(oldtype)?;
        new_type(newtype, types::hvector(count, blocklength, stride, &old))
    })
}

/// `MPI_Type_hvector`: MPI 1's name of `MPI_Type_create_hvector` (removed in
/// MPI 3.0; kept for old codes).
#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_hvector(
    count: c_int,
    blocklength: c_int,
    stride: isize,
    oldtype: c_int,
    newtype: *mut c_int,
) -> c_int {
    call("MPI_Type_hvector", 1, || {
        let old = any(oldtype)?;
        new_type(newtype, types::hvector(count, blocklength, stride, &old))
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_indexed(
    count: c_int,
    blocklengths: *const c_int,
    displacements: *const c_int,
    oldtype: c_int,
    newtype: *mut c_int,
) -> c_int {
    call("MPI_Type_indexed", 1, || {
        let n = state::count(count)?;
        // SAFETY: two arrays of `count` ints.
        let (lens, disps) = unsafe {
            (
                arr(blocklengths, n, "the block length array")?,
                arr(displacements, n, "the displacement array")?,
            )
        };
        let old = any(oldtype)?;
        new_type(newtype, types::indexed(lens, disps, &old))
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_create_hindexed(
    count: c_int,
    blocklengths: *const c_int,
    displacements: *const isize,
    oldtype: c_int,
    newtype: *mut c_int,
) -> c_int {
    call("MPI_Type_create_hindexed", 1, || {
        // SAFETY: passed on.
        unsafe { hindexed(count, blocklengths, displacements, oldtype, newtype) }
    })
}

unsafe fn hindexed(
    count: c_int,
    blocklengths: *const c_int,
    displacements: *const isize,
    oldtype: c_int,
    newtype: *mut c_int,
) -> Result<(), MpiError> {
    let n = state::count(count)?;
    // SAFETY: arrays of `count` ints and MPI_Aints.
    let (lens, disps) = unsafe {
        (
            arr(blocklengths, n, "the block length array")?,
            arr(displacements, n, "the displacement array")?,
        )
    };
    let old = any(oldtype)?;
    new_type(newtype, types::hindexed(lens, disps, &old))
}

/// `MPI_Type_hindexed`: MPI 1's name of `MPI_Type_create_hindexed` (removed in
/// MPI 3.0; kept for old codes).
#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_hindexed(
    count: c_int,
    blocklengths: *const c_int,
    displacements: *const isize,
    oldtype: c_int,
    newtype: *mut c_int,
) -> c_int {
    call("MPI_Type_hindexed", 1, || {
        // SAFETY: passed on.
        unsafe { hindexed(count, blocklengths, displacements, oldtype, newtype) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_create_indexed_block(
    count: c_int,
    blocklength: c_int,
    displacements: *const c_int,
    oldtype: c_int,
    newtype: *mut c_int,
) -> c_int {
    call("MPI_Type_create_indexed_block", 1, || {
        let n = state::count(count)?;
        // SAFETY: an array of `count` ints.
        let disps = unsafe { arr(displacements, n, "the displacement array")? };
        let old = any(oldtype)?;
        new_type(newtype, types::indexed_block(blocklength, disps, &old))
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_create_hindexed_block(
    count: c_int,
    blocklength: c_int,
    displacements: *const isize,
    oldtype: c_int,
    newtype: *mut c_int,
) -> c_int {
    call("MPI_Type_create_hindexed_block", 1, || {
        let n = state::count(count)?;
        // SAFETY: an array of `count` MPI_Aints.
        let disps = unsafe { arr(displacements, n, "the displacement array")? };
        let old = any(oldtype)?;
        new_type(newtype, types::hindexed_block(blocklength, disps, &old))
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
            (
                arr(blocklengths, n, "the block length array")?,
                arr(displacements, n, "the displacement array")?,
                arr(types_, n, "the type array")?,
            )
        };
        let olds = olds(hs)?;
        let blocks: Vec<(i32, isize, Arc<TypeInfo>)> = (0..n)
            .map(|i| (lens[i], disps[i], olds[i].clone()))
            .collect();
        new_type(newtype, types::create_struct(&blocks))
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_create_subarray(
    ndims: c_int,
    array_of_sizes: *const c_int,
    array_of_subsizes: *const c_int,
    array_of_starts: *const c_int,
    order: c_int,
    oldtype: c_int,
    newtype: *mut c_int,
) -> c_int {
    call("MPI_Type_create_subarray", 1, || {
        let n = state::count(ndims)?;
        // SAFETY: three arrays of `ndims` ints.
        let (sizes, subs, starts) = unsafe {
            (
                arr(array_of_sizes, n, "the size array")?,
                arr(array_of_subsizes, n, "the subsize array")?,
                arr(array_of_starts, n, "the start array")?,
            )
        };
        let old = any(oldtype)?;
        new_type(newtype, types::subarray(sizes, subs, starts, order, &old))
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_create_darray(
    size: c_int,
    rank: c_int,
    ndims: c_int,
    array_of_gsizes: *const c_int,
    array_of_distribs: *const c_int,
    array_of_dargs: *const c_int,
    array_of_psizes: *const c_int,
    order: c_int,
    oldtype: c_int,
    newtype: *mut c_int,
) -> c_int {
    call("MPI_Type_create_darray", 1, || {
        let n = state::count(ndims)?;
        // SAFETY: four arrays of `ndims` ints.
        let (g, dist, dargs, ps) = unsafe {
            (
                arr(array_of_gsizes, n, "the global size array")?,
                arr(array_of_distribs, n, "the distribution array")?,
                arr(array_of_dargs, n, "the distribution argument array")?,
                arr(array_of_psizes, n, "the process grid array")?,
            )
        };
        let old = any(oldtype)?;
        new_type(
            newtype,
            types::darray(size, rank, g, dist, dargs, ps, order, &old),
        )
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_create_resized(
    oldtype: c_int,
    lb: isize,
    extent: isize,
    newtype: *mut c_int,
) -> c_int {
    call("MPI_Type_create_resized", 1, || {
        let old = any(oldtype)?;
        new_type(newtype, types::resized(&old, lb, extent))
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_dup(oldtype: c_int, newtype: *mut c_int) -> c_int {
    call("MPI_Type_dup", 1, || {
        let old = any(oldtype)?;
        new_type(newtype, types::dup(&old))?;
        // The duplicate gets the attributes their copy callbacks give it.
        // SAFETY: the handle just written; the callbacks the program registered.
        unsafe {
            let h = newtype.read();
            if let Err(e) = super::attrs::copy_attrs(crate::attrs::Kind::Type, oldtype, h) {
                let _ = super::attrs::delete_attrs(crate::attrs::Kind::Type, h);
                let _ = state::with(|s| s.free_type(h));
                return Err(e);
            }
        }
        Ok(())
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
        state::with(|s| s.any_ty(h).map(|_| ()))?;
        // Its attributes' delete callbacks run first (MPI 3.1 §6.7.4).
        // SAFETY: the callbacks the program registered.
        unsafe { super::attrs::delete_attrs(crate::attrs::Kind::Type, h)? };
        state::with(|s| s.free_type(h))?;
        // SAFETY: read above.
        unsafe { datatype.write(0) };
        Ok(())
    })
}

/// `MPI_TYPECLASS_*` of `mpi.h`.
const TYPECLASS_REAL: c_int = 1;
const TYPECLASS_INTEGER: c_int = 2;
const TYPECLASS_COMPLEX: c_int = 3;

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_match_size(
    typeclass: c_int,
    size: c_int,
    datatype: *mut c_int,
) -> c_int {
    call("MPI_Type_match_size", 1, || {
        // Handles of mpi.h: Fortran's INTEGERn, REALn and COMPLEXn as MPI 3.1
        // §17.2.5 says, and C's types where Fortran's have no name here.
        let h = match (typeclass, size) {
            (TYPECLASS_INTEGER, 1) => Some(51),
            (TYPECLASS_INTEGER, 2) => Some(52),
            (TYPECLASS_INTEGER, 4) => Some(53),
            (TYPECLASS_INTEGER, 8) => Some(54),
            (TYPECLASS_REAL, 4) => Some(55),
            (TYPECLASS_REAL, 8) => Some(56),
            (TYPECLASS_REAL, 16) => Some(15),
            (TYPECLASS_COMPLEX, 8) => Some(57),
            (TYPECLASS_COMPLEX, 16) => Some(58),
            (TYPECLASS_COMPLEX, 32) => Some(38),
            _ => None,
        };
        let h = h.ok_or_else(|| {
            MpiError::new(
                Class::Arg,
                format!("no predefined type of class {typeclass} has {size} bytes"),
            )
        })?;
        // SAFETY: an output handle.
        unsafe { put(datatype, h) }
    })
}

// ---- envelopes and contents ------------------------------------------------------

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_get_envelope(
    datatype: c_int,
    num_integers: *mut c_int,
    num_addresses: *mut c_int,
    num_datatypes: *mut c_int,
    combiner: *mut c_int,
) -> c_int {
    call("MPI_Type_get_envelope", 1, || {
        let t = any(datatype)?;
        let e = &t.envelope;
        // SAFETY: output ints.
        unsafe {
            put(num_integers, e.ints.len() as c_int)?;
            put(num_addresses, e.aints.len() as c_int)?;
            put(num_datatypes, e.types.len() as c_int)?;
            put(combiner, e.combiner as c_int)
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_get_contents(
    datatype: c_int,
    max_integers: c_int,
    max_addresses: c_int,
    max_datatypes: c_int,
    array_of_integers: *mut c_int,
    array_of_addresses: *mut isize,
    array_of_datatypes: *mut c_int,
) -> c_int {
    call("MPI_Type_get_contents", 1, || {
        let t = any(datatype)?;
        let e = &t.envelope;
        if e.combiner == Combiner::Named {
            return Err(MpiError::new(
                Class::Type,
                format!("{} is predefined: it has no contents", t.name),
            ));
        }
        let room = [
            (max_integers, e.ints.len(), "integers"),
            (max_addresses, e.aints.len(), "addresses"),
            (max_datatypes, e.types.len(), "datatypes"),
        ];
        for (max, need, what) in room {
            if usize::try_from(max).map_or(true, |m| m < need) {
                return Err(MpiError::new(
                    Class::Arg,
                    format!("room for {max} {what}, {need} needed"),
                ));
            }
        }
        // Derived old types come back as new handles (the caller frees them).
        let hs: Vec<c_int> = state::with(|s| {
            Ok(e.types
                .iter()
                .map(|o| {
                    if o.handle != 0 {
                        o.handle
                    } else {
                        s.add_type(TypeInfo::clone(o))
                    }
                })
                .collect())
        })?;
        // SAFETY: output arrays of at least the sizes checked above.
        unsafe {
            copy_out(array_of_integers, &e.ints)?;
            copy_out(array_of_addresses, &e.aints)?;
            copy_out(array_of_datatypes, &hs)
        }
    })
}

unsafe fn copy_out<T: Copy>(p: *mut T, v: &[T]) -> Result<(), MpiError> {
    if v.is_empty() {
        return Ok(());
    }
    if p.is_null() {
        return Err(MpiError::new(Class::Arg, "an output array is NULL"));
    }
    // SAFETY: the caller passes room for `v.len()` elements (checked against the
    // maxima it gave).
    unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), p, v.len()) };
    Ok(())
}

// ---- elements and addresses ------------------------------------------------------

unsafe fn elements(status: *const MpiStatus, datatype: c_int) -> Result<i64, MpiError> {
    if status.is_null() || status as usize == STATUS_IGNORE {
        return Err(MpiError::new(
            Class::Arg,
            "the status is NULL or MPI_STATUS_IGNORE",
        ));
    }
    let t = any(datatype)?;
    // SAFETY: a status the caller passes.
    let bytes = unsafe { (*status).bytes() } as usize;
    Ok(t.elements(bytes).map_or(i64::from(UNDEFINED), |n| n as i64))
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Get_elements(
    status: *const MpiStatus,
    datatype: c_int,
    count: *mut c_int,
) -> c_int {
    call("MPI_Get_elements", 1, || {
        // SAFETY: a status.
        let n = unsafe { elements(status, datatype)? };
        // SAFETY: an output int.
        unsafe { put(count, c_int::try_from(n).unwrap_or(UNDEFINED)) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Get_elements_x(
    status: *const MpiStatus,
    datatype: c_int,
    count: *mut i64,
) -> c_int {
    call("MPI_Get_elements_x", 1, || {
        // SAFETY: a status.
        let n = unsafe { elements(status, datatype)? };
        // SAFETY: an output MPI_Count.
        unsafe { put(count, n) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Get_address(location: *const c_void, address: *mut isize) -> c_int {
    call("MPI_Get_address", 1, || {
        // SAFETY: an output MPI_Aint.
        unsafe { put(address, location as isize) }
    })
}

#[no_mangle]
pub extern "C" fn PMPI_Aint_add(base: isize, disp: isize) -> isize {
    base.wrapping_add(disp)
}

#[no_mangle]
pub extern "C" fn PMPI_Aint_diff(addr1: isize, addr2: isize) -> isize {
    addr1.wrapping_sub(addr2)
}

// ---- packing ---------------------------------------------------------------------

/// Checks an external data representation's name: only "external32" exists.
unsafe fn external32(datarep: *const c_char) -> Result<(), MpiError> {
    if datarep.is_null() {
        return Err(MpiError::new(Class::Arg, "the data representation is NULL"));
    }
    // SAFETY: a C string.
    let name = unsafe { std::ffi::CStr::from_ptr(datarep) }.to_string_lossy();
    if name == "external32" {
        Ok(())
    } else {
        Err(MpiError::new(
            Class::Arg,
            format!("data representation \"{name}\" is not \"external32\""),
        ))
    }
}

/// Packs `n` elements of `datatype` at `inbuf` into `outbuf[*position..outsize]`.
unsafe fn pack_into(
    inbuf: *const c_void,
    n: c_int,
    datatype: c_int,
    outbuf: *mut c_void,
    outsize: usize,
    position: *mut isize,
    external: bool,
) -> Result<(), MpiError> {
    let t = state::with(|s| s.ty(datatype))?;
    let n = count(n)?;
    // SAFETY: the position, in and out.
    let pos = unsafe { get(position, "the position")? };
    // SAFETY: `n` elements of `t` at `inbuf`.
    let mut data = unsafe { in_bytes(inbuf, n, &t)? }.into_owned();
    if external {
        t.swap_external32(&mut data);
    }
    let at = usize::try_from(pos)
        .ok()
        .filter(|&p| p <= outsize && data.len() <= outsize - p)
        .ok_or_else(|| {
            MpiError::new(
                Class::Truncate,
                format!(
                    "{} packed bytes at position {pos} overflow an output buffer of {outsize} bytes",
                    data.len()
                ),
            )
        })?;
    if !data.is_empty() {
        if outbuf.is_null() {
            return Err(MpiError::new(Class::Buffer, "the output buffer is NULL"));
        }
        // SAFETY: the output buffer has `outsize` bytes, and `at + len <= outsize`.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), (outbuf as *mut u8).add(at), data.len());
        }
    }
    // SAFETY: checked above.
    unsafe { position.write(pos + data.len() as isize) };
    Ok(())
}

/// Unpacks `n` elements of `datatype` from `inbuf[*position..insize]` into `outbuf`.
unsafe fn unpack_from(
    inbuf: *const c_void,
    insize: usize,
    position: *mut isize,
    outbuf: *mut c_void,
    n: c_int,
    datatype: c_int,
    external: bool,
) -> Result<(), MpiError> {
    let t = state::with(|s| s.ty(datatype))?;
    let n = count(n)?;
    t.check_count(n)?;
    // SAFETY: the position, in and out.
    let pos = unsafe { get(position, "the position")? };
    let len = n * t.size;
    let at = usize::try_from(pos)
        .ok()
        .filter(|&p| p <= insize && len <= insize - p)
        .ok_or_else(|| {
            MpiError::new(
                Class::Truncate,
                format!(
                    "{n} elements of {} ({len} bytes) at position {pos} overrun an input buffer of {insize} bytes",
                    t.name
                ),
            )
        })?;
    if len > 0 {
        if inbuf.is_null() {
            return Err(MpiError::new(Class::Buffer, "the input buffer is NULL"));
        }
        // SAFETY: the input buffer has `insize` bytes, and `at + len <= insize`.
        let src = unsafe { std::slice::from_raw_parts((inbuf as *const u8).add(at), len) };
        let mut data = Cow::Borrowed(src);
        if external {
            t.swap_external32(data.to_mut());
        }
        // SAFETY: `n` elements of `t` at `outbuf`.
        unsafe { write_packed(outbuf, n, &t, &data)? };
    }
    // SAFETY: checked above.
    unsafe { position.write(pos + len as isize) };
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Pack(
    inbuf: *const c_void,
    incount: c_int,
    datatype: c_int,
    outbuf: *mut c_void,
    outsize: c_int,
    position: *mut c_int,
    comm: c_int,
) -> c_int {
    call("MPI_Pack", comm, || {
        comm_of(comm)?;
        let size = count(outsize)?;
        // SAFETY: the position.
        let mut pos = unsafe { get(position, "the position")? } as isize;
        // SAFETY: passed on.
        unsafe { pack_into(inbuf, incount, datatype, outbuf, size, &mut pos, false)? };
        // SAFETY: read above.
        unsafe { position.write(pos as c_int) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Unpack(
    inbuf: *const c_void,
    insize: c_int,
    position: *mut c_int,
    outbuf: *mut c_void,
    outcount: c_int,
    datatype: c_int,
    comm: c_int,
) -> c_int {
    call("MPI_Unpack", comm, || {
        comm_of(comm)?;
        let size = count(insize)?;
        // SAFETY: the position.
        let mut pos = unsafe { get(position, "the position")? } as isize;
        // SAFETY: passed on.
        unsafe { unpack_from(inbuf, size, &mut pos, outbuf, outcount, datatype, false)? };
        // SAFETY: read above.
        unsafe { position.write(pos as c_int) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Pack_size(
    incount: c_int,
    datatype: c_int,
    comm: c_int,
    size: *mut c_int,
) -> c_int {
    call("MPI_Pack_size", comm, || {
        comm_of(comm)?;
        let t = any(datatype)?;
        let n = count(incount)?;
        let bytes = n
            .checked_mul(t.size)
            .and_then(|b| c_int::try_from(b).ok())
            .ok_or_else(|| {
                MpiError::new(
                    Class::Count,
                    format!("{n} elements of {} do not fit an int of bytes", t.name),
                )
            })?;
        // SAFETY: an output int.
        unsafe { put(size, bytes) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Pack_external(
    datarep: *const c_char,
    inbuf: *const c_void,
    incount: c_int,
    datatype: c_int,
    outbuf: *mut c_void,
    outsize: isize,
    position: *mut isize,
) -> c_int {
    call("MPI_Pack_external", 1, || {
        // SAFETY: passed on.
        unsafe {
            external32(datarep)?;
            let size = usize::try_from(outsize).map_err(|_| {
                MpiError::new(Class::Arg, format!("output size {outsize} is negative"))
            })?;
            pack_into(inbuf, incount, datatype, outbuf, size, position, true)
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Unpack_external(
    datarep: *const c_char,
    inbuf: *const c_void,
    insize: isize,
    position: *mut isize,
    outbuf: *mut c_void,
    outcount: c_int,
    datatype: c_int,
) -> c_int {
    call("MPI_Unpack_external", 1, || {
        // SAFETY: passed on.
        unsafe {
            external32(datarep)?;
            let size = usize::try_from(insize).map_err(|_| {
                MpiError::new(Class::Arg, format!("input size {insize} is negative"))
            })?;
            unpack_from(inbuf, size, position, outbuf, outcount, datatype, true)
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Pack_external_size(
    datarep: *const c_char,
    incount: c_int,
    datatype: c_int,
    size: *mut isize,
) -> c_int {
    call("MPI_Pack_external_size", 1, || {
        // SAFETY: a C string.
        unsafe { external32(datarep)? };
        let t = any(datatype)?;
        let n = count(incount)?;
        t.check_count(n)?;
        // SAFETY: an output MPI_Aint.
        unsafe { put(size, (n * t.size) as isize) }
    })
}
