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
    /// TCP address of the HTTP API; omit to disable it.
    pub http_listen: Option<SocketAddr>,
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
        let (mut c, _): (Config, _) = load(path)?;
        c.ca = resolve(path, &c.ca);
        c.cert = resolve(path, &c.cert);
        c.key = resolve(path, &c.key);
        Ok(c)
    }

    /// Loads the TLS identity the config names.
    pub fn identity(&self) -> Result<Identity, qcg_proto::tls::TlsError> {
        Identity::load(&self.cert, &self.key, &self.ca)
    }
}
