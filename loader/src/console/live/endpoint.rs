//! The live metrics' HTTP endpoint: `GET /metrics` in the Prometheus text format
//! (version 0.0.4), on a thread of its own with a one-thread runtime, so that it
//! lives across the cells a campaign runs and takes nothing from theirs. One request
//! per connection, read with a deadline; anything but `GET /metrics` (or `/`) is a
//! 404.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::state::Live;

/// The content type Prometheus asks for and accepts.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// How long the endpoint waits, when the command ends, for a last scrape.
pub const LAST_SCRAPE_WAIT: Duration = Duration::from_secs(15);

/// A serving endpoint. When dropped (the command ends) and something has been
/// scraping it, it waits for one more scrape to be answered whole (at most
/// [`LAST_SCRAPE_WAIT`]), so that the scraper sees the last cell's outcome and phase
/// `done`.
#[derive(Debug)]
pub struct Endpoint {
    /// The address bound (the port the system gave for port 0).
    pub addr: SocketAddr,
    live: &'static Live,
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        if self.live.last_answered() == 0 {
            return;
        }
        // A scrape rendered from now on sees the end; wait until one is answered.
        let wanted = self.live.rendered() + 1;
        let until = std::time::Instant::now() + LAST_SCRAPE_WAIT;
        while self.live.last_answered() < wanted && std::time::Instant::now() < until {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// `--metrics-listen`'s value as an address: `HOST:PORT` (an IP address), or a bare
/// `PORT` on 127.0.0.1. The error names the flag and what to write.
pub fn listen_address(text: &str) -> Result<SocketAddr, String> {
    let t = text.trim();
    if let Ok(port) = t.parse::<u16>() {
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    t.parse::<SocketAddr>().map_err(|_| {
        format!(
            "--metrics-listen {text:?}: not an address to listen on; write HOST:PORT with an IP address (127.0.0.1:9464, or 0.0.0.0:9464 to be scraped from other hosts) or a bare port (9464)"
        )
    })
}

/// Bind `addr` now and serve `live` on a thread of its own.
pub fn start(addr: SocketAddr, live: &'static Live) -> anyhow::Result<Endpoint> {
    let std_listener = std::net::TcpListener::bind(addr).with_context(|| {
        format!("--metrics-listen {addr}: cannot listen there (in use, or not an address of this host); give another port")
    })?;
    std_listener
        .set_nonblocking(true)
        .context("--metrics-listen: setting the socket non-blocking")?;
    let bound = std_listener.local_addr().context("--metrics-listen")?;
    std::thread::Builder::new()
        .name("crossbench-metrics".into())
        .spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    eprintln!("warning: live metrics: no runtime: {e}");
                    return;
                }
            };
            rt.block_on(async move {
                let listener = match tokio::net::TcpListener::from_std(std_listener) {
                    Ok(l) => l,
                    Err(e) => {
                        eprintln!("warning: live metrics: {e}");
                        return;
                    }
                };
                loop {
                    let Ok((sock, _)) = listener.accept().await else {
                        continue;
                    };
                    tokio::spawn(answer(sock, live));
                }
            });
        })
        .context("--metrics-listen: starting its thread")?;
    Ok(Endpoint { addr: bound, live })
}

/// Answer one request.
async fn answer(mut sock: tokio::net::TcpStream, live: &'static Live) {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    let head = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break String::from_utf8_lossy(&buf[..i]).into_owned();
        }
        if buf.len() > 16 * 1024 {
            return;
        }
        match tokio::time::timeout(Duration::from_secs(5), sock.read(&mut chunk)).await {
            Ok(Ok(n)) if n > 0 => buf.extend_from_slice(&chunk[..n]),
            _ => return,
        }
    };
    let mut first = head.lines().next().unwrap_or("").split_whitespace();
    let (method, path) = (first.next().unwrap_or(""), first.next().unwrap_or(""));
    let path = path.split('?').next().unwrap_or("");
    let mut ticket = None;
    let (status, kind, body) = match (method, path) {
        ("GET", "/metrics") => {
            let (text, t) = live.render_numbered();
            ticket = Some(t);
            ("200 OK", CONTENT_TYPE, text)
        }
        ("GET", "/") => (
            "200 OK",
            "text/plain; charset=utf-8",
            "crossbench live metrics: GET /metrics\n".to_string(),
        ),
        _ => (
            "404 Not Found",
            "text/plain; charset=utf-8",
            "not found: GET /metrics\n".to_string(),
        ),
    };
    let reply = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let written = tokio::time::timeout(Duration::from_secs(5), sock.write_all(reply.as_bytes()))
        .await
        .is_ok_and(|r| r.is_ok());
    let _ = sock.shutdown().await;
    // Counted once the reply is out: the command's end waits on this count, and a
    // reply rendered but not yet written would die with the process.
    if let (Some(t), true) = (ticket, written) {
        live.answered(t);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_as_written() {
        assert_eq!(
            listen_address("9464").unwrap(),
            "127.0.0.1:9464".parse().unwrap()
        );
        assert_eq!(
            listen_address("0.0.0.0:9").unwrap(),
            "0.0.0.0:9".parse().unwrap()
        );
        let e = listen_address("localhost:x").unwrap_err();
        assert!(
            e.contains("--metrics-listen") && e.contains("HOST:PORT"),
            "{e}"
        );
    }
}
