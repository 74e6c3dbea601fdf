//! The live progress of a cell, once a second: a row of `report.csv`, the second's
//! histograms in the `.hlog` interval logs, and a line on the console. One runner
//! for every workload; each workload is a [`ProgressSource`] that says what its
//! columns, its interval logs and its console line hold.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::Arc;

use hdrhistogram::Histogram;
use tokio_util::sync::CancellationToken;

use crate::console::ticker::Ticker;
use crate::measure::clock::Clock;
use crate::measure::histograms::HlogWriter;
use crate::measure::phase::{Phase, PhaseCell};

/// One second of a workload's progress.
#[derive(Debug, Default)]
pub struct Second<'a> {
    /// The row's values after `t_s,unix_ms,phase`, comma-separated.
    pub row: String,
    /// Histograms of the second: (index in `hlogs()`, tag, histogram). The source
    /// keeps them, reused from second to second.
    pub intervals: Vec<(usize, String, &'a Histogram<u64>)>,
    /// The console line (only asked for when it is shown).
    pub line: Option<String>,
}

/// What a workload shows every second.
pub trait ProgressSource: Send {
    /// The first line of `report.csv`: `# crossbench report.csv v<N> …`.
    fn csv_comment(&self) -> String;
    /// The columns after `t_s,unix_ms,phase`.
    fn columns(&self) -> Vec<String>;
    /// The interval logs this source writes: (file name, comment).
    fn hlogs(&self) -> Vec<(String, String)>;
    /// The `t`-th second (1, 2, …), in `phase`; the console line only when `show`.
    fn second(&mut self, t: u64, phase: Phase, show: bool) -> Second<'_>;
    /// Totals the live metrics serve beyond `report.csv`'s columns, read from the
    /// counters the record reads: `(series, value)` (publish retries, reconnects).
    fn live_totals(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
}

/// Run the live progress until `stop` fires (a last row is written then): writes
/// `report.csv` and the interval logs into `dir`.
pub async fn run(
    mut source: Box<dyn ProgressSource>,
    dir: &Path,
    clock: Clock,
    quiet: bool,
    phase: Arc<PhaseCell>,
    stop: CancellationToken,
) -> std::io::Result<()> {
    let mut csv = BufWriter::new(File::create(dir.join("report.csv"))?);
    writeln!(csv, "{}", source.csv_comment())?;
    writeln!(csv, "t_s,unix_ms,phase,{}", source.columns().join(","))?;
    let start = clock.now_system();
    let mut hlogs = Vec::new();
    for (name, comment) in source.hlogs() {
        hlogs.push(HlogWriter::create(&dir.join(name), start, &comment)?);
    }
    let mut ticker = Ticker::start(clock, quiet).await;
    // The live metrics, when served, read each second as report.csv gets it.
    // Its phase is the cell's own, read at each scrape.
    let live = crate::console::live::hub().map(|l| {
        l.follow_phase(phase.clone());
        let names: Vec<String> = source.hlogs().into_iter().map(|(n, _)| n).collect();
        (l, source.columns(), names)
    });
    loop {
        let tick = ticker.next(&stop).await;
        let ph = phase.get();
        // Read just before the second's row, from the same counters.
        let totals = live.as_ref().map(|_| source.live_totals());
        let second = source.second(tick.t, ph, ticker.shows());
        if let Some((l, columns, names)) = &live {
            let hists: Vec<(&str, &str, &Histogram<u64>)> = second
                .intervals
                .iter()
                .map(|(i, tag, h)| (names[*i].as_str(), tag.as_str(), *h))
                .collect();
            l.second(columns, &second.row, &hists);
            l.totals(totals.as_deref().unwrap_or_default());
        }
        for (i, tag, h) in &second.intervals {
            hlogs[*i].write(tag, tick.start, tick.len, h)?;
        }
        writeln!(
            csv,
            "{},{},{},{}",
            tick.t,
            tick.unix_ms(),
            ph.name(),
            second.row
        )?;
        if let Some(line) = &second.line {
            ticker.say(line);
        }
        // Flushed every second so a run can be followed (and tested) live.
        csv.flush()?;
        if tick.stopping {
            break;
        }
    }
    ticker.finish();
    csv.flush()?;
    for h in &mut hlogs {
        h.flush()?;
    }
    Ok(())
}
