//! The loaders' records a merge joins. Each is read once, both as written (the merged
//! record is loader 0's, edited, so that fields the merge does not know are carried
//! through unchanged) and through the record's typed reader
//! ([`cell_record::CellResult`]), from which the merge takes every figure; and they are
//! checked to be the loaders of one cell before any is judged. Whether their clocks
//! compare is theirs too ([`clocks`]).

use std::path::{Path, PathBuf};

use cell_record::result::{Abandonment, Carried, Kept, Loaders, Placement};
use cell_record::CellResult;
use serde_json::{json, Value};

use super::MergeError;
use crate::fleet::CLOCK_TRUST_US;

/// One loader's record.
#[derive(Debug)]
pub struct Loader {
    pub dir: PathBuf,
    pub index: u64,
    /// As written: loader 0's is the merged record's base.
    pub raw: Value,
    /// Typed: every figure the merge reads.
    pub rec: CellResult,
    /// The blocks copied whole into the merged record.
    pub carried: Carried,
}

impl Loader {
    /// The record's `loaders` block.
    pub fn block(&self) -> Option<&Loaders> {
        self.rec.loaders.as_ref()
    }

    /// Why this loader's cell was given up: its own `abandoned`, or the one under
    /// `loaders` (a loader abandoned while it paced).
    pub fn abandonment(&self) -> Option<&Kept<Abandonment>> {
        self.rec
            .abandoned
            .as_ref()
            .or_else(|| self.block().and_then(|b| b.abandoned.as_ref()))
    }

    /// `shared` or `partitioned` (`shared` when the record says neither).
    pub fn topology(&self) -> String {
        self.block()
            .and_then(|b| b.topology.clone())
            .unwrap_or_else(|| "shared".to_string())
    }
}

/// A record read as written, before it is vouched for.
struct Read {
    dir: PathBuf,
    index: u64,
    raw: Value,
    place: Placement,
}

/// Read every loader's record and check they are the loaders of one cell; then read
/// each through the record's one reader, which checks its version and outcome (an
/// outcome no crossbench wrote is an error, never taken as a default).
pub fn read_loaders(dirs: &[PathBuf]) -> Result<Vec<Loader>, MergeError> {
    let mut read = dirs
        .iter()
        .map(|d| read_one(d))
        .collect::<Result<Vec<_>, _>>()?;
    read.sort_by_key(|r| r.index);
    one_cell(&read)?;
    read.into_iter()
        .map(|r| {
            let rec = CellResult::from_value(&r.dir.join("result.json"), r.raw.clone())
                .map_err(|e| MergeError::Input(e.to_string()))?;
            Ok(Loader {
                carried: Carried::of(&r.raw),
                dir: r.dir,
                index: r.index,
                raw: r.raw,
                rec,
            })
        })
        .collect()
}

fn read_one(d: &Path) -> Result<Read, MergeError> {
    let p = d.join("result.json");
    let text = std::fs::read_to_string(&p).map_err(|e| {
        MergeError::Input(format!(
            "{}: {e} (give each loader's cell directory)",
            p.display()
        ))
    })?;
    let raw: Value = serde_json::from_str(&text)
        .map_err(|e| MergeError::Input(format!("{}: not JSON: {e}", p.display())))?;
    let place = Placement::of(&raw);
    let index = place.loaders.index.ok_or_else(|| {
        MergeError::Input(format!(
            "{}: not a loader's record (no loaders.index): run each loader with --loader-index and --loader-count",
            p.display()
        ))
    })?;
    Ok(Read {
        dir: d.to_path_buf(),
        index,
        raw,
        place,
    })
}

/// The records, sorted by index, are loaders 0 to N-1 of one cell and one topology.
fn one_cell(read: &[Read]) -> Result<(), MergeError> {
    let first = &read[0].place;
    let n = first.loaders.count.unwrap_or(0);
    for (k, r) in read.iter().enumerate() {
        let p = &r.place;
        if p.loaders.count != Some(n) {
            return Err(MergeError::Input(format!(
                "{}: loader {} of {} loaders, loader {} of {}: not the loaders of one cell",
                r.dir.display(),
                r.index,
                p.loaders.count.unwrap_or(0),
                read[0].index,
                n
            )));
        }
        if p.cell != first.cell || p.loaders.topology != first.loaders.topology {
            return Err(MergeError::Input(format!(
                "{}: cell {} ({} topology) is not {} ({}): not the loaders of one cell",
                r.dir.display(),
                json!(p.cell),
                json!(p.loaders.topology),
                json!(first.cell),
                json!(first.loaders.topology)
            )));
        }
        if r.index != k as u64 {
            return Err(MergeError::Input(format!(
                "loader {k} of {n} is missing (or given twice): give every loader's directory, loader 0 to {}",
                n.saturating_sub(1)
            )));
        }
    }
    if read.len() as u64 != n {
        return Err(MergeError::Input(format!(
            "{} directories for a cell of {n} loaders: give every loader's directory",
            read.len()
        )));
    }
    Ok(())
}

/// Whether the loaders' clocks can be compared: one host (one boot), or every
/// loader's offset bound known and at most [`CLOCK_TRUST_US`] at start and end.
pub fn clocks(loaders: &[Loader]) -> (bool, String) {
    let boots: Vec<Option<&str>> = loaders
        .iter()
        .map(|l| {
            l.block()
                .and_then(|b| b.host.as_ref())
                .and_then(|h| h.typed.boot_id.as_deref())
        })
        .collect();
    if boots.iter().all(|b| b.is_some() && *b == boots[0]) {
        return (
            true,
            "every loader on one host: one clock, cross-loader order and latency exact".into(),
        );
    }
    let mut worst: Option<u64> = Some(0);
    for l in loaders {
        let b = l.block();
        for clock in [
            b.and_then(|b| b.clock_start.as_ref()),
            b.and_then(|b| b.clock_end.as_ref()),
        ] {
            let bound = clock.and_then(|c| c.typed.offset_bound_us);
            worst = match (worst, bound) {
                (Some(w), Some(b)) => Some(w.max(b)),
                _ => None,
            };
        }
    }
    match worst {
        Some(w) if w <= CLOCK_TRUST_US => (
            true,
            format!("loaders on several hosts, every clock-offset bound known: worst {w} µs (≤ {CLOCK_TRUST_US} µs)"),
        ),
        Some(w) => (
            false,
            format!("loaders on several hosts, worst clock-offset bound {w} µs (> {CLOCK_TRUST_US} µs): cross-host latency and the order across a hand-off are untrusted"),
        ),
        None => (
            false,
            "loaders on several hosts, and some clock-offset bound is unknown (no chrony or synchronised kernel clock): cross-host latency and the order across a hand-off are untrusted".into(),
        ),
    }
}
