//! The reference verifier's pinned cases (verify_test.go), adapted to crossbench's rules, plus
//! format and edge cases.

use std::fs;
use std::path::Path;

use checker::{
    read_produced, reference_streams, verify_dir, CheckError, DrainOutcome, MetaFormat,
    StreamVerdict, Verdict, VerifyOptions,
};

const S1: &str = "t_g1";
const S2: &str = "t_g2";

fn opts() -> VerifyOptions {
    VerifyOptions {
        threads: 2,
        ..Default::default()
    }
}

/// v1 meta: streams S1, S2 on flow A; `data` = data lines.
fn meta(base: i64, drain: &str, acks: (u64, u64), extra: &str, data: &str) -> String {
    format!(
        "# crossbench produced.meta v1\n\
         # ackErr={} base={base} system=mem properties=2 rate=10 drain={drain} delivery=exactly-once\n\
         # invariants deliveries=60 lanes=3 publish_native=20 publish_copied=60\n\
         # stream name={S1} flow=A ackErr={}\n\
         # stream name={S2} flow=A ackErr={}\n{extra}{data}",
        acks.0 + acks.1,
        acks.0,
        acks.1
    )
}

fn write(dir: &Path, name: &str, body: &str) {
    fs::write(dir.join(name), body).unwrap();
}

fn lines(pairs: &[(u64, i64)]) -> String {
    pairs.iter().map(|(p, s)| format!("{p},{s}\n")).collect()
}

/// Run with S1's log = `s1`, S2 clean (prop 1 seqs 1..=max1).
fn run_with(meta_text: &str, s1: &str, max1: i64, o: &VerifyOptions) -> Verdict {
    let d = tempfile::tempdir().unwrap();
    write(d.path(), "produced.meta", meta_text);
    write(d.path(), &format!("{S1}.log"), s1);
    let clean: Vec<(u64, i64)> = (1..=max1).map(|s| (1, s)).collect();
    write(d.path(), &format!("{S2}.log"), &lines(&clean));
    let v = verify_dir(d.path(), o).unwrap();
    // Always serialisable and renderable.
    let j = serde_json::to_value(&v).unwrap();
    assert_eq!(j["schema_version"], 1);
    assert!(v.render_table().contains("VERDICT"));
    v
}

fn s1(v: &Verdict) -> &StreamVerdict {
    &v.streams[0]
}

#[test]
fn clean_stream_passes_with_counts() {
    let m = meta(1, "caught-up", (0, 0), "", "A 1 3\n");
    let v = run_with(&m, &lines(&[(1, 1), (1, 2), (1, 3)]), 3, &opts());
    assert!(v.pass, "{:?}", v.reasons);
    let s = s1(&v);
    assert_eq!((s.delivered, s.unique, s.properties_seen), (3, 3, 1));
    assert_eq!(
        (s.gaps, s.duplicates, s.order_violations, s.lost_tail),
        (0, 0, 0, 0)
    );
    assert_eq!(s.label, "PASS");
    assert!(!v.cut_short);
    assert_eq!(v.totals.delivered, 6);
}

#[test]
fn skipped_seq_is_one_gap_and_fails() {
    let m = meta(1, "caught-up", (0, 0), "", "A 1 3\n");
    let v = run_with(&m, &lines(&[(1, 1), (1, 3)]), 3, &opts());
    assert!(!v.pass);
    assert_eq!(s1(&v).gaps, 1);
    assert_eq!(s1(&v).label, "FAIL");
    assert!(v.reasons[0].starts_with("t_g1: 1 gap"), "{:?}", v.reasons);
}

#[test]
fn missing_tail_is_in_flight_when_cut_short_and_lost_otherwise() {
    let body = lines(&[(1, 1), (1, 2), (1, 3)]);
    let m = meta(1, "cut-short", (0, 0), "", "A 1 5\n");
    let v = run_with(&m, &body, 5, &opts());
    assert!(v.pass, "{:?}", v.reasons);
    assert!(v.cut_short);
    assert_eq!((s1(&v).in_flight, s1(&v).lost_tail), (2, 0));
    assert_eq!(s1(&v).label, "PASS(in-flight)");
    assert!(v.reasons.iter().any(|r| r.contains("cut short")));

    for drain in ["grace", "caught-up"] {
        let m = meta(1, drain, (0, 0), "", "A 1 5\n");
        let v = run_with(&m, &body, 5, &opts());
        assert!(!v.pass);
        assert_eq!((s1(&v).in_flight, s1(&v).lost_tail), (0, 2));
        assert!(v.reasons[0].contains("2 lost in tail"), "{:?}", v.reasons);
    }
}

#[test]
fn duplicate_fails_unless_allowed() {
    let body = lines(&[(1, 1), (1, 2), (1, 2), (1, 3)]);
    let m = meta(1, "caught-up", (0, 0), "", "A 1 3\n");
    let v = run_with(&m, &body, 3, &opts());
    assert!(!v.pass);
    assert_eq!((s1(&v).duplicates, s1(&v).order_violations), (1, 0));

    let allow = VerifyOptions {
        allow_duplicates: true,
        ..opts()
    };
    let v = run_with(&m, &body, 3, &allow);
    assert!(v.pass);
    assert_eq!(s1(&v).label, "PASS(dups)");
    assert_eq!(s1(&v).duplicates, 1);

    let alo = m.replace("delivery=exactly-once", "delivery=at-least-once");
    let v = run_with(&alo, &body, 3, &opts());
    assert!(v.pass);
    assert!(v.duplicates_allowed);
    assert!(v.reasons.iter().any(|r| r.contains("duplicates allowed")));
}

#[test]
fn reorder_fails_without_ack_errors_in_this_stream() {
    let body = lines(&[(1, 1), (1, 3), (1, 2)]);
    let m = meta(1, "caught-up", (0, 0), "", "A 1 3\n");
    let v = run_with(&m, &body, 3, &opts());
    assert!(!v.pass);
    assert_eq!((s1(&v).order_violations, s1(&v).gaps), (1, 0));

    // Ack errors in the OTHER stream do not excuse this one.
    let m = meta(1, "caught-up", (0, 7), "", "A 1 3\n");
    let v = run_with(&m, &body, 3, &opts());
    assert!(!v.pass);
    assert!(!s1(&v).excused_order_violations);

    // Ack errors in this stream excuse it (still counted).
    let m = meta(1, "caught-up", (7, 0), "", "A 1 3\n");
    let v = run_with(&m, &body, 3, &opts());
    assert!(v.pass, "{:?}", v.reasons);
    assert_eq!(s1(&v).order_violations, 1);
    assert!(s1(&v).excused_order_violations);
    assert_eq!(s1(&v).label, "PASS(excused)");
    assert_eq!(s1(&v).ack_errors, Some(7));
}

/// A publish the loader gave up on (timed out) that the system accepted anyway, after
/// the loader had gone on to its successor, arrives late: a recovered indeterminate
/// publish, not a reorder by the system (seen on Queen, docs/testing.md). The same late
/// arrival of an acknowledged seq stays an order violation.
#[test]
fn a_late_indeterminate_publish_is_not_an_order_violation() {
    let body = lines(&[(1, 1), (1, 3), (1, 4), (1, 2)]);
    let indet = "# indeterminate flow=A prop=1 seq=2\n";
    let m = meta(1, "caught-up", (0, 0), indet, "A 1 4\n");
    let v = run_with(&m, &body, 4, &opts());
    assert!(v.pass, "{:?}", v.reasons);
    let s = s1(&v);
    assert_eq!(
        (
            s.order_violations,
            s.late_indeterminate,
            s.recovered,
            s.gaps
        ),
        (0, 1, 1, 0)
    );
    assert_eq!(v.totals.late_indeterminate, 1);
    assert!(
        v.reasons
            .iter()
            .any(|r| r.contains("1 of the recovered arrived after a later seq")),
        "{:?}",
        v.reasons
    );
    // Acknowledged, the same history is a reorder.
    let m = meta(1, "caught-up", (0, 0), "", "A 1 4\n");
    let v = run_with(&m, &body, 4, &opts());
    assert!(!v.pass);
    assert_eq!((s1(&v).order_violations, s1(&v).late_indeterminate), (1, 0));
    // An acknowledged seq overtaken by a late indeterminate one is still a reorder:
    // only the indeterminate seq's own lateness is excused.
    let body = lines(&[(1, 1), (1, 2), (1, 4), (1, 3)]);
    let m = meta(
        1,
        "caught-up",
        (0, 0),
        "# indeterminate flow=A prop=1 seq=4\n",
        "A 1 3\n",
    );
    let v = run_with(&m, &body, 4, &opts());
    assert!(!v.pass, "{:?}", v.reasons);
    assert_eq!((s1(&v).order_violations, s1(&v).late_indeterminate), (1, 0));
}

#[test]
fn redelivery_of_old_seq_is_a_duplicate_not_a_violation() {
    let body = lines(&[(1, 1), (1, 2), (1, 3), (1, 1)]);
    let m = meta(1, "caught-up", (0, 0), "", "A 1 3\n");
    let v = run_with(&m, &body, 3, &opts());
    assert_eq!((s1(&v).duplicates, s1(&v).order_violations), (1, 0));
}

#[test]
fn seq_below_base_is_a_phantom_and_gaps_are_exact() {
    // Reference "clamp" case: prop 1 with seqs 0..2 at base 1, prop 2 with 1,3.
    let body = lines(&[(1, 0), (1, 1), (1, 2), (2, 1), (2, 3)]);
    let m = meta(1, "caught-up", (0, 0), "", "A 1 2\nA 2 3\n");
    let v = run_with(&m, &body, 2, &opts());
    assert!(!v.pass);
    let s = s1(&v);
    assert_eq!((s.gaps, s.phantoms, s.order_violations), (1, 1, 0));
}

#[test]
fn base_zero_accepts_seq_zero() {
    let body = lines(&[(1, 0), (1, 1)]);
    let m = meta(0, "caught-up", (0, 0), "", "A 1 1\n");
    let d = tempfile::tempdir().unwrap();
    write(d.path(), "produced.meta", &m);
    write(d.path(), "t_g1.log", &body);
    write(d.path(), "t_g2.log", &body);
    let v = verify_dir(d.path(), &opts()).unwrap();
    assert!(v.pass, "{:?}", v.reasons);
    assert_eq!(v.base, 0);
    assert_eq!(s1(&v).phantoms, 0);
}

#[test]
fn malformed_lines_are_reported_with_line_numbers_and_fail() {
    let body = "1,1\nnocomma\n,5\n1,x\n\n1,2\n-1,3\n1,3";
    let m = meta(1, "caught-up", (0, 0), "", "A 1 3\n");
    let v = run_with(&m, body, 3, &opts());
    assert!(!v.pass);
    assert_eq!(v.malformed_count, 5);
    let ls: Vec<u64> = v.malformed.iter().map(|m| m.line).collect();
    assert_eq!(ls, vec![2, 3, 4, 5, 7]);
    assert_eq!(v.malformed[0].file, "t_g1.log");
    assert_eq!(v.malformed[0].snippet, "nocomma");
    // The valid lines, including the last one without a newline, still count.
    assert_eq!((s1(&v).delivered, s1(&v).gaps), (3, 0));
    assert!(v
        .reasons
        .iter()
        .any(|r| r.starts_with("malformed lines: 5")));
}

#[test]
fn over_long_line_is_one_malformed_line() {
    let mut body = String::from("1,1\n");
    body.push_str(&"9".repeat(3 << 20));
    body.push_str("\n1,2\n1,3\n");
    let m = meta(1, "caught-up", (0, 0), "", "A 1 3\n");
    let v = run_with(&m, &body, 3, &opts());
    assert_eq!(v.malformed_count, 1);
    assert_eq!(v.malformed[0].line, 2);
    assert!(v.malformed[0].snippet.ends_with('…'));
    assert_eq!((s1(&v).delivered, s1(&v).gaps), (3, 0));
}

#[test]
fn many_malformed_lines_keep_100_examples() {
    let body: String = (0..250).map(|_| "bad\n").collect();
    let m = meta(1, "caught-up", (0, 0), "", "A 1 3\n");
    let v = run_with(&m, &format!("1,1\n1,2\n1,3\n{body}"), 3, &opts());
    assert_eq!(v.malformed_count, 250);
    assert_eq!(v.malformed.len(), 100);
}

#[test]
fn empty_stream_fails_and_is_the_only_empty_one() {
    let m = meta(1, "caught-up", (0, 0), "", "A 1 3\n");
    let v = run_with(&m, "", 3, &opts());
    assert!(!v.pass);
    assert_eq!(s1(&v).label, "FAIL(empty)");
    assert_eq!(v.streams[1].label, "PASS");
    assert_eq!(v.totals.empty_streams, 1);
    assert_eq!(v.totals.gaps, 0);
    // Its produced property was never delivered: judged as lost tail after a caught-up drain.
    assert_eq!(s1(&v).never_delivered_properties, 1);
    assert_eq!(s1(&v).lost_tail, 3);
}

#[test]
fn missing_log_fails_that_stream() {
    let d = tempfile::tempdir().unwrap();
    write(
        d.path(),
        "produced.meta",
        &meta(1, "caught-up", (0, 0), "", "A 1 1\n"),
    );
    write(d.path(), "t_g2.log", "1,1\n");
    let v = verify_dir(d.path(), &opts()).unwrap();
    assert!(!v.pass);
    assert_eq!(s1(&v).label, "FAIL(missing)");
    assert!(s1(&v).missing);
    assert_eq!(v.reasons[0], "t_g1: missing log");
    assert!(v.streams[1].pass);
}

#[test]
fn never_delivered_property_counts_as_tail() {
    let body = lines(&[(1, 1), (1, 2)]);
    let m = meta(1, "grace", (0, 0), "", "A 1 2\nA 2 4\n");
    let v = run_with(&m, &body, 2, &opts());
    let s = s1(&v);
    assert_eq!((s.never_delivered_properties, s.lost_tail), (1, 4));
    assert!(!v.pass);
    let m = meta(1, "cut-short", (0, 0), "", "A 1 2\nA 2 4\n");
    let v = run_with(&m, &body, 2, &opts());
    assert_eq!(
        (s1(&v).never_delivered_properties, s1(&v).in_flight),
        (1, 4)
    );
}

#[test]
fn phantom_seq_and_phantom_property() {
    let body = lines(&[(1, 1), (1, 2), (1, 3), (9, 1), (9, 2)]);
    let m = meta(1, "caught-up", (0, 0), "", "A 1 2\n");
    let v = run_with(&m, &body, 2, &opts());
    let s = s1(&v);
    assert_eq!((s.phantoms, s.phantom_properties, s.gaps), (3, 1, 0));
    assert!(!v.pass);
    assert!(
        v.reasons[0].contains("3 phantoms (1 phantom property)"),
        "{:?}",
        v.reasons
    );
}

#[test]
fn indeterminate_publishes_are_neither_phantom_nor_loss() {
    // prop 1: max acked 5, seq 3 indeterminate (not delivered), seq 6 indeterminate (delivered).
    let body = lines(&[(1, 1), (1, 2), (1, 4), (1, 5), (1, 6)]);
    let extra = "# indeterminate flow=A prop=1 seq=3\n# indeterminate flow=A prop=1 seq=6\n";
    let m = meta(1, "caught-up", (0, 0), extra, "A 1 5\n");
    let v = run_with(&m, &body, 5, &opts());
    let s = s1(&v);
    assert_eq!(
        (s.gaps, s.phantoms, s.lost_tail),
        (0, 0, 0),
        "{:?}",
        v.reasons
    );
    assert!(s.pass);
}

#[test]
fn legacy_meta_excuses_globally_and_says_so() {
    let d = tempfile::tempdir().unwrap();
    write(
        d.path(),
        "produced.meta",
        "# ackErr=3 base=1 system=kafka properties=2 rate=100\nA 1 3\nB 1 3\n",
    );
    let streams = reference_streams("x-");
    for (i, s) in streams.iter().enumerate() {
        let body = if i == 4 {
            lines(&[(1, 1), (1, 3), (1, 2)])
        } else {
            lines(&[(1, 1), (1, 2)])
        };
        write(d.path(), &format!("{}.log", s.name), &body);
    }
    let o = VerifyOptions {
        legacy_prefix: "x-".into(),
        ..opts()
    };
    let v = verify_dir(d.path(), &o).unwrap();
    assert_eq!(v.meta_format, MetaFormat::Reference);
    assert_eq!(v.streams.len(), 12);
    assert_eq!(v.streams[0].name, "x-cm-avail_cm-db");
    assert_eq!(v.streams[4].name, "x-cm-ota-sync_ota-3");
    assert_eq!(v.streams[4].order_violations, 1);
    assert!(v.streams[4].excused_order_violations);
    assert!(v.streams[4].ack_errors.is_none());
    // Drain unknown: tail is in flight, not loss.
    assert!(v.pass, "{:?}", v.reasons);
    assert_eq!(v.totals.in_flight, 11);
    assert!(v
        .reasons
        .iter()
        .any(|r| r.contains("ack errors not per stream; excuse applied globally")));
    assert!(v
        .reasons
        .iter()
        .any(|r| r.contains("drain outcome not recorded")));
}

#[test]
fn legacy_dir_without_meta() {
    let d = tempfile::tempdir().unwrap();
    for s in reference_streams("") {
        write(
            d.path(),
            &format!("{}.log", s.name),
            &lines(&[(0, 1), (0, 2), (1, 1)]),
        );
    }
    let v = verify_dir(d.path(), &opts()).unwrap();
    assert_eq!(v.meta_format, MetaFormat::Missing);
    assert_eq!(v.base, 1);
    assert!(v.pass, "{:?}", v.reasons);
    assert!(v.reasons.iter().any(|r| r.contains("no produced.meta")));
    assert_eq!(v.totals.in_flight + v.totals.lost_tail, 0);
    assert!(v.streams.iter().all(|s| !s.tail_judged));
    // A gap is still a gap.
    write(d.path(), "cm-avail_cm-db.log", &lines(&[(0, 1), (0, 3)]));
    let v = verify_dir(d.path(), &opts()).unwrap();
    assert!(!v.pass);
    assert_eq!(v.streams[0].gaps, 1);
    // Out-of-range property with a known property count.
    write(d.path(), "cm-avail_cm-db.log", &lines(&[(0, 1), (7, 1)]));
    let o = VerifyOptions {
        legacy_properties: Some(2),
        ..opts()
    };
    let v = verify_dir(d.path(), &o).unwrap();
    assert_eq!(v.streams[0].phantom_properties, 1);
    assert!(!v.pass);
}

#[test]
fn goload_july_header_parses() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("produced.meta");
    fs::write(
        &p,
        "# ackErr=2 producedA=10 producedB=12 base=1 ts=1720000000\nA 0 5\nB 3 6\n",
    )
    .unwrap();
    let m = read_produced(&p).unwrap();
    assert_eq!(m.format, MetaFormat::GoloadJuly);
    assert_eq!((m.total_ack_errors, m.base), (2, 1));
    assert_eq!(m.flows["A"].get(0), Some(5));
    assert_eq!(m.flows["B"].get(3), Some(6));
    assert_eq!(m.header["producedB"], "12");
    assert!(m.drain.is_none());
}

#[test]
fn v1_meta_parses_everything_and_keeps_unknown_keys() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("produced.meta");
    let extra = "# indeterminate flow=S prop=4 seq=9\n# future thing=1\n";
    fs::write(
        &p,
        meta(0, "grace", (1, 2), extra, "A 1 3\nA 0 2\nS 4 8\nA 5 -1\n")
            .replace("rate=10", "rate=10 newkey=zz"),
    )
    .unwrap();
    let m = read_produced(&p).unwrap();
    assert_eq!(m.format, MetaFormat::CrossbenchV1);
    assert_eq!(m.drain, Some(DrainOutcome::Grace));
    assert_eq!(m.delivery.as_deref(), Some("exactly-once"));
    assert_eq!(m.streams.len(), 2);
    assert_eq!(m.stream_ack_errors["t_g2"], 2);
    assert_eq!(m.total_ack_errors, 3);
    assert_eq!(m.header["newkey"], "zz");
    assert_eq!(m.header["invariants.lanes"], "3");
    assert_eq!(m.header["future.thing"], "1");
    assert_eq!(m.flows["A"].max_seq, vec![(0, 2), (1, 3)]); // sorted, below-base dropped
    assert_eq!(m.indeterminate.len(), 1);
    assert_eq!(m.properties(), Some(2));
}

#[test]
fn bad_meta_is_an_input_error() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("produced.meta");
    for (text, line) in [
        ("# ackErr=0 base=1\nA 1\n", 2),
        ("# ackErr=0 base=1\nA x 3\n", 2),
        ("# ackErr=zz base=1\n", 1),
        ("# crossbench produced.meta v1\n# base=1 drain=later\n", 2),
        ("# crossbench produced.meta v2\n", 1),
        ("# ackErr=0 base=1\nA 1 3\nA 1 4\n", 3),
    ] {
        fs::write(&p, text).unwrap();
        match read_produced(&p) {
            Err(CheckError::BadMeta { line: l, .. }) => assert_eq!(l, line, "{text:?}"),
            other => panic!("{text:?}: {other:?}"),
        }
        assert!(verify_dir(d.path(), &opts()).is_err());
    }
}

#[test]
fn missing_dir_is_an_input_error() {
    let e = verify_dir(Path::new("/nonexistent/crossbench-dir"), &opts()).unwrap_err();
    assert!(matches!(e, CheckError::Io { .. }));
}

#[test]
fn verdict_json_shape() {
    let m = meta(1, "caught-up", (0, 0), "", "A 1 3\n");
    let v = run_with(&m, &lines(&[(1, 1), (1, 3)]), 3, &opts());
    let j = serde_json::to_value(&v).unwrap();
    for k in [
        "schema_version",
        "pass",
        "cut_short",
        "reasons",
        "streams",
        "totals",
        "malformed",
        "malformed_count",
        "drain",
        "meta_format",
    ] {
        assert!(j.get(k).is_some(), "{k}");
    }
    assert_eq!(j["drain"], "caught-up");
    assert_eq!(j["meta_format"], "crossbench-v1");
    assert_eq!(j["streams"][0]["gaps"], 1);
    let back: Verdict = serde_json::from_value(j).unwrap();
    assert_eq!(back, v);
}

#[test]
fn lines_spanning_read_buffer_boundaries() {
    // ~3.5 MB: lines straddle the 1 MiB read boundaries; one gap and one duplicate inside.
    let mut body = String::new();
    let n: i64 = 400_000;
    for s in 1..=n {
        if s == 250_000 {
            continue;
        }
        body.push_str(&format!("1,{s}\n"));
        if s == 123_457 {
            body.push_str("1,123456\n"); // duplicate
        }
    }
    let m = meta(1, "caught-up", (0, 0), "", &format!("A 1 {n}\n"));
    let v = run_with(&m, &body, 1, &opts());
    let s = s1(&v);
    assert_eq!((s.gaps, s.duplicates, s.order_violations), (1, 1, 0));
    assert_eq!(s.delivered, n as u64);
    assert_eq!(v.malformed_count, 0);
}
