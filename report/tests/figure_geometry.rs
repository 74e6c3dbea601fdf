//! Every figure of a report keeps the layout rules (issue 48), read off its SVG: the
//! plotting areas are the rectangles stroked in `chart::FRAME`, the legend boxes those
//! stroked in `chart::LEGEND_BORDER`, and a legend's entries are the texts inside its
//! box. For every figure of the report of `results/campaigns/findings` (real records,
//! 100 cells): no legend box meets a plotting area, and no legend has more than
//! `chart::MAX_SERIES` entries.

use std::path::Path;

use report::cell::load_all;
use report::html;
use report::plot::chart::{FRAME, LEGEND_BORDER, MAX_SERIES};

/// A rectangle in pixels: x0, y0, x1, y1.
type Rect = (f64, f64, f64, f64);

fn hex(c: plotters::style::RGBColor) -> String {
    format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2)
}

/// The value of attribute `name` in the tag `tag`.
fn attr(tag: &str, name: &str) -> Option<f64> {
    let at = tag.find(&format!(" {name}=\""))? + name.len() + 3;
    let end = tag[at..].find('"')? + at;
    tag[at..end].parse().ok()
}

/// The rectangles of `svg` stroked in `colour`.
fn rects(svg: &str, colour: &str) -> Vec<Rect> {
    svg.split('<')
        .filter(|t| {
            t.starts_with("rect ") && t.to_uppercase().contains(&format!("STROKE=\"{colour}\""))
        })
        .filter_map(|t| {
            let (x, y) = (attr(t, "x")?, attr(t, "y")?);
            Some((x, y, x + attr(t, "width")?, y + attr(t, "height")?))
        })
        .collect()
}

/// The anchor points of `svg`'s texts.
fn texts(svg: &str) -> Vec<(f64, f64)> {
    svg.split('<')
        .filter(|t| t.starts_with("text "))
        .filter_map(|t| Some((attr(t, "x")?, attr(t, "y")?)))
        .collect()
}

fn meet(a: Rect, b: Rect) -> bool {
    a.0 < b.2 && b.0 < a.2 && a.1 < b.3 && b.1 < a.3
}

/// What is wrong with one SVG, in words (empty: nothing).
fn faults(svg: &str) -> Vec<String> {
    let plots = rects(svg, &hex(FRAME));
    let legends = rects(svg, &hex(LEGEND_BORDER));
    let mut out = Vec::new();
    if plots.is_empty() && !svg.contains("no data") {
        out.push("no plotting area found (no rectangle stroked in chart::FRAME)".into());
    }
    for l in &legends {
        for p in &plots {
            if meet(*l, *p) {
                out.push(format!("legend {l:?} overlaps plotting area {p:?}"));
            }
        }
        let inside = texts(svg)
            .into_iter()
            .filter(|&(x, y)| x >= l.0 && x <= l.2 && y >= l.1 && y <= l.3)
            .count();
        if inside > MAX_SERIES {
            out.push(format!(
                "legend {l:?} has {inside} entries, more than {MAX_SERIES}"
            ));
        }
    }
    out
}

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
    let mut legends = 0;
    for f in &files {
        let svg = std::fs::read_to_string(f).unwrap();
        legends += rects(&svg, &hex(LEGEND_BORDER)).len();
        for fault in faults(&svg) {
            all.push(format!(
                "{}: {fault}",
                f.file_name().unwrap().to_string_lossy()
            ));
        }
    }
    assert!(
        legends > 0,
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
    assert_eq!(rects(&svg, &hex(LEGEND_BORDER)).len(), 1, "one legend");
    assert_eq!(rects(&svg, &hex(FRAME)).len(), 1, "one plotting area");
    assert_eq!(faults(&svg), Vec::<String>::new());
}

/// The checks see what they are meant to: a legend drawn over the plot, and a legend
/// of too many entries, are both caught.
#[test]
fn the_geometry_checks_catch_an_overlap_and_a_crowded_legend() {
    let frame = hex(FRAME);
    let legend = hex(LEGEND_BORDER);
    let over = format!(
        "<svg><rect x=\"70\" y=\"40\" width=\"600\" height=\"300\" stroke=\"{frame}\"/><rect x=\"80\" y=\"50\" width=\"100\" height=\"40\" stroke=\"{legend}\"/></svg>"
    );
    assert!(
        faults(&over).iter().any(|f| f.contains("overlaps")),
        "{:?}",
        faults(&over)
    );
    let mut crowded = format!(
        "<svg><rect x=\"70\" y=\"40\" width=\"600\" height=\"300\" stroke=\"{frame}\"/><rect x=\"700\" y=\"40\" width=\"100\" height=\"300\" stroke=\"{legend}\"/>"
    );
    for i in 0..13 {
        crowded.push_str(&format!(
            "<text x=\"710\" y=\"{}\">s{i}</text>",
            50 + i * 18
        ));
    }
    assert!(
        faults(&crowded).iter().any(|f| f.contains("13 entries")),
        "{:?}",
        faults(&crowded)
    );
}
