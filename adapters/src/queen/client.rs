//! The HTTP client: one keep-alive pool, optional bearer token, and the classification
//! of every failure into a [`BrokerError`].
//!
//! Queen answers most failures with HTTP 200 and `success:false` or an `error` field in
//! the body (reference pitfall P5), so a 2xx status says nothing: callers check the
//! decoded body, and [`body_error`] turns such an answer into an error of class
//! `refused`. Transport failures are `connection`, client timeouts `timeout`, HTTP 4xx
//! `refused`, HTTP 5xx and undecodable bodies `other`.

use std::time::Duration;

use bytes::Bytes;
use reqwest::header::{HeaderMap, HeaderValue, AUTHORIZATION, CONTENT_TYPE};
use reqwest::{Method, StatusCode};
use serde::de::DeserializeOwned;

use super::QueenOptions;
use crate::error::BrokerError;
use crate::redact::redact_url_passwords;

/// A request failure and whether repeating the same request may help (its effect is
/// unknown or the server was briefly unable to serve it).
#[derive(Debug)]
pub(crate) struct Failure {
    pub error: BrokerError,
    pub retryable: bool,
}

impl From<Failure> for BrokerError {
    fn from(f: Failure) -> Self {
        f.error
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Client {
    http: reqwest::Client,
    base: String,
    timeout: Duration,
    /// The field that holds the bearer token (what a 401 asks to fix).
    token_field: &'static str,
}

/// Percent-encode one URL path segment or query value.
pub(crate) use crate::percent::segment as encode;

/// An answer whose body says it failed, although the status was 2xx.
pub(crate) fn body_error(op: &str, error: &str) -> Failure {
    Failure {
        error: BrokerError::Refused(format!("{op}: {error}")),
        retryable: false,
    }
}

/// The HTTP client the adapter (and its bare loop) talks to Queen with: keep-alive pool,
/// no proxy, `TCP_NODELAY`, the bearer token as a sensitive default header.
pub(crate) fn http_client(o: &QueenOptions) -> Result<reqwest::Client, BrokerError> {
    let mut headers = HeaderMap::new();
    if let Some(t) = &o.bearer()? {
        let mut v =
            HeaderValue::from_str(&format!("Bearer {t}")).map_err(|_| BrokerError::Config {
                field: o.token_field().into(),
                message: "not a valid HTTP header value".into(),
            })?;
        v.set_sensitive(true);
        headers.insert(AUTHORIZATION, v);
    }
    // reqwest asks for the process's rustls provider even for http:// (and panics
    // without one): the one every client here uses, installed first.
    crate::tls::client::provider();
    let mut builder = reqwest::Client::builder();
    if o.url.starts_with("https://") {
        builder = builder.tls_backend_preconfigured(o.tls.client_config("queen")?);
    }
    builder
        .default_headers(headers)
        // Loopback only: never route through an environment proxy.
        .no_proxy()
        .pool_idle_timeout(Duration::from_secs(60))
        .pool_max_idle_per_host(256)
        .tcp_nodelay(true)
        .connect_timeout(Duration::from_secs(5))
        .build()
        .map_err(|e| BrokerError::Config {
            field: "queen".into(),
            message: format!("cannot build the HTTP client: {e}"),
        })
}

impl Client {
    pub fn new(o: &QueenOptions) -> Result<Self, BrokerError> {
        Ok(Client {
            http: http_client(o)?,
            base: o.url.trim_end_matches('/').to_string(),
            timeout: o.request_timeout,
            token_field: o.token_field(),
        })
    }

    /// The base URL, safe to print.
    pub fn base(&self) -> String {
        redact_url_passwords(&self.base)
    }

    fn classify(&self, op: &str, e: reqwest::Error) -> Failure {
        // reqwest's text names the URL (never the token, which is a header); what
        // went wrong underneath (a certificate's verdict) is in its sources.
        let mut text = format!("{op}: {e}");
        let mut source = std::error::Error::source(&e);
        while let Some(s) = source {
            text.push_str(&format!(": {s}"));
            source = s.source();
        }
        let text = redact_url_passwords(&text);
        if self.base.starts_with("https://") {
            if let Some(error) =
                crate::tls::handshake_refused("Queen", "queen", &self.base(), &text)
            {
                return Failure {
                    error,
                    retryable: false,
                };
            }
        }
        if e.is_timeout() {
            Failure {
                error: BrokerError::Timeout(text),
                retryable: true,
            }
        } else if e.is_connect() || e.is_request() || e.is_body() {
            Failure {
                error: BrokerError::Connection(text),
                retryable: true,
            }
        } else {
            Failure {
                error: BrokerError::Other(text),
                retryable: false,
            }
        }
    }

    /// One request; the status and body of any answer. `extra` lengthens the timeout
    /// (long polls).
    pub async fn send(
        &self,
        op: &str,
        method: Method,
        path_and_query: &str,
        body: Option<Vec<u8>>,
        extra: Duration,
    ) -> Result<(StatusCode, Bytes), Failure> {
        let mut rb = self
            .http
            .request(method, format!("{}{}", self.base, path_and_query))
            .timeout(self.timeout + extra);
        if let Some(b) = body {
            rb = rb
                .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
                .body(b);
        }
        let resp = rb.send().await.map_err(|e| self.classify(op, e))?;
        let status = resp.status();
        let bytes = resp.bytes().await.map_err(|e| self.classify(op, e))?;
        Ok((status, bytes))
    }

    /// One request whose 2xx JSON answer decodes into `T`. Non-2xx answers are errors:
    /// 5xx retryable, 4xx not (the server understood and said no).
    pub async fn call<T: DeserializeOwned>(
        &self,
        op: &str,
        method: Method,
        path_and_query: &str,
        body: Option<Vec<u8>>,
        extra: Duration,
    ) -> Result<T, Failure> {
        let (status, bytes) = self.send(op, method, path_and_query, body, extra).await?;
        if !status.is_success() {
            let text = String::from_utf8_lossy(&bytes[..bytes.len().min(300)]).to_string();
            let msg = format!("{op}: HTTP {} {}", status.as_u16(), text.trim());
            return Err(if status.is_server_error() {
                Failure {
                    error: BrokerError::Other(msg),
                    retryable: true,
                }
            } else if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
                Failure {
                    error: BrokerError::Config {
                        field: self.token_field.into(),
                        message: format!(
                            "Queen at {} refused the request: {msg} (the server wants a valid bearer token: fix {})",
                            self.base(),
                            self.token_field
                        ),
                    },
                    retryable: false,
                }
            } else {
                Failure {
                    error: BrokerError::Refused(msg),
                    retryable: false,
                }
            });
        }
        // An empty 2xx answer (a 204 "nothing to pop" on servers that send one) reads
        // as an empty object.
        let bytes = if bytes.iter().all(u8::is_ascii_whitespace) {
            Bytes::from_static(b"{}")
        } else {
            bytes
        };
        serde_json::from_slice(&bytes).map_err(|e| {
            let head = String::from_utf8_lossy(&bytes[..bytes.len().min(200)]).to_string();
            Failure {
                error: BrokerError::Other(format!("{op}: undecodable answer ({e}): {head}")),
                retryable: false,
            }
        })
    }

    /// [`Client::call`], repeated up to `attempts` times on retryable failures with a
    /// doubling backoff from 50 ms. Every failed attempt is reported to `on_error`, with
    /// whether it will be retried.
    pub async fn call_retrying<T: DeserializeOwned>(
        &self,
        op: &str,
        method: Method,
        path_and_query: &str,
        body: Vec<u8>,
        attempts: u32,
        mut on_error: impl FnMut(&BrokerError, bool),
    ) -> Result<T, Failure> {
        let mut backoff = Duration::from_millis(50);
        let mut attempt = 1;
        loop {
            match self
                .call(
                    op,
                    method.clone(),
                    path_and_query,
                    Some(body.clone()),
                    Duration::ZERO,
                )
                .await
            {
                Ok(v) => return Ok(v),
                Err(f) => {
                    let again = f.retryable && attempt < attempts;
                    on_error(&f.error, again);
                    if !again {
                        return Err(f);
                    }
                }
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(2));
            attempt += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn unreachable_server_is_a_connection_error() {
        let c = Client::new(&QueenOptions {
            url: "http://127.0.0.1:1".into(),
            token: Some("tok-secret".into()),
            ..Default::default()
        })
        .unwrap();
        let e = c
            .call::<serde_json::Value>("health", Method::GET, "/health", None, Duration::ZERO)
            .await
            .unwrap_err();
        assert!(e.retryable);
        assert_eq!(e.error.class().name(), "connection", "{}", e.error);
        assert!(!e.error.to_string().contains("tok-secret"));
    }
}
