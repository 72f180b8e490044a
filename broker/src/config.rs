//! The broker's configuration file.

use qcg_proto::config::{load, resolve, ConfigError};
use qcg_proto::tls::Identity;
use serde::Deserialize;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// `qcg-broker --config broker.toml`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// UDP address for frontals (QUIC).
    pub listen: SocketAddr,
    /// TCP address of the read-only HTTP API; omit to disable it.
    pub http_listen: Option<SocketAddr>,
    /// TCP address of the HTTPS job API (clients need a `client` certificate from
    /// the grid CA); omit to disable job submission.
    pub https_listen: Option<SocketAddr>,
    /// Seconds between two measurements of the link between two clusters
    /// (default 300).
    pub probe_interval_secs: Option<u64>,
    /// The grid CA certificate (PEM), relative to this file.
    pub ca: PathBuf,
    /// This broker's certificate (PEM, role broker).
    pub cert: PathBuf,
    /// This broker's private key (PEM).
    pub key: PathBuf,
}

impl Config {
    /// Loads and checks a config file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let (mut c, text): (Config, _) = load(path)?;
        if c.probe_interval_secs == Some(0) {
            return Err(ConfigError::field(
                path,
                &text,
                "probe_interval_secs",
                "must be at least 1",
            ));
        }
        c.ca = resolve(path, &c.ca);
        c.cert = resolve(path, &c.cert);
        c.key = resolve(path, &c.key);
        Ok(c)
    }

    /// How the broker serves.
    pub fn options(&self) -> crate::Options {
        crate::Options {
            quic: self.listen,
            http: self.http_listen,
            https: self.https_listen,
            probe_interval: self.probe_interval_secs.map_or(
                crate::DEFAULT_PROBE_INTERVAL,
                std::time::Duration::from_secs,
            ),
        }
    }

    /// Loads the TLS identity the config names.
    pub fn identity(&self) -> Result<Identity, qcg_proto::tls::TlsError> {
        Identity::load(&self.cert, &self.key, &self.ca)
    }
}
