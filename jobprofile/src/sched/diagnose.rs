//! Explains an infeasible job: finds the first requirement that no
//! placement can meet on its own and reports the best figure on offer.

use super::problem::{Conn, GroupReq, NetReq, Problem};
use super::{FreeSlots, ScheduleError};
use crate::profile::Bounds;
use crate::topology::LinkQuality;

/// Reads one figure of a link.
type Getter = fn(&LinkQuality) -> f64;

/// Describes a range such as `latency <= 5 ms`.
pub(crate) fn describe(name: &str, b: &Bounds, unit: &str) -> String {
    let u = if unit.is_empty() {
        String::new()
    } else {
        format!(" {unit}")
    };
    match (b.min, b.max) {
        (Some(lo), Some(hi)) => format!("{name} between {lo} and {hi}{u}"),
        (Some(lo), None) => format!("{name} >= {lo}{u}"),
        (None, Some(hi)) => format!("{name} <= {hi}{u}"),
        (None, None) => format!("any {name}"),
    }
}

/// How far `v` lies outside `b` (0 inside).
fn distance(b: &Bounds, v: f64) -> f64 {
    if b.min.is_some_and(|m| v < m) {
        b.min.map_or(0.0, |m| m - v)
    } else if b.max.is_some_and(|m| v > m) {
        b.max.map_or(0.0, |m| v - m)
    } else {
        0.0
    }
}

/// The first requirement that cannot be met even ignoring the others.
pub(crate) fn diagnose(p: &Problem<'_>, free: &FreeSlots) -> Option<ScheduleError> {
    for g in &p.groups {
        if let Some(e) = computing(p, g, free) {
            return Some(e);
        }
        let total: u64 = g.cap.iter().sum();
        if total < u64::from(g.n) {
            let scope = match &g.computing {
                Some(t) => format!("on nodes matching template \"{}\"", t.id),
                None => "in the whole topology".to_string(),
            };
            return Some(ScheduleError::Slots {
                group: g.id.clone(),
                needed: g.n,
                offer: format!("only {total} free slots {scope}"),
            });
        }
        if g.options.is_empty() {
            return Some(intra(p, g));
        }
    }
    p.conns.iter().find_map(|c| connection(p, c))
}

fn computing(p: &Problem<'_>, g: &GroupReq, free: &FreeSlots) -> Option<ScheduleError> {
    let t = g.computing.as_ref()?;
    if g.eligible.iter().any(|e| !e.is_empty()) {
        return None;
    }
    // every node with a free slot, with its free count
    let nodes: Vec<(usize, usize, u32)> = p
        .topo
        .clusters
        .iter()
        .enumerate()
        .flat_map(|(c, cl)| (0..cl.nodes.len()).map(move |i| (c, i)))
        .map(|(c, i)| (c, i, free.get(c, i)))
        .filter(|&(_, _, f)| f > 0)
        .collect();
    if nodes.is_empty() {
        return None; // reported as a lack of slots
    }
    let params: [(&str, Option<Bounds>, &str); 3] = [
        ("cpucount", t.cpucount, "free slots"),
        ("cpuspeed", t.cpuspeed, "MHz"),
        ("memory", t.memory, "MiB"),
    ];
    for (name, bounds, unit) in params {
        let Some(b) = bounds else { continue };
        let value = |&(c, i, f): &(usize, usize, u32)| {
            let node = &p.topo.clusters[c].nodes[i];
            match name {
                "cpucount" if b.min.is_some_and(|m| f64::from(f) < m) => f64::from(f),
                "cpucount" => f64::from(node.slots),
                "cpuspeed" => node.cpu_speed_mhz,
                _ => node.memory_mib,
            }
        };
        if nodes.iter().any(|n| distance(&b, value(n)) == 0.0) {
            continue;
        }
        let best = nodes
            .iter()
            .min_by(|x, y| distance(&b, value(x)).total_cmp(&distance(&b, value(y))))?;
        let (c, i, _) = *best;
        let cl = &p.topo.clusters[c];
        let req_unit = if name == "cpucount" { "" } else { unit };
        let shown_unit = if name == "cpucount" && b.min.is_none() {
            "slots"
        } else {
            unit
        };
        return Some(ScheduleError::Computing {
            group: g.id.clone(),
            template: t.id.clone(),
            requirement: describe(name, &b, req_unit),
            offer: format!(
                "the best node offers {} {shown_unit} (node \"{}\" in cluster \"{}\")",
                value(best),
                cl.nodes[i].name,
                cl.name
            ),
        });
    }
    Some(ScheduleError::Computing {
        group: g.id.clone(),
        template: t.id.clone(),
        requirement: "all its host parameters at once".into(),
        offer: "each is met by some node with free slots, but no node meets them together".into(),
    })
}

fn intra(p: &Problem<'_>, g: &GroupReq) -> ScheduleError {
    let n = u64::from(g.n);
    let big: Vec<usize> = (0..p.nc).filter(|&c| g.cap[c] >= n).collect();
    let (split_cap, split) = &g.best_split;
    let names = |cs: &[usize]| {
        let v: Vec<String> = cs
            .iter()
            .map(|&c| format!("\"{}\"", p.topo.clusters[c].name))
            .collect();
        v.join(", ")
    };
    let Some(req) = &g.intra else {
        return ScheduleError::Slots {
            group: g.id.clone(),
            needed: g.n,
            offer: format!(
                "no cluster has that many free slots and the largest set of linked clusters offers {split_cap} ({})",
                names(split)
            ),
        };
    };
    if big.is_empty() {
        return ScheduleError::IntraGroup {
            group: g.id.clone(),
            requirement: describe_req(req),
            offer: format!(
                "no cluster has {n} free slots and the largest set of clusters whose links meet it offers {split_cap} ({})",
                names(split)
            ),
        };
    }
    let internal = |c: usize| p.link(c, c).copied();
    let checks: [(&str, &Bounds, &str, Getter); 2] = [
        ("latency", &req.latency, "ms", |q| q.latency_ms),
        ("bandwidth", &req.bandwidth, "Mbit/s", |q| q.bandwidth_mbps),
    ];
    for (name, b, unit, get) in checks {
        let offers: Vec<(f64, usize)> = big
            .iter()
            .filter_map(|&c| internal(c).map(|q| (get(&q), c)))
            .collect();
        if offers.iter().any(|(v, _)| b.contains(*v)) {
            continue;
        }
        if let Some(&(v, c)) = offers
            .iter()
            .min_by(|x, y| distance(b, x.0).total_cmp(&distance(b, y.0)))
        {
            return ScheduleError::IntraGroup {
                group: g.id.clone(),
                requirement: describe(name, b, unit),
                offer: format!(
                    "the best cluster with {n} free slots offers {v} {unit} (cluster \"{}\")",
                    p.topo.clusters[c].name
                ),
            };
        }
    }
    ScheduleError::IntraGroup {
        group: g.id.clone(),
        requirement: describe_req(req),
        offer: format!("no cluster with {n} free slots meets latency and bandwidth together"),
    }
}

fn describe_req(r: &NetReq) -> String {
    let mut parts = Vec::new();
    if r.latency.min.is_some() || r.latency.max.is_some() {
        parts.push(describe("latency", &r.latency, "ms"));
    }
    if r.bandwidth.min.is_some() || r.bandwidth.max.is_some() {
        parts.push(describe("bandwidth", &r.bandwidth, "Mbit/s"));
    }
    if parts.is_empty() {
        "linked clusters".into()
    } else {
        parts.join(" and ")
    }
}

/// Checks that some pair of candidate placements meets the connection.
fn connection(p: &Problem<'_>, conn: &Conn) -> Option<ScheduleError> {
    let (a, b) = (&p.groups[conn.from], &p.groups[conn.to]);
    // For each pair of options: worst latency, worst bandwidth, all accepted?
    let mut best_lat: Option<(f64, usize, usize)> = None;
    let mut best_bw: Option<(f64, usize, usize)> = None;
    let need = u64::from(a.n) + u64::from(b.n);
    let mut considered = false;
    for oa in &a.options {
        for ob in &b.options {
            let mut union: Vec<usize> = oa.clusters.iter().chain(&ob.clusters).copied().collect();
            union.sort_unstable();
            union.dedup();
            if union.iter().map(|&c| p.cluster_free[c]).sum::<u64>() < need {
                continue; // the two groups cannot both fit there
            }
            considered = true;
            let mut ok = true;
            let (mut lat, mut lat_at) = (0.0f64, (oa.clusters[0], ob.clusters[0]));
            let mut worst_bw: Option<(f64, (usize, usize))> = None;
            for &c in &oa.clusters {
                for &d in &ob.clusters {
                    match p.link(c, d) {
                        Some(q) => {
                            ok &= conn.req.accepts(q);
                            if q.latency_ms > lat {
                                (lat, lat_at) = (q.latency_ms, (c, d));
                            }
                            let dist = distance(&conn.req.bandwidth, q.bandwidth_mbps);
                            if worst_bw.is_none_or(|(w, _)| dist > w) {
                                worst_bw = Some((dist, (c, d)));
                            }
                        }
                        None => ok = false,
                    }
                }
            }
            if ok {
                return None;
            }
            let lat_dist = distance(&conn.req.latency, lat);
            if best_lat.is_none_or(|(d, _, _)| lat_dist < d) {
                best_lat = Some((lat_dist, lat_at.0, lat_at.1));
            }
            if let Some((dist, (c, d))) = worst_bw {
                if best_bw.is_none_or(|(w, _, _)| dist < w) {
                    best_bw = Some((dist, c, d));
                }
            }
        }
    }
    if !considered {
        return None; // a matter of shared capacity: left to the search
    }
    let name = |c: usize| &p.topo.clusters[c].name;
    let error = |requirement: String, offer: String| ScheduleError::Connection {
        from: a.id.clone(),
        to: b.id.clone(),
        requirement,
        offer,
    };
    if let Some((_, c, e)) = best_lat.filter(|b| b.0 > 0.0) {
        let v = p.link(c, e).map_or(f64::INFINITY, |q| q.latency_ms);
        return Some(error(
            describe("latency", &conn.req.latency, "ms"),
            format!(
                "the best placement offers {v} ms (clusters \"{}\" and \"{}\")",
                name(c),
                name(e)
            ),
        ));
    }
    if let Some((_, c, e)) = best_bw.filter(|b| b.0 > 0.0) {
        let v = p.link(c, e).map_or(0.0, |q| q.bandwidth_mbps);
        return Some(error(
            describe("bandwidth", &conn.req.bandwidth, "Mbit/s"),
            format!(
                "the best placement offers {v} Mbit/s (clusters \"{}\" and \"{}\")",
                name(c),
                name(e)
            ),
        ));
    }
    Some(error(
        describe_req(&conn.req),
        "no pair of clusters able to hold both groups has a measured link meeting it".into(),
    ))
}
