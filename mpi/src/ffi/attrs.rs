//! Attributes, keyvals and names of communicators and datatypes (MPI 3.1 §6.7,
//! §6.8). The bookkeeping is [`crate::attrs`]; here the C callbacks are called,
//! always with the state unlocked (a callback may call MPI).
//!
//! [`copy_attrs`] and [`delete_attrs`] are what a duplication or a free runs:
//! `MPI_Comm_dup`/`free` call them; `MPI_Type_dup`/`free` should too.
#![allow(unsafe_code)]
#![allow(clippy::missing_safety_doc)]

use super::{call, get, put};
use crate::attrs::{self, CopyFn, DeleteFn, Kind, Obj};
use crate::error::{Class, MpiError};
use crate::state::{self, COMM_WORLD, PROC_NULL, TAG_UB};
use crate::types;
use libc::{c_char, c_int, c_void};
use std::sync::atomic::AtomicI32;

/// `MPI_MAX_OBJECT_NAME`.
const MAX_OBJECT_NAME: usize = 128;

// The values of the predefined attributes of MPI_COMM_WORLD: `MPI_Comm_get_attr`
// hands out pointers to them, so they live as long as the process.
static TAG_UB_VAL: c_int = TAG_UB;
static HOST_VAL: c_int = PROC_NULL;
/// Any process may do I/O: `MPI_ANY_SOURCE`.
static IO_VAL: c_int = state::ANY_SOURCE;
/// The ranks' clocks are not synchronized (they may be on other continents).
static WTIME_IS_GLOBAL_VAL: c_int = 0;
/// The job's size, set by `MPI_Init` (no processes can be spawned).
pub(super) static UNIVERSE_SIZE_VAL: AtomicI32 = AtomicI32::new(0);
/// Kept equal to the handlers' last used code.
pub(super) static LASTUSEDCODE_VAL: AtomicI32 = AtomicI32::new(crate::handlers::LASTCODE);
/// One application per job.
static APPNUM_VAL: c_int = 0;

/// The address of predefined attribute `k`'s value.
fn predefined_value(k: c_int) -> Option<*const c_int> {
    Some(match k {
        1 => &TAG_UB_VAL,
        2 => &HOST_VAL,
        3 => &IO_VAL,
        4 => &WTIME_IS_GLOBAL_VAL,
        5 => UNIVERSE_SIZE_VAL.as_ptr(),
        6 => LASTUSEDCODE_VAL.as_ptr(),
        7 => &APPNUM_VAL,
        _ => return None,
    })
}

/// A callback's failure: its code as the call's class (MPI_ERR_OTHER if the code
/// is not a class of MPI's).
fn callback_failed(what: &str, k: c_int, code: c_int) -> MpiError {
    MpiError::new(
        Class::from_code(code).unwrap_or(Class::Other),
        format!("the {what} callback of keyval {k} returned {code}"),
    )
}

/// Runs a delete callback on object handle `h`.
unsafe fn run_delete(h: c_int, d: attrs::Delete) -> Result<(), MpiError> {
    // SAFETY: a function the program registered with this C signature; the value
    // and extra state are the program's own pointers, passed back untouched.
    let rc = unsafe { (d.f)(h, d.keyval, d.value as *mut c_void, d.extra as *mut c_void) };
    if rc != 0 {
        return Err(callback_failed("delete", d.keyval, rc));
    }
    Ok(())
}

/// Copies the attributes of `old` onto `new` (a duplicate of it) through their
/// copy callbacks. On failure the attributes already copied stay on `new`, which
/// the caller frees with [`delete_attrs`].
pub(crate) unsafe fn copy_attrs(kind: Kind, old: c_int, new: c_int) -> Result<(), MpiError> {
    let copies = state::with(|s| Ok(s.attrs.copies((kind, old))))?;
    for c in copies {
        let mut out: *mut c_void = std::ptr::null_mut();
        let mut flag: c_int = 0;
        // SAFETY: a function the program registered with this C signature; `out`
        // and `flag` are locals it writes to.
        let rc = unsafe {
            (c.f)(
                old,
                c.keyval,
                c.extra as *mut c_void,
                c.value as *mut c_void,
                (&mut out as *mut *mut c_void).cast(),
                &mut flag,
            )
        };
        if rc != 0 {
            return Err(callback_failed("copy", c.keyval, rc));
        }
        if flag != 0 {
            state::with(|s| {
                s.attrs.put_copied((kind, new), c.keyval, out as usize);
                Ok(())
            })?;
        }
    }
    Ok(())
}

/// Deletes every attribute of object `h` (last set first) through their delete
/// callbacks, as freeing it does. Stops at the first callback that fails (the
/// object is then not freed, and keeps the attributes not yet deleted).
pub(crate) unsafe fn delete_attrs(kind: Kind, h: c_int) -> Result<(), MpiError> {
    let obj = (kind, h);
    let deletes = state::with(|s| Ok(s.attrs.deletes(obj)))?;
    for (k, d) in deletes {
        if let Some(d) = d {
            // SAFETY: passed on.
            unsafe { run_delete(h, d)? };
        }
        state::with(|s| {
            s.attrs.remove(obj, k);
            Ok(())
        })?;
    }
    Ok(())
}

/// `MPI_DUP_FN`, `MPI_COMM_DUP_FN`, `MPI_TYPE_DUP_FN`: the copy is the value.
#[no_mangle]
pub unsafe extern "C" fn QCG_dup_fn(
    _old: c_int,
    _keyval: c_int,
    _extra: *mut c_void,
    value_in: *mut c_void,
    value_out: *mut c_void,
    flag: *mut c_int,
) -> c_int {
    // SAFETY: MPI calls copy functions with `value_out` pointing to a `void *`
    // and `flag` to an int.
    unsafe {
        (value_out as *mut *mut c_void).write(value_in);
        flag.write(1);
    }
    0
}

/// Checks that `h` is a handle of `kind` (datatypes: predefined or derived).
fn check_obj(s: &state::State, (kind, h): Obj) -> Result<(), MpiError> {
    match kind {
        Kind::Comm => s.comm(h).map(|_| ()),
        Kind::Type => s.any_ty(h).map(|_| ()),
    }
}

fn create_keyval(
    kind: Kind,
    copy: Option<CopyFn>,
    delete: Option<DeleteFn>,
    keyval: *mut c_int,
    extra: *mut c_void,
) -> Result<(), MpiError> {
    let k = state::with(|s| Ok(s.attrs.create_keyval(kind, copy, delete, extra as usize)))?;
    // SAFETY: an output int.
    unsafe { put(keyval, k) }
}

unsafe fn free_keyval(kind: Kind, keyval: *mut c_int) -> Result<(), MpiError> {
    // SAFETY: an in/out keyval.
    let k = unsafe { get(keyval, "the keyval")? };
    state::with(|s| s.attrs.free_keyval(kind, k))?;
    // SAFETY: read above.
    unsafe { put(keyval, 0) }
}

unsafe fn set_attr(obj: Obj, k: c_int, value: *mut c_void) -> Result<(), MpiError> {
    let old = state::with(|s| {
        check_obj(s, obj)?;
        s.attrs.before_set(obj, k)
    })?;
    if let Some(d) = old {
        // SAFETY: passed on.
        unsafe { run_delete(obj.1, d)? };
    }
    state::with(|s| s.attrs.set(obj, k, value as usize))
}

unsafe fn get_attr(
    obj: Obj,
    k: c_int,
    value: *mut c_void,
    flag: *mut c_int,
) -> Result<(), MpiError> {
    let found = state::with(|s| {
        check_obj(s, obj)?;
        if obj.0 == Kind::Comm && attrs::is_predefined(k) {
            return Ok(if obj.1 == COMM_WORLD {
                predefined_value(k).map(|p| p as usize)
            } else {
                None
            });
        }
        s.attrs.get(obj, k)
    })?;
    // SAFETY: `flag` is an output int; `value` points to a `void *` (MPI 3.1
    // §6.7.2: the attribute's value is returned there).
    unsafe {
        put(flag, c_int::from(found.is_some()))?;
        if let Some(v) = found {
            put(value as *mut *mut c_void, v as *mut c_void)?;
        }
    }
    Ok(())
}

unsafe fn delete_attr(obj: Obj, k: c_int) -> Result<(), MpiError> {
    let d = state::with(|s| {
        check_obj(s, obj)?;
        s.attrs.before_delete(obj, k)
    })?;
    if let Some(d) = d {
        // SAFETY: passed on.
        unsafe { run_delete(obj.1, d)? };
    }
    state::with(|s| {
        s.attrs.remove(obj, k);
        Ok(())
    })
}

// ---- communicators ---------------------------------------------------------

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_create_keyval(
    copy: Option<CopyFn>,
    delete: Option<DeleteFn>,
    keyval: *mut c_int,
    extra: *mut c_void,
) -> c_int {
    call("MPI_Comm_create_keyval", COMM_WORLD, || {
        create_keyval(Kind::Comm, copy, delete, keyval, extra)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_free_keyval(keyval: *mut c_int) -> c_int {
    // SAFETY: passed on.
    call("MPI_Comm_free_keyval", COMM_WORLD, || unsafe {
        free_keyval(Kind::Comm, keyval)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_set_attr(
    comm: c_int,
    keyval: c_int,
    value: *mut c_void,
) -> c_int {
    // SAFETY: passed on.
    call("MPI_Comm_set_attr", comm, || unsafe {
        set_attr((Kind::Comm, comm), keyval, value)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_get_attr(
    comm: c_int,
    keyval: c_int,
    value: *mut c_void,
    flag: *mut c_int,
) -> c_int {
    // SAFETY: passed on.
    call("MPI_Comm_get_attr", comm, || unsafe {
        get_attr((Kind::Comm, comm), keyval, value, flag)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_delete_attr(comm: c_int, keyval: c_int) -> c_int {
    // SAFETY: passed on.
    call("MPI_Comm_delete_attr", comm, || unsafe {
        delete_attr((Kind::Comm, comm), keyval)
    })
}

// MPI-1's names: the same calls on communicators.

#[no_mangle]
pub unsafe extern "C" fn PMPI_Keyval_create(
    copy: Option<CopyFn>,
    delete: Option<DeleteFn>,
    keyval: *mut c_int,
    extra: *mut c_void,
) -> c_int {
    call("MPI_Keyval_create", COMM_WORLD, || {
        create_keyval(Kind::Comm, copy, delete, keyval, extra)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Keyval_free(keyval: *mut c_int) -> c_int {
    // SAFETY: passed on.
    call("MPI_Keyval_free", COMM_WORLD, || unsafe {
        free_keyval(Kind::Comm, keyval)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Attr_put(comm: c_int, keyval: c_int, value: *mut c_void) -> c_int {
    // SAFETY: passed on.
    call("MPI_Attr_put", comm, || unsafe {
        set_attr((Kind::Comm, comm), keyval, value)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Attr_get(
    comm: c_int,
    keyval: c_int,
    value: *mut c_void,
    flag: *mut c_int,
) -> c_int {
    // SAFETY: passed on.
    call("MPI_Attr_get", comm, || unsafe {
        get_attr((Kind::Comm, comm), keyval, value, flag)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Attr_delete(comm: c_int, keyval: c_int) -> c_int {
    // SAFETY: passed on.
    call("MPI_Attr_delete", comm, || unsafe {
        delete_attr((Kind::Comm, comm), keyval)
    })
}

// ---- datatypes -------------------------------------------------------------

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_create_keyval(
    copy: Option<CopyFn>,
    delete: Option<DeleteFn>,
    keyval: *mut c_int,
    extra: *mut c_void,
) -> c_int {
    call("MPI_Type_create_keyval", COMM_WORLD, || {
        create_keyval(Kind::Type, copy, delete, keyval, extra)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_free_keyval(keyval: *mut c_int) -> c_int {
    // SAFETY: passed on.
    call("MPI_Type_free_keyval", COMM_WORLD, || unsafe {
        free_keyval(Kind::Type, keyval)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_set_attr(
    datatype: c_int,
    keyval: c_int,
    value: *mut c_void,
) -> c_int {
    // SAFETY: passed on.
    call("MPI_Type_set_attr", COMM_WORLD, || unsafe {
        set_attr((Kind::Type, datatype), keyval, value)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_get_attr(
    datatype: c_int,
    keyval: c_int,
    value: *mut c_void,
    flag: *mut c_int,
) -> c_int {
    // SAFETY: passed on.
    call("MPI_Type_get_attr", COMM_WORLD, || unsafe {
        get_attr((Kind::Type, datatype), keyval, value, flag)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_delete_attr(datatype: c_int, keyval: c_int) -> c_int {
    // SAFETY: passed on.
    call("MPI_Type_delete_attr", COMM_WORLD, || unsafe {
        delete_attr((Kind::Type, datatype), keyval)
    })
}

// ---- names -----------------------------------------------------------------

/// A C string argument, at most `max` bytes long (longer ones are cut, as MPI
/// allows for names).
pub(super) unsafe fn c_str(p: *const c_char, what: &str) -> Result<String, MpiError> {
    if p.is_null() {
        return Err(MpiError::new(Class::Arg, format!("{what} is NULL")));
    }
    // SAFETY: the caller passes a NUL-terminated string.
    Ok(unsafe { std::ffi::CStr::from_ptr(p) }
        .to_string_lossy()
        .into_owned())
}

/// Writes `text` and its NUL into `dst` (room for `max` chars), cut to fit, and
/// its length into `len` (if not NULL).
pub(super) unsafe fn put_str(
    dst: *mut c_char,
    len: *mut c_int,
    text: &str,
    max: usize,
) -> Result<(), MpiError> {
    if dst.is_null() {
        return Err(MpiError::new(Class::Arg, "the string argument is NULL"));
    }
    let b = &text.as_bytes()[..text.len().min(max - 1)];
    // SAFETY: the caller passes room for `max` chars.
    unsafe {
        std::ptr::copy_nonoverlapping(b.as_ptr(), dst as *mut u8, b.len());
        dst.add(b.len()).write(0);
        if !len.is_null() {
            len.write(b.len() as c_int);
        }
    }
    Ok(())
}

/// Cuts a name to `MPI_MAX_OBJECT_NAME - 1` bytes (on a character boundary).
fn cut(mut name: String) -> String {
    let mut n = name.len().min(MAX_OBJECT_NAME - 1);
    while !name.is_char_boundary(n) {
        n -= 1;
    }
    name.truncate(n);
    name
}

fn set_name(obj: Obj, name: *const c_char) -> Result<(), MpiError> {
    // SAFETY: a C string.
    let name = cut(unsafe { c_str(name, "the name")? });
    state::with(|s| {
        check_obj(s, obj)?;
        s.attrs.set_name(obj, name);
        Ok(())
    })
}

/// The name of `obj`: the one set, else the predefined handle's own, else "".
fn name_of(s: &state::State, obj: Obj) -> Result<String, MpiError> {
    check_obj(s, obj)?;
    if let Some(n) = s.attrs.name(obj) {
        return Ok(n.to_string());
    }
    Ok(match obj {
        (Kind::Comm, COMM_WORLD) => "MPI_COMM_WORLD".into(),
        (Kind::Comm, state::COMM_SELF) => "MPI_COMM_SELF".into(),
        (Kind::Type, h) => types::predefined(h).map_or_else(String::new, |t| t.name),
        _ => String::new(),
    })
}

fn get_name(obj: Obj, name: *mut c_char, len: *mut c_int) -> Result<(), MpiError> {
    let n = state::with(|s| name_of(s, obj))?;
    if len.is_null() {
        return Err(MpiError::new(Class::Arg, "resultlen is NULL"));
    }
    // SAFETY: room for MPI_MAX_OBJECT_NAME chars.
    unsafe { put_str(name, len, &n, MAX_OBJECT_NAME) }
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_set_name(comm: c_int, name: *const c_char) -> c_int {
    call("MPI_Comm_set_name", comm, || {
        set_name((Kind::Comm, comm), name)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Comm_get_name(
    comm: c_int,
    name: *mut c_char,
    len: *mut c_int,
) -> c_int {
    call("MPI_Comm_get_name", comm, || {
        get_name((Kind::Comm, comm), name, len)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_set_name(datatype: c_int, name: *const c_char) -> c_int {
    call("MPI_Type_set_name", COMM_WORLD, || {
        set_name((Kind::Type, datatype), name)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Type_get_name(
    datatype: c_int,
    name: *mut c_char,
    len: *mut c_int,
) -> c_int {
    call("MPI_Type_get_name", COMM_WORLD, || {
        get_name((Kind::Type, datatype), name, len)
    })
}
