//! The client of a `redis` section: plain over `redis://`, TLS over `rediss://` with
//! the section's `tls` block (its CA file, client certificate, or `insecure`), the
//! password from `password_env` or `password_file`. A first connection the server or
//! the certificate refuses is a configuration error naming the host and the field.

use ::redis::{Client, ErrorKind, IntoConnectionInfo, RedisError, TlsCertificates};

use super::options::RedisOptions;
use crate::error::BrokerError;
use crate::redact::redact_url_passwords;

/// The client of the section (no connection is opened yet).
pub(super) fn client(o: &RedisOptions) -> Result<Client, BrokerError> {
    let config = |e: String| BrokerError::Config {
        field: "redis.url".into(),
        message: redact_url_passwords(&e),
    };
    let mut url = o.url.clone();
    if o.tls.insecure {
        url.push_str("#insecure");
    }
    let mut info = url
        .as_str()
        .into_connection_info()
        .map_err(|e| config(e.to_string()))?;
    if let Some(password) = o.password()? {
        let settings = info.redis_settings().clone().set_password(password);
        info = info.set_redis_settings(settings);
    }
    if !o.url.starts_with("rediss://") {
        return Client::open(info).map_err(|e| config(e.to_string()));
    }
    // redis builds its own rustls configuration on the process's default provider.
    crate::tls::client::provider();
    let read = |field: &str, path: &str| {
        std::fs::read(path).map_err(|e| BrokerError::Config {
            field: format!("redis.tls.{field}"),
            message: format!("{path}: {e}"),
        })
    };
    let root_cert = match o.tls.ca_file.as_str() {
        "" => None,
        f => Some(read("ca_file", f)?),
    };
    let client_tls = match o.tls.cert_file.as_str() {
        "" => None,
        f => Some(::redis::ClientTlsConfig {
            client_cert: read("cert_file", f)?,
            client_key: read("key_file", &o.tls.key_file)?,
        }),
    };
    Client::build_with_tls(
        info,
        TlsCertificates {
            client_tls,
            root_cert,
        },
    )
    .map_err(|e| config(e.to_string()))
}

/// Where the section connects (`host:port`), for messages.
fn host(o: &RedisOptions) -> String {
    crate::options::url_endpoint(&o.url, "redis.url", 6379).unwrap_or_else(|_| "?".into())
}

/// A failed first connection: a certificate's verdict or a refused login is the
/// scenario's to fix, anything else the server's absence.
pub(super) fn failure(o: &RedisOptions, e: &RedisError, provision: &str) -> BrokerError {
    let text = redact_url_passwords(&e.to_string());
    let host = host(o);
    if o.url.starts_with("rediss://") {
        if let Some(e) = crate::tls::handshake_refused("Redis", "redis", &host, &text) {
            return e;
        }
    }
    let t = text.to_ascii_lowercase();
    if e.kind() == ErrorKind::AuthenticationFailed
        || t.contains("wrongpass")
        || t.contains("noauth")
    {
        let field = crate::tls::password_field("redis", &o.password_file);
        return BrokerError::Config {
            field: field.clone(),
            message: format!(
                "Redis at {host} refused the login: {text}. Fix the password in {field}, or the user in redis.url"
            ),
        };
    }
    BrokerError::Connection(format!(
        "cannot connect to Redis at {host}: {text} (run {provision})"
    ))
}
