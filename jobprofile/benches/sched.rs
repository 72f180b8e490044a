//! Scheduler benchmark: 200 clusters, 5,000 nodes, 50 groups.
//!
//! Run with `cargo bench -p qcg-jobprofile`; prints the time of each run.

use std::time::Instant;

use qcg_jobprofile::profile::{
    Bounds, ComputingTemplate, Group, GroupConnection, JobProfile, NetworkTemplate, Task,
};
use qcg_jobprofile::sched::{schedule, FreeSlots, Strategy};
use qcg_jobprofile::topology::{Cluster, InterLink, LinkQuality, Node, ResourceTopology};

/// Small deterministic generator (64-bit LCG) so runs are comparable.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }

    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo)
    }

    fn unit(&mut self) -> f64 {
        (self.next() % 1_000_000) as f64 / 1_000_000.0
    }
}

const CLUSTERS: usize = 200;
const NODES_PER_CLUSTER: usize = 25;
const SITES: usize = 20;
const GROUPS: usize = 50;

fn topology(rng: &mut Lcg) -> ResourceTopology {
    let clusters = (0..CLUSTERS)
        .map(|c| Cluster {
            name: format!("site{}-c{c}", c % SITES),
            nodes: (0..NODES_PER_CLUSTER)
                .map(|i| Node {
                    name: format!("c{c}-n{i}"),
                    slots: [2, 4, 8][rng.range(0, 3) as usize],
                    cpu_speed_mhz: 1600.0 + 200.0 * rng.range(0, 8) as f64,
                    memory_mib: [2048.0, 4096.0, 8192.0, 16384.0][rng.range(0, 4) as usize],
                    submitters: None,
                })
                .collect(),
            internal: LinkQuality {
                latency_ms: 0.02 + 0.3 * rng.unit(),
                bandwidth_mbps: [1000.0, 10000.0][rng.range(0, 2) as usize],
            },
        })
        .collect();
    let mut links = Vec::new();
    for a in 0..CLUSTERS {
        for b in a + 1..CLUSTERS {
            let same_site = a % SITES == b % SITES;
            let (lat, bw) = if same_site {
                (0.3 + 1.5 * rng.unit(), 1000.0)
            } else {
                (5.0 + 60.0 * rng.unit(), 50.0 + 950.0 * rng.unit())
            };
            links.push(InterLink {
                a: format!("site{}-c{a}", a % SITES),
                b: format!("site{}-c{b}", b % SITES),
                quality: LinkQuality {
                    latency_ms: lat,
                    bandwidth_mbps: bw,
                },
            });
        }
    }
    ResourceTopology { clusters, links }
}

fn bounds(min: Option<f64>, max: Option<f64>) -> Option<Bounds> {
    Some(Bounds { min, max })
}

fn profile(rng: &mut Lcg) -> JobProfile {
    let network_templates = vec![
        NetworkTemplate {
            id: "lan".into(),
            latency: bounds(None, Some(1.0)),
            bandwidth: None,
        },
        NetworkTemplate {
            id: "wan".into(),
            latency: bounds(None, Some(40.0)),
            bandwidth: bounds(Some(100.0), None),
        },
    ];
    let computing_templates = vec![ComputingTemplate {
        id: "fat".into(),
        cpucount: None,
        cpuspeed: bounds(Some(2000.0), None),
        memory: bounds(Some(8192.0), None),
    }];
    let groups = (0..GROUPS)
        .map(|g| {
            let mut connections = Vec::new();
            if g > 0 {
                connections.push(GroupConnection {
                    endpoint: format!("g{}", (g - 1) / 2),
                    network_template: "wan".into(),
                });
            }
            if g % 7 == 3 {
                connections.push(GroupConnection {
                    endpoint: format!("g{}", (g + 11) % GROUPS),
                    network_template: "wan".into(),
                });
            }
            Group {
                id: format!("g{g}"),
                processes: rng.range(4, 48) as u32,
                computing_template: (g % 5 == 0).then(|| "fat".to_string()),
                network_template: Some("lan".into()),
                connections,
            }
        })
        .collect();
    JobProfile {
        app_id: "bench".into(),
        network_templates,
        computing_templates,
        task: Task {
            id: "bench".into(),
            groups,
            execution: None,
        },
    }
}

fn main() {
    let mut rng = Lcg(42);
    let topo = topology(&mut rng);
    let job = profile(&mut rng);
    let job = JobProfile::parse(&job.to_xml()).expect("generated profile parses");
    let free = FreeSlots::all(&topo);
    println!(
        "sched bench: {} clusters, {} nodes, {} free slots, {} groups, {} processes",
        topo.clusters.len(),
        topo.node_count(),
        free.total(),
        job.task.groups.len(),
        job.total_processes()
    );
    let mut worst = 0.0f64;
    for strategy in [Strategy::Spread, Strategy::Concentrate] {
        for run in 0..3 {
            let start = Instant::now();
            let result = schedule(&job, &topo, &free, strategy);
            let secs = start.elapsed().as_secs_f64();
            worst = worst.max(secs);
            match result {
                Ok(m) => println!(
                    "{strategy:?} run {run}: {:.1} ms, {} placements, exhaustive {}, cost {:?}",
                    secs * 1e3,
                    m.explored,
                    m.exhaustive,
                    m.cost
                ),
                Err(e) => println!("{strategy:?} run {run}: {:.1} ms, error: {e}", secs * 1e3),
            }
        }
    }
    println!("slowest run: {:.1} ms (target: under 1000 ms)", worst * 1e3);
}
