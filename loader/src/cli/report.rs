//! `crossbench table | compare | plot | report`: their arguments; the work is in the
//! `report` crate (report/src/commands.rs).

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, ValueEnum};
use report::commands::{self, PlotKind, TableFormat, TableKind};

#[derive(Debug, Args)]
pub struct TableArgs {
    /// Cell directories, directories of cells, or quoted globs (e.g. 'runs/pgmq-*').
    #[arg(required = true)]
    cells: Vec<String>,
    /// Which table.
    #[arg(long, value_enum, default_value_t = TableChoice::All)]
    kind: TableChoice,
    /// Markdown or CSV.
    #[arg(long, value_enum, default_value_t = FormatChoice::Md)]
    format: FormatChoice,
    /// Write to this file instead of stdout.
    #[arg(long)]
    out: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum TableChoice {
    Cost,
    Ceiling,
    Cardinality,
    /// What each cell's faults did (lost, duplicates, unavailability, recovery,
    /// leader changes); not part of `all`.
    Faults,
    All,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum FormatChoice {
    Md,
    Csv,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The measured cell directory, or a campaign's (then `--arm`).
    #[arg(required_unless_present_any = ["list", "doc"])]
    cell: Option<PathBuf>,
    /// With a campaign directory: the arm to compare (default: the arm named like
    /// the published cell).
    #[arg(long)]
    arm: Option<String>,
    /// Id of the published cell (file name in the published directory without .yaml).
    #[arg(long, required_unless_present_any = ["list", "doc"])]
    published: Option<String>,
    /// Directory of published cells.
    #[arg(long, default_value = "results/published")]
    published_dir: PathBuf,
    /// List the published cells and exit.
    #[arg(long, conflicts_with_all = ["cell", "published", "doc"])]
    list: bool,
    /// Write the reproducing page (every published cell, its command, and the pairs) to this file.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["cell", "published"])]
    doc: Option<PathBuf>,
    /// With --doc: a published id and the cell that reproduces it, ID=CELL_DIR
    /// (repeatable). With --campaign: an earlier single run of a cell the campaign did
    /// not run here, shown as one run.
    #[arg(long = "pair", value_name = "ID=CELL_DIR", requires = "doc")]
    pairs: Vec<String>,
    /// With --doc: a reproduce campaign whose arms are named by published id; the page
    /// gives medians with intervals. Repeatable: directories of one campaign file (its
    /// sittings), in order of precedence; each cell's repeats come from the first
    /// directory whose arm for it ran.
    #[arg(long, value_name = "DIR", requires = "doc")]
    campaign: Vec<PathBuf>,
}

#[derive(Debug, Args)]
pub struct PlotArgs {
    /// Cell directories, directories of cells, or quoted globs.
    #[arg(required = true)]
    cells: Vec<String>,
    /// Which plots.
    #[arg(long, value_enum, default_value_t = PlotChoice::All)]
    kind: PlotChoice,
    /// Directory for the PNG and SVG files.
    #[arg(long, default_value = "plots")]
    out: PathBuf,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum PlotChoice {
    Cdf,
    Sweep,
    Timeseries,
    All,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Cell directories, directories of cells, or quoted globs.
    #[arg(required = true)]
    cells: Vec<String>,
    /// Directory for index.html, the tables and the plots.
    #[arg(long, default_value = "report")]
    out: PathBuf,
    /// Put the pictures inside index.html (one self-contained file, several times
    /// larger) instead of linking the files written beside it under plots/.
    #[arg(long)]
    inline: bool,
}

fn emit(text: String, out: Option<&PathBuf>) -> anyhow::Result<()> {
    match out {
        Some(p) => std::fs::write(p, text).with_context(|| format!("writing {}", p.display())),
        None => {
            print!("{text}");
            Ok(())
        }
    }
}

pub fn table(a: TableArgs) -> anyhow::Result<crate::cli::exit::Exit> {
    let kind = match a.kind {
        TableChoice::Cost => TableKind::Cost,
        TableChoice::Ceiling => TableKind::Ceiling,
        TableChoice::Cardinality => TableKind::Cardinality,
        TableChoice::Faults => TableKind::Faults,
        TableChoice::All => TableKind::All,
    };
    let format = match a.format {
        FormatChoice::Md => TableFormat::Markdown,
        FormatChoice::Csv => TableFormat::Csv,
    };
    let text = commands::table(&a.cells, kind, format).context("building the tables")?;
    emit(text, a.out.as_ref())?;
    Ok(crate::cli::exit::Exit::Pass)
}

pub fn compare(a: CompareArgs) -> anyhow::Result<crate::cli::exit::Exit> {
    let text = if a.list {
        commands::list(&a.published_dir).context("listing the published cells")?
    } else if let (Some(doc), false) = (&a.doc, a.campaign.is_empty()) {
        commands::doc_campaign(&a.published_dir, &a.campaign, &a.pairs, doc)
            .context("writing the reproducing page")?
    } else if let Some(doc) = &a.doc {
        commands::doc(&a.published_dir, &a.pairs, doc).context("writing the reproducing page")?
    } else {
        let (Some(cell), Some(id)) = (&a.cell, &a.published) else {
            anyhow::bail!("give a cell directory and --published <id> (or --list, or --doc)");
        };
        commands::compare_one(cell, &a.published_dir, id, a.arm.as_deref())
            .with_context(|| format!("comparing {} with published {id}", cell.display()))?
    };
    emit(text, None)?;
    Ok(crate::cli::exit::Exit::Pass)
}

pub fn plot(a: PlotArgs) -> anyhow::Result<crate::cli::exit::Exit> {
    let kind = match a.kind {
        PlotChoice::Cdf => PlotKind::Cdf,
        PlotChoice::Sweep => PlotKind::Sweep,
        PlotChoice::Timeseries => PlotKind::Timeseries,
        PlotChoice::All => PlotKind::All,
    };
    let text = commands::plot(&a.cells, kind, &a.out).context("drawing the plots")?;
    emit(text, None)?;
    Ok(crate::cli::exit::Exit::Pass)
}

pub fn report(a: ReportArgs) -> anyhow::Result<crate::cli::exit::Exit> {
    let opts = report::html::PageOptions { inline: a.inline };
    let index = commands::report(&a.cells, &a.out, opts).context("building the report")?;
    println!("wrote {}", index.display());
    Ok(crate::cli::exit::Exit::Pass)
}
