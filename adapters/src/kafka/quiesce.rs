//! Before a reset deletes topics: wait until the broker has finished with every
//! connection that was closed to it.
//!
//! A Kafka-protocol broker serves a connection one request at a time and holds its
//! socket until the request is answered. When a client closes a connection while the
//! broker is still working on one of its requests (a consumer stopping at the end of a
//! cell, with a Fetch queued behind a backlog of writes), the broker goes on with that
//! request after the client is gone. tansu 0.6.0 panics when such a request reaches a
//! partition that was deleted in the meantime (its storage's `query_one` finds no
//! watermark row, `tansu-storage` `lite.rs:503`, "more or less than one row"), and
//! stays down: a reset that deletes topics right after an overloaded cell killed it in
//! every ceiling search here.
//!
//! The sign that the broker is still at it is in the kernel's socket table: our side
//! of such a connection waits in `FIN_WAIT1`/`FIN_WAIT2` (we sent our FIN, the broker
//! has not closed), and, when the broker runs on this host, its side waits in
//! `CLOSE_WAIT`. [`unfinished`] counts both in `/proc/net/tcp` and `/proc/net/tcp6`
//! for the broker's addresses; [`wait`] polls until none is left or a bound passes.
//! A socket the application closed stays in `FIN_WAIT2` at most `tcp_fin_timeout`
//! (60 s by default), so the broker-side `CLOSE_WAIT` is the longer-lived sign; both
//! are counted. Off Linux there is no table to read and the wait returns at once,
//! saying so.

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};
use std::time::{Duration, Instant};

/// TCP states, as `/proc/net/tcp` prints them (`include/net/tcp_states.h`).
const FIN_WAIT1: u8 = 0x04;
const FIN_WAIT2: u8 = 0x05;
const CLOSE_WAIT: u8 = 0x08;

/// How often [`wait`] reads the socket tables.
const POLL: Duration = Duration::from_millis(50);

/// The broker's addresses: every `host:port` of `endpoints` (the bootstrap list and the
/// brokers metadata advertises), resolved. An endpoint that does not resolve is left
/// out; the caller's note says how many addresses were watched.
pub(super) fn addresses<S: AsRef<str>>(endpoints: &[S]) -> BTreeSet<SocketAddr> {
    let mut out = BTreeSet::new();
    for e in endpoints {
        let e = e.as_ref().trim();
        // librdkafka accepts a `PLAINTEXT://host:port` form in bootstrap.servers.
        let e = e.rsplit("://").next().unwrap_or(e);
        if let Ok(addrs) = e.to_socket_addrs() {
            out.extend(addrs.map(canonical));
        }
    }
    out
}

/// An IPv4-mapped IPv6 address as the IPv4 address it is.
fn canonical(a: SocketAddr) -> SocketAddr {
    match a {
        SocketAddr::V6(v6) => match v6.ip().to_ipv4_mapped() {
            Some(v4) => SocketAddr::new(IpAddr::V4(v4), v6.port()),
            None => a,
        },
        SocketAddr::V4(_) => a,
    }
}

/// One `/proc/net/tcp{,6}` address, `0100007F:2384` or the 32-hex-digit IPv6 form:
/// the address words as the kernel printed them (native byte order), the port in hex.
fn parse_addr(s: &str) -> Option<SocketAddr> {
    let (ip, port) = s.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let ip = match ip.len() {
        8 => IpAddr::V4(Ipv4Addr::from(
            u32::from_str_radix(ip, 16).ok()?.to_ne_bytes(),
        )),
        32 => {
            let mut bytes = [0u8; 16];
            for (i, chunk) in bytes.chunks_mut(4).enumerate() {
                let word = u32::from_str_radix(ip.get(i * 8..i * 8 + 8)?, 16).ok()?;
                chunk.copy_from_slice(&word.to_ne_bytes());
            }
            IpAddr::V6(Ipv6Addr::from(bytes))
        }
        _ => return None,
    };
    Some(canonical(SocketAddr::new(ip, port)))
}

/// Connections to or of the broker that are closing but not closed, in the text of
/// socket tables: ours in `FIN_WAIT1`/`FIN_WAIT2` towards a broker address, the
/// broker's in `CLOSE_WAIT` on one. A connection seen from both ends (a broker on this
/// host) counts once. Lines that do not parse are skipped.
pub(super) fn unfinished(tables: &[String], brokers: &BTreeSet<SocketAddr>) -> usize {
    // Each connection as (client address, broker address).
    let mut closing: BTreeSet<(SocketAddr, SocketAddr)> = BTreeSet::new();
    for table in tables {
        for line in table.lines().skip(1) {
            let mut f = line.split_whitespace();
            let (Some(_sl), Some(local), Some(remote), Some(state)) =
                (f.next(), f.next(), f.next(), f.next())
            else {
                continue;
            };
            let (Ok(state), Some(local), Some(remote)) = (
                u8::from_str_radix(state, 16),
                parse_addr(local),
                parse_addr(remote),
            ) else {
                continue;
            };
            match state {
                FIN_WAIT1 | FIN_WAIT2 if brokers.contains(&remote) => {
                    closing.insert((local, remote));
                }
                CLOSE_WAIT if brokers.contains(&local) => {
                    closing.insert((remote, local));
                }
                _ => {}
            }
        }
    }
    closing.len()
}

/// This host's socket tables, or None where there are none to read (not Linux).
fn read_tables() -> Option<Vec<String>> {
    let tables: Vec<String> = ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .collect();
    (!tables.is_empty()).then_some(tables)
}

/// What [`wait`] saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Quiet {
    /// How long it waited.
    pub waited: Duration,
    /// The most unfinished connections seen at once.
    pub most: usize,
    /// Unfinished connections left when it stopped (non-zero only past the bound).
    pub left: usize,
    /// False when there was no socket table to read.
    pub observed: bool,
}

impl Quiet {
    /// One line for the cell's `provisioned.notes`.
    pub fn note(&self, addresses: usize) -> String {
        if !self.observed {
            return "before deleting the topics: no socket table to read (not Linux); deleted without waiting for the broker to finish with closed connections".into();
        }
        if self.left > 0 {
            return format!(
                "before deleting the topics: the broker still had {} closed connection(s) unfinished after {:.1} s (at most {} at once, {addresses} broker address(es) watched); deleted anyway",
                self.left,
                self.waited.as_secs_f64(),
                self.most
            );
        }
        if self.most == 0 {
            return format!(
                "before deleting the topics: no closed connection to the broker was unfinished ({addresses} broker address(es) watched)"
            );
        }
        format!(
            "before deleting the topics: waited {:.1} s until the broker had finished with {} closed connection(s) ({addresses} broker address(es) watched)",
            self.waited.as_secs_f64(),
            self.most
        )
    }
}

/// Poll the socket tables until no connection to `brokers` is unfinished, or `bound`
/// has passed. Reading the tables is cheap (a few kB of text per poll).
pub(super) async fn wait(brokers: &BTreeSet<SocketAddr>, bound: Duration) -> Quiet {
    let start = Instant::now();
    let mut most = 0;
    loop {
        let Some(tables) = read_tables() else {
            return Quiet {
                waited: start.elapsed(),
                most,
                left: 0,
                observed: false,
            };
        };
        let n = unfinished(&tables, brokers);
        most = most.max(n);
        if n == 0 || start.elapsed() >= bound {
            return Quiet {
                waited: start.elapsed(),
                most,
                left: n,
                observed: true,
            };
        }
        tokio::time::sleep(POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::{TcpListener, TcpStream};

    fn set(addrs: &[&str]) -> BTreeSet<SocketAddr> {
        addrs.iter().map(|a| a.parse().unwrap()).collect()
    }

    /// Lines in the kernel's format (a little-endian host: 127.0.0.1 prints as
    /// 0100007F), one of each state that matters and some that do not.
    #[test]
    #[cfg(target_endian = "little")]
    fn counts_our_fin_waits_and_the_brokers_close_waits_only() {
        let tcp = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
   0: 0100007F:2384 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0 100 0 0 10 0\n\
   1: 0100007F:9C40 0100007F:2384 05 00000000:00000000 00:00000000 00000000     0        0 0 1 0 20 4 30 10 -1\n\
   2: 0100007F:2384 0100007F:9C40 08 00000000:00000000 00:00000000 00000000     0        0 2 1 0 20 4 30 10 -1\n\
   3: 0100007F:9C41 0100007F:2384 01 00000000:00000000 00:00000000 00000000     0        0 3 1 0 20 4 30 10 -1\n\
   4: 0100007F:9C42 0100007F:2384 06 00000000:00000000 03:00001000 00000000     0        0 0 3 0\n\
   5: 0100007F:9C43 0100007F:1538 05 00000000:00000000 00:00000000 00000000     0        0 0 1 0 20 4 30 10 -1\n\
   6: 0100007F:9C44 0100007F:2384 04 00000000:00000000 00:00000000 00000000     0        0 0 1 0 20 4 30 10 -1\n\
   7: 0100007F:2384 0100007F:9C45 08 00000000:00000000 00:00000000 00000000     0        0 7 1 0 20 4 30 10 -1\n\
   garbage line\n"
            .to_string();
        let broker = set(&["127.0.0.1:9092"]);
        // Three connections: 1 and 2 are the two ends of one (our FIN_WAIT2, the
        // broker's CLOSE_WAIT), 6 is ours in FIN_WAIT1, 7 the broker's CLOSE_WAIT of a
        // client whose end is gone; not the listener, the established one, TIME_WAIT,
        // nor a FIN_WAIT2 to port 5432.
        assert_eq!(unfinished(std::slice::from_ref(&tcp), &broker), 3);
        assert_eq!(unfinished(&[tcp], &set(&["127.0.0.2:9092"])), 0);
    }

    #[test]
    #[cfg(target_endian = "little")]
    fn reads_ipv6_and_mapped_ipv4_addresses() {
        // ::1 port 9092, and ::ffff:127.0.0.1 port 9092, as tcp6 prints them.
        assert_eq!(
            parse_addr("00000000000000000000000001000000:2384"),
            Some("[::1]:9092".parse().unwrap())
        );
        assert_eq!(
            parse_addr("0000000000000000FFFF00000100007F:2384"),
            Some("127.0.0.1:9092".parse().unwrap())
        );
        assert_eq!(parse_addr("0100007F"), None);
        assert_eq!(parse_addr("01000:2384"), None);
    }

    #[test]
    fn addresses_resolve_bootstrap_forms() {
        let a = addresses(&["127.0.0.1:9092", " PLAINTEXT://127.0.0.1:9093", "nonsense"]);
        assert_eq!(a, set(&["127.0.0.1:9092", "127.0.0.1:9093"]));
    }

    /// A "broker" on a port of its own and one connection to it: the broker's address,
    /// the client's end and the broker's end.
    fn connection() -> (BTreeSet<SocketAddr>, TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let client = TcpStream::connect(addr).unwrap();
        let (held, _) = listener.accept().unwrap();
        ([addr].into(), client, held)
    }

    /// The real thing on this host's sockets: a "broker" that accepted a connection and
    /// has not answered when the client closes it. The wait sees it unfinished until
    /// the broker side closes, and returns once it has.
    #[tokio::test]
    async fn waits_for_a_broker_still_holding_a_closed_connection() {
        if read_tables().is_none() {
            eprintln!("skipped: no /proc/net/tcp on this host");
            return;
        }
        let (broker, client, mut held) = connection();
        // Nothing is closing yet: an open connection is not unfinished.
        let q = wait(&broker, Duration::from_secs(5)).await;
        assert_eq!((q.most, q.left), (0, 0), "{q:?}");
        drop(client);
        let tables = read_tables().unwrap();
        assert!(
            unfinished(&tables, &broker) >= 1,
            "a closed client connection the broker still holds must count"
        );
        // The broker finishes 300 ms later: reads the EOF and closes its side.
        let finisher = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            let mut buf = [0u8; 8];
            let _ = held.read(&mut buf);
            drop(held);
        });
        let q = wait(&broker, Duration::from_secs(10)).await;
        finisher.join().unwrap();
        assert_eq!(q.left, 0, "{q:?}");
        assert!(q.most >= 1, "{q:?}");
        assert!(q.waited >= Duration::from_millis(200), "{q:?}");
        assert!(q.note(1).contains("waited"), "{}", q.note(1));
    }

    /// Past the bound the wait gives up and says how many were left.
    #[tokio::test]
    async fn gives_up_at_the_bound_and_says_so() {
        if read_tables().is_none() {
            eprintln!("skipped: no /proc/net/tcp on this host");
            return;
        }
        let (broker, client, held) = connection();
        drop(client);
        let q = wait(&broker, Duration::from_millis(300)).await;
        assert!(q.left >= 1, "{q:?}");
        assert!(q.note(1).contains("deleted anyway"), "{}", q.note(1));
        drop(held);
    }
}
