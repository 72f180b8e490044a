//! The real services as separate processes on loopback, as an admin runs them: the
//! binaries (`qcg-broker`, `qcg-frontal`, `qcg-helper`, `qcg-proxy`) next to the
//! running program, each started with `--config FILE` from a config file written
//! into a temporary folder, under a grid CA made there (`ca/ca.pem`, and
//! `ca/NAME.pem`/`NAME.key` for every holder, recorded for `qcg ca revoke`). Each
//! service is waited for until it prints its ready line; everything it prints (the
//! services log on stdout; stderr too) goes to `logs/NAME.log` in the folder. Dropping the
//! grid kills every service (SIGKILL); when the thread is panicking
//! (a failed test) each service's log is printed and the folder is kept.
//!
//! ```no_run
//! use qcg_grid::services::{Cluster, Node, ServiceGrid};
//! # fn f() -> Result<(), qcg_grid::services::ServiceError> {
//! let g = ServiceGrid::builder()
//!     .cluster(Cluster::new("alpha").node(Node::new("a1").slots(4)))
//!     .cluster(Cluster::new("beta").policy("port-range 43100-43199").node(Node::new("b1")))
//!     .cert("client", "alice")
//!     .wait_for_topology()
//!     .start()?;
//! let args = g.qcg_args("alice"); // --broker URL --cert .. --key .. --ca ..
//! # let _ = args;
//! # Ok(()) }
//! ```
//!
//! Tests that need an odd service (a second broker, a service with a config of its
//! own) start it in the same folder with [`ServiceGrid::start`] and read its lines
//! with [`ServiceGrid::line`].

use qcg_proto::tls::{Ca, Identity, Role, TlsError};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// How long a service has to print a line it is waited for.
pub const READY: Duration = Duration::from_secs(30);

/// What went wrong starting or using a grid of service processes.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// A service binary is not where the running program is.
    #[error("{} is missing: build the services first (`cargo build --workspace --bins`)", .0.display())]
    Missing(PathBuf),
    /// The grid CA could not be made or a certificate issued or saved.
    #[error("grid CA: {0}")]
    Ca(#[from] TlsError),
    /// A file or folder of the grid could not be written or read.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// Why it failed.
        source: std::io::Error,
    },
    /// A service could not be started.
    #[error("cannot start {service}: {source}")]
    Spawn {
        /// The service's name in the grid.
        service: String,
        /// Why.
        source: std::io::Error,
    },
    /// A service did not print the line it was waited for.
    #[error("{service} did not print `{prefix}` within {waited:?} ({how}); its log:\n{log}")]
    NotReady {
        /// The service's name in the grid.
        service: String,
        /// The start of the line waited for.
        prefix: String,
        /// How long it was waited for.
        waited: Duration,
        /// `it ended` or `still running`.
        how: &'static str,
        /// What it logged.
        log: String,
    },
    /// A service printed an address that is not one.
    #[error("{service} printed `{text}` where an address was expected")]
    BadAddress {
        /// The service.
        service: String,
        /// What it printed.
        text: String,
    },
    /// No service of that name was started.
    #[error("no service `{0}` in this grid")]
    Unknown(String),
    /// The broker's topology was not complete in time.
    #[error("the topology is incomplete after {waited:?}: {last}")]
    Topology {
        /// How long it was waited for.
        waited: Duration,
        /// The last topology the broker showed.
        last: String,
    },
    /// A plain HTTP request to a service failed.
    #[error("GET http://{addr}{path}: {detail}")]
    Http {
        /// The service.
        addr: SocketAddr,
        /// The path.
        path: String,
        /// What happened.
        detail: String,
    },
    /// The HTTPS client could not be made.
    #[error(transparent)]
    Client(#[from] crate::client::ClientError),
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> ServiceError {
    let what = what.into();
    move |source| ServiceError::Io { what, source }
}

/// The folder of the running program's binaries: the workspace's `target/PROFILE`
/// for a program there, and for a test (in `deps/`) or an example (in `examples/`).
pub fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_default();
    let dir = exe.parent().map(Path::to_path_buf).unwrap_or_default();
    match dir.file_name().and_then(|n| n.to_str()) {
        Some("deps" | "examples") => dir.parent().map(Path::to_path_buf).unwrap_or(dir),
        _ => dir,
    }
}

/// A workspace binary next to the running program.
pub fn bin(name: &str) -> Result<PathBuf, ServiceError> {
    let p = bin_dir().join(name);
    if p.exists() {
        Ok(p)
    } else {
        Err(ServiceError::Missing(p))
    }
}

/// The `[accounts]` table of a helper on this machine: root when we are root
/// (allowed explicitly), else our own user.
pub fn accounts_here() -> String {
    if rustix::process::geteuid().is_root() {
        return "default = \"root\"\nallow_root = true\n".into();
    }
    let user = std::env::var("USER").unwrap_or_else(|_| "nobody".into());
    format!("default = \"{user}\"\n")
}

/// The TLS fields of the config of `name`'s certificate in the grid's `ca/`.
pub fn tls_fields(name: &str) -> String {
    format!("ca = \"ca/ca.pem\"\ncert = \"ca/{name}.pem\"\nkey = \"ca/{name}.key\"\n")
}

/// A node of a cluster: its helper, and its line in the frontal's `[[nodes]]` when
/// slots or memory are given.
#[derive(Clone, Debug)]
pub struct Node {
    name: String,
    slots: Option<u32>,
    memory_mib: Option<u64>,
    helper: String,
}

impl Node {
    /// A node named `name` (also its helper's certificate and socket, `NAME.sock`).
    pub fn new(name: &str) -> Node {
        Node {
            name: name.into(),
            slots: None,
            memory_mib: None,
            helper: String::new(),
        }
    }

    /// Slots the frontal announces for it.
    pub fn slots(mut self, n: u32) -> Node {
        self.slots = Some(n);
        self
    }

    /// Memory the frontal announces for it.
    pub fn memory_mib(mut self, m: u64) -> Node {
        self.memory_mib = Some(m);
        self
    }

    /// Top-level lines added to its helper's config (`socket_group = ...`,
    /// `metrics_listen = ...`).
    pub fn helper_config(mut self, lines: &str) -> Node {
        self.helper.push_str(lines);
        if !self.helper.ends_with('\n') {
            self.helper.push('\n');
        }
        self
    }
}

/// A cluster: its frontal (certificate named after the cluster) and its nodes.
#[derive(Clone, Debug)]
pub struct Cluster {
    name: String,
    policy: String,
    frontal: String,
    tables: String,
    nodes: Vec<Node>,
}

impl Cluster {
    /// An open cluster named `name`, without nodes yet.
    pub fn new(name: &str) -> Cluster {
        Cluster {
            name: name.into(),
            policy: "open".into(),
            frontal: String::new(),
            tables: String::new(),
            nodes: Vec::new(),
        }
    }

    /// Its inbound policy as the frontal's config writes it (`open`,
    /// `port-range 43000-43099`, ...).
    pub fn policy(mut self, policy: &str) -> Cluster {
        self.policy = policy.into();
        self
    }

    /// Top-level lines added to its frontal's config.
    pub fn frontal_config(mut self, lines: &str) -> Cluster {
        self.frontal.push_str(lines);
        if !self.frontal.ends_with('\n') {
            self.frontal.push('\n');
        }
        self
    }

    /// Tables (`[slurm]` ...) added at the end of its frontal's config.
    pub fn frontal_tables(mut self, tables: &str) -> Cluster {
        self.tables.push('\n');
        self.tables.push_str(tables);
        self
    }

    /// One more node.
    pub fn node(mut self, node: Node) -> Cluster {
        self.nodes.push(node);
        self
    }
}

/// How to start a [`ServiceGrid`]. A broker always; its plain HTTP and HTTPS APIs
/// unless turned off.
#[derive(Clone, Debug)]
pub struct ServiceGridBuilder {
    http: bool,
    https: bool,
    broker: String,
    clusters: Vec<Cluster>,
    proxies: Vec<(String, String)>,
    certs: Vec<(Role, String)>,
    accounts: Option<String>,
    dir_mode: Option<u32>,
    topology: bool,
    log_filter: Option<String>,
}

impl ServiceGridBuilder {
    /// The services' log level (`RUST_LOG`; default: `QCG_TEST_LOG`, else `warn`).
    pub fn log_filter(mut self, filter: &str) -> Self {
        self.log_filter = Some(filter.into());
        self
    }

    /// Without the broker's plain HTTP API (`http_listen`); [`ServiceGrid::http`]
    /// is then `None` and the topology cannot be waited for.
    pub fn no_http(mut self) -> Self {
        self.http = false;
        self
    }

    /// Without the broker's HTTPS job API (`https_listen`).
    pub fn no_https(mut self) -> Self {
        self.https = false;
        self
    }

    /// Top-level lines added to the broker's config.
    pub fn broker_config(mut self, lines: &str) -> Self {
        self.broker.push_str(lines);
        if !self.broker.ends_with('\n') {
            self.broker.push('\n');
        }
        self
    }

    /// One more cluster.
    pub fn cluster(mut self, c: Cluster) -> Self {
        self.clusters.push(c);
        self
    }

    /// A relay proxy named `name` (its certificate too), with top-level lines
    /// added to its config.
    pub fn proxy(mut self, name: &str, config: &str) -> Self {
        self.proxies.push((name.into(), config.into()));
        self
    }

    /// A certificate for `name` of `role` (`client`, `admin`, ...), besides the
    /// services' own.
    ///
    /// # Panics
    /// On a role name that is none of qcg's (a mistake in the calling code).
    pub fn cert(mut self, role: &str, name: &str) -> Self {
        let role = role
            .parse()
            .unwrap_or_else(|e| panic!("certificate for {name}: {e}"));
        self.certs.push((role, name.into()));
        self
    }

    /// The helpers' `[accounts]` table (default: [`accounts_here`]); `None` leaves
    /// it out.
    pub fn accounts(mut self, table: Option<&str>) -> Self {
        self.accounts = table.map(str::to_string);
        self
    }

    /// The folder's mode (another local user must reach the sockets inside: 0o755).
    pub fn dir_mode(mut self, mode: u32) -> Self {
        self.dir_mode = Some(mode);
        self
    }

    /// Waits, once everything started, until the broker's topology (its plain
    /// HTTP API) holds every cluster and node and a measured link between every
    /// two clusters.
    pub fn wait_for_topology(mut self) -> Self {
        self.topology = true;
        self
    }

    /// Writes the certificates and configs, starts the broker, each cluster's
    /// frontal then helpers, then the proxies, each waited for.
    pub fn start(self) -> Result<ServiceGrid, ServiceError> {
        let mut g = ServiceGrid::new()?;
        if let Some(f) = &self.log_filter {
            g.set_log_filter(f);
        }
        if let Some(mode) = self.dir_mode {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(g.dir(), std::fs::Permissions::from_mode(mode))
                .map_err(io("setting the grid folder's mode"))?;
        }
        g.issue(Role::Broker, "broker")?;
        for (role, name) in &self.certs {
            g.issue(*role, name)?;
        }
        let mut broker = "listen = \"127.0.0.1:0\"\n".to_string();
        if self.http {
            broker.push_str("http_listen = \"127.0.0.1:0\"\n");
        }
        if self.https {
            broker.push_str("https_listen = \"127.0.0.1:0\"\n");
        }
        broker.push_str(&self.broker);
        broker.push_str(&tls_fields("broker"));
        g.start("broker", "qcg-broker", &broker)?;
        g.quic = Some(g.addr("broker", "qcg-broker: QUIC on")?);
        if self.http {
            g.http = Some(g.addr("broker", "qcg-broker: HTTP API on http://")?);
        }
        if self.https {
            g.https = Some(g.addr("broker", "qcg-broker: HTTPS API on https://")?);
        }
        for c in &self.clusters {
            g.start_cluster(c, self.accounts.as_deref())?;
        }
        for (name, config) in &self.proxies {
            g.start_proxy(name, config)?;
        }
        if self.topology {
            let nodes = self.clusters.iter().map(|c| c.nodes.len()).sum();
            g.wait_for_topology(self.clusters.len(), nodes, READY)?;
        }
        Ok(g)
    }
}

/// One service process of the grid.
pub struct Service {
    name: String,
    binary: String,
    config: PathBuf,
    log: PathBuf,
    child: Child,
    lines: mpsc::Receiver<String>,
    logged: Arc<AtomicU64>,
    limits: Limits,
}

/// What a service is started under, besides its config.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    /// At most this many open files (`ulimit -n`).
    pub nofile: Option<u32>,
    /// This umask.
    pub umask: Option<u32>,
}

impl Service {
    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Its config file.
    pub fn config(&self) -> &Path {
        &self.config
    }

    /// Its log file (all it printed, stdout and stderr).
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// Lines it printed on stdout so far.
    pub fn lines_printed(&self) -> u64 {
        self.logged.load(Ordering::Relaxed)
    }
}

/// A grid of service processes in a temporary folder; see the module's doc.
pub struct ServiceGrid {
    dir: Option<tempfile::TempDir>,
    ca: Ca,
    services: Vec<Service>,
    frontals: Vec<(String, String)>,
    proxies: Vec<(String, SocketAddr)>,
    log_filter: String,
    /// Environment variables set for services started from now on.
    env: Vec<(String, String)>,
    quic: Option<SocketAddr>,
    http: Option<SocketAddr>,
    https: Option<SocketAddr>,
}

impl ServiceGrid {
    /// A builder: a broker with its HTTP and HTTPS APIs, nothing else yet.
    pub fn builder() -> ServiceGridBuilder {
        ServiceGridBuilder {
            http: true,
            https: true,
            broker: String::new(),
            clusters: Vec::new(),
            proxies: Vec::new(),
            certs: Vec::new(),
            accounts: Some(accounts_here()),
            dir_mode: None,
            topology: false,
            log_filter: None,
        }
    }

    /// An empty grid: the folder and its CA (`ca/ca.pem`, `ca/ca.key`), no
    /// service. Services log at `QCG_TEST_LOG`'s level (`warn` unless set).
    pub fn new() -> Result<ServiceGrid, ServiceError> {
        let dir = tempfile::Builder::new()
            .prefix("qcg-services-")
            .tempdir()
            .map_err(io("creating the grid's folder"))?;
        let ca = Ca::generate()?;
        ca.save(&dir.path().join("ca"))?;
        std::fs::create_dir_all(dir.path().join("logs")).map_err(io("creating logs/"))?;
        Ok(ServiceGrid {
            dir: Some(dir),
            ca,
            services: Vec::new(),
            frontals: Vec::new(),
            proxies: Vec::new(),
            log_filter: std::env::var("QCG_TEST_LOG").unwrap_or_else(|_| "warn".into()),
            env: Vec::new(),
            quic: None,
            http: None,
            https: None,
        })
    }

    /// The grid's folder (configs, `ca/`, `logs/`, helper sockets).
    pub fn dir(&self) -> &Path {
        match &self.dir {
            Some(d) => d.path(),
            None => Path::new("/nonexistent"),
        }
    }

    /// The grid's CA (for identities of simulated services).
    pub fn ca(&self) -> &Ca {
        &self.ca
    }

    /// The CA's folder (`qcg ca issue --dir` and `revoke --dir` work on it).
    pub fn ca_dir(&self) -> PathBuf {
        self.dir().join("ca")
    }

    /// Issues a certificate for `name` into `ca/NAME.pem` and `NAME.key`, recorded
    /// in `ca/issued.txt`.
    pub fn issue(&self, role: Role, name: &str) -> Result<(), ServiceError> {
        let ca = self.ca_dir();
        let issued = self.ca.issue(role, name)?;
        issued.save(&ca, name)?;
        Ca::record_issued(&ca, name, &issued)?;
        Ok(())
    }

    /// The identity of a certificate holder of the grid.
    pub fn identity(&self, name: &str) -> Result<Identity, ServiceError> {
        let ca = self.ca_dir();
        Ok(Identity::load(
            &ca.join(format!("{name}.pem")),
            &ca.join(format!("{name}.key")),
            &ca.join("ca.pem"),
        )?)
    }

    /// Writes `text` to `NAME` in the folder; its path.
    pub fn write(&self, name: &str, text: &str) -> Result<PathBuf, ServiceError> {
        let p = self.dir().join(name);
        std::fs::write(&p, text).map_err(io(format!("writing {}", p.display())))?;
        Ok(p)
    }

    /// Sets the services' log level (`RUST_LOG`) for those started from now on.
    pub fn set_log_filter(&mut self, filter: &str) {
        self.log_filter = filter.into();
    }

    /// Sets `key` to `value` in the environment of the services started from now
    /// on (`QCG_LOG_FORMAT=json`, say).
    pub fn set_env(&mut self, key: &str, value: &str) {
        self.env.retain(|(k, _)| k != key);
        self.env.push((key.into(), value.into()));
    }

    /// Writes `config` to `NAME.toml` and starts `binary --config NAME.toml` as the
    /// service `name`; its stdout lines are read with [`ServiceGrid::line`].
    pub fn start(
        &mut self,
        name: &str,
        binary: &str,
        config: &str,
    ) -> Result<&Service, ServiceError> {
        self.start_with(name, binary, config, Limits::default())
    }

    /// Like [`ServiceGrid::start`], under `limits`.
    pub fn start_with(
        &mut self,
        name: &str,
        binary: &str,
        config: &str,
        limits: Limits,
    ) -> Result<&Service, ServiceError> {
        if self.service(name).is_ok() {
            self.kill(name)?;
        }
        let path = self.write(&format!("{name}.toml"), config)?;
        let s = self.spawn(name, binary, path, limits)?;
        self.services.retain(|s| s.name != name);
        self.services.push(s);
        Ok(self.services.last().expect("just pushed"))
    }

    fn spawn(
        &self,
        name: &str,
        binary: &str,
        config: PathBuf,
        limits: Limits,
    ) -> Result<Service, ServiceError> {
        let exe = bin(binary)?;
        let log = self.dir().join("logs").join(format!("{name}.log"));
        let open_log = || {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&log)
                .map_err(io(format!("opening {}", log.display())))
        };
        let mut cmd = if limits == Limits::default() {
            let mut c = Command::new(&exe);
            c.arg("--config").arg(&config);
            c
        } else {
            // `exec` keeps the pid: the shell becomes the service.
            let mut line = String::new();
            if let Some(n) = limits.nofile {
                line.push_str(&format!("ulimit -n {n} && "));
            }
            if let Some(m) = limits.umask {
                line.push_str(&format!("umask {m:03o} && "));
            }
            line.push_str("exec \"$0\" --config \"$1\"");
            let mut c = Command::new("sh");
            c.arg("-c").arg(line).arg(&exe).arg(&config);
            c
        };
        let mut child = cmd
            .current_dir(self.dir())
            .env("RUST_LOG", &self.log_filter)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(open_log()?)
            .spawn()
            .map_err(|source| ServiceError::Spawn {
                service: name.into(),
                source,
            })?;
        let out = child.stdout.take().ok_or_else(|| ServiceError::Spawn {
            service: name.into(),
            source: std::io::Error::other("no stdout pipe"),
        })?;
        let mut file = open_log()?;
        let logged = Arc::new(AtomicU64::new(0));
        let (tx, lines) = mpsc::channel();
        let count = logged.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                count.fetch_add(1, Ordering::Relaxed);
                let _ = writeln!(file, "{line}");
                let _ = tx.send(line);
            }
        });
        Ok(Service {
            name: name.into(),
            binary: binary.into(),
            config,
            log,
            child,
            lines,
            logged,
            limits,
        })
    }

    /// A service by name (`broker`, `frontal-CLUSTER`, `helper-NODE`, `proxy-NAME`,
    /// or the name given to [`ServiceGrid::start`]).
    pub fn service(&self, name: &str) -> Result<&Service, ServiceError> {
        self.services
            .iter()
            .find(|s| s.name == name)
            .ok_or_else(|| ServiceError::Unknown(name.into()))
    }

    /// Waits (at most [`READY`]) for the next line of `name`'s stdout that starts
    /// with `prefix`; the rest of it, trimmed.
    pub fn line(&self, name: &str, prefix: &str) -> Result<String, ServiceError> {
        let s = self.service(name)?;
        let until = Instant::now() + READY;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            match s.lines.recv_timeout(left) {
                Ok(l) => {
                    if let Some(rest) = l.strip_prefix(prefix) {
                        return Ok(rest.trim().to_string());
                    }
                }
                Err(e) => {
                    return Err(ServiceError::NotReady {
                        service: name.into(),
                        prefix: prefix.into(),
                        waited: READY,
                        how: match e {
                            mpsc::RecvTimeoutError::Timeout => "still running",
                            mpsc::RecvTimeoutError::Disconnected => "it ended",
                        },
                        log: self.log(name),
                    })
                }
            }
        }
    }

    /// [`ServiceGrid::line`] read as a socket address.
    pub fn addr(&self, name: &str, prefix: &str) -> Result<SocketAddr, ServiceError> {
        let text = self.line(name, prefix)?;
        text.parse().map_err(|_| ServiceError::BadAddress {
            service: name.into(),
            text,
        })
    }

    /// What `name` logged so far (empty when it has no log).
    pub fn log(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir().join("logs").join(format!("{name}.log")))
            .unwrap_or_default()
    }

    /// Kills `name` (SIGKILL, as a crash) and waits for it.
    pub fn kill(&mut self, name: &str) -> Result<(), ServiceError> {
        let s = self
            .services
            .iter_mut()
            .find(|s| s.name == name)
            .ok_or_else(|| ServiceError::Unknown(name.into()))?;
        let _ = s.child.kill();
        let _ = s.child.wait();
        Ok(())
    }

    /// Sends `signal` to `name`.
    pub fn signal(
        &mut self,
        name: &str,
        signal: rustix::process::Signal,
    ) -> Result<(), ServiceError> {
        let s = self
            .services
            .iter_mut()
            .find(|s| s.name == name)
            .ok_or_else(|| ServiceError::Unknown(name.into()))?;
        if !matches!(s.child.try_wait(), Ok(None)) {
            // Reaped: its pid may be another process's now.
            return Err(ServiceError::Io {
                what: format!("signalling {name}"),
                source: std::io::Error::other("it has ended"),
            });
        }
        let pid = i32::try_from(s.pid())
            .ok()
            .and_then(rustix::process::Pid::from_raw)
            .ok_or_else(|| ServiceError::Unknown(name.into()))?;
        rustix::process::kill_process(pid, signal).map_err(|e| ServiceError::Io {
            what: format!("signalling {name}"),
            source: e.into(),
        })
    }

    /// Waits at most `timeout` for `name` to end by itself; how it ended, or `None`
    /// if it still runs.
    pub fn wait(
        &mut self,
        name: &str,
        timeout: Duration,
    ) -> Result<Option<std::process::ExitStatus>, ServiceError> {
        let s = self
            .services
            .iter_mut()
            .find(|s| s.name == name)
            .ok_or_else(|| ServiceError::Unknown(name.into()))?;
        let until = Instant::now() + timeout;
        loop {
            if let Some(status) = s
                .child
                .try_wait()
                .map_err(io(format!("waiting for {name}")))?
            {
                return Ok(Some(status));
            }
            if Instant::now() > until {
                return Ok(None);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Starts `name` again from its config file (killing it first if it runs);
    /// its new lines are read with [`ServiceGrid::line`].
    pub fn restart(&mut self, name: &str) -> Result<&Service, ServiceError> {
        self.kill(name)?;
        let (binary, config, limits) = {
            let s = self.service(name)?;
            (s.binary.clone(), s.config.clone(), s.limits)
        };
        let s = self.spawn(name, &binary, config, limits)?;
        let at = self
            .services
            .iter()
            .position(|s| s.name == name)
            .ok_or_else(|| ServiceError::Unknown(name.into()))?;
        self.services[at] = s;
        Ok(&self.services[at])
    }

    /// Issues a cluster's certificates, writes its frontal and helper configs and
    /// starts them (`frontal-CLUSTER`, `helper-NODE`), each waited for; the
    /// helpers' `[accounts]` table is `accounts`.
    pub fn start_cluster(
        &mut self,
        c: &Cluster,
        accounts: Option<&str>,
    ) -> Result<(), ServiceError> {
        self.issue(Role::Frontal, &c.name)?;
        for n in &c.nodes {
            self.issue(Role::Helper, &n.name)?;
        }
        let mut nodes = String::new();
        for n in c
            .nodes
            .iter()
            .filter(|n| n.slots.is_some() || n.memory_mib.is_some())
        {
            nodes.push_str(&format!("\n[[nodes]]\nname = \"{}\"\n", n.name));
            if let Some(s) = n.slots {
                nodes.push_str(&format!("slots = {s}\n"));
            }
            if let Some(m) = n.memory_mib {
                nodes.push_str(&format!("memory_mib = {m}\n"));
            }
        }
        let name = format!("frontal-{}", c.name);
        let config = format!(
            "cluster = \"{}\"\npolicy = \"{}\"\nbroker = \"{}\"\nlisten = \"127.0.0.1:0\"\n{}{}{nodes}{}",
            c.name,
            c.policy,
            self.quic()?,
            c.frontal,
            tls_fields(&c.name),
            c.tables,
        );
        self.start(&name, "qcg-frontal", &config)?;
        let at = self.line(
            &name,
            &format!("qcg-frontal: cluster {} serving helpers on", c.name),
        )?;
        self.frontals.retain(|(n, _)| *n != c.name);
        self.frontals.push((c.name.clone(), at.clone()));
        for n in &c.nodes {
            let mut config = format!(
                "node = \"{0}\"\nfrontal = \"{at}\"\nsocket = \"{0}.sock\"\nbind_address = \"127.0.0.1\"\n{1}{2}",
                n.name,
                n.helper,
                tls_fields(&n.name)
            );
            if let Some(a) = accounts {
                config.push_str(&format!("\n[accounts]\n{a}"));
            }
            let name = format!("helper-{}", n.name);
            self.start(&name, "qcg-helper", &config)?;
            self.line(&name, &format!("qcg-helper: node {} serving", n.name))?;
        }
        Ok(())
    }

    /// Issues a relay proxy's certificate, writes its config (`listen`, `broker`,
    /// `config` and its TLS fields) and starts it as `proxy-NAME`; its relay address.
    pub fn start_proxy(&mut self, name: &str, config: &str) -> Result<SocketAddr, ServiceError> {
        self.issue(Role::Proxy, name)?;
        let text = format!(
            "listen = \"127.0.0.1:0\"\nbroker = \"{}\"\n{config}{}{}",
            self.quic()?,
            if config.is_empty() || config.ends_with('\n') {
                ""
            } else {
                "\n"
            },
            tls_fields(name)
        );
        let service = format!("proxy-{name}");
        self.start(&service, "qcg-proxy", &text)?;
        let at = self.addr(&service, "qcg-proxy: relaying on")?;
        self.proxies.retain(|(n, _)| n != name);
        self.proxies.push((name.into(), at));
        Ok(at)
    }

    /// The broker's QUIC address (frontals and proxies).
    pub fn quic(&self) -> Result<SocketAddr, ServiceError> {
        self.quic
            .ok_or_else(|| ServiceError::Unknown("broker".into()))
    }

    /// The broker's plain HTTP API.
    pub fn http(&self) -> Option<SocketAddr> {
        self.http
    }

    /// The broker's HTTPS job API.
    pub fn https(&self) -> Option<SocketAddr> {
        self.https
    }

    /// The URL of the broker's HTTPS job API (`https://ADDR`; empty without it).
    pub fn url(&self) -> String {
        self.https
            .map(|a| format!("https://{a}"))
            .unwrap_or_default()
    }

    /// The address where the frontal of `cluster` serves helpers.
    pub fn frontal(&self, cluster: &str) -> Result<String, ServiceError> {
        self.frontals
            .iter()
            .find(|(c, _)| c == cluster)
            .map(|(_, a)| a.clone())
            .ok_or_else(|| ServiceError::Unknown(format!("frontal-{cluster}")))
    }

    /// The relay address of proxy `name`.
    pub fn proxy(&self, name: &str) -> Result<SocketAddr, ServiceError> {
        self.proxies
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, a)| *a)
            .ok_or_else(|| ServiceError::Unknown(format!("proxy-{name}")))
    }

    /// The socket of node `node`'s helper.
    pub fn socket(&self, node: &str) -> PathBuf {
        self.dir().join(format!("{node}.sock"))
    }

    /// `--broker URL --cert .. --key .. --ca ..` for `qcg` as holder `name`.
    pub fn qcg_args(&self, name: &str) -> Vec<String> {
        self.qcg_args_at(&self.url(), name)
    }

    /// [`ServiceGrid::qcg_args`] for the broker at `url` (one started with
    /// [`ServiceGrid::start`]).
    pub fn qcg_args_at(&self, url: &str, name: &str) -> Vec<String> {
        let ca = self.ca_dir();
        vec![
            "--broker".into(),
            url.into(),
            "--cert".into(),
            ca.join(format!("{name}.pem")).display().to_string(),
            "--key".into(),
            ca.join(format!("{name}.key")).display().to_string(),
            "--ca".into(),
            ca.join("ca.pem").display().to_string(),
        ]
    }

    /// A client of the broker's HTTPS job API as holder `name`.
    pub fn client(&self, name: &str) -> Result<crate::client::Client, ServiceError> {
        Ok(crate::client::Client::new(
            &self.url(),
            &self.identity(name)?,
        )?)
    }

    /// `GET path` on the broker's plain HTTP API: the body of a 200 answer.
    pub fn http_get(&self, path: &str) -> Result<String, ServiceError> {
        let addr = self
            .http
            .ok_or_else(|| ServiceError::Unknown("broker HTTP API".into()))?;
        http_get(addr, path)
    }

    /// The broker's topology (`/v1/topology`).
    pub fn topology(&self) -> Result<serde_json::Value, ServiceError> {
        let body = self.http_get("/v1/topology")?;
        serde_json::from_str(&body).map_err(|e| ServiceError::Http {
            addr: self.http.unwrap_or_else(|| ([127, 0, 0, 1], 0).into()),
            path: "/v1/topology".into(),
            detail: format!("not JSON: {e}"),
        })
    }

    /// Waits until the broker's topology holds `clusters` clusters, `nodes` nodes
    /// and a measured link between every two clusters.
    pub fn wait_for_topology(
        &self,
        clusters: usize,
        nodes: usize,
        timeout: Duration,
    ) -> Result<(), ServiceError> {
        let until = Instant::now() + timeout;
        loop {
            let t = self.topology()?;
            let cs = t["clusters"].as_array().map_or(0, Vec::len);
            let ns: usize = t["clusters"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|c| c["nodes"].as_array().map_or(0, Vec::len))
                .sum();
            let links = t["links"].as_array().map_or(0, Vec::len);
            if cs == clusters && ns == nodes && links == clusters * clusters.saturating_sub(1) / 2 {
                return Ok(());
            }
            if Instant::now() > until {
                return Err(ServiceError::Topology {
                    waited: timeout,
                    last: t.to_string(),
                });
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// `GET path` over plain HTTP/1.1: the body of a 200 answer.
pub fn http_get(addr: SocketAddr, path: &str) -> Result<String, ServiceError> {
    let fail = |detail: String| ServiceError::Http {
        addr,
        path: path.into(),
        detail,
    };
    let mut s = std::net::TcpStream::connect(addr).map_err(|e| fail(e.to_string()))?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: qcg\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| fail(e.to_string()))?;
    let mut resp = String::new();
    s.read_to_string(&mut resp)
        .map_err(|e| fail(e.to_string()))?;
    if !resp.starts_with("HTTP/1.1 200") {
        return Err(fail(format!("answered {resp}")));
    }
    match resp.split_once("\r\n\r\n") {
        Some((_, body)) => Ok(body.to_string()),
        None => Err(fail(format!("no body in {resp}"))),
    }
}

impl Drop for ServiceGrid {
    fn drop(&mut self) {
        // SIGKILL, as a crash: a service stopping cleanly (SIGTERM) would stop its
        // jobs' process groups by number, and tests that end while others run
        // must not touch anything but their own processes.
        for s in &mut self.services {
            let _ = s.child.kill();
            let _ = s.child.wait();
        }
        if std::thread::panicking() {
            for s in &self.services {
                let log = self.log(&s.name);
                let tail: Vec<&str> = log.lines().rev().take(60).collect();
                eprintln!("--- log of {} (last {} lines) ---", s.name, tail.len());
                for l in tail.iter().rev() {
                    eprintln!("{l}");
                }
            }
            if let Some(d) = self.dir.take() {
                let kept = d.keep();
                eprintln!("--- the grid's folder is kept: {}", kept.display());
            }
        }
    }
}

/// The uid and gid of `nobody`, the other local user of the attack tests.
pub const NOBODY: u32 = 65534;

/// The environment variable that hands [`forged_child`] its requests.
pub const FORGED_ENV: &str = "QCG_FORGED_REQUESTS";

/// What [`forged_child`] prints before each answer.
const ANSWER: &str = "FORGED-ANSWER ";

/// Another local user of this machine, as the attack tests and `qcg-bench attacks`
/// play it: real processes with its uid and gid (and no other group), so that a
/// helper sees its credentials on the socket. Only root can be someone else.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OtherUser {
    /// Its uid.
    pub uid: u32,
    /// Its gid (the helpers' socket group, for it to reach their sockets).
    pub gid: u32,
}

impl OtherUser {
    /// `nobody`, in group `nobody`.
    pub const NOBODY: OtherUser = OtherUser {
        uid: NOBODY,
        gid: NOBODY,
    };

    /// `program`, to be run as this user.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        use std::os::unix::process::CommandExt;
        let mut c = Command::new(program);
        c.uid(self.uid).gid(self.gid);
        c
    }

    /// Sends each `(socket, request)` of `reqs` on a connection of its own, as this
    /// user, from a real process: the running program started again with
    /// `child_args` (which must lead it to [`forged_child`]: a test binary's
    /// `--exact NAME --nocapture`, a subcommand of a tool). Each answer, or why
    /// there is none (a connection refused, the socket closed), in order.
    pub fn ask(
        &self,
        reqs: &[(PathBuf, qcg_proto::Request)],
        child_args: &[&str],
    ) -> Result<Vec<Result<qcg_proto::Response, String>>, ServiceError> {
        let spec = serde_json::to_string(reqs).map_err(|e| ServiceError::Io {
            what: "writing the forged requests".into(),
            source: e.into(),
        })?;
        let exe = std::env::current_exe().map_err(io("finding the running program"))?;
        let out = self
            .command(&exe)
            .args(child_args)
            .env(FORGED_ENV, spec)
            .stdin(Stdio::null())
            .stderr(Stdio::inherit())
            .output()
            .map_err(|source| ServiceError::Spawn {
                service: format!("{} as uid {}", exe.display(), self.uid),
                source,
            })?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let answers: Vec<Result<qcg_proto::Response, String>> = stdout
            .lines()
            .filter_map(|l| l.split_once(ANSWER).map(|(_, a)| a))
            .map(|a| serde_json::from_str(a).unwrap_or_else(|e| Err(format!("{a}: {e}"))))
            .collect();
        if !out.status.success() || answers.len() != reqs.len() {
            return Err(ServiceError::Io {
                what: format!(
                    "sending {} requests as uid {} ({}: {} answers)",
                    reqs.len(),
                    self.uid,
                    out.status,
                    answers.len()
                ),
                source: std::io::Error::other(stdout.into_owned()),
            });
        }
        Ok(answers)
    }
}

/// The child's side of [`OtherUser::ask`]: when [`FORGED_ENV`] holds requests,
/// sends each on its own connection and prints each outcome; returns whether it
/// did (the caller then has nothing else to do).
pub fn forged_child() -> bool {
    let Ok(spec) = std::env::var(FORGED_ENV) else {
        return false;
    };
    let reqs: Vec<(PathBuf, qcg_proto::Request)> = match serde_json::from_str(&spec) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{FORGED_ENV}: not a list of (socket, request): {e}");
            return true;
        }
    };
    for (socket, req) in reqs {
        let outcome = ask(&socket, &req).map_err(|e| format!("{}: {e}", socket.display()));
        let line = serde_json::to_string(&outcome)
            .unwrap_or_else(|e| format!("{{\"Err\":\"unprintable answer: {e}\"}}"));
        // On a line of its own: a test harness may have begun one.
        println!("\n{ANSWER}{line}");
    }
    true
}

/// One request to the helper at `socket` on a new connection; its answer (at most
/// 20 s waited for).
pub fn ask(socket: &Path, req: &qcg_proto::Request) -> std::io::Result<qcg_proto::Response> {
    let mut s = std::os::unix::net::UnixStream::connect(socket)?;
    s.set_read_timeout(Some(Duration::from_secs(20)))?;
    let frame = qcg_proto::frame::encode(req).map_err(std::io::Error::other)?;
    s.write_all(&frame)?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some((r, _)) =
            qcg_proto::frame::decode::<qcg_proto::Response>(&buf).map_err(std::io::Error::other)?
        {
            return Ok(r);
        }
        let n = s.read(&mut chunk)?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Whether `outcome` (of [`OtherUser::ask`]) is a refusal: `Forbidden`.
pub fn is_refused(outcome: &Result<qcg_proto::Response, String>) -> bool {
    matches!(outcome, Ok(qcg_proto::Response::Error(e)) if e.kind == qcg_proto::ErrorKind::Forbidden)
}

/// An outcome of [`OtherUser::ask`] as text: the response's JSON, or `io error: …`.
pub fn shown(outcome: &Result<qcg_proto::Response, String>) -> String {
    match outcome {
        Ok(r) => serde_json::to_string(r).unwrap_or_else(|e| format!("unprintable: {e}")),
        Err(e) => format!("io error: {e}"),
    }
}

/// The arguments that start a test binary again in its test `name` alone, for
/// [`OtherUser::ask`] (`--exact NAME --nocapture --test-threads=1`).
pub fn test_child_args(name: &str) -> [&str; 4] {
    ["--exact", name, "--nocapture", "--test-threads=1"]
}
