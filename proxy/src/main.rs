//! `qcg-proxy`: a relay proxy, started from one config file.

use clap::Parser;
use qcg_proto::service::fail;
use std::path::PathBuf;

/// The qcg relay proxy: relays the bytes of links between processes that cannot
/// reach each other, for pairs the broker announced with a single-use token.
#[derive(Parser)]
#[command(version, about, long_about = None)]
struct Cli {
    /// Configuration file (TOML): `listen`, `public_address`, `broker`, `ca`, `cert`,
    /// `key`, and optionally `crl`, `metrics_listen` and `metrics_public`. See
    /// configs/proxy.toml.
    #[arg(long, short)]
    config: PathBuf,
    /// Check the config and exit (0: fine; 2: each problem printed, naming the
    /// field and how to fix it): it parses, its certificate, key and CA are there,
    /// match and are of this service's role, and its ports are free. Run it before
    /// starting the service (systemd: `ExecStartPre`).
    #[arg(long)]
    check_config: bool,
}

#[tokio::main]
async fn main() {
    qcg_proto::service::init_logging();
    qcg_proto::limits::raise_nofile("qcg-proxy");
    let cli = Cli::parse();
    let shutdown = qcg_proto::service::Shutdown::install();
    let cfg =
        qcg_proxy::config::Config::load(&cli.config).unwrap_or_else(|e| fail("qcg-proxy", 2, e));
    if cli.check_config {
        qcg_proto::check::report("qcg-proxy", &cli.config, &cfg.problems());
    }
    let id = cfg.identity().unwrap_or_else(|e| fail("qcg-proxy", 2, e));
    // Every listener is bound before the service says it serves: a taken port
    // stops it with the field's name, never just after a "relaying" line.
    let metrics = match cfg.metrics_listen {
        Some(at) => Some(
            qcg_proxy::Proxy::bind_metrics(at)
                .await
                .unwrap_or_else(|e| fail("qcg-proxy", 1, e)),
        ),
        None => None,
    };
    let mut proxy = qcg_proxy::Proxy::start(id, cfg.listen, cfg.public_address, cfg.broker)
        .await
        .unwrap_or_else(|e| fail("qcg-proxy", 1, e));
    let metrics = metrics.map(|l| proxy.serve_metrics_on(l));
    println!("qcg-proxy: relaying on {}", proxy.addr);
    if let Some(at) = metrics {
        println!("qcg-proxy: metrics on http://{at}/metrics");
    }
    shutdown.wait().await;
    proxy.shutdown();
}
