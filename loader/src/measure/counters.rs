//! The ingress counters of a flow, the same in both workloads, and their identity:
//! `offered = published + shed + failed` at the end of every cell.

use adapters::{BrokerError, Counter, ErrorClass};
use serde::Serialize;

/// Ingress counters of one flow, in the workload's unit (events or messages).
#[derive(Debug, Default)]
pub struct FlowCounters {
    /// Units the schedule owed (every one counts, including catch-up skips).
    pub offered: Counter,
    /// Units the system acknowledged (paced traffic; hydration excluded).
    pub published: Counter,
    /// Units dropped because their publisher's queue was full (the system did not
    /// absorb the offered rate through the harness's publishers).
    pub shed_backpressure: Counter,
    /// Units skipped because the pacer itself fell more than the catch-up cap behind
    /// (the loader could not hold the schedule: the cell is VOID).
    pub shed_pacer: Counter,
    /// Units whose publish was given up: refused, past its deadline, or abandoned at
    /// stop (unsent ones included).
    pub failed: Counter,
    /// Of `failed`, those whose fate is unknown (an attempt timed out or lost its
    /// connection): they may have landed (`# indeterminate` in produced.meta).
    pub failed_indeterminate: Counter,
    /// Publish attempts that failed and were retried.
    pub publish_retries: Counter,
    /// Failed publish attempts by error class, in the order of [`ErrorClass::ALL`].
    pub publish_errors: [Counter; ErrorClass::ALL.len()],
    /// Hydration publishes (seq 0 of every key), outside the paced identity.
    pub hydration_published: Counter,
    /// Paced units scheduled inside the rated window.
    pub offered_rated: Counter,
    /// Of those, published.
    pub published_rated: Counter,
}

impl FlowCounters {
    /// Count one failed publish attempt under its class.
    pub fn count_error(&self, e: &BrokerError) {
        self.publish_errors[e.class().index()].inc();
    }

    pub fn shed(&self) -> u64 {
        self.shed_backpressure.get() + self.shed_pacer.get()
    }

    pub fn snapshot(&self) -> FlowSnapshot {
        FlowSnapshot {
            offered: self.offered.get(),
            published: self.published.get(),
            shed: self.shed(),
            shed_backpressure: self.shed_backpressure.get(),
            shed_pacer: self.shed_pacer.get(),
            failed: self.failed.get(),
            failed_indeterminate: self.failed_indeterminate.get(),
            publish_retries: self.publish_retries.get(),
            hydration_published: self.hydration_published.get(),
            offered_rated: self.offered_rated.get(),
            published_rated: self.published_rated.get(),
        }
    }
}

/// A flow's counters at one instant, as `result.json` records them (`flows`).
#[derive(Debug, Clone, Copy, Serialize, Default, PartialEq, Eq)]
pub struct FlowSnapshot {
    pub offered: u64,
    pub published: u64,
    /// shed_backpressure + shed_pacer.
    pub shed: u64,
    pub shed_backpressure: u64,
    pub shed_pacer: u64,
    pub failed: u64,
    /// Of `failed`, those that may have landed.
    pub failed_indeterminate: u64,
    pub publish_retries: u64,
    pub hydration_published: u64,
    pub offered_rated: u64,
    pub published_rated: u64,
}

impl FlowSnapshot {
    /// The accounting identity every run must satisfy.
    pub fn identity_holds(&self) -> bool {
        self.offered == self.published + self.shed + self.failed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_counts_every_way_out() {
        let c = FlowCounters::default();
        c.offered.add(10);
        c.published.add(6);
        c.shed_backpressure.add(1);
        c.shed_pacer.add(2);
        assert!(!c.snapshot().identity_holds());
        c.failed.add(1);
        let s = c.snapshot();
        assert!(s.identity_holds());
        assert_eq!(s.shed, 3);
    }
}
