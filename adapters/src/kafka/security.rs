//! TLS and SASL for every librdkafka client the adapter makes (admin, producer,
//! members, bare loop): `security.protocol`, the `tls` block as librdkafka's `ssl.*`
//! settings (its own OpenSSL: librdkafka cannot take rustls), the SASL mechanism, user
//! and password. librdkafka reports a failed handshake or a refused login only as a
//! log event on the client's main queue, and keeps retrying; so setup first asks for
//! metadata through a client it polls ([`probe`]), and ends at once, naming the field,
//! when what it heard was a certificate or a login (not after a metadata timeout, with
//! "transport failure").

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::error::KafkaError;
use rdkafka::producer::{BaseProducer, Producer};
use rdkafka::{ClientConfig, ClientContext};

use super::options::KafkaOptions;
use crate::error::BrokerError;

/// Add the section's TLS and SASL settings to `c`. The password is read here, held in
/// librdkafka's configuration only (its configuration dump is never written).
pub(super) fn apply(o: &KafkaOptions, c: &mut ClientConfig) {
    c.set("security.protocol", o.security_protocol());
    if o.tls.on() {
        if !o.tls.ca_file.is_empty() {
            c.set("ssl.ca.location", &o.tls.ca_file);
        } else {
            c.set("ssl.ca.location", "probe");
        }
        if !o.tls.cert_file.is_empty() {
            c.set("ssl.certificate.location", &o.tls.cert_file)
                .set("ssl.key.location", &o.tls.key_file);
        }
        if o.tls.insecure {
            c.set("enable.ssl.certificate.verification", "false")
                .set("ssl.endpoint.identification.algorithm", "none");
        } else {
            c.set("enable.ssl.certificate.verification", "true")
                .set("ssl.endpoint.identification.algorithm", "https");
        }
    }
    if !o.sasl_mechanism.is_empty() {
        c.set("sasl.mechanism", &o.sasl_mechanism)
            .set("sasl.username", &o.sasl_username);
        // Checked by validate: present when a mechanism is named.
        if let Ok(Some(pw)) = o.password() {
            c.set("sasl.password", pw);
        }
    }
}

/// A client context that keeps the last error librdkafka logged or reported (a certificate it
/// refused, a login the broker refused, brokers down).
#[derive(Clone, Default)]
pub(super) struct Heard(Arc<Mutex<Option<String>>>);

impl ClientContext for Heard {
    /// A failed handshake or login, logged as it happens (served by a poll).
    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        if (level as i32) <= RDKafkaLogLevel::Error as i32 {
            *self.0.lock() = Some(format!("{fac}: {message}"));
        }
    }

    fn error(&self, error: KafkaError, reason: &str) {
        *self.0.lock() = Some(format!("{error}: {reason}"));
    }
}

impl rdkafka::producer::ProducerContext for Heard {
    type DeliveryOpaque = ();
    fn delivery(&self, _: &rdkafka::message::DeliveryResult<'_>, _: ()) {}
}

impl Heard {
    /// The last error, when it was a certificate's verdict or a refused login: what
    /// no retry can cure.
    pub fn security(&self) -> Option<String> {
        let last = self.0.lock().clone()?;
        let l = words(&last);
        ["ssl handshake", "certificate", "sasl", "authentication"]
            .iter()
            .any(|w| l.contains(w))
            .then_some(last)
    }
}

/// Ask the brokers for metadata through a client that is polled, within the
/// setup timeout (at most 10 s): `Ok` when they answer; a configuration error naming
/// the field when librdkafka heard a certificate or a login refused; a connection
/// error when nothing answers.
pub(super) async fn probe(o: &KafkaOptions) -> Result<(), BrokerError> {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", &o.bootstrap_servers)
        .set("client.id", "crossbench-probe")
        .set("log_level", "3");
    apply(o, &mut c);
    let heard = Heard::default();
    let client: BaseProducer<Heard> =
        c.create_with_context(heard.clone())
            .map_err(|e| BrokerError::Config {
                field: "kafka".into(),
                message: format!("client configuration refused by librdkafka: {e}"),
            })?;
    let deadline = Instant::now() + o.setup_timeout.min(Duration::from_secs(10));
    /// How the probe ended.
    enum Probe {
        Answered,
        Refused(String),
        Silent(String),
    }
    let ended = tokio::task::spawn_blocking(move || loop {
        let got = client
            .client()
            .fetch_metadata(None, Duration::from_millis(500));
        // Serves the log events: what the context hears.
        client.poll(Duration::ZERO);
        let Err(e) = got else {
            return Probe::Answered;
        };
        if let Some(refused) = heard.security() {
            return Probe::Refused(refused);
        }
        if Instant::now() >= deadline {
            return Probe::Silent(e.to_string());
        }
    })
    .await
    .map_err(|e| BrokerError::Other(format!("metadata probe: {e}")))?;
    match ended {
        Probe::Answered => Ok(()),
        Probe::Refused(heard) => Err(verdict(o, &heard)),
        Probe::Silent(e) => Err(BrokerError::Connection(format!(
            "metadata request: {e}; is a Kafka-protocol broker listening on {}? (scripts/provision/tansu.sh)",
            o.bootstrap_servers
        ))),
    }
}

/// `text` in lower case without the protocol prefixes of librdkafka's broker names
/// (`ssl://`, `sasl_ssl://`, `sasl_plaintext://`), which name a listener, not a failure.
fn words(text: &str) -> String {
    let mut l = text.to_ascii_lowercase();
    for prefix in ["sasl_plaintext://", "sasl_ssl://", "ssl://"] {
        l = l.replace(prefix, "");
    }
    l
}

/// The configuration error for what `heard` says, naming the field to fix.
pub(super) fn verdict(o: &KafkaOptions, heard: &str) -> BrokerError {
    let at = &o.bootstrap_servers;
    let l = words(heard);
    if l.contains("sasl") || l.contains("authentication") {
        let field = crate::tls::password_field("kafka", &o.password_file);
        return BrokerError::Config {
            field: field.clone(),
            message: format!(
                "the Kafka broker at {at} refused the login ({heard}). Fix the password in {field}, kafka.sasl_username, or kafka.sasl_mechanism (the broker's: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)"
            ),
        };
    }
    let (what, field) = if l.contains("certificate verify failed")
        || l.contains("unable to get local issuer")
        || l.contains("self-signed")
        || l.contains("self signed")
    {
        (
            "the broker's certificate is not signed by a CA it trusts",
            "kafka.tls.ca_file",
        )
    } else if l.contains("hostname mismatch") || l.contains("hostname") {
        (
            "the broker's certificate does not carry the name connected to",
            "kafka.bootstrap_servers",
        )
    } else if l.contains("expired") {
        (
            "the broker's certificate has expired (or the clock is wrong)",
            "kafka.tls.ca_file",
        )
    } else if !o.tls.on() {
        ("the broker speaks TLS and the client does not", "kafka.tls")
    } else {
        ("the TLS handshake failed", "kafka.tls.ca_file")
    };
    crate::tls::refused("the Kafka broker", at, what, heard, field)
}
