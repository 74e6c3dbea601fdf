//! `crossbench merge <loader dirs…> --out DIR`: the records of the loaders of one cell
//! made one cell ([`crate::cell::merge`]). This is the command around it: the
//! loaders' records read and checked before anything is written, the record's
//! directory made, the summary printed, and the exit code: `crossbench run`'s for the
//! merged cell, 2 for records that are not the loaders of one cell.

use std::path::{Path, PathBuf};

use crate::cell::merge::{merge_into, read_loaders, MergeError};
use crate::cell::Outcome;
use crate::workload::runner::{prepare_out, BadInput, Exit};

/// `crossbench merge`.
pub fn command(dirs: &[PathBuf], out: &Path, quiet: bool) -> anyhow::Result<Exit> {
    let loaders = read_loaders(dirs).map_err(error)?;
    prepare_out(out)?;
    let merged = merge_into(&loaders, out).map_err(error)?;
    if !quiet {
        print!("{}", merged.summary);
    }
    Ok(match (merged.outcome, merged.held) {
        (Outcome::Pass, false) => Exit::NotHeld,
        (o, _) => Exit::of(o),
    })
}

/// A merge's error as the command's: bad input (exit 2) when it is the user's to fix.
fn error(e: MergeError) -> anyhow::Error {
    if e.is_bad_input() {
        BadInput(e.to_string()).into()
    } else {
        anyhow::Error::new(e)
    }
}
