//! Ranks of a job over an embedded grid, as threads of the test: shared by the
//! collectives tests (blocking and non-blocking).

#![allow(dead_code, clippy::unwrap_used)]

use qcg::{Comm, JobEnv};
use qcg_cli::grid::LocalGrid;

/// Joins `size` ranks of `job` placed on `grid`, with the grid's topology.
pub async fn join(grid: &LocalGrid, job: &str, size: u32) -> Vec<Comm> {
    let secret = qcg_cli::grid::secret();
    let slots = grid.placement(size as usize);
    let paths: Vec<Vec<String>> = slots
        .iter()
        .map(|s| vec![s.cluster.clone(), s.node.clone()])
        .collect();
    let topo = qcg_coll::Topology::from_paths(&paths, qcg::topo::default_costs(2)).unwrap();
    let job = job.to_string();
    tokio::task::spawn_blocking(move || {
        let handles: Vec<_> = (0..size)
            .map(|r| {
                let env = JobEnv {
                    job: job.clone(),
                    rank: r,
                    size,
                    helper: slots[r as usize].socket.clone(),
                    secret,
                };
                let topo = topo.clone();
                std::thread::spawn(move || Comm::connect(env).unwrap().with_topology(topo).unwrap())
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
    .await
    .unwrap()
}

/// `f` on every rank at once, one thread each; the results in rank order.
pub fn on_every_rank<T: Send>(comms: &[Comm], f: impl Fn(&Comm) -> T + Sync) -> Vec<T> {
    std::thread::scope(|s| {
        let f = &f;
        let hs: Vec<_> = comms.iter().map(|c| s.spawn(move || f(c))).collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    })
}
