//! The qcg services running inside a lab: the broker (public host `broker`), relay
//! proxies (public hosts whose name starts with `proxy`), a frontal on every site's
//! gateway and a helper on every node. What each frontal announces to the broker can
//! differ from the lab's real firewall (to make the broker plan a given technique,
//! e.g. relaying between open sites for a benchmark).

use crate::topo::{self, Nat, Site, Topology};
use qcg_proto::tls::{Ca, Role};
use qcg_proto::Policy;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// Port of the broker (QUIC) on its host.
pub const BROKER_PORT: u16 = 7700;
/// Port of every frontal (QUIC) on its gateway.
pub const FRONTAL_PORT: u16 = 7701;
/// The broker's plain HTTP views, on the loopback of its host.
pub const BROKER_HTTP_PORT: u16 = 7780;
/// Port of every proxy (TCP).
pub const PROXY_PORT: u16 = 7800;

/// Running services, stopped on drop.
pub struct LabGrid {
    prefix: String,
    bins: PathBuf,
    dir: tempfile::TempDir,
    ca: Ca,
    core: Vec<Child>,
    sites: Vec<Child>,
}

impl Drop for LabGrid {
    fn drop(&mut self) {
        for c in self.sites.iter_mut().chain(self.core.iter_mut()) {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// What a site's frontal tells the broker.
pub type Announce<'a> = &'a dyn Fn(&Site) -> (Policy, Nat);

/// The lab's own firewall and NAT, as they are.
pub fn as_built(s: &Site) -> (Policy, Nat) {
    (s.firewall, s.nat)
}

fn nat_name(n: Nat) -> &'static str {
    match n {
        Nat::None => "none",
        Nat::PortPreserving => "port-preserving",
        Nat::RandomPort => "random-port",
    }
}

impl LabGrid {
    /// Starts the broker and proxies in the lab `prefix` built from `t`, then the
    /// sites' services with [`LabGrid::restart_sites`]. `bins` holds the qcg binaries.
    pub fn start(
        prefix: &str,
        t: &Topology,
        bins: &Path,
        announce: Announce,
    ) -> anyhow::Result<LabGrid> {
        let dir = tempfile::Builder::new().prefix("qcg-labgrid-").tempdir()?;
        let d = dir.path();
        let ca = Ca::generate()?;
        ca.save(d)?;
        let mut g = LabGrid {
            prefix: prefix.to_string(),
            bins: bins.to_path_buf(),
            dir,
            ca,
            core: Vec::new(),
            sites: Vec::new(),
        };
        g.issue(Role::Broker, "broker")?;
        let cfg = g.write(
            "broker.toml",
            format!("listen = \"0.0.0.0:{BROKER_PORT}\"\nhttp_listen = \"127.0.0.1:{BROKER_HTTP_PORT}\"\nca = \"ca.pem\"\ncert = \"broker.pem\"\nkey = \"broker.key\"\n"),
        )?;
        let c = g.spawn("broker", "qcg-broker", &cfg, "qcg-broker: QUIC on")?;
        g.core.push(c);
        let broker = g.broker_addr(t)?;
        for h in t
            .hosts()
            .into_iter()
            .filter(|h| h.name.starts_with("proxy"))
        {
            g.issue(Role::Proxy, &h.name)?;
            let cfg = g.write(
                &format!("{}.toml", h.name),
                format!(
                    "listen = \"0.0.0.0:{PROXY_PORT}\"\npublic_address = \"{}:{PROXY_PORT}\"\nbroker = \"{broker}\"\nca = \"ca.pem\"\ncert = \"{n}.pem\"\nkey = \"{n}.key\"\n",
                    h.addr,
                    n = h.name
                ),
            )?;
            let c = g.spawn(&h.name, "qcg-proxy", &cfg, "qcg-proxy: relaying")?;
            g.core.push(c);
        }
        g.restart_sites(t, announce)?;
        Ok(g)
    }

    fn broker_addr(&self, t: &Topology) -> anyhow::Result<SocketAddr> {
        let h = t
            .host("broker")
            .ok_or_else(|| anyhow::anyhow!("the topology has no public host `broker`"))?;
        Ok(SocketAddr::from((h.addr, BROKER_PORT)))
    }

    /// (Re)starts every site's frontal and its nodes' helpers, announcing what
    /// `announce` says.
    pub fn restart_sites(&mut self, t: &Topology, announce: Announce) -> anyhow::Result<()> {
        for c in &mut self.sites {
            let _ = c.kill();
            let _ = c.wait();
        }
        self.sites.clear();
        let broker = self.broker_addr(t)?;
        for site in &t.sites {
            let i = t
                .site_index(&site.name)
                .ok_or_else(|| anyhow::anyhow!("no site {}", site.name))?;
            let (policy, nat) = announce(site);
            let public = if nat == Nat::None {
                String::new()
            } else {
                format!("public_address = \"{}\"\n", topo::gateway_addr(i))
            };
            let name = &site.name;
            self.issue(Role::Frontal, name)?;
            let cfg = self.write(
                &format!("frontal-{name}.toml"),
                format!(
                    "cluster = \"{name}\"\npolicy = \"{policy}\"\nnat = \"{}\"\n{public}broker = \"{broker}\"\nlisten = \"0.0.0.0:{FRONTAL_PORT}\"\nca = \"ca.pem\"\ncert = \"{name}.pem\"\nkey = \"{name}.key\"\n",
                    nat_name(nat)
                ),
            )?;
            let c = self.spawn(&format!("{name}-gw"), "qcg-frontal", &cfg, "qcg-frontal:")?;
            self.sites.push(c);
            for k in 1..=site.nodes {
                let node = format!("{name}-{k}");
                self.issue(Role::Helper, &node)?;
                let cfg = self.write(
                    &format!("helper-{node}.toml"),
                    format!(
                        "node = \"{node}\"\nfrontal = \"{}:{FRONTAL_PORT}\"\nsocket = \"{node}.sock\"\nbind_address = \"{}\"\nca = \"ca.pem\"\ncert = \"{node}.pem\"\nkey = \"{node}.key\"\n\n# Test grid, run as root: root allowed explicitly.\n[accounts]\ndefault = \"root\"\nallow_root = true\n",
                        topo::lan_gw(i),
                        topo::node_addr(i, k)
                    ),
                )?;
                let c = self.spawn(&node, "qcg-helper", &cfg, "qcg-helper:")?;
                self.sites.push(c);
            }
        }
        Ok(())
    }

    /// The helper socket of a node (`SITE-K`).
    pub fn socket(&self, node: &str) -> PathBuf {
        self.dir.path().join(format!("{node}.sock"))
    }

    /// The body of the broker's plain HTTP view `path` (e.g. `/v1/clusters`), read
    /// on the broker's host.
    pub fn broker_view(&self, path: &str) -> anyhow::Result<String> {
        let script = format!(
            "exec 3<>/dev/tcp/127.0.0.1/{BROKER_HTTP_PORT} && printf 'GET {path} HTTP/1.0\\r\\n\\r\\n' >&3 && cat <&3"
        );
        let out = self
            .command("broker", Path::new("/bin/bash"))
            .args(["-c", &script])
            .output()?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        match text.split_once("\r\n\r\n") {
            Some((_, body)) if out.status.success() => Ok(body.to_string()),
            _ => anyhow::bail!(
                "GET {path} from the broker failed: {}{}",
                text,
                String::from_utf8_lossy(&out.stderr)
            ),
        }
    }

    /// A command that runs `program` in the lab host `host`.
    pub fn command(&self, host: &str, program: &Path) -> Command {
        let mut c = Command::new(self.bins.join("qcg-lab"));
        c.args(["exec", "--prefix", &self.prefix, host, "--"])
            .arg(program);
        c
    }

    /// A command that runs rank `rank` of `size` of job `job` (`program args`) on node
    /// `node`, with the job's environment.
    pub fn rank(&self, node: &str, job: &str, rank: u32, size: u32, program: &Path) -> Command {
        let mut c = self.command(node, program);
        let vars = qcg_proto::env::JobVars {
            job: job.to_string(),
            rank,
            size,
            secret_hex: "5a".repeat(32),
            groups: None,
            topology: None,
        };
        c.envs(vars.pairs())
            .env(qcg_proto::env::HELPER, self.socket(node));
        c
    }

    fn issue(&self, role: Role, name: &str) -> anyhow::Result<()> {
        self.ca.issue(role, name)?.save(self.dir.path(), name)?;
        Ok(())
    }

    fn write(&self, name: &str, text: String) -> anyhow::Result<PathBuf> {
        let p = self.dir.path().join(name);
        std::fs::write(&p, text)?;
        Ok(p)
    }

    /// Starts a service in `host` and waits for its line starting with `ready`.
    fn spawn(&self, host: &str, name: &str, config: &Path, ready: &str) -> anyhow::Result<Child> {
        let mut child = self
            .command(host, &self.bins.join(name))
            .arg("--config")
            .arg(config)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
        let out = child
            .stdout
            .take()
            .ok_or_else(|| anyhow::anyhow!("no stdout"))?;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        loop {
            match rx.recv_timeout(Duration::from_secs(20)) {
                Ok(line) if line.starts_with(ready) => return Ok(child),
                Ok(_) => {}
                Err(_) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    anyhow::bail!("{name} in {host} did not start (no `{ready}`)");
                }
            }
        }
    }
}
