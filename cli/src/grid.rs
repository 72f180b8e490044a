//! An embedded grid on loopback: a broker, C frontals and K helpers per cluster, all
//! in this process, under an ephemeral CA. What `qcg run` uses when no helper is
//! given, and what tests and benchmarks start.

use qcg_broker::Broker;
use qcg_frontal::Frontal;
use qcg_helper::Helper;
use qcg_proto::tls::{Ca, Role};
use qcg_proto::{ClusterConfig, Nat, Policy};
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

/// A running embedded grid.
pub struct LocalGrid {
    /// The broker (its state is readable).
    pub broker: Broker,
    /// One frontal per cluster.
    pub frontals: Vec<Frontal>,
    helpers: Vec<Helper>,
    /// Relay proxies.
    pub proxies: Vec<Proxy>,
    /// Nodes, cluster by cluster.
    pub nodes: Vec<NodeSlot>,
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
        anyhow::ensure!(!clusters.is_empty(), "a grid needs at least one cluster");
        anyhow::ensure!(nodes_per_cluster > 0, "a cluster needs at least one node");
        let ca = Ca::generate()?;
        let lo: SocketAddr = "127.0.0.1:0".parse()?;
        let broker = Broker::start(ca.identity(Role::Broker, "broker")?, lo, Some(lo)).await?;
        let dir = tempfile::Builder::new().prefix("qcg-grid-").tempdir()?;
        let mut frontals = Vec::new();
        let mut helpers = Vec::new();
        let mut nodes = Vec::new();
        for (c, (policy, nat)) in clusters.iter().enumerate() {
            let name = format!("cluster-{c}");
            let cluster = ClusterConfig {
                name: name.clone(),
                policy: *policy,
                nat: *nat,
                public_address: nat.is_nat().then(|| [127, 0, 0, 1].into()),
            };
            let f = Frontal::start(
                ca.identity(Role::Frontal, &name)?,
                cluster,
                broker.quic_addr,
                lo,
            )
            .await?;
            for k in 0..nodes_per_cluster {
                let node = format!("{name}-node-{k}");
                let socket = dir.path().join(format!("{node}.sock"));
                let h = Helper::start(
                    ca.identity(Role::Helper, &node)?,
                    node.clone(),
                    f.addr,
                    socket.clone(),
                    [127, 0, 0, 1].into(),
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
            frontals,
            helpers,
            proxies: px,
            nodes,
            _dir: dir,
        })
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
