//! What the adapter contract tests share: finding their server (skip when run by
//! hand, fail under `CI`, which the test command sets after provisioning) and the
//! `{"k":…,"seq":…}` payloads they publish.
#![allow(dead_code)]

use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use bytes::Bytes;

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

/// The payload of message `seq` of key `key`.
pub fn payload(key: u64, seq: u64) -> Bytes {
    Bytes::from(format!(r#"{{"k":{key},"seq":{seq}}}"#))
}

/// (key, seq) of a [`payload`].
pub fn parse(p: &[u8]) -> (u64, u64) {
    let v: serde_json::Value = serde_json::from_slice(p).expect("json payload");
    (v["k"].as_u64().unwrap(), v["seq"].as_u64().unwrap())
}
