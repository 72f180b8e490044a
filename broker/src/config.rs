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
    /// TCP address of the plain HTTP API (aggregate figures only); omit to disable
    /// it. It must be a loopback address unless `http_public` is true.
    pub http_listen: Option<SocketAddr>,
    /// Serve the plain HTTP API on a non-loopback address (default false).
    #[serde(default)]
    pub http_public: bool,
    /// TCP address of the HTTPS job API (clients need a `client` certificate from
    /// the grid CA); omit to disable job submission.
    pub https_listen: Option<SocketAddr>,
    /// Seconds between two measurements of the link between two clusters
    /// (default 300).
    pub probe_interval_secs: Option<u64>,
    /// Most processes registered per job (default 4096).
    pub max_registrations_per_job: Option<usize>,
    /// Most processes registered per cluster (default 65536).
    pub max_registrations_per_cluster: Option<usize>,
    /// Bytes of output kept per job; past it the oldest lines are dropped and the
    /// reader is told (default 16 MiB).
    pub output_cap_bytes: Option<usize>,
    /// Seconds a finished job's output is kept (default 3600).
    pub output_keep_secs: Option<u64>,
    // Retention and per-client limits (issue 21, part 4).
    /// Seconds a finished job's record (state, ranks, placement) is kept
    /// (default 604800, a week); its profile goes with its output.
    pub job_record_keep_secs: Option<u64>,
    /// Bytes of output kept, all jobs together; past it the output of the job that
    /// ended first is dropped (default 256 MiB).
    pub output_total_cap_bytes: Option<usize>,
    /// Jobs one client (certificate name) may have waiting (default 200).
    pub max_queued_jobs_per_client: Option<usize>,
    /// Bytes of job profiles one client may have stored (default 64 MiB).
    pub max_profile_bytes_per_client: Option<usize>,
    /// Seconds for a client's past usage (core-seconds) to count half in the
    /// queue's fair share (default 86400).
    pub fair_share_half_life_secs: Option<u64>,
    /// Seconds the helper of a node running a job may stay away (disconnected from
    /// its frontal, or its frontal from the broker's reports) before the job fails,
    /// naming the node (default 30).
    pub lost_node_grace_secs: Option<u64>,
    /// The database jobs are kept in across restarts, relative to this file
    /// (default `state/broker.redb`, its folder created if needed).
    #[serde(default = "default_database")]
    pub database: PathBuf,
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
    /// Which links between processes are encrypted and authenticated: `wan` (links
    /// between clusters, default), `all` or `none`.
    #[serde(default)]
    pub encrypt: qcg_proto::Encrypt,
    /// Pairs of clusters with a mode of their own:
    /// `[[encrypt_pair]]` `clusters = ["a", "b"]` `encrypt = "none"`.
    #[serde(default)]
    pub encrypt_pair: Vec<crate::encrypt::PairMode>,
}

fn default_database() -> PathBuf {
    PathBuf::from("state/broker.redb")
}

impl Config {
    /// Loads and checks a config file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let (mut c, text): (Config, _) = load(path)?;
        if c.lost_node_grace_secs == Some(0) {
            return Err(ConfigError::field(
                path,
                &text,
                "lost_node_grace_secs",
                "must be at least 1",
            ));
        }
        if c.probe_interval_secs == Some(0) {
            return Err(ConfigError::field(
                path,
                &text,
                "probe_interval_secs",
                "must be at least 1",
            ));
        }
        for (field, v) in [
            ("max_registrations_per_job", c.max_registrations_per_job),
            (
                "max_registrations_per_cluster",
                c.max_registrations_per_cluster,
            ),
            ("max_queued_jobs_per_client", c.max_queued_jobs_per_client),
            (
                "max_profile_bytes_per_client",
                c.max_profile_bytes_per_client,
            ),
            (
                "fair_share_half_life_secs",
                c.fair_share_half_life_secs.map(|s| s as usize),
            ),
        ] {
            if v == Some(0) {
                return Err(ConfigError::field(path, &text, field, "must be at least 1"));
            }
        }
        if c.output_cap_bytes.is_some_and(|b| b < 1024) {
            return Err(ConfigError::field(
                path,
                &text,
                "output_cap_bytes",
                "must be at least 1024",
            ));
        }
        if let (Some(total), Some(per_job)) = (c.output_total_cap_bytes, c.output_cap_bytes) {
            if total < per_job {
                return Err(ConfigError::field(
                    path,
                    &text,
                    "output_total_cap_bytes",
                    format!("must be at least output_cap_bytes ({per_job})"),
                ));
            }
        }
        if let Some(a) = c.http_listen {
            if !a.ip().is_loopback() && !c.http_public {
                return Err(ConfigError::field(
                    path,
                    &text,
                    "http_listen",
                    format!(
                        "{a} is not a loopback address: the plain HTTP API has no authentication; set `http_public = true` to serve it there anyway"
                    ),
                ));
            }
        }
        c.database = resolve(path, &c.database);
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
            limits: self.limits(),
            database: Some(self.database.clone()),
            lost_node_grace: self.lost_node_grace_secs.map_or(
                crate::grid::DEFAULT_LOST_NODE_GRACE,
                std::time::Duration::from_secs,
            ),
            encrypt: crate::encrypt::EncryptPolicy {
                mode: self.encrypt,
                pairs: self.encrypt_pair.clone(),
            },
        }
    }

    /// The bounds the config sets, defaults for the others.
    pub fn limits(&self) -> crate::Limits {
        let d = crate::Limits::default();
        crate::Limits {
            registrations_per_job: self
                .max_registrations_per_job
                .unwrap_or(d.registrations_per_job),
            registrations_per_cluster: self
                .max_registrations_per_cluster
                .unwrap_or(d.registrations_per_cluster),
            jobs: self.job_limits(),
        }
    }

    /// What the job table keeps, and for how long.
    pub fn job_limits(&self) -> crate::jobs::JobLimits {
        let d = crate::jobs::JobLimits::default();
        let secs = std::time::Duration::from_secs;
        crate::jobs::JobLimits {
            output_cap: self.output_cap_bytes.unwrap_or(d.output_cap),
            output_total_cap: self.output_total_cap_bytes.unwrap_or(d.output_total_cap),
            output_keep: self.output_keep_secs.map_or(d.output_keep, secs),
            record_keep: self.job_record_keep_secs.map_or(d.record_keep, secs),
            queued_per_client: self
                .max_queued_jobs_per_client
                .unwrap_or(d.queued_per_client),
            profile_bytes_per_client: self
                .max_profile_bytes_per_client
                .unwrap_or(d.profile_bytes_per_client),
            fair_share_half_life: self
                .fair_share_half_life_secs
                .map_or(d.fair_share_half_life, secs),
        }
    }

    /// Loads the TLS identity the config names.
    pub fn identity(&self) -> Result<Identity, qcg_proto::tls::TlsError> {
        Identity::load(&self.cert, &self.key, &self.ca)?.with_crl(self.crl.as_deref())
    }
}

impl Config {
    /// What `--check-config` finds wrong: certificates, ports, the database folder.
    pub fn problems(&self) -> Vec<qcg_proto::check::Problem> {
        use qcg_proto::check::{port_free, Tls};
        let mut out = Tls {
            ca: &self.ca,
            cert: &self.cert,
            key: &self.key,
            crl: self.crl.as_deref(),
            role: qcg_proto::tls::Role::Broker,
            name: "broker",
        }
        .problems();
        out.extend(port_free("listen", self.listen, true));
        for (field, addr) in [
            ("http_listen", self.http_listen),
            ("https_listen", self.https_listen),
        ] {
            out.extend(addr.and_then(|a| port_free(field, a, false)));
        }
        let folder = self.database.parent().unwrap_or(std::path::Path::new("."));
        let probe = folder.join(format!(".qcg-check-{}", std::process::id()));
        let writable = std::fs::create_dir_all(folder).is_ok()
            && std::fs::File::create(&probe).is_ok()
            && std::fs::remove_file(&probe).is_ok();
        if !writable {
            out.push(qcg_proto::check::Problem {
                field: "database".into(),
                message: format!("cannot write in {}", folder.display()),
            });
        }
        out
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
        let e =
            load_text("public", &format!("{BASE}http_listen = \"0.0.0.0:7780\"\n")).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("http_listen"), "{e}");
        assert!(e.to_string().contains("http_public"), "{e}");
        let c = load_text(
            "public-ok",
            &format!("{BASE}http_listen = \"0.0.0.0:7780\"\nhttp_public = true\n"),
        )
        .unwrap();
        assert!(c.http_public);
        let c = load_text(
            "limits",
            &format!("{BASE}max_registrations_per_job = 10\noutput_cap_bytes = 2048\noutput_keep_secs = 5\n"),
        )
        .unwrap();
        let l = c.options().limits;
        assert_eq!(l.registrations_per_job, 10);
        assert_eq!(
            l.registrations_per_cluster,
            crate::registry::DEFAULT_PER_CLUSTER
        );
        assert_eq!(l.jobs.output_cap, 2048);
        assert_eq!(l.jobs.output_keep, std::time::Duration::from_secs(5));
        assert_eq!(l.jobs.record_keep, crate::jobs::DEFAULT_RECORD_KEEP);
        let c = load_text(
            "retention",
            &format!("{BASE}job_record_keep_secs = 60\noutput_total_cap_bytes = 100000\nmax_queued_jobs_per_client = 3\nmax_profile_bytes_per_client = 5000\n"),
        )
        .unwrap();
        let j = c.job_limits();
        assert_eq!(j.record_keep, std::time::Duration::from_secs(60));
        assert_eq!(
            (
                j.output_total_cap,
                j.queued_per_client,
                j.profile_bytes_per_client
            ),
            (100000, 3, 5000)
        );
        let e =
            load_text("queued", &format!("{BASE}max_queued_jobs_per_client = 0\n")).unwrap_err();
        assert_eq!(
            e.field.as_deref(),
            Some("max_queued_jobs_per_client"),
            "{e}"
        );
        let e = load_text(
            "total",
            &format!("{BASE}output_cap_bytes = 4096\noutput_total_cap_bytes = 2048\n"),
        )
        .unwrap_err();
        assert_eq!(e.field.as_deref(), Some("output_total_cap_bytes"), "{e}");
        // The database sits next to the config unless it says otherwise.
        assert!(
            c.database.ends_with("state/broker.redb"),
            "{:?}",
            c.database
        );
        assert!(c.database.is_absolute() || c.database.starts_with(std::env::temp_dir()));
        let e = load_text("cap", &format!("{BASE}output_cap_bytes = 10\n")).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("output_cap_bytes"), "{e}");
        let c = load_text(
            "encrypt",
            &format!("{BASE}encrypt = \"all\"\n[[encrypt_pair]]\nclusters = [\"a\", \"b\"]\nencrypt = \"none\"\n"),
        )
        .unwrap();
        let p = c.options().encrypt;
        assert!(p.between("a", "a") && !p.between("b", "a"));
        let e = load_text("encrypt-bad", &format!("{BASE}encrypt = \"yes\"\n")).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("encrypt"), "{e}");
        let e = load_text("typo", &format!("{BASE}http_listen_tls = \"x\"\n")).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("http_listen_tls"), "{e}");
    }
}
