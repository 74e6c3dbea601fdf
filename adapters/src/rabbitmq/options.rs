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
        let pw = crate::tls::PasswordSource {
            section: "rabbitmq",
            env: &self.password_env,
            file: &self.password_file,
        }
        .read()?;
        let Some(pw) = pw else {
            return Ok(self.url.clone());
        };
        let mut u = url::Url::parse(&self.url)
            .map_err(|e| OptionsError::new("rabbitmq", "url", format!("does not parse: {e}")))?;
        if u.password().is_none() {
            if u.username().is_empty() {
                return Err(OptionsError::new(
                    "rabbitmq",
                    "url",
                    "a password_env or password_file needs a user in the URL (amqps://user@host:5671/vhost)",
                ));
            }
            u.set_password(Some(&pw)).map_err(|_| {
                OptionsError::new("rabbitmq", "url", "this URL cannot carry a password")
            })?;
        }
        Ok(u.to_string())
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
        Ok(())
    }

    fn warnings(&self) -> Vec<String> {
        let mut w = self.tls.warnings("rabbitmq");
        // The broker's well-known default login is no secret.
        if url::Url::parse(&self.url).is_ok_and(|u| u.password().is_some_and(|p| p != "guest")) {
            w.push(crate::tls::password_in_text("rabbitmq.url"));
        }
        w
    }

    /// The Erlang VM of the node.
    fn sample_targets(&self) -> Vec<(String, String)> {
        vec![("rabbitmq".into(), "proc:beam.smp".into())]
    }

    fn endpoint(&self) -> Result<String, String> {
        let port = if self.amqps() { 5671 } else { 5672 };
        crate::options::url_endpoint(&self.url, "rabbitmq.url", port)
    }

    /// Through a proxy, the server's certificate is still checked against the name
    /// the URL gave, not the proxy's address.
    fn routed_to(&self, addr: &str) -> Result<Self, String> {
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
