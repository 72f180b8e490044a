//! `qcg-helper`: a node's helper, started from one config file.

use clap::Parser;
use std::path::PathBuf;

/// The qcg helper: runs on every node, serves the node's processes on a unix socket
/// and relays their requests to the cluster's frontal.
#[derive(Parser)]
#[command(version, about, long_about = None)]
struct Cli {
    /// Configuration file (TOML): `node`, `frontal`, `socket`, `bind_address`, `ca`,
    /// `cert`, `key`. See configs/helper-*.toml.
    #[arg(long, short)]
    config: PathBuf,
}

#[tokio::main]
async fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let cli = Cli::parse();
    let cfg = match qcg_helper::config::Config::load(&cli.config) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("qcg-helper: {e}");
            std::process::exit(2);
        }
    };
    let id = match cfg.identity() {
        Ok(id) => id,
        Err(e) => {
            eprintln!("qcg-helper: {e}");
            std::process::exit(2);
        }
    };
    let helper = match qcg_helper::Helper::start(
        id,
        cfg.node.clone(),
        cfg.frontal,
        cfg.socket.clone(),
        cfg.bind_address,
    )
    .await
    {
        Ok(h) => h,
        Err(e) => {
            eprintln!("qcg-helper: {e}");
            std::process::exit(1);
        }
    };
    println!(
        "qcg-helper: node {} serving processes on {}",
        cfg.node,
        cfg.socket.display()
    );
    let _ = tokio::signal::ctrl_c().await;
    helper.shutdown().await;
}
