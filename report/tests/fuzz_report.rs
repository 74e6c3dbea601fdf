//! Fuzzed report inputs (issue 17): `.hlog` interval logs through
//! `report::latency_log::merged` (the reader behind every CDF plot) and published
//! cells through `report::published::load`.
//!
//! Every property feeds arbitrary bytes, token soups and mutations of valid inputs
//! (bit flips, inserted and deleted bytes, truncation, duplicated, dropped and swapped
//! lines, numbers swapped for huge or negative values, a field's value replaced with
//! junk). The `.hlog` properties also encode histograms whose binary headers are
//! mutated (lengths, bounds, digits, counts) before base64, so the fuzzing reaches
//! the histogram decoder, not only the line grammar. Each case is written to one file
//! of a temporary directory, reused. The readers must answer `Ok` or `Err`, never
//! panic, and an error names the file (a published cell's error also the field).
//!
//! Cases per property: `CROSSBENCH_FUZZ_CASES` (default 10 000). A longer run:
//! `CROSSBENCH_FUZZ_CASES=200000 cargo test --release --test fuzz_report`.

use std::path::Path;
use std::time::{Duration, UNIX_EPOCH};

use base64::Engine;
use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use hdrhistogram::serialization::{Serializer, V2DeflateSerializer, V2Serializer};
use hdrhistogram::Histogram;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use report::latency_log;

#[path = "../../checker/tests/support/fuzz.rs"]
mod fuzzing;
use fuzzing::{fuzz, fuzz_cases, mutate, rewrite};

use mutate::Input;

// ---------------------------------------------------------------------------------
// .hlog interval logs

/// A real record's log (crossbench run, Queen, 2026-11-30).
const REAL_HLOG: &str = include_str!("../../results/runs/2026-11-30-queen-claims/qst-2-1/e2e.hlog");

/// The real log cut to its header, its first intervals and its largest ones (the
/// whole log decodes ~80 histograms, too many per case).
fn real_hlog_cut() -> Vec<u8> {
    let lines: Vec<&str> = REAL_HLOG.lines().collect();
    let mut out: Vec<&str> = lines.iter().take(10).copied().collect();
    let mut big: Vec<&str> = lines
        .iter()
        .filter(|l| l.starts_with("Tag="))
        .copied()
        .collect();
    big.sort_by_key(|l| std::cmp::Reverse(l.len()));
    out.extend(big.into_iter().take(3));
    let mut s = out.join("\n");
    s.push('\n');
    s.into_bytes()
}

/// A histogram of every shape the decoder meets: a few values, values near the top
/// of the range, many distinct values.
fn histograms() -> Vec<Histogram<u64>> {
    let mut small = Histogram::<u64>::new(3).unwrap();
    for v in [1u64, 2, 3, 1000, 1000, 250_000] {
        small.record(v).unwrap();
    }
    let mut top = Histogram::<u64>::new_with_bounds(1, u64::MAX, 2).unwrap();
    top.record(u64::MAX).unwrap();
    top.record_n(1 << 62, 7).unwrap();
    let mut wide = Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3).unwrap();
    for i in 0..200u64 {
        wide.record_n(i * i * 997 + 1, i + 1).unwrap();
    }
    vec![Histogram::<u64>::new(3).unwrap(), small, top, wide]
}

/// A log written by hdrhistogram's own writer: two tags, comments, start and base
/// times, the histograms above in both encodings' compressed form.
fn written_hlog() -> Vec<u8> {
    let start = UNIX_EPOCH + Duration::from_millis(1_700_000_000_123);
    let mut out = Vec::new();
    let mut ser = V2DeflateSerializer::new();
    {
        let mut b = IntervalLogWriterBuilder::new();
        b.add_comment("crossbench interval log")
            .add_comment("values in microseconds")
            .with_start_time(start)
            .with_base_time(start);
        let mut w = b.begin_log_with(&mut out, &mut ser).unwrap();
        for (i, h) in histograms().iter().enumerate() {
            for tag in ["A", "B"] {
                w.write_histogram(
                    h,
                    Duration::from_millis(1000 * i as u64 + 7),
                    Duration::from_secs(1),
                    Tag::new(tag),
                )
                .unwrap();
            }
        }
    }
    out
}

/// The histograms' binary encodings (uncompressed V2, whose header and counts a
/// mutation can reach, and compressed V2).
fn encoded_histograms() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for h in histograms() {
        let mut v = Vec::new();
        V2Serializer::new().serialize(&h, &mut v).unwrap();
        out.push(v);
        let mut c = Vec::new();
        V2DeflateSerializer::new().serialize(&h, &mut c).unwrap();
        out.push(c);
    }
    out
}

const HLOG_TOKENS: &[&str] = &[
    "\n",
    "\r\n",
    ",",
    ".",
    "#",
    "#[StartTime: ",
    "#[BaseTime: ",
    " (seconds since epoch)]\n",
    "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"\n",
    "Tag=",
    "Tag=A,",
    "Tag=B,",
    "Tag=,",
    "0.000",
    "1.000",
    "18446744073709551615.999999999",
    "18446744073709551616.0",
    "1796027458.370",
    "1e308",
    "NaN",
    "HISTFAAAA",
    "HISTEwAAA",
    "====",
    "A",
    "é",
    "\u{0}",
];

/// One binary edit of an encoded histogram: a header field set to an edge value, or
/// a byte anywhere changed.
#[derive(Debug, Clone)]
enum HistOp {
    /// Overwrite `len` bytes at `at` with `value`'s big-endian bytes (header fields:
    /// cookie 0..4, payload length 4..8, offset 8..12, digits 12..16, low 16..24,
    /// high 24..32, ratio 32..40).
    Field {
        at: usize,
        len: usize,
        value: u64,
    },
    Byte(usize, u8),
    /// `n` bytes from `at` of the payload (after the 40-byte header) set to `byte`
    /// (nine 0xff are the largest varint).
    Fill {
        at: usize,
        n: usize,
        byte: u8,
    },
    Truncate(usize),
    Append(Vec<u8>),
}

fn hist_op() -> impl Strategy<Value = HistOp> {
    let field = prop::sample::select(
        &[
            (0usize, 4usize),
            (4, 4),
            (8, 4),
            (12, 4),
            (16, 8),
            (24, 8),
            (32, 8),
        ][..],
    );
    let value = prop_oneof![
        Just(0u64),
        Just(1),
        Just(2),
        Just(5),
        Just(6),
        Just(0xff),
        Just(0x7fff_ffff),
        Just(0xffff_ffff),
        Just(1 << 32),
        Just(i64::MAX as u64),
        Just(u64::MAX),
        Just(0x1c84_9303),
        Just(0x1c84_9304),
        Just(1.0f64.to_bits()),
        any::<u64>(),
    ];
    prop_oneof![
        3 => (field, value).prop_map(|((at, len), value)| HistOp::Field { at, len, value }),
        3 => (any::<usize>(), any::<u8>()).prop_map(|(i, b)| HistOp::Byte(i, b)),
        2 => (any::<usize>(), prop_oneof![1usize..9, 9usize..12], prop::sample::select(&[0u8, 0x7f, 0x80, 0xff, 0xff, 0xff][..]))
            .prop_map(|(at, n, byte)| HistOp::Fill { at, n, byte }),
        1 => any::<usize>().prop_map(HistOp::Truncate),
        1 => prop::collection::vec(any::<u8>(), 1..12).prop_map(HistOp::Append),
    ]
}

fn apply_hist(mut b: Vec<u8>, ops: &[HistOp]) -> Vec<u8> {
    for op in ops {
        match op {
            HistOp::Field { at, len, value } => {
                // hdrhistogram allocates the payload length a header claims before it
                // reads the payload (up to 4 GiB): cap it at 1 MiB so a case stays
                // cheap and the test cannot exhaust a CI machine's memory.
                let value = if *at == 4 { value & 0xf_ffff } else { *value };
                let bytes = value.to_be_bytes();
                for (k, i) in (*at..at + len).enumerate() {
                    if let Some(x) = b.get_mut(i) {
                        *x = bytes[8 - len + k];
                    }
                }
            }
            HistOp::Byte(i, v) => {
                if !b.is_empty() {
                    let n = b.len();
                    b[i % n] = *v;
                }
            }
            HistOp::Fill { at, n, byte } => {
                if b.len() > 40 {
                    let s = 40 + at % (b.len() - 40);
                    let e = (s + n).min(b.len());
                    b[s..e].fill(*byte);
                }
            }
            HistOp::Truncate(i) => b.truncate(i % (b.len() + 1)),
            HistOp::Append(v) => b.extend_from_slice(v),
        }
    }
    b
}

/// A log of one or two intervals whose histograms are mutated encodings.
fn binary_hlog() -> impl Strategy<Value = Input> {
    let one = (
        prop::sample::select(encoded_histograms()),
        prop::collection::vec(hist_op(), 0..4),
        // Mostly the tag `window` asks for: other intervals are skipped undecoded.
        prop::sample::select(&["A", "A", "A", "A", "B", ""][..]),
        prop_oneof![3 => 0u64..5, 1 => Just(u64::MAX), 1 => any::<u64>()],
    );
    (
        prop::collection::vec(one, 1..3),
        prop_oneof![3 => Just(1_700_000_000u64), 1 => Just(u64::MAX), 1 => any::<u64>()],
    )
        .prop_map(|(intervals, base)| {
            let mut s = format!(
                "#[StartTime: {base}.123 (seconds since epoch)]\n#[BaseTime: {base}.123 (seconds since epoch)]\n"
            );
            for (enc, ops, tag, at) in intervals {
                let b64 = base64::engine::general_purpose::STANDARD.encode(apply_hist(enc, &ops));
                let tag = if tag.is_empty() { String::new() } else { format!("Tag={tag},") };
                s.push_str(&format!("{tag}{at}.500,1.000,12.000,{b64}\n"));
            }
            Input(s.into_bytes())
        })
}

/// The arguments `merged` gets besides the file: a tag and the window's bounds.
fn window() -> impl Strategy<Value = (&'static str, Option<i64>, Option<i64>)> {
    // Mostly unbounded: intervals outside the window are skipped undecoded.
    let bound = prop_oneof![
        12 => Just(None),
        1 => Just(Some(0i64)),
        1 => Just(Some(1_700_000_000_000i64)),
        1 => Just(Some(i64::MIN)),
        1 => Just(Some(i64::MAX)),
        1 => any::<i64>().prop_map(Some),
    ];
    (
        prop::sample::select(&["A", "A", "A", "B", "", "C"][..]),
        bound.clone(),
        bound,
    )
}

/// hdrhistogram's decoder panics on some corrupt counts in a debug build, and
/// `merged` turns that panic into an error; keep the default hook's message for
/// every other panic only, so the output shows real failures.
fn quiet_decoder_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !info
                .location()
                .is_some_and(|l| l.file().contains("hdrhistogram"))
            {
                default(info);
            }
        }));
    });
}

fn check_merged(
    path: &Path,
    tag: &str,
    from: Option<i64>,
    to: Option<i64>,
) -> Result<(), TestCaseError> {
    match latency_log::merged(path, tag, from, to) {
        Ok(h) => {
            // What the plots read next.
            if !h.is_empty() {
                prop_assert!(h.min() <= h.max());
                let _ = h.value_at_quantile(0.99);
            }
        }
        Err(e) => {
            let shown = e.to_string();
            let p = path.display().to_string();
            prop_assert!(shown.contains(&p), "{:?} does not name {:?}", shown, p);
        }
    }
    Ok(())
}

#[test]
fn hlog_seeds_merge() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("e2e.hlog");
    for seed in [real_hlog_cut(), written_hlog()] {
        rewrite(&path, &seed);
        let h = latency_log::merged(&path, "A", None, None).unwrap();
        assert!(!h.is_empty(), "{}", String::from_utf8_lossy(&seed));
    }
}

/// The panic the histogram property found (`overflow when adding durations` in
/// `latency_log::merged`), pinned: an interval starting past Duration's range is an
/// error naming the file.
#[test]
fn an_interval_start_out_of_range_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("e2e.hlog");
    rewrite(
        &path,
        b"#[BaseTime: 1700000000.123 (seconds since epoch)]\n\
          Tag=A,18446744073709551615.500,1.000,12.000,HISTEwAAAAEAAAAAAAAAAwAAAAAAAAABAAAAAAAAAAI/8AAAAAAAAAA=\n",
    );
    let e = latency_log::merged(&path, "A", None, None)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(&path.display().to_string()) && e.contains("out of range"),
        "{e}"
    );
}

/// The second panic it found (`attempt to negate with overflow` in hdrhistogram's
/// decoder, debug builds), pinned: nine 0xff bytes where a count starts are an
/// error naming the file.
#[test]
fn a_count_of_i64_min_is_an_error() {
    quiet_decoder_panics();
    let mut h = Histogram::<u64>::new(3).unwrap();
    for v in [1u64, 2, 3, 1000, 1000, 250_000] {
        h.record(v).unwrap();
    }
    let mut enc = Vec::new();
    V2Serializer::new().serialize(&h, &mut enc).unwrap();
    enc[40..49].fill(0xff);
    let b64 = base64::engine::general_purpose::STANDARD.encode(&enc);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("e2e.hlog");
    rewrite(
        &path,
        format!("Tag=A,0.500,1.000,12.000,{b64}\n").as_bytes(),
    );
    let e = latency_log::merged(&path, "A", None, None)
        .unwrap_err()
        .to_string();
    assert!(e.contains(&path.display().to_string()), "{e}");
}

#[test]
fn fuzz_hlog_text() {
    quiet_decoder_panics();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("e2e.hlog");
    let seeds = vec![real_hlog_cut(), written_hlog()];
    fuzz(
        file!(),
        ".hlog (text)",
        fuzz_cases(),
        (mutate::input(seeds, HLOG_TOKENS), window()),
        |(input, (tag, from, to))| {
            rewrite(&path, &input.0);
            check_merged(&path, tag, from, to)
        },
    );
}

#[test]
fn fuzz_hlog_histograms() {
    quiet_decoder_panics();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("e2e.hlog");
    fuzz(
        file!(),
        ".hlog (histogram encodings)",
        fuzz_cases(),
        (binary_hlog(), window()),
        |(input, (tag, from, to))| {
            rewrite(&path, &input.0);
            check_merged(&path, tag, from, to)
        },
    );
}

// ---------------------------------------------------------------------------------
// Published cells

/// Published cells: one with figures and sources, one with a disagreement, one that
/// cannot be reproduced here.
const PUBLISHED: &[(&str, &str)] = &[
    (
        "FM-kafka-1000",
        include_str!("../../results/published/FM-kafka-1000.yaml"),
    ),
    (
        "HOL-kafka-1k",
        include_str!("../../results/published/HOL-kafka-1k.yaml"),
    ),
    (
        "TP-pulsar-2m",
        include_str!("../../results/published/TP-pulsar-2m.yaml"),
    ),
];

const PUBLISHED_TOKENS: &[&str] = &[
    "\n",
    "  ",
    ": ",
    "- ",
    "#",
    "~",
    "null",
    "[]",
    "{}",
    "[",
    "{",
    "'",
    "\"",
    "&a ",
    "*a",
    "!!binary ",
    "!!float ",
    "<<: ",
    "---\n",
    "...\n",
    "|\n",
    ">-\n",
    "schema_version",
    "id",
    "system",
    "shape",
    "figures",
    "sources",
    "disagreements",
    "values",
    "value",
    "reproduce",
    "scenario",
    "sets",
    "scaled",
    "not_here",
    "p50_ms",
    "p99_ms",
    "served_pct",
    "verdict",
    "PASS",
    "kafka",
    "redpanda",
    "crossbench-go-digest.md",
    "seeds/x.txt",
    "1",
    "-1",
    ".nan",
    "-.inf",
    "1e400",
    "18446744073709551616",
    "true",
    "é",
    "\t",
    "\u{0}",
];

#[test]
fn published_seeds_load() {
    let dir = tempfile::tempdir().unwrap();
    for (id, text) in PUBLISHED {
        let path = dir.path().join(format!("{id}.yaml"));
        rewrite(&path, text.as_bytes());
        report::published::load(&path).unwrap();
    }
}

#[test]
fn fuzz_published_cells() {
    let dir = tempfile::tempdir().unwrap();
    let seeds: Vec<&str> = PUBLISHED.iter().map(|(_, t)| *t).collect();
    fuzz(
        file!(),
        "published cell",
        fuzz_cases(),
        (
            mutate::input(mutate::seeds(&seeds), PUBLISHED_TOKENS),
            0..PUBLISHED.len(),
        ),
        |(input, which)| {
            // Named as a seed's id, so that a mutated file can pass the id check.
            let path = dir.path().join(format!("{}.yaml", PUBLISHED[which].0));
            rewrite(&path, &input.0);
            match report::published::load(&path) {
                Ok(cell) => {
                    prop_assert_eq!(cell.id.as_str(), PUBLISHED[which].0);
                    let _ = cell.reproduce.command();
                }
                Err(e) => {
                    let shown = e.to_string();
                    let p = path.display().to_string();
                    prop_assert!(shown.contains(&p), "{:?} does not name {:?}", shown, p);
                    if let report::ReportError::BadPublished { field, .. } = &e {
                        prop_assert!(!field.is_empty());
                        let named = format!("field `{field}`");
                        prop_assert!(shown.contains(&named), "{:?} lacks {:?}", shown, named);
                    }
                }
            }
            Ok(())
        },
    );
}
