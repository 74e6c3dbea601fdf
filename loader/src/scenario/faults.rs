//! The scenario's `faults:` list and `proxy:` section: what breaks, when, and how it
//! comes back, in the shape of Trogdor's fault specs (`{kind, target, at, duration,
//! params}`), with times relative to the start of the rated window.
//!
//! Only local processes are ever targeted, and the proxy only ever connects to a
//! loopback address: [`validate`] refuses anything else before the cell starts.

use std::net::SocketAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::scenario::cluster::ClusterSection;
use crate::scenario::dur::Dur;
use crate::scenario::{invalid, ScenarioError};

/// What a fault does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FaultKind {
    /// SIGKILL the target; after `duration`, run its `restart` command (none: it stays
    /// down for the rest of the cell).
    Kill,
    /// Run the target's `restart` command (a clean restart: `pg_ctlcluster … restart`).
    Restart,
    /// SIGSTOP the target, SIGCONT it after `duration`.
    Pause,
    /// Switch a toxic on the harness's TCP proxy for `duration` (`params.toxic`).
    Proxy,
    /// Cut the network between the `cluster:` nodes of different sides
    /// (`params.isolate` one node, or `params.sides`), dropping every packet between
    /// them, for `duration` (0: until a `heal` or the cell's end). The loader keeps
    /// reaching every node.
    Partition,
    /// Heal every partition.
    Heal,
    /// SIGKILL the node leading the most streams (or `params.stream`'s), as the
    /// system's own API answers; after `duration`, run the node's `restart`.
    #[serde(rename = "kill-leader")]
    KillLeader,
}

impl FaultKind {
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Kill => "kill",
            FaultKind::Restart => "restart",
            FaultKind::Pause => "pause",
            FaultKind::Proxy => "proxy",
            FaultKind::Partition => "partition",
            FaultKind::Heal => "heal",
            FaultKind::KillLeader => "kill-leader",
        }
    }
}

/// A proxy toxic, in the spirit of toxiproxy's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Toxic {
    /// Delay every chunk by `latency` ± `jitter`, both ways.
    Latency,
    /// Cap each direction of every connection at `bandwidth` bytes per second.
    Bandwidth,
    /// Reset every open connection when the toxic starts, and every new one while it lasts.
    Reset,
    /// Accept and hold connections but pass no byte either way.
    Blackhole,
}

impl Toxic {
    pub fn name(self) -> &'static str {
        match self {
            Toxic::Latency => "latency",
            Toxic::Bandwidth => "bandwidth",
            Toxic::Reset => "reset",
            Toxic::Blackhole => "blackhole",
        }
    }
}

/// A fault's parameters beyond its kind (the proxy's toxics; a partition's sides; the
/// stream whose leader a cluster fault looks for).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FaultParams {
    pub toxic: Option<Toxic>,
    pub latency: Dur,
    pub jitter: Dur,
    /// Bytes per second, each direction of each connection.
    pub bandwidth: u64,
    /// Partition: the node cut off from all the others (a `cluster.nodes[].name`, or
    /// `leader`: the node leading the most streams, or `stream`'s, when it strikes).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub isolate: String,
    /// Partition: the sides, each a list of node names; every node on exactly one.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sides: Vec<Vec<String>>,
    /// `kill-leader`, `isolate: leader`: the physical stream whose leader is meant
    /// (as the adapter names it: `CB_…` for NATS, the queue for RabbitMQ); empty: the
    /// node leading the most streams.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub stream: String,
}

/// One fault of the schedule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultSpec {
    pub kind: FaultKind,
    /// The victim, named as sampler targets are: `proc:<cmdline pattern>`, `pid:<n>`,
    /// `unit:<systemd unit>` or `container:<name>`. Not for `proxy`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// A shell command that brings the target back (`kill`: run after `duration`;
    /// `restart`: the fault itself).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart: Option<String>,
    /// When the fault starts, from the start of the rated window.
    pub at: Dur,
    /// How long it lasts (kill: down time before the restart; pause; proxy).
    #[serde(default)]
    pub duration: Dur,
    #[serde(default)]
    pub params: FaultParams,
    /// How long a command (the restart) may run before it is killed and recorded as
    /// timed out.
    #[serde(default = "default_command_timeout")]
    pub command_timeout: Dur,
}

fn default_command_timeout() -> Dur {
    Dur(Duration::from_secs(120))
}

/// The harness's TCP proxy between the adapter and the system (section `proxy`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProxySection {
    /// The system's address (`127.0.0.1:5672`). Empty: the address of the system's
    /// own connection setting (`rabbitmq.url`, `pgmq.dsn`, …).
    pub upstream: String,
}

/// A victim as a fault names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Victim {
    /// Every process whose command line contains the pattern (not the loader, nor
    /// its ancestors), with their descendants.
    Process(String),
    Pid(u32),
    /// The pid written in a file, read when the fault strikes (a server's pid file:
    /// its pid changes with every restart).
    PidFile(String),
    /// A systemd unit (`systemctl kill --signal=…`).
    Unit(String),
    /// A container (`docker kill --signal=…`, `docker pause` / `unpause`).
    Container(String),
}

impl Victim {
    pub const FORMS: &'static str =
        "proc:<cmdline pattern>, pid:<n>, pidfile:<path>, unit:<systemd unit>, container:<name>";

    pub fn parse(s: &str) -> Result<Victim, String> {
        let (kind, rest) = s
            .split_once(':')
            .ok_or_else(|| format!("{s:?} is not one of {}", Victim::FORMS))?;
        if rest.trim().is_empty() {
            return Err(format!("{s:?}: empty value after ':'"));
        }
        Ok(match kind {
            "proc" => {
                if rest.trim().len() < 3 {
                    return Err(format!(
                        "{s:?}: a process pattern this short would match too much; name the victim's command line more precisely"
                    ));
                }
                Victim::Process(rest.to_string())
            }
            "pid" => {
                let pid: u32 = rest
                    .parse()
                    .map_err(|_| format!("{s:?}: the pid is not a number"))?;
                if pid <= 1 {
                    return Err(format!("{s:?}: pid {pid} is not a victim"));
                }
                Victim::Pid(pid)
            }
            "pidfile" => Victim::PidFile(rest.to_string()),
            "unit" => Victim::Unit(rest.to_string()),
            "container" => Victim::Container(rest.to_string()),
            _ => return Err(format!("{s:?} is not one of {}", Victim::FORMS)),
        })
    }
}

impl std::fmt::Display for Victim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Victim::Process(p) => write!(f, "proc:{p}"),
            Victim::Pid(p) => write!(f, "pid:{p}"),
            Victim::PidFile(p) => write!(f, "pidfile:{p}"),
            Victim::Unit(u) => write!(f, "unit:{u}"),
            Victim::Container(c) => write!(f, "container:{c}"),
        }
    }
}

/// A loopback `host:port` (the only addresses the proxy connects to).
pub fn loopback_addr(s: &str) -> Result<SocketAddr, String> {
    let addr: SocketAddr = s
        .replace("localhost:", "127.0.0.1:")
        .parse()
        .map_err(|_| format!("{s:?} is not host:port with a numeric loopback host"))?;
    if !addr.ip().is_loopback() {
        return Err(format!(
            "{s:?} is not a loopback address: faults only ever touch this machine"
        ));
    }
    Ok(addr)
}

/// Check the schedule against the rated window (`duration`) and the proxy section.
pub fn validate(
    faults: &[FaultSpec],
    proxy: Option<&ProxySection>,
    cluster: Option<&ClusterSection>,
    duration: Duration,
    publish_deadline: Duration,
) -> Result<(), ScenarioError> {
    if publish_deadline < Duration::from_millis(10) || publish_deadline > Duration::from_secs(3600)
    {
        return Err(invalid(
            "publish_deadline",
            "must be between 10ms and 1h (how long an event may wait for its publish)",
        ));
    }
    if let Some(p) = proxy {
        if !p.upstream.is_empty() {
            loopback_addr(&p.upstream).map_err(|m| invalid("proxy.upstream", m))?;
        }
    }
    for (i, f) in faults.iter().enumerate() {
        let field = |k: &str| format!("faults[{i}].{k}");
        if f.at.0 > duration {
            return Err(invalid(
                &field("at"),
                format!(
                    "{} is past the rated window ({}); faults are timed from its start",
                    f.at,
                    Dur(duration)
                ),
            ));
        }
        if f.duration.0 > Duration::from_secs(3600) {
            return Err(invalid(&field("duration"), "must be at most 1h"));
        }
        if f.command_timeout.0.is_zero() || f.command_timeout.0 > Duration::from_secs(3600) {
            return Err(invalid(&field("command_timeout"), "must be in (0, 1h]"));
        }
        match f.kind {
            FaultKind::Proxy => {
                if f.target.is_some() || f.restart.is_some() {
                    return Err(invalid(
                        &field("target"),
                        "a proxy fault acts on the harness's proxy: remove target and restart",
                    ));
                }
                if proxy.is_none() {
                    return Err(invalid(
                        &field("kind"),
                        "a proxy fault needs the proxy: add a `proxy:` section (proxy: {} routes the system's own address)",
                    ));
                }
                let Some(t) = f.params.toxic else {
                    return Err(invalid(
                        &field("params.toxic"),
                        "a proxy fault names its toxic: latency, bandwidth, reset or blackhole",
                    ));
                };
                if f.duration.0.is_zero() {
                    return Err(invalid(&field("duration"), "a toxic lasts > 0"));
                }
                match t {
                    Toxic::Latency if f.params.latency.0.is_zero() => {
                        return Err(invalid(&field("params.latency"), "must be > 0"))
                    }
                    Toxic::Latency if f.params.jitter > f.params.latency => {
                        return Err(invalid(
                            &field("params.jitter"),
                            "must not exceed params.latency",
                        ))
                    }
                    Toxic::Bandwidth if f.params.bandwidth == 0 => {
                        return Err(invalid(
                            &field("params.bandwidth"),
                            "must be > 0 bytes per second",
                        ))
                    }
                    _ => {}
                }
            }
            FaultKind::Partition | FaultKind::Heal | FaultKind::KillLeader => {
                cluster_fault(f, cluster, &field)?;
            }
            FaultKind::Kill | FaultKind::Pause | FaultKind::Restart => {
                if f.params != FaultParams::default() {
                    return Err(invalid(
                        &field("params"),
                        format!("{} takes no params (they are the proxy's)", f.kind.name()),
                    ));
                }
                match (&f.target, f.kind) {
                    (Some(t), _) => {
                        Victim::parse(t).map_err(|m| invalid(&field("target"), m))?;
                    }
                    (None, FaultKind::Restart) => {}
                    (None, _) => {
                        return Err(invalid(
                            &field("target"),
                            format!("{} needs a target: {}", f.kind.name(), Victim::FORMS),
                        ))
                    }
                }
                if f.kind == FaultKind::Restart && f.restart.as_deref().is_none_or(str::is_empty) {
                    return Err(invalid(
                        &field("restart"),
                        "a restart fault runs this command (e.g. `pg_ctlcluster 15 faults restart`)",
                    ));
                }
                if f.kind == FaultKind::Pause && f.duration.0.is_zero() {
                    return Err(invalid(&field("duration"), "a pause lasts > 0"));
                }
                if f.kind == FaultKind::Pause && f.restart.is_some() {
                    return Err(invalid(
                        &field("restart"),
                        "a pause ends with SIGCONT; remove restart",
                    ));
                }
            }
        }
    }
    Ok(())
}

/// A fault on the `cluster:` nodes: its section, its sides, its leader.
fn cluster_fault(
    f: &FaultSpec,
    cluster: Option<&ClusterSection>,
    field: &dyn Fn(&str) -> String,
) -> Result<(), ScenarioError> {
    let kind = f.kind.name();
    let Some(c) = cluster else {
        return Err(invalid(
            &field("kind"),
            format!("{kind} acts on a cluster's nodes: add a `cluster:` section naming them (docs/reliability.md)"),
        ));
    };
    if f.target.is_some() || f.restart.is_some() {
        return Err(invalid(
            &field("target"),
            format!(
                "{kind} names nodes of `cluster:` (params), not a target or restart: remove them"
            ),
        ));
    }
    let p = &f.params;
    if p.toxic.is_some() || !p.latency.0.is_zero() || !p.jitter.0.is_zero() || p.bandwidth != 0 {
        return Err(invalid(
            &field("params"),
            format!("{kind} takes no toxic (toxics are the proxy's)"),
        ));
    }
    let known = |n: &str, k: &str| -> Result<(), ScenarioError> {
        if c.node(n).is_none() {
            return Err(invalid(
                &field(k),
                format!(
                    "{n:?} is not a node of cluster.nodes ({})",
                    c.names().join(", ")
                ),
            ));
        }
        Ok(())
    };
    match f.kind {
        FaultKind::Partition => {
            match (p.isolate.is_empty(), p.sides.is_empty()) {
                (false, false) | (true, true) => {
                    return Err(invalid(
                        &field("params"),
                        "a partition names `isolate: <node>` (or `isolate: leader`) or `sides: [[n1], [n2, n3]]`, one of them",
                    ))
                }
                (false, true) if p.isolate != "leader" => known(&p.isolate, "params.isolate")?,
                (false, true) => {}
                (true, false) => {
                    if p.sides.len() < 2 || p.sides.iter().any(Vec::is_empty) {
                        return Err(invalid(
                            &field("params.sides"),
                            "give two sides or more, none of them empty",
                        ));
                    }
                    let mut seen: Vec<&str> = Vec::new();
                    for n in p.sides.iter().flatten() {
                        known(n, "params.sides")?;
                        if seen.contains(&n.as_str()) {
                            return Err(invalid(
                                &field("params.sides"),
                                format!("{n} is on more than one side"),
                            ));
                        }
                        seen.push(n);
                    }
                    if let Some(n) = c.nodes.iter().find(|n| !seen.contains(&n.name.as_str())) {
                        return Err(invalid(
                            &field("params.sides"),
                            format!("{} is on no side: put every node of cluster.nodes on one", n.name),
                        ));
                    }
                }
            }
            if !p.stream.is_empty() && p.isolate != "leader" {
                return Err(invalid(
                    &field("params.stream"),
                    "names whose leader `isolate: leader` means; remove it, or isolate the leader",
                ));
            }
        }
        FaultKind::Heal if *p != FaultParams::default() || !f.duration.0.is_zero() => {
            return Err(invalid(
                &field("params"),
                "heal takes no params and no duration: it ends every partition",
            ));
        }
        FaultKind::KillLeader => {
            if !p.isolate.is_empty() || !p.sides.is_empty() {
                return Err(invalid(
                    &field("params"),
                    "kill-leader takes only `stream` (whose leader; empty: the node leading the most)",
                ));
            }
            if let Some((i, _)) = c
                .nodes
                .iter()
                .enumerate()
                .find(|(_, n)| n.pidfile.is_empty())
            {
                return Err(invalid(
                    &format!("cluster.nodes[{i}].pidfile"),
                    "kill-leader needs every node's pidfile (any may lead)",
                ));
            }
            if !f.duration.0.is_zero() {
                if let Some((i, _)) = c
                    .nodes
                    .iter()
                    .enumerate()
                    .find(|(_, n)| n.restart.is_empty())
                {
                    return Err(invalid(
                        &format!("cluster.nodes[{i}].restart"),
                        "a kill-leader with a duration starts the node again with its restart command: give every node one (or duration 0: it stays down)",
                    ));
                }
            }
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(yaml: &str) -> FaultSpec {
        serde_yaml::from_str(yaml).unwrap()
    }

    #[test]
    fn victims_parse_and_refuse_what_is_not_one() {
        assert_eq!(
            Victim::parse("proc:15/faults").unwrap(),
            Victim::Process("15/faults".into())
        );
        assert_eq!(Victim::parse("pid:4242").unwrap(), Victim::Pid(4242));
        for bad in ["tansu", "proc:", "proc:pg", "pid:1", "pid:x", "host:tansu"] {
            assert!(Victim::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_proxy_only_goes_to_loopback() {
        assert!(loopback_addr("127.0.0.1:5672").is_ok());
        assert!(loopback_addr("localhost:5672").is_ok());
        assert!(loopback_addr("[::1]:5672").is_ok());
        for bad in ["10.0.0.1:5672", "example.com:80", "127.0.0.1"] {
            assert!(loopback_addr(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn every_rule_names_its_field() {
        let d = Duration::from_secs(30);
        let dl = Duration::from_secs(30);
        let proxy = ProxySection::default();
        for (yaml, with_proxy, field) in [
            ("{kind: kill, at: 5s}", false, "faults[0].target"),
            (
                "{kind: kill, target: 'proc:tansu', at: 40s}",
                false,
                "faults[0].at",
            ),
            ("{kind: restart, at: 5s}", false, "faults[0].restart"),
            (
                "{kind: pause, target: 'pid:77', at: 5s}",
                false,
                "faults[0].duration",
            ),
            (
                "{kind: proxy, at: 5s, duration: 1s, params: {toxic: reset}}",
                false,
                "faults[0].kind",
            ),
            (
                "{kind: proxy, at: 5s, duration: 1s}",
                true,
                "faults[0].params.toxic",
            ),
            (
                "{kind: proxy, at: 5s, duration: 1s, params: {toxic: latency}}",
                true,
                "faults[0].params.latency",
            ),
            (
                "{kind: proxy, at: 5s, duration: 1s, params: {toxic: bandwidth}}",
                true,
                "faults[0].params.bandwidth",
            ),
            (
                "{kind: kill, target: 'proc:tansu', at: 5s, params: {toxic: reset}}",
                false,
                "faults[0].params",
            ),
            (
                "{kind: kill, target: 'host:x', at: 5s}",
                false,
                "faults[0].target",
            ),
        ] {
            let f = spec(yaml);
            let e = validate(&[f], with_proxy.then_some(&proxy), None, d, dl)
                .unwrap_err()
                .to_string();
            assert!(e.contains(field), "{yaml}: {e}");
        }
        let ok = spec("{kind: kill, target: 'proc:tansu', at: 5s, duration: 3s, restart: 'true'}");
        assert!(validate(&[ok], None, None, d, dl).is_ok());
        let e = validate(
            &[],
            Some(&ProxySection {
                upstream: "10.1.1.1:5672".into(),
            }),
            None,
            d,
            dl,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("proxy.upstream") && e.contains("loopback"),
            "{e}"
        );
        let e = validate(&[], None, None, d, Duration::from_millis(1))
            .unwrap_err()
            .to_string();
        assert!(e.contains("publish_deadline"), "{e}");
    }

    #[test]
    fn cluster_faults_name_nodes_of_the_cluster_and_their_field() {
        let d = Duration::from_secs(30);
        let dl = Duration::from_secs(30);
        let cluster: ClusterSection = serde_yaml::from_str(
            "nodes:\n  - {name: n1, netns: a, address: 10.77.1.1, port: 1, pidfile: /p1, restart: r1}\n  - {name: n2, netns: b, address: 10.77.1.2, port: 1, pidfile: /p2, restart: r2}\n  - {name: n3, netns: c, address: 10.77.1.3, port: 1, pidfile: /p3, restart: r3}\n",
        )
        .unwrap();
        for ok in [
            "{kind: partition, at: 5s, duration: 10s, params: {isolate: n2}}",
            "{kind: partition, at: 5s, params: {isolate: leader, stream: CB_x}}",
            "{kind: partition, at: 5s, params: {sides: [[n1], [n2, n3]]}}",
            "{kind: heal, at: 15s}",
            "{kind: kill-leader, at: 5s, duration: 10s}",
        ] {
            validate(&[spec(ok)], None, Some(&cluster), d, dl)
                .unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
        for (yaml, field) in [
            ("{kind: partition, at: 5s}", "faults[0].params"),
            (
                "{kind: partition, at: 5s, params: {isolate: n9}}",
                "faults[0].params.isolate",
            ),
            (
                "{kind: partition, at: 5s, params: {sides: [[n1], [n2]]}}",
                "faults[0].params.sides",
            ),
            (
                "{kind: partition, at: 5s, params: {sides: [[n1, n2], [n2, n3]]}}",
                "faults[0].params.sides",
            ),
            (
                "{kind: partition, at: 5s, params: {sides: [[n1, n2, n3]]}}",
                "faults[0].params.sides",
            ),
            (
                "{kind: partition, at: 5s, params: {isolate: n1, stream: x}}",
                "faults[0].params.stream",
            ),
            (
                "{kind: partition, at: 5s, target: 'pid:7', params: {isolate: n1}}",
                "faults[0].target",
            ),
            ("{kind: heal, at: 5s, duration: 1s}", "faults[0].params"),
            (
                "{kind: kill-leader, at: 5s, params: {isolate: n1}}",
                "faults[0].params",
            ),
        ] {
            let e = validate(&[spec(yaml)], None, Some(&cluster), d, dl)
                .unwrap_err()
                .to_string();
            assert!(e.contains(field), "{yaml}: {e}");
        }
        let e = validate(&[spec("{kind: heal, at: 5s}")], None, None, d, dl)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("faults[0].kind") && e.contains("cluster:"),
            "{e}"
        );
        let mut no_restart = cluster.clone();
        no_restart.nodes[1].restart.clear();
        let e = validate(
            &[spec("{kind: kill-leader, at: 5s, duration: 10s}")],
            None,
            Some(&no_restart),
            d,
            dl,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("cluster.nodes[1].restart"), "{e}");
        let mut no_pid = cluster.clone();
        no_pid.nodes[2].pidfile.clear();
        let e = validate(
            &[spec("{kind: kill-leader, at: 5s}")],
            None,
            Some(&no_pid),
            d,
            dl,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("cluster.nodes[2].pidfile"), "{e}");
    }
}
