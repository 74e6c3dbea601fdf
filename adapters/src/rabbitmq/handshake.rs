//! The server's properties from the AMQP 0-9-1 handshake (`connection.start`:
//! product, version, platform, cluster name), for the record's provenance. lapin
//! reads them and does not keep them, so the adapter opens one more TCP connection
//! (over TLS for `amqps://`, with the section's `tls` block), sends the protocol
//! header, reads the server's first frame and closes: no login, no credentials sent.
//! A server that does not answer is a note, never a failed setup.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use lapin::types::{AMQPValue, FieldTable};
use lapin::uri::{AMQPScheme, AMQPUri};
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::options::RabbitOptions;

use crate::provenance::Provenance;

/// AMQP 0-9-1's protocol header.
const HEADER: &[u8; 8] = b"AMQP\x00\x00\x09\x01";
/// The largest `connection.start` frame the adapter reads (RabbitMQ's is ~500 bytes).
const MAX_FRAME: u32 = 64 * 1024;

/// The server properties of the server at `url` (one of the section's node URLs; a
/// table of text values).
pub async fn server_properties(
    o: &RabbitOptions,
    url: &str,
    timeout: Duration,
) -> Result<BTreeMap<String, String>, String> {
    let uri: AMQPUri = url
        .parse()
        .map_err(|e| format!("the URL does not parse: {e}"))?;
    let addr = format!("{}:{}", uri.authority.host, uri.authority.port);
    let read = async {
        let s = tokio::net::TcpStream::connect(&addr)
            .await
            .map_err(|e| format!("connecting to {addr}: {e}"))?;
        if uri.scheme == AMQPScheme::AMQP {
            return greeting(s).await;
        }
        let config = o.tls.client_config("rabbitmq").map_err(|e| e.to_string())?;
        let name = ServerName::try_from(o.tls.name_for(&uri.authority.host).to_string())
            .map_err(|e| format!("the server name: {e}"))?;
        let s = tokio_rustls::TlsConnector::from(Arc::new(config))
            .connect(name, s)
            .await
            .map_err(|e| format!("TLS to {addr}: {e}"))?;
        greeting(s).await
    };
    let payload = tokio::time::timeout(timeout, read)
        .await
        .map_err(|_| format!("no connection.start from {addr} in {timeout:?}"))??;
    parse_start(&payload)
}

/// Send the protocol header, read the server's first frame's payload, close.
async fn greeting<S: AsyncRead + AsyncWrite + Unpin>(mut s: S) -> Result<Vec<u8>, String> {
    s.write_all(HEADER)
        .await
        .map_err(|e| format!("sending the protocol header: {e}"))?;
    let mut head = [0u8; 7];
    s.read_exact(&mut head)
        .await
        .map_err(|e| format!("reading connection.start: {e}"))?;
    let size = u32::from_be_bytes([head[3], head[4], head[5], head[6]]);
    if head[0] != 1 || size > MAX_FRAME {
        return Err(format!(
            "the server's first frame is not a connection.start (type {}, {size} bytes)",
            head[0]
        ));
    }
    let mut payload = vec![0u8; size as usize + 1];
    s.read_exact(&mut payload)
        .await
        .map_err(|e| format!("reading connection.start: {e}"))?;
    let _ = s.shutdown().await;
    Ok(payload)
}

/// The text values of a `connection.start` method frame's payload (class 10, method
/// 10, version 0-9, server-properties, …).
fn parse_start(payload: &[u8]) -> Result<BTreeMap<String, String>, String> {
    if payload.len() < 6 || payload[0..4] != [0, 10, 0, 10] {
        return Err("the server's first method is not connection.start".into());
    }
    let (_, table) = lapin::types::parsing::parse_field_table(&payload[6..])
        .map_err(|e| format!("server-properties do not parse: {e}"))?;
    Ok(texts(&table))
}

/// The table's text values (nested tables such as `capabilities` left out).
fn texts(t: &FieldTable) -> BTreeMap<String, String> {
    t.inner()
        .iter()
        .filter_map(|(k, v)| {
            let v = match v {
                AMQPValue::LongString(s) => s.to_string(),
                AMQPValue::ShortString(s) => s.to_string(),
                _ => return None,
            };
            Some((k.to_string(), v))
        })
        .collect()
}

/// The provenance of a RabbitMQ server from its properties (or why there are none).
pub fn provenance(props: Result<BTreeMap<String, String>, String>) -> Provenance {
    const SOURCE: &str = "AMQP connection.start server-properties";
    match props {
        Ok(p) => {
            let mut out = Provenance::new(
                p.get("product")
                    .cloned()
                    .unwrap_or_else(|| "RabbitMQ".into()),
                SOURCE,
            );
            out = match p.get("version") {
                Some(v) => out.with_version(v.clone()),
                None => {
                    out.not_reported("version", "no `version` in the server-properties");
                    out
                }
            };
            for key in ["platform", "cluster_name"] {
                if let Some(v) = p.get(key) {
                    out.report(key, v.clone());
                }
            }
            match p.get("platform").and_then(|v| v.strip_prefix("Erlang/OTP")) {
                Some(otp) => out.setting("erlang_otp", otp.trim().to_string()),
                None => out.not_reported(
                    "Erlang/OTP version",
                    "the server-properties' `platform` does not carry it",
                ),
            }
            out
        }
        Err(why) => {
            let mut out = Provenance::new("RabbitMQ", SOURCE);
            out.not_reported("version", crate::redact::redact_url_passwords(&why));
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lapin::types::{LongString, ShortString};

    #[test]
    fn reads_product_version_platform_and_the_otp_release() {
        let mut t = FieldTable::default();
        for (k, v) in [
            ("product", "RabbitMQ"),
            ("version", "3.10.8"),
            ("platform", "Erlang/OTP 25.2.3"),
        ] {
            t.insert(
                ShortString::from(k),
                AMQPValue::LongString(LongString::from(v)),
            );
        }
        t.insert(
            ShortString::from("capabilities"),
            AMQPValue::FieldTable(FieldTable::default()),
        );
        let mut buf = vec![0u8, 10, 0, 10, 0, 9];
        let mut body = Vec::new();
        for (k, v) in t.inner() {
            body.push(k.as_str().len() as u8);
            body.extend_from_slice(k.as_str().as_bytes());
            match v {
                AMQPValue::LongString(s) => {
                    body.push(b'S');
                    body.extend_from_slice(&(s.as_bytes().len() as u32).to_be_bytes());
                    body.extend_from_slice(s.as_bytes());
                }
                _ => {
                    body.push(b'F');
                    body.extend_from_slice(&0u32.to_be_bytes());
                }
            }
        }
        buf.extend_from_slice(&(body.len() as u32).to_be_bytes());
        buf.extend_from_slice(&body);
        let props = parse_start(&buf).unwrap();
        assert_eq!(props.len(), 3, "{props:?}");
        let p = provenance(Ok(props));
        assert_eq!(p.product, "RabbitMQ");
        assert_eq!(p.version.as_deref(), Some("3.10.8"));
        assert_eq!(p.settings["erlang_otp"], "25.2.3");
        assert!(p.notes.is_empty(), "{:?}", p.notes);
    }

    #[test]
    fn no_answer_is_a_note() {
        let p = provenance(Err("connecting to 127.0.0.1:1: refused".into()));
        assert_eq!(p.version, None);
        assert_eq!(
            p.notes,
            vec!["version not reported: connecting to 127.0.0.1:1: refused"]
        );
        assert!(parse_start(&[0, 10, 0, 11, 0, 9]).is_err());
    }
}
