//! `crossbench verify`: the checker's verdict on a cell directory, offline.

use std::path::Path;

use anyhow::Context;

use crate::cli::exit::Exit;
use crate::cli::BadInput;

pub fn verify(
    dir: &Path,
    allow_duplicates: bool,
    prefix: String,
    json: Option<&Path>,
) -> anyhow::Result<Exit> {
    if !dir.is_dir() {
        return Err(BadInput(format!(
            "{} is not a directory; give the cell (or reference log) directory",
            dir.display()
        ))
        .into());
    }
    let opts = checker::VerifyOptions {
        allow_duplicates,
        legacy_prefix: prefix,
        ..Default::default()
    };
    let verdict = checker::verify_dir(dir, &opts)?;
    print!("{}", verdict.render_table());
    if let Some(j) = json {
        let mut text = serde_json::to_string_pretty(&verdict)?;
        text.push('\n');
        std::fs::write(j, text).with_context(|| format!("writing {}", j.display()))?;
    }
    Ok(if verdict.pass { Exit::Pass } else { Exit::Fail })
}
