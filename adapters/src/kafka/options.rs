//! Scenario section `kafka`.
//!
//! The partition count per topic is the scenario's `lanes` (0 = one partition per
//! property); the durability tier is the scenario's `durability` (`default` or
//! `fsync`). Everything else Kafka-specific lives here.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The consumer group's partition assignment strategy (`partition.assignment.strategy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Assignment {
    /// Incremental: a rebalance moves only the partitions that change owner.
    #[default]
    CooperativeSticky,
    /// Eager: every rebalance revokes every partition, then assigns round-robin.
    Roundrobin,
    /// Eager: every rebalance revokes every partition, then assigns ranges.
    Range,
}

impl Assignment {
    /// librdkafka's name for it.
    pub fn name(&self) -> &'static str {
        match self {
            Assignment::CooperativeSticky => "cooperative-sticky",
            Assignment::Roundrobin => "roundrobin",
            Assignment::Range => "range",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct KafkaOptions {
    /// `bootstrap.servers`: comma-separated `host:port` list.
    pub bootstrap_servers: String,
    /// Consumer-group members per stage (separate clients, started together).
    pub members: usize,
    /// Partition assignment strategy. `cooperative-sticky` (default) moves only what
    /// changes owner; `roundrobin` and `range` are eager (a rebalance revokes all) and
    /// avoid librdkafka's client-side sticky assignor (compose/kafka/README.md says
    /// where that crashed).
    pub assignment: Assignment,
    /// Producer `linger.ms`.
    #[serde(with = "crate::duration_text")]
    pub linger: Duration,
    /// Producer `batch.num.messages`: records per produce batch (per partition).
    pub batch_messages: usize,
    /// Producer `batch.size`: bytes per produce batch (per partition).
    pub batch_bytes: usize,
    /// Consumer `fetch.wait.max.ms`: how long the broker may hold a fetch for data.
    #[serde(with = "crate::duration_text")]
    pub fetch_wait_max: Duration,
    /// How often a member commits the processed offsets of its partitions: every
    /// partition that advanced, in one synchronous `OffsetCommit`, at most this often
    /// (and always on revocation and at shutdown). Records count as acked when the
    /// commit that covers them succeeds. Between 1ms and 10s.
    #[serde(with = "crate::duration_text")]
    pub commit_interval: Duration,
    /// Records a partition may buffer in the adapter before it is paused (resumed at
    /// half). 0 = auto = 4 x the scenario's `batch`.
    pub partition_buffer: usize,
    /// Consumer `session.timeout.ms` (about 6 s suits tansu; Kafka's default is 45 s).
    #[serde(with = "crate::duration_text")]
    pub session_timeout: Duration,
    /// Replication factor of the topics the adapter creates.
    pub replication_factor: i32,
    /// Topic `retention.ms`.
    #[serde(with = "crate::duration_text")]
    pub retention: Duration,
    /// How long setup waits for topic deletion / creation to show in metadata.
    #[serde(with = "crate::duration_text")]
    pub setup_timeout: Duration,
    /// Process name of the broker on this host, the default sampler target
    /// (`proc:<name>`): `tansu`, `java` for Apache Kafka, `redpanda`. Empty = none.
    pub process: String,
    /// The broker's data directory on this host; its size is recorded at setup and
    /// at the end of the run (`kafka_log_dir_bytes_*`). Empty = not measured.
    pub log_dir: String,
    /// TLS to the brokers (adapters/src/tls.rs; librdkafka's own OpenSSL):
    /// `security.protocol` SSL, or SASL_SSL with `sasl_mechanism`.
    pub tls: crate::tls::TlsOptions,
    /// SASL: `PLAIN`, `SCRAM-SHA-256` or `SCRAM-SHA-512` (empty = none). GSSAPI is not
    /// built in.
    pub sasl_mechanism: String,
    /// The SASL user.
    pub sasl_username: String,
    /// The variable that holds the SASL user's password (never the scenario's text).
    pub password_env: String,
    /// Or a file whose first line is the password.
    pub password_file: String,
}

impl Default for KafkaOptions {
    fn default() -> Self {
        KafkaOptions {
            bootstrap_servers: "127.0.0.1:9092".into(),
            members: 4,
            assignment: Assignment::CooperativeSticky,
            linger: Duration::from_millis(5),
            batch_messages: 10_000,
            batch_bytes: 1_000_000,
            fetch_wait_max: Duration::from_millis(50),
            commit_interval: Duration::from_millis(50),
            partition_buffer: 0,
            session_timeout: Duration::from_secs(6),
            replication_factor: 1,
            retention: Duration::from_secs(3600),
            setup_timeout: Duration::from_secs(60),
            process: "tansu".into(),
            log_dir: "/var/lib/crossbench/tansu".into(),
            tls: crate::tls::TlsOptions::default(),
            sasl_mechanism: String::new(),
            sasl_username: String::new(),
            password_env: String::new(),
            password_file: String::new(),
        }
    }
}

/// The SASL mechanisms the bundled librdkafka is built with.
pub const SASL_MECHANISMS: [&str; 3] = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"];

impl KafkaOptions {
    /// The password from `password_env` or `password_file`, if either is given.
    pub fn password(&self) -> Result<Option<String>, crate::options::OptionsError> {
        crate::tls::PasswordSource {
            section: "kafka",
            env: &self.password_env,
            file: &self.password_file,
        }
        .read()
    }

    /// librdkafka's `security.protocol` for these options.
    pub fn security_protocol(&self) -> &'static str {
        match (self.tls.on(), self.sasl_mechanism.is_empty()) {
            (false, true) => "PLAINTEXT",
            (true, true) => "SSL",
            (false, false) => "SASL_PLAINTEXT",
            (true, false) => "SASL_SSL",
        }
    }

    /// The credentials and TLS fields are consistent (the first that is not, with how
    /// to fix it).
    fn security_invalid(&self) -> Result<(), crate::options::OptionsError> {
        let bad = |f: &str, m: &str| Err(crate::options::OptionsError::new("kafka", f, m));
        self.tls.validate("kafka")?;
        if !self.tls.server_name.is_empty() {
            return bad(
                "tls.server_name",
                "librdkafka checks a broker's certificate against the host it connects to (the advertised one): connect by the name the certificate carries",
            );
        }
        let password = self.password()?;
        if self.sasl_mechanism.is_empty() {
            if password.is_some() || !self.sasl_username.is_empty() {
                return bad(
                    "sasl_mechanism",
                    "a SASL user or password needs a mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512",
                );
            }
            return Ok(());
        }
        if !SASL_MECHANISMS.contains(&self.sasl_mechanism.as_str()) {
            return bad(
                "sasl_mechanism",
                "must be PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (GSSAPI is not built in)",
            );
        }
        if self.sasl_username.is_empty() {
            return bad("sasl_username", "SASL needs the user's name");
        }
        if password.is_none() {
            return bad(
                "password_env",
                "SASL needs the user's password: name the variable that holds it (or password_file)",
            );
        }
        Ok(())
    }

    /// Buffered records at which a partition is paused, for key-batches of `batch`.
    pub fn pause_at(&self, batch: usize) -> usize {
        if self.partition_buffer == 0 {
            batch.max(1) * 4
        } else {
            self.partition_buffer
        }
    }

    /// The first option that is out of range, as (field, message).
    fn invalid(&self) -> Option<(&'static str, String)> {
        let ms = |d: &Duration| d.as_millis();
        if self.bootstrap_servers.trim().is_empty() {
            return Some((
                "bootstrap_servers",
                "must name at least one host:port".into(),
            ));
        }
        if !(1..=64).contains(&self.members) {
            return Some(("members", "must be between 1 and 64".into()));
        }
        if ms(&self.linger) > 5_000 {
            return Some(("linger", "must be at most 5s".into()));
        }
        if !(1..=1_000_000).contains(&self.batch_messages) {
            return Some(("batch_messages", "must be between 1 and 1000000".into()));
        }
        if !(1..=i32::MAX as usize).contains(&self.batch_bytes) {
            return Some(("batch_bytes", "must be between 1 and 2147483647".into()));
        }
        if ms(&self.fetch_wait_max) > 10_000 {
            return Some(("fetch_wait_max", "must be at most 10s".into()));
        }
        if !(1..=10_000).contains(&ms(&self.commit_interval)) {
            return Some(("commit_interval", "must be between 1ms and 10s".into()));
        }
        if self.partition_buffer > 1_000_000 {
            return Some((
                "partition_buffer",
                "must be at most 1000000 (0 = auto)".into(),
            ));
        }
        if !(1_000..=300_000).contains(&ms(&self.session_timeout)) {
            return Some(("session_timeout", "must be between 1s and 300s".into()));
        }
        if !(1..=16).contains(&self.replication_factor) {
            return Some(("replication_factor", "must be between 1 and 16".into()));
        }
        if self.retention < Duration::from_secs(60) {
            return Some(("retention", "must be at least 60s".into()));
        }
        if !(1_000..=600_000).contains(&ms(&self.setup_timeout)) {
            return Some(("setup_timeout", "must be between 1s and 600s".into()));
        }
        if self.process.contains(char::is_whitespace) {
            return Some((
                "process",
                "must be a process name without whitespace".into(),
            ));
        }
        None
    }
}

impl crate::options::Section for KafkaOptions {
    fn validate(&self) -> Result<(), crate::options::OptionsError> {
        match self.invalid() {
            Some((field, message)) => {
                Err(crate::options::OptionsError::new("kafka", field, message))
            }
            None => self.security_invalid(),
        }
    }

    fn warnings(&self) -> Vec<String> {
        let mut w = self.tls.warnings("kafka");
        if self.sasl_mechanism == "PLAIN" && !self.tls.on() {
            w.push("kafka.sasl_mechanism is PLAIN without kafka.tls: the password crosses the network in the clear".into());
        }
        w
    }

    /// The broker process named by `kafka.process` (tansu, java, redpanda).
    fn sample_targets(&self) -> Vec<(String, String)> {
        if self.process.is_empty() {
            vec![]
        } else {
            vec![("kafka".into(), format!("proc:{}", self.process))]
        }
    }

    fn endpoint(&self) -> Result<String, String> {
        Err("a Kafka client connects to the addresses the broker advertises, not only to kafka.bootstrap_servers: a proxy in front of the bootstrap address would not carry the traffic. Use kill or pause faults, or run the broker with its advertised listener on a proxy of your own".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::Section;

    #[test]
    fn sasl_and_tls_name_their_fields() {
        let with = |f: &dyn Fn(&mut KafkaOptions)| {
            let mut o = KafkaOptions::default();
            f(&mut o);
            o
        };
        assert_eq!(KafkaOptions::default().security_protocol(), "PLAINTEXT");
        let gss = with(&|o| o.sasl_mechanism = "GSSAPI".into());
        assert!(gss
            .validate()
            .unwrap_err()
            .to_string()
            .contains("kafka.sasl_mechanism"));
        let no_user = with(&|o| o.sasl_mechanism = "SCRAM-SHA-256".into());
        assert!(no_user
            .validate()
            .unwrap_err()
            .to_string()
            .contains("kafka.sasl_username"));
        let no_password = with(&|o| {
            o.sasl_mechanism = "PLAIN".into();
            o.sasl_username = "u".into();
        });
        let e = no_password.validate().unwrap_err().to_string();
        assert!(e.contains("kafka.password_env"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let pw = dir.path().join("pw");
        std::fs::write(&pw, "secret\n").unwrap();
        let plain = with(&|o| {
            o.sasl_mechanism = "PLAIN".into();
            o.sasl_username = "u".into();
            o.password_file = pw.display().to_string();
        });
        assert!(plain.validate().is_ok());
        assert_eq!(plain.security_protocol(), "SASL_PLAINTEXT");
        assert!(
            plain.warnings()[0].contains("in the clear"),
            "{:?}",
            plain.warnings()
        );
        let both = with(&|o| {
            o.sasl_mechanism = "SCRAM-SHA-512".into();
            o.sasl_username = "u".into();
            o.password_file = pw.display().to_string();
            o.tls.enabled = true;
        });
        assert_eq!(both.security_protocol(), "SASL_SSL");
        assert!(both.warnings().is_empty());
        let orphan = with(&|o| o.sasl_username = "u".into());
        assert!(orphan
            .validate()
            .unwrap_err()
            .to_string()
            .contains("kafka.sasl_mechanism"));
        let named = with(&|o| o.tls.server_name = "x".into());
        assert!(named
            .validate()
            .unwrap_err()
            .to_string()
            .contains("kafka.tls.server_name"));
    }

    #[test]
    fn defaults_parse_and_unknown_fields_are_refused() {
        let o: KafkaOptions =
            serde_json::from_str(r#"{"members":2,"linger":"1ms","session_timeout":"6s"}"#).unwrap();
        assert_eq!(o.members, 2);
        assert_eq!(o.linger, Duration::from_millis(1));
        assert_eq!(o.bootstrap_servers, "127.0.0.1:9092");
        assert_eq!(o.pause_at(100), 400);
        assert!(o.validate().is_ok());
        assert!(serde_json::from_str::<KafkaOptions>(r#"{"partitions":3}"#).is_err());
        let back = serde_json::to_string(&KafkaOptions::default()).unwrap();
        assert!(back.contains("\"linger\":\"5ms\""), "{back}");
        assert!(
            back.contains("\"assignment\":\"cooperative-sticky\""),
            "{back}"
        );
        let o: KafkaOptions = serde_json::from_str(r#"{"assignment":"roundrobin"}"#).unwrap();
        assert_eq!(o.assignment.name(), "roundrobin");
        let e = serde_json::from_str::<KafkaOptions>(r#"{"assignment":"sticky"}"#).unwrap_err();
        assert!(e.to_string().contains("cooperative-sticky"), "{e}");
    }

    #[test]
    fn out_of_range_options_name_their_field() {
        let o = KafkaOptions {
            members: 0,
            ..Default::default()
        };
        assert_eq!(o.validate().unwrap_err().field, "kafka.members");
        let o = KafkaOptions {
            session_timeout: Duration::from_millis(10),
            ..Default::default()
        };
        assert_eq!(o.validate().unwrap_err().field, "kafka.session_timeout");
        let o = KafkaOptions {
            commit_interval: Duration::ZERO,
            ..Default::default()
        };
        assert_eq!(o.validate().unwrap_err().field, "kafka.commit_interval");
    }
}
