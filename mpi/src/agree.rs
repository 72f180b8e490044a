//! Reductions that check the ranks agree on the call: every rank's data goes in
//! chunks of whole elements, each followed by a trailer that says which operation,
//! root and datatype the ranks used (the least and the greatest seen, with a rank
//! and how many ranks used each). The trailers merge with the data along libqcg's
//! own schedule, so a rank that gets the result also learns whether every rank
//! called the same reduction, and names the one that did not, at no extra message
//! or round. Chunks of a few KiB keep libqcg's pipelining (its flits are cut on
//! chunk boundaries). Pure code over bytes.

use crate::error::{Class, MpiError};

/// Payload bytes per chunk (about; a chunk holds whole elements).
pub const CHUNK: usize = 4096;
/// Bytes of a chunk's trailer.
pub const TRAILER: usize = 44;
/// The eager limit C programs get unless `QCG_EAGER_LIMIT` says otherwise:
/// libqcg's 64 KiB plus room for the trailers (a flit of 64 KiB of data is 66,240
/// bytes here), so that flits the cost model sizes for 64 KiB still go at once
/// rather than by rendezvous.
pub const EAGER_LIMIT: usize = 72 << 10;

/// What a rank passed to a reduction, as far as the ranks must agree.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Sig {
    /// The operation: a predefined one's handle, or [`USER_OP`].
    pub op: u32,
    /// The root (0 for the all-variants).
    pub root: u32,
    /// The element's type signature (kind and size, hashed).
    pub ty: u32,
}

/// `Sig::op` of every user operation (their handles are local to each process).
pub const USER_OP: u32 = 0xffff;

/// One end of the range of signatures seen: the signature, the lowest rank that
/// used it, how many ranks did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Seen {
    /// The signature.
    pub sig: Sig,
    /// A rank that used it (the lowest).
    pub rank: u32,
    /// How many ranks used it.
    pub ranks: u32,
}

/// A chunk's trailer: the least and greatest signatures, and the chunk's element
/// count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Trailer {
    /// The least signature seen.
    pub lo: Seen,
    /// The greatest.
    pub hi: Seen,
    /// Elements in this chunk.
    pub count: u32,
}

fn word(b: &[u8], i: usize) -> u32 {
    u32::from_le_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]])
}

impl Trailer {
    fn read(b: &[u8]) -> Trailer {
        let seen = |i: usize| Seen {
            sig: Sig {
                op: word(b, i),
                root: word(b, i + 1),
                ty: word(b, i + 2),
            },
            rank: word(b, i + 3),
            ranks: word(b, i + 4),
        };
        Trailer {
            lo: seen(0),
            hi: seen(5),
            count: word(b, 10),
        }
    }

    fn write(&self, b: &mut [u8]) {
        let w = [
            self.lo.sig.op,
            self.lo.sig.root,
            self.lo.sig.ty,
            self.lo.rank,
            self.lo.ranks,
            self.hi.sig.op,
            self.hi.sig.root,
            self.hi.sig.ty,
            self.hi.rank,
            self.hi.ranks,
            self.count,
        ];
        for (i, x) in w.iter().enumerate() {
            b[4 * i..4 * i + 4].copy_from_slice(&x.to_le_bytes());
        }
    }

    fn merge(a: Seen, b: Seen, want_less: bool) -> Seen {
        if a.sig == b.sig {
            return Seen {
                sig: a.sig,
                rank: a.rank.min(b.rank),
                ranks: a.ranks + b.ranks,
            };
        }
        if (b.sig < a.sig) == want_less {
            b
        } else {
            a
        }
    }
}

/// The layout of `n` elements of `elem` bytes in chunks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Bytes per element.
    pub elem: usize,
    /// Elements per chunk.
    pub per: usize,
    /// Elements in all.
    pub n: usize,
    /// Whether the operation takes a chunk's elements in one call (the predefined
    /// operations on numbers, bools and bytes) rather than one at a time.
    pub runs: bool,
}

impl Layout {
    /// Chunks of about [`CHUNK`] bytes, or one chunk of just the data when it is
    /// smaller (an 8-byte allreduce moves 52-byte messages, not 4 KiB ones). Ranks
    /// that pass the same bytes get the same chunks whatever their datatypes when the
    /// element size divides [`CHUNK`], as before, so their trailers can say they
    /// disagree.
    pub fn new(elem: usize, n: usize) -> Layout {
        Layout {
            elem,
            per: (CHUNK / elem.max(1)).max(1).min(n.max(1)),
            n,
            runs: false,
        }
    }

    /// The same layout, combining a chunk's elements in one call to the operation
    /// when `runs` (see [`Layout::runs`]): a call per element costs more than the
    /// element's arithmetic.
    pub fn with_runs(self, runs: bool) -> Layout {
        Layout { runs, ..self }
    }

    /// Bytes of one chunk, trailer included (libqcg's element size).
    pub fn chunk(&self) -> usize {
        self.per * self.elem + TRAILER
    }

    /// Number of chunks.
    pub fn chunks(&self) -> usize {
        self.n.div_ceil(self.per)
    }

    /// This rank's packed data (`n` elements) in chunks, each with its trailer.
    /// Written once, not zeroed first: a chunk's bytes are its elements, zeros for
    /// the last chunk's missing ones, then the trailer.
    pub fn pack(&self, data: &[u8], me: u32, sig: Sig) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.chunks() * self.chunk());
        let seen = Seen {
            sig,
            rank: me,
            ranks: 1,
        };
        for i in 0..self.chunks() {
            let first = i * self.per;
            let k = self.per.min(self.n - first);
            out.extend_from_slice(&data[first * self.elem..(first + k) * self.elem]);
            let at = out.len() + (self.per - k) * self.elem;
            out.resize(at + TRAILER, 0);
            Trailer {
                lo: seen,
                hi: seen,
                count: k as u32,
            }
            .write(&mut out[at..]);
        }
        out
    }

    /// `a = a ∘ b` for one chunk: `f` on the run of its elements (one call), the
    /// trailers merged.
    pub fn combine(&self, a: &mut [u8], b: &[u8], f: &dyn Fn(&mut [u8], &[u8])) {
        let at = self.per * self.elem;
        let (ta, tb) = (Trailer::read(&a[at..]), Trailer::read(&b[at..]));
        let k = (ta.count.min(tb.count) as usize).min(self.per);
        if self.runs {
            f(&mut a[..k * self.elem], &b[..k * self.elem]);
        } else {
            for j in 0..k {
                let r = j * self.elem..(j + 1) * self.elem;
                f(&mut a[r.clone()], &b[r]);
            }
        }
        Trailer {
            lo: Trailer::merge(ta.lo, tb.lo, true),
            hi: Trailer::merge(ta.hi, tb.hi, false),
            count: ta.count.min(tb.count),
        }
        .write(&mut a[at..]);
    }

    /// The result's elements, and the first chunk's trailer (every chunk merged
    /// the same ranks).
    pub fn unpack(&self, out: &[u8]) -> (Vec<u8>, Option<Trailer>) {
        let mut data = Vec::with_capacity(self.n * self.elem);
        let mut first = None;
        for (i, c) in out.chunks_exact(self.chunk()).enumerate() {
            let k = self.per.min(self.n - i * self.per);
            data.extend_from_slice(&c[..k * self.elem]);
            if i == 0 {
                first = Some(Trailer::read(&c[self.per * self.elem..]));
            }
        }
        (data, first)
    }

    /// The merged trailer of `out` (its first chunk's), as [`Layout::unpack`] gives it.
    pub fn trailer(&self, out: &[u8]) -> Option<Trailer> {
        out.chunks_exact(self.chunk())
            .next()
            .map(|c| Trailer::read(&c[self.per * self.elem..]))
    }

    /// [`Layout::unpack`]'s elements into `dst` (as many bytes as both hold): copied
    /// once, where the caller wants them.
    pub fn unpack_into(&self, out: &[u8], dst: &mut [u8]) {
        let mut at = 0;
        for (i, c) in out.chunks_exact(self.chunk()).enumerate() {
            let k = self.per.min(self.n - i * self.per) * self.elem;
            let k = k.min(dst.len().saturating_sub(at));
            dst[at..at + k].copy_from_slice(&c[..k]);
            at += k;
        }
    }
}

fn describe(s: Sig, what: &dyn Fn(u32) -> String) -> String {
    let op = if s.op == USER_OP {
        "a user operation".to_string()
    } else {
        what(s.op)
    };
    format!("{op}, root {}, datatype #{:08x}", s.root, s.ty)
}

/// Whether the merged trailer shows one signature; if not, an error naming the
/// rank at fault (the one of the fewer ranks; both when as many used each).
/// `op_name` names a predefined operation's handle.
pub fn verdict(name: &str, t: &Trailer, op_name: &dyn Fn(u32) -> String) -> Result<(), MpiError> {
    if t.lo.sig == t.hi.sig {
        return Ok(());
    }
    let (odd, usual) = if t.lo.ranks < t.hi.ranks {
        (t.lo, t.hi)
    } else {
        (t.hi, t.lo)
    };
    let class = if odd.sig.op != usual.sig.op {
        Class::Op
    } else if odd.sig.root != usual.sig.root {
        Class::Root
    } else {
        Class::Type
    };
    let who = if odd.ranks == usual.ranks {
        format!("ranks {} and {} disagree", odd.rank, usual.rank)
    } else {
        format!("rank {} is at fault", odd.rank)
    };
    Err(MpiError::new(
        class,
        format!(
            "the ranks called {name} differently, {who}: rank {} (and {} in all) passed {}, rank {} (and {} in all) passed {}",
            odd.rank,
            odd.ranks,
            describe(odd.sig, op_name),
            usual.rank,
            usual.ranks,
            describe(usual.sig, op_name)
        ),
    ))
}

/// A 32-bit hash of a datatype's reduction kind and size (FNV-1a of its text).
pub fn type_sig(kind: &crate::types::Kind, size: usize) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in format!("{kind:?}/{size}").bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    fn add(a: &mut [u8], b: &[u8]) {
        a[0] = a[0].wrapping_add(b[0]);
    }

    fn reduce_all(l: &Layout, inputs: &[Vec<u8>]) -> Vec<u8> {
        let mut acc = inputs[0].clone();
        for x in &inputs[1..] {
            for (a, b) in acc
                .chunks_exact_mut(l.chunk())
                .zip(x.chunks_exact(l.chunk()))
            {
                l.combine(a, b, &add);
            }
        }
        acc
    }

    fn sig(op: u32) -> Sig {
        Sig { op, root: 0, ty: 7 }
    }

    #[test]
    fn runs_combine_a_chunk_in_one_call_to_the_same_result() {
        let calls = std::cell::Cell::new(0usize);
        let add_all = |a: &mut [u8], b: &[u8]| {
            calls.set(calls.get() + 1);
            for (x, y) in a.iter_mut().zip(b) {
                *x = x.wrapping_add(*y);
            }
        };
        let one = Layout::new(1, 5000);
        let runs = Layout::new(1, 5000).with_runs(true);
        let x: Vec<u8> = (0..5000).map(|i| (i * 7 % 251) as u8).collect();
        let y: Vec<u8> = (0..5000).map(|i| (i * 13 % 241) as u8).collect();
        let (mut a1, b1) = (one.pack(&x, 0, sig(3)), one.pack(&y, 1, sig(3)));
        let (mut a2, b2) = (runs.pack(&x, 0, sig(3)), runs.pack(&y, 1, sig(3)));
        for (a, b) in a1
            .chunks_exact_mut(one.chunk())
            .zip(b1.chunks_exact(one.chunk()))
        {
            one.combine(a, b, &add_all);
        }
        assert_eq!(calls.replace(0), 5000);
        for (a, b) in a2
            .chunks_exact_mut(runs.chunk())
            .zip(b2.chunks_exact(runs.chunk()))
        {
            runs.combine(a, b, &add_all);
        }
        assert_eq!(calls.get(), one.chunks());
        assert_eq!(a1, a2);
        let (got, trailer) = runs.unpack(&a2);
        let want: Vec<u8> = x.iter().zip(&y).map(|(p, q)| p.wrapping_add(*q)).collect();
        assert_eq!(got, want);
        assert!(trailer.is_some());
    }

    #[test]
    fn small_data_is_one_chunk_of_its_own_size() {
        assert_eq!(Layout::new(8, 1).chunk(), 8 + TRAILER);
        // The same bytes in another datatype: the same chunks, so the trailers meet.
        assert_eq!(Layout::new(4, 2).chunk(), Layout::new(8, 1).chunk());
        assert_eq!(Layout::new(1, 6000).chunk(), CHUNK + TRAILER);
        assert_eq!(Layout::new(8, 0).chunks(), 0);
    }

    #[test]
    fn sixteen_chunks_of_64_kib_of_data_stay_under_the_eager_limit() {
        for elem in [1, 4, 8, 12, 16, 20] {
            let l = Layout::new(elem, (64 << 10) / elem);
            assert!(l.chunks() * l.chunk() <= EAGER_LIMIT, "{elem}");
        }
    }

    #[test]
    fn agreeing_ranks_get_the_plain_result() {
        let l = Layout::new(1, 5000);
        assert_eq!((l.per, l.chunks()), (4096, 2));
        let inputs: Vec<Vec<u8>> = (0..4u8)
            .map(|r| l.pack(&vec![r; 5000], u32::from(r), sig(3)))
            .collect();
        let (data, t) = l.unpack(&reduce_all(&l, &inputs));
        assert_eq!(data, vec![6u8; 5000]);
        let t = t.expect("a trailer");
        assert_eq!((t.lo.ranks, t.lo.rank), (4, 0));
        assert!(verdict("MPI_Allreduce", &t, &|h| format!("op {h}")).is_ok());
    }

    #[test]
    fn the_odd_rank_out_is_named_whatever_the_order() {
        let l = Layout::new(4, 3);
        for odd in 0..4u32 {
            let inputs: Vec<Vec<u8>> = (0..4u32)
                .map(|r| l.pack(&[0u8; 12], r, sig(if r == odd { 1 } else { 3 })))
                .collect();
            let (_, t) = l.unpack(&reduce_all(&l, &inputs));
            let e = verdict("MPI_Allreduce", &t.expect("trailer"), &|h| {
                format!("op {h}")
            })
            .expect_err("a mismatch");
            assert_eq!(e.class, Class::Op);
            assert!(
                e.to_string().contains(&format!("rank {odd} is at fault")),
                "{e}"
            );
        }
        // Two against two: both named.
        let inputs: Vec<Vec<u8>> = (0..4u32)
            .map(|r| {
                let mut s = sig(3);
                s.root = r % 2;
                l.pack(&[0u8; 12], r, s)
            })
            .collect();
        let (_, t) = l.unpack(&reduce_all(&l, &inputs));
        let e = verdict("MPI_Reduce", &t.expect("trailer"), &|h| format!("op {h}"))
            .expect_err("a mismatch");
        assert_eq!(e.class, Class::Root);
        assert!(e.to_string().contains("ranks 1 and 0 disagree"), "{e}");
    }
}
