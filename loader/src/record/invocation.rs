//! `invocation.txt`: how a cell was made, readable by a person, secrets redacted.

use std::fmt::Write as _;
use std::path::Path;

use crate::record::host::Host;
use crate::record::redact::redact;

/// Version and commit of this build.
pub fn build_id() -> (String, String) {
    (
        env!("CARGO_PKG_VERSION").to_string(),
        option_env!("CROSSBENCH_GIT_COMMIT")
            .unwrap_or("unknown")
            .to_string(),
    )
}

/// RFC 3339 UTC, seconds precision.
pub fn utc(t: std::time::SystemTime) -> String {
    humantime::format_rfc3339_seconds(t).to_string()
}

#[derive(Debug)]
pub struct Invocation<'a> {
    pub argv: &'a [String],
    pub scenario_path: &'a Path,
    pub scenario_text: &'a str,
    pub resolved_yaml: &'a str,
    pub host: &'a Host,
    pub started: std::time::SystemTime,
    pub ended: Option<std::time::SystemTime>,
    pub outcome: Option<&'a str>,
    /// The fault schedule as it ran: one line per action (empty: no faults).
    pub faults: &'a [String],
    /// What the system said it is (`system_…:` lines; empty before setup).
    pub provenance: &'a [String],
}

impl Invocation<'_> {
    pub fn render(&self) -> String {
        let (version, commit) = build_id();
        let mut s = String::new();
        let _ = writeln!(s, "# crossbench invocation v1");
        let _ = writeln!(s, "command: {}", shell_join(self.argv));
        let _ = writeln!(s, "crossbench: {version} (git {commit})");
        if commit.ends_with("-dirty") {
            let _ = writeln!(
                s,
                "crossbench_dirty: true (built from a modified tree: no commit in the history is this build)"
            );
        }
        let _ = writeln!(s, "started_utc: {}", utc(self.started));
        if let Some(e) = self.ended {
            let _ = writeln!(s, "ended_utc: {}", utc(e));
        }
        if let Some(o) = self.outcome {
            let _ = writeln!(s, "outcome: {o}");
        }
        let h = self.host;
        let _ = writeln!(s, "host: {}", h.hostname);
        let _ = writeln!(s, "cpu: {} ({} cores)", h.cpu_model, h.cores);
        let _ = writeln!(s, "memory_bytes: {}", h.memory_bytes);
        let _ = writeln!(s, "kernel: {}", h.kernel);
        let _ = writeln!(s, "os: {}", h.os);
        for l in self.provenance {
            let _ = writeln!(s, "{l}");
        }
        let _ = writeln!(
            s,
            "\n## scenario as given ({})",
            self.scenario_path.display()
        );
        s.push_str(self.scenario_text);
        if !self.scenario_text.ends_with('\n') {
            s.push('\n');
        }
        let _ = writeln!(s, "\n## scenario as resolved (defaults and --set applied)");
        s.push_str(self.resolved_yaml);
        if !self.faults.is_empty() {
            let _ = writeln!(
                s,
                "\n## faults as they ran (ms from the start of the rated window)"
            );
            for l in self.faults {
                let _ = writeln!(s, "{l}");
            }
        }
        redact(&s)
    }
}

/// The `invocation.txt` of one cell: written when the cell starts (so a crashed run
/// still says how it was made) and again when it ends, with its outcome.
#[derive(Debug)]
pub struct InvocationFile {
    path: std::path::PathBuf,
    argv: Vec<String>,
    scenario_path: std::path::PathBuf,
    scenario_text: String,
    resolved_yaml: String,
    pub host: Host,
    pub started: std::time::SystemTime,
    /// The faults' actions, once they ran (written with the outcome).
    pub fault_lines: Vec<String>,
    /// What the system said it is, once set up (`ProvenanceRecord::lines`).
    pub provenance_lines: Vec<String>,
}

impl InvocationFile {
    /// Probe the host, note the start, and write the file without an outcome.
    pub fn begin(
        loaded: &crate::scenario::Loaded,
        argv: &[String],
        scenario_path: &Path,
        out: &Path,
    ) -> anyhow::Result<Self> {
        use anyhow::Context as _;
        let f = InvocationFile {
            path: out.join("invocation.txt"),
            argv: argv.to_vec(),
            scenario_path: scenario_path.to_path_buf(),
            scenario_text: loaded.source_text.clone(),
            resolved_yaml: serde_yaml::to_string(&loaded.scenario)
                .context("serialising the resolved scenario")?,
            host: Host::probe(),
            started: std::time::SystemTime::now(),
            fault_lines: Vec::new(),
            provenance_lines: Vec::new(),
        };
        f.write(None, None)?;
        Ok(f)
    }

    /// Rewrite the file, with the end and the outcome once they are known.
    pub fn write(
        &self,
        ended: Option<std::time::SystemTime>,
        outcome: Option<&str>,
    ) -> anyhow::Result<()> {
        use anyhow::Context as _;
        let inv = Invocation {
            argv: &self.argv,
            scenario_path: &self.scenario_path,
            scenario_text: &self.scenario_text,
            resolved_yaml: &self.resolved_yaml,
            host: &self.host,
            started: self.started,
            ended,
            outcome,
            faults: &self.fault_lines,
            provenance: &self.provenance_lines,
        };
        std::fs::write(&self.path, inv.render())
            .with_context(|| format!("writing {}", self.path.display()))
    }

    /// Milliseconds since the epoch at the start.
    pub fn started_unix_ms(&self) -> u64 {
        self.started
            .duration_since(std::time::SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64)
    }
}

fn shell_join(argv: &[String]) -> String {
    argv.iter()
        .map(|a| {
            if a.is_empty()
                || a.chars()
                    .any(|c| c.is_whitespace() || "'\"$`\\".contains(c))
            {
                format!("'{}'", a.replace('\'', "'\\''"))
            } else {
                a.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invocation_redacts_dsn_passwords_and_tokens_everywhere() {
        let host = Host::probe();
        let argv: Vec<String> = [
            "crossbench",
            "run",
            "s.yaml",
            "--set",
            "pgmq.dsn=postgres://u:topsecret1@127.0.0.1/db",
            "--set",
            "queen.token=tok-secret-2",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let text = "system: pgmq\npgmq:\n  dsn: postgres://bench:topsecret3@127.0.0.1:5432/x\n";
        let inv = Invocation {
            argv: &argv,
            scenario_path: Path::new("s.yaml"),
            scenario_text: text,
            resolved_yaml: "pgmq:\n  dsn: postgres://bench:topsecret3@127.0.0.1:5432/x\ntoken: \"tok-secret-4\"\n",
            host: &host,
            started: std::time::SystemTime::now(),
            ended: None,
            outcome: None,
            faults: &[],
            provenance: &["system_build_stated: sha256:abc".to_string()],
        };
        let r = inv.render();
        for secret in ["topsecret1", "tok-secret-2", "topsecret3", "tok-secret-4"] {
            assert!(!r.contains(secret), "{secret} leaked:\n{r}");
        }
        assert!(r.contains("postgres://bench:***@127.0.0.1:5432/x"));
        assert!(r.contains("\nsystem_build_stated: sha256:abc\n"), "{r}");
    }
}
