//! `crossbench selftest stalls`: the host probe a campaign runs before its first cell
//! (`crate::record::host_stalls`), alone, `--runs` times: is this machine quiet
//! enough for cells that keep every core busy? A line per probe, and the warning
//! when the host stalled the machine. Each probe's JSON with `--json`.

use crate::cli::exit::Exit;
use crate::record::host_stalls::probe;

pub fn stalls(secs: u64, runs: usize, json: bool) -> anyhow::Result<Exit> {
    for i in 1..=runs.max(1) {
        let p = probe(std::time::Duration::from_secs(secs.max(1)));
        if json {
            println!("{}", serde_json::to_string(&p)?);
        } else {
            println!("[{i}/{runs}] {}", p.describe());
            if let Some(w) = p.warning() {
                println!("  WARNING: {w}");
            }
        }
    }
    Ok(Exit::Pass)
}
