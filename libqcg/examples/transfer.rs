//! Rank 0 sends a large block (64 MiB by default) to rank 1 with its SHA-256; rank 1
//! checks it and answers. Rank 0 prints how the link was made, and how long after
//! its first send the first byte came back (the link's set-up, plus a round trip).
//!
//! `qcg run -n 2 --clusters 2 -- target/debug/examples/transfer [BYTES]`

use ring::digest::{digest, SHA256};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let comm = qcg::init()?;
    if comm.size() != 2 {
        return Err("transfer runs on exactly 2 ranks".into());
    }
    let bytes: usize = std::env::args()
        .nth(1)
        .map_or(Ok(64 << 20), |s| s.parse())?;
    if comm.rank() == 0 {
        let t0 = std::time::Instant::now();
        comm.send(1, 3, &[1])?;
        comm.recv(Some(1), Some(4))?;
        let first = t0.elapsed();
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let data: Vec<u8> = (0..bytes)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        let sum = digest(&SHA256, &data);
        comm.send(1, 0, &data)?;
        comm.send(1, 1, sum.as_ref())?;
        let answer = comm.recv(Some(1), Some(2))?;
        let how = comm
            .link_technique(1)
            .map_or("accepted".to_string(), |t| t.to_string());
        println!(
            "transfer: first byte back after {:.0} ms; {bytes} bytes to rank 1 by {how}: {}",
            first.as_secs_f64() * 1e3,
            String::from_utf8_lossy(&answer.data)
        );
    } else {
        comm.recv(Some(0), Some(3))?;
        comm.send(0, 4, &[1])?;
        let data = comm.recv(Some(0), Some(0))?;
        let sum = comm.recv(Some(0), Some(1))?;
        let ok =
            data.data.len() == bytes && digest(&SHA256, &data.data).as_ref() == sum.data.as_slice();
        comm.send(
            0,
            2,
            if ok {
                b"checksum ok"
            } else {
                b"checksum MISMATCH"
            },
        )?;
        if !ok {
            return Err("checksum mismatch".into());
        }
    }
    Ok(())
}
