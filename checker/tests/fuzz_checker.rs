//! Fuzzed checker inputs (issue 17): `produced.meta` in every dialect
//! (`checker::parse_produced`) and whole record directories (`produced.meta` plus
//! stream logs) through `checker::verify_dir`.
//!
//! Every property feeds arbitrary bytes, token soups and mutations of valid inputs
//! (bit flips, inserted and deleted bytes, truncation, duplicated, dropped and swapped
//! lines, numbers swapped for huge or negative values, a field's value replaced with
//! junk) and structured records whose numbers sit on the edges (`i64::MAX`, `u64::MAX`,
//! base − 1, …). The checker must answer `Ok` or `Err`, never panic; an error names
//! the file (and, for `produced.meta`, the line); malformed log lines are reported
//! with their file and line.
//!
//! Cases per property: `CROSSBENCH_FUZZ_CASES` (default 10 000) for `produced.meta`,
//! a fifth of it for the `verify_dir` properties (each case writes and reads a record
//! directory). A longer run:
//! `CROSSBENCH_FUZZ_CASES=200000 cargo test --release --test fuzz_checker`.
//! The stream-log line parser itself gets the full count, against a model of its
//! grammar, in `checker/src/scan.rs` (`mod fuzz`).

use std::fs;
use std::path::Path;

use checker::{parse_produced, verify_dir, CheckError, Verdict, VerifyOptions};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

#[path = "support/fuzz.rs"]
mod fuzzing;
use fuzzing::{fuzz, fuzz_cases, mutate};

/// Cases of the `verify_dir` properties: a fifth of `fuzz_cases()` (2 000 by
/// default). Each case writes a record directory and reads it back (~1.5 ms in a
/// debug build); the log-line parser gets the full count in `scan.rs`.
fn record_cases() -> u32 {
    (fuzz_cases() / 5).max(1)
}

use mutate::Input;

// ---------------------------------------------------------------------------------
// produced.meta

const META_V1: &str = "# crossbench produced.meta v1
# ackErr=1 base=1 system=mem properties=4 rate=100 drain=caught-up delivery=exactly-once
# invariants deliveries=600 lanes=4 publish_native=200 publish_copied=600
# stream name=s_a flow=A ackErr=0 reconnects=1
# stream name=s_b flow=B ackErr=1
# indeterminate flow=A prop=2 seq=4 to=6
# failed flow=B prop=1 seq=3
# failed flow=A prop=3 seq=2 to=2
A 0 5
A 1 5
A 2 6
A 3 3
B 0 3
B 1 4
B 2 0
";

const META_V1_LOSS: &str = "# crossbench produced.meta v1
# ackErr=0 base=0 system=pgmq properties=3 rate=50 drain=cut-short delivery=at-least-once loss_allowed=durability-memory
# stream name=s_a flow=A
# stream name=s_b flow=S ackErr=0 reconnects=0
# indeterminate flow=S prop=0 seq=2
S 0 4
S 1 2
A 0 1
";

const META_REFERENCE: &str = "# ackErr=0 base=1 system=mem properties=4 rate=100
# invariants deliveries=600 lanes=4
A 0 4
A 1 4
B 0 3
B 1 2
";

const META_GOLOAD: &str = "# ackErr=2 producedA=10 producedB=8 base=1 ts=1700000000
A 0 5
B 0 3
A 1 -1
";

const META_SEEDS: &[&str] = &[META_V1, META_V1_LOSS, META_REFERENCE, META_GOLOAD];

const META_TOKENS: &[&str] = &[
    "\n",
    " ",
    "\t",
    "\r\n",
    "#",
    "# ",
    "=",
    "crossbench produced.meta",
    " v1",
    " v2",
    "stream",
    "indeterminate",
    "failed",
    "invariants",
    "name=",
    "flow=",
    "ackErr=",
    "reconnects=",
    "prop=",
    "seq=",
    "to=",
    "base=",
    "drain=",
    "delivery=",
    "loss_allowed=",
    "properties=",
    "producedA=",
    "caught-up",
    "grace",
    "cut-short",
    "exactly-once",
    "at-least-once",
    "A",
    "B",
    "S",
    "s_a",
    "0",
    "1",
    "-1",
    "9223372036854775807",
    "18446744073709551615",
    "18446744073709551616",
    "x",
    "é",
    "\u{0}",
];

/// What an error of `parse_produced(text, path)` must say: the path and a line of
/// the text.
fn check_meta_error(e: &CheckError, path: &Path, text: &str) -> Result<(), TestCaseError> {
    let CheckError::BadMeta {
        path: p, line: l, ..
    } = e
    else {
        return Err(TestCaseError::fail(format!(
            "parse_produced gave a non-meta error: {e}"
        )));
    };
    prop_assert_eq!(p.as_path(), path);
    let lines = text.lines().count().max(1);
    prop_assert!(*l >= 1 && *l <= lines, "line {} of {}: {}", l, lines, e);
    let shown = e.to_string();
    let prefix = format!("{}:{}: ", path.display(), l);
    prop_assert!(shown.starts_with(&prefix), "{:?} lacks {:?}", shown, prefix);
    Ok(())
}

#[test]
fn meta_seeds_parse() {
    let path = Path::new("cell/produced.meta");
    for s in META_SEEDS {
        parse_produced(s, path).unwrap_or_else(|e| panic!("{s}: {e}"));
    }
}

/// A stream's log is `<dir>/<name>.log`: a name that is a path (found by fuzzing:
/// `name=../x` made the checker read outside the record) is refused, naming the line.
#[test]
fn a_stream_name_that_is_a_path_is_refused() {
    let path = Path::new("cell/produced.meta");
    for bad in ["../x", "a/b", ".hidden"] {
        let text = META_V1.replace("name=s_a", &format!("name={bad}"));
        let e = parse_produced(&text, path).expect_err(bad).to_string();
        assert!(e.contains("cell/produced.meta:4:"), "{bad}: {e}");
        assert!(e.contains("not a plain file name"), "{bad}: {e}");
    }
}

#[test]
fn fuzz_produced_meta() {
    let path = Path::new("runs/fuzz-cell/produced.meta");
    fuzz(
        file!(),
        "produced.meta",
        fuzz_cases(),
        mutate::input(mutate::seeds(META_SEEDS), META_TOKENS),
        |input| {
            let text = input.text();
            match parse_produced(&text, path) {
                Ok(p) => {
                    prop_assert!(p.base >= 0);
                    for (flow, f) in &p.flows {
                        prop_assert!(
                            f.max_seq.windows(2).all(|w| w[0].0 < w[1].0),
                            "flow {} not sorted and unique",
                            flow
                        );
                        prop_assert!(f.max_seq.iter().all(|&(_, m)| m >= p.base));
                    }
                    for i in &p.indeterminate {
                        prop_assert!(i.seq >= 0 && i.to >= i.seq);
                    }
                    for f in &p.failed {
                        prop_assert!(f.seq >= 0 && f.to >= f.seq);
                    }
                }
                Err(e) => check_meta_error(&e, path, &text)?,
            }
            Ok(())
        },
    );
}

// ---------------------------------------------------------------------------------
// Whole record directories through verify_dir

/// Log files every case writes (the v1 seeds' streams and the reference's first two).
const LOG_NAMES: [&str; 4] = ["s_a", "s_b", "cm-avail_cm-db", "cm-prices_cm-cal"];

const LOG_A: &str =
    "0,1\n1,1\n0,2\n2,1\n0,3\n1,2\n1,3\n2,2\n0,4\n3,1\n0,5\n1,4\n1,5\n2,3\n2,5\n2,4\n";
const LOG_B: &str = "0,1\n0,2\n1,1\n1,2\n0,3\n1,3\n1,4\n1,3\n0,0\n";
const LOG_SEEDS: &[&str] = &[LOG_A, LOG_B, "0,0\n0,1\n0,2\n0,3\n0,4\n1,0\n1,1\n1,2"];

const LOG_TOKENS: &[&str] = &[
    "\n",
    ",",
    "0",
    "1",
    "-",
    " ",
    "\r",
    "\r\n",
    "a",
    "00",
    "9223372036854775807",
    "9223372036854775808",
    "18446744073709551615",
    "18446744073709551616",
    "1,1\n",
    "0,0\n",
    "\u{0}",
    "é",
];

/// A record directory: the meta (absent when `None`) and the two logs' contents.
#[derive(Debug, Clone)]
struct Record {
    meta: Option<Input>,
    log_a: Input,
    log_b: Input,
}

fn log_input() -> impl Strategy<Value = Input> {
    prop_oneof![
        1 => Just(Input(LOG_A.as_bytes().to_vec())),
        8 => mutate::input(mutate::seeds(LOG_SEEDS), LOG_TOKENS),
    ]
}

fn fuzzed_record() -> impl Strategy<Value = Record> {
    let meta = prop_oneof![
        1 => Just(None),
        3 => prop::sample::select(META_SEEDS).prop_map(|s| Some(Input(s.as_bytes().to_vec()))),
        6 => mutate::input(mutate::seeds(META_SEEDS), META_TOKENS).prop_map(Some),
    ];
    (meta, log_input(), log_input()).prop_map(|(meta, log_a, log_b)| Record { meta, log_a, log_b })
}

/// Seqs on the edges: small ones around the bases, and the top of the range.
fn edge_seq() -> impl Strategy<Value = i64> {
    prop_oneof![
        8 => 0i64..8,
        1 => Just(i64::MAX),
        1 => Just(i64::MAX - 1),
        1 => (i64::MAX - 3)..=i64::MAX,
        1 => 0i64..=i64::MAX,
    ]
}

/// The one unusual property of a record's palette: mostly small, sometimes on the
/// scanner's dense/sparse boundaries (those cost megabytes of state, so they are
/// rare) or at the top of the range.
fn edge_prop() -> impl Strategy<Value = u64> {
    prop_oneof![
        50 => 0u64..8,
        1 => prop::sample::select(&[(1u64 << 20) - 1, 1 << 20][..]),
        3 => Just(1u64 << 24),
        3 => Just(u64::MAX),
        3 => (1u64 << 40)..=u64::MAX,
    ]
}

/// A well-formed record whose numbers sit on the edges: every header and data line
/// is grammatical, so the judging code (not the parser) meets the extremes.
fn edge_record() -> impl Strategy<Value = Record> {
    let flow = || prop::sample::select(&["A", "B"][..]);
    let base = prop_oneof![4 => 0i64..=1, 1 => Just(i64::MAX), 1 => Just(i64::MAX - 1), 1 => 0i64..=i64::MAX];
    // Records name properties by index into a palette of four, so that data lines,
    // ranges and log lines meet on the same properties.
    let palette = (0u64..4, 0u64..4, 0u64..4, edge_prop());
    let pick = || 0usize..4;
    let data = prop::collection::vec(
        (
            flow(),
            pick(),
            prop_oneof![5 => edge_seq(), 1 => Just(-1i64)],
        ),
        0..6,
    );
    let range = || {
        prop::collection::vec(
            (
                flow(),
                pick(),
                edge_seq(),
                prop_oneof![3 => 0i64..4, 1 => 0i64..=i64::MAX],
            ),
            0..3,
        )
    };
    let header = (
        prop::sample::select(&["caught-up", "grace", "cut-short", ""][..]),
        prop::sample::select(&["exactly-once", "at-least-once", ""][..]),
        any::<bool>(),
        0u64..3,
        0u64..3,
        prop::sample::select(&["v1", "reference"][..]),
    );
    let logs = || prop::collection::vec((pick(), edge_seq()), 0..24);
    (
        palette,
        base,
        data,
        range(),
        range(),
        header,
        logs(),
        logs(),
    )
        .prop_map(
            |(
                (p0, p1, p2, p3),
                base,
                data,
                indet,
                failed,
                (drain, delivery, loss, ack_a, reconnects_b, dialect),
                la,
                lb,
            )| {
                let pal = [p0, p1, p2, p3];
                let mut m = String::new();
                if dialect == "v1" {
                    m.push_str("# crossbench produced.meta v1\n");
                }
                m.push_str(&format!(
                    "# ackErr={} base={base} system=mem properties=4",
                    ack_a
                ));
                if !drain.is_empty() {
                    m.push_str(&format!(" drain={drain}"));
                }
                if !delivery.is_empty() {
                    m.push_str(&format!(" delivery={delivery}"));
                }
                if loss {
                    m.push_str(" loss_allowed=fuzz");
                }
                m.push('\n');
                if dialect == "v1" {
                    m.push_str(&format!("# stream name=s_a flow=A ackErr={ack_a}\n"));
                    m.push_str(&format!(
                        "# stream name=s_b flow=B reconnects={reconnects_b}\n"
                    ));
                }
                for (f, p, s, len) in &indet {
                    m.push_str(&format!(
                        "# indeterminate flow={f} prop={} seq={s} to={}\n",
                        pal[*p],
                        s.saturating_add(*len)
                    ));
                }
                for (f, p, s, len) in &failed {
                    m.push_str(&format!(
                        "# failed flow={f} prop={} seq={s} to={}\n",
                        pal[*p],
                        s.saturating_add(*len)
                    ));
                }
                let mut seen = std::collections::BTreeSet::new();
                for (f, p, max) in &data {
                    if seen.insert((*f, pal[*p])) {
                        m.push_str(&format!("{f} {} {max}\n", pal[*p]));
                    }
                }
                let log = |v: &[(usize, i64)]| {
                    Input(
                        v.iter()
                            .map(|(p, s)| format!("{},{s}\n", pal[*p]))
                            .collect::<String>()
                            .into_bytes(),
                    )
                };
                Record {
                    meta: Some(Input(m.into_bytes())),
                    log_a: log(&la),
                    log_b: log(&lb),
                }
            },
        )
}

/// Invariants every verdict keeps, whatever the input.
fn check_verdict(v: &Verdict, logs: &[&[u8]; 2]) -> Result<(), TestCaseError> {
    prop_assert!(v.malformed.len() <= 100);
    prop_assert!(v.malformed_count >= v.malformed.len() as u64);
    if v.malformed_count > 0 {
        prop_assert!(!v.pass);
    }
    for m in &v.malformed {
        // A malformed line names its file and its 1-based line.
        prop_assert!(m.file.ends_with(".log") && m.line >= 1, "{:?}", m);
        if let Some(i) = LOG_NAMES.iter().position(|n| m.file == format!("{n}.log")) {
            let lines = logs[i % 2].split(|&c| c == b'\n').count() as u64;
            prop_assert!(m.line <= lines, "{:?} of {} lines", m, lines);
        }
    }
    for s in &v.streams {
        prop_assert_eq!(s.delivered, s.unique + s.duplicates, "{}", s.name);
    }
    serde_json::to_string(v).map_err(|e| TestCaseError::fail(format!("verdict JSON: {e}")))?;
    Ok(())
}

/// Give `path` the content `bytes` ([`fuzzing::rewrite`], in place), or no file at all
/// (`None`).
fn rewrite(path: &Path, bytes: Option<&[u8]>) {
    match bytes {
        Some(bytes) => fuzzing::rewrite(path, bytes),
        None => {
            let _ = fs::remove_file(path);
        }
    }
}

fn run_record(dir: &Path, r: &Record) -> Result<(), TestCaseError> {
    let meta_path = dir.join("produced.meta");
    rewrite(&meta_path, r.meta.as_ref().map(|m| m.0.as_slice()));
    for (i, n) in LOG_NAMES.iter().enumerate() {
        let content = if i % 2 == 0 { &r.log_a.0 } else { &r.log_b.0 };
        rewrite(&dir.join(format!("{n}.log")), Some(content));
    }
    let opts = VerifyOptions {
        threads: 1,
        ..VerifyOptions::default()
    };
    match verify_dir(dir, &opts) {
        Ok(v) => check_verdict(&v, &[&r.log_a.0, &r.log_b.0])?,
        Err(e) => {
            let shown = e.to_string();
            match &e {
                CheckError::BadMeta { .. } => {
                    let text =
                        String::from_utf8_lossy(&r.meta.as_ref().expect("a meta").0).into_owned();
                    check_meta_error(&e, &meta_path, &text)?;
                }
                CheckError::Io { .. } | CheckError::NotACell { .. } => {
                    let d = dir.display().to_string();
                    prop_assert!(shown.contains(&d), "{:?} does not name {:?}", shown, d);
                }
                other => return Err(TestCaseError::fail(format!("unexpected error: {other}"))),
            }
        }
    }
    Ok(())
}

#[test]
fn fuzz_verify_dir_with_fuzzed_records() {
    let dir = tempfile::tempdir().expect("tempdir");
    fuzz(
        file!(),
        "verify_dir (mutated records)",
        record_cases(),
        fuzzed_record(),
        |r| run_record(dir.path(), &r),
    );
}

#[test]
fn fuzz_verify_dir_with_edge_records() {
    let dir = tempfile::tempdir().expect("tempdir");
    fuzz(
        file!(),
        "verify_dir (edge records)",
        record_cases(),
        edge_record(),
        |r| run_record(dir.path(), &r),
    );
}

/// The panics the edge records found (`attempt to add with overflow` in
/// `scan.rs`'s judging and `lib.rs`'s totals), pinned: counts of seq ranges that
/// reach `i64::MAX` saturate instead of overflowing.
#[test]
fn seq_ranges_at_the_top_of_i64_do_not_overflow() {
    let dir = tempfile::tempdir().expect("tempdir");
    let max = i64::MAX;
    let record = |meta: String, log_a: String| Record {
        meta: Some(Input(meta.into_bytes())),
        log_a: Input(log_a.into_bytes()),
        log_b: Input(Vec::new()),
    };
    let head = |base: i64| {
        format!(
            "# crossbench produced.meta v1\n# ackErr=0 base={base} drain=caught-up\n\
             # stream name=s_a flow=A\n# stream name=s_b flow=B\n"
        )
    };
    let verdict = |r: &Record| {
        run_record(dir.path(), r).expect("invariants hold");
        verify_dir(dir.path(), &VerifyOptions::default()).expect("a verdict")
    };
    // Two never-delivered properties of 2^63 seqs each: the tail saturates.
    let v = verdict(&record(
        format!("{}A 0 {max}\nA 1 {max}\n", head(0)),
        String::new(),
    ));
    assert_eq!(v.streams[0].lost_tail, u64::MAX);
    assert_eq!(v.totals.lost_acked, u64::MAX);
    // base = i64::MAX, its one seq delivered: nothing above it, nothing lost.
    let v = verdict(&record(
        format!("{}A 0 {max}\n", head(max)),
        format!("0,{max}\n"),
    ));
    let s = &v.streams[0];
    assert_eq!((s.delivered, s.phantoms, s.lost_tail, s.gaps), (1, 0, 0, 0));
    // A frontier of i64::MAX: every seq between 1 and it is a gap, no tail.
    let v = verdict(&record(
        format!("{}A 0 {max}\n", head(1)),
        format!("0,1\n0,{max}\n"),
    ));
    let s = &v.streams[0];
    assert_eq!((s.gaps, s.lost_tail), (max as u64 - 2, 0));
}
