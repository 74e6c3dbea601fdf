//! Scenario section `queen`.

use std::time::Duration;

use serde::{Deserialize, Serialize, Serializer};

/// How consumers pop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum PopMode {
    /// `GET /pop/queue/<q>?partitions=K`: the broker picks up to K free partitions per
    /// pop (long polling), leases them, and the adapter acks once per pop.
    #[default]
    Wildcard,
    /// `GET /pop/queue/<q>/partition/<p>`: every pop worker owns a static slice of the
    /// partitions and sweeps it with non-waiting pops.
    Targeted,
    /// Wildcard pops with `autoAck=true`: the server commits the cursor at pop time, no
    /// ack is sent. At-most-once: a refused batch or a crash loses its messages.
    AutoAck,
}

impl PopMode {
    pub fn name(&self) -> &'static str {
        match self {
            PopMode::Wildcard => "wildcard",
            PopMode::Targeted => "targeted",
            PopMode::AutoAck => "auto-ack",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct QueenOptions {
    /// Base URL of the Queen server (`http://127.0.0.1:6632`).
    pub url: String,
    /// Optional bearer token (`Authorization: Bearer …`). Never written to any file:
    /// it serialises as `***`.
    #[serde(serialize_with = "redacted")]
    pub token: Option<String>,
    /// `wildcard` (default), `targeted` or `auto-ack`.
    pub mode: PopMode,
    /// Wildcard / auto-ack: partitions one pop may claim (they share the `batch` budget).
    pub partitions_per_pop: u32,
    /// Wildcard / auto-ack: how long a pop waits server-side for messages.
    #[serde(with = "crate::duration_text")]
    pub long_poll: Duration,
    /// Pop loops per consumer stream; 0 = auto (wildcard: 4; targeted: one per 16
    /// partitions, between 2 and 8; auto-ack: 1, and at most 1).
    pub pop_workers: usize,
    /// The queue's lease: how long a popped, unacked partition stays with its consumer
    /// before the server hands its messages out again. Whole seconds, >= 1 s.
    #[serde(with = "crate::duration_text")]
    pub lease_time: Duration,
    /// Targeted: a worker starts a new sweep of its slice at most this often.
    #[serde(with = "crate::duration_text")]
    pub sweep_floor: Duration,
    /// Targeted: claims (leased partition batches) a stream may hold at once, per lane
    /// of its stage's budget. More only queue in the stage holding their leases; a
    /// batch that waits past its lease is handed out again and its ack fails.
    pub claims_per_lane: usize,
    /// Client timeout of one request (a long-poll pop gets `long_poll` on top).
    #[serde(with = "crate::duration_text")]
    pub request_timeout: Duration,
    /// Attempts of one push or ack request on a network error, timeout or HTTP 5xx
    /// (a retried push cannot duplicate: every message carries its transaction id).
    pub retries: u32,
    /// Seconds the server keeps completed messages (`completedRetentionSeconds`).
    pub completed_retention_sec: u64,
    /// The queue's `delayedProcessing`: a message becomes visible to pops only this
    /// long after its `created_at`. 0 (default) = at once. Whole seconds. Queen's
    /// cursor is (`created_at`, id) and `created_at` is its insert transaction's start
    /// time, so a push that commits after a later-stamped one can fall behind a cursor
    /// that already passed it; a delay longer than the push transactions closes that
    /// window at the cost of the delay in latency (docs/perf-queen.md).
    #[serde(with = "crate::duration_text")]
    pub delayed_processing: Duration,
    /// The PostgreSQL database Queen keeps its queues in, reached directly
    /// (`postgres://postgres@127.0.0.1:5432/queen`); optional. When given, every cell's
    /// setup runs `VACUUM (ANALYZE)` on it after the reset, so a cell does not inherit
    /// the dead rows of the cells before it (on a server with `autovacuum = off` they
    /// pile up and Queen slows from cell to cell: docs/perf-queen.md), and the record
    /// states how long that took, the dead rows it found and the server's settings.
    /// Its password is redacted in every file the harness writes.
    #[serde(serialize_with = "redacted_url")]
    pub store_dsn: Option<String>,
    /// TLS to the server (adapters/src/tls.rs); needs an `https://` URL. An
    /// `https://` URL with no `tls` block verifies against the system's trust roots.
    pub tls: crate::tls::TlsOptions,
    /// The variable that holds the bearer token (instead of `token` in the text).
    pub token_env: String,
    /// Or a file whose first line is the bearer token.
    pub token_file: String,
}

impl Default for QueenOptions {
    fn default() -> Self {
        QueenOptions {
            url: "http://127.0.0.1:6632".into(),
            token: None,
            mode: PopMode::Wildcard,
            partitions_per_pop: 4,
            long_poll: Duration::from_millis(1000),
            pop_workers: 0,
            lease_time: Duration::from_secs(30),
            sweep_floor: Duration::from_millis(20),
            claims_per_lane: 2,
            request_timeout: Duration::from_secs(10),
            retries: 3,
            completed_retention_sec: 300,
            delayed_processing: Duration::ZERO,
            store_dsn: None,
            tls: crate::tls::TlsOptions::default(),
            token_env: String::new(),
            token_file: String::new(),
        }
    }
}

impl QueenOptions {
    /// The bearer token, from `token`, `token_env` or `token_file` (`None` without one).
    pub fn bearer(&self) -> Result<Option<String>, crate::options::OptionsError> {
        if let Some(t) = &self.token {
            if t.is_empty() {
                return Err(crate::options::OptionsError::new(
                    "queen",
                    "token",
                    "must be a non-empty token without spaces (or omit it)",
                ));
            }
            return Ok(Some(t.clone()));
        }
        // The same rules as a password's source.
        crate::tls::PasswordSource {
            section: "queen",
            env: &self.token_env,
            file: &self.token_file,
        }
        .read_as("token")
    }

    /// The field the bearer token came from (what a refused token asks to fix).
    pub fn token_field(&self) -> &'static str {
        if !self.token_env.is_empty() {
            "queen.token_env"
        } else if !self.token_file.is_empty() {
            "queen.token_file"
        } else {
            "queen.token"
        }
    }

    /// The lease in whole seconds as Queen takes it.
    pub fn lease_secs(&self) -> u64 {
        self.lease_time.as_secs().max(1)
    }

    /// Pop loops per stream for `partitions` partitions.
    pub fn workers_for(&self, partitions: u64) -> usize {
        if self.pop_workers > 0 {
            return self.pop_workers;
        }
        match self.mode {
            PopMode::Targeted => (partitions.div_ceil(16) as usize).clamp(2, 8),
            PopMode::Wildcard => 4,
            // Auto-ack releases a partition at pop time: a second pop loop could take
            // the next messages of a key still in the stage.
            PopMode::AutoAck => 1,
        }
    }
}

impl crate::options::Section for QueenOptions {
    fn validate(&self) -> Result<(), crate::options::OptionsError> {
        let bad = |f: &str, m: &str| Err(crate::options::OptionsError::new("queen", f, m));
        if !(self.url.starts_with("http://") || self.url.starts_with("https://")) {
            return bad(
                "url",
                "must be an http:// or https:// URL such as http://127.0.0.1:6632",
            );
        }
        self.tls.validate("queen")?;
        if self.tls.on() && !self.url.starts_with("https://") {
            return bad(
                "url",
                "queen.tls is set but the URL is http://: give the server's https:// URL",
            );
        }
        if !self.tls.server_name.is_empty() {
            return bad(
                "tls.server_name",
                "the HTTP client checks the certificate against the URL's host: connect by the name the certificate carries",
            );
        }
        if self.token.is_some() && !(self.token_env.is_empty() && self.token_file.is_empty()) {
            return bad("token", "give token, token_env or token_file, one of them");
        }
        if let Some(t) = self.bearer()? {
            if t.chars().any(|c| c.is_whitespace() || c.is_control()) {
                return bad(
                    "token",
                    "must be a non-empty token without spaces (or omit it)",
                );
            }
        }
        if self.partitions_per_pop == 0 || self.partitions_per_pop > 1000 {
            return bad("partitions_per_pop", "must be between 1 and 1000");
        }
        if self.long_poll > Duration::from_secs(60) {
            return bad("long_poll", "must be at most 60s (0 = no long polling)");
        }
        if self.mode == PopMode::AutoAck && self.pop_workers > 1 {
            return bad(
                "pop_workers",
                "auto-ack commits and releases a partition at pop time, so a second pop loop of a stream could hand a key to two handlers at once; use 1 (or 0 = auto)",
            );
        }
        if self.pop_workers > 1024 {
            return bad("pop_workers", "must be at most 1024 (0 = auto)");
        }
        if self.lease_time < Duration::from_secs(1) || self.lease_time.subsec_nanos() != 0 {
            return bad(
                "lease_time",
                "Queen takes whole seconds; write e.g. 5s or 30",
            );
        }
        if self.sweep_floor > Duration::from_secs(10) {
            return bad("sweep_floor", "must be at most 10s");
        }
        if self.delayed_processing > Duration::from_secs(3600)
            || self.delayed_processing.subsec_nanos() != 0
        {
            return bad(
                "delayed_processing",
                "Queen takes whole seconds up to 3600; write e.g. 1s (0 = no delay)",
            );
        }
        if self.claims_per_lane == 0 || self.claims_per_lane > 1_000_000 {
            return bad(
                "claims_per_lane",
                "must be between 1 and 1000000 (default 2)",
            );
        }
        if self.request_timeout < Duration::from_millis(100) {
            return bad("request_timeout", "must be >= 100ms");
        }
        if let Some(d) = &self.store_dsn {
            if !(d.starts_with("postgres://") || d.starts_with("postgresql://")) {
                return bad(
                    "store_dsn",
                    "must be a postgres:// URL of the database Queen stores in, such as postgres://postgres@127.0.0.1:5432/queen (or omit it)",
                );
            }
        }
        if self.retries == 0 || self.retries > 10 {
            return bad(
                "retries",
                "must be between 1 and 10 (attempts, not re-tries)",
            );
        }
        Ok(())
    }

    fn warnings(&self) -> Vec<String> {
        let mut w = self.tls.warnings("queen");
        if self.token.is_some() {
            w.push(
                "queen.token is in the scenario's text: it works (and is never written to a file the harness writes), but a scenario file is easily shared; set queen.token_env or queen.token_file instead".into(),
            );
        }
        w
    }

    /// The server binary is `queen-server` (a bare `queen` would also match postgres
    /// backends of a database named queen), and its PostgreSQL.
    fn sample_targets(&self) -> Vec<(String, String)> {
        vec![
            ("queen".into(), "proc:queen-server".into()),
            ("postgres".into(), "proc:postgres".into()),
        ]
    }

    fn endpoint(&self) -> Result<String, String> {
        crate::options::url_endpoint(&self.url, "queen.url", 80)
    }

    fn routed_to(&self, addr: &str) -> Result<Self, String> {
        Ok(QueenOptions {
            url: crate::options::url_routed(&self.url, "queen.url", addr)?,
            ..self.clone()
        })
    }
}

fn redacted<S: Serializer>(t: &Option<String>, s: S) -> Result<S::Ok, S::Error> {
    match t {
        Some(_) => s.serialize_some("***"),
        None => s.serialize_none(),
    }
}

fn redacted_url<S: Serializer>(u: &Option<String>, s: S) -> Result<S::Ok, S::Error> {
    match u {
        Some(u) => s.serialize_some(&crate::redact::redact_url_passwords(u)),
        None => s.serialize_none(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::Section;

    #[test]
    fn parses_knobs() {
        let o: QueenOptions = serde_json::from_str(
            r#"{"mode":"targeted","pop_workers":3,"lease_time":"5s","sweep_floor":"10ms","long_poll":2,"token":"abc","claims_per_lane":3}"#,
        )
        .unwrap();
        assert_eq!(o.mode, PopMode::Targeted);
        assert_eq!(o.workers_for(100), 3);
        assert_eq!(o.lease_secs(), 5);
        assert_eq!(o.sweep_floor, Duration::from_millis(10));
        assert_eq!(o.claims_per_lane, 3);
        assert_eq!(o.long_poll, Duration::from_secs(2));
        assert!(o.validate().is_ok());
        let o: QueenOptions = serde_json::from_str(r#"{"mode":"auto-ack"}"#).unwrap();
        assert_eq!(o.mode, PopMode::AutoAck);
        assert!(serde_json::from_str::<QueenOptions>(r#"{"bogus":1}"#).is_err());
        assert!(QueenOptions::default().validate().is_ok());
    }

    #[test]
    fn bad_knobs_name_their_field() {
        let d = QueenOptions::default;
        let cases = [
            (
                QueenOptions {
                    lease_time: Duration::from_millis(1500),
                    ..d()
                },
                "queen.lease_time",
            ),
            (
                QueenOptions {
                    url: "127.0.0.1:6632".into(),
                    ..d()
                },
                "queen.url",
            ),
            (
                QueenOptions {
                    token: Some("a b".into()),
                    ..d()
                },
                "queen.token",
            ),
            (
                QueenOptions {
                    claims_per_lane: 0,
                    ..d()
                },
                "queen.claims_per_lane",
            ),
            (
                QueenOptions {
                    delayed_processing: Duration::from_millis(500),
                    ..d()
                },
                "queen.delayed_processing",
            ),
            (
                QueenOptions {
                    store_dsn: Some("127.0.0.1:5432/queen".into()),
                    ..d()
                },
                "queen.store_dsn",
            ),
        ];
        for (o, field) in cases {
            assert_eq!(o.validate().unwrap_err().field, field);
        }
    }

    #[test]
    fn token_never_serialises() {
        let o = QueenOptions {
            token: Some("s3cret-token".into()),
            ..Default::default()
        };
        let j = serde_json::to_string(&o).unwrap();
        assert!(!j.contains("s3cret"), "{j}");
        assert!(j.contains("\"token\":\"***\""), "{j}");
    }

    #[test]
    fn store_password_never_serialises() {
        let o = QueenOptions {
            store_dsn: Some("postgres://bench:s3cret-pw@127.0.0.1:5432/queen".into()),
            ..Default::default()
        };
        assert!(o.validate().is_ok());
        let j = serde_json::to_string(&o).unwrap();
        assert!(!j.contains("s3cret"), "{j}");
        assert!(
            j.contains("\"store_dsn\":\"postgres://bench:***@127.0.0.1:5432/queen\""),
            "{j}"
        );
    }
}
