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
    /// The grid's revocation list (PEM, `qcg ca revoke` writes it as `crl.pem` in the
    /// CA folder). Peers whose certificate it lists fail the handshake; the file is
    /// read again whenever it changes. Omit to check no revocations.
    pub crl: Option<PathBuf>,
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
        c.crl = c.crl.map(|p| resolve(path, &p));
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
        Identity::load(&self.cert, &self.key, &self.ca)?.with_crl(self.crl.as_deref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load_text(name: &str, text: &str) -> Result<Config, ConfigError> {
        let path =
            std::env::temp_dir().join(format!("qcg-broker-{}-{name}.toml", std::process::id()));
        std::fs::write(&path, text).map_err(|e| ConfigError {
            path: path.clone(),
            line: None,
            column: None,
            field: None,
            message: e.to_string(),
        })?;
        let r = Config::load(&path);
        let _ = std::fs::remove_file(&path);
        r
    }

    const BASE: &str = "listen = \"127.0.0.1:0\"\nca = \"c\"\ncert = \"c\"\nkey = \"k\"\n";

    #[test]
    fn job_api_fields_load_and_bad_ones_name_line_and_field() {
        let c = load_text(
            "ok",
            &format!("{BASE}https_listen = \"127.0.0.1:7781\"\nprobe_interval_secs = 60\n"),
        )
        .unwrap();
        let o = c.options();
        assert_eq!(o.https.map(|a| a.port()), Some(7781));
        assert_eq!(o.probe_interval, std::time::Duration::from_secs(60));
        let e = load_text("zero", &format!("{BASE}probe_interval_secs = 0\n")).unwrap_err();
        assert_eq!(
            (e.line, e.field.as_deref()),
            (Some(5), Some("probe_interval_secs")),
            "{e}"
        );
        let e = load_text("bad", &format!("{BASE}https_listen = \"nowhere\"\n")).unwrap_err();
        assert_eq!(
            (e.line, e.field.as_deref()),
            (Some(5), Some("https_listen")),
            "{e}"
        );
        let e = load_text("typo", &format!("{BASE}http_listen_tls = \"x\"\n")).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("http_listen_tls"), "{e}");
    }
}
