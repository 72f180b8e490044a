//! `qcg-bench netpipe`: NetPIPE's method over a libqcg link, and NPtcp on the same
//! path in the same run.
//!
//! Sizes grow as 2^k and 1.5·2^k; once the step between sizes exceeds 4 bytes each size
//! is also run at −3 and +3 bytes. Each size is a ping-pong repeated for about a fixed
//! time per trial (0.1 s by default), three trials, the best kept; time is half the
//! round trip, throughput is bits / (time · 2^20) as NetPIPE 3 prints it ("Mbps").

use crate::svg;
use qcg::Comm;
use std::fmt::Write as _;
use std::path::Path;
use std::time::Instant;

/// The message sizes NetPIPE runs from `min` (as NPtcp's `-l`) up to `max` bytes.
pub fn sizes(min: usize, max: usize) -> Vec<usize> {
    let mut bases = Vec::new();
    let mut k = 1usize;
    while k <= max {
        bases.push(k);
        let h = k + k / 2;
        if k >= 2 && h <= max {
            bases.push(h);
        }
        k *= 2;
    }
    bases.dedup();
    let mut out = Vec::new();
    let mut prev = 0;
    for b in bases {
        if b - prev > 4 {
            out.extend([b - 3, b, b + 3]);
        } else {
            out.push(b);
        }
        prev = b;
    }
    out.retain(|&s| s <= max + 3 && s >= min);
    out
}

/// One measured point.
#[derive(Clone, Copy, Debug)]
pub struct Point {
    /// Message size.
    pub bytes: usize,
    /// Round trips per trial.
    pub reps: usize,
    /// One-way time, seconds (best trial).
    pub secs: f64,
}

impl Point {
    /// NetPIPE's "Mbps": bits / (t · 2^20).
    pub fn mbps(&self) -> f64 {
        self.bytes as f64 * 8.0 / (self.secs * 1048576.0)
    }
}

/// A line of NetPIPE 3's np.out.
pub fn np_out_line(p: &Point) -> String {
    format!("{:8} {:.6} {:12.8}", p.bytes, p.mbps(), p.secs)
}

/// Parses NetPIPE's np.out (bytes, Mbps, seconds per line).
pub fn parse_np_out(text: &str) -> Vec<Point> {
    text.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let bytes = f.next()?.parse().ok()?;
            let _mbps: f64 = f.next()?.parse().ok()?;
            let secs = f.next()?.parse().ok()?;
            Some(Point {
                bytes,
                reps: 0,
                secs,
            })
        })
        .collect()
}

/// Rank 0's side: ping-pong every size with rank 1 and return the points.
pub fn measure(comm: &Comm, min: usize, max: usize, trial_secs: f64) -> qcg::Result<Vec<Point>> {
    let mut points = Vec::new();
    let mut last = 1e-5f64;
    for (i, bytes) in sizes(min, max).into_iter().enumerate() {
        let reps = ((trial_secs / (2.0 * last)) as usize).clamp(3, 100_000);
        // Tell the echoing rank how many round trips come.
        comm.send(1, 10, &(reps as u64 * 4).to_le_bytes())?;
        let buf = vec![(i % 251) as u8; bytes];
        // One untimed trial to warm up, then three; the best is kept.
        let mut best = f64::INFINITY;
        for t in 0..4 {
            let start = Instant::now();
            for _ in 0..reps {
                comm.send(1, 11, &buf)?;
                comm.recv(Some(1), Some(12))?;
            }
            let one_way = start.elapsed().as_secs_f64() / (2 * reps) as f64;
            if t > 0 {
                best = best.min(one_way);
            }
        }
        last = best;
        let p = Point {
            bytes,
            reps,
            secs: best,
        };
        println!(
            "{:3}: {:7} bytes {:6} times -->  {:8.2} Mbps in {:10.2} usec",
            i,
            bytes,
            reps,
            p.mbps(),
            p.secs * 1e6
        );
        points.push(p);
    }
    comm.send(1, 10, &0u64.to_le_bytes())?;
    Ok(points)
}

/// Rank 1's side: echo until told to stop.
pub fn echo(comm: &Comm) -> qcg::Result<()> {
    loop {
        let n = comm.recv(Some(0), Some(10))?;
        let count = u64::from_le_bytes(n.data.as_slice().try_into().unwrap_or([0; 8]));
        if count == 0 {
            return Ok(());
        }
        for _ in 0..count {
            let m = comm.recv(Some(0), Some(11))?;
            comm.send(0, 12, &m.data)?;
        }
    }
}

/// Writes `netpipe.csv` (`series,bytes,reps,usec,mbps`), an SVG of throughput
/// against size for every series, and NetPIPE's `np-NAME.out` for the series named
/// in `np_out` (NPtcp writes its own, `np-nptcp.out`, which is left as it is).
pub fn write_outputs(
    dir: &Path,
    series: &[(&str, &[Point])],
    np_out: &[&str],
) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut csv = String::from("series,bytes,reps,usec,mbps\n");
    for (name, pts) in series {
        let mut np = String::new();
        for p in pts.iter() {
            let _ = writeln!(np, "{}", np_out_line(p));
            let _ = writeln!(
                csv,
                "{name},{},{},{:.3},{:.3}",
                p.bytes,
                p.reps,
                p.secs * 1e6,
                p.mbps()
            );
        }
        if np_out.contains(name) {
            std::fs::write(dir.join(format!("np-{name}.out")), np)?;
        }
    }
    std::fs::write(dir.join("netpipe.csv"), csv)?;
    let lines: Vec<svg::Series> = series
        .iter()
        .map(|(name, pts)| svg::Series {
            name: name.to_string(),
            points: pts.iter().map(|p| (p.bytes as f64, p.mbps())).collect(),
        })
        .collect();
    std::fs::write(
        dir.join("netpipe.svg"),
        svg::chart(
            "Throughput against message size",
            "bytes",
            "Mbps (2^20 bits/s)",
            &lines,
        ),
    )
}

/// The points of `series` in a `netpipe.csv` (reps included, which np.out lacks).
pub fn parse_csv(text: &str, series: &str) -> Vec<Point> {
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            if f.len() != 5 || f[0] != series {
                return None;
            }
            Some(Point {
                bytes: f[1].parse().ok()?,
                reps: f[2].parse().ok()?,
                secs: f[3].parse::<f64>().ok()? / 1e6,
            })
        })
        .collect()
}

/// Fills the points' `reps` from what NPtcp printed on stderr (`  N:  BYTES bytes
/// REPS times --> ...`): its np.out has no such column.
pub fn nptcp_reps(printed: &str, pts: &mut [Point]) {
    for l in printed.lines() {
        let Some((_, rest)) = l.split_once(':') else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        if let [bytes, "bytes", reps, "times", ..] = f.as_slice() {
            if let (Ok(b), Ok(r)) = (bytes.parse::<usize>(), reps.parse::<usize>()) {
                for p in pts.iter_mut().filter(|p| p.bytes == b) {
                    p.reps = r;
                }
            }
        }
    }
}

/// Latency (smallest size) and peak throughput of a series.
pub fn summary(pts: &[Point]) -> (f64, f64) {
    let lat = pts.first().map_or(f64::NAN, |p| p.secs * 1e6);
    let peak = pts.iter().map(Point::mbps).fold(0.0, f64::max);
    (lat, peak)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_follow_netpipe() {
        let s = sizes(1, 8 << 20);
        assert_eq!(&s[..11], &[1, 2, 3, 4, 6, 8, 12, 16, 21, 24, 27]);
        assert!(s.contains(&(8 << 20)) && s.contains(&((8 << 20) + 3)));
        // About NetPIPE's 124 points up to 8 MiB.
        assert!((110..=130).contains(&s.len()), "{}", s.len());
        let p = Point {
            bytes: 1 << 20,
            reps: 1,
            secs: 1e-3,
        };
        assert!((p.mbps() - 8000.0).abs() < 1e-6);
        let parsed = parse_np_out(&np_out_line(&p));
        assert_eq!(parsed[0].bytes, 1 << 20);
        assert!((parsed[0].secs - 1e-3).abs() < 1e-9);
        // --min, as NPtcp's -l.
        assert_eq!(&sizes(1000, 4096)[..3], &[1021, 1024, 1027]);
    }

    #[test]
    fn reps_survive_the_csv_and_come_from_nptcp_s_lines() {
        let p = Point {
            bytes: 64,
            reps: 1234,
            secs: 8.5e-6,
        };
        let dir = tempfile::tempdir().unwrap();
        write_outputs(dir.path(), &[("qcg", &[p]), ("NPtcp", &[p])], &["qcg"]).unwrap();
        let csv = std::fs::read_to_string(dir.path().join("netpipe.csv")).unwrap();
        let back = parse_csv(&csv, "qcg");
        assert_eq!((back[0].bytes, back[0].reps), (64, 1234));
        // One np.out per series measured here; NPtcp's own is not written over.
        assert!(dir.path().join("np-qcg.out").exists());
        assert!(!dir.path().join("np-NPtcp.out").exists());
        let mut pts =
            parse_np_out("       1 0.888389   0.00000859\n      16 14.191409   0.00000860\n");
        nptcp_reps(
            "Now starting the main loop\n  0:       1 bytes   1531 times -->      0.89 Mbps in       8.59 usec\n  5:      16 bytes   1951 times -->     14.19 Mbps in       8.60 usec\n",
            &mut pts,
        );
        assert_eq!(pts.iter().map(|p| p.reps).collect::<Vec<_>>(), [1531, 1951]);
    }
}
