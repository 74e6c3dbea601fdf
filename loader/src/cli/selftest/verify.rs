//! `selftest verify`: the checker as a user meets it (see the parent module).

use std::time::Instant;

use crate::cli::exit::Exit;
use crate::cli::BadInput;

pub fn verify(
    lines: u64,
    props: u64,
    runs: usize,
    dir: Option<std::path::PathBuf>,
    crossbench_meta: bool,
) -> anyhow::Result<Exit> {
    use anyhow::Context;
    if !(12..=2_000_000_000).contains(&lines) {
        return Err(BadInput(format!("--lines {lines}: give 12 to 2 000 000 000")).into());
    }
    if props == 0 || props > 10_000_000 {
        return Err(BadInput(format!("--props {props}: give 1 to 10 000 000")).into());
    }
    if !(1..=100).contains(&runs) {
        return Err(BadInput(format!("--runs {runs}: give 1 to 100")).into());
    }
    let base = dir.unwrap_or_else(std::env::temp_dir);
    let cell = base.join(format!("crossbench-selftest-verify-{}", std::process::id()));
    let meta = if crossbench_meta {
        checker::synth::SynthMeta::CrossbenchV1
    } else {
        checker::synth::SynthMeta::Reference
    };
    let t = Instant::now();
    let written = checker::synth::write_clean_cell(&cell, lines, props, meta)
        .with_context(|| format!("writing the synthetic cell in {}", cell.display()))?;
    let bytes: u64 = std::fs::read_dir(&cell)?
        .filter_map(|e| e.ok()?.metadata().ok())
        .map(|m| m.len())
        .sum();
    println!(
        "cell: {written} lines over 12 logs, {props} properties, {:.0} MB, {} produced.meta, written in {:.1} s ({})",
        bytes as f64 / 1e6,
        if crossbench_meta { "crossbench v1" } else { "reference" },
        t.elapsed().as_secs_f64(),
        cell.display()
    );
    let exe = std::env::current_exe().context("finding this binary")?;
    let result = (|| -> anyhow::Result<()> {
        let mut cli = Vec::new();
        for i in 0..runs {
            let t = Instant::now();
            let out = std::process::Command::new(&exe)
                .arg("verify")
                .arg(&cell)
                .stdout(std::process::Stdio::null())
                .output()
                .context("running crossbench verify")?;
            let secs = t.elapsed().as_secs_f64();
            anyhow::ensure!(
                out.status.success(),
                "crossbench verify of a clean cell exited {:?}: {}",
                out.status.code(),
                String::from_utf8_lossy(&out.stderr)
            );
            println!(
                "  cli run {}: {secs:.3} s, {:.1} M lines/s",
                i + 1,
                written as f64 / secs / 1e6
            );
            cli.push(written as f64 / secs);
        }
        let mut lib = Vec::new();
        for i in 0..runs {
            let t = Instant::now();
            let v = checker::verify_dir(&cell, &checker::VerifyOptions::default())?;
            let secs = t.elapsed().as_secs_f64();
            anyhow::ensure!(
                v.pass && v.totals.delivered == written,
                "verify_dir of a clean cell: pass {} with {} of {written} lines",
                v.pass,
                v.totals.delivered
            );
            println!(
                "  in-process run {}: {secs:.3} s, {:.1} M lines/s",
                i + 1,
                written as f64 / secs / 1e6
            );
            lib.push(written as f64 / secs);
        }
        for (what, xs) in [
            ("crossbench verify (process)", &cli),
            ("verify_dir (in process)", &lib),
        ] {
            let mut v = xs.clone();
            v.sort_by(f64::total_cmp);
            println!(
                "{what}: median {:.1} M lines/s [min {:.1}, max {:.1}] over {} runs",
                v[v.len() / 2] / 1e6,
                v[0] / 1e6,
                v[v.len() - 1] / 1e6,
                v.len()
            );
        }
        Ok(())
    })();
    let _ = std::fs::remove_dir_all(&cell);
    result?;
    Ok(Exit::Pass)
}
