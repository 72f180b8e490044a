//! Which links the grid encrypts: the `encrypt` policy of the broker's config, with
//! its overrides per pair of clusters. The plan the broker answers a lookup with
//! carries the decision ([`qcg_proto::Plan::encrypt`]); both ends of a link follow
//! it (the initiator asks for it in the job handshake, see libqcg's `seal`).

use qcg_proto::Encrypt;
use serde::Deserialize;

/// The grid's policy: a mode, and other modes for some pairs of clusters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EncryptPolicy {
    /// The mode for every pair not listed.
    pub mode: Encrypt,
    /// Pairs of clusters (in either order) with their own mode.
    pub pairs: Vec<PairMode>,
}

/// A pair of clusters with a mode of its own (`[[encrypt_pair]]` in the config).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PairMode {
    /// The two clusters (the same name twice: links inside that cluster).
    pub clusters: [String; 2],
    /// Their mode: `all` or `none` (`wan` encrypts between them when they differ).
    pub encrypt: Encrypt,
}

impl EncryptPolicy {
    /// Whether a link between a process of cluster `a` and one of cluster `b` is
    /// encrypted.
    pub fn between(&self, a: &str, b: &str) -> bool {
        let pair = self.pairs.iter().find(|p| {
            let [x, y] = &p.clusters;
            (x == a && y == b) || (x == b && y == a)
        });
        pair.map_or(self.mode, |p| p.encrypt).between(a, b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wan_by_default_and_pairs_override_in_either_order() {
        let mut p = EncryptPolicy::default();
        assert!(p.between("orsay", "rennes"));
        assert!(!p.between("orsay", "orsay"));
        p.pairs.push(PairMode {
            clusters: ["rennes".into(), "orsay".into()],
            encrypt: Encrypt::None,
        });
        p.pairs.push(PairMode {
            clusters: ["lille".into(), "lille".into()],
            encrypt: Encrypt::All,
        });
        assert!(!p.between("orsay", "rennes"));
        assert!(p.between("orsay", "lille"));
        assert!(p.between("lille", "lille"));
        let none = EncryptPolicy {
            mode: Encrypt::None,
            pairs: Vec::new(),
        };
        assert!(!none.between("orsay", "rennes"));
    }
}
