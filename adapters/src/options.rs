//! What every system's scenario section has in common: defaults, a serde form that
//! refuses unknown fields, one way to check its knobs, and the sampler targets the
//! system is measured by when a scenario names none.

use std::fmt::Debug;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::BrokerError;

/// A knob out of range: the field by its dotted scenario path (`pgmq.readers`) and
/// what to write instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct OptionsError {
    pub field: String,
    pub message: String,
}

impl OptionsError {
    /// The field `<section>.<field>` is wrong: `message` says how to fix it.
    pub fn new(section: &str, field: &str, message: impl Into<String>) -> Self {
        OptionsError {
            field: if field.is_empty() {
                section.to_string()
            } else {
                format!("{section}.{field}")
            },
            message: message.into(),
        }
    }
}

impl From<OptionsError> for BrokerError {
    fn from(e: OptionsError) -> Self {
        BrokerError::Config {
            field: e.field,
            message: e.message,
        }
    }
}

/// One system's scenario section (`mem:`, `pgmq:`, …).
pub trait Section:
    Default + Clone + PartialEq + Debug + Serialize + DeserializeOwned + Send + Sync + 'static
{
    /// Check every knob before anything starts; the error names the field and the fix.
    fn validate(&self) -> Result<(), OptionsError>;

    /// Sampler targets of the system under test, `(label, spec)`, when the scenario
    /// names none. Empty for a system that runs inside the loader.
    fn sample_targets(&self) -> Vec<(String, String)> {
        Vec::new()
    }

    /// What the console and the record must say about these options (an unverified
    /// TLS connection, a password in the scenario's text).
    fn warnings(&self) -> Vec<String> {
        Vec::new()
    }

    /// The `host:port` the adapter connects to, for the harness's TCP proxy; `Err`
    /// says why the system cannot be routed through one.
    fn endpoint(&self) -> Result<String, String> {
        Err("this system has no network endpoint to put a proxy in front of".into())
    }

    /// The same section, connecting to `addr` (`host:port`) instead of its endpoint.
    fn routed_to(&self, _addr: &str) -> Result<Self, String> {
        Err(self
            .endpoint()
            .err()
            .unwrap_or_else(|| "this system cannot be routed through the harness's proxy".into()))
    }
}

/// The byte range of the `host:port` part of a URL (`scheme://[user[:pass]@]host:port/…`).
pub fn url_authority(url: &str) -> Option<std::ops::Range<usize>> {
    let start = url.find("://")? + 3;
    let rest = &url[start..];
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let auth = &rest[..end];
    let host_at = auth.rfind('@').map_or(0, |i| i + 1);
    if auth[host_at..].is_empty() {
        return None;
    }
    Some(start + host_at..start + end)
}

/// `host:port` of a URL, with `default_port` when the URL names none.
pub fn url_endpoint(url: &str, field: &str, default_port: u16) -> Result<String, String> {
    let r = url_authority(url).ok_or_else(|| {
        format!("{field} is not a URL (scheme://host:port/…); the proxy needs one to route")
    })?;
    let hp = &url[r];
    if hp.contains(',') {
        return Err(format!("{field} names several hosts; the proxy routes one"));
    }
    let has_port = hp
        .rsplit_once(':')
        .is_some_and(|(h, p)| !h.is_empty() && !h.ends_with(':') && p.parse::<u16>().is_ok());
    Ok(if has_port {
        hp.to_string()
    } else {
        format!("{hp}:{default_port}")
    })
}

/// `url` with its `host:port` replaced by `addr`.
pub fn url_routed(url: &str, field: &str, addr: &str) -> Result<String, String> {
    let r = url_authority(url).ok_or_else(|| format!("{field} is not a URL"))?;
    Ok(format!("{}{addr}{}", &url[..r.start], &url[r.end..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_endpoints_and_routing_keep_everything_else() {
        let u = "amqp://guest:s3cr:et@127.0.0.1:5672/%2f?heartbeat=5";
        assert_eq!(url_endpoint(u, "f", 1).unwrap(), "127.0.0.1:5672");
        assert_eq!(
            url_routed(u, "f", "127.0.0.1:40000").unwrap(),
            "amqp://guest:s3cr:et@127.0.0.1:40000/%2f?heartbeat=5"
        );
        assert_eq!(
            url_endpoint("postgres://u@localhost/db", "f", 5432).unwrap(),
            "localhost:5432"
        );
        assert!(url_endpoint("host=x port=5432", "f", 5432).is_err());
        assert!(url_endpoint("kafka://a:1,b:2", "f", 1).is_err());
    }
}
