//! Jepsen's taxonomy after a fault, checked against a naive model: every publish is
//! acknowledged, refused (`# failed`) or indeterminate (`# indeterminate`); the checker's
//! `lost_acked`, `recovered`, `unseen_at_end`, `aborted_reads`, `phantoms`, `gaps`,
//! `lost_tail` and order violations must equal what a set-based model computes from the same
//! random history, exactly.

use std::collections::BTreeSet;
use std::fs;

use checker::{verify_dir, VerifyOptions};
use proptest::prelude::*;

const BASE: i64 = 1;

/// One property's history.
#[derive(Debug, Clone)]
struct Prop {
    /// Highest acknowledged seq (`None`: no data line).
    max: Option<i64>,
    indet: Vec<(i64, i64)>,
    failed: Vec<(i64, i64)>,
    /// Deliveries in order.
    delivered: Vec<i64>,
}

#[derive(Debug, Default, PartialEq, Eq)]
struct Expect {
    gaps: u64,
    lost_tail: u64,
    phantoms: u64,
    recovered: u64,
    unseen: u64,
    aborted: u64,
    order: u64,
    late_indet: u64,
    duplicates: u64,
}

fn member(ranges: &[(i64, i64)], s: i64) -> bool {
    ranges.iter().any(|&(a, b)| a <= s && s <= b)
}

/// The model: the definitions of checker/FORMAT.md, over plain sets.
fn model(props: &[Prop]) -> Expect {
    let mut e = Expect::default();
    for p in props {
        let indet = |s: i64| s >= BASE && member(&p.indet, s);
        // A seq named both ways is indeterminate.
        let failed = |s: i64| s >= BASE && member(&p.failed, s) && !indet(s);
        let acked = |s: i64| p.max.is_some_and(|m| s >= BASE && s <= m);
        let has_entry = p.max.is_some() || !p.indet.is_empty() || !p.failed.is_empty();
        let legit = |s: i64| indet(s) || (acked(s) && !failed(s));
        let required = |s: i64| acked(s) && !indet(s) && !failed(s);

        let mut seen = BTreeSet::new();
        let mut order_max = i64::MIN;
        for &s in &p.delivered {
            if !seen.insert(s) {
                e.duplicates += 1;
                continue;
            }
            if has_entry && legit(s) {
                if s < order_max {
                    // An indeterminate seq that comes late: the loader had given up on it.
                    if indet(s) {
                        e.late_indet += 1;
                    } else {
                        e.order += 1;
                    }
                } else {
                    order_max = s;
                }
            }
        }
        for &s in &seen {
            if !has_entry {
                e.phantoms += 1;
            } else if indet(s) {
                e.recovered += 1;
            } else if failed(s) {
                e.aborted += 1;
            } else if !acked(s) {
                e.phantoms += 1;
            }
        }
        if !has_entry {
            continue;
        }
        let hi_all = p
            .indet
            .iter()
            .chain(&p.failed)
            .map(|r| r.1)
            .chain(p.max)
            .max()
            .unwrap_or(0);
        for s in BASE..=hi_all {
            if indet(s) && !seen.contains(&s) {
                e.unseen += 1;
            }
        }
        let frontier = seen.iter().rev().find(|&&s| legit(s)).copied();
        let m = p.max.unwrap_or(BASE - 1);
        let hi = frontier.unwrap_or(BASE - 1).min(m);
        for s in BASE..=m {
            if required(s) && !seen.contains(&s) {
                if s <= hi {
                    e.gaps += 1;
                } else {
                    e.lost_tail += 1;
                }
            }
        }
    }
    e
}

/// SplitMix64: deterministic randomness from one proptest-chosen seed.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [lo, hi].
    fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % ((hi - lo + 1) as u64)) as i64
    }
    /// True with probability `pct` %.
    fn pct(&mut self, pct: u64) -> bool {
        self.next() % 100 < pct
    }
}

fn ranges(rng: &mut Rng, top: i64, n: i64) -> Vec<(i64, i64)> {
    (0..n)
        .map(|_| {
            let a = rng.range(0, top);
            (a, a + rng.range(0, 3))
        })
        .collect()
}

fn history(seed: u64, n_props: usize, exempt: bool) -> Vec<Prop> {
    let mut rng = Rng(seed);
    let mut props: Vec<Prop> = (0..n_props)
        .map(|_| {
            let max = if rng.pct(85) {
                Some(rng.range(BASE, 12))
            } else {
                None
            };
            let top = max.unwrap_or(6) + 4;
            let (indet, failed) = if exempt {
                let ni = rng.range(0, 2);
                let nf = rng.range(0, 2);
                (ranges(&mut rng, top, ni), ranges(&mut rng, top, nf))
            } else {
                (Vec::new(), Vec::new())
            };
            // Mostly in order, with drops, repeats, swaps and strays.
            let mut delivered: Vec<i64> = (0..=top + 2).filter(|_| rng.pct(80)).collect();
            for _ in 0..rng.range(0, 2) {
                if delivered.len() > 1 {
                    let i = rng.range(0, delivered.len() as i64 - 2) as usize;
                    delivered.swap(i, i + 1);
                }
            }
            for _ in 0..rng.range(0, 1) {
                if !delivered.is_empty() {
                    let i = rng.range(0, delivered.len() as i64 - 1) as usize;
                    let s = delivered[i];
                    delivered.push(s);
                }
            }
            Prop {
                max,
                indet,
                failed,
                delivered,
            }
        })
        .collect();
    // A flow without any produced line is not judged (FORMAT.md): give it one.
    if props
        .iter()
        .all(|p| p.max.is_none() && p.indet.is_empty() && p.failed.is_empty())
    {
        props[0].max = Some(3);
    }
    props
}

fn run(props: &[Prop]) -> checker::Verdict {
    let d = tempfile::tempdir().unwrap();
    let mut meta = format!(
        "# crossbench produced.meta v1\n# ackErr=0 base={BASE} system=mem properties={} rate=10 drain=caught-up delivery=at-least-once\n# stream name=t_g flow=A ackErr=0\n",
        props.len()
    );
    let mut log = String::new();
    for (i, p) in props.iter().enumerate() {
        for &(a, b) in &p.indet {
            meta.push_str(&format!("# indeterminate flow=A prop={i} seq={a} to={b}\n"));
        }
        for &(a, b) in &p.failed {
            meta.push_str(&format!("# failed flow=A prop={i} seq={a} to={b}\n"));
        }
    }
    for (i, p) in props.iter().enumerate() {
        if let Some(m) = p.max {
            meta.push_str(&format!("A {i} {m}\n"));
        }
    }
    // Interleave the properties' deliveries (the order across properties is free).
    let mut cursors = vec![0usize; props.len()];
    loop {
        let mut any = false;
        for (i, p) in props.iter().enumerate() {
            if let Some(&s) = p.delivered.get(cursors[i]) {
                log.push_str(&format!("{i},{s}\n"));
                cursors[i] += 1;
                any = true;
            }
        }
        if !any {
            break;
        }
    }
    fs::write(d.path().join("produced.meta"), meta).unwrap();
    fs::write(d.path().join("t_g.log"), log).unwrap();
    verify_dir(
        d.path(),
        &VerifyOptions {
            threads: 1,
            ..Default::default()
        },
    )
    .unwrap()
}

fn observed(v: &checker::Verdict) -> Expect {
    let s = &v.streams[0];
    Expect {
        gaps: s.gaps,
        lost_tail: s.lost_tail,
        phantoms: s.phantoms,
        recovered: s.recovered,
        unseen: s.unseen_at_end,
        aborted: s.aborted_reads,
        order: s.order_violations,
        late_indet: s.late_indeterminate,
        duplicates: s.duplicates,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn the_checker_agrees_with_the_model(seed in any::<u64>(), n in 1usize..=6, exempt in any::<bool>()) {
        let props = history(seed, n, exempt);
        let v = run(&props);
        let want = model(&props);
        let got = observed(&v);
        prop_assert_eq!(&got, &want, "history {:?}\nreasons {:?}", props, v.reasons);
        let s = &v.streams[0];
        prop_assert_eq!(s.lost_acked, s.gaps + s.lost_tail);
        // One stream: each lost seq is a distinct lost message (the ranges the distinct
        // count is made of cover exactly the seqs the counts count).
        prop_assert_eq!(v.totals.lost_messages, Some(s.lost_acked), "{:?}", props);
        // An aborted read always fails; a lost acknowledged write fails (no loss_allowed).
        if want.aborted > 0 || want.gaps + want.lost_tail > 0 || want.phantoms > 0 {
            prop_assert!(!v.pass, "{:?}", v.reasons);
        }
    }
}

#[test]
fn planted_counts_are_exact() {
    // prop 0: acked 1..=10; 4 refused (never required), 7..=8 indeterminate, 11 indeterminate.
    // Delivered: 1,2,3,4(aborted read),5,6,7(recovered),9,11(recovered): 10 is a gap (a
    // later legit seq arrived), 8 unseen at end.
    let props = vec![Prop {
        max: Some(10),
        indet: vec![(7, 8), (11, 11)],
        failed: vec![(4, 4)],
        delivered: vec![1, 2, 3, 4, 5, 6, 7, 9, 11],
    }];
    let v = run(&props);
    let s = &v.streams[0];
    assert_eq!(
        (
            s.aborted_reads,
            s.recovered,
            s.unseen_at_end,
            s.gaps,
            s.lost_tail,
            s.lost_acked
        ),
        (1, 2, 1, 1, 0, 1),
        "{:?}",
        v.reasons
    );
    assert!(!v.pass);
    assert!(
        v.reasons.iter().any(|r| r.contains("1 aborted read")),
        "{:?}",
        v.reasons
    );
}

#[test]
fn loss_allowed_by_the_tier_passes_and_says_so() {
    let d = tempfile::tempdir().unwrap();
    fs::write(
        d.path().join("produced.meta"),
        "# crossbench produced.meta v1\n# ackErr=0 base=1 system=mem properties=1 rate=10 drain=caught-up delivery=exactly-once loss_allowed=tier-memory-does-not-survive-kill\n# stream name=t_g flow=A ackErr=0\nA 0 5\n",
    )
    .unwrap();
    fs::write(d.path().join("t_g.log"), "0,1\n0,2\n").unwrap();
    let v = verify_dir(d.path(), &VerifyOptions::default()).unwrap();
    assert!(v.pass, "{:?}", v.reasons);
    assert_eq!(v.totals.lost_acked, 3);
    assert_eq!(v.streams[0].label, "PASS(loss-allowed)");
    assert!(
        v.reasons.iter().any(|r| r.contains("allowed: tier-memory")),
        "{:?}",
        v.reasons
    );
}

#[test]
fn order_violations_of_a_reconnected_stream_are_reported_apart() {
    let d = tempfile::tempdir().unwrap();
    fs::write(
        d.path().join("produced.meta"),
        "# crossbench produced.meta v1\n# ackErr=0 base=1 system=mem properties=1 rate=10 drain=caught-up delivery=exactly-once\n# stream name=t_g flow=A ackErr=0 reconnects=2\n# stream name=t_h flow=A ackErr=0\nA 0 3\n",
    )
    .unwrap();
    fs::write(d.path().join("t_g.log"), "0,1\n0,3\n0,2\n").unwrap();
    fs::write(d.path().join("t_h.log"), "0,1\n0,3\n0,2\n").unwrap();
    let v = verify_dir(d.path(), &VerifyOptions::default()).unwrap();
    let (g, h) = (&v.streams[0], &v.streams[1]);
    assert!(g.pass && g.order_violations_at_reconnect == 1, "{g:?}");
    assert!(!h.pass && h.order_violations_at_reconnect == 0, "{h:?}");
    assert_eq!(v.totals.order_violations_at_reconnect, 1);
    assert!(
        v.reasons.iter().any(|r| r.contains("reported apart")),
        "{:?}",
        v.reasons
    );
}

/// The pipeline's shape: a message lost on the first hop is missing from the streams
/// after it too; counted once as a lost message, once per stream as lost seqs.
#[test]
fn a_message_lost_on_every_stream_of_its_flow_counts_once() {
    let d = tempfile::tempdir().unwrap();
    fs::write(
        d.path().join("produced.meta"),
        "# crossbench produced.meta v1\n# ackErr=0 base=1 system=mem properties=3 rate=10 drain=caught-up delivery=exactly-once\n\
         # stream name=a_db flow=A ackErr=0\n# stream name=a_g1 flow=A ackErr=0\n# stream name=a_g2 flow=A ackErr=0\n# stream name=b_g flow=B ackErr=0\n\
         A 0 5\nA 1 5\nB 0 5\n",
    )
    .unwrap();
    // Flow A: key 0 seq 3 lost on every stream (the first hop lost it); key 1 seq 2
    // lost by g1 only; key 1's seq 5 (the tail) by g2 only. Flow B: key 0 seq 3, another
    // message for all its (prop, seq) matches one of A's.
    let all = |skip: &[(u32, u32)]| {
        let mut s = String::new();
        for seq in 1..=5u32 {
            for key in 0..2u32 {
                if !skip.contains(&(key, seq)) {
                    s.push_str(&format!("{key},{seq}\n"));
                }
            }
        }
        s
    };
    fs::write(d.path().join("a_db.log"), all(&[(0, 3)])).unwrap();
    fs::write(d.path().join("a_g1.log"), all(&[(0, 3), (1, 2)])).unwrap();
    fs::write(d.path().join("a_g2.log"), all(&[(0, 3), (1, 5)])).unwrap();
    fs::write(d.path().join("b_g.log"), "0,1\n0,2\n0,4\n0,5\n").unwrap();
    let v = verify_dir(d.path(), &VerifyOptions::default()).unwrap();
    assert!(!v.pass);
    assert_eq!(v.totals.lost_acked, 6, "{:?}", v.reasons);
    assert_eq!(v.totals.lost_messages, Some(4), "{:?}", v.reasons);
    assert!(
        v.reasons
            .iter()
            .any(|r| r.contains("lost_acked=6 over the streams, 4 distinct messages")),
        "{:?}",
        v.reasons
    );
}
