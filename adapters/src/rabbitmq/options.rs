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
        }
    }
}

impl RabbitOptions {
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
        Ok(())
    }

    /// The Erlang VM of the node.
    fn sample_targets(&self) -> Vec<(String, String)> {
        vec![("rabbitmq".into(), "proc:beam.smp".into())]
    }

    fn endpoint(&self) -> Result<String, String> {
        crate::options::url_endpoint(&self.url, "rabbitmq.url", 5672)
    }

    fn routed_to(&self, addr: &str) -> Result<Self, String> {
        Ok(RabbitOptions {
            url: crate::options::url_routed(&self.url, "rabbitmq.url", addr)?,
            ..self.clone()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
