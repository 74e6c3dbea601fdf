//! The harness's TCP proxy: it listens on an ephemeral loopback port, the adapter
//! connects to it instead of the system, and every byte is copied to the system's
//! address and back. Faults switch toxics on it, in the spirit of toxiproxy's:
//!
//! - `latency`: every chunk waits `latency ± jitter` before it is passed on;
//! - `bandwidth`: each direction of each connection passes at most `bandwidth` bytes/s;
//! - `reset`: every open connection is reset (RST) when the toxic starts, and every
//!   connection made while it lasts is reset at once;
//! - `blackhole`: no byte passes either way (they are held, as a partitioned network
//!   holds them, and pass when the toxic ends); new connections are accepted and held.
//!
//! The proxy never connects anywhere but its loopback upstream.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::scenario::faults::{FaultParams, Toxic};

/// The toxic in force (at most one at a time).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Active {
    None,
    Latency { latency: Duration, jitter: Duration },
    Bandwidth { bytes_per_sec: u64 },
    Reset,
    Blackhole,
}

impl Active {
    pub fn of(toxic: Toxic, p: &FaultParams) -> Active {
        match toxic {
            Toxic::Latency => Active::Latency {
                latency: p.latency.0,
                jitter: p.jitter.0,
            },
            Toxic::Bandwidth => Active::Bandwidth {
                bytes_per_sec: p.bandwidth,
            },
            Toxic::Reset => Active::Reset,
            Toxic::Blackhole => Active::Blackhole,
        }
    }
}

/// What the proxy did, for the record.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct ProxyFigures {
    pub listen: String,
    pub upstream: String,
    /// Connections accepted from the adapter.
    pub connections: u64,
    /// Connections reset by the `reset` toxic.
    pub resets: u64,
    /// Connections to the upstream that failed.
    pub upstream_errors: u64,
    pub bytes_to_upstream: u64,
    pub bytes_from_upstream: u64,
}

#[derive(Debug, Default)]
struct Stats {
    connections: AtomicU64,
    resets: AtomicU64,
    upstream_errors: AtomicU64,
    up: AtomicU64,
    down: AtomicU64,
}

/// A running proxy. Dropping it (or [`Proxy::close`]) stops accepting and closes
/// every connection.
#[derive(Debug)]
pub struct Proxy {
    listen: SocketAddr,
    upstream: SocketAddr,
    toxic: watch::Sender<Active>,
    /// Bumped by every `reset`: connections older than the generation die.
    reset_gen: watch::Sender<u64>,
    stats: Arc<Stats>,
    closed: CancellationToken,
}

impl Proxy {
    /// Listen on `127.0.0.1:0` and forward to `upstream` (a loopback address).
    pub async fn start(upstream: SocketAddr) -> std::io::Result<Proxy> {
        if !upstream.ip().is_loopback() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("{upstream} is not a loopback address"),
            ));
        }
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let listen = listener.local_addr()?;
        let (toxic, _) = watch::channel(Active::None);
        let (reset_gen, _) = watch::channel(0u64);
        let stats = Arc::new(Stats::default());
        let closed = CancellationToken::new();
        let p = Proxy {
            listen,
            upstream,
            toxic,
            reset_gen,
            stats,
            closed,
        };
        let (toxic_rx, reset_rx, stats, closed) = (
            p.toxic.subscribe(),
            p.reset_gen.subscribe(),
            p.stats.clone(),
            p.closed.clone(),
        );
        tokio::spawn(accept_loop(
            listener, upstream, toxic_rx, reset_rx, stats, closed,
        ));
        Ok(p)
    }

    /// The address the adapter connects to.
    pub fn listen(&self) -> SocketAddr {
        self.listen
    }

    /// Switch `active` on (`Active::None` switches every toxic off). A `reset`
    /// resets every open connection at once.
    pub fn set(&self, active: Active) {
        if active == Active::Reset {
            self.reset_gen.send_modify(|g| *g += 1);
        }
        self.toxic.send_replace(active);
    }

    pub fn figures(&self) -> ProxyFigures {
        let s = &self.stats;
        ProxyFigures {
            listen: self.listen.to_string(),
            upstream: self.upstream.to_string(),
            connections: s.connections.load(Ordering::Relaxed),
            resets: s.resets.load(Ordering::Relaxed),
            upstream_errors: s.upstream_errors.load(Ordering::Relaxed),
            bytes_to_upstream: s.up.load(Ordering::Relaxed),
            bytes_from_upstream: s.down.load(Ordering::Relaxed),
        }
    }

    /// Stop accepting and close every connection.
    pub fn close(&self) {
        self.closed.cancel();
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.closed.cancel();
    }
}

async fn accept_loop(
    listener: TcpListener,
    upstream: SocketAddr,
    toxic: watch::Receiver<Active>,
    reset_gen: watch::Receiver<u64>,
    stats: Arc<Stats>,
    closed: CancellationToken,
) {
    loop {
        let accepted = tokio::select! {
            _ = closed.cancelled() => return,
            a = listener.accept() => a,
        };
        let Ok((client, _)) = accepted else {
            tokio::time::sleep(Duration::from_millis(5)).await;
            continue;
        };
        stats.connections.fetch_add(1, Ordering::Relaxed);
        let (toxic, reset_gen, stats, closed) = (
            toxic.clone(),
            reset_gen.clone(),
            stats.clone(),
            closed.clone(),
        );
        tokio::spawn(async move {
            connection(client, upstream, toxic, reset_gen, stats, closed).await;
        });
    }
}

/// Reset a connection: SO_LINGER 0, then close (the peer sees RST).
fn reset(s: TcpStream) {
    let _ = s.set_zero_linger();
    drop(s);
}

async fn connection(
    client: TcpStream,
    upstream: SocketAddr,
    mut toxic: watch::Receiver<Active>,
    mut reset_gen: watch::Receiver<u64>,
    stats: Arc<Stats>,
    closed: CancellationToken,
) {
    let born = *reset_gen.borrow_and_update();
    // A connection made while `reset` is in force is reset at once; while
    // `blackhole` is, it is held until the toxic ends.
    loop {
        let now = *toxic.borrow_and_update();
        match now {
            Active::Reset => {
                stats.resets.fetch_add(1, Ordering::Relaxed);
                reset(client);
                return;
            }
            Active::Blackhole => {
                tokio::select! {
                    _ = closed.cancelled() => return,
                    r = toxic.changed() => if r.is_err() { return },
                }
            }
            _ => break,
        }
    }
    let server = match TcpStream::connect(upstream).await {
        Ok(s) => s,
        Err(_) => {
            stats.upstream_errors.fetch_add(1, Ordering::Relaxed);
            reset(client);
            return;
        }
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (cr, cw) = client.into_split();
    let (sr, sw) = server.into_split();
    let stop = CancellationToken::new();
    let up = tokio::spawn(pump(
        cr,
        sw,
        toxic.clone(),
        stats.clone(),
        true,
        stop.clone(),
    ));
    let down = tokio::spawn(pump(sr, cw, toxic, stats.clone(), false, stop.clone()));
    // Until either side closes, the proxy closes, or a reset newer than this
    // connection comes.
    let reset_now = async {
        loop {
            if reset_gen.changed().await.is_err() {
                return false;
            }
            if *reset_gen.borrow() > born {
                return true;
            }
        }
    };
    let was_reset = tokio::select! {
        _ = closed.cancelled() => false,
        _ = stop.cancelled() => false,
        r = reset_now => r,
    };
    stop.cancel();
    let (a, b) = (up.await, down.await);
    if was_reset {
        stats.resets.fetch_add(1, Ordering::Relaxed);
        // Reunite and reset both sides.
        if let (Ok((cr, sw)), Ok((sr, cw))) = (a, b) {
            if let Ok(c) = cr.reunite(cw) {
                reset(c);
            }
            if let Ok(s) = sr.reunite(sw) {
                reset(s);
            }
        }
    }
}

/// Copy one direction, applying the toxic in force to every chunk. Returns its
/// halves so a reset can reunite and reset them.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut toxic: watch::Receiver<Active>,
    stats: Arc<Stats>,
    upward: bool,
    stop: CancellationToken,
) -> (
    tokio::net::tcp::OwnedReadHalf,
    tokio::net::tcp::OwnedWriteHalf,
) {
    let mut buf = vec![0u8; 16 * 1024];
    // Bandwidth accounting: bytes allowed from this instant on.
    let mut budget_from = Instant::now();
    let rng = Mutex::new(0x9E37_79B9_7F4A_7C15u64 ^ (upward as u64));
    loop {
        let n = tokio::select! {
            _ = stop.cancelled() => break,
            r = from.read(&mut buf) => match r {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            },
        };
        // Hold the chunk while the network is cut.
        loop {
            let now = *toxic.borrow_and_update();
            if now != Active::Blackhole {
                break;
            }
            tokio::select! {
                _ = stop.cancelled() => return (from, to),
                r = toxic.changed() => if r.is_err() { return (from, to) },
            }
        }
        let now = *toxic.borrow();
        match now {
            Active::Latency { latency, jitter } => {
                let j = jitter.as_micros() as u64;
                let d = if j == 0 {
                    latency
                } else {
                    let mut s = rng.lock();
                    *s = s
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    let off = (*s >> 33) % (2 * j + 1);
                    (latency + Duration::from_micros(off)).saturating_sub(jitter)
                };
                tokio::select! {
                    _ = stop.cancelled() => break,
                    _ = tokio::time::sleep(d) => {}
                }
            }
            Active::Bandwidth { bytes_per_sec } => {
                let now = Instant::now();
                if budget_from < now {
                    budget_from = now;
                }
                budget_from += Duration::from_secs_f64(n as f64 / bytes_per_sec.max(1) as f64);
                tokio::select! {
                    _ = stop.cancelled() => break,
                    _ = tokio::time::sleep_until(budget_from) => {}
                }
            }
            _ => {}
        }
        let written = tokio::select! {
            _ = stop.cancelled() => break,
            w = to.write_all(&buf[..n]) => w,
        };
        if written.is_err() {
            break;
        }
        let c = if upward { &stats.up } else { &stats.down };
        c.fetch_add(n as u64, Ordering::Relaxed);
    }
    stop.cancel();
    (from, to)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An echo server on loopback.
    async fn echo() -> SocketAddr {
        let l = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
        let a = l.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                tokio::spawn(async move {
                    let mut b = [0u8; 1024];
                    while let Ok(n) = s.read(&mut b).await {
                        if n == 0 || s.write_all(&b[..n]).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        a
    }

    async fn round_trip(c: &mut TcpStream) -> std::io::Result<Duration> {
        let t = Instant::now();
        c.write_all(b"ping").await?;
        let mut b = [0u8; 4];
        c.read_exact(&mut b).await?;
        assert_eq!(&b, b"ping");
        Ok(t.elapsed())
    }

    #[tokio::test]
    async fn passes_bytes_and_applies_latency_and_blackhole() {
        let p = Proxy::start(echo().await).await.unwrap();
        let mut c = TcpStream::connect(p.listen()).await.unwrap();
        assert!(round_trip(&mut c).await.unwrap() < Duration::from_millis(200));
        p.set(Active::Latency {
            latency: Duration::from_millis(100),
            jitter: Duration::ZERO,
        });
        // Both directions are delayed.
        assert!(round_trip(&mut c).await.unwrap() >= Duration::from_millis(200));
        p.set(Active::Blackhole);
        let held = tokio::time::timeout(Duration::from_millis(300), round_trip(&mut c)).await;
        assert!(held.is_err(), "a blackhole passes nothing");
        p.set(Active::None);
        // The held bytes pass once the toxic ends.
        let mut b = [0u8; 4];
        tokio::time::timeout(Duration::from_secs(2), c.read_exact(&mut b))
            .await
            .expect("held bytes pass after the blackhole")
            .unwrap();
        let f = p.figures();
        assert_eq!(f.connections, 1);
        assert!(f.bytes_to_upstream >= 12, "{f:?}");
    }

    #[tokio::test]
    async fn reset_kills_open_connections_and_refuses_new_ones_while_on() {
        let p = Proxy::start(echo().await).await.unwrap();
        let mut c = TcpStream::connect(p.listen()).await.unwrap();
        round_trip(&mut c).await.unwrap();
        p.set(Active::Reset);
        let mut b = [0u8; 4];
        let r = tokio::time::timeout(Duration::from_secs(2), async {
            let _ = c.write_all(b"ping").await;
            c.read(&mut b).await
        })
        .await
        .expect("the reset reaches the client");
        assert!(matches!(r, Ok(0) | Err(_)), "{r:?}");
        let mut c2 = TcpStream::connect(p.listen()).await.unwrap();
        let r = tokio::time::timeout(Duration::from_secs(2), c2.read(&mut b))
            .await
            .unwrap();
        assert!(matches!(r, Ok(0) | Err(_)), "{r:?}");
        p.set(Active::None);
        let mut c3 = TcpStream::connect(p.listen()).await.unwrap();
        round_trip(&mut c3).await.unwrap();
        assert!(p.figures().resets >= 2, "{:?}", p.figures());
    }

    #[tokio::test]
    async fn refuses_a_non_loopback_upstream() {
        let e = Proxy::start("10.0.0.1:5672".parse().unwrap())
            .await
            .unwrap_err();
        assert!(e.to_string().contains("loopback"), "{e}");
    }
}
