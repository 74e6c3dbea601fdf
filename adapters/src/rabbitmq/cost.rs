//! Broker-side cost data from `rabbitmqctl` (no management plugin needed): queue
//! depths and memory of the run's queues, node memory, and alarms.
//!
//! `rabbitmqctl` talks to the node over Erlang distribution, so it works only on
//! the broker's host with its Erlang cookie (root or the `rabbitmq` user). Each call
//! boots a small Erlang VM: about a second or three, so use it at the edges of a run.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::Value;

/// What one snapshot saw.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// Queues whose name starts with one of the prefixes asked for.
    pub queues: u64,
    /// Ready + unacknowledged messages in those queues (lags for quorum queues).
    pub messages: u64,
    pub messages_unacked: u64,
    /// Sum of the queues' own memory (bytes, as the broker reports it).
    pub queue_memory_bytes: u64,
    /// Node memory as `rabbitmqctl status` reports it (bytes): total (rss strategy).
    pub node_memory_bytes: u64,
    /// Any resource alarm (memory or disk) raised.
    pub alarm: bool,
    /// Memory alarm specifically.
    pub memory_alarm: bool,
    /// OS pid of the node's `beam.smp`.
    pub beam_pid: u64,
}

impl Snapshot {
    /// Counter form, for `broker_stats`.
    pub fn to_counters(&self, prefix: &str) -> BTreeMap<String, u64> {
        let mut m = BTreeMap::new();
        let mut put = |k: &str, v: u64| {
            m.insert(format!("{prefix}{k}"), v);
        };
        put("queues", self.queues);
        put("queue_messages", self.messages);
        put("queue_messages_unacked", self.messages_unacked);
        put("queue_memory_bytes", self.queue_memory_bytes);
        put("node_memory_bytes", self.node_memory_bytes);
        put("alarm", u64::from(self.alarm));
        put("memory_alarm", u64::from(self.memory_alarm));
        put("beam_pid", self.beam_pid);
        m
    }
}

/// Run `ctl args…` with a deadline; stdout on success.
pub fn run_ctl(ctl: &str, args: &[&str], timeout: Duration) -> Result<String, String> {
    let ctl = ctl.to_string();
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let (tx, rx) = mpsc::channel();
    let shown = format!("{ctl} {}", args.join(" "));
    std::thread::spawn(move || {
        let out = Command::new(&ctl).args(&args).stdin(Stdio::null()).output();
        let _ = tx.send(out);
    });
    match rx.recv_timeout(timeout) {
        Ok(Ok(o)) if o.status.success() => Ok(String::from_utf8_lossy(&o.stdout).into_owned()),
        Ok(Ok(o)) => Err(format!(
            "`{shown}` exited with {}: {}",
            o.status,
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Ok(Err(e)) => Err(format!("cannot run `{shown}`: {e}")),
        Err(_) => Err(format!("`{shown}` did not answer within {timeout:?}")),
    }
}

fn json_rows(text: &str) -> Result<Vec<Value>, String> {
    let v: Value =
        serde_json::from_str(text.trim()).map_err(|e| format!("rabbitmqctl json: {e}"))?;
    Ok(v.as_array().cloned().unwrap_or_default())
}

/// Names of all queues (or exchanges) of vhost `/`.
pub fn list_names(ctl: &str, what: &str, timeout: Duration) -> Result<Vec<String>, String> {
    let cmd = match what {
        "queues" => "list_queues",
        "exchanges" => "list_exchanges",
        other => return Err(format!("unknown listing {other}")),
    };
    let text = run_ctl(ctl, &["-q", cmd, "name", "--formatter", "json"], timeout)?;
    Ok(json_rows(&text)?
        .iter()
        .filter_map(|r| r.get("name").and_then(Value::as_str).map(str::to_string))
        .collect())
}

/// Queue depths / memory of queues whose name starts with any of `prefixes`, plus
/// node memory and alarms.
pub fn snapshot(ctl: &str, prefixes: &[String], timeout: Duration) -> Result<Snapshot, String> {
    let mut s = Snapshot::default();
    let text = run_ctl(
        ctl,
        &[
            "-q",
            "list_queues",
            "name",
            "messages_ready",
            "messages_unacknowledged",
            "memory",
            "--formatter",
            "json",
        ],
        timeout,
    )?;
    let num = |r: &Value, k: &str| r.get(k).and_then(Value::as_u64).unwrap_or(0);
    for r in json_rows(&text)? {
        let name = r.get("name").and_then(Value::as_str).unwrap_or("");
        if prefixes.iter().any(|p| name.starts_with(p.as_str())) {
            s.queues += 1;
            s.messages += num(&r, "messages_ready") + num(&r, "messages_unacknowledged");
            s.messages_unacked += num(&r, "messages_unacknowledged");
            s.queue_memory_bytes += num(&r, "memory");
        }
    }
    let text = run_ctl(ctl, &["-q", "status", "--formatter", "json"], timeout)?;
    let st: Value =
        serde_json::from_str(text.trim()).map_err(|e| format!("rabbitmqctl status json: {e}"))?;
    if let Some(mem) = st.get("memory") {
        s.node_memory_bytes = mem
            .get("total")
            .and_then(|t| t.get("rss").or_else(|| t.get("erlang")))
            .and_then(Value::as_u64)
            .unwrap_or(0);
    }
    if let Some(alarms) = st.get("alarms").and_then(Value::as_array) {
        s.alarm = !alarms.is_empty();
        s.memory_alarm = alarms.iter().any(|a| a.to_string().contains("memory"));
    }
    s.beam_pid = st
        .get("pid")
        .and_then(|p| {
            p.as_u64()
                .or_else(|| p.as_str().and_then(|x| x.parse().ok()))
        })
        .unwrap_or(0);
    Ok(s)
}
