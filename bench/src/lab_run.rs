//! A lab brought up for one benchmark run, under a prefix of its own, and taken down
//! when the run ends: on error, and on Ctrl-C or SIGTERM too.

use qcg_lab::{ops, sys};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Mutex;

/// The lab of this run, for the signal handler.
static CURRENT: Mutex<Current> = Mutex::new(Current::None);

enum Current {
    None,
    /// Being built: `ops::up` stops between steps and removes what it built.
    Building,
    /// Up under this prefix.
    Up(String),
}

fn current() -> std::sync::MutexGuard<'static, Current> {
    CURRENT.lock().unwrap_or_else(|e| e.into_inner())
}

/// Ctrl-C or SIGTERM: the lab goes down (whatever runs in it with it), then the
/// process exits; a lab being built is left to `up`, which cleans up and fails.
fn on_signal() {
    sys::INTERRUPTED.store(true, Ordering::SeqCst);
    let mut cur = current();
    match std::mem::replace(&mut *cur, Current::None) {
        Current::Building => *cur = Current::Building,
        Current::Up(prefix) => {
            // Our children first (services, ranks, mpirun): one still entering its
            // namespace would escape the lab's sweep and outlive it.
            sys::kill(&children(), "KILL");
            let _ = ops::down(&prefix);
            eprintln!("qcg-bench: interrupted; lab `{prefix}` taken down");
            std::process::exit(130);
        }
        Current::None => std::process::exit(130),
    }
}

/// The processes whose parent is this one, from /proc.
fn children() -> Vec<u32> {
    let me = std::process::id();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| {
        let pid: u32 = e.ok()?.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // `PID (COMM) STATE PPID ...`: COMM may hold spaces and parentheses.
        let ppid: u32 = stat
            .rsplit_once(')')?
            .1
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()?;
        (ppid == me).then_some(pid)
    })
    .collect()
}

/// A running lab; down on drop.
pub(crate) struct LabRun {
    /// The lab's prefix.
    pub prefix: String,
    /// The folder of this binary, where the qcg services and `qcg-lab` are.
    pub bins: PathBuf,
}

impl Drop for LabRun {
    fn drop(&mut self) {
        // Held while the lab goes down: a signal meanwhile waits for it, then exits.
        let mut cur = current();
        *cur = Current::None;
        let _ = ops::down(&self.prefix);
    }
}

impl LabRun {
    /// Checks for root and brings up `topo` under `TAG<pid>`.
    pub fn up(topo: &Path, tag: &str) -> anyhow::Result<LabRun> {
        anyhow::ensure!(
            qcg_lab::sys::is_root(),
            "the lab needs root (network namespaces, nftables)"
        );
        let bins = std::env::current_exe()?
            .parent()
            .ok_or_else(|| anyhow::anyhow!("no folder for this binary"))?
            .to_path_buf();
        let prefix = format!("{tag}{}", std::process::id() % 10_000);
        // Fails only when a handler is set already (a second lab in this process),
        // which is this one.
        let _ = ctrlc::set_handler(on_signal);
        *current() = Current::Building;
        let built = ops::up(topo, Some(&prefix));
        let mut cur = current();
        if let Err(e) = built {
            *cur = Current::None;
            return Err(e.into());
        }
        *cur = Current::Up(prefix.clone());
        if sys::INTERRUPTED.load(Ordering::SeqCst) {
            // The signal came as `up` finished: nobody took the lab down.
            *cur = Current::None;
            let _ = ops::down(&prefix);
            anyhow::bail!("interrupted");
        }
        Ok(LabRun { prefix, bins })
    }
}
