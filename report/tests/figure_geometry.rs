//! Every figure of a report keeps the layout rules (issue 48), read off its SVG by
//! `report::plot::geometry`: the plotting areas are the rectangles stroked in
//! `chart::FRAME`, the legend boxes those stroked in `chart::LEGEND_BORDER`, and a
//! legend's entries are the texts inside its box. For every figure of the report of
//! `results/campaigns/findings` (real records, 100 cells) and of a gate's record: no
//! legend box meets a plotting area, and no legend has more than `chart::MAX_SERIES`
//! entries.

use std::path::Path;

use report::cell::load_all;
use report::html;
use report::plot::geometry::{faults, legends, plot_areas};

/// Every SVG under `dir`, sub-directories included.
fn svgs(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            v.extend(svgs(&p));
        } else if p.extension().is_some_and(|e| e == "svg") {
            v.push(p);
        }
    }
    v.sort();
    v
}

#[test]
fn no_legend_covers_a_plot_and_no_panel_has_too_many_series() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../results/campaigns/findings");
    let cells = load_all(&[root.display().to_string()]).unwrap();
    assert!(cells.len() >= 90, "{} cells", cells.len());
    let campaign = report::campaign::CampaignView::load(&root).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("report");
    let w = html::write_with(&cells, &[campaign], &out).unwrap();
    let files = svgs(&out.join("plots"));
    assert!(files.len() > 3, "{files:?}");
    // Organised by arm: a CDF per workload shape, each arm's cells on its own page,
    // and a main page that links its pictures instead of carrying them.
    let names: Vec<String> = files
        .iter()
        .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert!(
        names
            .iter()
            .filter(|n| n.starts_with("findings-latency-cdf-"))
            .count()
            >= 4,
        "{names:?}"
    );
    let page = std::fs::read_to_string(&w.index).unwrap();
    assert!(
        page.contains("href=\"arms/findings--f1-pgmq-sparse.html\""),
        "arm pages linked"
    );
    assert!(out.join("arms/findings--f1-pgmq-sparse.html").is_file());
    let size = std::fs::metadata(&w.index).unwrap().len();
    assert!(size < 1_000_000, "index.html is {size} bytes");
    let mut all = Vec::new();
    let mut legend_count = 0;
    for f in &files {
        let svg = std::fs::read_to_string(f).unwrap();
        legend_count += legends(&svg).len();
        for fault in faults(&svg) {
            all.push(format!(
                "{}: {fault}",
                f.file_name().unwrap().to_string_lossy()
            ));
        }
    }
    assert!(
        legend_count > 0,
        "no legend found in {} figures: the test would see nothing",
        files.len()
    );
    assert!(all.is_empty(), "{} faults:\n{}", all.len(), all.join("\n"));
}

/// The findings' forest plot that docs/findings.md shows keeps the rules too.
#[test]
fn the_findings_forest_keeps_its_legend_off_the_rows() {
    let f = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/findings-forest.svg");
    let svg = std::fs::read_to_string(&f).unwrap();
    assert_eq!(legends(&svg).len(), 1, "one legend");
    assert_eq!(plot_areas(&svg).len(), 1, "one plotting area");
    assert_eq!(faults(&svg), Vec::<String>::new());
}

/// The report of a gate's record (the committed classic-against-quorum gate, its
/// legs real cells): a gate section with its picture and table, its legs on a page
/// of their own, and every figure (the gate's picture, each leg's time series)
/// keeping the rules.
#[test]
fn a_gate_report_shows_its_picture_and_keeps_the_rules() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../results/gates/2026-12-01-rabbit-sparse/classic-vs-quorum-p40");
    let arg = root.display().to_string();
    let cells = load_all(std::slice::from_ref(&arg)).unwrap();
    let gate = report::gate::GateView::load(&root).unwrap();
    assert_eq!(gate.legs.len(), cells.len(), "every leg's cell, once");
    assert!(cells.len() >= 10, "{} legs", cells.len());
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("report");
    let sources = html::Sources {
        cells: &cells,
        campaigns: &[],
        gates: std::slice::from_ref(&gate),
    };
    let w = html::write_page(&sources, &out, html::PageOptions::default()).unwrap();
    let page = std::fs::read_to_string(&w.index).unwrap();
    assert!(
        page.contains("Gate classic-vs-quorum-p40: <span class=\"FAIL\">REGRESSION</span>"),
        "the gate's verdict heads its section"
    );
    assert!(
        page.contains("plots/gate-classic-vs-quorum-p40.png"),
        "its picture"
    );
    assert!(page.contains("system_cores"), "its table");
    assert!(out.join("gates/classic-vs-quorum-p40.html").is_file());
    // The legs are on their page, not the main one.
    assert!(
        !page.contains("<h2>Cells</h2>"),
        "legs left on the main page"
    );
    let files = svgs(&out.join("plots"));
    let gate_svg = out.join("plots/gate-classic-vs-quorum-p40.svg");
    assert!(files.contains(&gate_svg), "{files:?}");
    let svg = std::fs::read_to_string(&gate_svg).unwrap();
    assert_eq!(legends(&svg).len(), 1, "the gate's picture has its legend");
    let mut all = Vec::new();
    for f in &files {
        let svg = std::fs::read_to_string(f).unwrap();
        for fault in faults(&svg) {
            all.push(format!(
                "{}: {fault}",
                f.file_name().unwrap().to_string_lossy()
            ));
        }
    }
    assert!(all.is_empty(), "{} faults:\n{}", all.len(), all.join("\n"));
}
