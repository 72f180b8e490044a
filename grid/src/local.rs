//! The embedded grid: a broker, a frontal per cluster and helpers on each cluster's
//! nodes, all in this process on 127.0.0.1 under an ephemeral CA, with relay
//! proxies. What `qcg run` uses when no helper is given, what `qcg submit` uses when
//! no broker is given, and what libqcg's tests and the benchmarks start.
//!
//! On loopback nothing is really blocked or translated: the clusters' policies and
//! NATs only shape the broker's plans.

use qcg_broker::Broker;
use qcg_frontal::Frontal;
use qcg_helper::Helper;
use qcg_jobprofile::profile::{Bounds, JobProfile};
use qcg_proto::tls::{Ca, Identity, Role, TlsError};
use qcg_proto::{ClusterConfig, Nat, NodeSpec, Policy};
use qcg_proxy::Proxy;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// What went wrong starting or waiting for an embedded grid.
#[derive(Debug, thiserror::Error)]
pub enum GridError {
    /// The builder was given no cluster.
    #[error("a grid needs at least one cluster")]
    NoCluster,
    /// A cluster was given no node.
    #[error("cluster {0}: a cluster needs at least one node")]
    NoNode(String),
    /// The ephemeral CA could not be made, or a certificate issued from it.
    #[error("the grid's CA: {0}")]
    Ca(#[from] TlsError),
    /// The folder for the helpers' sockets could not be made.
    #[error("cannot create the grid's folder for sockets: {0}")]
    Dir(#[source] std::io::Error),
    /// The broker did not start.
    #[error("the grid's broker did not start: {0}")]
    Broker(#[source] qcg_broker::StartError),
    /// A cluster's frontal did not start.
    #[error("the frontal of cluster {cluster} did not start: {source}")]
    Frontal {
        /// The cluster.
        cluster: String,
        /// Why.
        source: qcg_frontal::StartError,
    },
    /// A node's helper did not start.
    #[error("the helper of node {node} did not start: {source}")]
    Helper {
        /// The node.
        node: String,
        /// Why.
        source: qcg_helper::StartError,
    },
    /// A relay proxy did not start.
    #[error("relay proxy {name} did not start: {source}")]
    Proxy {
        /// The proxy's name.
        name: String,
        /// Why.
        source: qcg_proxy::StartError,
    },
    /// The broker did not count a proxy alive in time.
    #[error("the broker did not count relay proxy {0} alive within 5 s")]
    ProxyNotAlive(String),
    /// The broker's topology was not complete in time.
    #[error("the grid's topology is incomplete after {waited:?}: {clusters} clusters, {nodes} nodes, {links} links")]
    Topology {
        /// How long it was waited for.
        waited: Duration,
        /// Clusters the broker knows.
        clusters: usize,
        /// Nodes it knows.
        nodes: usize,
        /// Measured links between clusters.
        links: usize,
    },
}

/// How to start an embedded grid: its clusters (shapes), their nodes and its relay
/// proxies. Cluster `c` is `cluster-C` and its node `k` is `cluster-C-node-K`.
#[derive(Clone, Debug)]
pub struct GridBuilder {
    clusters: Vec<(Policy, Nat)>,
    shapes: Vec<ClusterShape>,
    nodes_per_cluster: usize,
    proxies: usize,
}

impl Default for GridBuilder {
    fn default() -> Self {
        GridBuilder {
            clusters: Vec::new(),
            shapes: Vec::new(),
            nodes_per_cluster: 1,
            proxies: 1,
        }
    }
}

impl GridBuilder {
    /// One cluster per policy, without NAT.
    pub fn clusters(mut self, policies: &[Policy]) -> Self {
        self.clusters
            .extend(policies.iter().map(|&p| (p, Nat::None)));
        self
    }

    /// One cluster per (policy, NAT kind); a NATed cluster's public address is
    /// 127.0.0.1.
    pub fn clusters_with_nat(mut self, clusters: &[(Policy, Nat)]) -> Self {
        self.clusters.extend_from_slice(clusters);
        self
    }

    /// Nodes of each cluster given by [`GridBuilder::clusters`] or
    /// [`GridBuilder::clusters_with_nat`] (1 unless set), with this machine's
    /// figures.
    pub fn nodes_per_cluster(mut self, n: usize) -> Self {
        self.nodes_per_cluster = n;
        self
    }

    /// Clusters given node by node, after those of [`GridBuilder::clusters`].
    pub fn shaped(mut self, shapes: &[ClusterShape]) -> Self {
        self.shapes.extend_from_slice(shapes);
        self
    }

    /// Relay proxies (1 unless set).
    pub fn proxies(mut self, n: usize) -> Self {
        self.proxies = n;
        self
    }

    /// Starts the grid: the broker, each cluster's frontal and helpers, the proxies;
    /// returns once the broker counts every proxy alive. What started before a
    /// failure is stopped.
    pub async fn start(self) -> Result<Grid, GridError> {
        let mut shapes: Vec<ClusterShape> = self
            .clusters
            .iter()
            .map(|&(policy, nat)| ClusterShape {
                policy,
                nat,
                nodes: (0..self.nodes_per_cluster)
                    .map(|k| qcg_helper::node::detect(&k.to_string()))
                    .collect(),
            })
            .collect();
        shapes.extend(self.shapes);
        if shapes.is_empty() {
            return Err(GridError::NoCluster);
        }
        if let Some(c) = shapes.iter().position(|s| s.nodes.is_empty()) {
            return Err(GridError::NoNode(format!("cluster-{c}")));
        }
        let ca = Ca::generate()?;
        let lo: SocketAddr = ([127, 0, 0, 1], 0).into();
        let broker = Broker::start_with(
            ca.identity(Role::Broker, "broker")?,
            qcg_broker::Options {
                quic: lo,
                http: Some(lo),
                https: Some(lo),
                ..Default::default()
            },
        )
        .await
        .map_err(GridError::Broker)?;
        let dir = tempfile::Builder::new()
            .prefix("qcg-grid-")
            .tempdir()
            .map_err(GridError::Dir)?;
        // From here on, what started is stopped if something else fails.
        let mut grid = Grid {
            running: Some(Running {
                broker,
                frontals: Vec::new(),
                helpers: Vec::new(),
                proxies: Vec::new(),
            }),
            client: ca.identity(Role::Client, "submitter")?,
            nodes: Vec::new(),
            ca,
            _dir: dir,
        };
        for (c, shape) in shapes.iter().enumerate() {
            grid.start_cluster(&format!("cluster-{c}"), shape).await?;
        }
        for _ in 0..self.proxies {
            grid.add_proxy(None).await?;
        }
        Ok(grid)
    }
}

/// The services an embedded grid runs, taken out when it is shut down.
struct Running {
    broker: Broker,
    frontals: Vec<Frontal>,
    helpers: Vec<Helper>,
    proxies: Vec<Proxy>,
}

/// A running embedded grid. Dropping it stops its services (on the tokio runtime it
/// is dropped in, in the background); [`Grid::shutdown`] stops them and waits.
pub struct Grid {
    running: Option<Running>,
    /// A `client` identity for the broker's job API.
    pub client: Identity,
    /// Nodes, cluster by cluster.
    pub nodes: Vec<NodeSlot>,
    ca: Ca,
    _dir: tempfile::TempDir,
}

impl Grid {
    /// A builder: no cluster yet, one node per cluster, one relay proxy.
    pub fn builder() -> GridBuilder {
        GridBuilder::default()
    }

    fn running(&self) -> &Running {
        // Only `shutdown` (which consumes the grid) and `drop` take it out.
        self.running
            .as_ref()
            .expect("an embedded grid's services are there until it is shut down")
    }

    fn running_mut(&mut self) -> &mut Running {
        self.running
            .as_mut()
            .expect("an embedded grid's services are there until it is shut down")
    }

    /// The broker (its state is readable; its HTTPS job API is on).
    pub fn broker(&self) -> &Broker {
        &self.running().broker
    }

    /// One frontal per cluster.
    pub fn frontals(&self) -> &[Frontal] {
        &self.running().frontals
    }

    /// Relay proxies.
    pub fn proxies(&self) -> &[Proxy] {
        &self.running().proxies
    }

    async fn start_cluster(&mut self, name: &str, shape: &ClusterShape) -> Result<(), GridError> {
        let lo: SocketAddr = ([127, 0, 0, 1], 0).into();
        let cluster = ClusterConfig {
            name: name.to_string(),
            policy: shape.policy,
            nat: shape.nat,
            public_address: shape.nat.is_nat().then(|| [127, 0, 0, 1].into()),
        };
        let broker_at = self.running().broker.quic_addr;
        let f = Frontal::start(
            self.ca.identity(Role::Frontal, name)?,
            cluster,
            broker_at,
            lo,
        )
        .await
        .map_err(|source| GridError::Frontal {
            cluster: name.to_string(),
            source,
        })?;
        let frontal_at = f.addr;
        self.running_mut().frontals.push(f);
        for (k, spec) in shape.nodes.iter().enumerate() {
            let node = format!("{name}-node-{k}");
            let socket = self._dir.path().join(format!("{node}.sock"));
            let spec = NodeSpec {
                name: node.clone(),
                ..spec.clone()
            };
            // The embedded grid's jobs are its user's own: they run as that user
            // (root only when `qcg` itself runs as root).
            let h = Helper::start_full(
                self.ca.identity(Role::Helper, &node)?,
                spec,
                frontal_at,
                socket.clone(),
                [127, 0, 0, 1].into(),
                None,
                qcg_helper::accounts::Accounts::current_user(),
            )
            .await
            .map_err(|source| GridError::Helper {
                node: node.clone(),
                source,
            })?;
            self.running_mut().helpers.push(h);
            self.nodes.push(NodeSlot {
                cluster: name.to_string(),
                node,
                socket,
            });
        }
        Ok(())
    }

    async fn add_proxy(&mut self, public: Option<SocketAddr>) -> Result<SocketAddr, GridError> {
        let name = format!("proxy-{}", self.running().proxies.len());
        let lo: SocketAddr = ([127, 0, 0, 1], 0).into();
        let id = self.ca.identity(Role::Proxy, &name)?;
        let p = Proxy::start(id, lo, public, self.running().broker.quic_addr)
            .await
            .map_err(|source| GridError::Proxy {
                name: name.clone(),
                source,
            })?;
        let addr = p.addr;
        self.running_mut().proxies.push(p);
        let want = self.running().proxies.len();
        for _ in 0..500 {
            let alive = self
                .broker()
                .state
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .proxies()
                .iter()
                .filter(|p| p.alive)
                .count();
            if alive >= want {
                return Ok(addr);
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Err(GridError::ProxyNotAlive(name))
    }

    /// Takes relay proxy `i` out of the grid, for the caller to stop or kill (a
    /// proxy that dies, in tests). Panics when there is no proxy `i`.
    pub fn remove_proxy(&mut self, i: usize) -> Proxy {
        self.running_mut().proxies.remove(i)
    }

    /// Starts one more relay proxy, which announces `public` to the broker as its
    /// address (a forwarder in front of it, in tests), and waits until the broker
    /// counts it alive.
    pub async fn start_proxy(&mut self, public: SocketAddr) -> Result<SocketAddr, GridError> {
        self.add_proxy(Some(public)).await
    }

    /// The URL of the broker's job API.
    pub fn https_url(&self) -> String {
        match self.broker().https_addr {
            Some(a) => format!("https://{a}"),
            None => String::new(),
        }
    }

    /// Waits until the broker's topology holds every cluster with all its nodes and
    /// a measured link between every two clusters (at most `timeout`).
    pub async fn wait_for_topology(&self, timeout: Duration) -> Result<(), GridError> {
        let clusters = self.frontals().len();
        let start = tokio::time::Instant::now();
        loop {
            let t = self.broker().ctx.topology();
            if t.clusters.len() == clusters
                && t.node_count() == self.nodes.len()
                && t.links.len() == clusters * (clusters - 1) / 2
            {
                return Ok(());
            }
            if start.elapsed() > timeout {
                return Err(GridError::Topology {
                    waited: timeout,
                    clusters: t.clusters.len(),
                    nodes: t.node_count(),
                    links: t.links.len(),
                });
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Job processes running on the grid's nodes.
    pub fn running_processes(&self) -> usize {
        self.running().helpers.iter().map(|h| h.running()).sum()
    }

    /// Where the processes of a job of `n` ranks go: ranks are cut into one block per
    /// cluster, and spread round-robin over the cluster's nodes.
    pub fn placement(&self, n: usize) -> Vec<NodeSlot> {
        let clusters = self.frontals().len();
        let per = self.nodes.len() / clusters;
        (0..n)
            .map(|r| {
                let c = r * clusters / n.max(1);
                let first = (0..n).find(|&q| q * clusters / n == c).unwrap_or(0);
                self.nodes[c * per + (r - first) % per].clone()
            })
            .collect()
    }

    /// Stops everything and waits until it has stopped.
    pub async fn shutdown(mut self) {
        if let Some(r) = self.running.take() {
            r.shutdown().await;
        }
    }
}

impl Running {
    async fn shutdown(self) {
        for p in self.proxies {
            p.shutdown();
        }
        for h in self.helpers {
            h.shutdown().await;
        }
        for f in self.frontals {
            f.shutdown().await;
        }
        self.broker.shutdown().await;
    }
}

impl Drop for Grid {
    fn drop(&mut self) {
        let Some(r) = self.running.take() else {
            return;
        };
        // The services' tasks live on the runtime: stopping them needs it. Outside
        // one, they went with their runtime already.
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(r.shutdown());
        }
    }
}

/// The embedded grid for a JobProfile: one open cluster per group (as QCG-OMPI runs
/// each group on one cluster), each with two nodes (one for a single process) and
/// enough slots for the group, with figures that meet the group's computing
/// template.
pub fn shape_for(profile: &JobProfile) -> Vec<ClusterShape> {
    profile
        .task
        .groups
        .iter()
        .map(|g| {
            let t = g
                .computing_template
                .as_deref()
                .and_then(|id| profile.computing_template(id));
            let nodes = g.processes.min(2);
            let need = g.processes.div_ceil(nodes);
            let slots = within(t.and_then(|t| t.cpucount), f64::from(need)).max(f64::from(need));
            ClusterShape {
                policy: Policy::Open,
                nat: Nat::None,
                nodes: (0..nodes)
                    .map(|k| NodeSpec {
                        name: k.to_string(),
                        slots: slots.ceil() as u32,
                        cpu_speed_mhz: within(t.and_then(|t| t.cpuspeed), 2000.0),
                        memory_mib: within(t.and_then(|t| t.memory), 4096.0),
                        submitters: None,
                    })
                    .collect(),
            }
        })
        .collect()
}

/// A figure inside `bounds`, as close to `want` as they allow.
fn within(bounds: Option<Bounds>, want: f64) -> f64 {
    let b = bounds.unwrap_or_default();
    let v = b.min.map_or(want, |m| want.max(m));
    b.max.map_or(v, |m| v.min(m))
}

/// One node of the grid, as a process sees it.
#[derive(Clone, Debug)]
pub struct NodeSlot {
    /// Cluster name.
    pub cluster: String,
    /// Node name.
    pub node: String,
    /// The node helper's socket.
    pub socket: PathBuf,
}

/// One cluster of an embedded grid: its policy, its NAT and its nodes (names are
/// given by the grid; the figures are offered to the scheduler).
#[derive(Clone, Debug)]
pub struct ClusterShape {
    /// Inbound policy.
    pub policy: Policy,
    /// NAT kind (a NATed cluster's public address is 127.0.0.1).
    pub nat: Nat,
    /// Nodes.
    pub nodes: Vec<NodeSpec>,
}

/// A fresh job id.
pub fn job_id() -> String {
    format!("job-{}", hex::encode(random::<4>()))
}

/// A fresh job secret.
pub fn secret() -> [u8; 32] {
    random::<32>()
}

fn random<const N: usize>() -> [u8; N] {
    use ring::rand::SecureRandom;
    let mut b = [0u8; N];
    ring::rand::SystemRandom::new()
        .fill(&mut b)
        .expect("system random number generator");
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn placement_fills_clusters_in_blocks() {
        let g = Grid::builder()
            .clusters(&[Policy::Open, Policy::Open])
            .nodes_per_cluster(2)
            .start()
            .await
            .unwrap();
        let p = g.placement(8);
        let clusters: Vec<_> = p.iter().map(|s| s.cluster.as_str()).collect();
        assert_eq!(
            clusters,
            ["cluster-0"; 4]
                .iter()
                .chain(["cluster-1"; 4].iter())
                .copied()
                .collect::<Vec<_>>()
        );
        assert_ne!(p[0].node, p[1].node);
        assert_eq!(p[0].node, p[2].node);
        let p = g.placement(3);
        assert_eq!(p.iter().filter(|s| s.cluster == "cluster-0").count(), 2);
        g.shutdown().await;
    }

    #[test]
    fn embedded_grids_fit_the_profile() {
        let xml = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../jobprofile/examples-xml/ray2mesh.xml"),
        )
        .unwrap();
        let p = JobProfile::parse(&xml).unwrap();
        let shape = shape_for(&p);
        assert_eq!(shape.len(), 3);
        assert_eq!(shape[0].nodes.len(), 1);
        assert_eq!(shape[1].nodes.len(), 2);
        assert_eq!(shape[1].nodes[0].slots, 3);
        assert!(shape[1].nodes[0].memory_mib >= 512.0);
        assert_eq!(
            within(
                Some(Bounds {
                    min: Some(1.0),
                    max: Some(8.0)
                }),
                16.0
            ),
            8.0
        );
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn dropping_a_grid_stops_its_services() {
        let g = Grid::builder()
            .clusters(&[Policy::Open])
            .start()
            .await
            .unwrap();
        let https = g.broker().https_addr.unwrap();
        assert!(tokio::net::TcpStream::connect(https).await.is_ok());
        drop(g);
        // The broker's listener goes with it, in the background.
        let t0 = std::time::Instant::now();
        while tokio::net::TcpStream::connect(https).await.is_ok() {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "the broker still accepts on {https} 10 s after the drop"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    #[tokio::test]
    async fn a_grid_without_clusters_or_nodes_is_refused_naming_why() {
        let e = Grid::builder().start().await.err().unwrap();
        assert!(matches!(e, GridError::NoCluster), "{e}");
        let e = Grid::builder()
            .clusters(&[Policy::Open])
            .nodes_per_cluster(0)
            .start()
            .await
            .err()
            .unwrap();
        assert_eq!(
            e.to_string(),
            "cluster cluster-0: a cluster needs at least one node"
        );
    }
}
