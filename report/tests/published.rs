//! Every published cell file loads and validates; the groups the issue lists are
//! all there; disagreements keep every value with its source; each reproduction
//! command names a scenario that exists. Bad files are refused naming the field.

mod common;

use std::path::{Path, PathBuf};

use report::published::{self, load, load_dir};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../results/published")
}

#[test]
fn every_published_file_loads_and_validates() {
    let cells = load_dir(&dir()).unwrap();
    let files = std::fs::read_dir(dir())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "yaml")
        })
        .count();
    assert_eq!(cells.len(), files);
    let mut ids: Vec<&str> = cells.iter().map(|c| c.id.as_str()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), cells.len(), "ids are unique");
    for group in [
        "cross-broker-matrix",
        "cardinality-p20000",
        "kafka-partition-wall",
        "pgmq-ordered-consume-ceiling",
        "queen-repeatability",
        "fair-matrix-8core",
        "seed-001-headline",
        "seed-002-headline",
    ] {
        assert!(
            cells.iter().any(|c| c.group == group),
            "group {group} missing"
        );
    }
    for c in &cells {
        if let Some(s) = &c.reproduce.scenario {
            let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(s);
            assert!(p.is_file(), "{}: scenario {s} does not exist", c.id);
        }
    }
}

#[test]
fn the_matrix_has_all_eight_cells_with_their_figures() {
    let cells = load_dir(&dir()).unwrap();
    let mx: Vec<_> = cells
        .iter()
        .filter(|c| c.group == "cross-broker-matrix")
        .collect();
    assert_eq!(mx.len(), 8);
    let q = published::find(&dir(), "MX-queen-dense").unwrap();
    assert_eq!(q.figures.cores, Some(16.04));
    assert_eq!(q.figures.deliveries_per_sec, Some(69110.0));
    assert_eq!(q.shape.rate_per_sec, Some(12000.0));
}

#[test]
fn disagreements_between_sources_are_recorded_not_resolved_silently() {
    for (id, stored, reported) in [
        ("HOLHI-kafka-200", 4194.3, 4987.9),
        ("HOL-kafka-1k", 14107.9, 12937.0),
    ] {
        let c = published::find(&dir(), id).unwrap();
        let d = c
            .disagreements
            .iter()
            .find(|d| d.figure == "p95_ms")
            .unwrap();
        let values: Vec<f64> = d.values.iter().map(|v| v.value).collect();
        assert!(
            values.contains(&stored) && values.contains(&reported),
            "{id}: {values:?}"
        );
        assert!(
            d.values.iter().any(|v| v.source.file.starts_with("seeds/")),
            "{id}: the seed's value is kept too"
        );
        assert_eq!(c.figures.p95_ms, Some(stored));
    }
}

#[test]
fn bad_published_files_are_refused_naming_the_field() {
    let tmp = tempfile::tempdir().unwrap();
    let good = std::fs::read_to_string(dir().join("MX-pgmq-sparse.yaml")).unwrap();
    let cases = [
        ("schema_version: 1", "schema_version: 2", "schema_version"),
        ("p95_ms: 65.5", "p95_ms: 5.5", "figures.p95_ms"),
        ("system: pgmq", "system: pgmqq", "system"),
        ("verdict: PASS", "verdict: GREAT", "figures.verdict"),
        (
            "file: crossbench-go-digest.md",
            "file: elsewhere.md",
            "sources[0]",
        ),
    ];
    for (from, to, field) in cases {
        let p = tmp.path().join("MX-pgmq-sparse.yaml");
        std::fs::write(&p, good.replacen(from, to, 1)).unwrap();
        let err = load(&p).unwrap_err();
        assert!(
            err.to_string().contains(&format!("field `{field}`")),
            "{from} → {to}: {err}"
        );
    }
    let p = tmp.path().join("other-name.yaml");
    std::fs::write(&p, &good).unwrap();
    assert!(load(&p).unwrap_err().to_string().contains("field `id`"));
    std::fs::write(
        tmp.path().join("MX-pgmq-sparse.yaml"),
        good.replace("group:", "groop:"),
    )
    .unwrap();
    let err = load(&tmp.path().join("MX-pgmq-sparse.yaml")).unwrap_err();
    assert!(
        err.to_string().contains("groop"),
        "unknown fields are refused: {err}"
    );
}
