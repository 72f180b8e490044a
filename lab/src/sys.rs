//! Running the system's tools (`ip`, `nft`, `tc`, `kill`) and checking they are there.

use super::error::{LabError, Result};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};

/// Set by the signal handler of a foreground command; checked between steps.
pub static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Installs a handler for Ctrl-C and SIGTERM that sets [`INTERRUPTED`], so a foreground
/// command can stop between two steps and clean up.
pub fn catch_signals() {
    // Fails only if a handler is already set, which then does the same.
    let _ = ctrlc::set_handler(|| INTERRUPTED.store(true, Ordering::SeqCst));
}

/// Fails with [`LabError::Interrupted`] once a signal came.
pub fn check_interrupted() -> Result<()> {
    if INTERRUPTED.load(Ordering::SeqCst) {
        Err(LabError::Interrupted)
    } else {
        Ok(())
    }
}

fn describe(args: &[&str]) -> String {
    args.join(" ")
}

/// Runs `args[0] args[1..]` with `input` on its standard input; returns its stdout.
pub fn run(args: &[&str], input: Option<&str>) -> Result<String> {
    let (prog, rest) = args.split_first().ok_or_else(|| LabError::Command {
        cmd: String::new(),
        status: "empty command".into(),
        stderr: String::new(),
    })?;
    let mut cmd = Command::new(prog);
    cmd.args(rest)
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    tracing::debug!(cmd = %describe(args), "run");
    let mut child = cmd
        .spawn()
        .map_err(|e| LabError::io(format!("cannot start `{}`", describe(args)), e))?;
    // A write error (the command ended early) shows in its status and stderr below.
    let written = match (input, child.stdin.take()) {
        (Some(text), Some(mut stdin)) => stdin.write_all(text.as_bytes()),
        _ => Ok(()),
    };
    let out = child
        .wait_with_output()
        .map_err(|e| LabError::io(format!("waiting for `{}`", describe(args)), e))?;
    if out.status.success() {
        written.map_err(|e| LabError::io(format!("writing to `{}`", describe(args)), e))?;
    } else {
        let mut cmd = describe(args);
        if let Some(text) = input {
            let first: Vec<&str> = text.lines().take(3).collect();
            cmd.push_str(&format!(" <<< {}…", first.join("; ")));
        }
        return Err(LabError::Command {
            cmd,
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs `ip [-n NS] -batch -` over `lines`.
pub fn ip_batch(ns: Option<&str>, lines: &[String]) -> Result<()> {
    if lines.is_empty() {
        return Ok(());
    }
    let mut args = vec!["ip"];
    if let Some(ns) = ns {
        args.extend(["-n", ns]);
    }
    args.extend(["-batch", "-"]);
    run(&args, Some(&(lines.join("\n") + "\n"))).map(|_| ())
}

/// Runs `tc -n NS -batch -` over `lines`.
pub fn tc_batch(ns: &str, lines: &[String]) -> Result<()> {
    if lines.is_empty() {
        return Ok(());
    }
    run(
        &["tc", "-n", ns, "-batch", "-"],
        Some(&(lines.join("\n") + "\n")),
    )
    .map(|_| ())
}

/// Loads an nftables ruleset in a namespace.
pub fn nft_load(ns: &str, ruleset: &str) -> Result<()> {
    run(
        &["ip", "netns", "exec", ns, "nft", "-f", "-"],
        Some(ruleset),
    )
    .map(|_| ())
}

/// Runs a shell script in a namespace.
pub fn sh_in(ns: &str, script: &str) -> Result<()> {
    run(&["ip", "netns", "exec", ns, "sh", "-c", script], None).map(|_| ())
}

/// The network namespaces that exist (names under /run/netns).
pub fn list_namespaces() -> Result<Vec<String>> {
    let out = run(&["ip", "netns", "list"], None)?;
    Ok(out
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect())
}

/// Pids of processes in a namespace.
pub fn namespace_pids(ns: &str) -> Vec<u32> {
    run(&["ip", "netns", "pids", ns], None)
        .map(|o| o.lines().filter_map(|l| l.trim().parse().ok()).collect())
        .unwrap_or_default()
}

/// Whether process `pid` exists (and is not a zombie).
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name in parentheses.
        Ok(s) => s
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

/// Sends `signal` (e.g. "TERM") to each pid, by id.
pub fn kill(pids: &[u32], signal: &str) {
    if pids.is_empty() {
        return;
    }
    let sig = format!("-{signal}");
    let ids: Vec<String> = pids.iter().map(u32::to_string).collect();
    let mut args = vec!["kill", sig.as_str(), "--"];
    args.extend(ids.iter().map(String::as_str));
    // A process may have ended meanwhile: that is fine.
    let _ = run(&args, None);
}

/// Whether the effective user is root, from /proc/self/status.
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2))
                .map(|euid| euid == "0")
        })
        .unwrap_or(false)
}

fn on_path(tool: &str) -> bool {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/sbin".into()])
        .any(|d| d.join(tool).is_file())
}

/// Checks that the lab can run here: root, `ip`, `nft`, `tc`, `kill`, /dev/net/tun.
pub fn preflight() -> Result<()> {
    if !is_root() {
        return Err(LabError::NotRoot);
    }
    for (tool, pkg) in [
        ("ip", "iproute2"),
        ("tc", "iproute2"),
        ("nft", "nftables"),
        ("kill", "procps"),
    ] {
        if !on_path(tool) {
            return Err(LabError::Missing {
                what: format!("`{tool}` (package {pkg})"),
            });
        }
    }
    if !Path::new("/dev/net/tun").exists() {
        return Err(LabError::Missing {
            what: "/dev/net/tun (the tun kernel module: `modprobe tun`)".into(),
        });
    }
    Ok(())
}
