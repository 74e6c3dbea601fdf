//! Running a fault's shell command (a restart, `systemctl kill`, `docker pause`) with
//! a deadline: what ran, its exit code, how long it took and the tail of its output,
//! every secret redacted, for the record.

use std::process::Stdio;
use std::time::Duration;

use serde::Serialize;
use tokio::io::AsyncReadExt;
use tokio::time::Instant;

use crate::record::redact::redact;

/// Bytes of output kept (the end of it).
const TAIL: usize = 2048;

/// What one command did.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct CommandOutcome {
    /// The command, redacted.
    pub command: String,
    /// `None` when it could not start, timed out or died by a signal.
    pub exit_code: Option<i32>,
    pub timed_out: bool,
    pub millis: u64,
    /// The end of stdout and stderr together, redacted.
    pub output_tail: String,
}

impl CommandOutcome {
    pub fn ok(&self) -> bool {
        self.exit_code == Some(0)
    }
}

/// Run `sh -c command`; kill it (and say so) after `timeout`.
pub async fn run_command(command: &str, timeout: Duration) -> CommandOutcome {
    let t0 = Instant::now();
    let done = |exit_code, timed_out, output: &[u8]| {
        let keep = &output[output.len().saturating_sub(TAIL)..];
        CommandOutcome {
            command: redact(command),
            exit_code,
            timed_out,
            millis: t0.elapsed().as_millis() as u64,
            output_tail: redact(String::from_utf8_lossy(keep).trim()),
        }
    };
    let child = tokio::process::Command::new("sh")
        .arg("-c")
        // Output of both streams in one pipe, in order.
        .arg(format!("exec 2>&1; {command}"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .process_group(0)
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => return done(None, false, format!("cannot start sh: {e}").as_bytes()),
    };
    // The output is read alongside; the command is over when the shell exits (a
    // daemon it started may keep the pipe open: its output is not waited for).
    let mut out = child.stdout.take();
    let (tx, rx) = tokio::sync::watch::channel(Vec::<u8>::new());
    let reader = tokio::spawn(async move {
        let mut chunk = [0u8; 4096];
        if let Some(o) = out.as_mut() {
            while let Ok(n) = o.read(&mut chunk).await {
                if n == 0 {
                    break;
                }
                tx.send_modify(|b| {
                    b.extend_from_slice(&chunk[..n]);
                    if b.len() > 4 * TAIL {
                        b.drain(..b.len() - TAIL);
                    }
                });
            }
        }
    });
    let status = tokio::time::timeout(timeout, child.wait()).await;
    // What the shell wrote before it exited, and a moment more.
    let _ = tokio::time::timeout(Duration::from_millis(200), async {
        let mut r = reader;
        let _ = (&mut r).await;
    })
    .await;
    let buf = rx.borrow().clone();
    match status {
        Ok(Ok(status)) => done(status.code(), false, &buf),
        Ok(Err(e)) => done(None, false, format!("wait: {e}").as_bytes()),
        Err(_) => {
            // The whole process group: a restart script's children go too.
            if let Some(pid) = child.id() {
                crate::cell::faults::target::kill_group(pid);
            }
            let _ = child.kill().await;
            done(None, true, &buf)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn records_exit_code_output_and_timeouts_with_secrets_redacted() {
        let o = run_command(
            "echo connecting to amqp://u:hunter2@127.0.0.1:5672; echo oops >&2; exit 3",
            Duration::from_secs(10),
        )
        .await;
        assert_eq!(o.exit_code, Some(3));
        assert!(!o.timed_out);
        assert!(o.output_tail.contains("oops"), "{o:?}");
        assert!(!o.output_tail.contains("hunter2"), "{o:?}");
        assert!(!o.command.contains("hunter2"), "{o:?}");
        let t = run_command("sleep 30", Duration::from_millis(200)).await;
        assert!(t.timed_out && t.exit_code.is_none(), "{t:?}");
        assert!(t.millis < 5000, "{t:?}");
        // A command that starts a daemon holding the output pipe is over when the
        // shell exits.
        let d = run_command("echo started; sleep 30 &", Duration::from_secs(10)).await;
        assert_eq!(d.exit_code, Some(0), "{d:?}");
        assert!(d.millis < 3000, "{d:?}");
        assert!(d.output_tail.contains("started"), "{d:?}");
        let _ = std::process::Command::new("pkill")
            .args(["-f", "^sleep 30$"])
            .status();
    }
}
