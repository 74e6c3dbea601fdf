//! A record's directory: created before anything is written into it, and never one
//! that already holds something (cells are never overwritten).

use std::path::Path;

use anyhow::Context;

use super::exit::BadInput;

/// Create the record's directory; it must not exist or be empty (cells are never
/// overwritten).
pub fn prepare_out(out: &Path) -> anyhow::Result<()> {
    if out.exists() {
        let non_empty = std::fs::read_dir(out)
            .with_context(|| format!("reading {}", out.display()))?
            .next()
            .is_some();
        if non_empty {
            return Err(BadInput(format!(
                "--out {} exists and is not empty; choose a new directory (cells are never overwritten)",
                out.display()
            ))
            .into());
        }
    }
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    Ok(())
}
