//! The process's MPI state: handle tables (communicators, groups, datatypes,
//! operations, requests) and the checks every call makes on its arguments. Safe
//! code only; the C boundary is `ffi`.

use crate::error::{Class, MpiError};
use crate::types::{self, TypeInfo};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// Hashes a handle in a few instructions. The tables below are read on every call
/// (`MPI_Send` looks up a communicator, `MPI_Wait` a request), and SipHash, made
/// against keys chosen to collide, cost more than the rest of the lookup: handles
/// are numbers this layer hands out, not keys a stranger chooses.
#[derive(Default, Clone, Copy)]
pub struct HandleHasher(u64);

impl Hasher for HandleHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_i32(&mut self, n: i32) {
        self.write_u64(u64::from(n as u32));
    }
    fn write_u64(&mut self, n: u64) {
        // The low bits pick the bucket and the top seven are the table's tag: a
        // multiply by an odd constant keeps consecutive handles apart in both.
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// A table keyed by handles.
pub type HandleMap<V> = HashMap<i32, V, BuildHasherDefault<HandleHasher>>;

/// `MPI_ANY_SOURCE`.
pub const ANY_SOURCE: i32 = -2;
/// `MPI_PROC_NULL`.
pub const PROC_NULL: i32 = -1;
/// `MPI_ANY_TAG`.
pub const ANY_TAG: i32 = -1;
/// `MPI_UNDEFINED`.
pub const UNDEFINED: i32 = -32766;
/// Largest tag a program may use (tags above are the layer's own).
pub const TAG_UB: i32 = (1 << 30) - 1;
/// `MPI_COMM_WORLD`.
pub const COMM_WORLD: i32 = 1;
/// `MPI_COMM_SELF`.
pub const COMM_SELF: i32 = 2;
/// `MPI_GROUP_EMPTY`.
pub const GROUP_EMPTY: i32 = 1;
/// `MPI_ERRORS_ARE_FATAL`.
pub const ERRORS_ARE_FATAL: i32 = 1;
/// `MPI_ERRORS_RETURN`.
pub const ERRORS_RETURN: i32 = 2;
/// First handle given to a derived datatype.
const FIRST_DERIVED_TYPE: i32 = 1000;
/// First handle given to a user operation.
const FIRST_USER_OP: i32 = 100;

/// A C user function: `void f(void *invec, void *inoutvec, int *len, MPI_Datatype *t)`.
pub type UserFn = unsafe extern "C" fn(*mut libc::c_void, *mut libc::c_void, *mut i32, *mut i32);

/// An operation: predefined or the program's.
#[derive(Clone, Copy)]
pub enum OpKind {
    /// One of `mpi.h`'s.
    Predefined(types::Op),
    /// `MPI_Op_create`'s.
    User {
        /// The function.
        f: UserFn,
        /// Whether it commutes.
        commute: bool,
    },
}

/// A communicator: the libqcg communicator the program's messages use, a twin for
/// the collectives this layer builds from point-to-point (never meets user
/// messages), and its error handler.
pub struct CommEntry {
    /// User traffic and libqcg's collectives.
    pub comm: Arc<qcg::Comm>,
    /// Point-to-point traffic of the v-collectives and scans.
    pub twin: Arc<qcg::Comm>,
    /// `MPI_ERRORS_ARE_FATAL` or `MPI_ERRORS_RETURN`.
    pub errhandler: i32,
    /// `MPI_Comm_create_group` calls made on it, per (group's job ranks, tag):
    /// the members number their calls alike, which keeps the new contexts apart.
    pub create_group_calls: HashMap<(Vec<u32>, i32), u32>,
    /// Duplicates made of it (`MPI_Comm_dup`, `idup`, `dup_with_info`): every rank
    /// counts them alike, which keeps the new contexts apart without a message.
    pub dups: u64,
    /// The remote group of an intercommunicator (`comm` and `twin` are then its
    /// local group's); `None` for an intracommunicator.
    pub remote: Option<Remote>,
    /// Its process topology (`MPI_Cart_create`, `MPI_Graph_create`, …), if any.
    pub topo: Option<Arc<crate::topo::Topology>>,
}

/// The remote side of an intercommunicator (see [`crate::inter`]).
pub struct Remote {
    /// The remote group's job ranks, in remote rank order.
    pub members: Vec<u32>,
    /// The program's point-to-point messages: its ranks are the remote group's.
    pub user: Arc<qcg::Comm>,
    /// This layer's collectives across the groups, ranks as in `user`.
    pub coll: Arc<qcg::Comm>,
    /// Derives the keys of the contexts made from this intercommunicator.
    pub seed: u64,
    /// Communicators made from it so far (dup, merge).
    pub made: u32,
}

impl CommEntry {
    /// The communicator of the program's point-to-point calls: ranks are the
    /// remote group's on an intercommunicator.
    pub fn p2p(&self) -> &Arc<qcg::Comm> {
        self.remote.as_ref().map_or(&self.comm, |r| &r.user)
    }
}

/// What a receive request writes to when it completes.
pub enum Meta {
    /// A send, or a receive straight into the caller's buffer.
    Plain,
    /// A receive into a packed buffer, unpacked into the caller's at `base`.
    Unpack {
        /// The caller's buffer address.
        base: usize,
        /// Elements it holds.
        count: usize,
        /// Their type.
        ty: Arc<TypeInfo>,
    },
    /// A request on `MPI_PROC_NULL`: complete at once.
    Null,
    /// A non-blocking collective: writes its output into the caller's buffers.
    Finish(Finish),
    /// A generalized request: the program's functions give its status and free it.
    Greq(Greq),
}

/// `MPI_Grequest_query_function`.
pub type GreqQuery =
    unsafe extern "C" fn(*mut libc::c_void, *mut crate::ffi::MpiStatus) -> libc::c_int;
/// `MPI_Grequest_free_function`.
pub type GreqFree = unsafe extern "C" fn(*mut libc::c_void) -> libc::c_int;
/// `MPI_Grequest_cancel_function`.
pub type GreqCancel = unsafe extern "C" fn(*mut libc::c_void, libc::c_int) -> libc::c_int;

/// A generalized request's functions and their state (MPI 3.1 §12.2).
pub struct Greq {
    /// Fills the status at completion.
    pub query: Option<GreqQuery>,
    /// Frees the program's state once the request is completed and freed.
    pub free: Option<GreqFree>,
    /// Told of `MPI_Cancel`.
    pub cancel: Option<GreqCancel>,
    /// The program's `extra_state`.
    pub extra: usize,
}

/// What completing a non-blocking collective does with its output (called once).
pub type Finish = Box<dyn Fn(&[u8]) -> Result<(), MpiError> + Send>;

/// A request handle's content.
pub struct Req {
    /// The libqcg request (`None` for `MPI_PROC_NULL`).
    pub inner: Option<qcg::Request>,
    /// What completion does.
    pub meta: Meta,
    /// Whether `MPI_Cancel` succeeded on it.
    pub cancelled: bool,
    /// Its communicator's handle (for the error handler).
    pub comm: i32,
}

/// Everything `MPI_Init` made.
pub struct State {
    /// This process's rank in `MPI_COMM_WORLD`.
    pub rank: u32,
    comms: HandleMap<CommEntry>,
    next_comm: i32,
    /// Groups as lists of job ranks.
    groups: HandleMap<Vec<u32>>,
    next_group: i32,
    types: HandleMap<Arc<TypeInfo>>,
    next_type: i32,
    /// Handles of freed derived types, reused last-freed first (as MPICH and
    /// Open MPI do: handles stay small, and code that keeps a freed handle
    /// across a free and a create finds the new type, as it does there).
    free_types: Vec<i32>,
    ops: HandleMap<OpKind>,
    next_op: i32,
    /// Open requests.
    pub requests: HandleMap<Req>,
    next_req: i32,
    /// Requests the program freed before they completed (completed at finalize,
    /// a receive's data unpacked then).
    pub orphans: Vec<Req>,
    /// What completes each generalized request not yet completed, by handle (kept
    /// apart from the request: `MPI_Grequest_complete` may come after
    /// `MPI_Request_free`).
    pub greqs: HandleMap<qcg::Completer>,
    /// The thread level granted.
    pub thread_level: i32,
    /// Keyvals, attributes and names of communicators and datatypes.
    pub attrs: crate::attrs::Attrs,
    /// Info objects and communicators' hints.
    pub infos: crate::info::Infos,
    /// The program's error handlers and error codes.
    pub handlers: crate::handlers::Handlers,
    /// `MPI_Intercomm_create` calls made per local group (job ranks): the count
    /// goes into the new intercommunicator's contexts.
    pub intercomm_calls: HashMap<Vec<u32>, u32>,
    /// Buffered sends, persistent requests, matched messages (see [`crate::modes`]).
    pub p2p: crate::modes::P2p,
}

static STATE: Mutex<Option<State>> = Mutex::new(None);

/// The global state (poisoning ignored: a panic aborts the process anyway).
pub fn lock() -> MutexGuard<'static, Option<State>> {
    STATE.lock().unwrap_or_else(|p| p.into_inner())
}

/// Bumped by every change to the communicators or datatypes, and when the state is
/// installed or taken: a cached lookup holds while it is unchanged.
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// The last lookup of [`with_comm_ty`] in this thread.
struct Cached {
    generation: u64,
    comm: i32,
    ty: i32,
    c: Arc<qcg::Comm>,
    t: Arc<TypeInfo>,
    /// The bytes of one element if the datatype is plain: contiguous, no overlap
    /// (a buffer of `n` elements is `n * plain` bytes from its address).
    plain: Option<usize>,
}

thread_local! {
    static LAST: RefCell<Option<Cached>> = const { RefCell::new(None) };
    /// Whether this thread caches: only the one that installed the state, which
    /// also takes it at `MPI_Finalize` and then drops its cache (a cache holds the
    /// communicator, and the last communicator's drop is what shuts the engine down:
    /// another thread's would keep it alive past `MPI_Finalize`).
    static CACHING: Cell<bool> = const { Cell::new(false) };
}

fn changed() {
    GENERATION.fetch_add(1, Ordering::AcqRel);
}

/// Installs the state (`MPI_Init`); this thread caches lookups from now on.
pub fn install(st: State) {
    *lock() = Some(st);
    changed();
    CACHING.with(|c| c.set(true));
}

/// Takes the state (`MPI_Finalize`), and this thread's cached lookup with it.
pub fn uninstall() -> Option<State> {
    let st = lock().take();
    changed();
    CACHING.with(|c| c.set(false));
    LAST.with(|l| {
        if let Ok(mut l) = l.try_borrow_mut() {
            *l = None;
        }
    });
    st
}

/// Runs `f` on the point-to-point communicator of handle `h` and the committed
/// datatype of handle `t`: what every send and receive looks up first. The thread
/// that initialized MPI keeps its last lookup and, while no communicator or datatype
/// has changed since, finds it again without the state's lock, a table lookup or a
/// reference count (`MPI_Send` and `MPI_Recv` in a loop look up the same pair).
pub fn with_comm_ty<R>(
    h: i32,
    t: i32,
    f: impl FnOnce(&Arc<qcg::Comm>, &Arc<TypeInfo>) -> Result<R, MpiError>,
) -> Result<R, MpiError> {
    let generation = GENERATION.load(Ordering::Acquire);
    LAST.with(|last| {
        // Borrowed already: a call made from inside `f` (then it looks up as others do).
        if let Ok(slot) = last.try_borrow() {
            if let Some(k) = slot.as_ref() {
                if k.generation == generation && k.comm == h && k.ty == t {
                    return f(&k.c, &k.t);
                }
            }
        }
        let (c, ty) = with(|s| Ok((s.comm(h)?.p2p().clone(), s.ty(t)?)))?;
        if CACHING.with(Cell::get) {
            if let Ok(mut slot) = last.try_borrow_mut() {
                *slot = Some(Cached {
                    generation,
                    comm: h,
                    ty: t,
                    c: c.clone(),
                    plain: (ty.is_contiguous() && !ty.overlaps).then_some(ty.size),
                    t: ty.clone(),
                });
            }
        }
        f(&c, &ty)
    })
}

/// The common case of a send or receive, without a lookup: runs `f` on the
/// point-to-point communicator of handle `h` and the bytes per element of datatype
/// `t` if this thread's last lookup ([`with_comm_ty`]) was of that pair, still holds
/// and the datatype is plain (contiguous, committed, not overlapping itself). `None`
/// otherwise: the caller then takes its full path, which also caches the pair.
#[inline]
pub fn with_plain<R>(h: i32, t: i32, f: impl FnOnce(&qcg::Comm, usize) -> R) -> Option<R> {
    let generation = GENERATION.load(Ordering::Acquire);
    LAST.with(|last| {
        let slot = last.try_borrow().ok()?;
        let k = slot.as_ref()?;
        if k.generation == generation && k.comm == h && k.ty == t {
            let elem = k.plain?;
            return Some(f(&k.c, elem));
        }
        None
    })
}

/// Runs `f` on the state, or fails if MPI is not initialized.
pub fn with<T>(f: impl FnOnce(&mut State) -> Result<T, MpiError>) -> Result<T, MpiError> {
    let mut g = lock();
    match g.as_mut() {
        Some(s) => f(s),
        None => Err(MpiError::new(
            Class::Other,
            "MPI is not initialized (call MPI_Init first) or already finalized",
        )),
    }
}

impl State {
    /// A state around the world communicator.
    pub fn new(world: qcg::Comm, thread_level: i32) -> Result<State, MpiError> {
        let rank = world.rank();
        let world = Arc::new(world);
        let mut s = State {
            rank,
            comms: HandleMap::default(),
            next_comm: 3,
            groups: HandleMap::default(),
            next_group: 2,
            types: HandleMap::default(),
            next_type: FIRST_DERIVED_TYPE,
            free_types: Vec::new(),
            ops: HandleMap::default(),
            next_op: FIRST_USER_OP,
            requests: HandleMap::default(),
            next_req: 1,
            orphans: Vec::new(),
            greqs: HandleMap::default(),
            thread_level,
            attrs: crate::attrs::Attrs::default(),
            infos: crate::info::Infos::new(crate::info::Info::default()),
            handlers: crate::handlers::Handlers::default(),
            intercomm_calls: HashMap::new(),
            p2p: Default::default(),
        };
        let wtwin = twin(&world)?;
        s.comms.insert(
            COMM_WORLD,
            CommEntry {
                comm: world.clone(),
                twin: wtwin,
                errhandler: ERRORS_ARE_FATAL,
                create_group_calls: HashMap::new(),
                dups: 0,
                remote: None,
                topo: None,
            },
        );
        let me = world
            .split(Some(rank), 0)?
            .ok_or_else(|| MpiError::new(Class::Intern, "MPI_COMM_SELF: no communicator"))?;
        let me = Arc::new(me);
        let stwin = twin(&me)?;
        s.comms.insert(
            COMM_SELF,
            CommEntry {
                comm: me,
                twin: stwin,
                errhandler: ERRORS_ARE_FATAL,
                create_group_calls: HashMap::new(),
                dups: 0,
                remote: None,
                topo: None,
            },
        );
        Ok(s)
    }

    /// The communicator of handle `h`.
    pub fn comm(&self, h: i32) -> Result<&CommEntry, MpiError> {
        self.comms
            .get(&h)
            .ok_or_else(|| MpiError::new(Class::Comm, format!("{h} is not a communicator")))
    }

    /// The intracommunicator of handle `h`: an intercommunicator fails with
    /// `MPI_ERR_COMM` naming call `name`, which needs an intracommunicator.
    pub fn intra(&self, h: i32, name: &str) -> Result<&CommEntry, MpiError> {
        let c = self.comm(h)?;
        if c.remote.is_some() {
            return Err(MpiError::new(
                Class::Comm,
                format!("{name} needs an intracommunicator; {h} is an intercommunicator"),
            ));
        }
        Ok(c)
    }

    /// Registers an intercommunicator over local group `local` (its twin made
    /// here: collective over `local`).
    pub fn add_inter(
        &mut self,
        local: qcg::Comm,
        remote: Remote,
        errhandler: i32,
    ) -> Result<i32, MpiError> {
        let h = self.add_comm(local, errhandler)?;
        if let Some(c) = self.comms.get_mut(&h) {
            c.remote = Some(remote);
        }
        changed();
        Ok(h)
    }

    /// The remote side of intercommunicator `h`, to change (counts of derived
    /// communicators).
    pub fn remote_mut(&mut self, h: i32) -> Result<&mut Remote, MpiError> {
        changed();
        self.comms
            .get_mut(&h)
            .ok_or_else(|| MpiError::new(Class::Comm, format!("{h} is not a communicator")))?
            .remote
            .as_mut()
            .ok_or_else(|| MpiError::new(Class::Comm, format!("{h} is not an intercommunicator")))
    }

    /// Sets a communicator's error handler.
    pub fn set_errhandler(&mut self, h: i32, e: i32) -> Result<(), MpiError> {
        self.handlers.check(e)?;
        let c = self
            .comms
            .get_mut(&h)
            .ok_or_else(|| MpiError::new(Class::Comm, format!("{h} is not a communicator")))?;
        c.errhandler = e;
        Ok(())
    }

    /// The error handler in force for calls on communicator `h` (the world's when
    /// `h` is not a communicator).
    pub fn errhandler(&self, h: i32) -> i32 {
        self.comms
            .get(&h)
            .or_else(|| self.comms.get(&COMM_WORLD))
            .map_or(ERRORS_ARE_FATAL, |c| c.errhandler)
    }

    /// Registers a new communicator (its twin made here: collective over `comm`).
    pub fn add_comm(&mut self, comm: qcg::Comm, errhandler: i32) -> Result<i32, MpiError> {
        let comm = Arc::new(comm);
        let t = twin(&comm)?;
        let h = self.next_comm;
        self.next_comm += 1;
        self.comms.insert(
            h,
            CommEntry {
                comm,
                twin: t,
                errhandler,
                create_group_calls: HashMap::new(),
                dups: 0,
                remote: None,
                topo: None,
            },
        );
        changed();
        Ok(h)
    }

    /// The number of the next duplicate of communicator `h` (counted).
    pub fn next_dup(&mut self, h: i32) -> Result<u64, MpiError> {
        let c = self
            .comms
            .get_mut(&h)
            .ok_or_else(|| MpiError::new(Class::Comm, format!("{h} is not a communicator")))?;
        c.dups += 1;
        Ok(c.dups)
    }

    /// Gives communicator `h` a process topology.
    pub fn set_topo(
        &mut self,
        h: i32,
        topo: Option<Arc<crate::topo::Topology>>,
    ) -> Result<(), MpiError> {
        let c = self
            .comms
            .get_mut(&h)
            .ok_or_else(|| MpiError::new(Class::Comm, format!("{h} is not a communicator")))?;
        c.topo = topo;
        Ok(())
    }

    /// The number of this `MPI_Comm_create_group` call on communicator `h` with
    /// `group` (job ranks) and `tag`: 0 the first time, then 1, 2, …
    pub fn next_create_group(&mut self, h: i32, group: &[u32], tag: i32) -> Result<u32, MpiError> {
        let c = self
            .comms
            .get_mut(&h)
            .ok_or_else(|| MpiError::new(Class::Comm, format!("{h} is not a communicator")))?;
        let n = c
            .create_group_calls
            .entry((group.to_vec(), tag))
            .or_insert(0);
        let this = *n;
        *n += 1;
        Ok(this)
    }

    /// Frees communicator `h`.
    pub fn free_comm(&mut self, h: i32) -> Result<(), MpiError> {
        if h == COMM_WORLD || h == COMM_SELF {
            return Err(MpiError::new(
                Class::Comm,
                "MPI_COMM_WORLD and MPI_COMM_SELF cannot be freed",
            ));
        }
        self.comms
            .remove(&h)
            .ok_or_else(|| MpiError::new(Class::Comm, format!("{h} is not a communicator")))?;
        self.attrs.forget((crate::attrs::Kind::Comm, h));
        self.infos.hints.remove(&h);
        changed();
        Ok(())
    }

    /// The datatype of handle `h`, committed.
    pub fn ty(&self, h: i32) -> Result<Arc<TypeInfo>, MpiError> {
        let t = self.any_ty(h)?;
        if !t.committed {
            return Err(MpiError::new(
                Class::Type,
                format!("datatype {} is not committed", t.name),
            ));
        }
        Ok(t)
    }

    /// The datatype of handle `h`, committed or not.
    pub fn any_ty(&self, h: i32) -> Result<Arc<TypeInfo>, MpiError> {
        if let Some(t) = predefined(h) {
            return Ok(t);
        }
        self.types
            .get(&h)
            .cloned()
            .ok_or_else(|| MpiError::new(Class::Type, format!("{h} is not a datatype")))
    }

    /// Registers a derived datatype.
    pub fn add_type(&mut self, t: TypeInfo) -> i32 {
        let h = self.free_types.pop().unwrap_or_else(|| {
            self.next_type += 1;
            self.next_type - 1
        });
        self.types.insert(h, Arc::new(t));
        changed();
        h
    }

    /// Commits derived datatype `h` (predefined ones are committed already).
    pub fn commit_type(&mut self, h: i32) -> Result<(), MpiError> {
        if types::predefined(h).is_some() {
            return Ok(());
        }
        let t = self
            .types
            .get_mut(&h)
            .ok_or_else(|| MpiError::new(Class::Type, format!("{h} is not a datatype")))?;
        Arc::make_mut(t).committed = true;
        changed();
        Ok(())
    }

    /// Frees derived datatype `h`.
    pub fn free_type(&mut self, h: i32) -> Result<(), MpiError> {
        if types::predefined(h).is_some() {
            return Err(MpiError::new(
                Class::Type,
                "a predefined datatype cannot be freed",
            ));
        }
        self.types
            .remove(&h)
            .ok_or_else(|| MpiError::new(Class::Type, format!("{h} is not a datatype")))?;
        self.free_types.push(h);
        self.attrs.forget((crate::attrs::Kind::Type, h));
        changed();
        Ok(())
    }

    /// The operation of handle `h`.
    pub fn op(&self, h: i32) -> Result<OpKind, MpiError> {
        if let Some(op) = types::Op::from_handle(h) {
            return Ok(OpKind::Predefined(op));
        }
        if h == 13 || h == 14 {
            return Err(MpiError::new(
                Class::Op,
                format!(
                    "{} is an operation of one-sided communication, which qcg does not provide",
                    if h == 13 { "MPI_REPLACE" } else { "MPI_NO_OP" }
                ),
            ));
        }
        self.ops
            .get(&h)
            .copied()
            .ok_or_else(|| MpiError::new(Class::Op, format!("{h} is not an operation")))
    }

    /// Registers a user operation.
    pub fn add_op(&mut self, f: UserFn, commute: bool) -> i32 {
        let h = self.next_op;
        self.next_op += 1;
        self.ops.insert(h, OpKind::User { f, commute });
        h
    }

    /// Frees user operation `h`.
    pub fn free_op(&mut self, h: i32) -> Result<(), MpiError> {
        self.ops
            .remove(&h)
            .map(|_| ())
            .ok_or_else(|| MpiError::new(Class::Op, format!("{h} is not a user operation")))
    }

    /// The members (job ranks) of group `h`.
    pub fn group(&self, h: i32) -> Result<&[u32], MpiError> {
        if h == GROUP_EMPTY {
            return Ok(&[]);
        }
        self.groups
            .get(&h)
            .map(Vec::as_slice)
            .ok_or_else(|| MpiError::new(Class::Group, format!("{h} is not a group")))
    }

    /// Registers a group of job ranks.
    pub fn add_group(&mut self, members: Vec<u32>) -> i32 {
        if members.is_empty() {
            return GROUP_EMPTY;
        }
        let h = self.next_group;
        self.next_group += 1;
        self.groups.insert(h, members);
        h
    }

    /// Frees group `h`.
    pub fn free_group(&mut self, h: i32) -> Result<(), MpiError> {
        if h == GROUP_EMPTY {
            return Ok(());
        }
        self.groups
            .remove(&h)
            .map(|_| ())
            .ok_or_else(|| MpiError::new(Class::Group, format!("{h} is not a group")))
    }

    /// Registers a request.
    pub fn add_request(&mut self, r: Req) -> i32 {
        let h = self.next_req;
        self.next_req = if self.next_req == i32::MAX {
            1
        } else {
            self.next_req + 1
        };
        self.requests.insert(h, r);
        h
    }
}

/// The predefined datatype of handle `h`, made once (every call looks one up).
fn predefined(h: i32) -> Option<Arc<TypeInfo>> {
    static TABLE: std::sync::OnceLock<Vec<Option<Arc<TypeInfo>>>> = std::sync::OnceLock::new();
    let t = TABLE.get_or_init(|| {
        (0..=types::LAST_PREDEFINED)
            .map(|h| types::predefined(h).map(Arc::new))
            .collect()
    });
    usize::try_from(h)
        .ok()
        .and_then(|i| t.get(i))
        .cloned()
        .flatten()
}

/// The job ranks of a communicator's members, in its rank order.
pub fn members(c: &qcg::Comm) -> Vec<u32> {
    (0..c.size()).filter_map(|r| c.job_rank_of(r)).collect()
}

/// The key of a communicator's twin among the communicators made over all its
/// members ([`qcg::Comm::subset`]; duplicates use keys below 2^63).
const TWIN_KEY: u64 = 0x8000_0000_7717_0000;

/// A communicator's twin: every member derives its context alike from the
/// communicator's, without a message.
fn twin(c: &qcg::Comm) -> Result<Arc<qcg::Comm>, MpiError> {
    let all: Vec<u32> = (0..c.size()).collect();
    let t = c
        .subset(&all, TWIN_KEY)?
        .ok_or_else(|| MpiError::new(Class::Intern, "a communicator's twin is missing"))?;
    Ok(Arc::new(t))
}

/// Checks a count argument.
pub fn count(n: i32) -> Result<usize, MpiError> {
    usize::try_from(n).map_err(|_| MpiError::new(Class::Count, format!("count {n} is negative")))
}

/// Checks a destination rank: `None` for `MPI_PROC_NULL`.
pub fn dest(c: &qcg::Comm, r: i32) -> Result<Option<u32>, MpiError> {
    if r == PROC_NULL {
        return Ok(None);
    }
    match u32::try_from(r) {
        Ok(r) if r < c.size() => Ok(Some(r)),
        _ => Err(MpiError::new(
            Class::Rank,
            format!("rank {r} is not in the communicator (size {})", c.size()),
        )),
    }
}

/// A source rank: `Err` if invalid, `Ok(None)` for `MPI_PROC_NULL`, `Ok(Some(None))`
/// for `MPI_ANY_SOURCE`.
pub fn source(c: &qcg::Comm, r: i32) -> Result<Option<Option<u32>>, MpiError> {
    if r == ANY_SOURCE {
        return Ok(Some(None));
    }
    Ok(dest(c, r)?.map(Some))
}

/// Checks a send tag.
pub fn send_tag(t: i32) -> Result<u32, MpiError> {
    match u32::try_from(t) {
        Ok(t) if t <= TAG_UB as u32 => Ok(t),
        _ => Err(MpiError::new(
            Class::Tag,
            format!("tag {t} is outside 0..={TAG_UB}"),
        )),
    }
}

/// Checks a receive tag (`MPI_ANY_TAG` gives `None`).
pub fn recv_tag(t: i32) -> Result<Option<u32>, MpiError> {
    if t == ANY_TAG {
        return Ok(None);
    }
    send_tag(t).map(Some)
}

/// Checks a root rank.
pub fn root(c: &qcg::Comm, r: i32) -> Result<u32, MpiError> {
    match u32::try_from(r) {
        Ok(r) if r < c.size() => Ok(r),
        _ => Err(MpiError::new(
            Class::Root,
            format!("root {r} is not in the communicator (size {})", c.size()),
        )),
    }
}

/// The color of `QCG_Comm_split_level`: the lowest rank of `c` sharing this rank's
/// topology path down to `level` (0 = site).
pub fn level_color(c: &qcg::Comm, level: i32) -> Result<u32, MpiError> {
    let topo = c.topology();
    let depth = topo.path(c.rank() as usize).len();
    let l = usize::try_from(level)
        .ok()
        .filter(|&l| l < depth)
        .ok_or_else(|| {
            MpiError::new(
                Class::Arg,
                format!("level {level} is not in 0..{depth} (site, node)"),
            )
        })?;
    let mine = &topo.path(c.rank() as usize)[..=l];
    Ok((0..c.size())
        .find(|&r| &topo.path(r as usize)[..=l] == mine)
        .unwrap_or(c.rank()))
}

/// How `MPI_Comm_compare` relates two member lists.
pub fn compare(same_handle: bool, a: &[u32], b: &[u32]) -> i32 {
    if same_handle {
        return 0;
    }
    if a == b {
        return 1;
    }
    let (mut x, mut y) = (a.to_vec(), b.to_vec());
    x.sort_unstable();
    y.sort_unstable();
    if x == y {
        2
    } else {
        3
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compare_tells_congruent_similar_unequal() {
        assert_eq!(compare(true, &[0, 1], &[0, 1]), 0);
        assert_eq!(compare(false, &[0, 1], &[0, 1]), 1);
        assert_eq!(compare(false, &[0, 1], &[1, 0]), 2);
        assert_eq!(compare(false, &[0, 1], &[0, 2]), 3);
    }

    #[test]
    fn tags_and_counts_are_checked() {
        assert_eq!(send_tag(-1).map_err(|e| e.class), Err(Class::Tag));
        assert_eq!(recv_tag(ANY_TAG), Ok(None));
        assert_eq!(send_tag(TAG_UB + 1).map_err(|e| e.class), Err(Class::Tag));
        assert_eq!(count(-3).map_err(|e| e.class), Err(Class::Count));
    }
}
