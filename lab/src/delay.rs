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
            .spawn(move || read_loop(&dev, &table, &shared))?
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

fn read_loop(dev: &tun::Device, table: &DelayTable, shared: &(Mutex<Line>, Condvar)) {
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
        let pkt = &buf[..n];
        let reason = match table.verdict_framed(pkt) {
            Verdict::Hold(d) => {
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
