//! The `provenance` block of a cell's record (docs/record.md): what the system said it
//! is, read by the adapter at setup, in `result.json` and `invocation.txt`, beside the
//! build the scenario states (`system_build`), and the loader's own build flagged when
//! it is dirty. A control-broker cell always runs; the pgmq cell needs PostgreSQL +
//! pgmq on 127.0.0.1:5432 (skips by hand, fails under `CI`). Cells are short (2 s).

mod support;

use std::path::Path;

use support::{run_passing, run_raw};

const SMOKE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../scenarios/smoke.yaml");
const PGMQ_SMOKE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../scenarios/pgmq-smoke.yaml");

/// The loader's build is in `crossbench` (with `dirty`), and a dirty one is a warning
/// in the record and a line of invocation.txt.
fn assert_build_flagged(r: &serde_json::Value, invocation: &str) {
    let commit = r["crossbench"]["git_commit"].as_str().expect("git_commit");
    let dirty = r["crossbench"]["dirty"]
        .as_bool()
        .expect("crossbench.dirty");
    assert_eq!(dirty, commit.ends_with("-dirty"), "{}", r["crossbench"]);
    let warned = r["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|w| w.as_str().unwrap_or_default().starts_with("DIRTY BUILD:"));
    assert_eq!(warned, dirty, "warnings: {}", r["warnings"]);
    assert_eq!(
        invocation.contains("\ncrossbench_dirty: true"),
        dirty,
        "{invocation}"
    );
}

#[test]
fn a_mem_cell_records_its_provenance_the_stated_build_and_a_dirty_loader() {
    let (r, tmp) = run_passing(
        Path::new(SMOKE),
        &[
            "name=prov-mem",
            "duration=2s",
            "warmup=1s",
            "system_build=sha256:0123abcd",
        ],
    );
    let p = &r["provenance"];
    assert_eq!(p["schema"], 1, "{p}");
    assert_eq!(p["version"], env!("CARGO_PKG_VERSION"), "{p}");
    assert!(p["product"].as_str().unwrap().contains("crossbench"), "{p}");
    assert_eq!(p["stated_build"], "sha256:0123abcd", "{p}");
    assert!(p.get("caveat").is_none(), "{p}");
    let inv = std::fs::read_to_string(tmp.path().join("cell/invocation.txt")).unwrap();
    assert!(inv.contains("\nsystem_product: crossbench"), "{inv}");
    assert!(
        inv.contains("\nsystem_build_stated: sha256:0123abcd\n"),
        "{inv}"
    );
    assert_build_flagged(&r, &inv);
}

#[test]
fn a_pgmq_cell_records_what_the_server_reports() {
    if !support::pgmq_ready() {
        return;
    }
    let (r, tmp) = run_passing(
        Path::new(PGMQ_SMOKE),
        &["name=prov-pgmq", "duration=2s", "warmup=1s"],
    );
    let p = &r["provenance"];
    assert_eq!(p["schema"], 1, "{p}");
    assert_eq!(p["product"], "PostgreSQL", "{p}");
    let version = support::psql("SHOW server_version").expect("psql");
    assert_eq!(p["version"], version.as_str(), "{p}");
    assert_eq!(
        p["reported"]["pgmq_extversion"],
        support::psql("SELECT extversion FROM pg_extension WHERE extname = 'pgmq'")
            .unwrap()
            .as_str(),
        "{p}"
    );
    for k in [
        "fsync",
        "synchronous_commit",
        "autovacuum",
        "shared_buffers",
    ] {
        assert_eq!(
            p["settings"][k],
            support::psql(&format!("SHOW {k}")).unwrap().as_str(),
            "{k}: {p}"
        );
    }
    assert_eq!(p["stated_build"], serde_json::Value::Null, "{p}");
    assert!(
        r["provisioned"].get("provenance").is_none(),
        "provenance is its own block, not under provisioned"
    );
    let inv = std::fs::read_to_string(tmp.path().join("cell/invocation.txt")).unwrap();
    assert!(
        inv.contains(&format!(
            "\nsystem_version: {version} (as the server reports it)\n"
        )),
        "{inv}"
    );
    assert!(
        inv.contains("\nsystem_build_stated: (not stated: system_build)\n"),
        "{inv}"
    );
    assert_build_flagged(&r, &inv);
}

#[test]
fn a_system_build_that_is_a_url_is_bad_input_naming_the_field() {
    let (code, text, tmp) = run_raw(
        Path::new(SMOKE),
        &["duration=2s", "system_build=postgres://u:hunter2@host/db"],
    );
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("system_build"), "{text}");
    assert!(!text.contains("hunter2"), "{text}");
    assert!(!tmp.path().join("cell").exists(), "nothing written");
    let (code, text, _tmp) = run_raw(Path::new(SMOKE), &["duration=2s", "system_build='  '"]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("system_build"), "{text}");
}
