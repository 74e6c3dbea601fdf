//! The machine-wide run lock: two cells at once would contaminate each other's
//! figures, so `crossbench run` (and every in-process run) waits for the one in
//! progress. The lock is `$CROSSBENCH_LOCK`, or `crossbench-run.lock` in the
//! temporary directory; it is released when the holder exits, however it exits.

use std::path::PathBuf;

use anyhow::Context;

/// Hold the run lock until the returned file is dropped; say so when waiting.
pub fn acquire(quiet: bool) -> anyhow::Result<std::fs::File> {
    take(quiet, false)
}

/// Hold the run lock shared until the returned file is dropped: the loaders of one
/// cell of several on one machine run together, and any other run waits for them
/// (as they wait for it).
pub fn acquire_shared(quiet: bool) -> anyhow::Result<std::fs::File> {
    take(quiet, true)
}

fn take(quiet: bool, shared: bool) -> anyhow::Result<std::fs::File> {
    let path = path();
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("opening the run lock {}", path.display()))?;
    let tried = if shared {
        f.try_lock_shared()
    } else {
        f.try_lock()
    };
    match tried {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            if !quiet {
                eprintln!(
                    "waiting for another crossbench run to finish (lock {}): two runs at once would contaminate each other's figures",
                    path.display()
                );
            }
            let waited = if shared { f.lock_shared() } else { f.lock() };
            waited.with_context(|| format!("waiting for the run lock {}", path.display()))?;
        }
        Err(std::fs::TryLockError::Error(e)) => {
            return Err(e).with_context(|| format!("locking {}", path.display()));
        }
    }
    Ok(f)
}

/// Where the lock is.
pub fn path() -> PathBuf {
    std::env::var_os("CROSSBENCH_LOCK")
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("crossbench-run.lock"))
}
