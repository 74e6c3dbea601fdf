//! Scenario section `rabbitmq`.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::options::OptionsError;

/// Queue type of every queue the adapter declares (the durability tier).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum QueueType {
    /// Classic durable queues, persistent messages: written to disk, not fsynced per
    /// message before the publisher confirm.
    #[default]
    Classic,
    /// Quorum (Raft) queues: the confirm follows an fsync of the Raft log.
    Quorum,
}

impl QueueType {
    pub fn name(&self) -> &'static str {
        match self {
            QueueType::Classic => "classic",
            QueueType::Quorum => "quorum",
        }
    }
}

/// How keys are placed on queues.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Idiom {
    /// One queue per (topic, group, lane); the client hashes key → lane (FNV-1a).
    #[default]
    LaneQueues,
    /// Per (topic, group) an `x-consistent-hash` exchange over `queues_per_group`
    /// queues; the broker hashes the routing key (= the ordering key).
    HashExchange,
}

impl Idiom {
    pub fn name(&self) -> &'static str {
        match self {
            Idiom::LaneQueues => "lane-queues",
            Idiom::HashExchange => "hash-exchange",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RabbitOptions {
    /// AMQP URL (its password is redacted in every file the harness writes and in
    /// every error the adapter produces).
    pub url: String,
    /// `classic` or `quorum`.
    pub queue_type: QueueType,
    /// `lane-queues` or `hash-exchange`.
    pub idiom: Idiom,
    /// hash-exchange only: queues behind each group's consistent-hash exchange.
    /// 0 = auto = min(lanes, 64).
    pub queues_per_group: u64,
    /// basic.qos prefetch per consumer; 0 = auto = the scenario's `batch`.
    pub prefetch: u16,
    /// After the first delivery, wait at most this long for more (up to `batch`).
    #[serde(with = "crate::duration_text")]
    pub linger: Duration,
    /// Confirm-mode channels of the publish connection (a key always uses the same one).
    pub publish_channels: usize,
    /// Minimum number of consumer connections; raised so that no connection carries
    /// more than `channels_per_connection` consumer channels.
    pub consumer_connections: usize,
    /// Upper bound of consumer channels per connection (server `channel_max` is 2047
    /// by default).
    pub channels_per_connection: usize,
    /// Concurrent channels used to declare / delete the topology in `setup`.
    pub setup_channels: usize,
    /// Run `rabbitmqctl` at the end of a run (from `counters()`) for queue depths,
    /// memory and alarms; needs the CLI and the Erlang cookie on this host.
    pub cost_snapshot: bool,
    /// The `rabbitmqctl` command (used by reset's listing and the cost snapshot).
    pub rabbitmqctl: String,
    /// TLS to the server (adapters/src/tls.rs); needs an `amqps://` URL. An `amqps://`
    /// URL with no `tls` block verifies against the system's trust roots.
    pub tls: crate::tls::TlsOptions,
    /// The variable that holds the URL user's password (never the scenario's text).
    pub password_env: String,
    /// Or a file whose first line is the password.
    pub password_file: String,
    /// The AMQP URLs of the cluster's other nodes (`amqp://guest:guest@10.0.0.2:5672/%2f`),
    /// default none. The same rules as `url` (a password from `password_env` or
    /// `password_file` goes into each that names a user and no password; `rabbitmq.tls`
    /// applies to every node, so with TLS every one is `amqps://`). Connections dial
    /// `url` first, and a connection that is lost reconnects to the next node in turn
    /// (`url`, `nodes[0]`, `nodes[1]`, …, round again), so a publisher or consumer whose
    /// node went away goes on on another. Consumer connection `i` starts on node
    /// `i mod n` (`url` being node 0), spreading them over the cluster from the start.
    /// A proxy (`proxy:`) stands in front of one node: not with `nodes`.
    pub nodes: Vec<String>,
    /// The management plugin's HTTP API of one node (`http://10.0.0.1:15672`), default
    /// none. Logged in to with the AMQP URL's user and password unless this URL names a
    /// user of its own (`http://monitor:secret@host:15672`); the password is never
    /// written anywhere. When set, `placement()` reads where each queue leads and is
    /// kept and which node each connection is on from it, setup records the cluster's
    /// nodes (and, for quorum queues, the first queue's members) in the provenance, and
    /// reset lists the run's queues and exchanges through it (in the URL's vhost)
    /// instead of with `rabbitmqctl`. An `https://` URL is checked with `rabbitmq.tls`.
    /// When its host is `url`'s, the other nodes' APIs are taken to be at the same
    /// scheme and port on each of `nodes`' hosts, and asked when this one does not
    /// answer (a node that is down).
    pub management_url: String,
}

impl Default for RabbitOptions {
    fn default() -> Self {
        RabbitOptions {
            url: "amqp://guest:guest@127.0.0.1:5672/%2f".into(),
            queue_type: QueueType::Classic,
            idiom: Idiom::LaneQueues,
            queues_per_group: 0,
            prefetch: 0,
            linger: Duration::from_millis(10),
            publish_channels: 16,
            consumer_connections: 2,
            channels_per_connection: 1000,
            setup_channels: 8,
            cost_snapshot: true,
            rabbitmqctl: "rabbitmqctl".into(),
            tls: crate::tls::TlsOptions::default(),
            password_env: String::new(),
            password_file: String::new(),
            nodes: Vec::new(),
            management_url: String::new(),
        }
    }
}

impl RabbitOptions {
    /// Whether the connection is TLS (an `amqps://` URL).
    pub fn amqps(&self) -> bool {
        self.url.starts_with("amqps://")
    }

    /// The URL the client connects with: the password from `password_env` or
    /// `password_file` put in when the URL names none. Held in memory only (every
    /// text the adapter writes is redacted).
    pub fn connect_url(&self) -> Result<String, OptionsError> {
        self.node_connect_url(0)
    }

    /// How many nodes the adapter dials: `url` and every one of `nodes`.
    pub fn node_count(&self) -> usize {
        1 + self.nodes.len()
    }

    /// Node `i`'s AMQP URL as written: 0 is `url`, `i` is `nodes[i - 1]` (wrapping).
    pub fn node_url(&self, i: usize) -> &str {
        match i % self.node_count() {
            0 => &self.url,
            n => &self.nodes[n - 1],
        }
    }

    /// The scenario field of node `i` (`url`, `nodes[0]`, …), without the section.
    pub fn node_field(&self, i: usize) -> String {
        match i % self.node_count() {
            0 => "url".into(),
            n => format!("nodes[{}]", n - 1),
        }
    }

    /// [`RabbitOptions::connect_url`] of node `i`.
    pub fn node_connect_url(&self, i: usize) -> Result<String, OptionsError> {
        let field = self.node_field(i);
        let raw = self.node_url(i);
        let pw = crate::tls::PasswordSource {
            section: "rabbitmq",
            env: &self.password_env,
            file: &self.password_file,
        }
        .read()?;
        let Some(pw) = pw else {
            return Ok(raw.to_string());
        };
        let mut u = url::Url::parse(raw)
            .map_err(|e| OptionsError::new("rabbitmq", &field, format!("does not parse: {e}")))?;
        if u.password().is_none() {
            if u.username().is_empty() {
                return Err(OptionsError::new(
                    "rabbitmq",
                    &field,
                    "a password_env or password_file needs a user in the URL (amqps://user@host:5671/vhost)",
                ));
            }
            u.set_password(Some(&pw)).map_err(|_| {
                OptionsError::new("rabbitmq", &field, "this URL cannot carry a password")
            })?;
        }
        Ok(u.to_string())
    }

    /// Every password the section's URLs carry or are given (the AMQP URLs', the
    /// management URL's, the one from `password_env` or `password_file`): what an error
    /// text must never show.
    pub fn secrets(&self) -> Vec<String> {
        let mut out: Vec<String> = (0..self.node_count())
            .filter_map(|i| self.node_connect_url(i).ok())
            .chain(std::iter::once(self.management_url.clone()))
            .filter_map(|u| url::Url::parse(&u).ok()?.password().map(str::to_string))
            .filter(|p| !p.is_empty())
            .collect();
        for p in out.clone() {
            let decoded = percent_decoded(&p);
            if decoded != p {
                out.push(decoded);
            }
        }
        out.sort();
        out.dedup();
        // Longest first, so a password that contains another is replaced whole.
        out.sort_by_key(|p| std::cmp::Reverse(p.len()));
        out
    }

    /// The management API's base URL without credentials, its user and its password
    /// (its own, or else the AMQP URL's), and the vhost of the AMQP URL. `None` when
    /// `management_url` is empty.
    pub fn management(&self) -> Result<Option<ManagementLogin>, OptionsError> {
        if self.management_url.is_empty() {
            return Ok(None);
        }
        let bad = |m: String| OptionsError::new("rabbitmq", "management_url", m);
        let mut m = url::Url::parse(&self.management_url).map_err(|e| {
            bad(format!(
                "does not parse: {e} (give the management plugin's http://host:15672)"
            ))
        })?;
        if !matches!(m.scheme(), "http" | "https") || m.host_str().is_none_or(str::is_empty) {
            return Err(bad(
                "must be an http:// or https:// URL with a host (http://10.0.0.1:15672)".into(),
            ));
        }
        let amqp = url::Url::parse(&self.connect_url()?)
            .map_err(|e| OptionsError::new("rabbitmq", "url", format!("does not parse: {e}")))?;
        let (user, password) = if m.username().is_empty() {
            (
                percent_decoded(amqp.username()),
                amqp.password().map(percent_decoded),
            )
        } else {
            (
                percent_decoded(m.username()),
                m.password().map(percent_decoded),
            )
        };
        let _ = m.set_username("");
        let _ = m.set_password(None);
        let vhost = match amqp.path().trim_start_matches('/') {
            "" => "/".to_string(),
            v => percent_decoded(v),
        };
        Ok(Some(ManagementLogin {
            base: m.as_str().trim_end_matches('/').to_string(),
            user: if user.is_empty() {
                "guest".into()
            } else {
                user
            },
            password,
            vhost,
        }))
    }
    /// The URL's host, for a certificate's name and for messages.
    pub fn host(&self) -> String {
        url::Url::parse(&self.url)
            .ok()
            .and_then(|u| u.host_str().map(str::to_string))
            .unwrap_or_default()
    }

    /// Queues per group for the hash-exchange idiom given the (clamped) lane count.
    pub fn hash_queues(&self, lanes: u64) -> u64 {
        let q = if self.queues_per_group == 0 {
            lanes.min(64)
        } else {
            self.queues_per_group
        };
        q.max(1)
    }
}

/// How to reach the management API ([`RabbitOptions::management`]).
#[derive(Clone, PartialEq, Eq)]
pub struct ManagementLogin {
    /// `http[s]://host:port[/prefix]`, no credentials, no trailing slash.
    pub base: String,
    pub user: String,
    pub password: Option<String>,
    /// The AMQP URL's vhost, decoded (`/` by default).
    pub vhost: String,
}

impl std::fmt::Debug for ManagementLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ManagementLogin")
            .field("base", &self.base)
            .field("user", &self.user)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .field("vhost", &self.vhost)
            .finish()
    }
}

/// `%xx` escapes decoded (a URL's user, password or vhost); an invalid escape stays.
pub fn percent_decoded(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let hex = |c: u8| (c as char).to_digit(16);
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// One path segment (the vhost `/` is `%2F` in a management API path).
pub use crate::percent::segment as path_segment;

impl crate::options::Section for RabbitOptions {
    fn validate(&self) -> Result<(), OptionsError> {
        let options = self;
        let cfg = |field: &str, message: &str| OptionsError::new("rabbitmq", field, message);
        if !(options.url.starts_with("amqp://") || options.url.starts_with("amqps://")) {
            return Err(cfg("url", "must start with amqp:// or amqps://"));
        }
        if !(1..=1024).contains(&options.publish_channels) {
            return Err(cfg("publish_channels", "must be between 1 and 1024"));
        }
        if !(1..=1024).contains(&options.consumer_connections) {
            return Err(cfg("consumer_connections", "must be between 1 and 1024"));
        }
        if !(1..=2047).contains(&options.channels_per_connection) {
            return Err(cfg(
                "channels_per_connection",
                "must be between 1 and 2047 (the server's default channel_max)",
            ));
        }
        if !(1..=256).contains(&options.setup_channels) {
            return Err(cfg("setup_channels", "must be between 1 and 256"));
        }
        if options.linger > Duration::from_secs(10) {
            return Err(cfg("linger", "must be at most 10s"));
        }
        options.tls.validate("rabbitmq")?;
        if options.tls.on() && !options.amqps() {
            return Err(cfg(
                "url",
                "rabbitmq.tls is set but the URL is amqp://: give the TLS listener's amqps:// URL (port 5671 by default)",
            ));
        }
        options.connect_url()?;
        for (n, node) in options.nodes.iter().enumerate() {
            let field = format!("nodes[{n}]");
            let bad = |m: String| Err(OptionsError::new("rabbitmq", &field, m));
            let shown = crate::redact::redact_url_passwords(node);
            if !(node.starts_with("amqp://") || node.starts_with("amqps://")) {
                return bad(format!(
                    "{shown} must start with amqp:// or amqps:// (another node's AMQP URL, amqp://guest:guest@10.0.0.2:5672/%2f)"
                ));
            }
            let u = url::Url::parse(node).map_err(|e| {
                OptionsError::new("rabbitmq", &field, format!("{shown} does not parse: {e}"))
            })?;
            if u.host_str().is_none_or(str::is_empty) {
                return bad(format!("{shown} names no host"));
            }
            if node.starts_with("amqps://") != options.amqps() {
                return bad(format!(
                    "{shown} and rabbitmq.url ({}) differ in TLS: every node is dialed the same way, give each the scheme of rabbitmq.url",
                    crate::redact::redact_url_passwords(&options.url)
                ));
            }
            options.node_connect_url(n + 1)?;
        }
        options.management()?;
        Ok(())
    }

    fn warnings(&self) -> Vec<String> {
        let mut w = self.tls.warnings("rabbitmq");
        // The broker's well-known default login is no secret.
        for i in 0..self.node_count() {
            if url::Url::parse(self.node_url(i))
                .is_ok_and(|u| u.password().is_some_and(|p| p != "guest"))
            {
                w.push(crate::tls::password_in_text(&format!(
                    "rabbitmq.{}",
                    self.node_field(i)
                )));
            }
        }
        if url::Url::parse(&self.management_url)
            .is_ok_and(|u| u.password().is_some_and(|p| p != "guest"))
        {
            w.push(crate::tls::password_in_text("rabbitmq.management_url"));
        }
        w
    }

    /// The Erlang VM of the node.
    fn sample_targets(&self) -> Vec<(String, String)> {
        vec![("rabbitmq".into(), "proc:beam.smp".into())]
    }

    fn endpoint(&self) -> Result<String, String> {
        if !self.nodes.is_empty() {
            return Err("rabbitmq.nodes names other nodes; the proxy routes one (leave nodes out to put a proxy in front of rabbitmq.url)".into());
        }
        let port = if self.amqps() { 5671 } else { 5672 };
        crate::options::url_endpoint(&self.url, "rabbitmq.url", port)
    }

    /// Through a proxy, the server's certificate is still checked against the name
    /// the URL gave, not the proxy's address.
    fn routed_to(&self, addr: &str) -> Result<Self, String> {
        self.endpoint()?;
        let mut tls = self.tls.clone();
        if self.amqps() && tls.server_name.is_empty() {
            tls.server_name = self.host();
        }
        Ok(RabbitOptions {
            url: crate::options::url_routed(&self.url, "rabbitmq.url", addr)?,
            tls,
            ..self.clone()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_needs_amqps_and_a_password_needs_a_user() {
        use crate::options::Section;
        let o = RabbitOptions {
            tls: crate::tls::TlsOptions {
                enabled: true,
                ..Default::default()
            },
            ..RabbitOptions::default()
        };
        let e = o.validate().unwrap_err().to_string();
        assert!(e.contains("rabbitmq.url") && e.contains("amqps://"), "{e}");
        std::env::set_var("CROSSBENCH_TEST_RABBIT_PW", "pw");
        let o = RabbitOptions {
            url: "amqps://127.0.0.1:5671/%2f".into(),
            password_env: "CROSSBENCH_TEST_RABBIT_PW".into(),
            ..RabbitOptions::default()
        };
        assert!(o
            .validate()
            .unwrap_err()
            .to_string()
            .contains("needs a user"));
        let o = RabbitOptions {
            url: "amqps://bench@mq.internal/%2f".into(),
            ..o
        };
        assert!(o.validate().is_ok());
        assert_eq!(o.connect_url().unwrap(), "amqps://bench:pw@mq.internal/%2f");
        assert_eq!(o.endpoint().unwrap(), "mq.internal:5671");
        let routed = o.routed_to("127.0.0.1:40000").unwrap();
        assert_eq!(routed.tls.server_name, "mq.internal");
        assert!(o.warnings().is_empty());
        let texted = RabbitOptions {
            url: "amqp://bench:s3cret@h/%2f".into(),
            ..RabbitOptions::default()
        };
        assert!(texted.warnings()[0].contains("rabbitmq.url"));
        assert!(RabbitOptions::default().warnings().is_empty());
    }

    fn refusal(o: &RabbitOptions) -> (String, String) {
        use crate::options::Section;
        let e = o.validate().unwrap_err();
        (e.field, e.message)
    }

    #[test]
    fn nodes_are_amqp_urls_dialed_like_url_and_named_by_index() {
        use crate::options::Section;
        let o: RabbitOptions = serde_json::from_str(
            r#"{"url":"amqp://guest:guest@10.0.0.1:5672/%2f",
                "nodes":["amqp://guest:guest@10.0.0.2:5672/%2f","amqp://guest:guest@10.0.0.3:5672/%2f"]}"#,
        )
        .unwrap();
        assert!(o.validate().is_ok());
        assert_eq!(o.node_count(), 3);
        assert_eq!(o.node_url(0), o.url);
        assert_eq!(o.node_url(2), "amqp://guest:guest@10.0.0.3:5672/%2f");
        assert_eq!(o.node_url(4), o.node_url(1), "node indexes wrap");
        assert_eq!(o.node_field(2), "nodes[1]");
        assert!(o.endpoint().unwrap_err().contains("rabbitmq.nodes"));
        assert!(o.routed_to("127.0.0.1:1").is_err());
        assert!(RabbitOptions::default().nodes.is_empty());

        for (nodes, says) in [
            (vec!["http://10.0.0.2"], "must start with amqp://"),
            (vec!["amqp://"], "names no host"),
        ] {
            let (field, message) = refusal(&RabbitOptions {
                nodes: nodes.into_iter().map(String::from).collect(),
                ..o.clone()
            });
            assert_eq!(field, "rabbitmq.nodes[0]");
            assert!(message.contains(says), "{message}");
        }
        let (field, message) = refusal(&RabbitOptions {
            nodes: vec![o.nodes[0].clone(), "amqps://u:s3cret@10.0.0.3/%2f".into()],
            ..o.clone()
        });
        assert_eq!(field, "rabbitmq.nodes[1]");
        assert!(
            message.contains("differ in TLS") && !message.contains("s3cret"),
            "{message}"
        );

        // A password from the environment goes into every node naming a user.
        std::env::set_var("CROSSBENCH_TEST_RABBIT_NODES_PW", "pw");
        let o = RabbitOptions {
            url: "amqp://bench@10.0.0.1/%2f".into(),
            nodes: vec![
                "amqp://bench@10.0.0.2/%2f".into(),
                "amqp://10.0.0.3/%2f".into(),
            ],
            password_env: "CROSSBENCH_TEST_RABBIT_NODES_PW".into(),
            ..RabbitOptions::default()
        };
        let (field, message) = refusal(&o);
        assert_eq!(field, "rabbitmq.nodes[1]");
        assert!(message.contains("needs a user"), "{message}");
        let o = RabbitOptions {
            nodes: vec!["amqp://bench@10.0.0.2/%2f".into()],
            ..o
        };
        assert!(o.validate().is_ok());
        assert_eq!(
            o.node_connect_url(1).unwrap(),
            "amqp://bench:pw@10.0.0.2/%2f"
        );
        assert_eq!(o.secrets(), ["pw"]);
        let texted = RabbitOptions {
            nodes: vec!["amqp://u:s3cret@10.0.0.2/%2f".into()],
            ..RabbitOptions::default()
        };
        assert!(texted.warnings()[0].contains("rabbitmq.nodes[0]"));
    }

    #[test]
    fn the_management_url_logs_in_as_the_amqp_user_unless_it_names_its_own() {
        use crate::options::Section;
        let o = RabbitOptions {
            url: "amqp://bench:p%40ss@10.0.0.1:5672/prod%2Fa".into(),
            management_url: "http://10.0.0.1:15672/".into(),
            ..RabbitOptions::default()
        };
        assert!(o.validate().is_ok());
        let m = o.management().unwrap().unwrap();
        assert_eq!(m.base, "http://10.0.0.1:15672");
        assert_eq!(m.user, "bench");
        assert_eq!(m.password.as_deref(), Some("p@ss"));
        assert_eq!(m.vhost, "prod/a");
        assert_eq!(path_segment(&m.vhost), "prod%2Fa");
        assert!(!format!("{m:?}").contains("p@ss"));
        assert_eq!(o.secrets(), ["p%40ss", "p@ss"]);

        let own = RabbitOptions {
            management_url: "https://mon:m0n@10.0.0.1:15671".into(),
            ..o.clone()
        };
        let m = own.management().unwrap().unwrap();
        assert_eq!(
            (m.user.as_str(), m.password.as_deref()),
            ("mon", Some("m0n"))
        );
        assert_eq!(m.base, "https://10.0.0.1:15671");
        assert!(own
            .warnings()
            .iter()
            .any(|w| w.contains("rabbitmq.management_url")));

        let default_vhost = RabbitOptions {
            management_url: "http://127.0.0.1:15672".into(),
            ..RabbitOptions::default()
        };
        let m = default_vhost.management().unwrap().unwrap();
        assert_eq!((m.vhost.as_str(), m.user.as_str()), ("/", "guest"));
        assert_eq!(path_segment(&m.vhost), "%2F");
        assert!(RabbitOptions::default().management().unwrap().is_none());

        for bad in ["10.0.0.1:15672", "ftp://10.0.0.1", "http://"] {
            let (field, message) = refusal(&RabbitOptions {
                management_url: bad.into(),
                ..RabbitOptions::default()
            });
            assert_eq!(field, "rabbitmq.management_url", "{bad}");
            assert!(message.contains("http://"), "{bad}: {message}");
        }
        assert_eq!(percent_decoded("a%2Fb%zz%4"), "a/b%zz%4");
        assert_eq!(percent_decoded("é%41"), "éA");
    }

    #[test]
    fn defaults_and_kebab_names() {
        let o: RabbitOptions = serde_json::from_str(
            r#"{"idiom":"hash-exchange","queue_type":"quorum","linger":"5ms"}"#,
        )
        .unwrap();
        assert_eq!(o.idiom, Idiom::HashExchange);
        assert_eq!(o.queue_type, QueueType::Quorum);
        assert_eq!(o.linger, Duration::from_millis(5));
        assert_eq!(o.hash_queues(1000), 64);
        assert_eq!(o.hash_queues(10), 10);
        assert!(serde_json::from_str::<RabbitOptions>(r#"{"nope":1}"#).is_err());
        let back = serde_json::to_string(&RabbitOptions::default()).unwrap();
        assert!(back.contains("\"linger\":\"10ms\""));
    }
}
