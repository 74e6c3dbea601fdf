//! The rendezvous's wire: HTTP/1.1, one request per connection, JSON bodies with a
//! `Content-Length`, `Connection: close`. Small enough to read in full, and `curl`
//! can ask a running rendezvous how its loaders are doing (`GET /state`).

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The largest request or response accepted (a frontier delta of a large cell).
pub const MAX_BODY: usize = 256 << 20;
const MAX_HEAD: usize = 16 * 1024;

/// One request as the server reads it.
#[derive(Debug)]
pub struct Request {
    pub method: String,
    pub path: String,
    pub body: Vec<u8>,
}

/// Why a request or response could not be read.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("timed out")]
    Timeout,
    #[error("malformed HTTP: {0}")]
    Malformed(String),
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Read a head and its body (by `Content-Length`) from `sock`.
async fn read_message(sock: &mut TcpStream, io: Duration) -> Result<(String, Vec<u8>), HttpError> {
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = vec![0u8; 64 * 1024];
    let head_end = loop {
        if let Some(i) = find(&buf, b"\r\n\r\n") {
            break i;
        }
        if buf.len() > MAX_HEAD {
            return Err(HttpError::Malformed("head too large".into()));
        }
        let n = tokio::time::timeout(io, sock.read(&mut chunk))
            .await
            .map_err(|_| HttpError::Timeout)??;
        if n == 0 {
            return Err(HttpError::Malformed(
                "connection closed before the head".into(),
            ));
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let len = head
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("content-length"))
        .map(|(_, v)| v.trim().parse::<usize>())
        .transpose()
        .map_err(|_| HttpError::Malformed("bad Content-Length".into()))?
        .unwrap_or(0);
    if len > MAX_BODY {
        return Err(HttpError::Malformed(format!(
            "body of {len} bytes is too large"
        )));
    }
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < len {
        let n = tokio::time::timeout(io, sock.read(&mut chunk))
            .await
            .map_err(|_| HttpError::Timeout)??;
        if n == 0 {
            return Err(HttpError::Malformed(
                "connection closed inside the body".into(),
            ));
        }
        body.extend_from_slice(&chunk[..n]);
    }
    body.truncate(len);
    Ok((head, body))
}

/// Read one request.
pub async fn read_request(sock: &mut TcpStream, io: Duration) -> Result<Request, HttpError> {
    let (head, body) = read_message(sock, io).await?;
    let line = head.lines().next().unwrap_or("");
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    if method.is_empty() || !path.starts_with('/') {
        return Err(HttpError::Malformed(format!("request line {line:?}")));
    }
    Ok(Request {
        method: method.to_string(),
        path: path.to_string(),
        body,
    })
}

/// Answer with `code` and a JSON body, then close.
pub async fn respond(sock: &mut TcpStream, code: u16, json: &[u8]) -> std::io::Result<()> {
    let reason = match code {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        409 => "Conflict",
        _ => "Error",
    };
    let head = format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        json.len()
    );
    sock.write_all(head.as_bytes()).await?;
    sock.write_all(json).await?;
    sock.flush().await?;
    sock.shutdown().await
}

/// `http://host:port[/]` → `host:port`.
pub fn host_port(url: &str) -> Option<&str> {
    let rest = url.strip_prefix("http://")?;
    let hp = rest.trim_end_matches('/');
    let (host, port) = hp.rsplit_once(':')?;
    (!host.is_empty() && !hp.contains('/') && port.parse::<u16>().is_ok()).then_some(hp)
}

/// Send `method path` with a JSON body to `host:port`; the status and body of the
/// answer.
pub async fn call(
    host_port: &str,
    method: &str,
    path: &str,
    body: &[u8],
    io: Duration,
) -> Result<(u16, Vec<u8>), HttpError> {
    let mut sock = tokio::time::timeout(io, TcpStream::connect(host_port))
        .await
        .map_err(|_| HttpError::Timeout)??;
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host_port}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    tokio::time::timeout(io, async {
        sock.write_all(head.as_bytes()).await?;
        sock.write_all(body).await?;
        sock.flush().await
    })
    .await
    .map_err(|_| HttpError::Timeout)??;
    let (head, body) = read_message(&mut sock, io).await?;
    let status = head
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(|| HttpError::Malformed("no status line".into()))?;
    Ok((status, body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        assert_eq!(host_port("http://127.0.0.1:7070"), Some("127.0.0.1:7070"));
        assert_eq!(
            host_port("http://crossbench-cell-0.crossbench-loaders:7070/"),
            Some("crossbench-cell-0.crossbench-loaders:7070")
        );
        assert_eq!(host_port("127.0.0.1:7070"), None);
        assert_eq!(host_port("http://host"), None);
        assert_eq!(host_port("http://host:x"), None);
        assert_eq!(host_port("http://host:70/path"), None);
    }

    #[tokio::test]
    async fn a_request_and_its_answer_go_through() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let server = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let r = read_request(&mut s, Duration::from_secs(5)).await.unwrap();
            assert_eq!((r.method.as_str(), r.path.as_str()), ("POST", "/beat"));
            let mut answer = b"{\"echo\":".to_vec();
            answer.extend_from_slice(&r.body);
            answer.push(b'}');
            respond(&mut s, 200, &answer).await.unwrap();
        });
        let big = format!("\"{}\"", "x".repeat(200_000));
        let (code, body) = call(
            &addr,
            "POST",
            "/beat",
            big.as_bytes(),
            Duration::from_secs(5),
        )
        .await
        .unwrap();
        server.await.unwrap();
        assert_eq!(code, 200);
        assert_eq!(body.len(), big.len() + 9);
    }
}
