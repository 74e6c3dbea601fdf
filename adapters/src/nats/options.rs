//! Scenario section `nats`.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::redact::redact_url_passwords;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NatsOptions {
    /// Server URL (`nats://[user:password@]host:port`; the password is redacted in every
    /// error and file), or several, comma-separated, for a cluster
    /// (`nats://10.0.0.1:4222,nats://10.0.0.2:4222,nats://10.0.0.3:4222`): every one is
    /// in the client's server list, which it connects to in turn at the start and
    /// reconnects to when its server goes. Each part is a `nats://` or `tls://` URL; a
    /// `password_env` or `password_file` applies to each, with the user of the first
    /// (the others name the same user or none).
    pub url: String,
    /// `num_replicas` of every stream the adapter creates, 1 to 5: how many servers of
    /// a JetStream cluster keep each stream (JetStream's Raft group). More than 1 needs a
    /// cluster of at least that many JetStream servers; a single server refuses it at
    /// setup. The replication the server answered is the record's provenance setting
    /// `stream_replicas`.
    pub replicas: u32,
    /// Ack wait of every consumer: the lease. A delivery not acked within it is handed
    /// out again, and a refused batch is nak'd with this delay, so it comes back after
    /// the lease too. Whole milliseconds, >= 100 ms.
    #[serde(with = "crate::duration_text")]
    pub ack_wait: Duration,
    /// `max_ack_pending` of every lane consumer: deliveries of one lane handed out and
    /// not yet acked. 0 = the scenario's `batch` (at consume time the adapter never
    /// hands more than `batch` of one lane to the stage at once anyway).
    pub max_ack_pending: i64,
    /// Upper bound of physical lanes (lane consumers) per (topic, group); 0 = the
    /// topology's lanes (at most the keys). Keys hash (FNV-1a) onto the lanes.
    pub max_lanes: u64,
    /// What the server's JetStream `sync_interval` is, as its operator configured it
    /// (the client protocol cannot read it): nats-server's default is `2m` (file
    /// storage is fsynced every two minutes, acknowledged writes in between live in
    /// the page cache). `always` (nats-server >= 2.10) is what `durability: fsync`
    /// needs.
    pub sync_interval: String,
    /// Lane consumers created or deleted at once in `setup`.
    pub setup_concurrency: usize,
    /// Give up on one JetStream API request or publish ack after this long.
    #[serde(with = "crate::duration_text")]
    pub request_timeout: Duration,
    /// The sampler's target: the server's process name.
    pub process: String,
    /// TLS to the server (adapters/src/tls.rs). A `tls://` URL with no `tls` block
    /// verifies against the system's trust roots.
    pub tls: crate::tls::TlsOptions,
    /// The variable that holds the URL user's password (`nats://user@host:4222`).
    pub password_env: String,
    /// Or a file whose first line is the password.
    pub password_file: String,
    /// A NATS credentials file (a user JWT and its nkey seed, `nsc`'s `.creds`).
    pub creds_file: String,
}

impl Default for NatsOptions {
    fn default() -> Self {
        NatsOptions {
            url: "nats://127.0.0.1:4222".into(),
            replicas: 1,
            ack_wait: Duration::from_secs(30),
            max_ack_pending: 0,
            max_lanes: 0,
            sync_interval: "2m".into(),
            setup_concurrency: 32,
            request_timeout: Duration::from_secs(10),
            process: "nats-server".into(),
            tls: crate::tls::TlsOptions::default(),
            password_env: String::new(),
            password_file: String::new(),
            creds_file: String::new(),
        }
    }
}

impl crate::options::Section for NatsOptions {
    fn validate(&self) -> Result<(), crate::options::OptionsError> {
        let bad = |f: &str, m: &str| Err(crate::options::OptionsError::new("nats", f, m));
        let urls = self.parsed_urls()?;
        if !(1..=5).contains(&self.replicas) {
            return bad(
                "replicas",
                "must be between 1 and 5 (JetStream's limit; 1 on a single server, 3 on a three-server cluster)",
            );
        }
        if self.ack_wait < Duration::from_millis(100) {
            return bad("ack_wait", "must be >= 100ms");
        }
        if self.max_ack_pending < 0 {
            return bad("max_ack_pending", "must be >= 0 (0 = the scenario's batch)");
        }
        if self.setup_concurrency == 0 {
            return bad("setup_concurrency", "must be >= 1");
        }
        if self.request_timeout < Duration::from_millis(100) {
            return bad("request_timeout", "must be >= 100ms");
        }
        self.tls.validate("nats")?;
        if !self.tls.server_name.is_empty() {
            return bad(
                "tls.server_name",
                "the NATS client checks the certificate against the URL's host: connect by the name the certificate carries",
            );
        }
        let password = self.password()?;
        let url = &urls[0];
        if password.is_some() && url.username().is_empty() {
            return bad(
                "url",
                "a password_env or password_file needs a user in the URL (nats://user@host:4222)",
            );
        }
        if let Some(other) = urls[1..]
            .iter()
            .find(|u| !u.username().is_empty() && u.username() != url.username())
        {
            return Err(crate::options::OptionsError::new(
                "nats",
                "url",
                format!(
                    "{} names another user than the first URL: the client logs in to every server as one user; name it in the first URL only",
                    redact_url_passwords(other.as_str())
                ),
            ));
        }
        if !self.creds_file.is_empty() {
            if let Err(e) = std::fs::File::open(&self.creds_file) {
                return Err(crate::options::OptionsError::new(
                    "nats",
                    "creds_file",
                    format!(
                        "{}: {e}; give the path of a readable .creds file",
                        self.creds_file
                    ),
                ));
            }
            if password.is_some() || urls.iter().any(|u| u.password().is_some()) {
                return bad(
                    "creds_file",
                    "give a creds_file or a user's password, not both",
                );
            }
        }
        if self.sync_interval.trim().is_empty() {
            return bad(
                "sync_interval",
                "state the server's JetStream sync_interval (2m is nats-server's default, or always)",
            );
        }
        Ok(())
    }

    fn warnings(&self) -> Vec<String> {
        let mut w = self.tls.warnings("nats");
        if self
            .urls()
            .any(|u| url::Url::parse(u).is_ok_and(|u| u.password().is_some()))
        {
            w.push(crate::tls::password_in_text("nats.url"));
        }
        w
    }

    fn sample_targets(&self) -> Vec<(String, String)> {
        if self.process.is_empty() {
            vec![]
        } else {
            vec![("nats".into(), format!("proc:{}", self.process))]
        }
    }

    fn endpoint(&self) -> Result<String, String> {
        crate::options::url_endpoint(&self.url, "nats.url", 4222)
    }

    /// One server only: a proxy stands in front of one address.
    fn routed_to(&self, addr: &str) -> Result<Self, String> {
        if self.urls().count() > 1 {
            return Err("nats.url names several servers; the proxy routes one".into());
        }
        Ok(NatsOptions {
            url: crate::options::url_routed(&self.url, "nats.url", addr)?,
            ..self.clone()
        })
    }
}

impl NatsOptions {
    /// The password from `password_env` or `password_file`, if either is given.
    pub fn password(&self) -> Result<Option<String>, crate::options::OptionsError> {
        crate::tls::PasswordSource {
            section: "nats",
            env: &self.password_env,
            file: &self.password_file,
        }
        .read()
    }

    /// Whether the connection is TLS (a `tls://` URL or a `tls` block).
    pub fn tls_on(&self) -> bool {
        self.tls.on() || self.urls().any(|u| u.starts_with("tls://"))
    }

    /// The server URLs of `url`, as written (comma-separated, spaces around them
    /// trimmed).
    pub fn urls(&self) -> impl Iterator<Item = &str> {
        self.url.split(',').map(str::trim)
    }

    /// Every server URL of `url`, parsed; the error names `nats.url` and the part.
    pub fn parsed_urls(&self) -> Result<Vec<url::Url>, crate::options::OptionsError> {
        let bad = |m: String| crate::options::OptionsError::new("nats", "url", m);
        let several = self.urls().count() > 1;
        self.urls()
            .enumerate()
            .map(|(i, part)| {
                let which = if several {
                    format!("server {} of {} ({})", i + 1, self.urls().count(), redact_url_passwords(part))
                } else {
                    redact_url_passwords(part)
                };
                if part.is_empty() {
                    return Err(bad(format!(
                        "server {} of {} is empty: give comma-separated nats:// URLs (nats://10.0.0.1:4222,nats://10.0.0.2:4222)",
                        i + 1,
                        self.urls().count()
                    )));
                }
                if !(part.starts_with("nats://") || part.starts_with("tls://")) {
                    return Err(bad(format!(
                        "{which} must be a nats:// or tls:// URL (nats://127.0.0.1:4222; several servers comma-separated)"
                    )));
                }
                let u = url::Url::parse(part)
                    .map_err(|e| bad(format!("{which} does not parse: {e}")))?;
                if u.host_str().is_none_or(str::is_empty) {
                    return Err(bad(format!("{which} names no host")));
                }
                Ok(u)
            })
            .collect()
    }

    /// True when the operator says the server fsyncs every write.
    pub fn syncs_always(&self) -> bool {
        self.sync_interval.trim().eq_ignore_ascii_case("always")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::Section;

    #[test]
    fn parses_and_validates() {
        let o: NatsOptions =
            serde_json::from_str(r#"{"ack_wait":"2s","max_lanes":16,"sync_interval":"always"}"#)
                .unwrap();
        assert_eq!(o.ack_wait, Duration::from_secs(2));
        assert_eq!(o.max_lanes, 16);
        assert!(o.syncs_always());
        assert!(NatsOptions::default().validate().is_ok());
        assert!(!NatsOptions::default().syncs_always());
        assert!(serde_json::from_str::<NatsOptions>(r#"{"bogus":1}"#).is_err());
        let bad = NatsOptions {
            url: "http://x".into(),
            ..Default::default()
        };
        assert!(bad.validate().is_err());
        assert_eq!(NatsOptions::default().endpoint().unwrap(), "127.0.0.1:4222");
        assert_eq!(
            NatsOptions::default().routed_to("127.0.0.1:9").unwrap().url,
            "nats://127.0.0.1:9"
        );
    }

    fn field_and_message(o: &NatsOptions) -> (String, String) {
        let e = o.validate().unwrap_err();
        (e.field, e.message)
    }

    #[test]
    fn several_servers_comma_separated() {
        let o = NatsOptions {
            url: "nats://10.77.9.1:4222, nats://10.77.9.2:4222,tls://10.77.9.3:4222".into(),
            ..Default::default()
        };
        assert!(o.validate().is_ok());
        let hosts: Vec<String> = o
            .parsed_urls()
            .unwrap()
            .iter()
            .map(|u| u.host_str().unwrap().to_string())
            .collect();
        assert_eq!(hosts, ["10.77.9.1", "10.77.9.2", "10.77.9.3"]);
        assert!(o.tls_on(), "one tls:// server makes the client require TLS");
        assert!(o.endpoint().is_err(), "the proxy routes one server");
        assert!(o.routed_to("127.0.0.1:9").is_err());

        for (url, says) in [
            (
                "nats://a:4222,http://b:4222",
                "server 2 of 2 (http://b:4222) must be a nats:// or tls:// URL",
            ),
            ("nats://a:4222,", "server 2 of 2 is empty"),
            ("nats://a:4222,,nats://b:4222", "server 2 of 3 is empty"),
            (
                "nats://u:secret@a:4222,ftp://u:secret@b",
                "(ftp://u:***@b) must be",
            ),
            ("nats://", "names no host"),
        ] {
            let (field, message) = field_and_message(&NatsOptions {
                url: url.into(),
                ..Default::default()
            });
            assert_eq!(field, "nats.url", "{url}");
            assert!(message.contains(says), "{url}: {message}");
            assert!(!message.contains("secret"), "{message}");
        }
    }

    #[test]
    fn a_password_from_the_environment_logs_in_as_the_first_urls_user_everywhere() {
        std::env::set_var("CROSSBENCH_TEST_NATS_PW", "pw");
        let o = NatsOptions {
            url: "nats://bench@a:4222,nats://b:4222,nats://bench@c:4222".into(),
            password_env: "CROSSBENCH_TEST_NATS_PW".into(),
            ..Default::default()
        };
        assert!(o.validate().is_ok());
        let other = NatsOptions {
            url: "nats://bench@a:4222,nats://other:pw2@b:4222".into(),
            ..o.clone()
        };
        let (field, message) = field_and_message(&other);
        assert_eq!(field, "nats.url");
        assert!(
            message.contains("another user") && !message.contains("pw2"),
            "{message}"
        );
        let texted = NatsOptions {
            url: "nats://a:4222,nats://u:s3cret@b:4222".into(),
            ..Default::default()
        };
        assert!(texted.warnings()[0].contains("nats.url"));
    }

    #[test]
    fn replicas_are_one_to_five() {
        assert_eq!(NatsOptions::default().replicas, 1);
        let o: NatsOptions = serde_json::from_str(r#"{"replicas":3}"#).unwrap();
        assert_eq!(o.replicas, 3);
        assert!(o.validate().is_ok());
        for r in [0, 6, 300] {
            let (field, message) = field_and_message(&NatsOptions {
                replicas: r,
                ..Default::default()
            });
            assert_eq!(field, "nats.replicas");
            assert!(message.contains("between 1 and 5"), "{message}");
        }
    }
}
