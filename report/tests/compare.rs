//! A measured cell beside a published one: figures, ratios, and the scaling said.

mod common;

use std::path::Path;

use common::{write, Spec};
use report::cell::CellRecord;
use report::{compare, published};

#[test]
fn compare_gives_ratios_and_names_every_scaled_quantity() {
    let tmp = tempfile::tempdir().unwrap();
    let d = write(
        tmp.path(),
        &Spec {
            name: "pgmq-sparse",
            p50: 110.2,
            p99: 881.8,
            cores: Some(1.63),
            ..Spec::default()
        },
    );
    let c = CellRecord::load(&d).unwrap();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../results/published");
    let p = published::find(&dir, "MX-pgmq-sparse").unwrap();
    let cmp = compare::compare(&p, &c);
    // p50: 110.2 measured vs 55.1 published.
    assert_eq!(
        cmp.table.get("e2e p50 ms", "measured ÷ published"),
        Some("2.00×")
    );
    assert_eq!(cmp.table.get("system cores", "measured"), Some("1.63"));
    assert_eq!(
        cmp.table.get("verdict", "measured ÷ published"),
        Some("same")
    );
    let all = cmp.differences.join("\n");
    assert!(
        all.contains("R (ingress events/s): published 2000, measured 200 (× 0.100)"),
        "{all}"
    );
    assert!(
        all.contains("P (properties): published 1000, measured 100"),
        "{all}"
    );
    assert!(
        all.contains("a scaled reproduction, 0.062× the cores"),
        "{all}"
    );
    assert!(
        all.contains("per-core load is 1.60× the published cell's"),
        "{all}"
    );
    assert!(all.contains("scaled on purpose: R 2000 → 200"), "{all}");
    let md = cmp.to_markdown();
    assert!(md.contains("### MX-pgmq-sparse (published) vs pgmq-sparse (measured)"));
    let err = published::find(&dir, "NO-SUCH-CELL").unwrap_err();
    assert!(err.to_string().contains("crossbench compare --list"));
}

#[test]
fn reproducing_page_lists_every_published_cell_and_marks_the_unrun() {
    let tmp = tempfile::tempdir().unwrap();
    let d = write(
        tmp.path(),
        &Spec {
            name: "pgmq-sparse",
            ..Spec::default()
        },
    );
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../results/published");
    let all = published::load_dir(&dir).unwrap();
    let mut pairs = std::collections::BTreeMap::new();
    pairs.insert("MX-pgmq-sparse".to_string(), CellRecord::load(&d).unwrap());
    let page = report::reproducing::render(&all, &pairs, "crossbench compare --doc x");
    for p in &all {
        assert!(page.contains(&format!("### `{}`", p.id)), "{} listed", p.id);
    }
    assert_eq!(
        page.matches("- result: not run here yet").count(),
        all.len() - 1
    );
    assert!(page.contains("#### MX-pgmq-sparse (published) vs pgmq-sparse (measured)"));
    assert!(page.contains(
        "- reproduce here: `crossbench run scenarios/pgmq-sparse.yaml --set drain.max=60s`"
    ));
    // A cell that cannot run here says why.
    assert!(page.contains("- not run here: crossbench has no Pulsar adapter"));
}

#[test]
fn a_stream_cell_is_compared_on_its_own_figures() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("tp-kafka-3m-scaled");
    std::fs::create_dir_all(&d).unwrap();
    let r = serde_json::json!({
        "schema_version": 1,
        "cell": "tp-kafka-3m-scaled",
        "outcome": "PASS",
        "system": "kafka",
        "variant": "",
        "durability": "default",
        "time": {"started_utc": "2026-11-30T06:00:00Z", "rated_sec": 20.0},
        "host": {"cpu_model": "test cpu", "cores": 2, "memory_bytes": 25769803776u64},
        "workload": {"kind": "stream", "rate_msgs_per_sec": 8000, "space": 200, "lanes": 200},
        "throughput": {"offered_per_sec": 8000.0, "published_per_sec": 7990.0,
                        "popped_per_sec": 7900.0, "served_fraction": 0.9875},
        "latency_ms": {"e2e": {"count": 160000, "p50_ms": 16.0, "p95_ms": 40.0,
                                "p99_ms": 80.0, "p999_ms": 120.0, "max_ms": 200.0},
                       "e2e_a": {"count": 0}},
        "verdict": {"pass": true}
    });
    std::fs::write(d.join("result.json"), r.to_string()).unwrap();
    let c = CellRecord::load(&d).unwrap();
    assert!(c.is_stream());
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../results/published");
    let p = published::find(&dir, "TP-kafka-3m").unwrap();
    let cmp = compare::compare(&p, &c);
    // p50 16 ms measured against the published 8 ms: the stream's own e2e, not flow A.
    assert_eq!(
        cmp.table.get("e2e p50 ms", "measured ÷ published"),
        Some("2.00×")
    );
    assert_eq!(cmp.table.get("messages/s", "measured"), Some("7990"));
    assert_eq!(
        cmp.table.get("consumed messages/s per group", "measured"),
        Some("7900")
    );
    assert_eq!(cmp.table.get("deliveries/s", "measured"), None);
    let all = cmp.differences.join("\n");
    assert!(
        all.contains("offered messages/s: published 3 000 000, measured 8000 (× 0.003)"),
        "{all}"
    );
    assert!(!all.contains("P (properties)"), "{all}");
    // Three brokers of 16 vCPU: 2 cores are 0.042 of them.
    assert!(all.contains("cores scaled by 0.042"), "{all}");
    let cmd = p.reproduce.command().unwrap();
    assert!(cmd.contains("--set 'stream.ladder=[]'"), "{cmd}");
}

#[test]
fn a_reproduce_campaign_page_shows_an_earlier_single_run_only_where_the_campaign_did_not_run() {
    use report::campaign::{ArmView, CampaignView};
    use report::stats::Outcomes;
    let tmp = tempfile::tempdir().unwrap();
    let arm_cell = write(
        tmp.path(),
        &Spec {
            name: "MX-pgmq-sparse-r1",
            ..Spec::default()
        },
    );
    let single = write(
        tmp.path(),
        &Spec {
            name: "queen-sparse-earlier",
            system: "queen",
            p50: 3000.0,
            p99: 9000.0,
            ..Spec::default()
        },
    );
    let mut pass = Outcomes::default();
    pass.add(report::cell::Outcome::Pass);
    let arm = |id: &str, not_run: Option<&str>, cells: Vec<CellRecord>, o: Outcomes| ArmView {
        id: id.into(),
        system: String::new(),
        point: Default::default(),
        not_run: not_run.map(str::to_string),
        outcomes: o,
        cells,
    };
    let v = CampaignView {
        dir: tmp.path().into(),
        name: "seed000-reproduce".into(),
        description: String::new(),
        status: "complete".into(),
        repeats: 3,
        seed: 1,
        arms: vec![
            arm(
                "MX-pgmq-sparse",
                None,
                vec![CellRecord::load(&arm_cell).unwrap()],
                pass,
            ),
            arm(
                "MX-queen-sparse",
                Some("not run: CROSSBENCH_QUEEN_URL is not set"),
                Vec::new(),
                Outcomes::default(),
            ),
        ],
    };
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../results/published");
    let all = published::load_dir(&dir).unwrap();
    let mut singles = std::collections::BTreeMap::new();
    singles.insert(
        "MX-queen-sparse".to_string(),
        CellRecord::load(&single).unwrap(),
    );
    let page = report::reproducing::render_campaign(
        &all,
        std::slice::from_ref(&v),
        &singles,
        "crossbench compare x",
    );
    assert!(
        page.contains("1 run here by the campaign, 1 more shown by one earlier run each."),
        "{page}"
    );
    // In the summary, marked as one run, beside the campaign's arm.
    let row = page
        .lines()
        .find(|l| l.starts_with("| `MX-queen-sparse` |"))
        .expect("a summary row for the single run");
    assert!(row.contains("| 1 (one earlier run, "), "{row}");
    assert!(row.contains("/ 3000"), "{row}");
    // In its section: why the campaign did not run it, then the run, said to be one.
    let section = page
        .split("### `MX-queen-sparse`")
        .nth(1)
        .unwrap()
        .split("\n### ")
        .next()
        .unwrap();
    assert!(
        section
            .contains("- campaign `seed000-reproduce`: not run: CROSSBENCH_QUEEN_URL is not set"),
        "{section}"
    );
    assert!(
        section.contains("one earlier run (an anecdote: no repeats, no interval)"),
        "{section}"
    );
    assert!(
        section.contains("vs queen-sparse-earlier (measured)"),
        "{section}"
    );
    // Without singles, the cell is "not run" and no single-run wording appears.
    let bare = report::reproducing::render_campaign(
        &all,
        std::slice::from_ref(&v),
        &Default::default(),
        "crossbench compare x",
    );
    assert!(!bare.contains("one earlier run"), "{bare}");
    assert!(bare.contains("- result: not run: CROSSBENCH_QUEEN_URL is not set"));

    // Every summary row says where it was measured; both records name one machine,
    // so the page does not warn about several.
    for id in ["MX-pgmq-sparse", "MX-queen-sparse"] {
        let row = page
            .lines()
            .find(|l| l.starts_with(&format!("| `{id}` |")))
            .unwrap();
        assert!(
            row.ends_with("| not recorded; no budget; test cpu, 2026-11-30 |"),
            "{row}"
        );
    }
    assert!(!page.contains("machines**"), "{page}");
    // The earlier single run on another machine: the page says the rows do not compare.
    let text = std::fs::read_to_string(single.join("result.json"))
        .unwrap()
        .replace("\"test cpu\"", "\"other cpu\"");
    std::fs::write(single.join("result.json"), text).unwrap();
    singles.insert(
        "MX-queen-sparse".to_string(),
        CellRecord::load(&single).unwrap(),
    );
    let two = report::reproducing::render_campaign(
        &all,
        std::slice::from_ref(&v),
        &singles,
        "crossbench compare x",
    );
    let row = two
        .lines()
        .find(|l| l.starts_with("| `MX-queen-sparse` |"))
        .unwrap();
    assert!(
        row.ends_with("| not recorded; no budget; other cpu, 2026-11-30 |"),
        "{row}"
    );
    assert!(
        two.contains("**These rows were measured on 2 machines**"),
        "{two}"
    );
}

/// Two directories of one reproduce campaign (two sittings): a cell takes all its
/// repeats from the first directory whose arm for it ran, the page names that
/// directory, and a cell the first ran is never taken from the second.
#[test]
fn a_reproduce_page_from_two_sittings_takes_each_cell_from_one_directory() {
    use report::campaign::{ArmView, CampaignView};
    use report::stats::Outcomes;
    let tmp = tempfile::tempdir().unwrap();
    let new_dir = tmp.path().join("sitting-new");
    let old_dir = tmp.path().join("sitting-old");
    let cell = |dir: &Path, name: &'static str, system: &'static str, p50: f64| {
        std::fs::create_dir_all(dir).unwrap();
        let c = write(
            dir,
            &Spec {
                name,
                system,
                p50,
                ..Spec::default()
            },
        );
        CellRecord::load(&c).unwrap()
    };
    let mut pass = Outcomes::default();
    pass.add(report::cell::Outcome::Pass);
    let arm = |id: &str, not_run: Option<&str>, cells: Vec<CellRecord>| ArmView {
        id: id.into(),
        system: String::new(),
        point: Default::default(),
        not_run: not_run.map(str::to_string),
        outcomes: if cells.is_empty() {
            Outcomes::default()
        } else {
            pass
        },
        cells,
    };
    let view = |dir: &Path, arms: Vec<ArmView>| CampaignView {
        dir: dir.into(),
        name: "seed000-reproduce".into(),
        description: String::new(),
        status: "complete".into(),
        repeats: 3,
        seed: 1,
        arms,
    };
    // The new sitting ran pgmq (p50 77) and not Queen; the old one ran both, pgmq at
    // p50 999, which must not appear.
    let new = view(
        &new_dir,
        vec![
            arm("MX-pgmq-sparse", None, {
                // This sitting's build was made from uncommitted changes.
                let mut c = cell(&new_dir, "pgmq-new", "pgmq", 77.0);
                c.result.crossbench.git_commit = "0123abcd-dirty".into();
                vec![c]
            }),
            arm(
                "MX-queen-sparse",
                Some("not in this sitting: --only pgmq"),
                Vec::new(),
            ),
        ],
    );
    let old = view(
        &old_dir,
        vec![
            arm(
                "MX-pgmq-sparse",
                None,
                vec![cell(&old_dir, "pgmq-old", "pgmq", 999.0)],
            ),
            arm("MX-queen-sparse", None, {
                let mut c = cell(&old_dir, "queen-old", "queen", 333.0);
                c.result.crossbench.git_commit = "4567cdef".into();
                vec![c]
            }),
        ],
    );
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../results/published");
    let all = published::load_dir(&dir).unwrap();
    let page = report::reproducing::render_campaign(
        &all,
        &[new, old],
        &Default::default(),
        "crossbench compare x",
    );
    let row = |id: &str| {
        page.lines()
            .find(|l| l.starts_with(&format!("| `{id}` |")))
            .unwrap_or_else(|| panic!("no summary row for {id}:\n{page}"))
            .to_string()
    };
    assert!(
        row("MX-pgmq-sparse").contains("/ 77.0"),
        "{}",
        row("MX-pgmq-sparse")
    );
    assert!(
        !page.contains("999"),
        "the old sitting's pgmq leaked in:\n{page}"
    );
    assert!(
        row("MX-queen-sparse").contains("/ 333.0"),
        "{}",
        row("MX-queen-sparse")
    );
    assert!(page.contains(" 2 run here."), "{page}");
    let section = |id: &str| {
        page.split(&format!("### `{id}`"))
            .nth(1)
            .unwrap()
            .split("\n### ")
            .next()
            .unwrap()
            .to_string()
    };
    assert!(
        section("MX-queen-sparse").contains(&format!("of `{}`", old_dir.display())),
        "{}",
        section("MX-queen-sparse")
    );
    assert!(
        section("MX-pgmq-sparse").contains(&format!("of `{}`", new_dir.display())),
        "{}",
        section("MX-pgmq-sparse")
    );
    // The page lists both directories and how many cells each gave.
    assert!(
        page.contains(&format!(
            "- `{}`: 1 of its 2 arms ran; this page takes 1 cell from it",
            new_dir.display()
        )),
        "{page}"
    );
    assert!(
        page.contains(&format!(
            "- `{}`: 2 of its 2 arms ran; this page takes 1 cell from it",
            old_dir.display()
        )),
        "{page}"
    );
    // Each directory names its machine and builds, and a dirty build is flagged.
    let listed = |dir: &Path| {
        page.lines()
            .find(|l| l.starts_with(&format!("- `{}`:", dir.display())))
            .unwrap()
            .to_string()
    };
    assert!(
        listed(&new_dir).contains("test cpu, build `0123abcd` **dirty**"),
        "{}",
        listed(&new_dir)
    );
    assert!(
        listed(&old_dir).contains("build `4567cdef`, 2026-11-30, 1 cell)")
            && !listed(&old_dir).contains("build `4567cdef` **dirty**"),
        "{}",
        listed(&old_dir)
    );
    // One directory: its machines and builds are listed all the same.
    let one = report::reproducing::render_campaign(
        &all,
        &[view(
            &new_dir,
            vec![arm("MX-pgmq-sparse", None, {
                let mut c = cell(&new_dir, "pgmq-one", "pgmq", 78.0);
                c.result.crossbench.git_commit = "89ab".into();
                vec![c]
            })],
        )],
        &Default::default(),
        "crossbench compare y",
    );
    assert!(
        one.contains(&format!(
            "- `{}`: 1 of its 1 arms ran; this page takes 1 cell from it (test cpu, build `89ab`, 2026-11-30, 1 cell)",
            new_dir.display()
        )),
        "{one}"
    );
}

/// A published Queen 1.0.0 cell (seed 001) against a local cell whose Queen answers
/// 1.0.0 but is the 0.15.1 build (its record's provenance carries the caveat and the
/// stated build): NOT COMPARABLE, naming both products; and the machines differ.
#[test]
fn a_published_queen_1_0_0_cell_against_a_local_queen_0_15_1_is_not_comparable() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../results/published");
    let p = published::find(&dir, "Q1M-completed").unwrap();
    assert_eq!(
        p.product.as_ref().map(|x| x.version.as_str()),
        Some("1.0.0")
    );
    let tmp = tempfile::tempdir().unwrap();
    let d = write(
        tmp.path(),
        &Spec {
            name: "queen-local",
            system: "queen",
            ..Spec::default()
        },
    );
    common::patch(
        &d,
        "provenance",
        serde_json::json!({"schema": 1, "product": "Queen", "version": "1.0.0",
            "caveat": "Queen 0.15.1 (commit ab23212) answers 1.0.0 at /health too",
            "stated_build": "ab23212 (0.15.1)", "source": "/health"}),
    );
    let c = CellRecord::load(&d).unwrap();
    let cmp = compare::compare(&p, &c);
    let md = cmp.table.to_markdown();
    assert!(
        md.contains("NOT COMPARABLE: product: published Queen 1.0.0"),
        "{md}"
    );
    assert!(
        md.contains("measured Queen 1.0.0 (build ab23212 (0.15.1))"),
        "{md}"
    );
    assert!(md.contains("known not to name its build"), "{md}");
    assert!(md.contains("machine: published"), "{md}");
    // The same product and version, stated plainly, on the same machine: no mark for
    // the product.
    common::patch(
        &d,
        "provenance",
        serde_json::json!({"schema": 1, "product": "Queen", "version": "1.0.0", "source": "/health"}),
    );
    let c = CellRecord::load(&d).unwrap();
    assert!(compare::not_comparable(&p, &c)
        .iter()
        .all(|w| !w.starts_with("product")));
}
