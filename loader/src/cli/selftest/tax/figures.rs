//! What one run of either side measured, the medians of a sitting, and the line and
//! JSON they are reported in.

use serde::Serialize;

/// Which side a run was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    /// The client library alone (adapters::bare).
    Bare,
    /// A stream cell through the adapter, as `crossbench run` runs it.
    Crossbench,
}

impl Side {
    pub fn name(self) -> &'static str {
        match self {
            Side::Bare => "bare",
            Side::Crossbench => "crossbench",
        }
    }
}

/// The most a bare run may receive beyond what it published, as a fraction of it,
/// and still be compared. Past it the run received a consumer group's re-reads (a
/// rebalance hands partitions over from their last committed offsets): deliveries
/// with no publish behind them, which make a delivery look cheaper than the
/// crossbench side's, whose checker FAILs any duplicate.
pub const REREAD_MAX: f64 = 0.01;

/// Whether a run that published `published` and received `consumed` (redeliveries
/// included) can be compared per delivery: at most [`REREAD_MAX`] re-read.
pub fn within_rereads(published: u64, consumed: u64) -> bool {
    consumed as f64 <= published as f64 * (1.0 + REREAD_MAX)
}

/// One run of one side.
#[derive(Debug, Clone, Serialize)]
pub struct SideRun {
    pub side: Side,
    /// 1-based, in the order the sitting ran them (each run is a bare and a cell).
    pub run: usize,
    /// Process CPU (user + system) over the measured window, seconds.
    pub cpu_seconds: f64,
    /// The measured window as it ran, seconds.
    pub window_sec: f64,
    /// Messages received while the window ran (whenever they were published).
    pub deliveries_in_window: u64,
    /// `cpu_seconds` ÷ `deliveries_in_window`, µs: the figure compared.
    pub cpu_us_per_delivery: f64,
    /// Mean cores over the window.
    pub cpu_cores: f64,
    /// Messages the system accepted over the whole run.
    pub published: u64,
    /// Messages received over the whole run, redeliveries included.
    pub consumed: u64,
    /// Messages acknowledged.
    pub acked: u64,
    /// Failed calls (retried).
    pub errors: u64,
    /// Everything published was delivered: the bare side received and acknowledged at
    /// least what it published by the end of its drain; the cell's checker said PASS.
    pub complete: bool,
    /// The rate was kept: the cell held its load; the bare side received at least 97 %
    /// of rate × window inside the window.
    pub held: bool,
    /// Its CPU per delivery enters the medians: a bare run that received more than
    /// [`REREAD_MAX`] beyond what it published does not (a cell is always compared).
    pub comparable: bool,
    /// The cell's outcome (PASS, NOT-HELD, …), or the bare side's `complete`,
    /// `incomplete` or `re-read` (complete, but not comparable).
    pub outcome: String,
}

impl SideRun {
    /// The run as one line of the report.
    pub fn line(&self) -> String {
        format!(
            "  run {} {:<10} {:<8} published {:>7}, consumed {:>7}, acked {:>7}, errors {}; window {:.1} s: {} deliveries, CPU {:.3} s ({:.2} cores) = {:.2} µs/delivery",
            self.run,
            self.side.name(),
            self.outcome,
            self.published,
            self.consumed,
            self.acked,
            self.errors,
            self.window_sec,
            self.deliveries_in_window,
            self.cpu_seconds,
            self.cpu_cores,
            self.cpu_us_per_delivery
        )
    }
}

/// The median and the range of one side's runs.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Spread {
    pub runs: usize,
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Spread {
    /// Of `xs` (not empty). An even count's median is the mean of the middle two.
    pub fn of(xs: &[f64]) -> Option<Spread> {
        if xs.is_empty() {
            return None;
        }
        let mut v = xs.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Some(Spread {
            runs: n,
            median,
            min: v[0],
            max: v[n - 1],
        })
    }
}

/// A sitting: every run of both sides, and the tax.
#[derive(Debug, Clone, Serialize)]
pub struct Sitting {
    pub system: String,
    /// The adapter's variant, from the cells' records (e.g. an idiom).
    pub variant: String,
    pub rate_msgs_per_sec: u64,
    pub warmup_sec: f64,
    pub window_sec: f64,
    pub partitions: u64,
    pub push_batch: u64,
    pub pop_batch: u64,
    pub payload_bytes: usize,
    /// The `--set`s given.
    pub sets: Vec<String>,
    pub runs: Vec<SideRun>,
    pub bare: Option<Spread>,
    pub crossbench: Option<Spread>,
    /// crossbench's median ÷ bare's median (µs per delivery): the harness tax.
    pub tax: Option<f64>,
    /// Every run of both sides delivered everything it published.
    pub complete: bool,
    /// Every run of both sides kept the rate.
    pub held: bool,
    /// Runs left out of the medians (not [`SideRun::comparable`]).
    pub left_out: usize,
}

impl Sitting {
    /// Fill the medians, the tax and the verdicts from `runs`.
    pub fn settle(&mut self) {
        let of = |side: Side| {
            let xs: Vec<f64> = self
                .runs
                .iter()
                .filter(|r| r.side == side && r.comparable)
                .map(|r| r.cpu_us_per_delivery)
                .collect();
            Spread::of(&xs)
        };
        self.bare = of(Side::Bare);
        self.crossbench = of(Side::Crossbench);
        self.tax = match (self.bare, self.crossbench) {
            (Some(b), Some(c)) if b.median > 0.0 => Some(c.median / b.median),
            _ => None,
        };
        self.complete = self.runs.iter().all(|r| r.complete);
        self.held = self.runs.iter().all(|r| r.held);
        self.left_out = self.runs.iter().filter(|r| !r.comparable).count();
    }

    /// The closing lines of the report.
    pub fn summary(&self) -> String {
        let mut s = String::new();
        for (name, sp) in [("bare", self.bare), ("crossbench", self.crossbench)] {
            if let Some(sp) = sp {
                s.push_str(&format!(
                    "{name:<10}  median {:.2} µs/delivery [min {:.2}, max {:.2}] over {} runs\n",
                    sp.median, sp.min, sp.max, sp.runs
                ));
            }
        }
        match self.tax {
            Some(t) => s.push_str(&format!(
                "harness tax (crossbench median / bare median): {t:.2}x\n"
            )),
            None => s.push_str("harness tax: not measured\n"),
        }
        if self.left_out > 0 {
            s.push_str(&format!(
                "LEFT OUT: {} run(s) received more than {:.0} % beyond what they published (a consumer group's re-reads after a rebalance): deliveries with no publish behind them make a delivery look cheaper, so those runs are not in the medians\n",
                self.left_out,
                REREAD_MAX * 100.0
            ));
        }
        if !self.complete {
            s.push_str(
                "INCOMPLETE: a run did not deliver everything it published (see its line)\n",
            );
        }
        if !self.held {
            s.push_str(
                "NOT HELD: a run did not keep the rate; its CPU per delivery is not comparable (lower --rate)\n",
            );
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(side: Side, us: f64) -> SideRun {
        SideRun {
            side,
            run: 1,
            cpu_seconds: 1.0,
            window_sec: 1.0,
            deliveries_in_window: 1,
            cpu_us_per_delivery: us,
            cpu_cores: 1.0,
            published: 1,
            consumed: 1,
            acked: 1,
            errors: 0,
            complete: true,
            held: true,
            comparable: true,
            outcome: "PASS".into(),
        }
    }

    #[test]
    fn medians_and_the_tax() {
        let s = Spread::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max, s.runs), (2.0, 1.0, 3.0, 3));
        assert_eq!(Spread::of(&[1.0, 4.0]).unwrap().median, 2.5);
        assert!(Spread::of(&[]).is_none());
        let mut sit = Sitting {
            system: "x".into(),
            variant: String::new(),
            rate_msgs_per_sec: 1,
            warmup_sec: 0.0,
            window_sec: 1.0,
            partitions: 1,
            push_batch: 1,
            pop_batch: 1,
            payload_bytes: 64,
            sets: vec![],
            runs: vec![
                run(Side::Bare, 10.0),
                run(Side::Crossbench, 13.0),
                run(Side::Bare, 12.0),
                run(Side::Crossbench, 14.0),
                run(Side::Bare, 11.0),
                run(Side::Crossbench, 16.0),
            ],
            bare: None,
            crossbench: None,
            tax: None,
            complete: false,
            held: false,
            left_out: 0,
        };
        sit.settle();
        assert_eq!(sit.bare.unwrap().median, 11.0);
        assert_eq!(sit.crossbench.unwrap().median, 14.0);
        assert!((sit.tax.unwrap() - 14.0 / 11.0).abs() < 1e-12);
        assert!(sit.complete && sit.held);
        sit.runs[1].complete = false;
        sit.settle();
        assert!(!sit.complete);
        assert!(sit.summary().contains("INCOMPLETE"));
        assert!(!sit.summary().contains("LEFT OUT"));
        // A bare run that re-read is left out of the bare median, and said to be.
        sit.runs[0].comparable = false;
        sit.settle();
        assert_eq!(sit.left_out, 1);
        let b = sit.bare.unwrap();
        assert_eq!((b.runs, b.median), (2, 11.5));
        assert!(
            sit.summary().contains("LEFT OUT: 1 run(s)"),
            "{}",
            sit.summary()
        );
    }

    #[test]
    fn a_run_that_received_more_than_one_percent_beyond_its_publishes_is_not_compared() {
        assert!(within_rereads(60_010, 60_010));
        // One re-read batch of 10 (seen on tansu): 0.02 %.
        assert!(within_rereads(60_010, 60_020));
        assert!(within_rereads(100_000, 101_000));
        assert!(!within_rereads(100_000, 101_001));
        // A rebalance's re-reads seen on tansu 0.6: 11.6 % and 18.4 %.
        assert!(!within_rereads(60_010, 66_952));
        assert!(!within_rereads(60_010, 71_031));
    }
}
