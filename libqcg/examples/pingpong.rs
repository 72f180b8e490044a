//! Ping-pong between ranks 0 and 1 over message sizes from 0 bytes to 4 MiB (or the
//! size given), checking every byte that comes back.
//!
//! `qcg run -n 2 --clusters 2 -- target/debug/examples/pingpong [MAX_BYTES] [REPS]`

use std::time::Instant;

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let comm = qcg::init()?;
    if comm.size() < 2 {
        return Err("pingpong needs at least 2 ranks".into());
    }
    let max: usize = std::env::args().nth(1).map_or(Ok(4 << 20), |s| s.parse())?;
    let reps: usize = std::env::args().nth(2).map_or(Ok(10), |s| s.parse())?;
    let mut sizes = vec![0usize];
    let mut s = 1;
    while s <= max {
        sizes.push(s);
        s *= 4;
    }
    if *sizes.last().unwrap_or(&0) != max {
        sizes.push(max);
    }
    match comm.rank() {
        0 => {
            println!("{:>10} {:>12} {:>12}", "bytes", "usec/1-way", "MB/s");
            for &len in &sizes {
                let out = pattern(len, len as u8);
                let t = Instant::now();
                for _ in 0..reps {
                    comm.send(1, 1, &out)?;
                    let back = comm.recv(Some(1), Some(2))?;
                    if back.data != out {
                        return Err(format!("{len} bytes came back altered").into());
                    }
                }
                let one_way = t.elapsed().as_secs_f64() / (2 * reps) as f64;
                println!(
                    "{len:>10} {:>12.1} {:>12.1}",
                    one_way * 1e6,
                    len as f64 / one_way / 1e6
                );
            }
        }
        1 => {
            for _ in 0..sizes.len() * reps {
                let m = comm.recv(Some(0), Some(1))?;
                comm.send(0, 2, &m.data)?;
            }
        }
        _ => {}
    }
    Ok(())
}
