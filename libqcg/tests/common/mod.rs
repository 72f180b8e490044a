//! What libqcg's tests share: the ranks of a job joined over an embedded grid
//! (`qcg_grid::Grid`: real broker, frontals and helpers in this process, real
//! links on loopback), as threads of the test; and the workspace's binaries for the
//! tests that run ranks as processes through `qcg run`.

#![allow(dead_code, clippy::unwrap_used)]

use qcg::{Comm, JobEnv};
use qcg_grid::Grid;
use qcg_proto::Policy;
use std::path::PathBuf;

/// A workspace binary (`qcg`, built by `cargo build --workspace --bins`).
pub fn bin(name: &str) -> PathBuf {
    qcg_grid::services::bin(name).unwrap_or_else(|e| panic!("{e}"))
}

/// One of libqcg's examples (built by `cargo test -p qcg`).
pub fn example(name: &str) -> PathBuf {
    bin(&format!("examples/{name}"))
}

/// An embedded grid of one open cluster per entry of `clusters`, `nodes` nodes each.
pub async fn open_grid(clusters: usize, nodes: usize) -> Grid {
    Grid::builder()
        .clusters(&vec![Policy::Open; clusters])
        .nodes_per_cluster(nodes)
        .start()
        .await
        .unwrap()
}

/// What each of `size` ranks of `job` gets, placed on `grid` (one secret for all).
pub fn envs(grid: &Grid, job: &str, size: u32) -> Vec<JobEnv> {
    let secret = qcg_grid::secret();
    grid.placement(size as usize)
        .into_iter()
        .enumerate()
        .map(|(r, slot)| JobEnv {
            job: job.to_string(),
            rank: r as u32,
            size,
            helper: slot.socket,
            secret,
        })
        .collect()
}

/// Joins `size` ranks of `job` placed on `grid`, one thread each.
pub async fn join(grid: &Grid, job: &str, size: u32) -> Vec<Comm> {
    connect_all(envs(grid, job, size), None).await
}

/// Like [`join`], each rank also given the grid's topology (cluster, node) as
/// collectives use it.
pub async fn join_with_topology(grid: &Grid, job: &str, size: u32) -> Vec<Comm> {
    let paths: Vec<Vec<String>> = grid
        .placement(size as usize)
        .iter()
        .map(|s| vec![s.cluster.clone(), s.node.clone()])
        .collect();
    let topo = qcg_coll::Topology::from_paths(&paths, qcg::topo::default_costs(2)).unwrap();
    connect_all(envs(grid, job, size), Some(topo)).await
}

async fn connect_all(envs: Vec<JobEnv>, topo: Option<qcg_coll::Topology>) -> Vec<Comm> {
    tokio::task::spawn_blocking(move || {
        let handles: Vec<_> = envs
            .into_iter()
            .map(|env| {
                let topo = topo.clone();
                std::thread::spawn(move || {
                    let c = Comm::connect(env).unwrap();
                    match topo {
                        Some(t) => c.with_topology(t).unwrap(),
                        None => c,
                    }
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
    .await
    .unwrap()
}

/// Ranks 0 and 1 of a job of two, on two different clusters of `grid`.
pub async fn pair(grid: &Grid, job: &str) -> (Comm, Comm) {
    let slots = grid.placement(2);
    assert_ne!(slots[0].cluster, slots[1].cluster);
    let mut comms = join(grid, job, 2).await.into_iter();
    (comms.next().unwrap(), comms.next().unwrap())
}

/// `f` on every rank at once, one thread each; the results in rank order.
pub fn on_every_rank<T: Send>(comms: &[Comm], f: impl Fn(&Comm) -> T + Sync) -> Vec<T> {
    std::thread::scope(|s| {
        let f = &f;
        let hs: Vec<_> = comms.iter().map(|c| s.spawn(move || f(c))).collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    })
}
