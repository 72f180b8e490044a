//! Pinning a crowded node's ranks to cores (`QCG_BIND`).
//!
//! When a job puts more ranks on a node than it has cores, the ranks take turns on the
//! cores, and a rank that waits polls and yields. Left to the kernel, the turns come
//! out uneven: the ranks sleep between calls (computing, or the benchmark's own
//! pauses), wake where their timers fired, and a core whose few ranks keep polling is
//! never idle, so it never pulls work from the other. 16 ranks on 2 cores were seen as
//! 14 on one core and 2 on the other for whole calls, each of the 14 getting a turn
//! every 170-300 µs (`perf sched timehist`).
//!
//! Each rank therefore pins itself to one core of the cores it may use, in blocks: the
//! node's i-th rank of n on core `i · cores / n`. A binomial tree's subtrees are runs of
//! neighbouring ranks, so a block keeps a subtree on one core and lets the two halves
//! of the tree run at once. Nodes with a core per rank are left alone (a rank may run
//! threads of its own there), and so are ranks whose cores times the node's ranks fit
//! in the machine (a launcher gave each rank cores of its own).
#![allow(unsafe_code)]

/// The cores (indices into `cpus`, the cores the process may use) for the node's
/// `index`-th rank of `local`: one core when the ranks outnumber the cores (blocks of
/// neighbouring ranks share one), else a block of `cpus.len() / local` or so.
pub fn share(index: usize, local: usize, cpus: &[usize]) -> &[usize] {
    let n = cpus.len();
    if n == 0 || local == 0 || index >= local {
        return cpus;
    }
    let first = index * n / local;
    let end = ((index + 1) * n / local).max(first + 1).min(n);
    &cpus[first..end]
}

/// The cores the calling thread may run on.
fn allowed() -> std::io::Result<Vec<usize>> {
    // SAFETY: a zeroed cpu_set_t is an empty set; the kernel writes at most its size.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((0..libc::CPU_SETSIZE as usize)
        // SAFETY: `c` is below CPU_SETSIZE.
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect())
}

/// Pins every thread of this process to its share of the cores (see [`share`]); a
/// failure is logged and changes nothing else.
pub fn pin(index: usize, local: usize) {
    let cpus = match allowed() {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!("QCG_BIND: cannot read this process's cores: {e}; not pinned");
            return;
        }
    };
    // A launcher that gave each rank cores of its own (Slurm's --cpus-per-task, say)
    // has split the machine already: those ranks see few cores, but not the same.
    // SAFETY: sysconf reads a number.
    let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    if online > 0 && cpus.len() * local <= online as usize {
        tracing::debug!(
            cores = cpus.len(),
            local,
            online,
            "not pinned: this rank's cores times the node's ranks fit the machine (a launcher split it)"
        );
        return;
    }
    let mine = share(index, local, &cpus);
    // SAFETY: as in `allowed`; CPU_SET takes indices below CPU_SETSIZE, as these are.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in mine {
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    // The threads started so far (the engine's); those started later inherit it.
    let tids: Vec<libc::pid_t> = std::fs::read_dir("/proc/self/task")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    let tids = if tids.is_empty() { vec![0] } else { tids };
    for tid in tids {
        // SAFETY: `set` is a valid cpu_set_t of the size given.
        let r =
            unsafe { libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set) };
        if r != 0 {
            let e = std::io::Error::last_os_error();
            tracing::warn!(tid, "QCG_BIND: cannot pin a thread to cores {mine:?}: {e}");
        }
    }
    tracing::debug!(index, local, cores = ?mine, "pinned (QCG_BIND=auto; `none` turns it off)");
}

#[cfg(test)]
mod tests {
    use super::share;

    #[test]
    fn crowded_ranks_share_cores_in_blocks_of_neighbours() {
        let cpus = [0, 1];
        let got: Vec<_> = (0..16).map(|i| share(i, 16, &cpus).to_vec()).collect();
        for (i, g) in got.iter().enumerate() {
            assert_eq!(g, &vec![if i < 8 { 0 } else { 1 }], "rank {i}");
        }
        // Cores the process may use need not start at 0 or be contiguous.
        let cpus = [2, 5, 7];
        let got: Vec<_> = (0..7).map(|i| share(i, 7, &cpus)[0]).collect();
        assert_eq!(got, vec![2, 2, 2, 5, 5, 7, 7]);
        for n in 3..40 {
            let per: Vec<usize> = (0..3)
                .map(|c| (0..n).filter(|&i| share(i, n, &cpus) == [cpus[c]]).count())
                .collect();
            assert_eq!(per.iter().sum::<usize>(), n, "{n} ranks");
            assert!(
                per.iter().max().unwrap() - per.iter().min().unwrap() <= 1,
                "{n}: {per:?}"
            );
        }
    }

    #[test]
    fn ranks_fewer_than_cores_get_blocks_of_cores() {
        let cpus: Vec<usize> = (0..8).collect();
        assert_eq!(share(0, 2, &cpus), &[0, 1, 2, 3]);
        assert_eq!(share(1, 2, &cpus), &[4, 5, 6, 7]);
        assert_eq!(share(2, 3, &cpus), &[5, 6, 7]);
        assert_eq!(share(0, 1, &cpus), &cpus[..]);
        // Nonsense in, the whole set out.
        assert_eq!(share(3, 2, &cpus), &cpus[..]);
        assert_eq!(share(0, 0, &cpus), &cpus[..]);
        assert!(share(0, 4, &[]).is_empty());
    }
}
