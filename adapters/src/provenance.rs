//! Provenance: what the system under test says it is, read from the server by the
//! adapter at setup (never typed by hand), and the server settings that decide a
//! comparison. Every adapter fills one in its [`Description`](crate::Description);
//! the loader writes it as `result.json`'s `provenance` block (docs/record.md).
//!
//! A server that does not answer a question is no failed cell: the answer is left
//! out and a note says "… not reported: <why>". A server whose answer is known not to
//! name the build measured (Queen 0.15.1 answers `/health` with "1.0.0") carries a
//! [`Provenance::caveat`], and the record the build the scenario states beside it.

use std::collections::BTreeMap;

use serde::Serialize;

/// Product, version, build and settings of the server, as the server reported them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Provenance {
    /// The product as the server names itself (or, when the protocol carries no
    /// name, as the adapter knows it: "a Kafka-protocol broker").
    pub product: String,
    /// The version as the server reports it; `None` when it reports none (a note
    /// says why).
    pub version: Option<String>,
    /// The build as the server reports it beside its version (PostgreSQL's
    /// `version()` line, a git sha), when it does.
    pub build: Option<String>,
    /// Where the answers came from (the query, the handshake, the endpoint).
    pub source: String,
    /// Other facts the server reported about itself (the pgmq extension's version,
    /// the Erlang/OTP release, JetStream enabled, the brokers metadata lists).
    pub reported: BTreeMap<String, String>,
    /// The server settings that decide a comparison, as the server reported them.
    pub settings: BTreeMap<String, String>,
    /// Set when the server's version is known not to name the build measured; the
    /// record then carries the build the scenario states (`system_build`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub caveat: Option<String>,
    /// What was not reported and why, and other facts a reader needs.
    pub notes: Vec<String>,
}

impl Provenance {
    /// A provenance for `product`, answered through `source`; nothing reported yet.
    pub fn new(product: impl Into<String>, source: impl Into<String>) -> Provenance {
        Provenance {
            product: product.into(),
            source: source.into(),
            ..Provenance::default()
        }
    }

    /// The version as the server reported it (an empty answer is no answer).
    pub fn with_version(mut self, version: impl Into<String>) -> Provenance {
        let v = version.into();
        if v.trim().is_empty() {
            self.not_reported("version", "the server's answer was empty");
        } else {
            self.version = Some(v.trim().to_string());
        }
        self
    }

    /// The build as the server reported it (an empty answer is left out).
    pub fn with_build(mut self, build: impl Into<String>) -> Provenance {
        let b = build.into();
        if !b.trim().is_empty() {
            self.build = Some(b.trim().to_string());
        }
        self
    }

    /// Another fact the server reported about itself.
    pub fn report(&mut self, key: impl Into<String>, value: impl Into<String>) {
        self.reported.insert(key.into(), value.into());
    }

    /// A setting as the server reported it.
    pub fn setting(&mut self, key: impl Into<String>, value: impl Into<String>) {
        self.settings.insert(key.into(), value.into());
    }

    /// `what` was asked and not answered: "`what` not reported: `why`".
    pub fn not_reported(&mut self, what: &str, why: impl std::fmt::Display) {
        self.notes.push(format!("{what} not reported: {why}"));
    }

    /// A fact a reader needs.
    pub fn note(&mut self, note: impl Into<String>) {
        self.notes.push(note.into());
    }

    /// The server's version, or "not reported".
    pub fn version_or_not_reported(&self) -> &str {
        self.version.as_deref().unwrap_or("not reported")
    }

    /// One line for the console: "Redis 7.0.15 (build redis_git_sha1=…)"; a build
    /// that repeats the version (PostgreSQL's `version()` line) is left out.
    pub fn headline(&self) -> String {
        let mut s = format!("{} {}", self.product, self.version_or_not_reported());
        if let Some(b) = &self.build {
            if self
                .version
                .as_ref()
                .is_none_or(|v| !b.contains(v.as_str()))
            {
                s.push_str(&format!(" (build {b})"));
            }
        }
        s
    }

    /// `key=value, …` of a map, in key order.
    pub fn joined(map: &BTreeMap<String, String>) -> String {
        map.iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_answer_is_not_a_version_and_says_so() {
        let p = Provenance::new("X", "a query").with_version("  ");
        assert_eq!(p.version, None);
        assert_eq!(p.version_or_not_reported(), "not reported");
        assert_eq!(
            p.notes,
            vec!["version not reported: the server's answer was empty"]
        );
    }

    #[test]
    fn headline_names_product_version_and_a_distinct_build() {
        let mut p = Provenance::new("Redis", "INFO server")
            .with_version("7.0.15")
            .with_build("redis_git_sha1=00000000");
        assert_eq!(p.headline(), "Redis 7.0.15 (build redis_git_sha1=00000000)");
        p.build = Some("Redis 7.0.15 on x86_64".into());
        assert_eq!(p.headline(), "Redis 7.0.15");
        p.setting("fsync", "on");
        p.setting("autovacuum", "off");
        assert_eq!(Provenance::joined(&p.settings), "autovacuum=off, fsync=on");
    }

    #[test]
    fn serialises_without_a_caveat_unless_there_is_one() {
        let p = Provenance::new("X", "s").with_version("1");
        let v = serde_json::to_value(&p).unwrap();
        assert!(v.get("caveat").is_none(), "{v}");
        let p = Provenance {
            caveat: Some("wrong".into()),
            ..p
        };
        assert_eq!(serde_json::to_value(&p).unwrap()["caveat"], "wrong");
    }
}
