//! Alltoall schedules: the flat pairwise exchange, and a hierarchical one that sends one
//! message per flit from each site to each other site.
//!
//! Hierarchical alltoall (sites are the level-0 groups, each with its smallest rank as
//! representative; every message is cut into the same flits as the blocks):
//! 1. every member packs the blocks it has for other sites (destinations in rank order)
//!    into one message to its representative (`PHASE_UP`);
//! 2. each representative sends to every other representative one message holding the
//!    blocks from all its members (rank order) to all the other site's members (rank
//!    order) (`PHASE_EXCHANGE`);
//! 3. each representative sends each member one message with the blocks from every
//!    other site (sources in rank order) (`PHASE_DOWN`).
//!
//! Ranks of one site exchange their blocks directly, pairwise (`PHASE_PAIRWISE`). A
//! member sends all its flits of step 1, then exchanges inside the site, then receives
//! step 3; a representative relays flit i of step 1 to step 2 and flit i of step 2 to
//! step 3 before it receives flit i+1.

use std::ops::Range;

use crate::schedule::{tag, Builder, PHASE_DOWN, PHASE_EXCHANGE, PHASE_PAIRWISE, PHASE_UP};
use crate::step::Buf;
use crate::topology::Topology;

/// The level-0 groups in order of their smallest rank, each sorted.
pub(crate) struct Sites {
    members: Vec<Vec<usize>>,
    /// Site index and position in it, per rank.
    place: Vec<(usize, usize)>,
}

impl Sites {
    pub(crate) fn new(topo: &Topology) -> Self {
        let p = topo.size();
        let mut members: Vec<Vec<usize>> = Vec::new();
        let mut index = std::collections::HashMap::new();
        let mut place = vec![(0, 0); p];
        for (r, pl) in place.iter_mut().enumerate() {
            let key = if topo.depth() == 0 {
                0
            } else {
                topo.group(0, r)
            };
            let s = *index.entry(key).or_insert_with(|| {
                members.push(Vec::new());
                members.len() - 1
            });
            *pl = (s, members[s].len());
            members[s].push(r);
        }
        Sites { members, place }
    }

    /// Position of rank `j` (not of site `s`) among the ranks outside site `s`.
    fn outside_pos(&self, s: usize, j: usize) -> usize {
        j - self.members[s].partition_point(|&m| m < j)
    }

    /// Ranks outside site `s`, in rank order.
    fn outside(&self, s: usize) -> Vec<usize> {
        let p = self.place.len();
        (0..p).filter(|&j| self.place[j].0 != s).collect()
    }
}

fn max_len(pieces: &[Range<usize>]) -> usize {
    pieces.iter().map(|p| p.len()).max().unwrap_or(0)
}

/// Pairwise exchange among `members` (sorted, containing the rank): in round s, send to
/// the member s places after and receive from the one s places before.
fn pairwise(b: &mut Builder, members: &[usize], n: usize, pieces: &[Range<usize>]) {
    let r = b.rs.rank;
    let m = members.len();
    let me = members.iter().position(|&x| x == r).unwrap_or(0);
    b.copy(
        Buf::Output,
        r * n..(r + 1) * n,
        Buf::Input,
        r * n..(r + 1) * n,
    );
    for s in 1..m {
        let (to, from) = (members[(me + s) % m], members[(me + m - s) % m]);
        for (i, piece) in pieces.iter().enumerate() {
            let range = to * n + piece.start..to * n + piece.end;
            b.send(to, tag(PHASE_PAIRWISE, i), Buf::Input, range);
        }
        for (i, piece) in pieces.iter().enumerate() {
            let range = from * n + piece.start..from * n + piece.end;
            b.recv(from, tag(PHASE_PAIRWISE, i), Buf::Output, range);
        }
    }
}

/// The flat pairwise exchange over all `p` ranks.
pub(crate) fn flat(b: &mut Builder, p: usize, n: usize, pieces: &[Range<usize>]) {
    let all: Vec<usize> = (0..p).collect();
    pairwise(b, &all, n, pieces);
}

/// The hierarchical alltoall (see the module documentation).
pub(crate) fn hierarchical(b: &mut Builder, sites: &Sites, n: usize, pieces: &[Range<usize>]) {
    let r = b.rs.rank;
    let (g, _) = sites.place[r];
    let mine = &sites.members[g];
    let out = sites.outside(g);
    if out.is_empty() {
        return pairwise(b, mine, n, pieces);
    }
    let (mp, rep) = (max_len(pieces), mine[0]);
    if r != rep {
        // 1. Pack and send every flit of my blocks for other sites.
        let pack = b.temp(out.len() * mp);
        for (i, piece) in pieces.iter().enumerate() {
            let plen = piece.len();
            for (d, &j) in out.iter().enumerate() {
                let src = j * n + piece.start..j * n + piece.end;
                b.copy(pack, d * plen..(d + 1) * plen, Buf::Input, src);
            }
            b.send(rep, tag(PHASE_UP, i), pack, 0..out.len() * plen);
        }
        pairwise(b, mine, n, pieces);
        // 3. Receive and unpack the blocks from other sites.
        let unpack = b.temp(out.len() * mp);
        for (i, piece) in pieces.iter().enumerate() {
            let plen = piece.len();
            b.recv(rep, tag(PHASE_DOWN, i), unpack, 0..out.len() * plen);
            for (d, &src) in out.iter().enumerate() {
                let dst = src * n + piece.start..src * n + piece.end;
                b.copy(Buf::Output, dst, unpack, d * plen..(d + 1) * plen);
            }
        }
        return;
    }
    let others: Vec<usize> = (0..sites.members.len()).filter(|&h| h != g).collect();
    // Representative. gathered: [member][outside destination] pieces of one flit.
    let gathered = b.temp(mine.len() * out.len() * mp);
    let most = others
        .iter()
        .map(|&h| sites.members[h].len())
        .max()
        .unwrap_or(0);
    let exchange = b.temp(mine.len() * most * mp);
    for (i, piece) in pieces.iter().enumerate() {
        let plen = piece.len();
        let row = out.len() * plen;
        for (d, &j) in out.iter().enumerate() {
            let src = j * n + piece.start..j * n + piece.end;
            b.copy(gathered, d * plen..(d + 1) * plen, Buf::Input, src);
        }
        for (mi, &m) in mine.iter().enumerate().skip(1) {
            b.recv(m, tag(PHASE_UP, i), gathered, mi * row..(mi + 1) * row);
        }
        // 2. To each other site: [my member][its member] pieces.
        for &h in &others {
            let theirs = &sites.members[h];
            for mi in 0..mine.len() {
                for (ji, &j) in theirs.iter().enumerate() {
                    let at = (mi * theirs.len() + ji) * plen;
                    let from = mi * row + sites.outside_pos(g, j) * plen;
                    b.copy(exchange, at..at + plen, gathered, from..from + plen);
                }
            }
            let len = mine.len() * theirs.len() * plen;
            b.send(
                sites.members[h][0],
                tag(PHASE_EXCHANGE, i),
                exchange,
                0..len,
            );
        }
    }
    pairwise(b, mine, n, pieces);
    // received: for each other site h in order, [its member][my member] pieces.
    let received = b.temp(out.len() * mine.len() * mp);
    let pack = b.temp(out.len() * mp);
    for (i, piece) in pieces.iter().enumerate() {
        let plen = piece.len();
        let mut offset = vec![0; sites.members.len()];
        let mut at = 0;
        for &h in &others {
            let len = sites.members[h].len() * mine.len() * plen;
            b.recv(
                sites.members[h][0],
                tag(PHASE_EXCHANGE, i),
                received,
                at..at + len,
            );
            offset[h] = at;
            at += len;
        }
        // 3. To each member (me last, straight into my output): blocks from outside.
        let piece_of = |src: usize, ji: usize| {
            let (h, hi) = sites.place[src];
            let s = offset[h] + (hi * mine.len() + ji) * plen;
            s..s + plen
        };
        for (ji, &j) in mine.iter().enumerate().skip(1) {
            for (d, &src) in out.iter().enumerate() {
                b.copy(pack, d * plen..(d + 1) * plen, received, piece_of(src, ji));
            }
            b.send(j, tag(PHASE_DOWN, i), pack, 0..out.len() * plen);
        }
        for &src in &out {
            let dst = src * n + piece.start..src * n + piece.end;
            b.copy(Buf::Output, dst, received, piece_of(src, 0));
        }
    }
}
