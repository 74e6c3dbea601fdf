//! Every latency a pipeline cell records.

use crate::measure::histograms::Metric;
use crate::workload::pipeline::topology::StreamDef;

#[derive(Debug)]
pub struct Metrics {
    /// End-to-end latency at terminal stages, per flow, rated window only.
    pub e2e: [Metric; 2],
    /// Per (flow, cohort): [flow][0 = cold, 1 = hot]; only filled when skewed.
    pub e2e_cohort: [[Metric; 2]; 2],
    /// End-to-end latency of warm-up traffic (kept apart, reported separately).
    pub e2e_warmup: Metric,
    /// Several loaders: `e2e` split by whether the event's producer shares this
    /// loader's host (its clock), per flow: [flow][0 = same host, 1 = another host].
    pub e2e_hosts: [[Metric; 2]; 2],
    /// Entry age (delivery − scheduled instant) per stream: the latency of each hop.
    pub age: Vec<Metric>,
    /// Phase 1 (concurrent work, barrier) duration per batch, per stream.
    pub barrier: Vec<Metric>,
    /// Derived publish round trip per batch, per intermediate stream.
    pub push: Vec<Metric>,
    /// Pacer hand-over − scheduled instant, per event.
    pub schedule_lag: std::sync::Arc<Metric>,
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
            e2e_hosts: [
                [
                    Metric::new("e2e-A-same-host"),
                    Metric::new("e2e-A-cross-host"),
                ],
                [
                    Metric::new("e2e-B-same-host"),
                    Metric::new("e2e-B-cross-host"),
                ],
            ],
            age: per("age"),
            barrier: per("barrier"),
            push: per("push"),
            schedule_lag: std::sync::Arc::new(Metric::new("schedule-lag")),
            publish: Metric::new("publish"),
        }
    }
}
