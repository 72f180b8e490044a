//! Control-plane messages, shared by processes, helpers, frontals and the broker.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;

pub use crate::topo::{LinkQuality, Node as NodeSpec};

/// A process's grid-wide name: its job and its rank in the job.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ProcName {
    /// Job identifier.
    pub job: String,
    /// Rank inside the job.
    pub rank: u32,
}

impl ProcName {
    /// Builds a name.
    pub fn new(job: &str, rank: u32) -> Self {
        ProcName {
            job: job.to_string(),
            rank,
        }
    }
}

impl fmt::Display for ProcName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.job, self.rank)
    }
}

/// A cluster's inbound connectivity policy, as its administrators configured the
/// gateway firewall.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Policy {
    /// Inbound connections are accepted.
    Open,
    /// Inbound connections are accepted on ports `lo..=hi` only.
    PortRange {
        /// First open port.
        lo: u16,
        /// Last open port (inclusive).
        hi: u16,
    },
    /// A stateless firewall that drops inbound SYNs and passes everything else.
    SynBlock,
    /// A stateful firewall: only established or related inbound traffic.
    Closed,
}

impl Policy {
    /// All policy shapes, with one representative port range; for exhaustive tests.
    pub const ALL: [Policy; 4] = [
        Policy::Open,
        Policy::PortRange {
            lo: 20000,
            hi: 20099,
        },
        Policy::SynBlock,
        Policy::Closed,
    ];
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Policy::Open => f.write_str("open"),
            Policy::PortRange { lo, hi } => write!(f, "port-range {lo}-{hi}"),
            Policy::SynBlock => f.write_str("syn-block"),
            Policy::Closed => f.write_str("closed"),
        }
    }
}

impl FromStr for Policy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        match s {
            "open" => return Ok(Policy::Open),
            "syn-block" => return Ok(Policy::SynBlock),
            "closed" => return Ok(Policy::Closed),
            _ => {}
        }
        let expected =
            "expected `open`, `port-range LO-HI` (e.g. `port-range 20000-20100`), `syn-block` or `closed`";
        let Some(range) = s.strip_prefix("port-range") else {
            return Err(format!("unknown policy `{s}`: {expected}"));
        };
        let range = range.trim();
        let (lo, hi) = range
            .split_once('-')
            .ok_or_else(|| format!("bad port range `{range}`: {expected}"))?;
        let port = |p: &str| {
            p.trim()
                .parse::<u16>()
                .ok()
                .filter(|&p| p > 0)
                .ok_or_else(|| format!("bad port `{p}` in `{s}`: ports are 1-65535"))
        };
        let (lo, hi) = (port(lo)?, port(hi)?);
        if lo > hi {
            return Err(format!("empty port range `{s}`: {lo} is above {hi}"));
        }
        Ok(Policy::PortRange { lo, hi })
    }
}

impl TryFrom<String> for Policy {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

impl From<Policy> for String {
    fn from(p: Policy) -> String {
        p.to_string()
    }
}

/// How a cluster's gateway translates addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Nat {
    /// No translation: nodes' addresses are routable.
    #[default]
    None,
    /// Masquerading that keeps the source port (what RFC 5382 asks for): hole
    /// punching and Traversing TCP work through it.
    PortPreserving,
    /// A new external port per connection: only relaying gets through.
    RandomPort,
}

impl Nat {
    /// Whether there is any translation.
    pub fn is_nat(self) -> bool {
        self != Nat::None
    }
}

impl fmt::Display for Nat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Nat::None => "none",
            Nat::PortPreserving => "port-preserving",
            Nat::RandomPort => "random-port",
        })
    }
}

impl<'de> Deserialize<'de> for Nat {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Bool(bool),
            Name(String),
        }
        match Raw::deserialize(d)? {
            Raw::Bool(false) => Ok(Nat::None),
            Raw::Bool(true) => Ok(Nat::PortPreserving),
            Raw::Name(s) => match s.as_str() {
                "none" => Ok(Nat::None),
                "port-preserving" => Ok(Nat::PortPreserving),
                "random-port" => Ok(Nat::RandomPort),
                _ => Err(serde::de::Error::custom(format!(
                    "unknown NAT kind `{s}`: expected `none`, `port-preserving` or `random-port`"
                ))),
            },
        }
    }
}

/// What the broker knows of a cluster: set by its frontal from the frontal's config.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterConfig {
    /// Cluster name, unique in the grid.
    pub name: String,
    /// Inbound policy of the cluster's firewall.
    pub policy: Policy,
    /// The gateway's address translation.
    pub nat: Nat,
    /// The gateway's public address, when there is a NAT.
    pub public_address: Option<IpAddr>,
}

/// Where a process can be reached.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccessPoint {
    /// Whose access point this is.
    pub process: ProcName,
    /// Cluster the process runs in.
    pub cluster: String,
    /// Node the process runs on.
    pub node: String,
    /// Address of the process's listener inside the cluster.
    pub private_addr: IpAddr,
    /// Address seen from outside the cluster, when it differs (NAT).
    pub public_addr: Option<IpAddr>,
    /// Port of the process's listener.
    pub port: u16,
}

impl AccessPoint {
    /// The address to use from inside the cluster.
    pub fn private(&self) -> SocketAddr {
        SocketAddr::new(self.private_addr, self.port)
    }
    /// The address to use from outside the cluster.
    pub fn public(&self) -> SocketAddr {
        SocketAddr::new(self.public_addr.unwrap_or(self.private_addr), self.port)
    }
}

/// A way to link two processes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Technique {
    /// Plain TCP connect to the target's listener.
    Direct,
    /// TCP connect to a listener bound inside the target cluster's open port range.
    PortRange,
    /// The target connects back to the initiator, told through the control plane.
    Reversed,
    /// Traversing TCP: the initiator's SYN, captured by its helper, is injected into
    /// the target's stack by the target's helper; the target's SYN/ACK then passes
    /// its (stateless) firewall.
    Traversed,
    /// TCP simultaneous open: both ends connect to each other at once from their
    /// listeners' ports.
    Punched,
    /// Both ends connect to a qcg-proxy with a single-use token.
    Relayed,
    /// Rings in a segment two ranks of one node share. No plan names it: the two
    /// ranks link over TCP first, then the lower rank offers the segment on that
    /// link and, once the other accepts, the link moves into memory (the lower
    /// rank reports that move under this technique, or its failure).
    SharedMemory,
}

impl Technique {
    /// Every technique this build knows: the broker's, simplest first (the order
    /// plans use), then shared memory, which no plan names.
    pub const ALL: [Technique; 7] = [
        Technique::Direct,
        Technique::PortRange,
        Technique::Reversed,
        Technique::Traversed,
        Technique::Punched,
        Technique::Relayed,
        Technique::SharedMemory,
    ];

    /// The name used in plans, metrics and the HTTP API.
    pub fn name(self) -> &'static str {
        match self {
            Technique::Direct => "direct",
            Technique::PortRange => "port-range",
            Technique::Reversed => "reversed",
            Technique::Traversed => "traversed",
            Technique::Punched => "punched",
            Technique::Relayed => "relayed",
            Technique::SharedMemory => "shared-memory",
        }
    }
}

impl fmt::Display for Technique {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One entry of a plan: a technique and what it needs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attempt {
    /// The technique to try.
    pub technique: Technique,
    /// Address to connect to.
    pub addr: SocketAddr,
}

/// The broker's answer to a connection request: techniques to try, in order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    /// The process to reach.
    pub target: ProcName,
    /// Attempts in the order to try them.
    pub attempts: Vec<Attempt>,
    /// Whether the link is encrypted and authenticated (the broker's `encrypt`
    /// policy for the two clusters); absent: the process's own policy decides.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypt: Option<bool>,
}

/// Which links of a grid are encrypted and authenticated (`encrypt` in the broker's
/// config, `QCG_ENCRYPT` for a job).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Encrypt {
    /// Links between sites (the default); links inside a site stay plaintext.
    #[default]
    Wan,
    /// Every TCP link.
    All,
    /// No link.
    None,
}

impl Encrypt {
    /// Whether a link between a process of site `a` and one of site `b` is sealed.
    pub fn between(self, a: &str, b: &str) -> bool {
        match self {
            Encrypt::Wan => a != b,
            Encrypt::All => true,
            Encrypt::None => false,
        }
    }
}

impl fmt::Display for Encrypt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Encrypt::Wan => "wan",
            Encrypt::All => "all",
            Encrypt::None => "none",
        })
    }
}

impl FromStr for Encrypt {
    type Err = String;
    fn from_str(s: &str) -> Result<Encrypt, String> {
        match s {
            "wan" => Ok(Encrypt::Wan),
            "all" => Ok(Encrypt::All),
            "none" => Ok(Encrypt::None),
            other => Err(format!(
                "`{other}`: expected wan (links between sites, default), all or none"
            )),
        }
    }
}

/// Which output stream of a process a line came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

/// One line a process printed (without its line end).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputLine {
    /// Which stream.
    pub stream: Stream,
    /// The text (invalid UTF-8 replaced).
    pub text: String,
}

/// How a process ended.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExitReport {
    /// Exit status, when it exited.
    pub code: Option<i32>,
    /// Signal number, when a signal ended it.
    pub signal: Option<i32>,
    /// Why it could not be started or waited for.
    pub error: Option<String>,
}

impl ExitReport {
    /// Whether the process exited with status 0.
    pub fn success(&self) -> bool {
        self.code == Some(0) && self.error.is_none()
    }

    /// A process that never ran.
    pub fn not_started(why: impl Into<String>) -> Self {
        ExitReport {
            code: None,
            signal: None,
            error: Some(why.into()),
        }
    }
}

impl fmt::Display for ExitReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.error, self.code, self.signal) {
            (Some(e), _, _) => write!(f, "could not be started: {e}"),
            (None, Some(c), _) => write!(f, "exited with status {c}"),
            (None, None, Some(s)) => write!(f, "was killed by signal {s}"),
            (None, None, None) => f.write_str("ended abnormally"),
        }
    }
}

/// What a helper needs to start one process of a job. The environment carries the
/// job secret (over mutual TLS only), so `Debug` leaves the environment out.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchSpec {
    /// The job.
    pub job: String,
    /// The rank this process is.
    pub rank: u32,
    /// The node it runs on (the helper's node name).
    pub node: String,
    /// Program: a bare name is searched in `PATH`, a relative path is taken from the
    /// working directory.
    pub executable: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Environment variables to set (the helper adds `QCG_HELPER`).
    pub env: Vec<(String, String)>,
    /// Folder to run in (the helper's own when absent).
    pub working_directory: Option<String>,
    /// The identity of the client that submitted the job (its certificate's name):
    /// the helper maps it to the local account the process runs as. Absent from
    /// older brokers, and when the submitter is unknown: the helper's default
    /// account applies.
    #[serde(default)]
    pub owner: Option<String>,
}

impl fmt::Debug for LaunchSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LaunchSpec")
            .field("job", &self.job)
            .field("rank", &self.rank)
            .field("node", &self.node)
            .field("executable", &self.executable)
            .field("args", &self.args)
            .field("env", &"<hidden>")
            .field("working_directory", &self.working_directory)
            .field("owner", &self.owner)
            .finish()
    }
}

/// A request, on any hop of the control plane.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Request {
    /// process → helper → frontal: what is this cluster's configuration?
    ClusterInfo,
    /// process → helper: which node is this, and which address do I bind?
    NodeInfo,
    /// frontal → broker: the cluster this frontal speaks for.
    RegisterCluster(ClusterConfig),
    /// A process announces its access point.
    Register(AccessPoint),
    /// A process has ended.
    Unregister {
        /// The process.
        process: ProcName,
    },
    /// `from` wants to reach `target`: answer with a plan.
    Lookup {
        /// The asking process.
        from: ProcName,
        /// The process to reach.
        target: ProcName,
    },
    /// The outcome of one attempt of a plan.
    Report {
        /// The initiating process.
        from: ProcName,
        /// The target process.
        target: ProcName,
        /// Technique tried.
        technique: Technique,
        /// Whether the link was made (handshake completed).
        ok: bool,
        /// The link's round trip as its handshake measured it, in µs (made links).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rtt_us: Option<u64>,
        /// The link took over a relayed one (the relay made the link first, this
        /// technique moved it off the proxy).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        upgrade: bool,
    },
    /// A job has ended: forget its processes.
    JobEnd {
        /// The job.
        job: String,
    },
    /// process → helper, on a second connection: push [`Notice`]s for this process
    /// on this connection from now on (as `Response::Notice` frames).
    Subscribe {
        /// The process.
        process: ProcName,
    },
    /// initiator → broker: have the target act its part of `technique` (connect
    /// back, punch, or meet at a proxy). Answered `Ok`, or `Relay` for relaying.
    Rendezvous {
        /// The initiating process.
        from: ProcName,
        /// The target.
        target: ProcName,
        /// Reversed, Punched or Relayed.
        technique: Technique,
    },
    /// broker → frontal → helper → process: a notice for `target`.
    Notify {
        /// The process to tell.
        target: ProcName,
        /// What to tell it.
        notice: Notice,
    },
    /// process → its helper: capture my next SYN from `local` to `remote` and send it
    /// on as [`Request::Syn`] (Traversing TCP).
    WatchSyn {
        /// The initiating process.
        from: ProcName,
        /// The target.
        target: ProcName,
        /// The initiator's socket address.
        local: SocketAddr,
        /// The target's address as the initiator dials it.
        remote: SocketAddr,
    },
    /// helper → frontal → broker → target's frontal → target's helper: a captured SYN
    /// (the IPv4 packet) to inject into the target's stack.
    Syn {
        /// The initiating process.
        from: ProcName,
        /// The target.
        target: ProcName,
        /// The IPv4 packet, as captured.
        packet: Vec<u8>,
    },
    /// proxy → broker: a relay proxy offers relaying on `addr`.
    RegisterProxy {
        /// Where processes reach the proxy (TCP).
        addr: SocketAddr,
    },
    /// broker → proxy: two processes will present `token`; pair them.
    ExpectRelay {
        /// The token, hex.
        token: String,
        /// How long it is valid, in milliseconds.
        valid_ms: u64,
    },
    /// broker → frontal: drop cached answers about a job (or one of its ranks).
    Invalidate {
        /// The job.
        job: String,
        /// One rank, or the whole job when absent.
        rank: Option<u32>,
    },
    /// helper → frontal, first on every connection: the node this helper serves and
    /// what it offers (the frontal's config may override the figures).
    RegisterNode(NodeSpec),
    /// frontal → broker: the cluster's nodes that have a helper connected, and the
    /// quality of the cluster's internal network.
    ClusterNodes {
        /// Nodes able to run processes now.
        nodes: Vec<NodeSpec>,
        /// Links between two nodes of the cluster.
        internal: LinkQuality,
    },
    /// broker → frontal: measure the link to the frontal of `cluster` at `addr`
    /// (answered with [`Response::Measured`]).
    ProbePeer {
        /// The other cluster.
        cluster: String,
        /// Its frontal's QUIC address.
        addr: SocketAddr,
    },
    /// broker → frontal → helper of `node`: listen on a fresh TCP port for a short
    /// while (within `ports` when given), so that someone outside the cluster can
    /// check what its firewall lets in; answered with [`Response::Listening`].
    OpenCheck {
        /// The node whose helper listens.
        node: String,
        /// The cluster's open port range, if it has one.
        ports: Option<(u16, u16)>,
    },
    /// broker → frontal → helper of `node`: connect to the relay proxy at `proxy` and
    /// ask from which address it sees us (the cluster's NAT, observed); answered
    /// with [`Response::Seen`].
    NatCheck {
        /// The node whose helper connects.
        node: String,
        /// The proxy's relay address.
        proxy: SocketAddr,
    },
    /// broker → proxy: try a TCP connect to `addr` (a node's check listener), from
    /// outside every cluster; answered `Ok`, or with why not.
    DialCheck {
        /// Where to connect.
        addr: SocketAddr,
    },
    /// frontal → frontal: a probe; answered with the payload's length.
    Echo {
        /// Filler bytes.
        payload: String,
    },
    /// broker → frontal → helper: start one process of a job.
    Launch(Box<LaunchSpec>),
    /// broker → frontal → helper: kill every process of a job (the whole process
    /// group of each), and refuse to start any more.
    Kill {
        /// The job.
        job: String,
    },
    /// helper → frontal → broker: lines printed by a process, in order.
    Output {
        /// The job.
        job: String,
        /// The process's rank.
        rank: u32,
        /// The lines.
        lines: Vec<OutputLine>,
    },
    /// helper → frontal → broker, on every new connection: the processes that run
    /// now on `nodes` (a helper speaks for its own node, a frontal for the nodes whose
    /// helper is connected). A broker that came back from a restart keeps the jobs
    /// whose processes are listed, and fails at once those with a process on one of
    /// `nodes` that is not.
    Running {
        /// The nodes the list is complete for.
        nodes: Vec<String>,
        /// The processes that run on them.
        processes: Vec<ProcName>,
    },
    /// helper → frontal → broker: `request`, sent by a local process the helper did
    /// not start for the job it names (a rank of `qcg run`, `qcg run` itself, or
    /// anyone else in the socket group): `user` is who sent it, as the helper saw
    /// it. The broker gives a job it did not place to the first user that registers
    /// one of its processes, and refuses any other user's request for it.
    ForUser {
        /// Who sent it.
        user: LocalUser,
        /// The request (never itself a `ForUser`).
        request: Box<Request>,
    },
    /// helper → frontal → broker: a process ended, after all its output was sent.
    ProcessExited {
        /// The job.
        job: String,
        /// The process's rank.
        rank: u32,
        /// How it ended.
        exit: ExitReport,
    },
}

impl Request {
    /// Short name of the request kind, for logs and metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            Request::ClusterInfo => "cluster_info",
            Request::NodeInfo => "node_info",
            Request::RegisterCluster(_) => "register_cluster",
            Request::Register(_) => "register",
            Request::Unregister { .. } => "unregister",
            Request::Lookup { .. } => "lookup",
            Request::Report { .. } => "report",
            Request::JobEnd { .. } => "job_end",
            Request::Invalidate { .. } => "invalidate",
            Request::RegisterNode(_) => "register_node",
            Request::ClusterNodes { .. } => "cluster_nodes",
            Request::ProbePeer { .. } => "probe_peer",
            Request::OpenCheck { .. } => "open_check",
            Request::DialCheck { .. } => "dial_check",
            Request::NatCheck { .. } => "nat_check",
            Request::Echo { .. } => "echo",
            Request::Launch(_) => "launch",
            Request::Kill { .. } => "kill",
            Request::Output { .. } => "output",
            Request::ProcessExited { .. } => "process_exited",
            Request::Running { .. } => "running",
            Request::Subscribe { .. } => "subscribe",
            Request::Rendezvous { .. } => "rendezvous",
            Request::Notify { .. } => "notify",
            Request::WatchSyn { .. } => "watch_syn",
            Request::Syn { .. } => "syn",
            Request::RegisterProxy { .. } => "register_proxy",
            Request::ExpectRelay { .. } => "expect_relay",
            Request::ForUser { request, .. } => request.kind(),
        }
    }

    /// The job this request acts for, and the rank when it names one: what a log
    /// line about it should say (the span of its handling).
    pub fn job(&self) -> Option<(&str, Option<u32>)> {
        fn of(p: &ProcName) -> (&str, Option<u32>) {
            (p.job.as_str(), Some(p.rank))
        }
        match self {
            Request::Register(ap) => Some(of(&ap.process)),
            Request::Unregister { process } | Request::Subscribe { process } => Some(of(process)),
            Request::Lookup { from, .. }
            | Request::Report { from, .. }
            | Request::Rendezvous { from, .. }
            | Request::WatchSyn { from, .. }
            | Request::Syn { from, .. } => Some(of(from)),
            Request::Notify { target, .. } => Some(of(target)),
            Request::Launch(spec) => Some((spec.job.as_str(), Some(spec.rank))),
            Request::Output { job, rank, .. } | Request::ProcessExited { job, rank, .. } => {
                Some((job.as_str(), Some(*rank)))
            }
            Request::Invalidate { job, rank } => Some((job.as_str(), *rank)),
            Request::JobEnd { job } | Request::Kill { job } => Some((job.as_str(), None)),
            Request::ForUser { request, .. } => request.job(),
            Request::ClusterInfo
            | Request::NodeInfo
            | Request::RegisterCluster(_)
            | Request::RegisterNode(_)
            | Request::ClusterNodes { .. }
            | Request::ProbePeer { .. }
            | Request::OpenCheck { .. }
            | Request::NatCheck { .. }
            | Request::DialCheck { .. }
            | Request::Echo { .. }
            | Request::Running { .. }
            | Request::RegisterProxy { .. }
            | Request::ExpectRelay { .. } => None,
        }
    }

    /// The request itself, and who sent it when a helper said so
    /// ([`Request::ForUser`]).
    pub fn by_user(&self) -> (&Request, Option<&LocalUser>) {
        match self {
            Request::ForUser { user, request } => (request, Some(user)),
            other => (other, None),
        }
    }
}

/// A local user of one machine, as a helper saw it on its socket (the peer's
/// credentials). A uid names a user only on its own machine, so both are kept;
/// `node` is the helper's node, for messages.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LocalUser {
    /// The user id.
    pub uid: u32,
    /// The machine: its boot id (`/proc/sys/kernel/random/boot_id`), unique to one
    /// machine and one boot, where a node name or `/etc/machine-id` may repeat.
    pub machine: String,
    /// The node of the helper that saw the request.
    pub node: String,
}

impl LocalUser {
    /// Whether `other` is the same user on the same machine.
    pub fn same(&self, other: &LocalUser) -> bool {
        self.uid == other.uid && self.machine == other.machine
    }
}

impl fmt::Display for LocalUser {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "uid {} on node {}", self.uid, self.node)
    }
}

/// What a process is told to do for a link another process is making.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Notice {
    /// Connect to `addr`, where process `from` listens, and link (reversed).
    ConnectBack {
        /// The initiator.
        from: ProcName,
        /// Its access address.
        addr: SocketAddr,
    },
    /// Connect to `addr` from our listener's port, now, while `from` does the same
    /// toward us (simultaneous open).
    Punch {
        /// The initiator.
        from: ProcName,
        /// Its access address.
        addr: SocketAddr,
    },
    /// Meet `from` at the proxy `proxy` with `token`.
    Relay {
        /// The initiator.
        from: ProcName,
        /// The proxy's address.
        proxy: SocketAddr,
        /// The single-use token, hex.
        token: String,
    },
    /// (helper only) Inject this SYN packet into the node's stack.
    Inject {
        /// The IPv4 packet.
        packet: Vec<u8>,
    },
}

/// What went wrong, as told to the peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The frame could not be parsed.
    Malformed,
    /// The frame was larger than allowed.
    TooLarge,
    /// The frame's protocol version is not spoken here.
    Version,
    /// The named process is not registered.
    UnknownProcess,
    /// The named process was registered and has left (unregistered); its job goes
    /// on. Unlike [`ErrorKind::UnknownProcess`], waiting will not bring it.
    Left,
    /// No technique can link the two clusters.
    NoRoute,
    /// The request is not allowed from this peer.
    Forbidden,
    /// The next hop cannot be reached.
    Unavailable,
    /// A bug on the answering side.
    Internal,
}

/// An error answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorReply {
    /// Machine-readable kind.
    pub kind: ErrorKind,
    /// What a person needs to know.
    pub message: String,
}

impl fmt::Display for ErrorReply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.kind, self.message)
    }
}

/// An answer, on any hop.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Response {
    /// Done.
    Ok,
    /// The cluster's configuration.
    Cluster(ClusterConfig),
    /// The node a helper serves.
    Node {
        /// The cluster's configuration.
        cluster: ClusterConfig,
        /// Node name.
        node: String,
        /// Address processes on this node bind their listeners to.
        bind_addr: IpAddr,
    },
    /// A connection plan.
    Plan(Plan),
    /// A measured link (answer to `ProbePeer`).
    Measured(LinkQuality),
    /// What a connection's two ends saw (answer to `NatCheck`).
    Seen {
        /// The connection's address on the node.
        local: SocketAddr,
        /// Its address as the proxy saw it.
        seen: SocketAddr,
    },
    /// A check listener's address (answer to `OpenCheck`).
    Listening {
        /// The address it listens on, inside its cluster.
        addr: SocketAddr,
    },
    /// Bytes received (answer to `Echo`).
    Echoed {
        /// Length of the payload.
        len: u64,
    },
    /// Where and how to meet the target for a relayed link.
    Relay {
        /// The proxy's address.
        proxy: SocketAddr,
        /// The single-use token, hex.
        token: String,
    },
    /// Pushed to a subscribed process.
    Notice(Notice),
    /// Something went wrong.
    Error(ErrorReply),
}

impl Response {
    /// Builds an error answer.
    pub fn error(kind: ErrorKind, message: impl Into<String>) -> Self {
        Response::Error(ErrorReply {
            kind,
            message: message.into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_parse_and_print() {
        for p in Policy::ALL {
            assert_eq!(p.to_string().parse::<Policy>().unwrap(), p);
        }
        assert_eq!(
            "port-range 5000-5010".parse::<Policy>().unwrap(),
            Policy::PortRange { lo: 5000, hi: 5010 }
        );
        for bad in [
            "opn",
            "port-range",
            "port-range 10-5",
            "port-range 0-5",
            "port-range a-b",
        ] {
            let err = bad.parse::<Policy>().unwrap_err();
            assert!(!err.is_empty(), "{bad}");
        }
        assert!("port-range 10-5"
            .parse::<Policy>()
            .unwrap_err()
            .contains("10 is above 5"));
    }
}
