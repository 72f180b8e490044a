//! `qcg-helper`: a node's helper, started from one config file.

use clap::Parser;
use qcg_proto::service::fail;
use std::path::PathBuf;

/// The qcg helper: runs on every node, serves the node's processes on a unix socket
/// and relays their requests to the cluster's frontal.
#[derive(Parser)]
#[command(version, about, long_about = None)]
struct Cli {
    /// Configuration file (TOML): `node`, `frontal`, `socket`, `socket_group`,
    /// `bind_address`, `ca`, `cert`, `key`, `crl`. See configs/helper-*.toml.
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
    qcg_proto::limits::raise_nofile("qcg-helper");
    let cli = Cli::parse();
    let shutdown = qcg_proto::service::Shutdown::install();
    let cfg =
        qcg_helper::config::Config::load(&cli.config).unwrap_or_else(|e| fail("qcg-helper", 2, e));
    if cli.check_config {
        qcg_proto::check::report("qcg-helper", &cli.config, &cfg.problems());
    }
    let id = cfg.identity().unwrap_or_else(|e| fail("qcg-helper", 2, e));
    // Every listener is bound before the service says it serves: a taken port
    // stops it with the field's name, never just after a "serving" line.
    let metrics = match cfg.metrics_listen {
        Some(at) => Some(
            qcg_helper::Helper::bind_metrics(at)
                .await
                .unwrap_or_else(|e| fail("qcg-helper", 1, e)),
        ),
        None => None,
    };
    let helper = qcg_helper::Helper::start_full(
        id,
        qcg_helper::node::detect(&cfg.node),
        cfg.frontal,
        cfg.socket.clone(),
        cfg.bind_address,
        cfg.socket_gid,
        cfg.accounts.clone(),
    )
    .await
    .unwrap_or_else(|e| fail("qcg-helper", 1, e));
    let metrics = metrics.map(|l| helper.serve_metrics_on(l));
    println!(
        "qcg-helper: node {} serving processes on {}",
        cfg.node,
        cfg.socket.display()
    );
    if let Some(at) = metrics {
        println!("qcg-helper: metrics on http://{at}/metrics");
    }
    shutdown.wait().await;
    helper.shutdown().await;
}
