//! The broker's dashboard in headless Chromium, against the real services as
//! separate processes on loopback: a broker, two frontals (`alpha` open, `beta`
//! port range) with one helper of one slot each, so a job of two ranks spans both
//! clusters. Alice runs a ping-pong whose appId is markup; carol (a client whose
//! very name is markup) queues a job behind it; the page is loaded as an admin and
//! as alice.
//!
//! How Chromium authenticates: it does not present client certificates headless
//! without an NSS database and a policy file, so the test runs a forwarder per
//! identity: a loopback plain-HTTP listener whose connections it carries into a TLS
//! connection to the broker's HTTPS API presenting that identity's certificate.
//! The broker still decides the role from the certificate, as for any client; the
//! forwarder only holds the key. Chromium loads `http://127.0.0.1:PORT/dashboard`
//! through the admin's forwarder or alice's.
//!
//! Chromium (Debian `chromium`) is installed with apt-get when missing; without it
//! the test fails, it never skips. The screenshots are kept in
//! `target/tmp/dashboard/` (`admin.png`, `alice.png`).
//!
//! Needs the workspace's binaries and examples built first
//! (`cargo build --workspace --bins --examples`), as the test command does.

#![allow(clippy::unwrap_used)]

mod common;
use common::*;
use qcg_grid::services::{Cluster, Node, ServiceGrid};

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// An appId that runs a script if the page does not escape it.
const EVIL_APP: &str = "<script>document.title='pwned'</script><img src=x onerror=alert(1)>";
/// A client whose certificate names it with markup.
const CAROL: &str = "carol<b>\"&'";

struct Grid {
    s: ServiceGrid,
    http: SocketAddr,
    https: SocketAddr,
}

fn grid() -> Grid {
    let node = |name| Node::new(name).slots(1).memory_mib(4096);
    let s = ServiceGrid::builder()
        .cluster(Cluster::new("alpha").node(node("a1")))
        .cluster(
            Cluster::new("beta")
                .policy("port-range 43300-43399")
                .node(node("b1")),
        )
        .cert("client", "alice")
        .cert("client", CAROL)
        .cert("admin", "ops")
        .wait_for_topology()
        .start()
        .unwrap();
    Grid {
        http: s.http().unwrap(),
        https: s.https().unwrap(),
        s,
    }
}

impl Grid {
    fn ca(&self) -> PathBuf {
        self.s.ca_dir()
    }

    /// `qcg ARGS` as `who`; its stdout, after checking it succeeded.
    fn qcg_as(&self, who: &str, args: &[&str]) -> String {
        let o = Command::new(bin("qcg"))
            .args(args)
            .args(self.s.qcg_args(who))
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "qcg {args:?} as {who}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    }

    /// Submits (detached) a job of two ranks, one per group, as `who`; its id.
    fn submit(&self, who: &str, app_id: &str, exe: &Path, args: &[&str]) -> String {
        let app = app_id
            .replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('"', "&quot;");
        let args: String = args.iter().map(|a| format!("<value>{a}</value>")).collect();
        let xml = format!(
            r#"<grmsJob appId="{app}">
  <task taskId="t">
    <resourcesDescription><topology>
      <group groupId="g1"><processes><processesCount><value>1</value></processesCount></processes></group>
      <group groupId="g2"><processes><processesCount><value>1</value></processesCount></processes></group>
    </topology></resourcesDescription>
    <execution type="qcg"><executable>{}</executable><arguments>{args}</arguments></execution>
  </task>
</grmsJob>
"#,
            exe.display()
        );
        let path = write(self.s.dir(), &format!("{}.xml", hex(who)), &xml);
        self.qcg_as(who, &["submit", "--detach", path.to_str().unwrap()])
    }
}

fn hex(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A loopback plain-HTTP listener whose every connection is carried into a TLS
/// connection to the broker presenting one identity's certificate. Stopped (its
/// runtime dropped) with it.
struct Forwarder {
    addr: SocketAddr,
    _rt: tokio::runtime::Runtime,
}

impl Forwarder {
    fn new(g: &Grid, who: &str) -> Forwarder {
        let ca = g.ca();
        let id = qcg_proto::tls::Identity::load(
            &ca.join(format!("{who}.pem")),
            &ca.join(format!("{who}.key")),
            &ca.join("ca.pem"),
        )
        .unwrap();
        let mut tls = id.client_config().unwrap();
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        let connector = tokio_rustls::TlsConnector::from(Arc::new(tls));
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let broker = g.https;
        rt.spawn(async move {
            while let Ok((mut plain, _)) = listener.accept().await {
                let connector = connector.clone();
                tokio::spawn(async move {
                    let tcp = tokio::net::TcpStream::connect(broker).await?;
                    let name = rustls_pki_types::ServerName::try_from("broker.qcg")
                        .map_err(std::io::Error::other)?;
                    let mut tls = connector.connect(name, tcp).await?;
                    tokio::io::copy_bidirectional(&mut plain, &mut tls).await?;
                    Ok::<_, std::io::Error>(())
                });
            }
        });
        Forwarder { addr, _rt: rt }
    }

    fn url(&self) -> String {
        format!("http://{}/dashboard", self.addr)
    }
}

/// Chromium's binary, installed with apt-get when missing (the test fails, loudly,
/// when it cannot be had).
fn chromium() -> PathBuf {
    let find = || {
        ["chromium", "chromium-browser"].iter().find_map(|name| {
            std::env::var_os("PATH").and_then(|paths| {
                std::env::split_paths(&paths)
                    .map(|p| p.join(name))
                    .find(|p| p.is_file())
            })
        })
    };
    if let Some(p) = find() {
        return p;
    }
    eprintln!("chromium is missing: installing it with apt-get");
    let ok = |c: &mut Command| c.status().is_ok_and(|s| s.success());
    let updated = ok(Command::new("apt-get").arg("update"));
    let installed = ok(Command::new("apt-get")
        .args([
            "install",
            "-y",
            "--no-install-recommends",
            "chromium",
            // Fonts for a readable screenshot (only recommended by chromium).
            "fonts-dejavu-core",
            "fonts-liberation",
        ])
        .env("DEBIAN_FRONTEND", "noninteractive"));
    find().unwrap_or_else(|| {
        panic!(
            "this test needs Debian's chromium and could not install it (apt-get update ok: {updated}, install ok: {installed}); install it with `apt-get install chromium`"
        )
    })
}

/// Runs headless Chromium on `url` with `what` (`--dump-dom` or
/// `--screenshot=PATH`) and a fresh profile; its stdout.
fn chromium_run(url: &str, what: &str) -> String {
    let profile = tempfile::tempdir().unwrap();
    let o = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--window-size=1280,1100",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(what)
        .arg(url)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "chromium {what} {url}: {}\n{}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The DOM of the page at `url`, as Chromium built it.
fn dom(url: &str) -> String {
    let d = chromium_run(url, "--dump-dom");
    assert!(d.contains("<h1>qcg broker</h1>"), "not the dashboard: {d}");
    d
}

/// A screenshot of `url` kept as `target/tmp/dashboard/NAME.png`.
fn screenshot(url: &str, name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{name}.png"));
    let _ = std::fs::remove_file(&path);
    chromium_run(url, &format!("--screenshot={}", path.display()));
    let png = std::fs::read(&path).unwrap();
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "{} is no screenshot ({} bytes)",
        path.display(),
        png.len()
    );
    eprintln!("screenshot: {}", path.display());
    path
}

/// The whole answer (head and body) to `GET path` at `addr`, over plain HTTP.
fn raw_get(addr: SocketAddr, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: qcg\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    resp
}

/// The number in the `column`-th cell (0: the technique) of the links table's row
/// for `technique`.
fn link_cell(dom: &str, technique: &str, column: usize) -> u64 {
    let table = &dom[dom.find("id=\"links\"").expect("a links table")..];
    let row = &table[table
        .find(&format!("<td>{technique}</td>"))
        .unwrap_or_else(|| panic!("no row for {technique} in {table}"))..];
    let row = &row[..row.find("</tr>").unwrap()];
    let cell = row.split("<td").nth(column + 1).unwrap();
    let text = &cell[cell.find('>').unwrap() + 1..cell.find("</td>").unwrap()];
    text.parse().unwrap()
}

#[test]
fn the_dashboard_shows_each_caller_what_it_may_see_and_runs_no_markup() {
    let chromium = chromium();
    eprintln!("chromium: {}", chromium.display());
    let g = grid();
    // Alice's ping-pong of empty messages lasts (far) longer than the test and
    // takes both slots, one in each cluster; carol's job waits behind it.
    let pingpong = bin("examples/pingpong");
    let alice_job = g.submit("alice", EVIL_APP, &pingpong, &["0", "1000000000"]);
    let carol_job = g.submit(CAROL, "carols-job", Path::new("/bin/true"), &[]);
    assert!(alice_job.starts_with("job-") && carol_job.starts_with("job-"));
    // Both ranks linked: the broker counted a link made.
    let mut technique = String::new();
    wait_until("alice's ranks to link", || {
        let l: serde_json::Value = serde_json::from_str(&http_get(g.http, "/v1/links")).unwrap();
        match l
            .as_object()
            .unwrap()
            .iter()
            .find(|(_, c)| c["ok"].as_u64() > Some(0))
        {
            Some((t, _)) => {
                technique = t.clone();
                true
            }
            None => false,
        }
    });
    let status = g.qcg_as("alice", &["status", &alice_job]);
    assert!(status.contains("running"), "{status}");

    // The admin sees both clusters, every job, the ranks and the live link.
    let admin = Forwarder::new(&g, "ops");
    let d = dom(&admin.url());
    assert!(d.contains("admin: every job"), "{d}");
    for text in [
        "<b>alpha</b>",
        "<b>beta</b>",
        "port-range 43300-43399",
        &alice_job,
        &carol_job,
        "carols-job",
        "<td>a1</td>",
        "<td>b1</td>",
        "measured</span> by the gateways' probe",
    ] {
        assert!(d.contains(text), "the admin's page lacks {text}: {d}");
    }
    // The markup in the appId and in carol's name is shown as text: no element,
    // no script ran (the title would say so).
    assert!(
        d.contains(
            "&lt;script&gt;document.title='pwned'&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;"
        ),
        "{d}"
    );
    assert!(d.contains("carol&lt;b&gt;\"&amp;'"), "{d}");
    assert!(!d.contains("<script") && !d.contains("<img"), "{d}");
    assert!(d.contains("<title>qcg broker dashboard</title>"), "{d}");
    assert!(
        link_cell(&d, &technique, 1) >= 1,
        "no live {technique} link: {d}"
    );
    assert!(link_cell(&d, &technique, 3) >= 1, "{d}");
    let admin_png = screenshot(&admin.url(), "admin");

    // Alice sees her job and its live link, not carol's job nor carol.
    let alice = Forwarder::new(&g, "alice");
    let d = dom(&alice.url());
    assert!(d.contains("client: your jobs only"), "{d}");
    assert!(d.contains(&alice_job) && d.contains("<b>alpha</b>"), "{d}");
    for hidden in [carol_job.as_str(), "carols-job", "carol", "runs jobs of"] {
        assert!(!d.contains(hidden), "alice's page shows {hidden}: {d}");
    }
    assert!(link_cell(&d, &technique, 1) >= 1, "{d}");
    assert!(!d.contains("<script") && !d.contains("<img"), "{d}");
    let alice_png = screenshot(&alice.url(), "alice");

    // Carol sees her queued job only.
    let carol = Forwarder::new(&g, CAROL);
    let d = dom(&carol.url());
    assert!(d.contains(&carol_job) && d.contains("queued"), "{d}");
    assert!(!d.contains(&alice_job) && !d.contains("pwned"), "{d}");
    assert_eq!(link_cell(&d, &technique, 1), 0, "alice's links: {d}");

    // A frontal's certificate is no caller: 403, saying why. Plain HTTP has no
    // dashboard.
    let frontal = Forwarder::new(&g, "alpha");
    let resp = raw_get(frontal.addr, "/dashboard");
    assert!(resp.starts_with("HTTP/1.1 403"), "{resp}");
    assert!(resp.contains("client certificate"), "{resp}");
    assert!(!resp.contains(&alice_job), "{resp}");
    let resp = raw_get(g.http, "/dashboard");
    assert!(resp.starts_with("HTTP/1.1 404"), "{resp}");

    g.qcg_as("alice", &["cancel", &alice_job]);
    eprintln!(
        "screenshots: {} and {}",
        admin_png.display(),
        alice_png.display()
    );
}
