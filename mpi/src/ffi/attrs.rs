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

/// A Fortran copy callback (`COMM_COPY_ATTR_FUNCTION`): every argument by
/// reference, `V` the values' integer (address-sized, or MPI-1's `INTEGER`).
type FortranCopy<V> = unsafe extern "C" fn(
    *const c_int,
    *const c_int,
    *const V,
    *const V,
    *mut V,
    *mut c_int,
    *mut c_int,
);
/// A Fortran delete callback (`COMM_DELETE_ATTR_FUNCTION`).
type FortranDelete<V> =
    unsafe extern "C" fn(*const c_int, *const c_int, *const V, *const V, *mut c_int);

/// Calls a Fortran delete callback with values of type `V`.
unsafe fn fortran_delete<V: Copy>(h: c_int, d: &attrs::Delete, cast: fn(usize) -> V) -> c_int {
    // SAFETY: the program registered this procedure through a Fortran binding,
    // so it has Fortran's signature (the pointer's type is C's only for storage).
    let f: FortranDelete<V> = unsafe { std::mem::transmute(d.f) };
    let (value, extra, mut ierr) = (cast(d.value), cast(d.extra), 0);
    // SAFETY: locals, by reference as Fortran takes them.
    unsafe { f(&h, &d.keyval, &value, &extra, &mut ierr) };
    ierr
}

/// Calls a Fortran copy callback: (its code, whether it copied, the new value).
unsafe fn fortran_copy<V: Copy + Default + Into<i64>>(
    old: c_int,
    c: &attrs::Copy,
    cast: fn(usize) -> V,
) -> (c_int, bool, usize) {
    // SAFETY: as in `fortran_delete`.
    let f: FortranCopy<V> = unsafe { std::mem::transmute(c.f) };
    let (extra, value) = (cast(c.extra), cast(c.value));
    let (mut out, mut flag, mut ierr) = (V::default(), 0, 0);
    // SAFETY: locals, by reference as Fortran takes them.
    unsafe {
        f(
            &old, &c.keyval, &extra, &value, &mut out, &mut flag, &mut ierr,
        )
    };
    (ierr, flag != 0, out.into() as usize)
}

/// Runs a delete callback on object handle `h`.
unsafe fn run_delete(h: c_int, d: attrs::Delete) -> Result<(), MpiError> {
    // SAFETY: a function the program registered with this signature; the value
    // and extra state are the program's own, passed back untouched.
    let rc = unsafe {
        match d.lang {
            attrs::Lang::C => (d.f)(h, d.keyval, d.value as *mut c_void, d.extra as *mut c_void),
            attrs::Lang::Fortran => fortran_delete(h, &d, |v| v as i64),
            attrs::Lang::Fortran77 => fortran_delete(h, &d, |v| v as c_int),
        }
    };
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
        let (rc, copied, out) = match c.lang {
            attrs::Lang::C => {
                let mut out: *mut c_void = std::ptr::null_mut();
                let mut flag: c_int = 0;
                // SAFETY: a function the program registered with this C signature;
                // `out` and `flag` are locals it writes to.
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
                (rc, flag != 0, out as usize)
            }
            // SAFETY: a Fortran procedure the program registered.
            attrs::Lang::Fortran => unsafe { fortran_copy(old, &c, |v| v as i64) },
            // SAFETY: as above.
            attrs::Lang::Fortran77 => unsafe { fortran_copy(old, &c, |v| v as c_int) },
        };
        if rc != 0 {
            return Err(callback_failed("copy", c.keyval, rc));
        }
        if copied {
            state::with(|s| {
                s.attrs.put_copied((kind, new), c.keyval, out);
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

// ---- Fortran -----------------------------------------------------------------
//
// Fortran's attribute calls differ from C's beyond passing by reference: values
// are integers (`INTEGER(KIND=MPI_ADDRESS_KIND)`, MPI-1's `INTEGER`) kept as they
// are, a predefined attribute is its value (C gets a pointer to it), and the
// callbacks are Fortran procedures (see `attrs::Lang`). So these bindings are
// written here rather than generated.

use super::fortran::fset;

/// A Fortran attribute value: an address-sized integer, or MPI-1's `INTEGER`.
trait FValue: Copy {
    fn to_usize(self) -> usize;
    fn from_usize(v: usize) -> Self;
}

impl FValue for i64 {
    fn to_usize(self) -> usize {
        self as usize
    }
    fn from_usize(v: usize) -> Self {
        v as i64
    }
}

impl FValue for c_int {
    fn to_usize(self) -> usize {
        self as usize
    }
    fn from_usize(v: usize) -> Self {
        v as c_int
    }
}

unsafe fn f_create_keyval<V: FValue>(
    name: &str,
    lang: attrs::Lang,
    kind: Kind,
    copy: Option<CopyFn>,
    delete: Option<DeleteFn>,
    keyval: *mut c_int,
    extra: *const V,
    ierror: *mut c_int,
) {
    let r = call(name, COMM_WORLD, || {
        // SAFETY: the program's extra state, an integer.
        let extra = unsafe { get(extra, "the extra state")? }.to_usize();
        let k = state::with(|s| Ok(s.attrs.create_keyval_in(lang, kind, copy, delete, extra)))?;
        // SAFETY: an output integer.
        unsafe { put(keyval, k) }
    });
    // SAFETY: Fortran's ierror.
    unsafe { fset(ierror, r) };
}

unsafe fn f_set_attr<V: FValue>(name: &str, obj: Obj, k: *const c_int, value: *const V) -> c_int {
    call(
        name,
        if obj.0 == Kind::Comm {
            obj.1
        } else {
            COMM_WORLD
        },
        || {
            // SAFETY: Fortran's integers.
            let (k, v) = unsafe { (get(k, "the keyval")?, get(value, "the value")?) };
            // SAFETY: a value kept as it is (never dereferenced).
            unsafe { set_attr(obj, k, v.to_usize() as *mut c_void) }
        },
    )
}

unsafe fn f_get_attr<V: FValue>(
    name: &str,
    obj: Obj,
    k: *const c_int,
    value: *mut V,
    flag: *mut c_int,
) -> c_int {
    call(
        name,
        if obj.0 == Kind::Comm {
            obj.1
        } else {
            COMM_WORLD
        },
        || {
            // SAFETY: Fortran's keyval.
            let k = unsafe { get(k, "the keyval")? };
            let mut found: usize = 0;
            let mut f: c_int = 0;
            // SAFETY: locals.
            unsafe { get_attr(obj, k, (&mut found as *mut usize).cast(), &mut f)? };
            if f != 0 && obj.0 == Kind::Comm && attrs::is_predefined(k) {
                // C's value is a pointer to the int; Fortran's is the int.
                // SAFETY: one of this module's statics.
                found = unsafe { *(found as *const c_int) } as usize;
            }
            // SAFETY: Fortran's outputs (LOGICAL flag: 0 or 1).
            unsafe {
                put(flag, f)?;
                if f != 0 {
                    put(value, V::from_usize(found))?;
                }
            }
            Ok(())
        },
    )
}

#[no_mangle]
pub unsafe extern "C" fn mpi_comm_create_keyval_(
    copy: Option<CopyFn>,
    delete: Option<DeleteFn>,
    keyval: *mut c_int,
    extra: *const i64,
    ierror: *mut c_int,
) {
    let (l, k) = (attrs::Lang::Fortran, Kind::Comm);
    // SAFETY: Fortran's arguments.
    unsafe {
        f_create_keyval(
            "MPI_Comm_create_keyval",
            l,
            k,
            copy,
            delete,
            keyval,
            extra,
            ierror,
        )
    }
}

#[no_mangle]
pub unsafe extern "C" fn mpi_type_create_keyval_(
    copy: Option<CopyFn>,
    delete: Option<DeleteFn>,
    keyval: *mut c_int,
    extra: *const i64,
    ierror: *mut c_int,
) {
    let (l, k) = (attrs::Lang::Fortran, Kind::Type);
    // SAFETY: Fortran's arguments.
    unsafe {
        f_create_keyval(
            "MPI_Type_create_keyval",
            l,
            k,
            copy,
            delete,
            keyval,
            extra,
            ierror,
        )
    }
}

#[no_mangle]
pub unsafe extern "C" fn mpi_keyval_create_(
    copy: Option<CopyFn>,
    delete: Option<DeleteFn>,
    keyval: *mut c_int,
    extra: *const c_int,
    ierror: *mut c_int,
) {
    let (l, k) = (attrs::Lang::Fortran77, Kind::Comm);
    // SAFETY: Fortran's arguments.
    unsafe {
        f_create_keyval(
            "MPI_Keyval_create",
            l,
            k,
            copy,
            delete,
            keyval,
            extra,
            ierror,
        )
    }
}

/// The handle behind a Fortran handle argument (0 if it is missing: the call
/// then fails on the handle).
unsafe fn fhandle(h: *const c_int) -> c_int {
    // SAFETY: Fortran's integer.
    unsafe { get(h, "the handle") }.unwrap_or(0)
}

#[no_mangle]
pub unsafe extern "C" fn mpi_comm_set_attr_(
    comm: *const c_int,
    keyval: *const c_int,
    value: *const i64,
    ierror: *mut c_int,
) {
    // SAFETY: Fortran's arguments.
    unsafe {
        let obj = (Kind::Comm, fhandle(comm));
        fset(ierror, f_set_attr("MPI_Comm_set_attr", obj, keyval, value));
    }
}

#[no_mangle]
pub unsafe extern "C" fn mpi_comm_get_attr_(
    comm: *const c_int,
    keyval: *const c_int,
    value: *mut i64,
    flag: *mut c_int,
    ierror: *mut c_int,
) {
    // SAFETY: Fortran's arguments.
    unsafe {
        let obj = (Kind::Comm, fhandle(comm));
        fset(
            ierror,
            f_get_attr("MPI_Comm_get_attr", obj, keyval, value, flag),
        );
    }
}

#[no_mangle]
pub unsafe extern "C" fn mpi_type_set_attr_(
    datatype: *const c_int,
    keyval: *const c_int,
    value: *const i64,
    ierror: *mut c_int,
) {
    // SAFETY: Fortran's arguments.
    unsafe {
        let obj = (Kind::Type, fhandle(datatype));
        fset(ierror, f_set_attr("MPI_Type_set_attr", obj, keyval, value));
    }
}

#[no_mangle]
pub unsafe extern "C" fn mpi_type_get_attr_(
    datatype: *const c_int,
    keyval: *const c_int,
    value: *mut i64,
    flag: *mut c_int,
    ierror: *mut c_int,
) {
    // SAFETY: Fortran's arguments.
    unsafe {
        let obj = (Kind::Type, fhandle(datatype));
        fset(
            ierror,
            f_get_attr("MPI_Type_get_attr", obj, keyval, value, flag),
        );
    }
}

#[no_mangle]
pub unsafe extern "C" fn mpi_attr_put_(
    comm: *const c_int,
    keyval: *const c_int,
    value: *const c_int,
    ierror: *mut c_int,
) {
    // SAFETY: Fortran's arguments.
    unsafe {
        let obj = (Kind::Comm, fhandle(comm));
        fset(ierror, f_set_attr("MPI_Attr_put", obj, keyval, value));
    }
}

#[no_mangle]
pub unsafe extern "C" fn mpi_attr_get_(
    comm: *const c_int,
    keyval: *const c_int,
    value: *mut c_int,
    flag: *mut c_int,
    ierror: *mut c_int,
) {
    // SAFETY: Fortran's arguments.
    unsafe {
        let obj = (Kind::Comm, fhandle(comm));
        fset(ierror, f_get_attr("MPI_Attr_get", obj, keyval, value, flag));
    }
}

/// Fortran's `MPI_*_NULL_COPY_FN`: copies nothing.
unsafe extern "C" fn f_null_copy(
    _old: *const c_int,
    _keyval: *const c_int,
    _extra: *const c_void,
    _value: *const c_void,
    _out: *mut c_void,
    flag: *mut c_int,
    ierror: *mut c_int,
) {
    // SAFETY: Fortran's LOGICAL flag and ierror.
    unsafe {
        fset(flag, 0);
        fset(ierror, 0);
    }
}

/// Fortran's `MPI_*_NULL_DELETE_FN`: deletes nothing.
unsafe extern "C" fn f_null_delete(
    _h: *const c_int,
    _keyval: *const c_int,
    _value: *const c_void,
    _extra: *const c_void,
    ierror: *mut c_int,
) {
    // SAFETY: Fortran's ierror.
    unsafe { fset(ierror, 0) };
}

/// Fortran's `MPI_*_DUP_FN` of value type `V`: the copy is the value.
unsafe fn f_dup<V: Copy>(value: *const V, out: *mut V, flag: *mut c_int, ierror: *mut c_int) {
    // SAFETY: Fortran's arguments as MPI passes them.
    unsafe {
        out.write(value.read());
        fset(flag, 1);
        fset(ierror, 0);
    }
}

macro_rules! fortran_null_fns {
    ($($copy:ident, $delete:ident, $dup:ident, $v:ty);*) => {$(
        #[no_mangle]
        pub unsafe extern "C" fn $copy(
            old: *const c_int,
            keyval: *const c_int,
            extra: *const c_void,
            value: *const c_void,
            out: *mut c_void,
            flag: *mut c_int,
            ierror: *mut c_int,
        ) {
            // SAFETY: passed on.
            unsafe { f_null_copy(old, keyval, extra, value, out, flag, ierror) }
        }

        #[no_mangle]
        pub unsafe extern "C" fn $delete(
            h: *const c_int,
            keyval: *const c_int,
            value: *const c_void,
            extra: *const c_void,
            ierror: *mut c_int,
        ) {
            // SAFETY: passed on.
            unsafe { f_null_delete(h, keyval, value, extra, ierror) }
        }

        #[no_mangle]
        pub unsafe extern "C" fn $dup(
            _old: *const c_int,
            _keyval: *const c_int,
            _extra: *const $v,
            value: *const $v,
            out: *mut $v,
            flag: *mut c_int,
            ierror: *mut c_int,
        ) {
            // SAFETY: passed on.
            unsafe { f_dup(value, out, flag, ierror) }
        }
    )*};
}

fortran_null_fns!(
    mpi_comm_null_copy_fn_, mpi_comm_null_delete_fn_, mpi_comm_dup_fn_, i64;
    mpi_type_null_copy_fn_, mpi_type_null_delete_fn_, mpi_type_dup_fn_, i64;
    mpi_null_copy_fn_, mpi_null_delete_fn_, mpi_dup_fn_, c_int
);
