//! Opening a connection: plain over `amqp://`, TLS over `amqps://` with the section's
//! `tls` block (one rustls configuration, adapters/src/tls.rs: its CA, client
//! certificate, server name, or `insecure`), the password from `password_env` or
//! `password_file`. A first connection the server or the certificate refuses is a
//! configuration error naming the host and the field to fix, not a retry.

use std::sync::Arc;

use lapin::tcp::{AsyncTcpStream, RustlsConnector};
use lapin::types::LongString;
use lapin::uri::{AMQPScheme, AMQPUri};
use lapin::{Connection, ConnectionProperties};

use super::options::RabbitOptions;
use crate::error::BrokerError;

/// A connection named `crossbench-{name}` to node `node` of the section (0 = `url`,
/// `i` = `nodes[i - 1]`); the error is lapin's words (which never carry the URL's
/// password). With several nodes, `rabbitmq.tls` applies to each, its certificate
/// checked against that node's host (or `tls.server_name`).
pub(super) async fn open(o: &RabbitOptions, node: usize, name: &str) -> Result<Connection, String> {
    let props = ConnectionProperties::default()
        .with_connection_name(LongString::from(format!("crossbench-{name}")));
    let url = o.node_connect_url(node).map_err(|e| e.to_string())?;
    let uri: AMQPUri = url
        .parse()
        .map_err(|e| format!("rabbitmq.{} does not parse: {e}", o.node_field(node)))?;
    if uri.scheme == AMQPScheme::AMQP {
        return Connection::connect_uri(uri, props)
            .await
            .map_err(|e| e.to_string());
    }
    let config = o.tls.client_config("rabbitmq").map_err(|e| e.to_string())?;
    let connector = RustlsConnector::from(Arc::new(config));
    let name = o.tls.name_for(&uri.authority.host).to_string();
    let runtime = lapin::runtime::default_runtime().map_err(|e| e.to_string())?;
    Connection::connector(
        uri,
        runtime,
        async move |uri, runtime| {
            let addr = runtime.to_socket_addrs((uri.authority.host.clone(), uri.authority.port));
            let plain = AsyncTcpStream::connect(&runtime, addr).await?;
            Ok(plain.into_rustls(&connector, &name).await?)
        },
        props,
    )
    .await
    .map_err(|e| e.to_string())
}

/// The error of a connection that failed: a certificate's verdict or a refused login
/// is the scenario's to fix (a configuration error naming the field), anything else a
/// connection failure the caller may retry.
pub(super) fn failure(o: &RabbitOptions, text: &str, at: &str) -> BrokerError {
    if o.amqps() {
        if let Some(e) = crate::tls::handshake_refused("RabbitMQ", "rabbitmq", at, text) {
            return e;
        }
    }
    let t = text.to_ascii_lowercase();
    if t.contains("access_refused") || t.contains("access-refused") {
        let field = crate::tls::password_field("rabbitmq", &o.password_file);
        return BrokerError::Config {
            field: field.clone(),
            message: format!(
                "RabbitMQ at {at} refused the login: {text}. Fix the password in {field}, or the user in rabbitmq.url"
            ),
        };
    }
    if !o.amqps() && (t.contains("unexpected eof") || t.contains("connection reset")) {
        return BrokerError::Connection(format!(
            "RabbitMQ at {at} closed the connection during the handshake: {text} (a TLS listener? then give its amqps:// URL and rabbitmq.tls)"
        ));
    }
    BrokerError::Connection(format!(
        "cannot connect to {at}: {text} (is RabbitMQ running? scripts/provision/rabbitmq.sh)"
    ))
}
