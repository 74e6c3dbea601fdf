//! The HTML report: a page with no external scripts, styles or fonts (it opens
//! offline) with the tables, the plots, each cell's verdict and invocation, and
//! relative links to the raw files. The plots are PNG and SVG files beside it
//! (`plots/`), or inline as `data:` URIs with [`PageOptions::inline`] for one
//! self-contained file. Also writes the tables as Markdown and CSV.
//!
//! Given campaigns, the page is organised by arm: one latency CDF per workload shape
//! with one line per arm (the median of its repeats, the repeats faint behind it),
//! and each arm's cells (record, verdict, time series) on a page of their own under
//! `arms/`, linked from the campaign's section. Given a gate's record, the page
//! shows its verdict, its picture (each metric's ratio against its τ band) and its
//! table, its legs' cells on a page under `gates/`. Only cells of no arm and no gate
//! stay on the main page.

use std::fmt::Write;
use std::path::{Component, Path, PathBuf};

use base64::Engine;

use cell_record::Outcome;

use crate::cell::CellRecord;
use crate::error::ReportError;
use crate::plot::{self, Picture};
use crate::table::{esc, Table};
use crate::{cardinality, ceiling, cost_table};

const CSS: &str = "body{font-family:sans-serif;margin:2em auto;padding:0 1em;max-width:1240px;color:#222;line-height:1.4}
h1{font-size:1.6em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:2em}
table{border-collapse:collapse;margin:.5em 0 1.2em;font-size:.85em}
th,td{border:1px solid #ccc;padding:.25em .5em;text-align:right;white-space:nowrap;vertical-align:top}th{background:#f2f2f2;white-space:normal;vertical-align:bottom}
.ci{color:#666;font-size:.85em}td.prose{white-space:normal;min-width:10em;text-align:left}td[title]{text-decoration:underline dotted #999}
td:first-child,th:first-child{text-align:left}
.note{background:#fff8e1;border-left:4px solid #f0ad4e;padding:.3em .6em;margin:.3em 0;font-size:.9em}
.t-cost-to-serve{font-size:.72em}.t-cost-to-serve th,.t-cost-to-serve td{padding:.15em .25em}
.section{font-weight:bold;margin:.8em 0 .2em}
.PASS{color:#1b7f3b;font-weight:bold}.FAIL{color:#b00020;font-weight:bold}.VOID{color:#8a6d00;font-weight:bold}
pre{background:#f6f6f6;padding:.6em;overflow-x:auto;font-size:.85em;white-space:pre-wrap}
.wide{overflow-x:auto}img{max-width:100%;border:1px solid #ddd}figure{margin:1em 0}figcaption{font-size:.9em;color:#555}";

/// Marks images that did not decode, counts script errors and the tables wider
/// than the page (their box scrolls), so a headless browser's DOM dump tells
/// whether the page rendered whole and fits its window.
const CHECK_SCRIPT: &str = "window.__errors=0;window.addEventListener('error',function(){window.__errors++;document.body.setAttribute('data-script-errors',String(window.__errors));});
window.addEventListener('load',function(){var ok=0,bad=0;document.querySelectorAll('img').forEach(function(i){if(i.complete&&i.naturalWidth>0){ok++;}else{bad++;i.setAttribute('data-broken','1');}});
document.body.setAttribute('data-images-ok',String(ok));document.body.setAttribute('data-images-broken',String(bad));document.body.setAttribute('data-script-errors',String(window.__errors));
var wide=[];document.querySelectorAll('.wide').forEach(function(d){if(d.scrollWidth>d.clientWidth+1){var t=d.querySelector('table');wide.push((t?t.className:'?')+' '+d.scrollWidth+'>'+d.clientWidth);}});document.body.setAttribute('data-tables-overflowing',String(wide.length));document.body.setAttribute('data-tables-overflowing-which',wide.join('; '));document.body.setAttribute('data-viewport-width',String(window.innerWidth));});";

/// What `write` produced.
#[derive(Debug, Clone)]
pub struct Written {
    pub index: PathBuf,
    pub pictures: Vec<Picture>,
    pub tables: Vec<Table>,
}

/// How the page is written.
#[derive(Debug, Clone, Copy, Default)]
pub struct PageOptions {
    /// Pictures inline as `data:` URIs (one self-contained file) instead of links
    /// to the files beside the page.
    pub inline: bool,
}

/// Build the report for `cells` into `out` (created if needed).
pub fn write(cells: &[CellRecord], out: &Path) -> Result<Written, ReportError> {
    write_with(cells, &[], out)
}

/// Build the report for `cells` and, one section each, the `campaigns` they came
/// from (their arms' medians with intervals), pictures as files.
pub fn write_with(
    cells: &[CellRecord],
    campaigns: &[crate::campaign::CampaignView],
    out: &Path,
) -> Result<Written, ReportError> {
    let sources = Sources {
        cells,
        campaigns,
        gates: &[],
    };
    write_page(&sources, out, PageOptions::default())
}

/// What a page is built from: the cells, and the campaigns and gates some of them
/// came from (each gets a section, its cells a page of their own).
#[derive(Debug, Clone, Copy)]
pub struct Sources<'a> {
    pub cells: &'a [CellRecord],
    pub campaigns: &'a [crate::campaign::CampaignView],
    pub gates: &'a [crate::gate::GateView],
}

/// A cell directory as a key that matches however the path was spelled.
fn key(dir: &Path) -> PathBuf {
    std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf())
}

/// A cell's workload shape, the unit its CDF is drawn in.
fn shape(c: &CellRecord) -> String {
    let w = &c.result.workload;
    if c.is_stream() {
        format!(
            "stream, {} msg/s over {} partitions",
            c.offered_rate(),
            w.space
        )
    } else {
        format!("{} ev/s over {} keys", c.offered_rate(), w.properties)
    }
}

/// The file of an arm's page, relative to the report's directory.
fn arm_page(campaign: &str, arm: &str) -> String {
    format!("arms/{}--{}.html", plot::slug(campaign), plot::slug(arm))
}

/// The file of a gate's legs' page, relative to the report's directory.
fn gate_page(gate: &str) -> String {
    format!("gates/{}.html", plot::slug(gate))
}

/// Build the report as `opts` say.
pub fn write_page(
    sources: &Sources<'_>,
    out: &Path,
    opts: PageOptions,
) -> Result<Written, ReportError> {
    let Sources {
        cells,
        campaigns,
        gates,
    } = *sources;
    std::fs::create_dir_all(out).map_err(|e| ReportError::io(out, e))?;
    let plots = out.join("plots");
    let refs: Vec<&CellRecord> = cells.iter().collect();
    let in_arms: std::collections::BTreeSet<PathBuf> = campaigns
        .iter()
        .flat_map(|c| {
            c.arms
                .iter()
                .flat_map(|a| a.cells.iter().map(|x| key(&x.dir)))
        })
        .chain(
            gates
                .iter()
                .flat_map(|g| g.legs.iter().map(|(_, x)| key(&x.dir))),
        )
        .collect();
    let loose: Vec<&CellRecord> = cells
        .iter()
        .filter(|c| !in_arms.contains(&key(&c.dir)))
        .collect();
    let mut pictures = Vec::new();
    if !loose.is_empty() || campaigns.is_empty() {
        pictures.push(plot::cdf::plot(&loose, &plots.join("latency-cdf"))?);
    }
    for c in campaigns {
        let mut shapes: std::collections::BTreeMap<String, Vec<plot::cdf::Arm<'_>>> =
            std::collections::BTreeMap::new();
        for a in &c.arms {
            let Some(first) = a.cells.first() else {
                continue;
            };
            shapes
                .entry(shape(first))
                .or_default()
                .push(plot::cdf::Arm {
                    name: a.id.clone(),
                    cells: a.cells.iter().filter(|x| !x.is_void()).collect(),
                });
        }
        for (sh, arms) in &shapes {
            let base = plots.join(format!(
                "{}-latency-cdf-{}",
                plot::slug(&c.name),
                plot::slug(sh)
            ));
            pictures.push(plot::cdf::plot_arms(
                arms,
                &format!("{}, {sh}", c.name),
                &base,
            )?);
        }
    }
    if plot::sweep::rates(&refs, false) > 1 {
        pictures.push(plot::sweep::plot(&refs, &plots.join("latency-vs-rate"))?);
    }
    if plot::sweep::rates(&refs, true) > 1 {
        pictures.push(plot::sweep::plot_stream(
            &refs,
            &plots.join("latency-vs-push-rate"),
        )?);
    }
    let mut per_cell = Vec::new();
    for (i, c) in loose.iter().enumerate() {
        let base = plots.join(format!("{:02}-{}-timeseries", i + 1, plot::slug(&c.name())));
        per_cell.push(plot::timeseries::plot(c, &base)?);
    }
    let tables = vec![
        cost_table::build(cells),
        ceiling::build(cells),
        cardinality::build(cells),
    ];
    for (t, name) in tables
        .iter()
        .zip(["cost-to-serve", "ceiling", "cardinality"])
    {
        for (ext, body) in [("md", t.to_markdown()), ("csv", t.to_csv())] {
            let p = out.join(format!("{name}.{ext}"));
            std::fs::write(&p, body).map_err(|e| ReportError::io(&p, e))?;
        }
    }
    let mut s = String::new();
    head(
        &mut s,
        &format!("crossbench report: {} cell(s)", cells.len()),
    );
    let _ = writeln!(s, "<h1>crossbench report</h1>\n<p>{} cell(s). Every table and picture on this page is built from the cell records linked below. Tables also as Markdown and CSV: {}.</p>",
        cells.len(),
        ["cost-to-serve", "ceiling", "cardinality"].iter().map(|n| format!("<a href=\"{n}.md\">{n}.md</a> <a href=\"{n}.csv\">csv</a>")).collect::<Vec<_>>().join(", "));
    let mut arm_pictures = Vec::new();
    for c in campaigns {
        let _ = writeln!(s, "<h2>Campaign {}</h2>", esc(&c.name));
        if !c.description.is_empty() {
            let _ = writeln!(s, "<p>{}</p>", esc(&c.description));
        }
        let _ = writeln!(
            s,
            "<p>{} repeats per arm, order seed {}, status {}; <a href=\"{}\">campaign.json</a>.</p>",
            c.repeats,
            c.seed,
            esc(&c.status),
            esc(&relative(out, &c.dir.join("campaign.json")))
        );
        s.push_str(&crate::campaign::table(c).to_html());
        let mut links = Vec::new();
        for a in c.arms.iter().filter(|a| !a.cells.is_empty()) {
            let page = arm_page(&c.name, &a.id);
            arm_pictures.extend(write_arm_page(c, a, out, &out.join(&page), opts)?);
            links.push(format!(
                "<a href=\"{}\">{}</a> ({})",
                esc(&page),
                esc(&a.id),
                a.cells.len()
            ));
        }
        if !links.is_empty() {
            let _ = writeln!(
                s,
                "<p>Each arm's cells, with their records, verdicts and time series, on a page of their own: {}.</p>",
                links.join(" · ")
            );
        }
    }
    for g in gates {
        arm_pictures.extend(gate_section(&mut s, g, out, opts)?);
    }
    let _ = writeln!(s, "<h2>Tables</h2>");
    for t in &tables {
        s.push_str(&t.to_html());
    }
    let _ = writeln!(s, "<h2>Plots</h2>");
    for p in &pictures {
        figure(&mut s, p, out, opts)?;
    }
    if !loose.is_empty() {
        let _ = writeln!(s, "<h2>Cells</h2>");
        for (c, p) in loose.iter().zip(&per_cell) {
            cell_section(&mut s, c, p, out, opts)?;
        }
    }
    let _ = writeln!(s, "</body></html>");
    let index = out.join("index.html");
    std::fs::write(&index, s).map_err(|e| ReportError::io(&index, e))?;
    pictures.extend(per_cell);
    pictures.extend(arm_pictures);
    Ok(Written {
        index,
        pictures,
        tables,
    })
}

/// The document's head, up to and including `<body>`.
fn head(s: &mut String, title: &str) {
    let _ = writeln!(
        s,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<meta name=\"generator\" content=\"crossbench report v{}\">\n<title>{}</title>\n<style>{CSS}</style>\n<script>{CHECK_SCRIPT}</script>\n</head><body>",
        crate::OUTPUT_VERSION,
        esc(title)
    );
}

/// One arm's page at `page`: each of its cells' sections, time series included.
fn write_arm_page(
    c: &crate::campaign::CampaignView,
    a: &crate::campaign::ArmView,
    out: &Path,
    page: &Path,
    opts: PageOptions,
) -> Result<Vec<Picture>, ReportError> {
    let plots = out.join("plots").join("arms").join(format!(
        "{}--{}",
        plot::slug(&c.name),
        plot::slug(&a.id)
    ));
    let intro = format!(
        "<h1>Arm {} of campaign {}</h1>\n<p>System {}{}; {} cell(s): {}.</p>",
        esc(&a.id),
        esc(&c.name),
        esc(&a.system),
        if a.point.is_empty() {
            String::new()
        } else {
            let point: Vec<String> = a.point.iter().map(|(k, v)| format!("{k}={v}")).collect();
            format!("; {}", esc(&point.join(", ")))
        },
        a.cells.len(),
        esc(&a.outcomes.label())
    );
    let cells: Vec<(String, &CellRecord)> = a
        .cells
        .iter()
        .enumerate()
        .map(|(i, cell)| {
            let repeat = cell.dir.file_name().map_or_else(
                || format!("{}", i + 1),
                |n| n.to_string_lossy().into_owned(),
            );
            (format!("Repeat {repeat}"), cell)
        })
        .collect();
    let title = format!("crossbench report: arm {} of {}", a.id, c.name);
    write_cells_page(&title, &intro, &cells, out, page, &plots, opts)
}

/// A page of cells at `page` (an arm's repeats, a gate's legs): `intro`, then each
/// cell under its heading with its section, time series included (drawn under
/// `plots`).
fn write_cells_page(
    title: &str,
    intro: &str,
    cells: &[(String, &CellRecord)],
    out: &Path,
    page: &Path,
    plots: &Path,
    opts: PageOptions,
) -> Result<Vec<Picture>, ReportError> {
    let dir = page.parent().unwrap_or(out);
    std::fs::create_dir_all(dir).map_err(|e| ReportError::io(dir, e))?;
    let mut s = String::new();
    head(&mut s, title);
    let _ = writeln!(
        s,
        "<p><a href=\"{}\">← the report</a></p>\n{intro}",
        esc(&relative(dir, &out.join("index.html"))),
    );
    let mut pictures = Vec::new();
    for (i, (heading, cell)) in cells.iter().enumerate() {
        let _ = writeln!(s, "<h2>{}</h2>", esc(heading));
        let base = plots.join(format!(
            "{:02}-{}-timeseries",
            i + 1,
            plot::slug(&cell.name())
        ));
        let p = plot::timeseries::plot(cell, &base)?;
        cell_section(&mut s, cell, &p, dir, opts)?;
        pictures.push(p);
    }
    let _ = writeln!(s, "</body></html>");
    std::fs::write(page, s).map_err(|e| ReportError::io(page, e))?;
    Ok(pictures)
}

/// A gate's section on the main page: its verdict, its picture (each metric's
/// ratio against its τ band), its table, links to its record; its legs' cells on a
/// page of their own. Returns the pictures of that page and the section's own.
fn gate_section(
    s: &mut String,
    g: &crate::gate::GateView,
    out: &Path,
    opts: PageOptions,
) -> Result<Vec<Picture>, ReportError> {
    let r = &g.record;
    let name = g.name();
    let _ = writeln!(
        s,
        "<h2>Gate {}: <span class=\"{}\">{}</span></h2>",
        esc(&name),
        match r.verdict {
            crate::gate::Verdict::Pass => "PASS",
            crate::gate::Verdict::Inconclusive => "VOID",
            _ => "FAIL",
        },
        esc(r.verdict_words())
    );
    let _ = writeln!(
        s,
        "<p><code>{}</code>: baseline <code>{}</code> against candidate <code>{}</code>; <a href=\"{}\">gate.json</a>.</p>",
        esc(&r.scenario),
        esc(&r.baseline_sets.join(" ")),
        esc(&r.candidate_sets.join(" ")),
        esc(&relative(out, &g.dir.join("gate.json")))
    );
    let pic = r.picture(
        &out.join("plots")
            .join(format!("gate-{}", plot::slug(&name))),
    )?;
    figure(s, &pic, out, opts)?;
    s.push_str(&r.table(&format!("gate {name}")).to_html());
    let mut pictures = vec![pic];
    if !g.legs.is_empty() {
        let page = gate_page(&name);
        let legs: Vec<(String, &CellRecord)> = g.legs.iter().map(|(l, c)| (l.clone(), c)).collect();
        let intro = format!(
            "<h1>Gate {}: its legs</h1>\n<p>{} leg(s) that left a cell record, in the order gate.json lists them; verdict {}.</p>",
            esc(&name),
            legs.len(),
            esc(r.verdict_words())
        );
        pictures.extend(write_cells_page(
            &format!("crossbench report: gate {name}"),
            &intro,
            &legs,
            out,
            &out.join(&page),
            &out.join("plots").join("gates").join(plot::slug(&name)),
            opts,
        )?);
        let _ = writeln!(
            s,
            "<p>Each leg's record, verdict and time series: <a href=\"{}\">the gate's legs</a> ({}).</p>",
            esc(&page),
            legs.len()
        );
    }
    Ok(pictures)
}

fn figure(s: &mut String, p: &Picture, out: &Path, opts: PageOptions) -> Result<(), ReportError> {
    let src = if opts.inline {
        let bytes = std::fs::read(&p.png).map_err(|e| ReportError::io(&p.png, e))?;
        format!(
            "data:image/png;base64,{}",
            base64::engine::general_purpose::STANDARD.encode(bytes)
        )
    } else {
        relative(out, &p.png)
    };
    let _ = writeln!(
        s,
        "<figure><img alt=\"{t}\" src=\"{src}\"><figcaption>{t} (<a href=\"{png}\">PNG</a>, <a href=\"{svg}\">SVG</a>)</figcaption></figure>",
        t = esc(&p.title),
        src = esc(&src),
        png = esc(&relative(out, &p.png)),
        svg = esc(&relative(out, &p.svg)),
    );
    Ok(())
}

fn cell_section(
    s: &mut String,
    c: &CellRecord,
    p: &Picture,
    out: &Path,
    opts: PageOptions,
) -> Result<(), ReportError> {
    let r = &c.result;
    // The outcomes the page's style sheet colours.
    let outcome = match r.outcome {
        o @ (Outcome::Pass | Outcome::Fail | Outcome::Void) => o.name(),
        _ => "",
    };
    let _ = writeln!(
        s,
        "<h3 id=\"{id}\">{name}</h3>\n<p>{sys}, durability tier {tier}, {shape}, {rated:.0} s rated, started {start} on {host} ({cores} cores). Outcome: <span class=\"{outcome}\">{o}</span>; checker verdict: {verdict}.</p>",
        id = esc(&plot::slug(&c.name())),
        name = esc(&c.name()),
        sys = esc(&c.system_label()),
        tier = esc(&crate::comparability::tier(c)),
        shape = if c.is_stream() {
            format!(
                "stream workload, {} msg/s over {} partitions",
                c.offered_rate(),
                r.workload.space
            )
        } else {
            format!("R = {}, P = {}", c.offered_rate(), r.workload.properties)
        },
        rated = r.time.rated_sec,
        start = esc(&r.time.started_utc),
        host = esc(&r.host.cpu_model),
        cores = r.host.cores,
        o = r.outcome,
        verdict = if r.verdict.pass { "PASS" } else { "FAIL" },
    );
    provenance(s, &c.result);
    resources(s, &c.result);
    let reasons: Vec<&String> = r
        .verdict
        .reasons
        .iter()
        .chain(&r.void.reasons)
        .chain(&r.warnings)
        .collect();
    if !reasons.is_empty() {
        let _ = writeln!(s, "<ul>");
        for x in reasons {
            let _ = writeln!(s, "<li>{}</li>", esc(x));
        }
        let _ = writeln!(s, "</ul>");
    }
    let _ = writeln!(
        s,
        "<p>Invocation:</p><pre>{}</pre>",
        esc(c.command.as_deref().unwrap_or("(no invocation.txt)"))
    );
    let links: Vec<String> = c
        .raw_files()
        .iter()
        .map(|f| {
            format!(
                "<a href=\"{}\">{f}</a>",
                esc(&relative(out, &c.dir.join(f)))
            )
        })
        .collect();
    let _ = writeln!(s, "<p>Raw files: {}</p>", links.join(" · "));
    figure(s, p, out, opts)
}

/// The cell's builds: the loader's (`crossbench`, flagged when dirty) and the system's
/// (`provenance`: product, version, the build the scenario states, settings), from the
/// record as the record crate reads it (records before 2026-12 have no `provenance`:
/// left out).
fn provenance(s: &mut String, r: &cell_record::CellResult) {
    let cb = &r.crossbench;
    let commit = if cb.git_commit.is_empty() {
        "unknown"
    } else {
        cb.git_commit.as_str()
    };
    let _ = write!(
        s,
        "<p>Loader build: crossbench {} (git {}){}",
        esc(&cb.version),
        esc(commit),
        if cb.is_dirty() {
            " <span class=\"FAIL\">DIRTY: built from a modified tree, no commit in the history is this build</span>"
        } else {
            ""
        }
    );
    if let Some(p) = &r.provenance {
        let map = |m: &std::collections::BTreeMap<String, String>| {
            m.iter()
                .map(|(k, x)| format!("{k}={x}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let _ = write!(
            s,
            ". System: {} {} (as the server reports it)",
            esc(&p.product),
            esc(p.version.as_deref().unwrap_or("version not reported"))
        );
        if let Some(c) = &p.caveat {
            let _ = write!(s, " <span class=\"VOID\">not the build: {}</span>", esc(c));
        }
        let _ = write!(
            s,
            "; build stated: {}",
            esc(p.stated_build.as_deref().unwrap_or("none"))
        );
        for (label, m) in [("reported", &p.reported), ("settings", &p.settings)] {
            let m = map(m);
            if !m.is_empty() {
                let _ = write!(s, "; {label}: {}", esc(&m));
            }
        }
        if !p.notes.is_empty() {
            let _ = write!(s, "; notes: {}", esc(&p.notes.join("; ")));
        }
    }
    let _ = writeln!(s, ".</p>");
}

/// The cell's resource budget (`resources`, issue 42): the label of the budget
/// asked, what was enforced and how (or why not), and each side's use against it.
/// A record without the block ran with no budget.
fn resources(s: &mut String, r: &cell_record::CellResult) {
    let label = cell_record::resources::Resources::label_of(r.resources.as_ref());
    let _ = write!(s, "<p>Resources: {}", esc(label));
    if let Some(b) = &r.resources {
        for e in &b.enforced {
            if e.ok {
                let _ = write!(s, "; {} {}: {}", esc(&e.side), esc(&e.what), esc(&e.how));
            } else {
                let _ = write!(
                    s,
                    "; <span class=\"VOID\">{} {} NOT ENFORCED: {}</span>",
                    esc(&e.side),
                    esc(&e.what),
                    esc(&e.how)
                );
            }
        }
        for u in &b.usage {
            let f = |x: Option<f64>| x.map_or("n/a".to_string(), |v| format!("{v:.2}"));
            let mib = |x: Option<f64>| {
                x.map_or("n/a".to_string(), |v| format!("{:.0} MiB", v / 1048576.0))
            };
            let _ = write!(
                s,
                "; {} used {} cores (peak {}) of {} granted, peak memory {} of {}",
                esc(&u.side),
                f(u.cores_mean),
                f(u.cores_peak),
                u.cores_granted
                    .map_or("none".to_string(), |g| format!("{g:.2}")),
                mib(u.memory_peak_bytes),
                u.memory_limit_bytes
                    .map_or("no limit".to_string(), |l| mib(Some(l as f64)))
            );
        }
    }
    let _ = writeln!(s, ".</p>");
}

/// `target` relative to the directory `from` (both made absolute first).
pub fn relative(from: &Path, target: &Path) -> String {
    let abs = |p: &Path| {
        let p = if p.is_absolute() {
            p.to_path_buf()
        } else {
            std::env::current_dir().unwrap_or_default().join(p)
        };
        let mut out = PathBuf::new();
        for comp in p.components() {
            match comp {
                Component::ParentDir => {
                    out.pop();
                }
                Component::CurDir => {}
                c => out.push(c),
            }
        }
        out
    };
    let (f, t) = (abs(from), abs(target));
    let fc: Vec<_> = f.components().collect();
    let tc: Vec<_> = t.components().collect();
    let common = fc.iter().zip(&tc).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<String> = vec!["..".to_string(); fc.len() - common];
    parts.extend(
        tc[common..]
            .iter()
            .map(|c| c.as_os_str().to_string_lossy().into_owned()),
    );
    parts.join("/")
}

#[cfg(test)]
mod tests {
    use super::relative;
    use std::path::Path;

    #[test]
    fn cell_section_names_a_dirty_loader_and_the_systems_provenance() {
        let r = cell_record::CellResult::parse(
            Path::new("x/result.json"),
            r#"{"schema_version":1,"outcome":"PASS","crossbench":{"version":"0.1.0","git_commit":"abc-dirty","dirty":true},
               "provenance":{"schema":1,"product":"Queen","version":"1.0.0","caveat":"answers 1.0.0 <always>",
               "stated_build":"ab23212","reported":{},"settings":{"store.fsync":"on"},"notes":[]}}"#,
        )
        .unwrap();
        let mut s = String::new();
        super::provenance(&mut s, &r);
        assert!(s.contains("git abc-dirty"), "{s}");
        assert!(s.contains("DIRTY"), "{s}");
        assert!(s.contains("Queen 1.0.0"), "{s}");
        assert!(
            s.contains("not the build: answers 1.0.0 &lt;always&gt;"),
            "{s}"
        );
        assert!(s.contains("build stated: ab23212"), "{s}");
        assert!(s.contains("settings: store.fsync=on"), "{s}");
    }

    #[test]
    fn cell_section_names_the_budget_and_what_was_enforced() {
        let none = cell_record::CellResult::parse(
            Path::new("x/result.json"),
            r#"{"schema_version":1,"outcome":"PASS"}"#,
        )
        .unwrap();
        let mut s = String::new();
        super::resources(&mut s, &none);
        assert!(s.contains("Resources: no budget"), "{s}");
        let r = cell_record::CellResult::parse(
            Path::new("x/result.json"),
            r#"{"schema_version":1,"outcome":"PASS","resources":{"schema":1,"label":"loader cpus 0 | system cpus 1",
               "enforced":[{"side":"system","what":"affinity","ok":true,"how":"affinity cpus 1 on 9 threads of 6 processes"},
                           {"side":"system","what":"memory","ok":false,"how":"no controller"}],
               "use":[{"side":"system","cores_mean":0.5,"cores_granted":1.0,"memory_peak_bytes":1048576}]}}"#,
        )
        .unwrap();
        let mut s = String::new();
        super::resources(&mut s, &r);
        assert!(s.contains("loader cpus 0 | system cpus 1"), "{s}");
        assert!(s.contains("on 9 threads of 6 processes"), "{s}");
        assert!(
            s.contains("system memory NOT ENFORCED: no controller"),
            "{s}"
        );
        assert!(
            s.contains(
                "system used 0.50 cores (peak n/a) of 1.00 granted, peak memory 1 MiB of no limit"
            ),
            "{s}"
        );
    }

    #[test]
    fn relative_links() {
        assert_eq!(
            relative(Path::new("/a/report"), Path::new("/a/runs/x/result.json")),
            "../runs/x/result.json"
        );
        assert_eq!(
            relative(Path::new("/a/report"), Path::new("/a/report/plots/p.png")),
            "plots/p.png"
        );
    }
}
