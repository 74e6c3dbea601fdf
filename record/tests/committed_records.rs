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
