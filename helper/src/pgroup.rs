//! Process groups: every job process runs as the leader of a group of its own, so
//! that whatever it starts can be signalled and found with it.
//!
//! What is alive is read from `/proc`: a group is gone when no process of it is left
//! but zombies (a zombie runs nothing; whoever adopted it reaps it).

use rustix::process::{kill_process_group, Pid, Signal};
use std::time::Duration;

/// How long a process is given between SIGTERM and SIGKILL.
pub const GRACE: Duration = Duration::from_secs(3);

/// Sends `sig` to every process of group `pgid`. A group that is already gone (or an
/// id that cannot be a group) is not an error: there is nothing to signal.
pub fn signal_group(pgid: u32, sig: Signal) {
    let Some(pg) = i32::try_from(pgid).ok().and_then(Pid::from_raw) else {
        return;
    };
    // pgid 1 would be init's group: never ours to signal.
    if pgid <= 1 {
        return;
    }
    let _ = kill_process_group(pg, sig);
}

/// The state letter and the process group of a `/proc/PID/stat` line.
///
/// The command name sits between the first `(` and the last `)` and may hold spaces
/// and parentheses; the fields after it are space separated.
pub fn parse_stat(text: &str) -> Option<(char, u32)> {
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let _ppid = fields.next()?;
    let pgrp = fields.next()?.parse().ok()?;
    Some((state, pgrp))
}

/// The pids of the live (not zombie) processes of group `pgid`.
pub fn members(pgid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| parse_stat(&s))
                .is_some_and(|(state, pg)| pg == pgid && state != 'Z' && state != 'X')
        })
        .collect()
}

/// Whether a process of group `pgid` still runs.
pub fn alive(pgid: u32) -> bool {
    !members(pgid).is_empty()
}

/// Whether process `pid` still runs (a zombie does not).
pub fn pid_alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| parse_stat(&s))
        .is_some_and(|(state, _)| state != 'Z' && state != 'X')
}

/// Stops every group of `pgids`: SIGTERM (a program's `trap TERM` runs), then SIGKILL
/// to the groups still alive after `grace`, then waits (up to 5 s more) until they
/// are gone. Returns the groups that could not be seen to end.
pub async fn stop_groups(pgids: &[u32], grace: Duration) -> Vec<u32> {
    for &g in pgids {
        signal_group(g, Signal::TERM);
    }
    // SIGCONT too: a stopped group would never act on its SIGTERM.
    for &g in pgids {
        signal_group(g, Signal::CONT);
    }
    let deadline = tokio::time::Instant::now() + grace;
    while tokio::time::Instant::now() < deadline && pgids.iter().any(|&g| alive(g)) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    kill_groups(pgids).await
}

/// SIGKILLs every group of `pgids` and waits (up to 5 s) until they are gone.
/// Returns the groups still seen alive.
pub async fn kill_groups(pgids: &[u32]) -> Vec<u32> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let left: Vec<u32> = pgids.iter().copied().filter(|&g| alive(g)).collect();
        if left.is_empty() || tokio::time::Instant::now() >= deadline {
            return left;
        }
        for &g in &left {
            signal_group(g, Signal::KILL);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_parse_whatever_the_command_name() {
        let line = "4242 (a (b) c) S 1 4240 4240 0 -1 4194560 100 0 0 0";
        assert_eq!(parse_stat(line), Some(('S', 4240)));
        assert_eq!(parse_stat("7 (sh) Z 1 7 7"), Some(('Z', 7)));
        assert_eq!(parse_stat("garbage"), None);
        assert_eq!(parse_stat("1 (x) R"), None);
    }

    #[test]
    fn this_process_is_seen_in_its_own_group() {
        let me = std::process::id();
        let pg = rustix::process::getpgrp().as_raw_nonzero().get() as u32;
        assert!(members(pg).contains(&me));
        assert!(pid_alive(me));
    }
}
