//! Jepsen's taxonomy end to end on the control broker, with the faults planted where
//! their counts are known exactly: a publish refused but kept (an aborted read), one
//! that timed out but landed (recovered), one that timed out and never landed
//! (unseen at end), and a delivery dropped after its publish was acknowledged (a lost
//! acknowledged write). Each must be counted exactly, in every stream it reaches.

mod support;

use support::{run_raw, scenario, u, verdict_stream};

#[test]
fn planted_publish_outcomes_are_counted_exactly() {
    let _g = support::serial();
    let (code, text, tmp) = run_raw(
        &scenario("smoke.yaml"),
        &support::relaxed(&[
            // 25 events/s on flow A over 8 properties: each property's next event is
            // due 320 ms after the last, after a faulted publish has given up at its
            // 300 ms deadline, so no other event of its shard waits behind it and the
            // counts below hold however late the machine wakes the shard (at 100/s the
            // next one had 80 ms of slack).
            "rate=50",
            "duration=6s",
            "warmup=1s",
            "properties=8",
            "publish_deadline=300ms",
            // Ordinals among the publish calls to flow A's ingress topic (8 hydration
            // calls come first).
            r#"mem.publish_faults=[{topic: cm-avail, kind: refuse-but-keep, at: 30}, {topic: cm-avail, kind: timeout-but-keep, at: 60}, {topic: cm-avail, kind: timeout, at: 90}]"#,
            // An acknowledged event one stream never gets.
            r#"mem.faults=[{topic: cm-ota-prices, group: otap-2, kind: drop, at: 40}]"#,
        ]),
    );
    let dir = tmp.path().join("cell");
    let r = support::result(&dir);
    let t = &r["verdict"]["totals"];
    // Flow A's ingress stream and its five derived streams each see the aborted read,
    // the recovered publish, and miss the unseen one.
    assert_eq!(u(&t["aborted_reads"]), 6, "{t}\n{text}");
    assert_eq!(u(&t["recovered"]), 6, "{t}");
    assert_eq!(u(&t["unseen_at_end"]), 6, "{t}");
    assert_eq!(u(&t["lost_acked"]), 1, "{t}");
    for name in ["cm-avail_cm-db", "cm-ota-sync_ota-1", "cm-ota-sync_ota-5"] {
        let s = verdict_stream(&r, name);
        assert_eq!(
            (
                u(&s["aborted_reads"]),
                u(&s["recovered"]),
                u(&s["unseen_at_end"])
            ),
            (1, 1, 1),
            "{s}"
        );
    }
    let lost = verdict_stream(&r, "cm-ota-prices_otap-2");
    assert_eq!(u(&lost["lost_acked"]), 1, "{lost}");
    assert_eq!(
        u(&verdict_stream(&r, "cm-ota-prices_otap-1")["lost_acked"]),
        0
    );
    // The producers said what they gave up.
    let a = &r["flows"]["A"];
    assert_eq!(
        (u(&a["failed"]), u(&a["failed_indeterminate"])),
        (3, 2),
        "{a}"
    );
    assert_eq!(u(&r["flows"]["B"]["failed"]), 0);
    let meta = std::fs::read_to_string(dir.join("produced.meta")).unwrap();
    assert_eq!(meta.matches("# failed flow=A").count(), 1, "{meta}");
    assert_eq!(meta.matches("# indeterminate flow=A").count(), 2, "{meta}");
    // An aborted read and a lost write both fail the cell; the verdict says why.
    assert_eq!(r["outcome"], "FAIL");
    assert_eq!(code, 3, "{text}");
    let reasons = r["verdict"]["reasons"].to_string();
    assert!(reasons.contains("aborted read"), "{reasons}");
    assert!(reasons.contains("recovered"), "{reasons}");
}
