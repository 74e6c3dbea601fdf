//! serve + pull over 127.0.0.1 with an ephemeral port.

use std::time::Duration;

use sampler::{SamplerConfig, TargetSpec};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn raw_get(addr: std::net::SocketAddr, path: &str) -> String {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_and_pull() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let cfg = SamplerConfig {
        targets: vec![("self".into(), TargetSpec::Pid(std::process::id()))],
        interval: Duration::from_millis(200),
        ..Default::default()
    };
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(sampler::serve(listener, cfg, async {
        let _ = stop_rx.await;
    }));
    // Wait for what the checks below need (three ticks served), by counting them,
    // not by sleeping a guessed time: a loaded machine may tick late.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let body = raw_get(addr, "/samples.csv").await;
        let ticks: std::collections::BTreeSet<&str> = body
            .split("\r\n\r\n")
            .nth(1)
            .unwrap_or("")
            .lines()
            .filter(|l| !l.starts_with('#') && !l.starts_with("unix_ms"))
            .filter_map(|l| l.split(',').next())
            .collect();
        if ticks.len() >= 3 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "fewer than 3 ticks served after 60 s: {body}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let health = raw_get(addr, "/health").await;
    assert!(health.starts_with("HTTP/1.1 200 OK\r\n"), "{health}");
    assert!(health.contains("Connection: close") && health.ends_with("ok\n"));
    let nf = raw_get(addr, "/nope").await;
    assert!(nf.starts_with("HTTP/1.1 404"), "{nf}");
    let bad = raw_get(addr, "/samples.csv?since_unix_ms=xyz").await;
    assert!(bad.starts_with("HTTP/1.1 400"), "{bad}");

    let tmp = tempfile::tempdir().unwrap();
    let url = format!("http://{addr}");
    let all = tmp.path().join("all.csv");
    let n_all = sampler::pull(&url, 0, &all).await.unwrap();
    let set = sampler::read_samples(&all).unwrap();
    assert_eq!(n_all as usize, set.rows.len());
    assert!(n_all > 0);
    assert_eq!(set.targets(), vec!["self", "host", "loader"]);

    // Only rows at or after the second tick.
    let mut ticks: Vec<u64> = set.rows.iter().map(|r| r.unix_ms).collect();
    ticks.dedup();
    assert!(ticks.len() >= 3, "{ticks:?}");
    let part = tmp.path().join("part.csv");
    let n_part = sampler::pull(&format!("{url}/"), ticks[1], &part)
        .await
        .unwrap();
    let pset = sampler::read_samples(&part).unwrap();
    assert!(n_part < n_all && n_part > 0);
    assert!(pset.rows.iter().all(|r| r.unix_ms >= ticks[1]));

    let none = tmp.path().join("none.csv");
    assert_eq!(sampler::pull(&url, u64::MAX, &none).await.unwrap(), 0);

    // Errors are errors, not empty files.
    let e = sampler::pull(&format!("{url}/nope"), 0, &tmp.path().join("x.csv"))
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("404"), "{e}");
    assert!(sampler::pull("ftp://x", 0, &none).await.is_err());

    stop_tx.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(5), server)
        .await
        .expect("serve stops")
        .unwrap()
        .unwrap();
    // The port is closed afterwards.
    assert!(sampler::pull(&url, 0, &none).await.is_err());
}
