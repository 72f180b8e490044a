//! What a node offers, read from the machine: the defaults a helper reports to its
//! frontal (whose config may override them).

use qcg_proto::NodeSpec;

/// The node `name` as this machine describes it: one slot per available core, the
/// memory of `/proc/meminfo` and the clock of `/proc/cpuinfo` (1000 MHz and 1024 MiB
/// when they cannot be read).
pub fn detect(name: &str) -> NodeSpec {
    let slots = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    NodeSpec {
        name: name.to_string(),
        slots,
        cpu_speed_mhz: cpu_mhz(&cpuinfo).unwrap_or(1000.0),
        memory_mib: mem_mib(&meminfo).unwrap_or(1024.0),
        submitters: None,
    }
}

fn field<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == key).then_some(v.trim())
    })
}

fn mem_mib(meminfo: &str) -> Option<f64> {
    let kb: f64 = field(meminfo, "MemTotal")?
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some((kb / 1024.0).floor())
}

fn cpu_mhz(cpuinfo: &str) -> Option<f64> {
    field(cpuinfo, "cpu MHz")?
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite() && *v > 0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_are_read_from_proc_text() {
        assert_eq!(
            mem_mib("MemTotal:        8048576 kB\nMemFree: 1 kB\n"),
            Some(7859.0)
        );
        assert_eq!(
            cpu_mhz("processor\t: 0\ncpu MHz\t\t: 2400.123\n"),
            Some(2400.123)
        );
        assert_eq!(cpu_mhz("nothing"), None);
        let n = detect("n1");
        assert!(n.slots >= 1 && n.memory_mib > 0.0, "{n:?}");
    }
}
