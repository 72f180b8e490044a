//! An embedded grid on loopback: a broker, C frontals and K helpers per cluster, all
//! in this process, under an ephemeral CA. What `qcg run` uses when no helper is
//! given, what `qcg submit` uses when no broker is given, and what tests and
//! benchmarks start.

use qcg_broker::Broker;
use qcg_frontal::Frontal;
use qcg_helper::Helper;
use qcg_proto::tls::{Ca, Identity, Role};
use qcg_proto::{ClusterConfig, Nat, NodeSpec, Policy};
use qcg_proxy::Proxy;
use std::net::SocketAddr;
use std::path::PathBuf;

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

/// A running embedded grid.
pub struct LocalGrid {
    /// The broker (its state is readable; its HTTPS job API is on).
    pub broker: Broker,
    /// A `client` identity for the broker's job API.
    pub client: Identity,
    /// One frontal per cluster.
    pub frontals: Vec<Frontal>,
    helpers: Vec<Helper>,
    /// Relay proxies.
    pub proxies: Vec<Proxy>,
    /// Nodes, cluster by cluster.
    pub nodes: Vec<NodeSlot>,
    ca: Ca,
    _dir: tempfile::TempDir,
}

impl LocalGrid {
    /// Starts a grid with one cluster per entry of `policies` (no NAT), each with
    /// `nodes_per_cluster` nodes, and one relay proxy. Everything binds to 127.0.0.1
    /// on free ports.
    pub async fn start(policies: &[Policy], nodes_per_cluster: usize) -> anyhow::Result<LocalGrid> {
        let specs: Vec<(Policy, Nat)> = policies.iter().map(|&p| (p, Nat::None)).collect();
        Self::start_with(&specs, nodes_per_cluster, 1).await
    }

    /// Like [`LocalGrid::start`], with a NAT kind per cluster and `proxies` proxies.
    /// On loopback nothing is really blocked or translated: the policies only shape
    /// the broker's plans.
    pub async fn start_with(
        clusters: &[(Policy, Nat)],
        nodes_per_cluster: usize,
        proxies: usize,
    ) -> anyhow::Result<LocalGrid> {
        anyhow::ensure!(nodes_per_cluster > 0, "a cluster needs at least one node");
        let shapes: Vec<ClusterShape> = clusters
            .iter()
            .map(|&(policy, nat)| ClusterShape {
                policy,
                nat,
                nodes: (0..nodes_per_cluster)
                    .map(|k| qcg_helper::node::detect(&k.to_string()))
                    .collect(),
            })
            .collect();
        LocalGrid::start_shaped_with(&shapes, proxies).await
    }

    /// Starts a grid with one cluster per shape and one relay proxy; cluster `c` is
    /// `cluster-C` and its node `k` is `cluster-C-node-K`.
    pub async fn start_shaped(shapes: &[ClusterShape]) -> anyhow::Result<LocalGrid> {
        LocalGrid::start_shaped_with(shapes, 1).await
    }

    /// Like [`LocalGrid::start_shaped`], with `proxies` relay proxies.
    pub async fn start_shaped_with(
        shapes: &[ClusterShape],
        proxies: usize,
    ) -> anyhow::Result<LocalGrid> {
        anyhow::ensure!(!shapes.is_empty(), "a grid needs at least one cluster");
        anyhow::ensure!(
            shapes.iter().all(|s| !s.nodes.is_empty()),
            "a cluster needs at least one node"
        );
        let ca = Ca::generate()?;
        let lo: SocketAddr = "127.0.0.1:0".parse()?;
        let broker = Broker::start_with(
            ca.identity(Role::Broker, "broker")?,
            qcg_broker::Options {
                quic: lo,
                http: Some(lo),
                https: Some(lo),
                ..Default::default()
            },
        )
        .await?;
        let dir = tempfile::Builder::new().prefix("qcg-grid-").tempdir()?;
        let mut frontals = Vec::new();
        let mut helpers = Vec::new();
        let mut nodes = Vec::new();
        for (c, shape) in shapes.iter().enumerate() {
            let name = format!("cluster-{c}");
            let cluster = ClusterConfig {
                name: name.clone(),
                policy: shape.policy,
                nat: shape.nat,
                public_address: shape.nat.is_nat().then(|| [127, 0, 0, 1].into()),
            };
            let f = Frontal::start(
                ca.identity(Role::Frontal, &name)?,
                cluster,
                broker.quic_addr,
                lo,
            )
            .await?;
            for (k, spec) in shape.nodes.iter().enumerate() {
                let node = format!("{name}-node-{k}");
                let socket = dir.path().join(format!("{node}.sock"));
                let spec = NodeSpec {
                    name: node.clone(),
                    ..spec.clone()
                };
                // The embedded grid's jobs are its user's own: they run as that user
                // (root only when `qcg` itself runs as root).
                let h = Helper::start_full(
                    ca.identity(Role::Helper, &node)?,
                    spec,
                    f.addr,
                    socket.clone(),
                    [127, 0, 0, 1].into(),
                    None,
                    qcg_helper::accounts::Accounts::current_user(),
                )
                .await?;
                helpers.push(h);
                nodes.push(NodeSlot {
                    cluster: name.clone(),
                    node,
                    socket,
                });
            }
            frontals.push(f);
        }
        let mut px = Vec::new();
        for i in 0..proxies {
            let name = format!("proxy-{i}");
            px.push(
                Proxy::start(ca.identity(Role::Proxy, &name)?, lo, None, broker.quic_addr).await?,
            );
        }
        // Wait until the broker counts every proxy alive.
        for _ in 0..500 {
            let alive = broker
                .state
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .proxies()
                .iter()
                .filter(|p| p.alive)
                .count();
            if alive >= proxies {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        Ok(LocalGrid {
            broker,
            client: ca.identity(Role::Client, "submitter")?,
            frontals,
            helpers,
            proxies: px,
            nodes,
            ca,
            _dir: dir,
        })
    }

    /// Starts one more relay proxy, which announces `public` to the broker as its
    /// address (a forwarder in front of it, in tests), and waits until the broker
    /// counts it alive.
    pub async fn start_proxy(&mut self, public: SocketAddr) -> anyhow::Result<SocketAddr> {
        let name = format!("proxy-{}", self.proxies.len());
        let lo: SocketAddr = "127.0.0.1:0".parse()?;
        let id = self.ca.identity(Role::Proxy, &name)?;
        let p = Proxy::start(id, lo, Some(public), self.broker.quic_addr).await?;
        let addr = p.addr;
        self.proxies.push(p);
        for _ in 0..500 {
            let alive = self
                .broker
                .state
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .proxies()
                .iter()
                .filter(|p| p.alive)
                .count();
            if alive >= self.proxies.len() {
                return Ok(addr);
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        anyhow::bail!("the broker did not count proxy {name} alive")
    }

    /// The URL of the broker's job API.
    pub fn https_url(&self) -> String {
        match self.broker.https_addr {
            Some(a) => format!("https://{a}"),
            None => String::new(),
        }
    }

    /// Waits until the broker's topology holds every cluster with all its nodes and
    /// a measured link between every two clusters (at most `timeout`).
    pub async fn wait_for_topology(&self, timeout: std::time::Duration) -> anyhow::Result<()> {
        let clusters = self.frontals.len();
        let start = tokio::time::Instant::now();
        loop {
            let t = self.broker.ctx.topology();
            if t.clusters.len() == clusters
                && t.node_count() == self.nodes.len()
                && t.links.len() == clusters * (clusters - 1) / 2
            {
                return Ok(());
            }
            if start.elapsed() > timeout {
                anyhow::bail!(
                    "the grid's topology is incomplete after {timeout:?}: {} clusters, {} nodes, {} links",
                    t.clusters.len(),
                    t.node_count(),
                    t.links.len()
                );
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }

    /// Job processes running on the grid's nodes.
    pub fn running(&self) -> usize {
        self.helpers.iter().map(|h| h.running()).sum()
    }

    /// Where the processes of a job of `n` ranks go: ranks are cut into one block per
    /// cluster, and spread round-robin over the cluster's nodes.
    pub fn placement(&self, n: usize) -> Vec<NodeSlot> {
        let clusters = self.frontals.len();
        let per = self.nodes.len() / clusters;
        (0..n)
            .map(|r| {
                let c = r * clusters / n.max(1);
                let first = (0..n).find(|&q| q * clusters / n == c).unwrap_or(0);
                self.nodes[c * per + (r - first) % per].clone()
            })
            .collect()
    }

    /// Stops everything.
    pub async fn shutdown(self) {
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
        let g = LocalGrid::start(&[Policy::Open, Policy::Open], 2)
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
}
