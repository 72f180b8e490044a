//! The helper's configuration file.

use qcg_proto::config::{load, resolve, ConfigError};
use qcg_proto::tls::Identity;
use serde::Deserialize;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

/// `qcg-helper --config helper.toml`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// This node's name.
    pub node: String,
    /// The cluster frontal's QUIC address.
    pub frontal: SocketAddr,
    /// Unix socket local processes connect to (relative to this file if relative).
    pub socket: PathBuf,
    /// The node's address inside the cluster: processes bind their listeners to it.
    pub bind_address: IpAddr,
    /// The grid CA certificate (PEM), relative to this file.
    pub ca: PathBuf,
    /// This helper's certificate (PEM, role helper).
    pub cert: PathBuf,
    /// This helper's private key (PEM).
    pub key: PathBuf,
    /// Which local account runs each submitter's processes (default: the `qcg`
    /// user for everyone, root refused).
    #[serde(default)]
    pub accounts: crate::accounts::Accounts,
}

impl Config {
    /// Loads and checks a config file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let (mut c, text): (Config, _) = load(path)?;
        if c.node.trim().is_empty() {
            return Err(ConfigError::field(path, &text, "node", "must not be empty"));
        }
        c.socket = resolve(path, &c.socket);
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
