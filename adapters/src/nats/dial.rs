//! Opening a connection: plain, or TLS with the section's `tls` block (one rustls
//! configuration, adapters/src/tls.rs), with the user's password from `password_env`
//! or `password_file`, or a credentials file. A first connection the server or the
//! certificate refuses is a configuration error naming the host and the field to fix.

use std::time::Duration;

use async_nats::{ConnectErrorKind, ConnectOptions, ServerAddr};

use super::options::NatsOptions;
use crate::error::BrokerError;
use crate::redact::redact_url_passwords;

/// A client named `name` with every server of `nats.url` in its server list (it
/// connects to them in turn and reconnects to another when its own goes); `provision`
/// is what to run when no server answers.
pub(super) async fn open(
    o: &NatsOptions,
    name: &str,
    provision: &str,
) -> Result<async_nats::Client, BrokerError> {
    let config = BrokerError::from;
    let mut urls = o.parsed_urls().map_err(config)?;
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
        // One login for every server: the first URL's user (validation made sure the
        // others name the same one or none).
        options = options.user_and_password(urls[0].username().to_string(), password);
        for url in &mut urls {
            let _ = url.set_username("");
        }
    }
    if o.tls_on() {
        let tls = o.tls.client_config("nats").map_err(config)?;
        options = options.require_tls(true).tls_client_config(tls);
    }
    let host = urls
        .iter()
        .map(|u| {
            format!(
                "{}:{}",
                u.host_str().unwrap_or_default(),
                u.port().unwrap_or(4222)
            )
        })
        .collect::<Vec<_>>()
        .join(", ");
    let servers = urls
        .into_iter()
        .map(ServerAddr::from_url)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| BrokerError::Config {
            field: "nats.url".into(),
            message: redact_url_passwords(&format!("nats.url: {e}")),
        })?;
    options
        .name(name)
        .connection_timeout(Duration::from_secs(5))
        .request_timeout(Some(o.request_timeout))
        .connect(servers)
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
