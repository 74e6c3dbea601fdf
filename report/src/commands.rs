//! The `crossbench table | compare | plot | report` subcommands, as functions the
//! binary calls with parsed arguments. Each returns what to print; files are
//! written where the arguments say.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::cell::{self, CellRecord};
use crate::error::ReportError;
use crate::{cardinality, ceiling, compare, cost_table, html, plot, published, reproducing};

/// Which table(s) `crossbench table` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableKind {
    Cost,
    Ceiling,
    Cardinality,
    /// What each cell's faults did (only asked for by name: `all` leaves it out).
    Faults,
    All,
}

/// Output format of `crossbench table`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableFormat {
    Markdown,
    Csv,
}

pub fn table(
    cells: &[String],
    kind: TableKind,
    format: TableFormat,
) -> Result<String, ReportError> {
    let records = cell::load_all(cells)?;
    let mut tables = Vec::new();
    // A campaign: its arms' medians and intervals first; a ceiling search: its interval.
    for a in cells {
        let p = Path::new(a);
        if crate::campaign::is_campaign(p) {
            tables.push(crate::campaign::table(
                &crate::campaign::CampaignView::load(p)?,
            ));
        }
    }
    let mut searches: Vec<PathBuf> = Vec::new();
    for p in cells.iter().map(PathBuf::from) {
        if ceiling::is_search(&p) {
            searches.push(p);
        } else if ceiling::is_campaign(&p) {
            searches.extend(ceiling::campaign_searches(&p)?);
        }
    }
    if !searches.is_empty() && matches!(kind, TableKind::Ceiling | TableKind::All) {
        tables.push(ceiling::searches(&searches)?);
    }
    if matches!(kind, TableKind::Cost | TableKind::All) {
        tables.push(cost_table::build(&records));
    }
    if matches!(kind, TableKind::Ceiling | TableKind::All) {
        tables.push(ceiling::build(&records));
    }
    if matches!(kind, TableKind::Cardinality | TableKind::All) {
        tables.push(cardinality::build(&records));
    }
    if kind == TableKind::Faults {
        tables.push(crate::faults_table::build(&records));
    }
    Ok(tables
        .iter()
        .map(|t| match format {
            TableFormat::Markdown => t.to_markdown(),
            TableFormat::Csv => t.to_csv(),
        })
        .collect::<Vec<_>>()
        .join("\n"))
}

/// `crossbench compare <cell> --published <id>`; for a campaign's directory, the arm
/// `arm` (default: the arm named like the published cell).
pub fn compare_one(
    cell_dir: &Path,
    published_dir: &Path,
    id: &str,
    arm: Option<&str>,
) -> Result<String, ReportError> {
    let p = published::find(published_dir, id)?;
    if crate::campaign::is_campaign(cell_dir) {
        let v = crate::campaign::CampaignView::load(cell_dir)?;
        let want = arm.unwrap_or(id);
        let a = v.arm(want).ok_or_else(|| ReportError::NoMatch {
            pattern: format!(
                "arm {want} in {} (its arms: {})",
                cell_dir.display(),
                v.arms
                    .iter()
                    .map(|a| a.id.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        })?;
        return Ok(compare::compare_arm(&p, a).to_markdown());
    }
    let c = CellRecord::load(cell_dir)?;
    Ok(compare::compare(&p, &c).to_markdown())
}

/// `crossbench compare --doc <file> --campaign <dir> [--campaign <dir> …]`:
/// docs/reproducing.md from a reproduce campaign (arms named by published id).
///
/// Several directories of one campaign file are its sittings on different days or
/// machines: a cell takes its figures from the first directory whose arm for it ran
/// (all of them from that one). Directories of different campaigns are refused.
///
/// `pairs` (`ID=CELL_DIR`) give earlier single runs of cells no directory ran here; a
/// pair for a cell a directory ran is refused (its repeats stand for it).
pub fn doc_campaign(
    published_dir: &Path,
    campaigns: &[PathBuf],
    pairs: &[String],
    out: &Path,
) -> Result<String, ReportError> {
    let all = published::load_dir(published_dir)?;
    let mut views = Vec::with_capacity(campaigns.len());
    for dir in campaigns {
        views.push(crate::campaign::CampaignView::load(dir)?);
    }
    let Some(first) = views.first() else {
        return Err(ReportError::BadPattern {
            pattern: "--campaign".into(),
            message: "give at least one campaign directory".into(),
        });
    };
    if let Some(other) = views.iter().find(|v| v.name != first.name) {
        return Err(ReportError::BadPattern {
            pattern: format!("--campaign {}", other.dir.display()),
            message: format!(
                "{} is campaign {}, {} is campaign {}: one page shows one campaign's directories \
(its sittings); give directories of one campaign file",
                first.dir.display(),
                first.name,
                other.dir.display(),
                other.name
            ),
        });
    }
    let singles = parse_pairs(&all, published_dir, pairs)?;
    for id in singles.keys() {
        if let Some((v, a)) = crate::campaign::first_that_ran(&views, id) {
            return Err(ReportError::BadPattern {
                pattern: format!("{id}=…"),
                message: format!(
                    "campaign {} ran {id} in {} ({} repeats): its figures stand for the cell; drop this --pair",
                    v.name,
                    v.dir.display(),
                    a.cells.len()
                ),
            });
        }
    }
    let mut command = format!(
        "crossbench compare --published-dir {} --doc {}",
        published_dir.display(),
        out.display()
    );
    for dir in campaigns {
        command.push_str(" \\\n  --campaign ");
        command.push_str(&dir.display().to_string());
    }
    for pair in pairs {
        command.push_str(" \\\n  --pair ");
        command.push_str(pair);
    }
    let text = reproducing::render_campaign(&all, &views, &singles, &command);
    std::fs::write(out, &text).map_err(|e| ReportError::io(out, e))?;
    Ok(format!(
        "wrote {} from campaign {} ({} director{})\n",
        out.display(),
        first.name,
        views.len(),
        if views.len() == 1 { "y" } else { "ies" }
    ))
}

/// `crossbench compare --list`: id, group, system and shape of every published cell.
pub fn list(published_dir: &Path) -> Result<String, ReportError> {
    let cells = published::load_dir(published_dir)?;
    let mut s = String::new();
    for p in &cells {
        s.push_str(&format!(
            "{:<22} {:<30} {:<9} {}\n",
            p.id,
            p.group,
            p.system,
            compare::shape_line(p)
        ));
    }
    Ok(s)
}

/// `--pair ID=CELL_DIR` arguments: each a published id and the cell that reproduces it.
fn parse_pairs(
    all: &[published::PublishedCell],
    published_dir: &Path,
    pairs: &[String],
) -> Result<BTreeMap<String, CellRecord>, ReportError> {
    let mut map = BTreeMap::new();
    for pair in pairs {
        let Some((id, dir)) = pair.split_once('=') else {
            return Err(ReportError::BadPattern {
                pattern: pair.clone(),
                message:
                    "--pair takes ID=CELL_DIR, e.g. --pair MX-pgmq-sparse=results/runs/pgmq-sparse"
                        .into(),
            });
        };
        if !all.iter().any(|p| p.id == id) {
            return Err(ReportError::UnknownPublished {
                id: id.to_string(),
                dir: published_dir.to_path_buf(),
            });
        }
        map.insert(id.to_string(), CellRecord::load(Path::new(dir))?);
    }
    Ok(map)
}

/// `crossbench compare --doc <file> --pair ID=DIR …`: write docs/reproducing.md.
pub fn doc(published_dir: &Path, pairs: &[String], out: &Path) -> Result<String, ReportError> {
    let all = published::load_dir(published_dir)?;
    let map = parse_pairs(&all, published_dir, pairs)?;
    let mut command = format!(
        "crossbench compare --published-dir {} --doc {}",
        published_dir.display(),
        out.display()
    );
    for pair in pairs {
        command.push_str(" \\\n  --pair ");
        command.push_str(pair);
    }
    let text = reproducing::render(&all, &map, &command);
    std::fs::write(out, &text).map_err(|e| ReportError::io(out, e))?;
    Ok(format!(
        "wrote {} ({} published cells, {} paired with a measured cell)\n",
        out.display(),
        all.len(),
        map.len()
    ))
}

/// Which plots `crossbench plot` draws.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlotKind {
    Cdf,
    Sweep,
    Timeseries,
    All,
}

pub fn plot(cells: &[String], kind: PlotKind, out: &Path) -> Result<String, ReportError> {
    let records = cell::load_all(cells)?;
    let refs: Vec<&CellRecord> = records.iter().collect();
    let mut pics = Vec::new();
    if matches!(kind, PlotKind::Cdf | PlotKind::All) {
        pics.push(plot::cdf::plot(&refs, &out.join("latency-cdf"))?);
    }
    if matches!(kind, PlotKind::Sweep | PlotKind::All) {
        let (stream, pipeline) = (
            plot::sweep::rates(&refs, true),
            plot::sweep::rates(&refs, false),
        );
        if stream > 0 {
            pics.push(plot::sweep::plot_stream(
                &refs,
                &out.join("latency-vs-push-rate"),
            )?);
        }
        if stream == 0 || pipeline > 0 {
            pics.push(plot::sweep::plot(&refs, &out.join("latency-vs-rate"))?);
        }
    }
    if matches!(kind, PlotKind::Timeseries | PlotKind::All) {
        for c in &records {
            let base = out.join(format!("{}-timeseries", plot::slug(&c.name())));
            pics.push(plot::timeseries::plot(c, &base)?);
        }
    }
    Ok(pics
        .iter()
        .map(|p| format!("{}: {} {}\n", p.title, p.png.display(), p.svg.display()))
        .collect())
}

pub fn report(
    cells: &[String],
    out: &Path,
    opts: html::PageOptions,
) -> Result<PathBuf, ReportError> {
    let records = cell::load_all(cells)?;
    let campaigns = cells
        .iter()
        .map(Path::new)
        .filter(|p| crate::campaign::is_campaign(p))
        .map(crate::campaign::CampaignView::load)
        .collect::<Result<Vec<_>, _>>()?;
    let gates = cells
        .iter()
        .map(Path::new)
        .filter(|p| crate::gate::is_gate(p))
        .map(crate::gate::GateView::load)
        .collect::<Result<Vec<_>, _>>()?;
    let sources = html::Sources {
        cells: &records,
        campaigns: &campaigns,
        gates: &gates,
    };
    Ok(html::write_page(&sources, out, opts)?.index)
}
