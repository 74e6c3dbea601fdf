//! Every latency the run records, and the rated window that decides what counts.

use std::sync::atomic::{AtomicI64, Ordering};

use crate::histograms::Metric;
use crate::topology::StreamDef;

/// The rated window in µs since the epoch (scheduled instants inside it count).
#[derive(Debug)]
pub struct Window {
    start_us: AtomicI64,
    end_us: AtomicI64,
}

impl Default for Window {
    fn default() -> Self {
        Window {
            start_us: AtomicI64::new(i64::MAX),
            end_us: AtomicI64::new(i64::MAX),
        }
    }
}

impl Window {
    pub fn set(&self, start_us: i64, end_us: i64) {
        self.start_us.store(start_us, Ordering::Relaxed);
        self.end_us.store(end_us, Ordering::Relaxed);
    }
    pub fn start_us(&self) -> i64 {
        self.start_us.load(Ordering::Relaxed)
    }
    pub fn end_us(&self) -> i64 {
        self.end_us.load(Ordering::Relaxed)
    }
    /// Was an event scheduled at `ts` part of the rated window?
    pub fn is_rated(&self, ts: i64) -> bool {
        ts >= self.start_us() && ts < self.end_us()
    }
}

/// Flow index of a flow letter.
pub fn flow_index(flow: u8) -> usize {
    usize::from(flow != b'A')
}

#[derive(Debug)]
pub struct Metrics {
    /// End-to-end latency at terminal stages, per flow, rated window only.
    pub e2e: [Metric; 2],
    /// Per (flow, cohort): [flow][0 = cold, 1 = hot]; only filled when skewed.
    pub e2e_cohort: [[Metric; 2]; 2],
    /// End-to-end latency of warm-up traffic (kept apart, reported separately).
    pub e2e_warmup: Metric,
    /// Entry age (delivery − scheduled instant) per stream: the latency of each hop.
    pub age: Vec<Metric>,
    /// Phase 1 (concurrent work, barrier) duration per batch, per stream.
    pub barrier: Vec<Metric>,
    /// Derived publish round trip per batch, per intermediate stream.
    pub push: Vec<Metric>,
    /// Pacer hand-over − scheduled instant, per event.
    pub schedule_lag: Metric,
    /// Ingress publish round trip.
    pub publish: Metric,
}

impl Metrics {
    pub fn new(streams: &[StreamDef]) -> Self {
        let per = |what: &str| -> Vec<Metric> {
            streams
                .iter()
                .map(|s| Metric::new(format!("{what}-{}", s.name())))
                .collect()
        };
        Metrics {
            e2e: [Metric::new("e2e-A"), Metric::new("e2e-B")],
            e2e_cohort: [
                [Metric::new("e2e-A-cold"), Metric::new("e2e-A-hot")],
                [Metric::new("e2e-B-cold"), Metric::new("e2e-B-hot")],
            ],
            e2e_warmup: Metric::new("e2e-warmup"),
            age: per("age"),
            barrier: per("barrier"),
            push: per("push"),
            schedule_lag: Metric::new("schedule-lag"),
            publish: Metric::new("publish"),
        }
    }
}
