//! The job's topology, as `qcg run` (or a frontal) describes it in the environment.
//!
//! `QCG_TOPOLOGY` holds one path per rank, ranks separated by `;`, levels by `/`:
//! `orsay/node1;orsay/node1;rennes/node4`. `QCG_TOPOLOGY_COSTS` optionally gives one
//! `LATENCY_US:MBITS` pair per level, from the top (between sites) to the bottom
//! (inside a node), separated by `,`; `LATENCY_US:MBITS:mesh` says every pair of groups
//! across that level has a link of its own (sites joined pairwise) rather than sharing
//! one uplink. Without it the QCG-OMPI paper's Grid'5000 figures are used between
//! sites and between nodes of a site (scaled guesses for deeper topologies), and our
//! own shared-memory links' inside a node ([`node_cost`]), or [`crowded_node_cost`] when
//! every rank of the job shares one node with fewer cores than ranks.

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

/// The latency of a hop between ranks of a node that has more ranks than cores (16
/// on 2 here): the receiver first has to get a core from the ranks around it, which
/// costs far more than the copy. Measured with 16 ranks on 2 cores (allreduce and
/// bcast, 8 B to 4 KiB, `QCG_COLL_ALGO` forced, interleaved runs): a binomial tree's
/// four hops took 1.5-2.5× the root's 15 direct messages, and a binomial broadcast's
/// mean over ranks was 1.3-1.5 hops of 100-150 µs each.
pub const CROWDED_HOP: f64 = 100e-6;

/// Between two of `local` ranks sharing `cores` cores: [`CROWDED_HOP`], and the
/// bandwidth of [`node_cost`] shared, since every byte is a copy that some core makes
/// and the ranks copy at once; marked crowded, so that collectives there do not
/// pipeline (`qcg_coll::auto::choose_among`: a chain of 32 flits, which the model
/// priced cheapest at 1 MiB, measured 1.7× a one-flit tree).
pub fn crowded_node_cost(local: usize, cores: usize) -> LinkCost {
    let share = cores.max(1) as f64 / local.max(1) as f64;
    LinkCost::from_bandwidth(CROWDED_HOP, 64e9 * share.min(1.0)).on_crowded_node()
}

/// `topo` with its node level priced as a crowded node's ([`crowded_node_cost`]).
pub fn crowded(topo: Topology, local: usize, cores: usize) -> Topology {
    let mut costs = topo.costs().to_vec();
    if let Some(node) = costs.last_mut() {
        *node = crowded_node_cost(local, cores);
    }
    topo.clone().with_costs(costs).unwrap_or(topo)
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

/// `QCG_TOPOLOGY_COSTS`'s level costs for a topology of `depth` levels, or what is
/// wrong with them.
pub fn costs_for(s: &str, depth: usize) -> Result<Vec<LinkCost>, String> {
    let costs = parse_costs(s).ok_or_else(|| {
        format!("`{s}` is not a list of LATENCY_US:MBITS[:mesh] level costs separated by commas")
    })?;
    if costs.len() != depth + 1 {
        return Err(format!(
            "`{s}` gives {} level costs where the job's topology has {} levels (from \
             between sites to inside a node)",
            costs.len(),
            depth + 1
        ));
    }
    Ok(costs)
}

/// The topology from the environment, if it describes `size` ranks (`None`, with a
/// warning, if `QCG_TOPOLOGY` does not). Level costs that do not parse, or do not
/// fit the topology, are an error naming `QCG_TOPOLOGY_COSTS`.
pub fn from_env(size: u32) -> crate::Result<Option<Topology>> {
    let Ok(t) = std::env::var(ENV_TOPOLOGY) else {
        return Ok(None);
    };
    let paths: Vec<Vec<&str>> = t.split(';').map(|p| p.split('/').collect()).collect();
    let depth = paths.first().map_or(0, Vec::len);
    if paths.len() != size as usize {
        tracing::warn!(value = %t, "{ENV_TOPOLOGY} does not describe {size} ranks; using a flat topology");
        return Ok(None);
    }
    let costs = match std::env::var(ENV_COSTS) {
        Ok(c) => costs_for(&c, depth).map_err(|message| crate::Error::Env {
            var: ENV_COSTS,
            message,
        })?,
        Err(_) => default_costs(depth),
    };
    let topo = Topology::from_paths(&paths, costs).ok();
    if topo.is_none() {
        tracing::warn!(value = %t, "{ENV_TOPOLOGY} does not describe {size} ranks; using a flat topology");
    }
    Ok(topo)
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
    fn a_crowded_node_prices_only_its_node_level_and_shares_the_cores() {
        let paths = vec![vec!["a".to_string(), "n1".to_string()]; 16];
        let t = parse(&encode(&paths), 16, None).unwrap();
        let c = crowded(t.clone(), 16, 2);
        assert_eq!(&c.costs()[..2], &t.costs()[..2]);
        let node = c.costs()[2];
        assert_eq!(node.alpha, CROWDED_HOP);
        assert!(node.crowded && !t.costs()[2].crowded);
        assert!((node.beta / node_cost().beta - 8.0).abs() < 1e-9);
        // More cores than ranks: the bandwidth is not raised above a core's.
        assert_eq!(crowded_node_cost(2, 8).beta, node_cost().beta);
    }

    /// Whether a hierarchical allreduce of `bytes` u64s' bytes on `t` splits the vector
    /// between the ranks (some rank hands its combined block out).
    fn allreduce_splits(t: &Topology, bytes: usize) -> bool {
        let coll = qcg_coll::Collective::new(qcg_coll::Op::Allreduce, 0, bytes).elem_size(8);
        let algs = [qcg_coll::Algorithm::Hierarchical];
        let k = qcg_coll::auto::choose_among(&coll, t, &algs).unwrap().flits;
        let s = qcg_coll::schedule(&coll, t, algs[0], k).unwrap();
        s.iter().flat_map(|r| &r.steps).any(|st| {
            matches!(st, qcg_coll::Step::Send { tag, .. } if tag >> 16 == qcg_coll::PHASE_SPREAD)
        })
    }

    #[test]
    fn a_node_with_a_core_per_rank_splits_large_allreduces_and_a_crowded_one_does_not() {
        for p in [2, 4, 16] {
            let paths = vec![vec!["a".to_string(), "n1".to_string()]; p];
            let t = parse(&encode(&paths), p as u32, None).unwrap();
            assert!(allreduce_splits(&t, 1 << 20), "{p} ranks, 1 MiB");
            let c = crowded(t, p, 2);
            assert!(!allreduce_splits(&c, 1 << 20), "{p} ranks crowded, 1 MiB");
        }
    }

    #[test]
    fn level_costs_that_do_not_parse_or_fit_say_so() {
        assert_eq!(costs_for("10:100,1:1000,0.5:64000", 2).unwrap().len(), 3);
        let e = costs_for("100:4000:mesh,1:64000", 2).unwrap_err();
        assert!(
            e.contains("gives 2 level costs") && e.contains("has 3 levels"),
            "{e}"
        );
        let e = costs_for("fast", 0).unwrap_err();
        assert!(
            e.contains("`fast`") && e.contains("LATENCY_US:MBITS"),
            "{e}"
        );
        assert!(costs_for("10:-5", 0).is_err());
    }

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
