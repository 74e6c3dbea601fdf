//! Three-node clusters of the test's own, each node on a test host of its own, made
//! and removed by `scripts/cluster.sh` (the same script a person runs for the
//! campaign): node i in namespace `cb<k>n<i>` at 10.77.<k>.<i>, joined to the others
//! and to this machine by the bridge `cbbr<k>`. The loader, in the machine's own
//! namespace, reaches every node; the nodes reach each other until a `partition`
//! fault cuts them.
//!
//! `Drop` runs the script's `down`: every process left in the namespaces is killed,
//! the namespaces, veths and bridge removed, whatever the test did; `up` removes what
//! a crashed run left first. Nothing of the machine's own network or services is
//! touched.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/cluster.sh")
}

fn run(args: &[&str]) -> Result<String, String> {
    let o = Command::new("bash")
        .arg(script())
        .args(args)
        .output()
        .map_err(|e| format!("running scripts/cluster.sh: {e}"))?;
    if o.status.success() {
        Ok(String::from_utf8_lossy(&o.stdout).trim().to_string())
    } else {
        Err(format!(
            "scripts/cluster.sh {} failed ({}): {}{}",
            args.join(" "),
            o.status,
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ))
    }
}

/// One test host.
#[derive(Debug, Clone)]
pub struct Host {
    pub name: String,
    pub netns: String,
    pub address: String,
}

/// A cluster of three (`nats` or `rabbitmq`) on subnet 10.77.`k`.0/24.
#[derive(Debug)]
pub struct Cluster {
    pub system: &'static str,
    pub k: u8,
    pub hosts: Vec<Host>,
}

impl Cluster {
    /// Make the hosts and start the cluster; returns once it is formed.
    pub fn up(system: &'static str, k: u8) -> Result<Cluster, String> {
        let c = Cluster {
            system,
            k,
            hosts: (1..=3)
                .map(|i| Host {
                    name: format!("n{i}"),
                    netns: format!("cb{k}n{i}"),
                    address: format!("10.77.{k}.{i}"),
                })
                .collect(),
        };
        run(&["up", system, &k.to_string()])?;
        Ok(c)
    }

    /// The scenario's `cluster:` section (flow YAML, for `--set cluster=…`).
    pub fn yaml(&self) -> String {
        run(&["yaml", self.system, &self.k.to_string()]).expect("the cluster section")
    }

    /// Can host `from` open a TCP connection to host `to`'s `port`, from inside its
    /// namespace?
    pub fn connects(&self, from: usize, to: usize, port: u16) -> bool {
        Command::new("ip")
            .args([
                "netns",
                "exec",
                &self.hosts[from].netns,
                "timeout",
                "1",
                "bash",
                "-c",
            ])
            .arg(format!(
                "exec 3<>/dev/tcp/{}/{port}",
                self.hosts[to].address
            ))
            .output()
            .is_ok_and(|o| o.status.success())
    }

    /// `nats.url`: every server.
    pub fn nats_url(&self) -> String {
        self.hosts
            .iter()
            .map(|h| format!("nats://{}:4222", h.address))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// An AMQP URL of node `i` (0-based).
    pub fn amqp_url(&self, i: usize) -> String {
        format!("amqp://guest:guest@{}:5672/%2f", self.hosts[i].address)
    }

    pub fn management_url(&self, i: usize) -> String {
        format!("http://{}:15672", self.hosts[i].address)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = run(&["down", &self.k.to_string()]);
    }
}
