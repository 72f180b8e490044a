//! Where a sealed link's time goes, without a network: AES-256-GCM sealing and
//! opening of 64 KiB records through [`qcg::seal::Sealed`] over memory, beside a
//! plain copy of the same bytes.
//!
//! `cargo run --release -p qcg --example seal_speed [MIB]`

use qcg::seal::{Exchange, Sealed};
use std::io::{Read, Write};
use std::time::Instant;

/// An in-memory stream: what is written is read back (or dropped, `keep` false).
#[derive(Default)]
struct Mem {
    bytes: Vec<u8>,
    at: usize,
    keep: bool,
}

impl Read for Mem {
    fn read(&mut self, dst: &mut [u8]) -> std::io::Result<usize> {
        let n = dst.len().min(self.bytes.len() - self.at);
        dst[..n].copy_from_slice(&self.bytes[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

impl Write for Mem {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        if self.keep {
            self.bytes.extend_from_slice(b);
        }
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mib: usize = std::env::args().nth(1).map_or(Ok(256), |s| s.parse())?;
    let (a, b) = (Exchange::new(), Exchange::new());
    let (pa, pb) = (a.public, b.public);
    let ka = a.keys(&pb, &[1; 32], b"bench", true).ok_or("keys")?;
    let kb = b.keys(&pa, &[1; 32], b"bench", false).ok_or("keys")?;
    let msg = vec![0x5au8; 1 << 20];
    // Sealing, into a stream that drops the bytes (no page faults counted).
    let (x, y) = (Exchange::new(), Exchange::new());
    let kx = x.keys(&y.public, &[1; 32], b"bench", true).ok_or("keys")?;
    let mut sink = Sealed::new(Mem::default(), kx, "sink".into());
    let t = Instant::now();
    for _ in 0..mib {
        sink.write_all(&msg)?;
    }
    let seal = t.elapsed();
    // Opening: the wire made first, then read back into a 1 MiB buffer.
    let mut w = Sealed::new(
        Mem {
            keep: true,
            ..Mem::default()
        },
        ka,
        "bench".into(),
    );
    for _ in 0..mib {
        w.write_all(&msg)?;
    }
    let wire = std::mem::take(&mut w.get_mut().bytes);
    let mut r = Sealed::new(
        Mem {
            bytes: wire,
            ..Mem::default()
        },
        kb,
        "bench".into(),
    );
    let mut dst = vec![0u8; 1 << 20];
    let t = Instant::now();
    for _ in 0..mib {
        r.read_exact(&mut dst)?;
    }
    let open = t.elapsed();
    // A plain copy of the same bytes, for scale.
    let t = Instant::now();
    for i in 0..mib {
        dst.copy_from_slice(&msg);
        std::hint::black_box(&dst[i % 7]);
    }
    let copy = t.elapsed();
    let gb = (mib << 20) as f64 / 1e9;
    println!(
        "{mib} MiB: seal {:.2} GB/s ({:.2} s/GB), open {:.2} GB/s ({:.2} s/GB), one memcpy {:.2} GB/s",
        gb / seal.as_secs_f64(),
        seal.as_secs_f64() / gb,
        gb / open.as_secs_f64(),
        open.as_secs_f64() / gb,
        gb / copy.as_secs_f64()
    );
    Ok(())
}
