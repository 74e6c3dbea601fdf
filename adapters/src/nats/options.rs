//! Scenario section `nats`.

use std::time::Duration;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NatsOptions {
    /// Server URL (`nats://[user:password@]host:port`; the password is redacted in every
    /// error and file).
    pub url: String,
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
        if !(self.url.starts_with("nats://") || self.url.starts_with("tls://")) {
            return bad("url", "must be a nats:// URL (nats://127.0.0.1:4222)");
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
        let url = url::Url::parse(&self.url).map_err(|e| {
            crate::options::OptionsError::new("nats", "url", format!("does not parse: {e}"))
        })?;
        if password.is_some() && url.username().is_empty() {
            return bad(
                "url",
                "a password_env or password_file needs a user in the URL (nats://user@host:4222)",
            );
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
            if password.is_some() || url.password().is_some() {
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
        if url::Url::parse(&self.url).is_ok_and(|u| u.password().is_some()) {
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

    fn routed_to(&self, addr: &str) -> Result<Self, String> {
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
        self.tls.on() || self.url.starts_with("tls://")
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
}
