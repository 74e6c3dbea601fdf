//! The live progress's second hand: one tick a second (a late tick is delayed, not
//! bunched), a last tick when the progress is stopped, and the console line
//! (rewritten in place on a terminal, one line per second otherwise, none with `-q`).
//! Its times are read from the cell's clock.

use std::io::IsTerminal;
use std::time::{Duration, SystemTime};

use tokio_util::sync::CancellationToken;

use crate::measure::clock::Clock;

/// One second of the report.
#[derive(Debug, Clone, Copy)]
pub struct Tick {
    /// Seconds since the reporter started (1, 2, …).
    pub t: u64,
    /// Wall clock at the interval's start, and its length.
    pub start: SystemTime,
    pub len: Duration,
    /// Wall clock now (the interval's end).
    pub now: SystemTime,
    /// The reporter was stopped: this is the last tick.
    pub stopping: bool,
}

impl Tick {
    /// Milliseconds since the epoch at the interval's end.
    pub fn unix_ms(&self) -> u128 {
        self.now
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis()
    }
}

#[derive(Debug)]
pub struct Ticker {
    clock: Clock,
    interval: tokio::time::Interval,
    last: SystemTime,
    t: u64,
    tty: bool,
    quiet: bool,
}

impl Ticker {
    /// Start the clock; the first tick comes a second from now.
    pub async fn start(clock: Clock, quiet: bool) -> Self {
        let mut interval = tokio::time::interval(Duration::from_secs(1));
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        interval.tick().await;
        Ticker {
            clock,
            interval,
            last: clock.now_system(),
            t: 0,
            tty: std::io::stderr().is_terminal(),
            quiet,
        }
    }

    /// Wait for the next second, or for `stop`.
    pub async fn next(&mut self, stop: &CancellationToken) -> Tick {
        let stopping = tokio::select! {
            _ = self.interval.tick() => false,
            _ = stop.cancelled() => true,
        };
        let now = self.clock.now_system();
        let tick = Tick {
            t: self.t + 1,
            start: self.last,
            len: now.duration_since(self.last).unwrap_or_default(),
            now,
            stopping,
        };
        self.t += 1;
        self.last = now;
        tick
    }

    /// Whether console lines are shown (not with `-q`); build them only then.
    pub fn shows(&self) -> bool {
        !self.quiet
    }

    /// Show this second's console line.
    pub fn say(&self, line: &str) {
        if self.quiet {
        } else if self.tty {
            eprint!("\r\x1b[2K{line}");
        } else {
            eprintln!("{line}");
        }
    }

    /// End the console's in-place line.
    pub fn finish(&self) {
        if self.tty && !self.quiet {
            eprintln!();
        }
    }
}
