//! Scenario section `redis`.

use std::time::Duration;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RedisOptions {
    /// Server URL (`redis://[:password@]host:port[/db]`; the password is redacted in
    /// every error and file).
    pub url: String,
    /// Reader tasks per (topic, group) stream; each owns a share of the lanes (one lane
    /// is read by one consumer only), with its own connection for `XREADGROUP … BLOCK`.
    pub readers: usize,
    /// The lease: a refused batch stays pending and is reclaimed with `XAUTOCLAIM`
    /// once it has been idle this long (its min-idle-time). Whole milliseconds, >= 100 ms.
    #[serde(with = "crate::duration_text")]
    pub lease: Duration,
    /// Longest `BLOCK` of one `XREADGROUP`; a finished batch wakes the reader early
    /// (`CLIENT UNBLOCK`).
    #[serde(with = "crate::duration_text")]
    pub block: Duration,
    /// Upper bound of physical lanes (streams) per topic; 0 = the topology's lanes (at
    /// most the keys). Keys hash (FNV-1a) onto the lanes.
    pub max_lanes: u64,
    /// `XADD … MAXLEN ~ n` trimming; 0 = off (the default: trimming can drop messages a
    /// group has not read yet, which the checker would count as lost).
    pub maxlen: u64,
    /// Give up on one command after this long (counted as an error, then retried).
    #[serde(with = "crate::duration_text")]
    pub response_timeout: Duration,
    /// The sampler's target: the server's process name.
    pub process: String,
    /// TLS to the server (adapters/src/tls.rs); needs a `rediss://` URL. A `rediss://`
    /// URL with no `tls` block verifies against the system's trust roots.
    pub tls: crate::tls::TlsOptions,
    /// The variable that holds the password (of the URL's ACL user, or the default
    /// user's `requirepass`).
    pub password_env: String,
    /// Or a file whose first line is the password.
    pub password_file: String,
}

impl Default for RedisOptions {
    fn default() -> Self {
        RedisOptions {
            url: "redis://127.0.0.1:6379/".into(),
            readers: 2,
            lease: Duration::from_secs(30),
            block: Duration::from_millis(500),
            max_lanes: 0,
            maxlen: 0,
            response_timeout: Duration::from_secs(10),
            process: "redis-server".into(),
            tls: crate::tls::TlsOptions::default(),
            password_env: String::new(),
            password_file: String::new(),
        }
    }
}

impl crate::options::Section for RedisOptions {
    fn validate(&self) -> Result<(), crate::options::OptionsError> {
        let bad = |f: &str, m: &str| Err(crate::options::OptionsError::new("redis", f, m));
        if !(self.url.starts_with("redis://") || self.url.starts_with("rediss://")) {
            return bad("url", "must be a redis:// URL (redis://127.0.0.1:6379/)");
        }
        if self.readers == 0 {
            return bad("readers", "must be >= 1");
        }
        if self.lease < Duration::from_millis(100) {
            return bad("lease", "must be >= 100ms");
        }
        if self.block < Duration::from_millis(1) {
            return bad("block", "must be >= 1ms");
        }
        if self.response_timeout < Duration::from_millis(100) {
            return bad("response_timeout", "must be >= 100ms");
        }
        self.tls.validate("redis")?;
        if self.tls.on() && !self.url.starts_with("rediss://") {
            return bad(
                "url",
                "redis.tls is set but the URL is redis://: give the TLS port's rediss:// URL",
            );
        }
        if !self.tls.server_name.is_empty() {
            return bad(
                "tls.server_name",
                "the Redis client checks the certificate against the URL's host: connect by the name the certificate carries",
            );
        }
        if self.url.contains("#insecure") {
            return bad(
                "url",
                "say redis.tls.insecure: true instead of the URL's #insecure (so that the record warns about it)",
            );
        }
        self.password()?;
        Ok(())
    }

    fn warnings(&self) -> Vec<String> {
        let mut w = self.tls.warnings("redis");
        if url::Url::parse(&self.url).is_ok_and(|u| u.password().is_some()) {
            w.push(crate::tls::password_in_text("redis.url"));
        }
        w
    }

    fn sample_targets(&self) -> Vec<(String, String)> {
        if self.process.is_empty() {
            vec![]
        } else {
            vec![("redis".into(), format!("proc:{}", self.process))]
        }
    }

    fn endpoint(&self) -> Result<String, String> {
        crate::options::url_endpoint(&self.url, "redis.url", 6379)
    }

    fn routed_to(&self, addr: &str) -> Result<Self, String> {
        Ok(RedisOptions {
            url: crate::options::url_routed(&self.url, "redis.url", addr)?,
            ..self.clone()
        })
    }
}

impl RedisOptions {
    /// The password from `password_env` or `password_file`, if either is given.
    pub fn password(&self) -> Result<Option<String>, crate::options::OptionsError> {
        crate::tls::PasswordSource {
            section: "redis",
            env: &self.password_env,
            file: &self.password_file,
        }
        .read()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::Section;

    #[test]
    fn parses_and_validates() {
        let o: RedisOptions =
            serde_json::from_str(r#"{"lease":"2s","readers":3,"block":"50ms"}"#).unwrap();
        assert_eq!(o.lease, Duration::from_secs(2));
        assert_eq!(o.readers, 3);
        assert!(RedisOptions::default().validate().is_ok());
        assert!(serde_json::from_str::<RedisOptions>(r#"{"bogus":1}"#).is_err());
        let bad = RedisOptions {
            readers: 0,
            ..Default::default()
        };
        assert!(bad.validate().is_err());
        assert_eq!(
            RedisOptions::default().endpoint().unwrap(),
            "127.0.0.1:6379"
        );
        assert_eq!(
            RedisOptions::default()
                .routed_to("127.0.0.1:9")
                .unwrap()
                .url,
            "redis://127.0.0.1:9/"
        );
    }
}
