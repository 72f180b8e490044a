//! `up`, `down`, `exec` and `hosts`: the lab's life cycle.

use super::error::{LabError, Result};
use super::plan::{self, Plan};
use super::state::{self, State};
use super::sys;
use super::topo::{self, Topology};
use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The prefix used when neither the file nor the command line gives one.
pub const DEFAULT_PREFIX: &str = "ql";

/// Brings up the topology in `path`. On any failure, or a signal, everything built so
/// far is removed before returning the error.
pub fn up(path: &Path, prefix: Option<&str>) -> Result<State> {
    let topology = topo::load(path)?;
    let prefix = prefix
        .map(str::to_string)
        .or_else(|| topology.prefix.clone())
        .unwrap_or_else(|| DEFAULT_PREFIX.to_string());
    topo::check_prefix(&prefix).map_err(LabError::BadPrefix)?;
    sys::preflight()?;
    let plan = plan::plan(&topology, &prefix);

    let existing = sys::list_namespaces()?;
    if existing
        .iter()
        .any(|n| n.starts_with(&format!("{prefix}-")))
    {
        return Err(LabError::AlreadyUp(prefix));
    }
    std::fs::create_dir_all(state::RUN_DIR)
        .map_err(|e| LabError::io(format!("creating {}", state::RUN_DIR), e))?;
    match std::fs::create_dir(state::dir(&prefix)) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            return Err(LabError::AlreadyUp(prefix))
        }
        Err(e) => {
            return Err(LabError::io(
                format!("creating {}", state::dir(&prefix).display()),
                e,
            ))
        }
    }
    let mut st = State {
        prefix: prefix.clone(),
        topology_file: std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()),
        topology,
        namespaces: plan.namespaces.clone(),
        delay_line_pid: None,
    };
    let built = st.save().and_then(|()| build(&plan, &mut st));
    match built {
        Ok(()) => Ok(st),
        Err(e) => {
            tracing::warn!(error = %e, "up failed: removing what was built");
            if let Err(d) = down(&prefix) {
                tracing::error!(error = %d, "cleaning up after a failed up");
            }
            Err(e)
        }
    }
}

fn build(plan: &Plan, st: &mut State) -> Result<()> {
    // For the tests of an interrupted `up`: a pause before each step.
    let pause = std::env::var("QCG_LAB_STEP_PAUSE_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .map(Duration::from_millis);
    let step = |name: &str| {
        tracing::info!(step = name, "up");
        if let Some(p) = pause {
            std::thread::sleep(p);
        }
        sys::check_interrupted()
    };
    step("namespaces")?;
    let adds: Vec<String> = plan
        .namespaces
        .iter()
        .map(|n| format!("netns add {n}"))
        .collect();
    sys::ip_batch(None, &adds)?;
    if std::env::var("QCG_LAB_FAIL_AFTER").as_deref() == Ok("namespaces") {
        // For the tests of the clean-up after a failed `up`.
        return Err(LabError::Probe(
            "failure injected after namespaces (QCG_LAB_FAIL_AFTER)".into(),
        ));
    }
    step("links")?;
    sys::ip_batch(None, &plan.links)?;
    step("addresses")?;
    for (ns, lines) in &plan.setup {
        sys::check_interrupted()?;
        sys::ip_batch(Some(ns), lines)?;
    }
    step("sysctl")?;
    for (ns, script) in &plan.sysctl {
        sys::check_interrupted()?;
        sys::sh_in(ns, script)?;
    }
    step("nftables")?;
    for (ns, rules) in &plan.nft {
        sys::check_interrupted()?;
        sys::nft_load(ns, rules)?;
    }
    step("tc")?;
    for (ns, lines) in &plan.tc {
        sys::tc_batch(ns, lines)?;
    }
    step("delay line")?;
    start_delay_line(st)?;
    step("wan routes")?;
    let core = plan::ns_name(&st.prefix, "core");
    sys::ip_batch(Some(&core), &plan.wan_routes)?;
    Ok(())
}

fn start_delay_line(st: &mut State) -> Result<()> {
    let exe = crate::qcg_lab_exe().map_err(|e| LabError::io("finding qcg-lab", e))?;
    let core = plan::ns_name(&st.prefix, "core");
    let dir = state::dir(&st.prefix);
    let log_path = dir.join("delay-line.log");
    let log = std::fs::File::create(&log_path)
        .map_err(|e| LabError::io(format!("creating {}", log_path.display()), e))?;
    // `ip netns exec` execs the command, so the pid is the delay line's own. Its own
    // process group keeps a terminal's Ctrl-C (meant for `up`) away from it.
    let mut child = Command::new("ip")
        .args(["netns", "exec", &core])
        .arg(&exe)
        .arg("delay-line")
        .arg("--state")
        .arg(state::file(&st.prefix))
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .map_err(|e| LabError::io("starting the delay line", e))?;
    st.delay_line_pid = Some(child.id());
    st.save()?;
    let mut line = String::new();
    if let Some(out) = child.stdout.take() {
        let _ = BufReader::new(out).read_line(&mut line);
    }
    if line.trim() != "ready" {
        let _ = child.kill();
        let _ = child.wait();
        let mut msg = String::new();
        let _ = std::fs::File::open(&log_path).and_then(|mut f| f.read_to_string(&mut msg));
        return Err(LabError::Probe(format!(
            "the delay line did not start: {}",
            msg.trim()
        )));
    }
    tracing::info!(pid = child.id(), "delay line ready");
    Ok(())
}

/// What `down` removed.
#[derive(Debug, Default)]
pub struct Removed {
    /// Namespaces deleted.
    pub namespaces: Vec<String>,
    /// Processes ended (the delay line and anything started with `exec`).
    pub processes: usize,
}

/// Removes the lab with `prefix`: its processes, namespaces and state folder.
/// Namespaces that carry the prefix are removed even when the state file is gone.
pub fn down(prefix: &str) -> Result<Removed> {
    topo::check_prefix(prefix).map_err(LabError::BadPrefix)?;
    let st = State::load(prefix).ok().flatten();
    let tag = format!("{prefix}-");
    let existing = sys::list_namespaces()?;
    let namespaces: Vec<String> = existing
        .into_iter()
        .filter(|n| n.starts_with(&tag) || st.as_ref().is_some_and(|s| s.namespaces.contains(n)))
        .collect();
    let mut pids: Vec<u32> = namespaces
        .iter()
        .flat_map(|n| sys::namespace_pids(n))
        .collect();
    if let Some(pid) = st.as_ref().and_then(|s| s.delay_line_pid) {
        let ours = std::fs::read(format!("/proc/{pid}/cmdline"))
            .map(|c| String::from_utf8_lossy(&c).contains("delay-line"))
            .unwrap_or(false);
        if ours && !pids.contains(&pid) {
            pids.push(pid);
        }
    }
    pids.sort_unstable();
    pids.dedup();
    sys::kill(&pids, "TERM");
    let deadline = Instant::now() + Duration::from_secs(2);
    while pids.iter().any(|&p| sys::alive(p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let left: Vec<u32> = pids.iter().copied().filter(|&p| sys::alive(p)).collect();
    sys::kill(&left, "KILL");

    let dels: Vec<String> = namespaces
        .iter()
        .map(|n| format!("netns delete {n}"))
        .collect();
    if !dels.is_empty() {
        sys::run(
            &["ip", "-force", "-batch", "-"],
            Some(&(dels.join("\n") + "\n")),
        )?;
    }
    let dir = state::dir(prefix);
    if dir.exists() {
        std::fs::remove_dir_all(&dir)
            .map_err(|e| LabError::io(format!("removing {}", dir.display()), e))?;
    }
    Ok(Removed {
        namespaces,
        processes: pids.len(),
    })
}

/// Whether anything of the lab with `prefix` is left (a state folder or a namespace).
pub fn exists(prefix: &str) -> Result<bool> {
    let tag = format!("{prefix}-");
    Ok(state::dir(prefix).exists() || sys::list_namespaces()?.iter().any(|n| n.starts_with(&tag)))
}

/// The namespace of `host` in the lab `st`.
pub fn host_namespace(st: &State, host: &str) -> Result<String> {
    if st.topology.host(host).is_none() {
        let known: Vec<String> = st.topology.hosts().into_iter().map(|h| h.name).collect();
        return Err(LabError::UnknownHost {
            host: host.to_string(),
            known: known.join(", "),
        });
    }
    Ok(plan::ns_name(&st.prefix, host))
}

/// Replaces this process with `cmd` run inside `host`'s namespace.
pub fn exec(st: &State, host: &str, cmd: &[String]) -> LabError {
    let ns = match host_namespace(st, host) {
        Ok(ns) => ns,
        Err(e) => return e,
    };
    let e = Command::new("ip")
        .args(["netns", "exec", &ns])
        .args(cmd)
        .exec();
    LabError::io(format!("running `ip netns exec {ns}`"), e)
}

/// A table of the lab's hosts: name, namespace, address, address seen from outside.
pub fn hosts_table(prefix: &str, t: &Topology) -> String {
    let mut s = format!(
        "{:<16} {:<24} {:<15} {}\n",
        "HOST", "NAMESPACE", "ADDRESS", "SEEN OUTSIDE AS"
    );
    for h in t.hosts() {
        s.push_str(&format!(
            "{:<16} {:<24} {:<15} {}\n",
            h.name,
            plan::ns_name(prefix, &h.name),
            h.addr,
            h.public_addr.map_or(String::new(), |a| a.to_string())
        ));
    }
    s
}
