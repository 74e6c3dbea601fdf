//! Opening a connection: plain, or TLS with the section's `tls` block (one rustls
//! configuration, adapters/src/tls.rs), with the user's password from `password_env`
//! or `password_file`, or a credentials file. A first connection the server or the
//! certificate refuses is a configuration error naming the host and the field to fix.

use std::time::Duration;

use async_nats::{ConnectErrorKind, ConnectOptions};

use super::options::NatsOptions;
use crate::error::BrokerError;
use crate::redact::redact_url_passwords;

/// A client named `name`; `provision` is what to run when no server answers.
pub(super) async fn open(
    o: &NatsOptions,
    name: &str,
    provision: &str,
) -> Result<async_nats::Client, BrokerError> {
    let config = BrokerError::from;
    let mut url = url::Url::parse(&o.url).map_err(|e| BrokerError::Config {
        field: "nats.url".into(),
        message: format!("nats.url does not parse: {e}"),
    })?;
    let mut options = if o.creds_file.is_empty() {
        ConnectOptions::new()
    } else {
        ConnectOptions::with_credentials_file(&o.creds_file)
            .await
            .map_err(|e| BrokerError::Config {
                field: "nats.creds_file".into(),
                message: format!("nats.creds_file {}: {e}", o.creds_file),
            })?
    };
    if let Some(password) = o.password().map_err(config)? {
        options = options.user_and_password(url.username().to_string(), password);
        let _ = url.set_username("");
    }
    if o.tls_on() {
        let tls = o.tls.client_config("nats").map_err(config)?;
        options = options.require_tls(true).tls_client_config(tls);
    }
    let host = format!(
        "{}:{}",
        url.host_str().unwrap_or_default(),
        url.port().unwrap_or(4222)
    );
    options
        .name(name)
        .connection_timeout(Duration::from_secs(5))
        .request_timeout(Some(o.request_timeout))
        .connect(url.as_str())
        .await
        .map_err(|e| {
            let text = redact_url_passwords(&e.to_string());
            failure(o, e.kind(), &text, &host, provision)
        })
}

/// A certificate's verdict or a refused login is the scenario's to fix.
fn failure(
    o: &NatsOptions,
    kind: ConnectErrorKind,
    text: &str,
    host: &str,
    provision: &str,
) -> BrokerError {
    match kind {
        ConnectErrorKind::Tls | ConnectErrorKind::Io if o.tls_on() => {
            if let Some(e) = crate::tls::handshake_refused("NATS", "nats", host, text) {
                return e;
            }
        }
        ConnectErrorKind::AuthorizationViolation | ConnectErrorKind::Authentication => {
            let field = if o.creds_file.is_empty() {
                crate::tls::password_field("nats", &o.password_file)
            } else {
                "nats.creds_file".to_string()
            };
            return BrokerError::Config {
                field: field.clone(),
                message: format!(
                    "NATS at {host} refused the login: {text}. Fix {field}, or the user in nats.url"
                ),
            };
        }
        _ => {}
    }
    let hint = if !o.tls_on() && text.to_ascii_lowercase().contains("tls") {
        " (the server requires TLS? then give nats.tls)".to_string()
    } else {
        format!(" (run {provision})")
    };
    BrokerError::Connection(format!("cannot connect to NATS at {host}: {text}{hint}"))
}
