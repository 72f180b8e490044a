//! The one place libqcg touches memory it does not own: a caller's buffer that a
//! request reads from (a send) or writes into (a receive) while the engine drives it.
//!
//! Safe Rust cannot hand a borrowed slice to an engine that other threads may
//! progress, so a [`RawBuf`] keeps a pointer and a length. Its users promise what a
//! borrow would have checked: the memory stays valid, and is not otherwise written
//! (nor read, for a receive), until the request that holds it has completed or been
//! cancelled. libqcg's own blocking calls keep that promise by not returning before
//! their request is finished; the MPI layer passes the same promise on to C callers,
//! as MPI itself does (`MPI_Isend`'s buffer must not be touched until `MPI_Wait`).
#![allow(unsafe_code)]

/// A caller's buffer, lent to the engine for the life of one request.
#[derive(Debug)]
pub struct RawBuf {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the engine moves a RawBuf between threads under its mutex; the memory it
// points to is the caller's, who promised (see `from_mut`/`from_ref`) not to use it
// concurrently until the request ends.
unsafe impl Send for RawBuf {}

impl RawBuf {
    /// Lends a buffer to be written (a receive).
    ///
    /// # Safety
    /// `buf` must stay valid and untouched by anyone else until the request holding
    /// this `RawBuf` has completed or been cancelled.
    pub unsafe fn from_mut(buf: &mut [u8]) -> RawBuf {
        RawBuf {
            ptr: buf.as_mut_ptr(),
            len: buf.len(),
        }
    }

    /// Lends a buffer to be read (a send). The engine never writes through it.
    ///
    /// # Safety
    /// `buf` must stay valid and unmodified until the request holding this `RawBuf`
    /// has completed.
    pub unsafe fn from_ref(buf: &[u8]) -> RawBuf {
        RawBuf {
            ptr: buf.as_ptr() as *mut u8,
            len: buf.len(),
        }
    }

    /// Lends `len` bytes at `ptr` (the MPI layer's C buffers).
    ///
    /// # Safety
    /// As [`RawBuf::from_mut`]; `ptr` must be valid for `len` bytes (or `len` is 0).
    pub unsafe fn from_raw(ptr: *mut u8, len: usize) -> RawBuf {
        RawBuf { ptr, len }
    }

    /// Its length.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes, to read from.
    pub fn as_slice(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: valid for `len` bytes by the constructors' contracts.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// The bytes, to write into.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        if self.len == 0 {
            return &mut [];
        }
        // SAFETY: valid and exclusively lent for `len` bytes by `from_mut`/`from_raw`'s
        // contracts (`from_ref` buffers are only sent, never received into).
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}
