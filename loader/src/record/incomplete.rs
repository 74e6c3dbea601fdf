//! A record that could not be finished: when a second Ctrl-C ends the process in
//! the middle of a cell, the cell's directory gets an `INCOMPLETE` file saying why,
//! and `invocation.txt` a last line `outcome: INCOMPLETE (…)`. A reader (and
//! `--resume`) then never mistakes it for a finished cell.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

static RUNNING: Mutex<Option<PathBuf>> = Mutex::new(None);

/// The cell in `dir` is running.
pub fn begin(dir: &Path) {
    *RUNNING.lock().unwrap_or_else(|e| e.into_inner()) = Some(dir.to_path_buf());
}

/// The running cell's record is complete.
pub fn end() {
    *RUNNING.lock().unwrap_or_else(|e| e.into_inner()) = None;
}

/// Mark the running cell (if any) incomplete, saying `why`; its directory.
pub fn mark_running(why: &str) -> Option<PathBuf> {
    let dir = RUNNING.lock().unwrap_or_else(|e| e.into_inner()).clone()?;
    mark(&dir, why);
    Some(dir)
}

/// Mark the record in `dir` incomplete.
pub fn mark(dir: &Path, why: &str) {
    let _ = std::fs::write(dir.join("INCOMPLETE"), format!("{why}\n"));
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .append(true)
        .open(dir.join("invocation.txt"))
    {
        let _ = writeln!(f, "outcome: INCOMPLETE ({why})");
    }
}

/// Whether the record in `dir` was marked incomplete.
pub fn is_incomplete(dir: &Path) -> bool {
    dir.join("INCOMPLETE").exists()
}
