//! Scenario section `pgmq`.

use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Which pgmq grouped read the consumers call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum ReadFn {
    /// `pgmq.read_grouped_head`: at most one message (the head) per group per read.
    #[default]
    Head,
    /// `pgmq.read_grouped_rr`: several messages per group, round-robin across groups.
    /// Known to race under concurrent readers (a reader can take a group's later rows
    /// while another holds its head); the adapter's in-flight key set narrows but cannot
    /// close that window.
    Rr,
}

impl ReadFn {
    pub fn sql_name(&self) -> &'static str {
        match self {
            ReadFn::Head => "read_grouped_head",
            ReadFn::Rr => "read_grouped_rr",
        }
    }
}

/// How an acknowledged message leaves the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum AckMode {
    /// `pgmq.delete(queue, ids)`.
    #[default]
    Delete,
    /// `pgmq.archive(queue, ids)`: moves the rows into the queue's archive table.
    Archive,
}

impl AckMode {
    pub fn sql_name(&self) -> &'static str {
        match self {
            AckMode::Delete => "delete",
            AckMode::Archive => "archive",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PgmqOptions {
    /// PostgreSQL DSN (its password is redacted in every file the harness writes and in
    /// every error the adapter returns).
    pub dsn: String,
    /// Grouped read function: `head` (default) or `rr`.
    pub read_fn: ReadFn,
    /// Concurrent reader loops per consumer stream.
    pub readers: usize,
    /// Rows asked for per read; 0 = the scenario's `batch`.
    pub read_qty: usize,
    /// Visibility timeout: how long a read message stays invisible before pgmq hands it
    /// out again. Seconds (`30`) or a duration string (`2s`, `1m`); whole seconds, >= 1 s.
    #[serde(with = "vt_serde")]
    pub visibility_timeout: Duration,
    /// `delete` (default) or `archive` acknowledged messages.
    pub ack: AckMode,
    /// Connections in the pool; 0 = readers x streams + 16, at most 90.
    pub pool_size: u32,
    /// First sleep after an empty read; doubled per consecutive empty read up to
    /// `empty_backoff_max`.
    #[serde(with = "crate::duration_text")]
    pub empty_backoff: Duration,
    /// Longest sleep between empty reads.
    #[serde(with = "crate::duration_text")]
    pub empty_backoff_max: Duration,
    /// Give up on one SQL call after this long (counted as an error, then retried).
    #[serde(with = "crate::duration_text")]
    pub statement_timeout: Duration,
    /// TLS to the server (adapters/src/tls.rs): verify-full against `ca_file` (or the
    /// system's roots), a client certificate for mutual TLS, `insecure` for a lab.
    /// Off: no TLS, whatever the server offers, unless the DSN says `sslmode=`.
    pub tls: crate::tls::TlsOptions,
    /// The variable that holds the DSN user's password (never the scenario's text).
    pub password_env: String,
    /// Or a file whose first line is the password.
    pub password_file: String,
}

impl Default for PgmqOptions {
    fn default() -> Self {
        PgmqOptions {
            dsn: "postgres://postgres@127.0.0.1:5432/crossbench".into(),
            read_fn: ReadFn::Head,
            readers: 2,
            read_qty: 0,
            visibility_timeout: Duration::from_secs(30),
            ack: AckMode::Delete,
            pool_size: 0,
            empty_backoff: Duration::from_millis(5),
            empty_backoff_max: Duration::from_millis(50),
            statement_timeout: Duration::from_secs(10),
            tls: crate::tls::TlsOptions::default(),
            password_env: String::new(),
            password_file: String::new(),
        }
    }
}

impl PgmqOptions {
    /// The password from `password_env` or `password_file`, if either is given.
    pub fn password(&self) -> Result<Option<String>, crate::options::OptionsError> {
        crate::tls::PasswordSource {
            section: "pgmq",
            env: &self.password_env,
            file: &self.password_file,
        }
        .read()
    }

    /// The DSN as the sampler's PostgreSQL probe connects with it: the TLS settings,
    /// when on, as libpq's URL parameters, and the password from its source. Held in memory only:
    /// the sampler never prints a DSN, and every spec it writes is redacted.
    pub fn probe_dsn(&self) -> String {
        let mut dsn = self.dsn.clone();
        if let Ok(Some(pw)) = self.password() {
            if let Ok(mut u) = url_parts(&dsn) {
                if u.password().is_none() && u.set_password(Some(&pw)).is_ok() {
                    dsn = u.to_string();
                }
            }
        }
        if !self.tls.on() {
            // The sampler's probe connects without TLS unless the DSN asks.
            return dsn;
        }
        let mut params = vec![format!(
            "sslmode={}",
            if self.tls.insecure {
                "require"
            } else {
                "verify-full"
            }
        )];
        for (k, v) in [
            ("sslrootcert", &self.tls.ca_file),
            ("sslcert", &self.tls.cert_file),
            ("sslkey", &self.tls.key_file),
        ] {
            if !v.is_empty() {
                params.push(format!("{k}={v}"));
            }
        }
        let sep = if dsn.contains('?') { '&' } else { '?' };
        format!("{dsn}{sep}{}", params.join("&"))
    }

    /// The visibility timeout in whole seconds as pgmq takes it (rounded up, >= 1).
    pub fn vt_secs(&self) -> i32 {
        let ms = self.visibility_timeout.as_millis();
        (ms.div_ceil(1000)).clamp(1, i32::MAX as u128) as i32
    }
}

impl crate::options::Section for PgmqOptions {
    fn validate(&self) -> Result<(), crate::options::OptionsError> {
        let bad = |f: &str, m: &str| Err(crate::options::OptionsError::new("pgmq", f, m));
        if self.readers == 0 {
            return bad("readers", "must be >= 1");
        }
        if self.visibility_timeout < Duration::from_secs(1) {
            return bad(
                "visibility_timeout",
                "pgmq takes whole seconds; use at least 1s",
            );
        }
        if self.visibility_timeout.subsec_nanos() != 0 {
            return bad(
                "visibility_timeout",
                "pgmq takes whole seconds; write e.g. 2s or 30",
            );
        }
        if self.empty_backoff_max < self.empty_backoff {
            return bad("empty_backoff_max", "must be >= empty_backoff");
        }
        if self.statement_timeout < Duration::from_millis(100) {
            return bad("statement_timeout", "must be >= 100ms");
        }
        if !(self.dsn.starts_with("postgres://") || self.dsn.starts_with("postgresql://")) {
            return bad("dsn", "must be a postgres:// URL");
        }
        self.tls.validate("pgmq")?;
        if !self.tls.server_name.is_empty() {
            let host = url_parts(&self.dsn)
                .ok()
                .and_then(|u| u.host_str().map(str::to_string))
                .unwrap_or_default();
            if host != self.tls.server_name {
                return bad(
                    "tls.server_name",
                    "PostgreSQL's client verifies the certificate against the DSN's host: connect by the name the certificate carries (put it in pgmq.dsn) and leave server_name out",
                );
            }
        }
        if self.tls.on() && self.dsn.contains("sslmode=") {
            return bad(
                "dsn",
                "give TLS in pgmq.tls or in the DSN's sslmode, not both",
            );
        }
        self.password()?;
        Ok(())
    }

    fn warnings(&self) -> Vec<String> {
        let mut w = self.tls.warnings("pgmq");
        if url_parts(&self.dsn).is_ok_and(|u| u.password().is_some()) {
            w.push(crate::tls::password_in_text("pgmq.dsn"));
        }
        w
    }

    /// The PostgreSQL processes, and PostgreSQL's internals through the DSN.
    fn sample_targets(&self) -> Vec<(String, String)> {
        vec![
            ("postgres".into(), "proc:postgres".into()),
            (
                "pg_internals".into(),
                format!("postgres:{}", self.probe_dsn()),
            ),
        ]
    }

    fn endpoint(&self) -> Result<String, String> {
        crate::options::url_endpoint(&self.dsn, "pgmq.dsn", 5432)
    }

    fn routed_to(&self, addr: &str) -> Result<Self, String> {
        Ok(PgmqOptions {
            dsn: crate::options::url_routed(&self.dsn, "pgmq.dsn", addr)?,
            ..self.clone()
        })
    }
}

/// The DSN's parts.
fn url_parts(dsn: &str) -> Result<url::Url, String> {
    url::Url::parse(dsn).map_err(|e| e.to_string())
}

/// Remove the password from a DSN or from any text that quotes one:
/// `postgres://user:secret@host` becomes `postgres://user:***@host`.
pub fn redact_dsn(text: &str) -> String {
    crate::redact::redact_url_passwords(text)
}

/// A whole-second duration: a number of seconds or a duration string.
mod vt_serde {
    use super::*;

    pub(super) fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{}s", d.as_secs()))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        crate::duration_text::deserialize(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::Section;

    #[test]
    fn redacts_passwords() {
        assert_eq!(
            redact_dsn("postgres://u:s3cr@t@h:5432/db"),
            "postgres://u:***@h:5432/db"
        );
        assert_eq!(
            redact_dsn("error connecting to postgres://u:pw@h/db: refused"),
            "error connecting to postgres://u:***@h/db: refused"
        );
        assert_eq!(
            redact_dsn("postgres://postgres@127.0.0.1:5432/crossbench"),
            "postgres://postgres@127.0.0.1:5432/crossbench"
        );
        assert_eq!(redact_dsn("no url here"), "no url here");
    }

    #[test]
    fn parses_knobs() {
        let o: PgmqOptions = serde_json::from_str(
            r#"{"read_fn":"rr","readers":4,"visibility_timeout":"2s","ack":"archive","empty_backoff":"10ms"}"#,
        )
        .unwrap();
        assert_eq!(o.read_fn, ReadFn::Rr);
        assert_eq!(o.readers, 4);
        assert_eq!(o.vt_secs(), 2);
        assert_eq!(o.ack, AckMode::Archive);
        assert_eq!(o.empty_backoff, Duration::from_millis(10));
        let o: PgmqOptions = serde_json::from_str(r#"{"visibility_timeout":7}"#).unwrap();
        assert_eq!(o.vt_secs(), 7);
        assert!(serde_json::from_str::<PgmqOptions>(r#"{"bogus":1}"#).is_err());
        let o = PgmqOptions {
            visibility_timeout: Duration::from_millis(1500),
            ..Default::default()
        };
        assert!(o.validate().is_err());
        assert!(PgmqOptions::default().validate().is_ok());
    }
}
