//! Clusters of the test's own, each node on a test host of its own: a network
//! namespace with one address, joined to the others and to the machine by a bridge
//! (`cbbr<k>`, 10.77.<k>.254/24 on the machine's side; node i at 10.77.<k>.i). The
//! loader, in the machine's own namespace, reaches every node; the nodes reach each
//! other until a `partition` fault cuts them.
//!
//! - [`TestHosts`]: the namespaces, the veth pairs and the bridge;
//! - [`NatsCluster`]: three nats-servers with JetStream, clustered (routes);
//! - [`RabbitCluster`]: three RabbitMQ nodes, clustered at boot (classic config peer
//!   discovery), each with its own epmd in its namespace and the management plugin.
//!
//! `Drop` kills every process left in the namespaces and removes them, the veths and
//! the bridge, whatever the test did; what a crashed run left is removed before a
//! cluster is made. Nothing of the machine's own network or services is touched.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

fn sh(cmd: &str) -> (bool, String) {
    match Command::new("sh")
        .arg("-c")
        .arg(format!("{cmd} 2>&1"))
        .output()
    {
        Ok(o) => (
            o.status.success(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
        ),
        Err(e) => (false, e.to_string()),
    }
}

fn must(cmd: &str) -> Result<(), String> {
    match sh(cmd) {
        (true, _) => Ok(()),
        (false, out) => Err(format!("`{cmd}` failed: {}", out.trim())),
    }
}

/// A plain HTTP GET's body (the servers' monitoring APIs), `None` when it fails.
pub fn http_get(addr: &str, path: &str, basic: Option<&str>) -> Option<String> {
    use std::io::{Read, Write};
    let sock: std::net::SocketAddr = addr.parse().ok()?;
    let mut s = std::net::TcpStream::connect_timeout(&sock, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let auth = basic
        .map(|b| {
            use base64::Engine;
            format!(
                "Authorization: Basic {}\r\n",
                base64::engine::general_purpose::STANDARD.encode(b)
            )
        })
        .unwrap_or_default();
    write!(
        s,
        "GET {path} HTTP/1.0\r\nHost: {addr}\r\n{auth}Connection: close\r\n\r\n"
    )
    .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let (head, body) = out.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200")
        .then(|| body.to_string())
        .or_else(|| head.starts_with("HTTP/1.0 200").then(|| body.to_string()))
}

/// Wait until `up()` holds, at most `deadline`.
fn wait(what: &str, deadline: Duration, mut up: impl FnMut() -> bool) -> Result<Duration, String> {
    let t0 = Instant::now();
    while t0.elapsed() < deadline {
        if up() {
            return Ok(t0.elapsed());
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    Err(format!("{what} within {deadline:?}"))
}

/// One test host.
#[derive(Debug, Clone)]
pub struct Host {
    pub name: String,
    pub netns: String,
    pub address: String,
}

/// `n` test hosts on subnet 10.77.`k`.0/24.
#[derive(Debug)]
pub struct TestHosts {
    pub k: u8,
    pub bridge: String,
    pub hosts: Vec<Host>,
}

impl TestHosts {
    pub fn make(k: u8, n: usize) -> Result<TestHosts, String> {
        for tool in ["ip", "nft"] {
            if !sh(&format!("command -v {tool}")).0 {
                return Err(format!("missing {tool} (iproute2, nftables)"));
            }
        }
        let t = TestHosts {
            k,
            bridge: format!("cbbr{k}"),
            hosts: (1..=n)
                .map(|i| Host {
                    name: format!("n{i}"),
                    netns: format!("cb{k}n{i}"),
                    address: format!("10.77.{k}.{i}"),
                })
                .collect(),
        };
        t.remove();
        must(&format!("ip link add {} type bridge", t.bridge))?;
        must(&format!("ip addr add 10.77.{k}.254/24 dev {}", t.bridge))?;
        must(&format!("ip link set {} up", t.bridge))?;
        for h in &t.hosts {
            let veth = format!("{}h", h.netns);
            must(&format!("ip netns add {}", h.netns))?;
            must(&format!(
                "ip link add {veth} type veth peer name eth0 netns {}",
                h.netns
            ))?;
            must(&format!("ip link set {veth} master {} up", t.bridge))?;
            must(&format!(
                "ip -n {ns} addr add {a}/24 dev eth0 && ip -n {ns} link set eth0 up && ip -n {ns} link set lo up",
                ns = h.netns,
                a = h.address
            ))?;
        }
        Ok(t)
    }

    /// Kill what runs in the namespaces, then remove them and the bridge.
    fn remove(&self) {
        for h in &self.hosts {
            let _ = sh(&format!(
                "ip netns pids {ns} 2>/dev/null | xargs -r kill -9; ip netns del {ns} 2>/dev/null; ip link del {ns}h 2>/dev/null; true",
                ns = h.netns
            ));
        }
        let _ = sh(&format!("ip link del {} 2>/dev/null; true", self.bridge));
    }

    /// Can `from` open a TCP connection to `to`'s `port`, from inside its namespace?
    pub fn connects(&self, from: usize, to: usize, port: u16) -> bool {
        sh(&format!(
            "ip netns exec {} timeout 1 bash -c 'exec 3<>/dev/tcp/{}/{port}'",
            self.hosts[from].netns, self.hosts[to].address
        ))
        .0
    }

    /// The scenario's `cluster:` section (flow YAML, for `--set cluster=…`).
    pub fn cluster_yaml(&self, port: u16, id: impl Fn(&Host) -> String, pidfile: impl Fn(usize) -> String, restart: impl Fn(usize) -> String) -> String {
        let nodes: Vec<String> = self
            .hosts
            .iter()
            .enumerate()
            .map(|(i, h)| {
                format!(
                    "{{name: {}, id: '{}', netns: {}, address: {}, port: {port}, pidfile: '{}', restart: \"{}\"}}",
                    h.name,
                    id(h),
                    h.netns,
                    h.address,
                    pidfile(i),
                    restart(i).replace('"', "\\\"")
                )
            })
            .collect();
        format!("{{nodes: [{}]}}", nodes.join(", "))
    }
}

impl Drop for TestHosts {
    fn drop(&mut self) {
        self.remove();
    }
}

/// Three nats-servers with JetStream, one per test host, routed into one cluster.
#[derive(Debug)]
pub struct NatsCluster {
    pub dir: PathBuf,
    pub hosts: TestHosts,
}

impl NatsCluster {
    pub fn start(k: u8) -> Result<NatsCluster, String> {
        if !sh("command -v nats-server").0 {
            return Err("missing nats-server".into());
        }
        let hosts = TestHosts::make(k, 3)?;
        let dir = PathBuf::from(format!("/tmp/crossbench-nats-cluster-{k}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let routes: Vec<String> = hosts
            .hosts
            .iter()
            .map(|h| format!("nats-route://{}:6222", h.address))
            .collect();
        for (i, h) in hosts.hosts.iter().enumerate() {
            let conf = format!(
                "server_name: {name}\nlisten: {a}:4222\nhttp: {a}:8222\njetstream {{ store_dir: {d}/data{i} }}\ncluster {{ name: cb{k}, listen: {a}:6222, routes: [{r}] }}\n",
                name = h.name,
                a = h.address,
                d = dir.display(),
                r = routes.join(", ")
            );
            std::fs::write(dir.join(format!("n{i}.conf")), conf).map_err(|e| e.to_string())?;
        }
        let c = NatsCluster { dir, hosts };
        for i in 0..3 {
            must(&c.start_command(i))?;
        }
        c.wait_ready(Duration::from_secs(60))?;
        Ok(c)
    }

    /// Starts node `i` in its namespace, in the background (also a fault's restart).
    pub fn start_command(&self, i: usize) -> String {
        format!(
            "ip netns exec {ns} setsid nats-server -c {d}/n{i}.conf -P {p} -l {d}/n{i}.log < /dev/null > /dev/null 2>&1 &",
            ns = self.hosts.hosts[i].netns,
            d = self.dir.display(),
            p = self.pidfile(i)
        )
    }

    pub fn pidfile(&self, i: usize) -> String {
        format!("{}/n{i}.pid", self.dir.display())
    }

    /// Every server answers, and JetStream's meta group has a leader on each.
    pub fn wait_ready(&self, deadline: Duration) -> Result<Duration, String> {
        wait("the NATS cluster did not elect a JetStream meta leader", deadline, || {
            self.hosts.hosts.iter().all(|h| {
                http_get(&format!("{}:8222", h.address), "/jsz", None).is_some_and(|b| {
                    serde_json::from_str::<serde_json::Value>(&b).is_ok_and(|v| {
                        v["meta_cluster"]["leader"].as_str().is_some_and(|l| !l.is_empty())
                            && v["meta_cluster"]["cluster_size"] == 3
                    })
                })
            })
        })
        .map_err(|e| format!("{e}; the logs end with:\n{}", sh(&format!("tail -n 15 {}/n*.log", self.dir.display())).1))
    }

    /// `nats.url`: every server.
    pub fn url(&self) -> String {
        self.hosts
            .hosts
            .iter()
            .map(|h| format!("nats://{}:4222", h.address))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// `cluster=` for the scenario.
    pub fn cluster_yaml(&self) -> String {
        self.hosts.cluster_yaml(
            4222,
            |h| h.name.clone(),
            |i| self.pidfile(i),
            |i| self.start_command(i),
        )
    }
}

impl Drop for NatsCluster {
    fn drop(&mut self) {
        for i in 0..3 {
            if let Ok(p) = std::fs::read_to_string(self.pidfile(i)) {
                let _ = sh(&format!("kill -9 {}", p.trim()));
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
