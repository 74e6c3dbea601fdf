//! Finding the servers the integration tests need, shared by the adapter and loader
//! tests (the loader's support module includes this file by path): skip when run by
//! hand, fail under `CI`, which the test command sets after provisioning.

use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// True when something answers on `addr`; otherwise see [`absent`].
pub fn reachable(addr: &str, what: &str, provision: &str) -> bool {
    let a: SocketAddr = addr.parse().expect("a socket address");
    TcpStream::connect_timeout(&a, Duration::from_secs(2)).is_ok() || absent(what, addr, provision)
}

/// `what` is not there: under `CI` the test fails naming the script that provisions
/// it; run by hand it prints SKIP and the caller returns (false).
pub fn absent(what: &str, addr: &str, provision: &str) -> bool {
    if std::env::var_os("CI").is_some() {
        panic!("{what} not reachable at {addr} and CI is set (run {provision})");
    }
    println!("SKIP: {what} not reachable at {addr} (run {provision})");
    false
}

/// The Queen server of `CROSSBENCH_QUEEN_URL`, or None with a SKIP line (also under
/// `CI`: no registry ships Queen, so the test command cannot provision it).
pub fn queen_url(test: &str) -> Option<String> {
    match std::env::var("CROSSBENCH_QUEEN_URL") {
        Ok(u) if !u.trim().is_empty() => Some(u.trim().to_string()),
        _ => {
            eprintln!(
                "SKIP {test}: CROSSBENCH_QUEEN_URL is not set (build and start a Queen server, see compose/queen/README.md, then export CROSSBENCH_QUEEN_URL=http://127.0.0.1:6632)"
            );
            None
        }
    }
}
