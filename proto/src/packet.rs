//! Just enough IPv4 and TCP to recognise a SYN, rewrite its source and fix the
//! checksums (Traversing TCP). Pure functions over bytes.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4};

/// The addresses of a captured SYN.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Syn {
    /// Source address and port.
    pub src: SocketAddr,
    /// Destination address and port.
    pub dst: SocketAddr,
}

const TCP: u8 = 6;
const SYN: u8 = 0x02;
const ACK: u8 = 0x10;

fn header_len(p: &[u8]) -> Option<usize> {
    if p.len() < 20 || p[0] >> 4 != 4 {
        return None;
    }
    let ihl = usize::from(p[0] & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([p[2], p[3]]));
    (ihl >= 20 && total <= p.len() && total >= ihl + 20).then_some(ihl)
}

/// The addresses of `p` if it is an IPv4 TCP segment with SYN set and ACK clear.
pub fn parse_syn(p: &[u8]) -> Option<Syn> {
    let ihl = header_len(p)?;
    if p[9] != TCP {
        return None;
    }
    let t = &p[ihl..];
    let flags = t[13];
    if flags & SYN == 0 || flags & ACK != 0 {
        return None;
    }
    let ip = |o: usize| Ipv4Addr::new(p[o], p[o + 1], p[o + 2], p[o + 3]);
    let port = |o: usize| u16::from_be_bytes([t[o], t[o + 1]]);
    Some(Syn {
        src: SocketAddr::V4(SocketAddrV4::new(ip(12), port(0))),
        dst: SocketAddr::V4(SocketAddrV4::new(ip(16), port(2))),
    })
}

fn fold(mut sum: u32) -> u16 {
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

fn add(sum: &mut u32, bytes: &[u8]) {
    let mut chunks = bytes.chunks_exact(2);
    for c in &mut chunks {
        *sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        *sum += u32::from(*last) << 8;
    }
}

/// Recomputes the IPv4 header checksum and the TCP checksum of `p` in place.
pub fn fix_checksums(p: &mut [u8]) -> Option<()> {
    let ihl = header_len(p)?;
    let total = usize::from(u16::from_be_bytes([p[2], p[3]]));
    p[10] = 0;
    p[11] = 0;
    let mut s = 0;
    add(&mut s, &p[..ihl]);
    p[10..12].copy_from_slice(&fold(s).to_be_bytes());
    let seg_len = total - ihl;
    p[ihl + 16] = 0;
    p[ihl + 17] = 0;
    let mut s = 0;
    add(&mut s, &p[12..20]);
    s += u32::from(TCP);
    s += seg_len as u32;
    add(&mut s, &p[ihl..total]);
    p[ihl + 16..ihl + 18].copy_from_slice(&fold(s).to_be_bytes());
    Some(())
}

/// A copy of the SYN `p` with source address `ip` (as a NAT would have written it).
pub fn rewrite_source(p: &[u8], ip: IpAddr) -> Option<Vec<u8>> {
    let IpAddr::V4(v4) = ip else { return None };
    parse_syn(p)?;
    let mut out = p.to_vec();
    out[12..16].copy_from_slice(&v4.octets());
    fix_checksums(&mut out)?;
    Some(out)
}

/// Whether the IPv4 and TCP checksums of `p` are right.
pub fn checksums_ok(p: &[u8]) -> bool {
    let mut c = p.to_vec();
    fix_checksums(&mut c).is_some() && c == p
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A SYN from 10.1.0.2:40000 to 10.2.0.3:5000 with an MSS option.
    fn sample() -> Vec<u8> {
        let mut p = vec![0u8; 44];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&44u16.to_be_bytes());
        p[8] = 64;
        p[9] = TCP;
        p[12..16].copy_from_slice(&[10, 1, 0, 2]);
        p[16..20].copy_from_slice(&[10, 2, 0, 3]);
        let t = &mut p[20..];
        t[0..2].copy_from_slice(&40000u16.to_be_bytes());
        t[2..4].copy_from_slice(&5000u16.to_be_bytes());
        t[4..8].copy_from_slice(&12345u32.to_be_bytes());
        t[12] = 6 << 4;
        t[13] = SYN;
        t[14..16].copy_from_slice(&64240u16.to_be_bytes());
        t[20..24].copy_from_slice(&[2, 4, 5, 180]);
        fix_checksums(&mut p).unwrap();
        p
    }

    #[test]
    fn recognises_syns_only() {
        let p = sample();
        let s = parse_syn(&p).unwrap();
        assert_eq!(s.src, "10.1.0.2:40000".parse().unwrap());
        assert_eq!(s.dst, "10.2.0.3:5000".parse().unwrap());
        let mut synack = p.clone();
        synack[33] |= ACK;
        assert!(parse_syn(&synack).is_none());
        assert!(parse_syn(&p[..30]).is_none());
        let mut udp = p.clone();
        udp[9] = 17;
        assert!(parse_syn(&udp).is_none());
    }

    #[test]
    fn checksums_follow_a_known_value_and_a_rewrite() {
        let p = sample();
        assert!(checksums_ok(&p));
        let mut bad = p.clone();
        bad[24] ^= 1; // sequence number changed, checksum not
        assert!(!checksums_ok(&bad));
        let r = rewrite_source(&p, "192.0.2.7".parse().unwrap()).unwrap();
        assert!(checksums_ok(&r));
        assert_eq!(
            parse_syn(&r).unwrap().src,
            "192.0.2.7:40000".parse().unwrap()
        );
        // The IPv4 header checksum of a well-known header (RFC 1071 style check):
        // summing the header including its checksum gives all ones.
        let mut s = 0;
        add(&mut s, &r[..20]);
        assert_eq!(fold(s), 0);
    }
}
