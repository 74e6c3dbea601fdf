//! `crossbench sample`: serve this machine's 1 Hz resource samples over HTTP, for a
//! `run --sampler URL` on another machine.

use anyhow::Context;

use crate::cli::exit::Exit;
use crate::cli::BadInput;

pub fn serve(listen: &str, targets: &[String]) -> anyhow::Result<Exit> {
    let mut specs = Vec::new();
    for (i, t) in targets.iter().enumerate() {
        let (label, spec) = crate::scenario::split_target(t);
        let parsed: sampler::TargetSpec = spec
            .parse()
            .map_err(|e| BadInput(format!("--target {t}: {e}")))?;
        specs.push((
            label.map_or_else(|| format!("target{i}"), str::to_string),
            parsed,
        ));
    }
    let addr: std::net::SocketAddr = listen.parse().map_err(|_| {
        BadInput(format!(
            "--listen {listen}: expected host:port, e.g. 127.0.0.1:9464"
        ))
    })?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("listening on {addr}"))?;
        eprintln!("serving samples on http://{addr}/samples.csv (Ctrl-C stops)");
        sampler::serve(listener, sampler::SamplerConfig::new(specs), async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .context("serving samples")
    })?;
    Ok(Exit::Pass)
}
