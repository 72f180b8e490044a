//! The job's topology, as `qcg run` (or a frontal) describes it in the environment.
//!
//! `QCG_TOPOLOGY` holds one path per rank, ranks separated by `;`, levels by `/`:
//! `orsay/node1;orsay/node1;rennes/node4`. `QCG_TOPOLOGY_COSTS` optionally gives one
//! `LATENCY_US:MBITS` pair per level, from the top (between sites) to the bottom
//! (inside a node), separated by `,`; `LATENCY_US:MBITS:mesh` says every pair of groups
//! across that level has a link of its own (sites joined pairwise) rather than sharing
//! one uplink. Without it the QCG-OMPI paper's Grid'5000 figures are used between
//! sites and between nodes of a site (scaled guesses for deeper topologies), and our
//! own shared-memory links' inside a node ([`NODE_COST`]).

use qcg_coll::{LinkCost, Topology};

/// Topology paths, one per rank.
pub const ENV_TOPOLOGY: &str = qcg_wire::env::TOPOLOGY;
/// Level costs.
pub const ENV_COSTS: &str = qcg_wire::env::TOPOLOGY_COSTS;

/// Writes paths in the `QCG_TOPOLOGY` form.
pub fn encode(paths: &[Vec<String>]) -> String {
    paths
        .iter()
        .map(|p| p.join("/"))
        .collect::<Vec<_>>()
        .join(";")
}

/// Between two ranks of one node: our shared-memory links as measured on a
/// two-core machine (0.6 µs for 1 byte one way, 1 MiB at about 8 GB/s), where the
/// QCG-OMPI paper's Open MPI of 2009 had 20 µs and 0.5 GB/s.
pub fn node_cost() -> LinkCost {
    LinkCost::from_bandwidth(0.6e-6, 64e9)
}

/// Default level costs for a topology of `depth` levels (`depth + 1` costs).
pub fn default_costs(depth: usize) -> Vec<LinkCost> {
    let mut paper = Topology::grid5000_costs();
    paper[2] = node_cost();
    match depth {
        0 => vec![paper[2]],
        1 => vec![paper[0], paper[2]],
        2 => paper.to_vec(),
        d => {
            let mut v = vec![paper[0]];
            v.extend(std::iter::repeat_n(paper[1], d - 1));
            v.push(paper[2]);
            v
        }
    }
}

/// Parses level costs: `LATENCY_US:MBITS[:mesh],…`.
pub fn parse_costs(s: &str) -> Option<Vec<LinkCost>> {
    s.split(',')
        .map(|c| {
            let mut f = c.split(':').map(str::trim);
            let lat: f64 = f.next()?.parse().ok()?;
            let bw: f64 = f.next()?.parse().ok()?;
            let mesh = match f.next() {
                None => false,
                Some("mesh") => true,
                Some(_) => return None,
            };
            if f.next().is_some() || lat < 0.0 || bw <= 0.0 {
                return None;
            }
            let cost = LinkCost::from_bandwidth(lat * 1e-6, bw * 1e6);
            Some(if mesh { cost.meshed() } else { cost })
        })
        .collect()
}

/// Parses a `QCG_TOPOLOGY` value for a job of `size` ranks.
pub fn parse(s: &str, size: u32, costs: Option<&str>) -> Option<Topology> {
    let paths: Vec<Vec<&str>> = s.split(';').map(|p| p.split('/').collect()).collect();
    if paths.len() != size as usize {
        return None;
    }
    let depth = paths.first()?.len();
    let costs = match costs {
        Some(c) => parse_costs(c)?,
        None => default_costs(depth),
    };
    Topology::from_paths(&paths, costs).ok()
}

/// The topology from the environment, if it describes `size` ranks.
pub fn from_env(size: u32) -> Option<Topology> {
    let t = std::env::var(ENV_TOPOLOGY).ok()?;
    let costs = std::env::var(ENV_COSTS).ok();
    let topo = parse(&t, size, costs.as_deref());
    if topo.is_none() {
        tracing::warn!(value = %t, "{ENV_TOPOLOGY} does not describe {size} ranks; using a flat topology");
    }
    topo
}

/// One group holding every rank.
pub fn flat(size: u32) -> Topology {
    let paths: Vec<Vec<String>> = vec![Vec::new(); size.max(1) as usize];
    Topology::from_paths(&paths, default_costs(0))
        .unwrap_or_else(|_| unreachable!("flat paths are well formed"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_checks() {
        let paths = vec![
            vec!["a".to_string(), "n1".to_string()],
            vec!["b".to_string(), "n2".to_string()],
        ];
        let s = encode(&paths);
        assert_eq!(s, "a/n1;b/n2");
        let t = parse(&s, 2, None).unwrap();
        assert_eq!(t.depth(), 2);
        assert_eq!(t.level(0, 1), 0);
        assert!(parse(&s, 3, None).is_none());
        assert!(parse("a/n1;b", 2, None).is_none());
        let t = parse(&s, 2, Some("10000:100,100:1000,5:10000")).unwrap();
        assert!((t.costs()[0].alpha - 0.01).abs() < 1e-12);
        assert!(parse(&s, 2, Some("10000:100")).is_none());
        let t = parse(&s, 2, Some("10000:100:mesh,100:1000,5:10000")).unwrap();
        assert!(t.costs()[0].mesh && !t.costs()[1].mesh);
        assert!(parse(&s, 2, Some("10000:100:star,100:1000,5:10000")).is_none());
        assert!(parse(&s, 2, Some("10000:100:mesh:x,100:1000,5:10000")).is_none());
        assert_eq!(flat(4).size(), 4);
    }
}
