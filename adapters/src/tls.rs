//! TLS and credentials, the same fields in every system's section (`<system>.tls`,
//! `<system>.password_env`, `<system>.password_file`), so that a scenario reaches a
//! production broker the same way whatever the broker:
//!
//! ```yaml
//! pgmq:
//!   dsn: postgres://bench@db.internal:5432/bench     # no password in the text
//!   password_env: CROSSBENCH_PG_PASSWORD             # or password_file: /run/secrets/pg
//!   tls:
//!     ca_file: /etc/crossbench/ca.pem                # the CA that signed the server's certificate
//!     cert_file: /etc/crossbench/client.pem          # mutual TLS (optional, with key_file)
//!     key_file: /etc/crossbench/client.key
//! ```
//!
//! `tls` is on when any of its fields is set (or `enabled: true`, which verifies
//! against the system's trust roots). The server's certificate is verified, its name
//! against the host the system connects to (`server_name` names another where the
//! system's client allows it). `insecure: true` encrypts without verifying: for a lab,
//! off by default, and a warning on the console and in the record whenever it is on.
//!
//! A password comes from the environment or from a file, never from the scenario's
//! text: one written into a URL still works, with a warning. It never reaches a file
//! the harness writes.

use serde::{Deserialize, Serialize};

use crate::error::BrokerError;
use crate::options::OptionsError;

/// A system section's `tls:` block.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TlsOptions {
    /// TLS against the system's trust roots when no other field is set.
    pub enabled: bool,
    /// PEM file of the CA (or CAs) to trust instead of the system's roots.
    pub ca_file: String,
    /// PEM client certificate, for mutual TLS (with `key_file`).
    pub cert_file: String,
    /// PEM private key of `cert_file`.
    pub key_file: String,
    /// The name the server's certificate must carry, when it is not the host
    /// connected to.
    pub server_name: String,
    /// Encrypt without verifying the server's certificate (a lab only).
    pub insecure: bool,
}

impl TlsOptions {
    /// Whether TLS is asked for.
    pub fn on(&self) -> bool {
        self.enabled
            || self.insecure
            || !self.ca_file.is_empty()
            || !self.cert_file.is_empty()
            || !self.key_file.is_empty()
            || !self.server_name.is_empty()
    }

    /// The files exist and are readable, a certificate comes with its key.
    pub fn validate(&self, section: &str) -> Result<(), OptionsError> {
        let bad = |f: &str, m: String| Err(OptionsError::new(section, &format!("tls.{f}"), m));
        for (field, path) in [
            ("ca_file", &self.ca_file),
            ("cert_file", &self.cert_file),
            ("key_file", &self.key_file),
        ] {
            if !path.is_empty() {
                if let Err(e) = std::fs::File::open(path) {
                    return bad(
                        field,
                        format!("{path}: {e}; give the path of a readable PEM file"),
                    );
                }
            }
        }
        if self.cert_file.is_empty() != self.key_file.is_empty() {
            return bad(
                if self.cert_file.is_empty() {
                    "cert_file"
                } else {
                    "key_file"
                },
                "mutual TLS needs both cert_file and key_file".into(),
            );
        }
        Ok(())
    }

    /// What the console and the record must say about it.
    pub fn warnings(&self, section: &str) -> Vec<String> {
        if self.insecure {
            vec![format!(
                "{section}.tls.insecure is on: the connection is encrypted but the server's certificate is NOT verified (anyone on the path can stand in for the server); never for a measurement that matters"
            )]
        } else {
            Vec::new()
        }
    }
}

/// The rustls client configuration of a `tls:` block: one TLS stack (rustls on the
/// aws-lc-rs provider) for every client that takes a configuration (RabbitMQ, NATS,
/// Redis, Queen). PostgreSQL's and Kafka's clients build their own from the same fields.
#[cfg(feature = "tls")]
pub mod client {
    use std::sync::Arc;

    use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
    use rustls::crypto::CryptoProvider;
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
    use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

    use super::TlsOptions;
    use crate::options::OptionsError;

    /// The provider every configuration is built on, installed as the process's default
    /// too: a client that builds its own (lapin's connector, redis) finds it there,
    /// where two compiled-in providers would otherwise make rustls refuse to choose.
    pub fn provider() -> Arc<CryptoProvider> {
        let p = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let _ = CryptoProvider::install_default((*p).clone());
        p
    }

    impl TlsOptions {
        /// The client configuration of this block in `section`: its CA file's
        /// certificates (or the system's roots), its client certificate, or no
        /// verification at all when `insecure`. A file that holds no certificate or
        /// key is an error naming the field.
        pub fn client_config(&self, section: &str) -> Result<ClientConfig, OptionsError> {
            let bad = |f: &str, m: String| OptionsError::new(section, &format!("tls.{f}"), m);
            let provider = provider();
            let builder = ClientConfig::builder_with_provider(provider.clone())
                .with_safe_default_protocol_versions()
                .map_err(|e| bad("enabled", format!("rustls: {e}")))?;
            let builder = if self.insecure {
                builder
                    .dangerous()
                    .with_custom_certificate_verifier(Arc::new(Unverified(provider)))
            } else {
                builder.with_root_certificates(self.roots(section)?)
            };
            if self.cert_file.is_empty() {
                return Ok(builder.with_no_client_auth());
            }
            let certs = CertificateDer::pem_file_iter(&self.cert_file)
                .and_then(|i| i.collect::<Result<Vec<_>, _>>())
                .map_err(|e| bad("cert_file", format!("{}: {e}", self.cert_file)))?;
            if certs.is_empty() {
                return Err(bad(
                    "cert_file",
                    format!("{}: no PEM certificate in it", self.cert_file),
                ));
            }
            let key = PrivateKeyDer::from_pem_file(&self.key_file).map_err(|e| {
                bad(
                    "key_file",
                    format!("{}: no PEM private key in it ({e})", self.key_file),
                )
            })?;
            builder
                .with_client_auth_cert(certs, key)
                .map_err(|e| bad("key_file", format!("{}: {e}", self.key_file)))
        }

        /// The CA file's certificates, or the system's trust roots.
        fn roots(&self, section: &str) -> Result<RootCertStore, OptionsError> {
            let bad = |f: &str, m: String| OptionsError::new(section, &format!("tls.{f}"), m);
            let mut roots = RootCertStore::empty();
            if self.ca_file.is_empty() {
                let found = rustls_native_certs::load_native_certs();
                let (added, _) = roots.add_parsable_certificates(found.certs);
                if added == 0 {
                    return Err(bad(
                        "ca_file",
                        "this machine has no trust roots rustls can read (install ca-certificates): give the CA's PEM file".into(),
                    ));
                }
                return Ok(roots);
            }
            let certs = CertificateDer::pem_file_iter(&self.ca_file)
                .and_then(|i| i.collect::<Result<Vec<_>, _>>())
                .map_err(|e| bad("ca_file", format!("{}: {e}", self.ca_file)))?;
            let (added, _) = roots.add_parsable_certificates(certs);
            if added == 0 {
                return Err(bad(
                    "ca_file",
                    format!("{}: no PEM certificate in it", self.ca_file),
                ));
            }
            Ok(roots)
        }

        /// The name the server's certificate is checked against: `server_name`, or
        /// the host connected to.
        pub fn name_for<'a>(&'a self, host: &'a str) -> &'a str {
            if self.server_name.is_empty() {
                host
            } else {
                &self.server_name
            }
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn a_file_without_a_certificate_names_its_field_and_insecure_needs_none() {
            let dir = tempfile::tempdir().unwrap();
            let junk = dir.path().join("junk.pem");
            std::fs::write(&junk, "not a certificate\n").unwrap();
            let t = TlsOptions {
                ca_file: junk.display().to_string(),
                ..TlsOptions::default()
            };
            let e = t.client_config("nats").unwrap_err().to_string();
            assert!(
                e.contains("nats.tls.ca_file") && e.contains("junk.pem"),
                "{e}"
            );
            let t = TlsOptions {
                insecure: true,
                ..TlsOptions::default()
            };
            assert!(t.client_config("redis").is_ok());
            let t = TlsOptions {
                insecure: true,
                cert_file: junk.display().to_string(),
                key_file: junk.display().to_string(),
                ..TlsOptions::default()
            };
            let e = t.client_config("rabbitmq").unwrap_err().to_string();
            assert!(e.contains("rabbitmq.tls.cert_file"), "{e}");
            assert_eq!(t.name_for("h"), "h");
        }
    }

    /// Encrypts, checks the handshake's signatures, trusts any certificate
    /// (`insecure: true`, a lab only; warned about on the console and in the record).
    #[derive(Debug)]
    struct Unverified(Arc<CryptoProvider>);

    impl ServerCertVerifier for Unverified {
        fn verify_server_cert(
            &self,
            _end_entity: &CertificateDer<'_>,
            _intermediates: &[CertificateDer<'_>],
            _server_name: &ServerName<'_>,
            _ocsp_response: &[u8],
            _now: UnixTime,
        ) -> Result<ServerCertVerified, rustls::Error> {
            Ok(ServerCertVerified::assertion())
        }

        fn verify_tls12_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            rustls::crypto::verify_tls12_signature(
                message,
                cert,
                dss,
                &self.0.signature_verification_algorithms,
            )
        }

        fn verify_tls13_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            rustls::crypto::verify_tls13_signature(
                message,
                cert,
                dss,
                &self.0.signature_verification_algorithms,
            )
        }

        fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
            self.0.signature_verification_algorithms.supported_schemes()
        }
    }
}

/// What a failed handshake's text says went wrong, in a person's words, with the field
/// that fixes it, and the configuration error that says so. Text only: every client's
/// words (rustls's, and through [`refused`] librdkafka's OpenSSL) go through here,
/// whatever TLS stack the build has.
/// What a failed handshake's text says went wrong, in a person's words, with the
/// field that fixes it; `None` when the text is not a certificate's verdict.
pub fn verdict(text: &str, section: &str) -> Option<(String, String)> {
    let t = text.to_ascii_lowercase();
    let (what, field) = if t.contains("certificaterequired") || t.contains("certificate required") {
        (
            "the server requires a client certificate (mutual TLS)",
            "tls.cert_file",
        )
    } else if t.contains("unknownissuer")
        || t.contains("unknown issuer")
        || t.contains("unknown ca")
    {
        (
            "the server's certificate is not signed by a CA it trusts",
            "tls.ca_file",
        )
    } else if t.contains("notvalidforname") || t.contains("not valid for name") {
        (
            "the server's certificate does not carry the name connected to",
            "tls.server_name",
        )
    } else if t.contains("expired") {
        (
            "the server's certificate has expired (or the clock is wrong)",
            "tls.ca_file",
        )
    } else if t.contains("notvalidyet") {
        (
            "the server's certificate is not valid yet (or the clock is wrong)",
            "tls.ca_file",
        )
    } else if t.contains("invalid peer certificate") || t.contains("certificate") {
        ("the server's certificate was refused", "tls.ca_file")
    } else {
        return None;
    };
    Some((what.to_string(), format!("{section}.{field}")))
}

/// How to fix `field` (one of [`verdict`]'s), in a person's words.
pub fn fix(field: &str) -> &'static str {
    if field.ends_with("tls.cert_file") {
        "give a client certificate (and its key in tls.key_file) signed by a CA the server trusts"
    } else if field.ends_with("tls.server_name") {
        "connect by, or name, a host the server's certificate carries"
    } else if field.ends_with("bootstrap_servers") {
        "connect by a host name the brokers' certificates carry (their advertised listeners' names)"
    } else if field.ends_with(".tls") {
        "set it: the server speaks TLS (tls.ca_file, the CA that signed its certificate)"
    } else {
        "give the CA that signed the server's certificate (and make sure the certificate names the host connected to and is in date)"
    }
}

/// The configuration error of a TLS handshake to `system` at `at` that failed for
/// `what` (`detail`: the client's own words), naming `field` and how to fix it.
pub fn refused(system: &str, at: &str, what: &str, detail: &str, field: &str) -> BrokerError {
    BrokerError::Config {
        field: field.to_string(),
        message: format!(
            "TLS to {system} at {at} failed: {what} ({detail}). Fix {field}: {}",
            fix(field)
        ),
    }
}

/// [`refused`] for a client's error `text`, when [`verdict`] reads a certificate's
/// verdict in it; `None` otherwise (the caller's own error then stands).
pub fn handshake_refused(system: &str, section: &str, at: &str, text: &str) -> Option<BrokerError> {
    let (what, field) = verdict(text, section)?;
    Some(refused(system, at, &what, text, &field))
}

/// Where a password (or a token) comes from: `<what>_env` (a variable's name) or
/// `<what>_file` (a file whose first line is the secret).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PasswordSource<'a> {
    pub section: &'a str,
    pub env: &'a str,
    pub file: &'a str,
}

impl PasswordSource<'_> {
    /// The password, `None` when neither is given; an error names the field and the
    /// fix (never the value).
    pub fn read(&self) -> Result<Option<String>, OptionsError> {
        self.read_as("password")
    }

    /// The secret named `what` (`password`, `token`): its fields are `<what>_env` and
    /// `<what>_file`.
    pub fn read_as(&self, what: &str) -> Result<Option<String>, OptionsError> {
        let (env_field, file_field) = (format!("{what}_env"), format!("{what}_file"));
        let bad = |f: &str, m: String| Err(OptionsError::new(self.section, f, m));
        match (self.env.is_empty(), self.file.is_empty()) {
            (true, true) => Ok(None),
            (false, false) => bad(
                &file_field,
                format!("give {env_field} or {file_field}, not both"),
            ),
            (false, true) => match std::env::var(self.env) {
                Ok(v) if !v.is_empty() => Ok(Some(v)),
                _ => bad(
                    &env_field,
                    format!(
                        "the variable {} is not set (export it, or name another)",
                        self.env
                    ),
                ),
            },
            (true, false) => match std::fs::read_to_string(self.file) {
                Ok(t) => match t.lines().next().map(str::trim_end) {
                    Some(p) if !p.is_empty() => Ok(Some(p.to_string())),
                    _ => bad(
                        &file_field,
                        format!("{}: the first line is empty", self.file),
                    ),
                },
                Err(e) => bad(
                    &file_field,
                    format!("{}: {e}; give a readable file", self.file),
                ),
            },
        }
    }
}

/// A PostgreSQL URL as given, with `sslmode=disable` added when it names no
/// `sslmode`: TLS only when asked, whatever the server offers (libpq's and sqlx's
/// default, `prefer`, would take up a server's offer silently).
pub fn plain_unless_asked(dsn: &str) -> String {
    if dsn.contains("sslmode=") {
        dsn.to_string()
    } else {
        let sep = if dsn.contains('?') { '&' } else { '?' };
        format!("{dsn}{sep}sslmode=disable")
    }
}

/// The field a refused password asks to fix: `<section>.password_file` when the
/// password came from a file, `<section>.password_env` otherwise.
pub fn password_field(section: &str, password_file: &str) -> String {
    let from = if password_file.is_empty() {
        "env"
    } else {
        "file"
    };
    format!("{section}.password_{from}")
}

/// The warning for a password written into a URL of the scenario's text.
pub fn password_in_text(field: &str) -> String {
    format!(
        "{field} carries a password in the scenario's text: it works (and is redacted from every file the harness writes), but a scenario file is easily shared; set the section's password_env or password_file instead"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_name_the_field_to_fix() {
        let v = |t: &str| verdict(t, "nats").map(|(_, f)| f);
        assert_eq!(
            v("invalid peer certificate: UnknownIssuer").as_deref(),
            Some("nats.tls.ca_file")
        );
        assert_eq!(
            v("invalid peer certificate: certificate not valid for name \"x\"").as_deref(),
            Some("nats.tls.server_name")
        );
        assert_eq!(
            v("invalid peer certificate: Expired").as_deref(),
            Some("nats.tls.ca_file")
        );
        assert_eq!(
            v("received fatal alert: CertificateRequired").as_deref(),
            Some("nats.tls.cert_file")
        );
        assert_eq!(v("connection refused"), None);
    }

    #[test]
    fn on_validate_and_warn() {
        assert!(!TlsOptions::default().on());
        let t = TlsOptions {
            enabled: true,
            ..TlsOptions::default()
        };
        assert!(t.on() && t.validate("pgmq").is_ok() && t.warnings("pgmq").is_empty());
        let t = TlsOptions {
            ca_file: "/nonexistent/ca.pem".into(),
            ..TlsOptions::default()
        };
        let e = t.validate("pgmq").unwrap_err().to_string();
        assert!(
            e.contains("pgmq.tls.ca_file") && e.contains("/nonexistent/ca.pem"),
            "{e}"
        );
        let t = TlsOptions {
            cert_file: "/dev/null".into(),
            ..TlsOptions::default()
        };
        let e = t.validate("x").unwrap_err().to_string();
        assert!(e.contains("x.tls.key_file"), "{e}");
        let t = TlsOptions {
            insecure: true,
            ..TlsOptions::default()
        };
        assert!(t.on());
        assert!(t.warnings("redis")[0].contains("redis.tls.insecure"));
    }

    #[test]
    fn tls_only_when_asked() {
        assert_eq!(
            plain_unless_asked("postgres://u@h/db"),
            "postgres://u@h/db?sslmode=disable"
        );
        assert_eq!(
            plain_unless_asked("postgres://u@h/db?application_name=x"),
            "postgres://u@h/db?application_name=x&sslmode=disable"
        );
        assert_eq!(
            plain_unless_asked("postgres://u@h/db?sslmode=require"),
            "postgres://u@h/db?sslmode=require"
        );
    }

    #[test]
    fn passwords_come_from_a_file_or_the_environment() {
        let none = PasswordSource {
            section: "pgmq",
            env: "",
            file: "",
        };
        assert_eq!(none.read().unwrap(), None);
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("pw");
        std::fs::write(&f, "s3cret\n").unwrap();
        let file = f.display().to_string();
        let from_file = PasswordSource {
            section: "pgmq",
            env: "",
            file: &file,
        };
        assert_eq!(from_file.read().unwrap().as_deref(), Some("s3cret"));
        let unset = PasswordSource {
            section: "pgmq",
            env: "CROSSBENCH_TEST_SURELY_UNSET_PASSWORD",
            file: "",
        };
        let e = unset.read().unwrap_err().to_string();
        assert!(
            e.contains("pgmq.password_env") && !e.contains("s3cret"),
            "{e}"
        );
    }
}
