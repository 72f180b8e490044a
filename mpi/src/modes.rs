//! Point-to-point beyond standard sends (MPI 3.1 §3.4–3.9): the buffer attached for
//! buffered sends and its accounting, the recipes of persistent requests, the
//! messages a matched probe took, and the outcomes `MPI_Request_get_status` saw
//! before the program waits. Safe code; the C calls are in `ffi::p2p` and
//! `ffi::requests`.
//!
//! # Buffered sends
//! A buffered send copies its packed bytes and sends the copy (libqcg's `isend`
//! with owned bytes), so the call returns at once whatever the receiver does. The
//! attached buffer is not written to: it is the budget. Each pending send is
//! charged its bytes plus [`BSEND_OVERHEAD`] until it completes (its bytes left,
//! or for a large message reached the receiver), as MPI 3.1 §3.6 accounts it; a
//! send that does not fit fails with `MPI_ERR_BUFFER` naming the sizes.

use crate::error::{Class, MpiError};
use crate::state::HandleMap;
use crate::types::TypeInfo;
use std::sync::Arc;

/// `MPI_BSEND_OVERHEAD`: what each buffered send costs beyond its bytes.
pub const BSEND_OVERHEAD: usize = 64;
/// `MPI_MESSAGE_NULL`.
pub const MESSAGE_NULL: i32 = 0;
/// `MPI_MESSAGE_NO_PROC`: what a matched probe of `MPI_PROC_NULL` gives.
pub const MESSAGE_NO_PROC: i32 = 1;
/// First handle given to a matched message.
const FIRST_MESSAGE: i32 = 2;

/// The attached buffer of buffered sends, with the sends (`T`) still charged to it.
#[derive(Debug)]
pub struct Pool<T> {
    /// The address the program attached (given back by detach).
    pub addr: usize,
    /// Its size in bytes.
    pub size: usize,
    used: usize,
    pending: Vec<(T, usize)>,
}

impl<T> Pool<T> {
    /// A buffer of `size` bytes at `addr`, empty.
    pub fn new(addr: usize, size: usize) -> Pool<T> {
        Pool {
            addr,
            size,
            used: 0,
            pending: Vec::new(),
        }
    }

    /// Bytes charged to pending sends.
    pub fn used(&self) -> usize {
        self.used
    }

    /// Frees the space of the pending sends `done` says have completed.
    pub fn reap(&mut self, done: impl Fn(&T) -> bool) {
        let mut freed = 0;
        self.pending.retain(|(t, n)| {
            let gone = done(t);
            if gone {
                freed += n;
            }
            !gone
        });
        self.used -= freed;
    }

    /// What a send of `bytes` would be charged, if it fits in the free space.
    pub fn fits(&self, bytes: usize) -> Result<usize, MpiError> {
        let need = bytes.saturating_add(BSEND_OVERHEAD);
        let free = self.size - self.used;
        if need > free {
            return Err(MpiError::new(
                Class::Buffer,
                format!(
                    "a buffered send of {bytes} bytes needs {need} bytes of the attached buffer \
                     ({bytes} + MPI_BSEND_OVERHEAD {BSEND_OVERHEAD}) but only {free} of its {} \
                     are free ({} buffered sends pending)",
                    self.size,
                    self.pending.len()
                ),
            ));
        }
        Ok(need)
    }

    /// Charges a started send `charge` bytes (as [`Pool::fits`] computed).
    pub fn push(&mut self, t: T, charge: usize) {
        self.used += charge;
        self.pending.push((t, charge));
    }

    /// The sends still pending, taken out (detach waits for them).
    pub fn take_pending(&mut self) -> Vec<T> {
        self.used = 0;
        self.pending.drain(..).map(|(t, _)| t).collect()
    }
}

/// The mode of a send (MPI 3.1 §3.4), or a receive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `MPI_Send`.
    Standard,
    /// `MPI_Bsend`: copied, returns at once.
    Buffered,
    /// `MPI_Ssend`: completes once matched.
    Synchronous,
    /// `MPI_Rsend`: a receive is posted already (sent as a standard send).
    Ready,
    /// A receive.
    Recv,
}

/// What `MPI_Start` starts again: the arguments of `MPI_X_init`, checked.
#[derive(Clone)]
pub struct Persistent {
    /// Which call.
    pub mode: Mode,
    /// The buffer's address.
    pub buf: usize,
    /// Elements.
    pub count: usize,
    /// Their type (kept even if the program frees the handle).
    pub ty: Arc<TypeInfo>,
    /// The communicator.
    pub comm: Arc<qcg::Comm>,
    /// Its handle (for the error handler).
    pub comm_handle: i32,
    /// Destination or source: `None` for `MPI_PROC_NULL`, `Some(None)` for
    /// `MPI_ANY_SOURCE`.
    pub peer: Option<Option<u32>>,
    /// Tag (`None`: `MPI_ANY_TAG`).
    pub tag: Option<u32>,
}

/// A message a matched probe took: the receive that gets its bytes.
pub struct Matched {
    /// libqcg's receive of exactly that message.
    pub req: qcg::Request,
    /// Sender (rank in the communicator), tag and length.
    pub status: qcg::Status,
    /// The communicator's handle.
    pub comm: i32,
}

/// The first free `MPI_Message` handle from `next` on: never `MPI_MESSAGE_NULL` or
/// `MPI_MESSAGE_NO_PROC`, never one `taken`, wrapping past `i32::MAX`.
fn message_handle(next: i32, taken: impl Fn(i32) -> bool) -> i32 {
    let mut h = next.max(FIRST_MESSAGE);
    while taken(h) {
        h = if h == i32::MAX { FIRST_MESSAGE } else { h + 1 };
    }
    h
}

/// Everything this module keeps, one field of [`crate::state::State`].
#[derive(Default)]
pub struct P2p {
    /// The attached buffer, if any.
    pub buffer: Option<Pool<qcg::Request>>,
    /// Persistent requests by handle; one is active while its handle is also in
    /// the request table.
    pub persistent: HandleMap<Persistent>,
    /// Matched messages by `MPI_Message` handle.
    pub messages: HandleMap<Matched>,
    next_message: i32,
    /// Outcomes `MPI_Request_get_status` took from libqcg, by request handle,
    /// until the program waits for (or tests, or frees) the request.
    pub settled: HandleMap<Result<qcg::Completion, MpiError>>,
}

impl P2p {
    /// Registers a matched message.
    pub fn add_message(&mut self, m: Matched) -> i32 {
        let h = message_handle(self.next_message, |h| self.messages.contains_key(&h));
        self.next_message = h.wrapping_add(1);
        self.messages.insert(h, m);
        h
    }

    /// Whether `h` is a persistent request that is not active.
    pub fn inactive(&self, h: i32, requests: &crate::state::HandleMap<crate::state::Req>) -> bool {
        self.persistent.contains_key(&h) && !requests.contains_key(&h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_send_that_does_not_fit_names_the_sizes_and_space_comes_back_when_sends_complete() {
        let mut p: Pool<u32> = Pool::new(0x1000, 2 * (100 + BSEND_OVERHEAD));
        let c = p.fits(100).unwrap();
        assert_eq!(c, 100 + BSEND_OVERHEAD);
        p.push(1, c);
        p.push(2, p.fits(100).unwrap());
        let e = p.fits(1).unwrap_err();
        assert_eq!(e.class, Class::Buffer);
        assert!(
            e.message.contains("1 bytes")
                && e.message.contains("only 0 of its 328")
                && e.message.contains("2 buffered sends pending"),
            "{}",
            e.message
        );
        p.reap(|&t| t == 1);
        assert_eq!(p.used(), 100 + BSEND_OVERHEAD);
        assert!(p.fits(100).is_ok() && p.fits(101).is_err());
        assert_eq!(p.take_pending(), vec![2]);
        assert_eq!(p.used(), 0);
    }

    #[test]
    fn a_huge_send_saturates_instead_of_overflowing() {
        let p: Pool<()> = Pool::new(0, 10);
        assert_eq!(p.fits(usize::MAX).unwrap_err().class, Class::Buffer);
    }

    proptest::proptest! {
        /// Whatever sends start and complete, the space charged is the sum of the
        /// pending sends' charges and never more than the buffer; a send fails only
        /// when it does not fit the free space.
        #[test]
        fn the_accounting_never_overcommits(
            size in 0usize..4096,
            ops in proptest::collection::vec((0usize..2048, proptest::bool::ANY), 0..64),
        ) {
            let mut p: Pool<(u32, usize)> = Pool::new(0, size);
            let mut live: Vec<(u32, usize)> = Vec::new();
            for (k, (bytes, complete_one)) in ops.into_iter().enumerate() {
                if complete_one && !live.is_empty() {
                    let gone = live.remove(k % live.len());
                    p.reap(|t| *t == gone);
                }
                let free = size - p.used();
                match p.fits(bytes) {
                    Ok(c) => {
                        proptest::prop_assert!(c == bytes + BSEND_OVERHEAD && c <= free);
                        p.push((k as u32, c), c);
                        live.push((k as u32, c));
                    }
                    Err(e) => {
                        proptest::prop_assert!(bytes + BSEND_OVERHEAD > free);
                        proptest::prop_assert_eq!(e.class, Class::Buffer);
                    }
                }
                proptest::prop_assert_eq!(p.used(), live.iter().map(|t| t.1).sum::<usize>());
                proptest::prop_assert!(p.used() <= size);
            }
        }
    }

    #[test]
    fn message_handles_skip_null_no_proc_and_those_in_use() {
        assert_eq!(message_handle(0, |_| false), FIRST_MESSAGE);
        const { assert!(FIRST_MESSAGE > MESSAGE_NULL && FIRST_MESSAGE > MESSAGE_NO_PROC) };
        assert_eq!(message_handle(7, |h| h == 7 || h == 8), 9);
        // Past i32::MAX (next wrapped to a negative number): back to the first.
        assert_eq!(
            message_handle(i32::MAX.wrapping_add(1), |_| false),
            FIRST_MESSAGE
        );
        assert_eq!(message_handle(i32::MAX, |h| h == i32::MAX), FIRST_MESSAGE);
    }
}
