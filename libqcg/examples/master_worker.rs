//! A hierarchical master-worker in the shape of Ray2mesh (QCG-OMPI paper, Fig. 6):
//! the central master (group `central_master`) hands big batches of chunks to one
//! boss per worker group; each boss hands single chunks to the workers of its
//! group, gathers their results and sends the batch's result up before asking for
//! more. `--vanilla` runs the flat master-worker instead: rank 0 hands single chunks
//! to every other rank.
//!
//! The work is checked: a chunk's result is a sum of a deterministic hash over its
//! range, and the master compares the total with a sequential computation.
//!
//! ```text
//! qcg submit jobprofile/examples-xml/master-worker.xml             # hierarchical
//! qcg run -n 4 target/release/examples/master_worker --vanilla       # flat
//! ```

use qcg::groups::{GroupComm, GroupViews};
use qcg::Comm;

/// Work going down (a range of chunks; empty = stop).
const DOWN: u32 = 1;
/// Results going up (sum, number of chunks).
const UP: u32 = 2;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

struct Opts {
    vanilla: bool,
    chunks: u64,
    chunk_size: u64,
}

fn opts() -> Res<Opts> {
    let mut o = Opts {
        vanilla: false,
        chunks: 48,
        chunk_size: 20_000,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--vanilla" => o.vanilla = true,
            "--chunks" => o.chunks = args.next().ok_or("--chunks needs a number")?.parse()?,
            "--chunk-size" => {
                o.chunk_size = args.next().ok_or("--chunk-size needs a number")?.parse()?
            }
            other => {
                return Err(format!(
                    "unknown argument `{other}`; usage: master_worker [--vanilla] [--chunks N] [--chunk-size M]"
                )
                .into())
            }
        }
    }
    Ok(o)
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The "ray tracing" of one chunk.
fn compute(chunk: u64, size: u64) -> u64 {
    (chunk * size..(chunk + 1) * size).fold(0u64, |s, i| s.wrapping_add(splitmix(i) >> 40))
}

fn pack(v: &[u64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn unpack(b: &[u8]) -> Vec<u64> {
    b.chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
        .collect()
}

fn check(o: &Opts, sum: u64, done: u64) -> Res<()> {
    let sequential = (0..o.chunks).fold(0u64, |s, c| s.wrapping_add(compute(c, o.chunk_size)));
    if done != o.chunks || sum != sequential {
        return Err(format!(
            "wrong result: {done} of {} chunks, sum {sum} (sequential: {sequential})",
            o.chunks
        )
        .into());
    }
    println!("result: {done} chunks, sum {sum}; sequential computation: {sequential}: correct");
    Ok(())
}

/// Flat master-worker over the whole job.
fn vanilla(comm: &Comm, o: &Opts) -> Res<()> {
    let (rank, size) = (comm.rank(), comm.size());
    if rank != 0 {
        let mut did = 0;
        loop {
            let m = comm.recv(Some(0), Some(DOWN))?;
            let Some(&chunk) = unpack(&m.data).first() else {
                break;
            };
            comm.send(0, UP, &pack(&[compute(chunk, o.chunk_size), 1]))?;
            did += 1;
        }
        eprintln!("worker {rank}: {did} chunks");
        return Ok(());
    }
    println!(
        "vanilla master-worker: {} chunks, {} workers",
        o.chunks,
        size - 1
    );
    let (mut next, mut sum, mut done) = (0u64, 0u64, 0u64);
    if size == 1 {
        for c in 0..o.chunks {
            sum = sum.wrapping_add(compute(c, o.chunk_size));
        }
        return check(o, sum, o.chunks);
    }
    let mut active = 0;
    for w in 1..size {
        if next < o.chunks {
            comm.send(w, DOWN, &pack(&[next]))?;
            next += 1;
            active += 1;
        } else {
            comm.send(w, DOWN, &[])?;
        }
    }
    while active > 0 {
        let m = comm.recv(None, Some(UP))?;
        let r = unpack(&m.data);
        sum = sum.wrapping_add(r.first().copied().unwrap_or(0));
        done += r.get(1).copied().unwrap_or(0);
        if next < o.chunks {
            comm.send(m.source, DOWN, &pack(&[next]))?;
            next += 1;
        } else {
            comm.send(m.source, DOWN, &[])?;
            active -= 1;
        }
    }
    check(o, sum, done)
}

/// The central master: batches to the bosses of the other groups.
fn central_master(leaders: &GroupComm, me: u32, views: &GroupViews, o: &Opts) -> Res<()> {
    let bosses: Vec<u32> = (0..leaders.size()).filter(|&g| g != me).collect();
    let groups: Vec<String> = bosses
        .iter()
        .map(|&g| {
            format!(
                "{}: {} processes",
                views.groups.name(g as usize),
                views.groups.size(g as usize)
            )
        })
        .collect();
    println!(
        "hierarchical master-worker: {} chunks over {} groups ({})",
        o.chunks,
        bosses.len(),
        groups.join(", ")
    );
    let batch = |g: u32| 2 * u64::from(views.groups.size(g as usize).max(1));
    let mut next = 0u64;
    let mut per_group = vec![0u64; leaders.size() as usize];
    let mut active = 0;
    let give = |g: u32, next: &mut u64| -> Res<bool> {
        if *next >= o.chunks {
            leaders.send(g, DOWN, &[])?;
            return Ok(false);
        }
        let end = (*next + batch(g)).min(o.chunks);
        leaders.send(g, DOWN, &pack(&[*next, end]))?;
        *next = end;
        Ok(true)
    };
    for &g in &bosses {
        if give(g, &mut next)? {
            active += 1;
        }
    }
    let (mut sum, mut done) = (0u64, 0u64);
    while active > 0 {
        let m = leaders.recv(None, UP)?;
        let r = unpack(&m.data);
        sum = sum.wrapping_add(r.first().copied().unwrap_or(0));
        let n = r.get(1).copied().unwrap_or(0);
        done += n;
        per_group[m.source as usize] += n;
        if !give(m.source, &mut next)? {
            active -= 1;
        }
    }
    for &g in &bosses {
        println!(
            "group {} computed {} chunks",
            views.groups.name(g as usize),
            per_group[g as usize]
        );
    }
    // Other processes of the master's group have nothing to do.
    for r in 1..views.local.size() {
        views.local.send(r, DOWN, &[])?;
    }
    if bosses.is_empty() {
        for c in 0..o.chunks {
            sum = sum.wrapping_add(compute(c, o.chunk_size));
        }
        done = o.chunks;
    }
    check(o, sum, done)
}

/// A boss: takes batches from the central master, hands chunks to its workers.
fn boss(leaders: &GroupComm, master: u32, local: &GroupComm, o: &Opts) -> Res<()> {
    let workers = local.size() - 1;
    let mut total = 0;
    loop {
        let m = leaders.recv(Some(master), DOWN)?;
        let r = unpack(&m.data);
        let (Some(&start), Some(&end)) = (r.first(), r.get(1)) else {
            break;
        };
        let mut sum = 0u64;
        if workers == 0 {
            for c in start..end {
                sum = sum.wrapping_add(compute(c, o.chunk_size));
            }
        } else {
            let (mut next, mut busy) = (start, 0);
            for w in 1..=workers {
                if next < end {
                    local.send(w, DOWN, &pack(&[next]))?;
                    next += 1;
                    busy += 1;
                }
            }
            while busy > 0 {
                let m = local.recv(None, UP)?;
                sum = sum.wrapping_add(unpack(&m.data).first().copied().unwrap_or(0));
                busy -= 1;
                if next < end {
                    local.send(m.source, DOWN, &pack(&[next]))?;
                    next += 1;
                    busy += 1;
                }
            }
        }
        total += end - start;
        leaders.send(master, UP, &pack(&[sum, end - start]))?;
    }
    for w in 1..=workers {
        local.send(w, DOWN, &[])?;
    }
    eprintln!("boss: {total} chunks by {workers} workers");
    Ok(())
}

/// A worker of a group: single chunks from its boss.
fn worker(local: &GroupComm, o: &Opts) -> Res<()> {
    loop {
        let m = local.recv(Some(0), DOWN)?;
        let Some(&chunk) = unpack(&m.data).first() else {
            return Ok(());
        };
        local.send(0, UP, &pack(&[compute(chunk, o.chunk_size)]))?;
    }
}

fn main() -> Res<()> {
    let o = opts()?;
    let comm = qcg::init()?;
    if o.vanilla {
        return vanilla(&comm, &o);
    }
    let views = GroupViews::new(&comm)?;
    let Some(master_group) = views.groups.find("central_master") else {
        if comm.rank() == 0 {
            println!("no group `central_master`: running the flat master-worker");
        }
        return vanilla(&comm, &o);
    };
    let master = master_group as u32;
    match &views.leaders {
        Some(leaders) if views.group == master_group => central_master(leaders, master, &views, &o),
        Some(leaders) => boss(leaders, master, &views.local, &o),
        None if views.group == master_group => {
            // An extra process of the master's group: it waits to be let go.
            views.local.recv(Some(0), DOWN)?;
            Ok(())
        }
        None => worker(&views.local, &o),
    }
}
