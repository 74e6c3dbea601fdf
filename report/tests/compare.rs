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
    assert!(page.contains("not run here yet on tansu"));
}
