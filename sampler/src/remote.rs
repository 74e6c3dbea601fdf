//! Remote sampling: a tiny HTTP/1.1 server (`crossbench sample`) and client
//! (`crossbench run --sampler URL`). One request per connection, responses
//! carry Content-Length and `Connection: close`.

use std::future::Future;
use std::io::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::runner::{start_inner, SamplerHandle};
use crate::samples::{write_row, HEADER, VERSION_LINE};
use crate::{SamplerConfig, SamplerError};

const MAX_HEAD: usize = 16 * 1024;
const IO_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest body `pull` accepts (a day of a busy host is far below this).
const MAX_BODY: usize = 4 << 30;

/// Samples `config` locally (no file) and serves the rows over HTTP until
/// `stop` completes:
/// - `GET /samples.csv?since_unix_ms=N`: samples.csv v1 with the rows whose
///   `unix_ms >= N` (all rows without the parameter);
/// - `GET /health`: `200 ok`.
///
/// Returns when `stop` completes, after stopping the sampler.
pub async fn serve(
    listener: TcpListener,
    config: SamplerConfig,
    stop: impl Future,
) -> Result<(), SamplerError> {
    let handle = Arc::new(start_inner(config, None)?);
    tokio::pin!(stop);
    loop {
        tokio::select! {
            _ = &mut stop => break,
            acc = listener.accept() => {
                let Ok((sock, _)) = acc else {
                    // Out of file descriptors or similar: back off briefly.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                let h = handle.clone();
                tokio::spawn(async move {
                    let _ = tokio::time::timeout(Duration::from_secs(60), handle_conn(sock, &h)).await;
                });
            }
        }
    }
    // In-flight connections hold clones; the last drop stops the thread.
    // Stopping joins a thread, so do it off the async workers.
    tokio::task::spawn_blocking(move || match Arc::try_unwrap(handle) {
        Ok(h) => h.stop().map(|_| ()),
        Err(_) => Ok(()),
    })
    .await
    .map_err(|e| SamplerError::Thread(e.to_string()))?
}

async fn handle_conn(mut sock: TcpStream, h: &SamplerHandle) -> std::io::Result<()> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    let head_end = loop {
        if let Some(i) = find(&buf, b"\r\n\r\n") {
            break i;
        }
        if buf.len() > MAX_HEAD {
            return respond(&mut sock, 431, "text/plain", b"request head too large\n").await;
        }
        let n = tokio::time::timeout(IO_TIMEOUT, sock.read(&mut chunk))
            .await
            .map_err(|_| std::io::ErrorKind::TimedOut)??;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]);
    let line = head.lines().next().unwrap_or("");
    let mut parts = line.split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    if method != "GET" {
        return respond(&mut sock, 405, "text/plain", b"only GET\n").await;
    }
    match path {
        "/health" => respond(&mut sock, 200, "text/plain", b"ok\n").await,
        "/samples.csv" => {
            let mut since = 0u64;
            for kv in query.split('&').filter(|s| !s.is_empty()) {
                if let Some(("since_unix_ms", v)) = kv.split_once('=') {
                    match v.parse() {
                        Ok(v) => since = v,
                        Err(_) => {
                            return respond(&mut sock, 400, "text/plain", b"bad since_unix_ms\n")
                                .await
                        }
                    }
                }
            }
            let rows = h.rows_since(since);
            let mut body = Vec::with_capacity(64 + rows.len() * 64);
            let _ = writeln!(body, "{VERSION_LINE}\n{HEADER}");
            for r in &rows {
                let _ = write_row(&mut body, r);
            }
            respond(&mut sock, 200, "text/csv; charset=utf-8", &body).await
        }
        _ => respond(&mut sock, 404, "text/plain", b"not found\n").await,
    }
}

async fn respond(sock: &mut TcpStream, code: u16, ctype: &str, body: &[u8]) -> std::io::Result<()> {
    let reason = match code {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        431 => "Request Header Fields Too Large",
        _ => "Error",
    };
    let head = format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    sock.write_all(head.as_bytes()).await?;
    sock.write_all(body).await?;
    sock.flush().await?;
    sock.shutdown().await
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Splits `http://host:port[/prefix]` into (`host:port`, path of samples.csv).
fn split_url(url: &str) -> Option<(String, String)> {
    let rest = url.strip_prefix("http://")?;
    let (hostport, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    if hostport.is_empty() || !hostport.contains(':') {
        return None;
    }
    let path = path.trim_end_matches('/');
    let path = if path.ends_with("/samples.csv") {
        path.to_string()
    } else {
        format!("{path}/samples.csv")
    };
    Some((hostport.to_string(), path))
}

/// Fetches the rows with `unix_ms >= since_unix_ms` from a remote sampler at
/// `url` (`http://host:port`) and writes them to `out` as samples.csv v1.
/// Returns the number of data rows.
pub async fn pull(url: &str, since_unix_ms: u64, out: &Path) -> Result<u64, SamplerError> {
    let err = |why: String| SamplerError::Http {
        url: url.to_string(),
        why,
    };
    let (hostport, path) =
        split_url(url).ok_or_else(|| err("expected http://host:port[/path]".into()))?;
    let mut sock = tokio::time::timeout(IO_TIMEOUT, TcpStream::connect(&hostport))
        .await
        .map_err(|_| err("connect timed out".into()))?
        .map_err(|e| err(format!("connect: {e}")))?;
    let req = format!(
        "GET {path}?since_unix_ms={since_unix_ms} HTTP/1.1\r\nHost: {hostport}\r\nConnection: close\r\n\r\n"
    );
    sock.write_all(req.as_bytes())
        .await
        .map_err(|e| err(format!("send: {e}")))?;
    let mut resp = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let n = tokio::time::timeout(IO_TIMEOUT, sock.read(&mut chunk))
            .await
            .map_err(|_| err("read timed out".into()))?
            .map_err(|e| err(format!("read: {e}")))?;
        if n == 0 {
            break;
        }
        resp.extend_from_slice(&chunk[..n]);
        if resp.len() > MAX_BODY {
            return Err(err("response too large".into()));
        }
    }
    let head_end = find(&resp, b"\r\n\r\n").ok_or_else(|| err("no HTTP head".into()))?;
    let head = String::from_utf8_lossy(&resp[..head_end]);
    let body = &resp[head_end + 4..];
    let status = head
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(|| err("bad status line".into()))?;
    if status != 200 {
        return Err(err(format!(
            "HTTP {status}: {}",
            String::from_utf8_lossy(&body[..body.len().min(200)]).trim()
        )));
    }
    let clen = head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim()
            .eq_ignore_ascii_case("content-length")
            .then(|| v.trim().parse::<usize>().ok())?
    });
    match clen {
        Some(n) if n != body.len() => {
            return Err(err(format!("truncated body: {} of {n} bytes", body.len())))
        }
        _ => {}
    }
    // Validate before writing: it must parse as samples.csv v1.
    let set = crate::parse_samples(body, url)?;
    let tmp = out.with_extension("csv.part");
    std::fs::write(&tmp, body).map_err(|e| SamplerError::io(&tmp, e))?;
    std::fs::rename(&tmp, out).map_err(|e| SamplerError::io(out, e))?;
    Ok(set.rows.len() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        assert_eq!(
            split_url("http://127.0.0.1:9000"),
            Some(("127.0.0.1:9000".into(), "/samples.csv".into()))
        );
        assert_eq!(
            split_url("http://h:1/x/"),
            Some(("h:1".into(), "/x/samples.csv".into()))
        );
        assert_eq!(
            split_url("http://h:1/samples.csv"),
            Some(("h:1".into(), "/samples.csv".into()))
        );
        assert_eq!(split_url("https://h:1"), None);
        assert_eq!(split_url("http://h"), None);
    }
}
