//! The delay line: WAN delay without netem.
//!
//! Runs in the core namespace (`qcg-lab delay-line`, started by `up`). The core routes
//! every packet that enters from one site and is bound for another into the TUN device
//! [`TUN`](super::plan::TUN). The delay line reads it, holds it for the one-way delay of
//! that pair of sites, and writes it back into the same TUN, where it arrives as a new
//! packet and the main routing table sends it on to its site. One TUN is enough: the
//! policy rule matches only packets that come in from a site's veth, never what comes
//! back out of the TUN.
//!
//! Packets between sites without a WAN link are dropped (a lab says which sites are
//! linked). Packets of one pair keep their order, since they share one delay.
//!
//! For tests only, the line can play a man in the middle ([`Tamper`]): with
//! `QCG_LAB_TAMPER_AFTER=N` in the environment of `qcg-lab up`, it flips one byte of
//! the first TCP stream between sites to carry more than N bytes, once.

use super::topo::{site_of, Topology};
use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};
use std::net::Ipv4Addr;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Most packets held at once; more are dropped (a full queue, as on a real router).
pub const MAX_HELD: usize = 100_000;

/// The one-way delay of each ordered pair of sites.
#[derive(Clone, Debug, Default)]
pub struct DelayTable {
    delays: HashMap<(u8, u8), Duration>,
}

/// What to do with a packet.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Hold it this long, then send it on.
    Hold(Duration),
    /// Drop it, for this reason.
    Drop(&'static str),
}

impl DelayTable {
    /// The table of a topology's WAN links, both ways.
    pub fn new(t: &Topology) -> Self {
        let mut delays = HashMap::new();
        for w in &t.wan {
            if let (Some(a), Some(b)) = (t.site_index(&w.a), t.site_index(&w.b)) {
                let d = Duration::from_secs_f64(w.delay_ms / 1000.0);
                delays.insert((a, b), d);
                delays.insert((b, a), d);
            }
        }
        DelayTable { delays }
    }

    /// The verdict on a frame as read from the TUN: a `virtio_net_hdr`, then the IP
    /// packet (a super-packet of several segments, with offload).
    pub fn verdict_framed(&self, frame: &[u8]) -> Verdict {
        match frame.get(VNET_HDR..) {
            Some(pkt) => self.verdict(pkt),
            None => Verdict::Drop("shorter than its virtio header"),
        }
    }

    /// The verdict on an IP packet.
    pub fn verdict(&self, pkt: &[u8]) -> Verdict {
        if pkt.len() < 20 || pkt[0] >> 4 != 4 {
            return Verdict::Drop("not IPv4");
        }
        let src = Ipv4Addr::new(pkt[12], pkt[13], pkt[14], pkt[15]);
        let dst = Ipv4Addr::new(pkt[16], pkt[17], pkt[18], pkt[19]);
        match (site_of(src), site_of(dst)) {
            (Some(a), Some(b)) => self
                .delays
                .get(&(a, b))
                .map_or(Verdict::Drop("no WAN link between these sites"), |d| {
                    Verdict::Hold(*d)
                }),
            _ => Verdict::Drop("not between two sites"),
        }
    }
}

struct Held {
    due: Instant,
    seq: u64,
    pkt: Vec<u8>,
}

impl PartialEq for Held {
    fn eq(&self, o: &Self) -> bool {
        (self.due, self.seq) == (o.due, o.seq)
    }
}
impl Eq for Held {}
impl PartialOrd for Held {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Held {
    // Reversed: the heap's top is the packet due first (ties in arrival order).
    fn cmp(&self, o: &Self) -> Ordering {
        (o.due, o.seq).cmp(&(self.due, self.seq))
    }
}

/// Packets held until due: a priority queue by due time, arrival order within ties.
#[derive(Default)]
pub struct Line {
    heap: BinaryHeap<Held>,
    seq: u64,
}

impl Line {
    /// Holds `pkt` until `due`; false if the line is full and the packet is dropped.
    pub fn push(&mut self, due: Instant, pkt: Vec<u8>) -> bool {
        if self.heap.len() >= MAX_HELD {
            return false;
        }
        self.seq += 1;
        self.heap.push(Held {
            due,
            seq: self.seq,
            pkt,
        });
        true
    }

    /// When the next packet is due.
    pub fn next_due(&self) -> Option<Instant> {
        self.heap.peek().map(|h| h.due)
    }

    /// Takes every packet due by `now`, in order; returns when the first was due.
    pub fn take_due(&mut self, now: Instant, out: &mut Vec<Vec<u8>>) -> Option<Instant> {
        let mut first = None;
        while self.heap.peek().is_some_and(|h| h.due <= now) {
            if let Some(h) = self.heap.pop() {
                first.get_or_insert(h.due);
                out.push(h.pkt);
            }
        }
        first
    }
}

/// The variable that arms the tamper hook: `QCG_LAB_TAMPER_AFTER=N`.
pub const TAMPER_VAR: &str = "QCG_LAB_TAMPER_AFTER";

/// A test-only man in the middle: flips one byte (the one after the first `after`
/// payload bytes) of the first TCP stream (one direction of a connection) between
/// sites to carry more than `after` bytes, and fixes the TCP checksum, so that the
/// receiver's TCP takes the altered byte as the sender's. Once per lab.
#[derive(Debug, Default)]
pub struct Tamper {
    after: u64,
    /// Payload bytes seen per stream (source, destination, ports).
    seen: HashMap<([u8; 4], [u8; 4], u16, u16), u64>,
    done: bool,
}

impl Tamper {
    /// A hook that flips the byte after the first `after` of a stream.
    pub fn new(after: u64) -> Tamper {
        Tamper {
            after,
            ..Tamper::default()
        }
    }

    /// The hook `QCG_LAB_TAMPER_AFTER` asks for, if any.
    pub fn from_env() -> Result<Option<Tamper>, String> {
        match std::env::var(TAMPER_VAR) {
            Err(_) => Ok(None),
            Ok(v) => v
                .parse()
                .map(|n| Some(Tamper::new(n)))
                .map_err(|_| format!("{TAMPER_VAR}={v}: expected a byte count")),
        }
    }

    /// Looks at a frame read from the TUN (virtio header, IPv4 packet) and flips its
    /// byte if it is the one; returns what it did, for the log.
    pub fn apply(&mut self, frame: &mut [u8]) -> Option<String> {
        if self.done || frame.len() < VNET_HDR + 40 {
            return None;
        }
        // virtio_net_hdr flags: the checksum is left for later over the whole segment.
        let csum_later = frame[0] & 1 != 0;
        let pkt = &mut frame[VNET_HDR..];
        let ihl = usize::from(pkt[0] & 0x0f) * 4;
        if pkt[0] >> 4 != 4 || pkt[9] != 6 || pkt.len() < ihl + 20 {
            return None;
        }
        let total = usize::from(u16::from_be_bytes([pkt[2], pkt[3]])).min(pkt.len());
        let thl = usize::from(pkt[ihl + 12] >> 4) * 4;
        let start = ihl + thl;
        if total <= start {
            return None;
        }
        let key = (
            [pkt[12], pkt[13], pkt[14], pkt[15]],
            [pkt[16], pkt[17], pkt[18], pkt[19]],
            u16::from_be_bytes([pkt[ihl], pkt[ihl + 1]]),
            u16::from_be_bytes([pkt[ihl + 2], pkt[ihl + 3]]),
        );
        let len = (total - start) as u64;
        let before = self.seen.entry(key).or_insert(0);
        let (from, to) = (*before, *before + len);
        *before = to;
        if !(from..to).contains(&self.after) {
            return None;
        }
        let at = start + (self.after - from) as usize;
        let old = pkt[at];
        pkt[at] ^= 0x01;
        if !csum_later {
            // RFC 1624: HC' = ~(~HC + ~m + m') over the 16-bit word holding the byte.
            let w = ihl + ((at - ihl) & !1);
            let word = |p: &[u8]| u32::from(u16::from_be_bytes([p[w], p[w + 1]]));
            let mut old_word = [pkt[w], pkt[w + 1]];
            old_word[at - w] = old;
            let m = u32::from(u16::from_be_bytes(old_word));
            let m2 = word(pkt);
            let hc = u32::from(u16::from_be_bytes([pkt[ihl + 16], pkt[ihl + 17]]));
            let mut sum = (!hc & 0xffff) + (!m & 0xffff) + m2;
            while sum > 0xffff {
                sum = (sum & 0xffff) + (sum >> 16);
            }
            pkt[ihl + 16..ihl + 18].copy_from_slice(&(!(sum as u16)).to_be_bytes());
        }
        self.done = true;
        let ip = |a: [u8; 4]| Ipv4Addr::from(a);
        Some(format!(
            "tampered: flipped byte {} of the TCP stream {}:{} -> {}:{}",
            self.after,
            ip(key.0),
            key.2,
            ip(key.1),
            key.3
        ))
    }
}

/// Most the writer wakes ahead of a packet's due time.
pub const MAX_EARLY: Duration = Duration::from_micros(500);

/// How early the writer should wake: a timed wait overshoots by the timer's slack and
/// the scheduler's delay (a tenth of a millisecond or more on a busy machine), so the
/// writer learns its mean overshoot and wakes that much ahead. The mean delay of a
/// packet is then the configured one rather than that plus the overshoot.
#[derive(Debug, Default)]
pub struct Early {
    early: Duration,
}

impl Early {
    /// How far ahead of a due time to wake now.
    pub fn get(&self) -> Duration {
        self.early
    }

    /// Learns from a timed wait meant to end at `target` that ended at `now`.
    pub fn observe(&mut self, target: Instant, now: Instant) {
        let over = now.saturating_duration_since(target).min(MAX_EARLY * 2);
        // Exponential mean over about 16 wake-ups.
        self.early = ((self.early * 15 + over) / 16).min(MAX_EARLY);
    }
}

/// Creates the TUN and runs the delay line for topology `t` until killed. Prints
/// `ready` on stdout once the TUN exists.
pub fn run(t: &Topology) -> std::io::Result<()> {
    let table = DelayTable::new(t);
    let tamper = Tamper::from_env().map_err(std::io::Error::other)?;
    if let Some(h) = &tamper {
        eprintln!(
            "delay line: TEST HOOK {TAMPER_VAR}: one byte of the first TCP stream past {} bytes will be flipped",
            h.after
        );
    }
    let mut cfg = tun::Configuration::default();
    cfg.tun_name(super::plan::TUN)
        .layer(tun::Layer::L3)
        .mtu(1500)
        .platform_config(|p| {
            p.vnet_hdr(true);
        })
        .up();
    let dev = Arc::new(tun::create(&cfg).map_err(std::io::Error::other)?);
    offload(&dev)?;
    let shared = Arc::new((Mutex::new(Line::default()), Condvar::new()));

    let reader = {
        let (dev, shared) = (dev.clone(), shared.clone());
        std::thread::Builder::new()
            .name("delay-read".into())
            .spawn(move || read_loop(&dev, &table, &shared, tamper))?
    };
    println!("ready");
    use std::io::Write;
    std::io::stdout().flush()?;
    eprintln!("delay line up: {} WAN links", t.wan.len());

    let (lock, cv) = &*shared;
    let mut batch = Vec::new();
    let mut write_errors = 0u64;
    let (mut sent, mut wakes) = (0u64, 0u32);
    let (mut late_sum, mut late_max) = (Duration::ZERO, Duration::ZERO);
    let mut report = Instant::now() + Duration::from_secs(10);
    let mut early = Early::default();
    loop {
        {
            let mut line = lock.lock().map_err(|_| std::io::Error::other("poisoned"))?;
            let mut target = None;
            loop {
                let now = Instant::now();
                if let Some(first) = line.take_due(now + early.get(), &mut batch) {
                    let late = now.saturating_duration_since(first);
                    late_sum += late;
                    late_max = late_max.max(late);
                    if let Some(t) = target {
                        early.observe(t, now);
                    }
                    break;
                }
                let waited = match line.next_due() {
                    None => {
                        target = None;
                        cv.wait(line).ok()
                    }
                    Some(due) => {
                        let t = due.checked_sub(early.get()).unwrap_or(due);
                        target = Some(t);
                        cv.wait_timeout(line, t.saturating_duration_since(now))
                            .ok()
                            .map(|(g, _)| g)
                    }
                };
                line = waited.ok_or_else(|| std::io::Error::other("poisoned"))?;
            }
        }
        sent += batch.len() as u64;
        wakes += 1;
        if Instant::now() >= report {
            // How late packets leave, for whoever reads the log.
            eprintln!(
                "delay line: {sent} packets sent; lateness mean {:?} max {:?} over {wakes} wake-ups; waking {:?} early",
                late_sum / wakes.max(1),
                late_max,
                early.get()
            );
            (wakes, late_sum, late_max) = (0, Duration::ZERO, Duration::ZERO);
            report = Instant::now() + Duration::from_secs(10);
        }
        for pkt in batch.drain(..) {
            if let Err(e) = dev.send(&pkt) {
                write_errors += 1;
                if write_errors.is_power_of_two() {
                    eprintln!("delay line: write error {write_errors}: {e}");
                }
            }
        }
        if reader.is_finished() {
            return Err(std::io::Error::other("the TUN reader stopped"));
        }
    }
}

/// Bytes of the `virtio_net_hdr` before every packet read from or written to the TUN.
const VNET_HDR: usize = 10;

/// Lets the kernel hand the line whole TCP super-packets (up to 64 KiB, cut into
/// segments of the path's MSS only after the line) with their checksums still to be
/// done, as a virtual NIC with segmentation offload does. At 1,500 bytes a packet the
/// kernel's forwarding and the receivers' TCP, run in the line's thread as each packet
/// is written back, held the whole lab's WAN to about one core's worth of packets
/// (~35 MB/s here); the bytes, delays and shaping are unchanged.
fn offload(dev: &tun::Device) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    const TUNSETOFFLOAD: libc::c_ulong = 0x4004_54d0;
    const TUN_F_CSUM: libc::c_ulong = 0x01;
    const TUN_F_TSO4: libc::c_ulong = 0x02;
    const TUN_F_TSO6: libc::c_ulong = 0x04;
    // SAFETY: TUNSETOFFLOAD takes its flags by value on a TUN descriptor we own.
    #[allow(unsafe_code)]
    let r = unsafe {
        libc::ioctl(
            dev.as_raw_fd(),
            TUNSETOFFLOAD as _,
            TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6,
        )
    };
    if r < 0 {
        return Err(std::io::Error::other(format!(
            "cannot turn on the TUN's segmentation offload: {}",
            std::io::Error::last_os_error()
        )));
    }
    Ok(())
}

fn read_loop(
    dev: &tun::Device,
    table: &DelayTable,
    shared: &(Mutex<Line>, Condvar),
    mut tamper: Option<Tamper>,
) {
    let (lock, cv) = shared;
    // A header and the largest super-packet.
    let mut buf = vec![0u8; VNET_HDR + 65536];
    let mut dropped: HashMap<&'static str, u64> = HashMap::new();
    loop {
        let n = match dev.recv(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                eprintln!("delay line: reading the TUN: {e}");
                return;
            }
        };
        let now = Instant::now();
        // Kept with its header, which goes back out with it.
        let reason = match table.verdict_framed(&buf[..n]) {
            Verdict::Hold(d) => {
                if let Some(what) = tamper.as_mut().and_then(|h| h.apply(&mut buf[..n])) {
                    eprintln!("delay line: {what}");
                }
                let pkt = &buf[..n];
                let Ok(mut line) = lock.lock() else { return };
                let due = now + d;
                // The writer sleeps until the earliest packet is due: wake it only
                // when this one is due sooner. Waking it for every packet cost two
                // context switches a packet and held the line to ~32 MB/s in all.
                let sooner = line.next_due().is_none_or(|first| due < first);
                if line.push(due, pkt.to_vec()) {
                    drop(line);
                    if sooner {
                        cv.notify_one();
                    }
                    continue;
                }
                "queue full"
            }
            Verdict::Drop(why) => why,
        };
        let c = dropped.entry(reason).or_insert(0);
        *c += 1;
        if c.is_power_of_two() {
            eprintln!("delay line: dropped {c} packets: {reason}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn packet(src: [u8; 4], dst: [u8; 4]) -> Vec<u8> {
        let mut p = vec![0u8; 28];
        p[0] = 0x45;
        p[12..16].copy_from_slice(&src);
        p[16..20].copy_from_slice(&dst);
        p
    }

    #[test]
    fn delays_by_pair_of_sites() {
        let t = super::super::topo::parse(
            Path::new("t.toml"),
            r#"
[[site]]
name = "a"
nodes = 1
nat = "none"
firewall = "open"
[[site]]
name = "b"
nodes = 1
nat = "port-preserving"
firewall = "open"
[[site]]
name = "c"
nodes = 1
nat = "none"
firewall = "open"
[[wan]]
sites = ["b", "a"]
delay_ms = 7.5
bandwidth_mbit = 10
"#,
        )
        .unwrap();
        let d = DelayTable::new(&t);
        let ms = Duration::from_micros(7500);
        assert_eq!(
            d.verdict(&packet([10, 1, 0, 2], [198, 18, 2, 2])),
            Verdict::Hold(ms)
        );
        assert_eq!(
            d.verdict(&packet([198, 18, 2, 2], [10, 1, 0, 2])),
            Verdict::Hold(ms)
        );
        assert!(matches!(
            d.verdict(&packet([10, 1, 0, 2], [10, 3, 0, 2])),
            Verdict::Drop(_)
        ));
        assert!(matches!(
            d.verdict(&packet([198, 18, 0, 10], [10, 1, 0, 2])),
            Verdict::Drop(_)
        ));
        assert!(matches!(d.verdict(&[0x60; 40]), Verdict::Drop(_)));
        // As read from the TUN: the virtio header comes first and is skipped.
        let mut framed = vec![0u8; VNET_HDR];
        framed.extend(packet([10, 1, 0, 2], [198, 18, 2, 2]));
        assert_eq!(d.verdict_framed(&framed), Verdict::Hold(ms));
        assert!(matches!(
            d.verdict_framed(&packet([10, 1, 0, 2], [198, 18, 2, 2])),
            Verdict::Drop(_)
        ));
        assert!(matches!(d.verdict_framed(&[0; 4]), Verdict::Drop(_)));
    }

    /// The TCP checksum of an IPv4 packet (pseudo-header included), as a receiver
    /// checks it: 0 when it holds.
    fn tcp_check(pkt: &[u8]) -> u16 {
        let ihl = usize::from(pkt[0] & 0x0f) * 4;
        let total = usize::from(u16::from_be_bytes([pkt[2], pkt[3]]));
        let seg = &pkt[ihl..total];
        let mut sum: u32 = 0;
        let mut add = |b: &[u8]| {
            for c in b.chunks(2) {
                sum += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
            }
        };
        add(&pkt[12..20]);
        add(&[0, 6]);
        add(&(seg.len() as u16).to_be_bytes());
        add(seg);
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        !(sum as u16)
    }

    /// A frame as read from the TUN: a virtio header, then a TCP segment of `payload`
    /// from 10.1.0.2:4000 to 10.2.0.2:5000 with its checksum done.
    fn tcp_frame(payload: &[u8]) -> Vec<u8> {
        let mut p = vec![0u8; 40];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&((40 + payload.len()) as u16).to_be_bytes());
        p[9] = 6;
        p[12..16].copy_from_slice(&[10, 1, 0, 2]);
        p[16..20].copy_from_slice(&[10, 2, 0, 2]);
        p[20..22].copy_from_slice(&4000u16.to_be_bytes());
        p[22..24].copy_from_slice(&5000u16.to_be_bytes());
        p[32] = 5 << 4;
        p.extend_from_slice(payload);
        let c = tcp_check(&p);
        p[36..38].copy_from_slice(&c.to_be_bytes());
        assert_eq!(tcp_check(&p), 0);
        let mut f = vec![0u8; VNET_HDR];
        f.extend(p);
        f
    }

    #[test]
    fn tamper_flips_the_byte_after_n_once_and_keeps_the_checksum_good() {
        let mut h = Tamper::new(1003);
        let payload: Vec<u8> = (0..700u32).map(|i| (i * 13) as u8).collect();
        let mut first = tcp_frame(&payload);
        assert_eq!(h.apply(&mut first), None);
        assert_eq!(first, tcp_frame(&payload));
        // Bytes 700..1400 of the stream: byte 1003 is payload byte 303 (odd), then,
        // in another frame, 302 (even): both keep the checksum good.
        for (after, at) in [(1003u64, 303usize), (1002, 302)] {
            let mut h = Tamper::new(after);
            let mut f = tcp_frame(&payload);
            assert_eq!(h.apply(&mut f), None);
            let mut f = tcp_frame(&payload);
            let what = h.apply(&mut f).expect("flipped");
            assert!(what.contains("10.1.0.2:4000 -> 10.2.0.2:5000"), "{what}");
            let ip = &f[VNET_HDR..];
            assert_eq!(tcp_check(ip), 0, "the checksum must still hold");
            let changed: Vec<usize> = (0..payload.len())
                .filter(|&i| ip[40 + i] != payload[i])
                .collect();
            assert_eq!(changed, vec![at]);
            // Once only.
            let mut g = tcp_frame(&payload);
            assert_eq!(h.apply(&mut g), None);
        }
        // A frame whose checksum the kernel does later is flipped and left alone.
        let mut h = Tamper::new(10);
        let mut f = tcp_frame(&payload);
        f[0] = 1;
        let sum = [f[VNET_HDR + 36], f[VNET_HDR + 37]];
        assert!(h.apply(&mut f).is_some());
        assert_eq!([f[VNET_HDR + 36], f[VNET_HDR + 37]], sum);
        assert_ne!(f[VNET_HDR + 50], payload[10]);
        // Other streams and non-TCP packets count apart or not at all.
        let mut h = Tamper::new(0);
        let mut udp = tcp_frame(&payload);
        udp[VNET_HDR + 9] = 17;
        assert_eq!(h.apply(&mut udp), None);
    }

    #[test]
    fn line_releases_in_due_order_and_keeps_ties_in_order() {
        let mut l = Line::default();
        let t0 = Instant::now();
        l.push(t0 + Duration::from_millis(5), vec![1]);
        l.push(t0 + Duration::from_millis(1), vec![2]);
        l.push(t0 + Duration::from_millis(5), vec![3]);
        let mut out = Vec::new();
        assert_eq!(l.take_due(t0, &mut out), None);
        assert!(out.is_empty());
        assert_eq!(l.next_due(), Some(t0 + Duration::from_millis(1)));
        let first = l.take_due(t0 + Duration::from_millis(5), &mut out);
        assert_eq!(first, Some(t0 + Duration::from_millis(1)));
        assert_eq!(out, vec![vec![2], vec![1], vec![3]]);
    }

    #[test]
    fn early_learns_the_mean_overshoot_and_is_bounded() {
        let mut e = Early::default();
        let t0 = Instant::now();
        for _ in 0..200 {
            e.observe(t0, t0 + Duration::from_micros(150));
        }
        let got = e.get().as_micros();
        assert!((145..=150).contains(&got), "{got}");
        for _ in 0..200 {
            e.observe(t0, t0 + Duration::from_secs(1));
        }
        assert_eq!(e.get(), MAX_EARLY);
    }
}
