//! The management plugin's HTTP API (`rabbitmq.management_url`), for what AMQP does
//! not tell: where each queue leads and is kept (`/api/queues/{vhost}`), which node
//! each of the adapter's connections is on (`/api/connections`, matched by the
//! connection name the adapter gives each connection), the cluster's nodes
//! (`/api/nodes`), and the names reset deletes. Every request is bounded by
//! [`TIMEOUT`]; the password goes in the `Authorization` header only and never into
//! a text. The JSON is read by pure functions, tested without a server.
//!
//! When `management_url`'s host is `url`'s, the other nodes' management APIs are
//! taken to be at the same scheme and port on their own hosts (`rabbitmq.nodes`): a
//! question the node last answering does not answer goes to the next, so placement
//! still answers while that node is down. Otherwise only `management_url` is asked.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::options::{path_segment, ManagementLogin, RabbitOptions};
use crate::error::BrokerError;
use crate::placement::Placement;

/// Give up on one management request after this long.
pub(super) const TIMEOUT: Duration = Duration::from_secs(5);

/// A connect to one node's management API gives up after this long (another node
/// may answer within [`TIMEOUT`]).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// A client of the cluster's management APIs.
#[derive(Debug, Clone)]
pub(super) struct Management {
    http: reqwest::Client,
    login: ManagementLogin,
    /// `login.base`, then the other nodes' bases when they can be told.
    bases: Vec<String>,
    /// The base that answered last, asked first.
    last: Arc<AtomicUsize>,
}

/// `base` and, when its host is the AMQP URL's, the same URL on each other node's
/// host.
fn bases(o: &RabbitOptions, base: &str) -> Vec<String> {
    let host = |u: &str| url::Url::parse(u).ok()?.host_str().map(str::to_string);
    let mut out = vec![base.to_string()];
    let (Some(mine), Some(first)) = (host(base), host(&o.url)) else {
        return out;
    };
    if mine != first {
        return out;
    }
    for n in &o.nodes {
        let Some(h) = host(n) else { continue };
        let Ok(mut u) = url::Url::parse(base) else {
            continue;
        };
        if u.set_host(Some(&h)).is_ok() {
            let b = u.as_str().trim_end_matches('/').to_string();
            if !out.contains(&b) {
                out.push(b);
            }
        }
    }
    out
}

impl Management {
    /// `None` when `management_url` is empty.
    pub(super) fn new(o: &RabbitOptions) -> Result<Option<Management>, BrokerError> {
        let Some(login) = o.management()? else {
            return Ok(None);
        };
        // reqwest asks for the process's rustls provider even for http://.
        crate::tls::client::provider();
        let mut builder = reqwest::Client::builder()
            .no_proxy()
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(TIMEOUT);
        if login.base.starts_with("https://") {
            builder = builder.tls_backend_preconfigured(o.tls.client_config("rabbitmq")?);
        }
        let http = builder.build().map_err(|e| BrokerError::Config {
            field: "rabbitmq.management_url".into(),
            message: format!("cannot build the HTTP client: {e}"),
        })?;
        Ok(Some(Management {
            bases: bases(o, &login.base),
            http,
            login,
            last: Arc::new(AtomicUsize::new(0)),
        }))
    }

    /// The vhost every queue of the run is in.
    fn vhost(&self) -> String {
        path_segment(&self.login.vhost)
    }

    /// GET `path` as JSON from the node that answered last or, failing that, the
    /// next, all within [`TIMEOUT`]; the error says why for each, never the password.
    async fn get(&self, path: &str) -> Result<Value, String> {
        let deadline = tokio::time::Instant::now() + TIMEOUT;
        let first = self.last.load(Ordering::Relaxed);
        let mut why = Vec::new();
        for k in 0..self.bases.len() {
            let i = (first + k) % self.bases.len();
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                break;
            }
            match self.get_from(&self.bases[i], path, left).await {
                Ok(v) => {
                    self.last.store(i, Ordering::Relaxed);
                    return Ok(v);
                }
                Err(e) => why.push(e),
            }
        }
        Err(why.join("; "))
    }

    async fn get_from(&self, base: &str, path: &str, within: Duration) -> Result<Value, String> {
        let url = format!("{base}{path}");
        let asked = async {
            let r = self
                .http
                .get(&url)
                .basic_auth(&self.login.user, self.login.password.as_deref())
                .send()
                .await
                .map_err(|e| format!("GET {url}: {e}"))?;
            let status = r.status();
            let body = r.text().await.map_err(|e| format!("GET {url}: {e}"))?;
            if !status.is_success() {
                let hint = if status.as_u16() == 401 {
                    " (fix the user in rabbitmq.management_url or rabbitmq.url, and its password; the user needs the monitoring tag)"
                } else {
                    ""
                };
                let body: String = body.chars().take(200).collect();
                return Err(format!("GET {url}: {status}: {}{hint}", body.trim()));
            }
            serde_json::from_str(&body).map_err(|e| format!("GET {url}: not JSON: {e}"))
        };
        let text = match tokio::time::timeout(within, asked).await {
            Ok(r) => r,
            Err(_) => Err(format!("GET {url}: no answer within {within:?}")),
        };
        text.map_err(|e| match &self.login.password {
            Some(p) if !p.is_empty() => e.replace(p.as_str(), "***"),
            _ => e,
        })
    }

    /// Every queue of the vhost, with the columns placement needs.
    pub(super) async fn queues(&self) -> Result<Value, String> {
        self.get(&format!(
            "/api/queues/{}?columns=name,type,node,leader,members",
            self.vhost()
        ))
        .await
    }

    /// One queue (its members count for the provenance).
    pub(super) async fn queue(&self, name: &str) -> Result<Value, String> {
        self.get(&format!(
            "/api/queues/{}/{}",
            self.vhost(),
            path_segment(name)
        ))
        .await
    }

    /// Every client connection the cluster lists.
    pub(super) async fn connections(&self) -> Result<Value, String> {
        self.get("/api/connections?columns=name,node,user_provided_name,client_properties")
            .await
    }

    /// The cluster's nodes.
    pub(super) async fn nodes(&self) -> Result<Value, String> {
        self.get("/api/nodes?columns=name,running").await
    }

    /// The names of every queue or exchange (`what`: `queues`, `exchanges`) of the vhost.
    pub(super) async fn names(&self, what: &str) -> Result<Vec<String>, String> {
        let v = self
            .get(&format!("/api/{what}/{}?columns=name", self.vhost()))
            .await?;
        Ok(rows(&v)
            .iter()
            .filter_map(|r| text(r, "name"))
            .map(str::to_string)
            .collect())
    }
}

fn rows(v: &Value) -> &[Value] {
    v.as_array().map(Vec::as_slice).unwrap_or_default()
}

/// A non-empty text field.
fn text<'a>(row: &'a Value, field: &str) -> Option<&'a str> {
    row.get(field)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// The placement of `queues` from a `/api/queues/{vhost}` listing: each queue's
/// leader (`leader` when present, else `node`; neither: leaderless) and replicas (the
/// leader, then the other `members` of a quorum queue; the node of a classic one);
/// a queue missing from the listing is unanswered.
pub(super) fn place_queues(listing: &Value, queues: &[String]) -> Placement {
    let by_name: HashMap<&str, &Value> = rows(listing)
        .iter()
        .filter_map(|r| Some((text(r, "name")?, r)))
        .collect();
    let mut p = Placement::default();
    for q in queues {
        let Some(row) = by_name.get(q.as_str()) else {
            p.unanswered.insert(
                q.clone(),
                "not in the management API's listing of the vhost".into(),
            );
            continue;
        };
        let leader = text(row, "leader").or_else(|| text(row, "node"));
        let mut replicas: Vec<String> = leader.iter().map(|l| l.to_string()).collect();
        let members = row
            .get("members")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        for m in members.iter().filter_map(Value::as_str) {
            if !replicas.iter().any(|r| r == m) {
                replicas.push(m.to_string());
            }
        }
        match leader {
            Some(l) => {
                p.leaders.insert(q.clone(), l.to_string());
            }
            None => p.leaderless.push(q.clone()),
        }
        p.replicas.insert(q.clone(), replicas);
    }
    p
}

/// The node of each connection named in `names` (in that order) from an
/// `/api/connections` listing, matched by the client-provided name
/// (`user_provided_name`, or `client_properties.connection_name`); a name listed
/// on no node, or on two (an old connection not yet gone), is left out.
pub(super) fn connected(listing: &Value, names: &[String]) -> Vec<String> {
    let mut nodes: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for r in rows(listing) {
        let name = text(r, "user_provided_name").or_else(|| {
            r.get("client_properties")
                .and_then(|c| text(c, "connection_name"))
        });
        if let (Some(name), Some(node)) = (name, text(r, "node")) {
            nodes.entry(name).or_default().push(node);
        }
    }
    names
        .iter()
        .filter_map(|n| match nodes.get(n.as_str()).map(Vec::as_slice) {
            Some([node]) => Some(node.to_string()),
            _ => None,
        })
        .collect()
}

/// The queue's members count, from `/api/queues/{vhost}/{name}`.
pub(super) fn members(queue: &Value) -> Option<usize> {
    queue.get("members").and_then(Value::as_array).map(Vec::len)
}

/// "cb@a (running), cb@b (not running)" from `/api/nodes`.
pub(super) fn nodes_text(nodes: &Value) -> String {
    rows(nodes)
        .iter()
        .filter_map(|r| {
            let running = r.get("running").and_then(Value::as_bool).unwrap_or(false);
            Some(format!(
                "{} ({})",
                text(r, "name")?,
                if running { "running" } else { "not running" }
            ))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_other_nodes_management_apis_are_guessed_only_beside_the_amqp_url() {
        let o = RabbitOptions {
            url: "amqp://guest:guest@10.0.0.1:5672/%2f".into(),
            nodes: vec![
                "amqp://guest:guest@10.0.0.2:5672/%2f".into(),
                "amqp://guest:guest@10.0.0.3:5672/%2f".into(),
            ],
            ..Default::default()
        };
        assert_eq!(
            bases(&o, "http://10.0.0.1:15672"),
            [
                "http://10.0.0.1:15672",
                "http://10.0.0.2:15672",
                "http://10.0.0.3:15672"
            ]
        );
        assert_eq!(
            bases(&o, "https://mgmt.internal:443/rabbit"),
            ["https://mgmt.internal:443/rabbit"],
            "a management URL elsewhere is the only one asked"
        );
    }

    #[test]
    fn quorum_leaders_classic_nodes_and_the_unlisted() {
        let listing: Value = serde_json::from_str(
            r#"[
            {"name":"cb.a.g.l0","type":"quorum","node":"cb@h1","leader":"cb@h2",
             "members":["cb@h1","cb@h2","cb@h3"]},
            {"name":"cb.a.g.l1","type":"quorum","node":"cb@h3",
             "members":["cb@h1","cb@h3"]},
            {"name":"cb.a.g.l2","type":"quorum","members":["cb@h1"]},
            {"name":"cb.a.g.l3","type":"classic","node":"cb@h1"},
            {"name":"other","type":"classic","node":"cb@h1"}
        ]"#,
        )
        .unwrap();
        let queues: Vec<String> = (0..5).map(|i| format!("cb.a.g.l{i}")).collect();
        let p = place_queues(&listing, &queues);
        assert_eq!(p.leaders["cb.a.g.l0"], "cb@h2", "leader wins over node");
        assert_eq!(p.replicas["cb.a.g.l0"], ["cb@h2", "cb@h1", "cb@h3"]);
        assert_eq!(p.leaders["cb.a.g.l1"], "cb@h3", "node when no leader field");
        assert_eq!(p.replicas["cb.a.g.l1"], ["cb@h3", "cb@h1"]);
        assert_eq!(p.leaderless, ["cb.a.g.l2"]);
        assert_eq!(p.replicas["cb.a.g.l2"], ["cb@h1"]);
        assert_eq!(p.leaders["cb.a.g.l3"], "cb@h1");
        assert_eq!(p.replicas["cb.a.g.l3"], ["cb@h1"]);
        assert_eq!(p.unanswered.keys().collect::<Vec<_>>(), ["cb.a.g.l4"]);
        assert!(!p.leaders.contains_key("other"));
        assert_eq!(
            place_queues(&Value::Null, &queues[..1]).unanswered.len(),
            1,
            "an answer that is not a list places nothing"
        );
    }

    #[test]
    fn connections_are_matched_by_their_name_and_a_doubled_name_is_left_out() {
        let listing: Value = serde_json::from_str(
            r#"[
            {"name":"10.0.0.9:1 -> 10.0.0.1:5672","node":"cb@h1",
             "user_provided_name":"crossbench-publish#7"},
            {"name":"x","node":"cb@h2",
             "client_properties":{"connection_name":"crossbench-consume-0#7"}},
            {"name":"y","node":"cb@h1","user_provided_name":"crossbench-consume-1#7"},
            {"name":"z","node":"cb@h3","user_provided_name":"crossbench-consume-1#7"},
            {"name":"w","node":"cb@h3","user_provided_name":"someone-else"}
        ]"#,
        )
        .unwrap();
        let names: Vec<String> = [
            "crossbench-publish#7",
            "crossbench-consume-0#7",
            "crossbench-consume-1#7",
            "crossbench-consume-2#7",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(connected(&listing, &names), ["cb@h1", "cb@h2"]);
    }

    #[test]
    fn members_and_nodes() {
        let q: Value =
            serde_json::from_str(r#"{"name":"q","members":["a","b","c"],"leader":"a"}"#).unwrap();
        assert_eq!(members(&q), Some(3));
        assert_eq!(members(&serde_json::json!({"name":"q"})), None);
        let n: Value = serde_json::from_str(
            r#"[{"name":"cb@h1","running":true},{"name":"cb@h2","running":false}]"#,
        )
        .unwrap();
        assert_eq!(nodes_text(&n), "cb@h1 (running), cb@h2 (not running)");
    }
}
