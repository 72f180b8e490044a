//! `qcg-proxy`: a relay proxy, started from one config file.

use clap::Parser;
use std::path::PathBuf;

/// The qcg relay proxy: relays the bytes of links between processes that cannot
/// reach each other, for pairs the broker announced with a single-use token.
#[derive(Parser)]
#[command(version, about, long_about = None)]
struct Cli {
    /// Configuration file (TOML): `listen`, `public_address`, `broker`, `ca`, `cert`,
    /// `key`. See configs/proxy.toml.
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
    let cfg = match qcg_proxy::config::Config::load(&cli.config) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("qcg-proxy: {e}");
            std::process::exit(2);
        }
    };
    let id = match cfg.identity() {
        Ok(id) => id,
        Err(e) => {
            eprintln!("qcg-proxy: {e}");
            std::process::exit(2);
        }
    };
    let proxy = match qcg_proxy::Proxy::start(id, cfg.listen, cfg.public_address, cfg.broker).await
    {
        Ok(p) => p,
        Err(e) => {
            eprintln!("qcg-proxy: {e}");
            std::process::exit(1);
        }
    };
    println!("qcg-proxy: relaying on {}", proxy.addr);
    let _ = tokio::signal::ctrl_c().await;
    proxy.shutdown();
}
