//! One cell in the runtime's paused virtual time, for counting the harness's
//! instructions per delivery under callgrind (issue 49): timings on these machines
//! move with steal and iowait, instruction counts do not. In virtual time the pacer's
//! schedule, the stages' work and every batch are the same from run to run whatever
//! the machine is doing, and however slowly valgrind runs the program, so two runs of
//! the same build give the same count (give or take the background threads: the
//! sampler and the stream-log writer run on real time).
//!
//! What it runs is the shape of `scenarios/control-dense.yaml` (or the scenario given)
//! on the control broker, on one current-thread runtime whose clock is the
//! `virtual-time` feature's: a lock per clock read that the release binary does not
//! take, so its counts sit above a real-time cell's. They compare builds, not
//! machines.
//!
//! ```sh
//! cargo bench -p crossbench --features virtual-time --bench instructions --no-run
//! scripts/tools/instructions.sh            # two durations under callgrind, the difference
//! ```
//!
//! Arguments: `[SCENARIO] [--secs N] [--set key=value]...`; it prints one line of
//! `key=value` pairs: the rated seconds, the deliveries the checker counted, and the
//! cell's outcome.

use std::path::PathBuf;

use loader::cli::run::{execute, RunRequest};
use loader::pacing::pacer::Timing;

// The binary's allocator (loader/src/main.rs): its instructions are part of the count.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let mut args = std::env::args().skip(1);
    let mut scenario = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../scenarios/control-dense.yaml"
    ));
    let mut secs = 4u64;
    let mut sets: Vec<String> = Vec::new();
    while let Some(a) = args.next() {
        match a.as_str() {
            // What `cargo bench` passes to every bench binary.
            "--bench" => {}
            "--secs" => {
                secs = args
                    .next()
                    .and_then(|s| s.parse().ok())
                    .unwrap_or_else(|| usage("--secs takes a whole number of seconds"));
            }
            "--set" => sets.push(
                args.next()
                    .unwrap_or_else(|| usage("--set takes key=value")),
            ),
            s if s.starts_with('-') => usage(&format!("unknown flag {s}")),
            s => scenario = PathBuf::from(s),
        }
    }
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let mut req = RunRequest::new(&scenario);
    // A short warm-up and no ramp: the count is taken as the difference of two
    // durations, so what does not grow with the rated window cancels out.
    req.sets = vec![
        format!("duration={secs}s"),
        "warmup=1s".into(),
        "ramp=0s".into(),
    ];
    req.sets.extend(sets);
    req.out = Some(tmp.path().join("cell"));
    req.quiet = true;
    req.timing = Timing::Virtual;
    req.argv = vec!["instructions".into(), scenario.display().to_string()];
    if let Err(e) = execute(&req) {
        eprintln!("instructions: the cell failed: {e:#}");
        std::process::exit(1);
    }
    let text = std::fs::read_to_string(tmp.path().join("cell/result.json"))
        .expect("the cell wrote result.json");
    let r: serde_json::Value = serde_json::from_str(&text).expect("result.json parses");
    let delivered = r["verdict"]["totals"]["delivered"].as_u64().unwrap_or(0);
    println!(
        "secs={secs} delivered={delivered} outcome={} load={}",
        r["outcome"].as_str().unwrap_or("?"),
        r["load"]["verdict"].as_str().unwrap_or("?"),
    );
}

fn usage(why: &str) -> ! {
    eprintln!(
        "instructions: {why}\nusage: instructions [SCENARIO] [--secs N] [--set key=value]..."
    );
    std::process::exit(2);
}
