//! Ctrl-C (SIGINT) and SIGTERM. For a run ([`install`]), the first stops the paced
//! traffic of the running cell (it drains for a short bounded time, is verified, and
//! writes a complete record with outcome INTERRUPTED); a second exits at once, after
//! marking the running cell's record incomplete.
//!
//! A matrix campaign ([`install_after_cell`]) adds a step before those two: its first
//! Ctrl-C lets the running cell go on to its end, so the campaign stops with every cell
//! it ran whole and none cut short; the second Ctrl-C is then a run's first (the cell's
//! traffic stops), the third a run's second. SIGTERM is a supervisor's, not a person's:
//! it skips the extra step and stops the cell's traffic at once, whichever signal it is.

use std::sync::atomic::{AtomicI32, Ordering};

use tokio_util::sync::CancellationToken;

use super::exit::Exit;

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
        cut_short(first, &interrupt);
        exit_on_next().await;
    });
}

/// Listen for SIGINT and SIGTERM in the current runtime, for a campaign's cells: a
/// first SIGINT cancels `after_cell` only (no other cell starts; the running one goes
/// on to its end), the next signal cancels `now` (the running cell's traffic stops),
/// and one more exits the process now. A SIGTERM cancels both at once, wherever it
/// falls, and the next signal exits.
pub fn install_after_cell(after_cell: CancellationToken, now: CancellationToken) {
    tokio::spawn(async move {
        let first = next_signal().await;
        SIGNAL.store(first, Ordering::SeqCst);
        after_cell.cancel();
        let cutting = if first == libc::SIGINT {
            eprintln!(
                "\nSIGINT: the running cell goes on to its end and is recorded; no other cell starts (again to stop its traffic now, a third time to exit)"
            );
            next_signal().await
        } else {
            first
        };
        cut_short(cutting, &now);
        exit_on_next().await;
    });
}

/// Stop the running cell's traffic, on signal `sig`.
fn cut_short(sig: i32, interrupt: &CancellationToken) {
    interrupt.cancel();
    eprintln!(
        "\n{}: stopping the traffic; the cell drains briefly, is verified and recorded (again to exit now)",
        name(sig)
    );
}

/// Wait for one more signal, then mark the running record incomplete and exit.
async fn exit_on_next() {
    let last = next_signal().await;
    // A resource budget the running cell enforces is put back before exiting.
    for l in crate::cell::budget::restore_running() {
        eprintln!("{l}");
    }
    let dir = crate::record::incomplete::mark_running(&format!(
        "a second {} ended the run before its record was complete",
        name(last)
    ));
    eprintln!(
        "{}: exiting now{}",
        name(last),
        dir.map_or(String::new(), |d| format!(
            "; {} is marked incomplete",
            d.display()
        ))
    );
    std::process::exit(i32::from(exit().code()));
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
