//! Ctrl-C (SIGINT) and SIGTERM. The first stops the paced traffic of the running
//! cell (it drains for a short bounded time, is verified, and writes a complete
//! record with outcome INTERRUPTED); a second exits at once, after marking the
//! running cell's record incomplete.

use std::sync::atomic::{AtomicI32, Ordering};

use tokio_util::sync::CancellationToken;

use crate::cli::exit::Exit;

/// The first signal received (0: none).
static SIGNAL: AtomicI32 = AtomicI32::new(0);

/// The exit of an interrupted run: 130 after SIGINT, 143 after SIGTERM.
pub fn exit() -> Exit {
    if SIGNAL.load(Ordering::SeqCst) == libc::SIGTERM {
        Exit::Terminated
    } else {
        Exit::Interrupted
    }
}

/// Whether a SIGINT or SIGTERM has been received in this process.
pub fn received() -> bool {
    SIGNAL.load(Ordering::SeqCst) != 0
}

/// A search or campaign stopped by a signal before it could give its answer. Its
/// exit is [`exit`]'s (130 or 143), never a clean one.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Interrupted(pub String);

/// Listen for SIGINT and SIGTERM in the current runtime: the first cancels
/// `interrupt`, a second exits the process now.
pub fn install(interrupt: CancellationToken) {
    tokio::spawn(async move {
        let first = next_signal().await;
        SIGNAL.store(first, Ordering::SeqCst);
        interrupt.cancel();
        eprintln!(
            "\n{}: stopping the traffic; the cell drains briefly, is verified and recorded (again to exit now)",
            name(first)
        );
        let second = next_signal().await;
        let dir = crate::record::incomplete::mark_running(&format!(
            "a second {} ended the run before its record was complete",
            name(second)
        ));
        eprintln!(
            "{}: exiting now{}",
            name(second),
            dir.map_or(String::new(), |d| format!(
                "; {} is marked incomplete",
                d.display()
            ))
        );
        std::process::exit(i32::from(exit().code()));
    });
}

fn name(sig: i32) -> &'static str {
    if sig == libc::SIGTERM {
        "SIGTERM"
    } else {
        "SIGINT"
    }
}

async fn next_signal() -> i32 {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
            return libc::SIGINT;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => libc::SIGINT,
        _ = term.recv() => libc::SIGTERM,
    }
}
