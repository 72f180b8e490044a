//! `qcg-bench attacks`, issue 21's parts 2 and 5 on real services (two clusters, a
//! node each, every service checking the grid's CRL): requests for alice's job sent
//! through the helper of a node where it was not placed (register one of her ranks,
//! look her processes up, end her job); the same against a job of alice's `qcg run`
//! (which the broker does not place), sent by another local user through both
//! helpers (as root only: it plays two users); how long a revoked helper stays in the
//! topology, and how long a job lives on after its node is killed: seen (its frontal
//! notices the helper gone) and unseen (the frontal restarted meanwhile, so only the
//! broker's grace catches it).
//!
//! `cli/tests/hijack.rs`, `cli/tests/hijack_run.rs` and `cli/tests/lost.rs` prove
//! the refusals and the failures; this prints what they took.

use anyhow::{bail, Context, Result};
use qcg_grid::services::{Cluster, Node, OtherUser, ServiceGrid, NOBODY};
use qcg_proto::{AccessPoint, ProcName, Request, Response};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The broker's default grace for a lost node (`lost_node_grace_secs`).
const GRACE_S: u64 = 30;

fn http_get(addr: SocketAddr, path: &str) -> Result<String> {
    let mut s = TcpStream::connect(addr)?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: qcg\r\nConnection: close\r\n\r\n"
    )?;
    let mut resp = String::new();
    s.read_to_string(&mut resp)?;
    Ok(resp
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default())
}

/// The nodes of `/v1/topology`, as "cluster/node".
fn nodes(http: SocketAddr) -> Result<Vec<String>> {
    let t: serde_json::Value = serde_json::from_str(&http_get(http, "/v1/topology")?)?;
    let mut out = Vec::new();
    for c in t["clusters"].as_array().into_iter().flatten() {
        for n in c["nodes"].as_array().into_iter().flatten() {
            out.push(format!(
                "{}/{}",
                c["name"].as_str().unwrap_or("?"),
                n["name"].as_str().unwrap_or("?")
            ));
        }
    }
    Ok(out)
}

/// Polls `f` every 20 ms until it holds; the time it took.
fn until(what: &str, limit: Duration, mut f: impl FnMut() -> Result<bool>) -> Result<Duration> {
    let t0 = Instant::now();
    while !f()? {
        if t0.elapsed() > limit {
            bail!("{what}: not within {} s", limit.as_secs());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(t0.elapsed())
}

/// One request on a new connection to a helper's socket.
fn ask(socket: &Path, req: &Request) -> Result<Response> {
    qcg_grid::services::ask(socket, req)
        .with_context(|| format!("asking the helper at {}", socket.display()))
}

/// Alice, the user of the `qcg run` job: a uid of no account, in the helpers'
/// socket group.
const ALICE: OtherUser = OtherUser {
    uid: 4242,
    gid: NOBODY,
};

/// The arguments that make this binary a rank of alice's `qcg run` job.
pub const RANK_CMD: &str = "hijack-rank";

/// The arguments that make this binary send forged requests ([`OtherUser::ask`]).
pub const FORGED_CMD: &str = "forged";

/// A rank of alice's `qcg run` job: joins, says so, stays until `done` exists (at
/// most 5 minutes).
pub fn rank(done: &Path) -> Result<()> {
    let comm = qcg::init()?;
    println!("JOINED {} {}", comm.job(), comm.rank());
    let until = Instant::now() + Duration::from_secs(300);
    while !done.exists() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

/// Alice's `qcg run` of two ranks on `a1`, and `nobody`'s requests for her job
/// through `a1`'s and `b1`'s helpers; one line per request.
fn run_hijack(g: &Grid) -> Result<()> {
    if !rustix::process::geteuid().is_root() {
        println!("hijack of a qcg run job: skipped (only root can play two local users)");
        return Ok(());
    }
    let done = g.s.dir().join("run-done");
    let exe = std::env::current_exe()?;
    let mut run = ALICE
        .command(qcg_grid::services::bin("qcg")?)
        .args(["run", "-n", "2", "--timeout", "120", "--helper"])
        .arg(g.socket("a1"))
        .arg("--")
        .arg(&exe)
        .arg(RANK_CMD)
        .arg(&done)
        .current_dir(g.s.dir())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .context("starting alice's qcg run")?;
    let (tx, joined) = std::sync::mpsc::channel();
    let stdout = run.stdout.take().context("qcg run's stdout")?;
    std::thread::spawn(move || {
        for l in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    let stderr = run.stderr.take().context("qcg run's stderr")?;
    let said = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = BufReader::new(stderr).read_to_string(&mut s);
        s
    });
    let mut id = String::new();
    for _ in 0..2 {
        let l = joined
            .recv_timeout(Duration::from_secs(60))
            .context("alice's ranks did not join within 60 s")?;
        let Some(rest) = l.strip_prefix("JOINED ") else {
            continue;
        };
        id = rest
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .to_string();
    }
    let (a1, b1) = (g.socket("a1"), g.socket("b1"));
    let register = |node: &str, cluster: &str| {
        Request::Register(AccessPoint {
            process: ProcName::new(&id, 1),
            cluster: cluster.into(),
            node: node.into(),
            private_addr: [127, 0, 0, 1].into(),
            public_addr: None,
            port: 9,
        })
    };
    let lookup = Request::Lookup {
        from: ProcName::new(&id, 1),
        target: ProcName::new(&id, 0),
    };
    let unregister = Request::Unregister {
        process: ProcName::new(&id, 0),
    };
    let end = Request::JobEnd { job: id.clone() };
    let forged = [
        (
            "b1",
            "register her rank 1 at b1:9",
            b1.clone(),
            register("b1", "beta"),
        ),
        ("b1", "look her rank 0 up", b1.clone(), lookup.clone()),
        (
            "b1",
            "unregister her rank 0",
            b1.clone(),
            unregister.clone(),
        ),
        ("b1", "end her job", b1.clone(), end.clone()),
        (
            "a1",
            "register her rank 1 at a1:9",
            a1.clone(),
            register("a1", "alpha"),
        ),
        ("a1", "look her rank 0 up", a1.clone(), lookup),
        ("a1", "unregister her rank 0", a1.clone(), unregister),
        ("a1", "end her job", a1.clone(), end),
    ];
    let reqs: Vec<(PathBuf, Request)> = forged
        .iter()
        .map(|(_, _, s, r)| (s.clone(), r.clone()))
        .collect();
    let t0 = Instant::now();
    let answers = OtherUser::NOBODY.ask(&reqs, &[FORGED_CMD])?;
    let t = t0.elapsed();
    let mut refused = 0;
    for ((via, what, _, _), a) in forged.iter().zip(&answers) {
        let verdict = match a {
            Ok(Response::Error(e)) => {
                refused += usize::from(qcg_grid::services::is_refused(a));
                format!("refused ({:?}): {}", e.kind, e.message)
            }
            Ok(other) => format!("ANSWERED {other:?}"),
            Err(e) => format!("no answer: {e}"),
        };
        println!(
            "qcg run hijack by uid {NOBODY} via {via}: {what:<28} {}",
            verdict.chars().take(120).collect::<String>()
        );
    }
    println!(
        "    {refused} of {} refused ({:.1} ms for all, one process as uid {NOBODY})",
        answers.len(),
        t.as_secs_f64() * 1e3
    );
    std::fs::write(&done, b"")?;
    let status = run.wait()?;
    let said = said.join().unwrap_or_default();
    let told = if said.contains("could not tell the grid") {
        "its job end was REFUSED"
    } else {
        "its job end taken"
    };
    println!("    alice's qcg run afterwards: {status}, {told}");
    Ok(())
}

struct Grid {
    s: ServiceGrid,
    http: SocketAddr,
    client: qcg_grid::client::Client,
    rt: tokio::runtime::Runtime,
}

impl Grid {
    /// Kills the helper of `node` or the service `name` (`frontal-CLUSTER`).
    fn kill(&mut self, name: &str) -> Result<()> {
        let service = if name.starts_with("frontal-") {
            name.to_string()
        } else {
            format!("helper-{name}")
        };
        Ok(self.s.kill(&service)?)
    }

    fn start_frontal(&mut self, cluster: &str) -> Result<String> {
        let name = format!("frontal-{cluster}");
        self.s.restart(&name)?;
        Ok(self.s.line(
            &name,
            &format!("qcg-frontal: cluster {cluster} serving helpers on"),
        )?)
    }

    fn start_helper(&mut self, node: &str) -> Result<()> {
        let name = format!("helper-{node}");
        self.s.restart(&name)?;
        self.s
            .line(&name, &format!("qcg-helper: node {node} serving"))?;
        Ok(())
    }

    fn socket(&self, node: &str) -> PathBuf {
        self.s.socket(node)
    }

    /// Submits `n` processes of `sleep 3041` (as alice); the job's id once running.
    fn submit(&self, n: u32) -> Result<String> {
        let xml = format!(
            r#"<grmsJob appId="victim"><task taskId="t"><resourcesDescription><topology>
<group groupId="g"><processes><processesCount><value>{n}</value></processesCount></processes></group>
</topology></resourcesDescription><execution type="x"><executable>/bin/sleep</executable>
<arguments><value>3041</value></arguments></execution></task></grmsJob>"#
        );
        let a = self.rt.block_on(self.client.request(
            "POST",
            "/v1/jobs?workdir=/tmp",
            xml.into_bytes(),
        ))?;
        if a.status != 201 {
            bail!("the job was refused: {}", a.error_message());
        }
        let id = a.json()["id"].as_str().unwrap_or_default().to_string();
        until("the job running", Duration::from_secs(30), || {
            let j = self.job(&id)?;
            let ranks = j["ranks"].as_array().cloned().unwrap_or_default();
            Ok(ranks.len() == n as usize && ranks.iter().all(|r| r["state"] == "running"))
        })?;
        Ok(id)
    }

    fn job(&self, id: &str) -> Result<serde_json::Value> {
        let a = self.rt.block_on(
            self.client
                .request("GET", &format!("/v1/jobs/{id}"), vec![]),
        )?;
        Ok(a.json())
    }

    fn state(&self, id: &str) -> Result<(String, String)> {
        let j = self.job(id)?;
        Ok((
            j["status"]["state"].as_str().unwrap_or("?").to_string(),
            j["status"]["reason"].as_str().unwrap_or("").to_string(),
        ))
    }
}

/// `alpha` (node a1, 4 slots) and `beta` (node b1, 1 slot), open, CRL checked.
fn grid() -> Result<Grid> {
    let crl = "crl = \"ca/crl.pem\"\n";
    let mut helper = crl.to_string();
    if rustix::process::geteuid().is_root() {
        helper.push_str("socket_group = \"65534\"\n");
    }
    let cluster = |name, node, slots| {
        Cluster::new(name)
            .frontal_config(crl)
            .node(Node::new(node).slots(slots).helper_config(&helper))
    };
    let s = ServiceGrid::builder()
        .dir_mode(0o755)
        .log_filter("error")
        .broker_config(crl)
        .cluster(cluster("alpha", "a1", 4))
        .cluster(cluster("beta", "b1", 1))
        .cert("client", "alice")
        .start()?;
    let http = s.http().context("the broker's HTTP API")?;
    let g = Grid {
        client: s.client("alice")?,
        rt: tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?,
        s,
        http,
    };
    until(
        "both nodes in the topology",
        Duration::from_secs(30),
        || Ok(nodes(http)?.len() == 2),
    )?;
    Ok(g)
}

/// Runs the attempts and the timings; prints one line each.
pub fn run() -> Result<()> {
    let mut g = grid()?;
    println!("# issue 21: hijacks, revocation, lost nodes (alpha/a1 4 slots, beta/b1 1 slot)");

    // 1. alice's job on a1; its requests sent through b1's helper.
    let id = g.submit(2)?;
    let b1 = g.socket("b1");
    let forged = [
        (
            "register her rank 1 at b1:9",
            Request::Register(AccessPoint {
                process: ProcName::new(&id, 1),
                cluster: "beta".into(),
                node: "b1".into(),
                private_addr: [127, 0, 0, 1].into(),
                public_addr: None,
                port: 9,
            }),
        ),
        (
            "look her rank 0 up as her rank 1",
            Request::Lookup {
                from: ProcName::new(&id, 1),
                target: ProcName::new(&id, 0),
            },
        ),
        ("end her job", Request::JobEnd { job: id.clone() }),
    ];
    for (what, req) in &forged {
        let t0 = Instant::now();
        let r = ask(&b1, req)?;
        let t = t0.elapsed();
        let verdict = match &r {
            Response::Error(e) => format!("refused ({:?}): {}", e.kind, e.message),
            other => format!("ANSWERED {other:?}"),
        };
        println!(
            "hijack via b1: {what:<34} {:>7.2} ms  {}",
            t.as_secs_f64() * 1e3,
            verdict.chars().take(120).collect::<String>()
        );
    }
    let (state, _) = g.state(&id)?;
    println!("    alice's job afterwards: {state}");
    g.rt.block_on(
        g.client
            .request("DELETE", &format!("/v1/jobs/{id}"), vec![]),
    )?;

    // 1b. alice's `qcg run` job on a1; another user's requests through both helpers.
    run_hijack(&g)?;

    // 2. b1's helper revoked while connected.
    let t0 = Instant::now();
    g.s.ca().revoke(&g.s.ca_dir(), "b1")?;
    until("b1 out of the topology", Duration::from_secs(30), || {
        Ok(!nodes(g.http)?.contains(&"beta/b1".to_string()))
    })?;
    println!(
        "revoked helper b1 out of /v1/topology (connection cut) in {:.2} s",
        t0.elapsed().as_secs_f64()
    );

    // 3. a1's helper killed: its frontal sees it go (QUIC idle timeout, 5 s).
    let id = g.submit(1)?;
    let t0 = Instant::now();
    g.kill("a1")?;
    until("the job failed", Duration::from_secs(GRACE_S + 60), || {
        Ok(g.state(&id)?.0 != "running")
    })?;
    let (state, reason) = g.state(&id)?;
    println!(
        "job on a killed node (helper killed, frontal up): {state} in {:.1} s: {reason}",
        t0.elapsed().as_secs_f64()
    );

    // 4. a1's helper killed while its frontal restarts: nobody reports the node lost.
    g.start_helper("a1")?;
    until("a1 back in the topology", Duration::from_secs(30), || {
        Ok(nodes(g.http)?.contains(&"alpha/a1".to_string()))
    })?;
    let id = g.submit(1)?;
    let t0 = Instant::now();
    g.kill("a1")?;
    g.kill("frontal-alpha")?;
    g.start_frontal("alpha")?;
    until("the job failed", Duration::from_secs(GRACE_S + 60), || {
        Ok(g.state(&id)?.0 != "running")
    })?;
    let (state, reason) = g.state(&id)?;
    println!(
        "job on a node killed unseen (frontal restarted): {state} in {:.1} s with grace {GRACE_S} s: {reason}",
        t0.elapsed().as_secs_f64()
    );
    Ok(())
}
