//! Language-binding conversions and MPI 1's names that MPI 3.0 removed but old
//! codes (and test suites) still call. Handles are C ints in both C and Fortran,
//! so `MPI_X_c2f` and `MPI_X_f2c` give the handle back; a status is six ints in
//! both.
#![allow(unsafe_code)]
#![allow(clippy::missing_safety_doc)]

use super::datatypes::{PMPI_Get_address, PMPI_Type_create_struct, PMPI_Type_get_extent};
use super::{call, put, MpiStatus};
use crate::error::{Class, MpiError};
use libc::{c_int, c_void};

macro_rules! identity {
    ($($c2f:ident $f2c:ident),* $(,)?) => {$(
        #[no_mangle]
        pub extern "C" fn $c2f(h: c_int) -> c_int {
            h
        }
        #[no_mangle]
        pub extern "C" fn $f2c(h: c_int) -> c_int {
            h
        }
    )*};
}

identity! {
    PMPI_Comm_c2f PMPI_Comm_f2c,
    PMPI_Type_c2f PMPI_Type_f2c,
    PMPI_Group_c2f PMPI_Group_f2c,
    PMPI_Request_c2f PMPI_Request_f2c,
    PMPI_Op_c2f PMPI_Op_f2c,
    PMPI_Info_c2f PMPI_Info_f2c,
    PMPI_Errhandler_c2f PMPI_Errhandler_f2c,
    PMPI_Message_c2f PMPI_Message_f2c,
    PMPI_Win_c2f PMPI_Win_f2c,
    PMPI_File_c2f PMPI_File_f2c,
}

const STATUS_INTS: usize = std::mem::size_of::<MpiStatus>() / std::mem::size_of::<c_int>();

unsafe fn copy_status(from: *const c_int, to: *mut c_int) -> Result<(), MpiError> {
    if from.is_null() || to.is_null() || from as usize == super::STATUS_IGNORE {
        return Err(MpiError::new(
            Class::Arg,
            "a status is NULL or MPI_STATUS_IGNORE",
        ));
    }
    // SAFETY: both point at a status: six ints.
    unsafe { std::ptr::copy(from, to, STATUS_INTS) };
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Status_c2f(
    c_status: *const MpiStatus,
    f_status: *mut c_int,
) -> c_int {
    // SAFETY: passed on.
    call("MPI_Status_c2f", 1, || unsafe {
        copy_status(c_status as *const c_int, f_status)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Status_f2c(
    f_status: *const c_int,
    c_status: *mut MpiStatus,
) -> c_int {
    // SAFETY: passed on.
    call("MPI_Status_f2c", 1, || unsafe {
        copy_status(f_status, c_status as *mut c_int)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Address(location: *mut c_void, address: *mut isize) -> c_int {
    // SAFETY: MPI_Get_address's arguments.
    unsafe { PMPI_Get_address(location, address) }
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_extent(datatype: c_int, extent: *mut isize) -> c_int {
    let mut lb = 0isize;
    // SAFETY: an output MPI_Aint of ours and the caller's.
    unsafe { PMPI_Type_get_extent(datatype, &mut lb, extent) }
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_lb(datatype: c_int, displacement: *mut isize) -> c_int {
    let mut extent = 0isize;
    // SAFETY: the caller's output MPI_Aint and ours.
    unsafe { PMPI_Type_get_extent(datatype, displacement, &mut extent) }
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_ub(datatype: c_int, displacement: *mut isize) -> c_int {
    let (mut lb, mut extent) = (0isize, 0isize);
    // SAFETY: outputs of ours.
    let r = unsafe { PMPI_Type_get_extent(datatype, &mut lb, &mut extent) };
    if r != 0 {
        return r;
    }
    // SAFETY: the caller's output MPI_Aint.
    call("MPI_Type_ub", 1, || unsafe {
        put(displacement, lb + extent)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_struct(
    count: c_int,
    array_of_blocklengths: *mut c_int,
    array_of_displacements: *mut isize,
    array_of_types: *mut c_int,
    newtype: *mut c_int,
) -> c_int {
    // SAFETY: MPI_Type_create_struct's arguments.
    unsafe {
        PMPI_Type_create_struct(
            count,
            array_of_blocklengths,
            array_of_displacements,
            array_of_types,
            newtype,
        )
    }
}
