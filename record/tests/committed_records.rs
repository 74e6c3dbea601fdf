//! Every `result.json` committed under `results/` reads through the record's one typed
//! reader, and a record the reader cannot vouch for (an unknown outcome, another
//! schema version) is an error naming the file, never a default.

use std::path::{Path, PathBuf};

use cell_record::{CellResult, Outcome, RecordError};

fn committed(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            committed(&p, out);
        } else if p.file_name().is_some_and(|n| n == "result.json") {
            out.push(p);
        }
    }
}

#[test]
fn every_committed_result_reads_through_the_typed_reader() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../results");
    let mut files = Vec::new();
    committed(&root, &mut files);
    assert!(!files.is_empty(), "no result.json under {}", root.display());
    let mut seen = std::collections::BTreeMap::<Outcome, usize>::new();
    let mut failures = Vec::new();
    for f in &files {
        match CellResult::read_dir(f.parent().unwrap()) {
            Ok(r) => *seen.entry(r.outcome).or_default() += 1,
            Err(e) => failures.push(e.to_string()),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} records do not read:\n{}",
        failures.len(),
        files.len(),
        failures.join("\n")
    );
    // What was read, for the log: the outcomes the committed records hold.
    eprintln!("{} records read: {seen:?}", files.len());
}

fn record(outcome: &str, version: u64) -> String {
    format!(
        r#"{{"schema_version": {version}, "cell": "c", "outcome": "{outcome}", "system": "mem"}}"#
    )
}

#[test]
fn an_unknown_outcome_is_an_error_not_a_default() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("result.json"), record("NOT-HELD", 1)).unwrap();
    let e = CellResult::read_dir(tmp.path()).unwrap_err();
    assert!(matches!(e, RecordError::BadRecord { .. }), "{e:?}");
    let msg = e.to_string();
    assert!(
        msg.contains("result.json") && msg.contains("unknown outcome \"NOT-HELD\""),
        "{msg}"
    );
    // A missing outcome is as much an error.
    let e = CellResult::parse(
        Path::new("x/result.json"),
        r#"{"schema_version": 1, "cell": "c"}"#,
    )
    .unwrap_err();
    assert!(e.to_string().contains("outcome"), "{e}");
}

#[test]
fn another_schema_version_is_an_error_and_a_known_record_reads() {
    let p = Path::new("x/result.json");
    let e = CellResult::parse(p, &record("PASS", 2)).unwrap_err();
    assert!(e.to_string().contains("schema_version 2 is not 1"), "{e}");
    let r = CellResult::parse(p, &record("VOID", 1)).unwrap();
    assert_eq!(r.outcome, Outcome::Void);
    assert!(r.is_void());
    let tmp = tempfile::tempdir().unwrap();
    assert!(matches!(
        CellResult::read_dir(tmp.path()),
        Err(RecordError::NotACell { .. })
    ));
}

#[test]
fn a_loaders_record_reads_its_loaders_block_typed() {
    let text = r#"{"schema_version": 1, "cell": "c", "outcome": "SHARE", "system": "pgmq",
        "time": {"started_utc": "2026-12-01T00:00:00Z", "ended_utc": "2026-12-01T00:01:00Z", "started_unix_ms": 5, "hydration_sec": 1.5},
        "flows": {"A": {"offered": 3, "shed_backpressure": 1, "offered_rated": 2}},
        "loaders": {"count": 2, "index": 1, "topology": "partitioned", "rendezvous": "http://r",
            "start_unix_us": 7, "host": {"hostname": "h", "boot_id": "b", "pid": 9, "later": true},
            "clock_start": {"source": "chrony", "offset_bound_us": 40, "detail": "d"},
            "clock_end": {"source": "unknown", "offset_bound_us": null, "detail": "d"},
            "abandoned": {"loader": 0, "stage": "setup", "why": "w"}}}"#;
    let r = CellResult::parse(Path::new("result.json"), text).unwrap();
    let l = r.loaders.as_ref().unwrap();
    assert_eq!((l.count, l.index), (Some(2), Some(1)));
    assert_eq!(l.topology.as_deref(), Some("partitioned"));
    assert_eq!(l.start_unix_us, Some(7));
    let host = l.host.as_ref().unwrap();
    assert_eq!(host.typed.boot_id.as_deref(), Some("b"));
    // Kept as written, the field this reader does not know too.
    assert_eq!(host.json["later"], true);
    let start = &l.clock_start.as_ref().unwrap().typed;
    assert_eq!(start.offset_bound_us, Some(40));
    assert_eq!(l.clock_end.as_ref().unwrap().typed.offset_bound_us, None);
    assert_eq!(l.abandoned.as_ref().unwrap().typed.stage, "setup");
    assert_eq!(r.time.ended_utc, "2026-12-01T00:01:00Z");
    assert_eq!((r.time.started_unix_ms, r.time.hydration_sec), (5, 1.5));
    assert_eq!(r.flows["A"].shed_backpressure, 1);
    // A record of one loader has none.
    let one = CellResult::parse(Path::new("result.json"), &record("PASS", 1)).unwrap();
    assert!(one.loaders.is_none() && one.abandoned.is_none());
}

/// A record whose checker predates the distinct count still gives it when its gap
/// examples name every gap: sitting 1's two FAILs of F7's no-delay arm lost 2 and 4
/// messages on their first hop, 12 and 24 seqs over the six streams of the flow.
#[test]
fn lost_messages_count_each_message_once() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../results/campaigns/findings");
    let read = |r: &str| CellResult::read_dir(&root.join("f7-queen-no-delay").join(r)).unwrap();
    let (r8, r9) = (read("r8"), read("r9"));
    assert_eq!(r8.verdict.totals.lost_acked, 12);
    assert_eq!(r8.verdict.lost_messages(), Some(2));
    assert_eq!(r9.verdict.totals.lost_acked, 24);
    assert_eq!(r9.verdict.lost_messages(), Some(4));
    // A PASS lost nothing.
    assert_eq!(read("r1").verdict.lost_messages(), Some(0));
}
