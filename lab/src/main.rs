//! `qcg-lab`: builds a grid of sites in network namespaces from a topology file, runs
//! commands inside it, measures its WAN links, and tears it down.

#![forbid(unsafe_code)]

use anyhow::Context;
use clap::{Parser, Subcommand};
use qcg_lab::{check, delay, ops, probe, state, sys, LabError};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// A lab of sites behind firewalls and NATs, joined by WAN links with delay and
/// bandwidth, built from network namespaces (needs root).
#[derive(Parser)]
#[command(version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Builds the lab described by a topology file.
    Up {
        /// The topology (TOML).
        topology: PathBuf,
        /// Prefix of namespace names (default: the file's `prefix`, else `ql`).
        #[arg(long)]
        prefix: Option<String>,
    },
    /// Runs a command inside a host of the running lab (a node `SITE-K`, `SITE-gw`,
    /// `core` or a public host).
    Exec {
        /// Which lab, when several run.
        #[arg(long)]
        prefix: Option<String>,
        /// The host.
        host: String,
        /// The command and its arguments.
        #[arg(last = true, required = true)]
        cmd: Vec<String>,
    },
    /// Lists the hosts of the running lab with their addresses.
    Hosts {
        /// Which lab, when several run.
        #[arg(long)]
        prefix: Option<String>,
    },
    /// Measures RTT and bandwidth of every WAN link; fails if one is off by more than 10%.
    Check {
        /// Which lab, when several run.
        #[arg(long)]
        prefix: Option<String>,
        /// Seconds of each bulk transfer.
        #[arg(long, default_value_t = 3.0)]
        secs: f64,
    },
    /// Removes the lab: its processes, namespaces and state.
    Down {
        /// Which lab, when several run.
        #[arg(long)]
        prefix: Option<String>,
    },
    /// (internal) the WAN delay line, run in the core namespace by `up`.
    #[command(hide = true)]
    DelayLine {
        #[arg(long)]
        state: PathBuf,
    },
    /// (internal) probe server: TCP (peer address, byte sink) and UDP echo.
    #[command(hide = true)]
    Serve {
        #[arg(long = "port", required = true)]
        ports: Vec<u16>,
        #[arg(long, default_value_t = 60)]
        for_secs: u64,
    },
    /// (internal) one TCP connection; exit 3 on timeout, 4 if refused.
    #[command(hide = true)]
    Connect {
        to: SocketAddr,
        #[arg(long)]
        from_port: Option<u16>,
        #[arg(long, default_value_t = 1000)]
        timeout_ms: u64,
    },
    /// (internal) bulk TCP transfer to a probe server.
    #[command(hide = true)]
    Source {
        to: SocketAddr,
        #[arg(long, default_value_t = 3.0)]
        secs: f64,
    },
    /// (internal) UDP echo round trips to a probe server.
    #[command(hide = true)]
    Rtt {
        to: SocketAddr,
        #[arg(long, default_value_t = 20)]
        count: usize,
        #[arg(long, default_value_t = 5)]
        gap_ms: u64,
    },
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    match run(Cli::parse()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("qcg-lab: {e:#}");
            if matches!(e.downcast_ref::<LabError>(), Some(LabError::Topology(_))) {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.cmd {
        Cmd::Up { topology, prefix } => {
            sys::catch_signals();
            let st = ops::up(&topology, prefix.as_deref())?;
            println!(
                "lab `{}` is up ({} namespaces, {} WAN links)",
                st.prefix,
                st.namespaces.len(),
                st.topology.wan.len()
            );
            print!("{}", ops::hosts_table(&st.prefix, &st.topology));
            println!(
                "qcg-lab exec --prefix {p} HOST -- CMD…   qcg-lab check --prefix {p}   qcg-lab down --prefix {p}",
                p = st.prefix
            );
        }
        Cmd::Exec { prefix, host, cmd } => {
            let st = state::find(prefix.as_deref())?;
            return Err(ops::exec(&st, &host, &cmd).into());
        }
        Cmd::Hosts { prefix } => {
            let st = state::find(prefix.as_deref())?;
            print!("{}", ops::hosts_table(&st.prefix, &st.topology));
        }
        Cmd::Check { prefix, secs } => {
            sys::catch_signals();
            let st = state::find(prefix.as_deref())?;
            let (figures, problems) = check::check(&st, secs, &mut std::io::stdout())?;
            if !problems.is_empty() {
                for p in &problems {
                    eprintln!("qcg-lab check: {p}");
                }
                return Ok(ExitCode::FAILURE);
            }
            println!("all {} WAN links within 10% of the topology", figures.len());
        }
        Cmd::Down { prefix } => {
            let prefix = match state::resolve_prefix(prefix.as_deref()) {
                Ok(p) => p,
                Err(LabError::NoLab(dir)) => {
                    println!("no lab is running (nothing under {})", dir.display());
                    return Ok(ExitCode::SUCCESS);
                }
                Err(e) => return Err(e.into()),
            };
            let removed = ops::down(&prefix)?;
            if removed.namespaces.is_empty() {
                println!("no lab `{prefix}` is running; nothing to remove");
            } else {
                println!(
                    "lab `{prefix}` is down: {} namespaces and {} processes removed",
                    removed.namespaces.len(),
                    removed.processes
                );
            }
        }
        Cmd::DelayLine { state } => {
            let text = std::fs::read_to_string(&state)
                .with_context(|| format!("reading {}", state.display()))?;
            let st: state::State = serde_json::from_str(&text)
                .with_context(|| format!("parsing {}", state.display()))?;
            delay::run(&st.topology).context("delay line")?;
        }
        Cmd::Serve { ports, for_secs } => {
            probe::serve(&ports, Duration::from_secs(for_secs))?;
        }
        Cmd::Connect {
            to,
            from_port,
            timeout_ms,
        } => {
            return Ok(
                match probe::connect(to, from_port, Duration::from_millis(timeout_ms))? {
                    probe::Connect::Seen(a) => {
                        println!("seen_as={a}");
                        ExitCode::SUCCESS
                    }
                    probe::Connect::Timeout => {
                        eprintln!("connect to {to}: timed out after {timeout_ms} ms");
                        ExitCode::from(probe::EXIT_TIMEOUT as u8)
                    }
                    probe::Connect::Refused => {
                        eprintln!("connect to {to}: refused");
                        ExitCode::from(probe::EXIT_REFUSED as u8)
                    }
                },
            );
        }
        Cmd::Source { to, secs } => {
            let (mbit, sent) = probe::source(to, secs)?;
            println!("goodput_mbit={mbit:.3} sent_bytes={sent}");
        }
        Cmd::Rtt { to, count, gap_ms } => {
            let (min, median, max, lost) = probe::rtt(to, count, Duration::from_millis(gap_ms))?;
            println!("rtt_ms min={min:.3} median={median:.3} max={max:.3} lost={lost}");
        }
    }
    Ok(ExitCode::SUCCESS)
}
