//! The phases that conclude: verify (`produced.meta`, then the checker's verdict; a
//! loader of a `shared` cell leaves it to the merge, since its logs hold whichever
//! keys the system handed it) and judge (the cost of serving the cell, the
//! workload's figures, the VOID rule, the held rule, the warnings and the outcome).

use anyhow::Context as _;

use crate::cell::faults::FaultRecord;
use crate::cell::phases::{several, CellRun, Drained, Ended, Running, System, Window};
use crate::cell::workload::{Ending, Load, Workload};
use crate::cell::Outcome;
use crate::fleet::rendezvous::Fail;
use crate::record::result::{LoadVerdict, LoaderFigures};

/// What the judgement concluded, for the record.
pub(crate) struct Judged<B> {
    pub outcome: Outcome,
    pub body: B,
    pub loader: LoaderFigures,
    pub void_reasons: Vec<String>,
    pub load: LoadVerdict,
    pub warnings: Vec<String>,
    pub faults: Option<FaultRecord>,
    pub cost: sampler::CostSummary,
    pub resources: Option<cell_record::resources::Resources>,
    pub abandoned: Option<Fail>,
    /// `offered = published + shed + failed` held for every flow.
    pub identity_holds: bool,
}

impl<W: Workload> CellRun<'_, W> {
    /// Whether this loader's verdict is the cell's (not a loader of a `shared` cell).
    fn verifies(&self) -> bool {
        self.opts.fleet.as_ref().is_none_or(|f| f.verifies_alone())
    }

    /// Write `produced.meta` and verify the logs against it.
    pub(super) async fn verify(&mut self, d: &Drained) -> Result<checker::Verdict, Ended> {
        let (s, dir) = (self.s(), &self.opts.out);
        let mut meta = self.workload.produced_meta(d.end, s.accept.name());
        if let Some(f) = several(self.opts) {
            meta = crate::cell::with_fleet_header(&meta, f);
        }
        std::fs::write(dir.join("produced.meta"), meta).context("writing produced.meta")?;
        let verdict = if self.verifies() {
            crate::cell::verify(dir, s.accept).await?
        } else {
            crate::cell::deferred_verdict(dir)
        };
        if let Some(f) = self.opts.fleet.as_ref() {
            let hists = self.workload.histograms();
            crate::fleet::totals::write(&dir.join("totals.hlog"), &hists, f.share.index)
                .context("writing totals.hlog")?;
        }
        Ok(verdict)
    }

    /// The cost of serving the cell over the rated window (sampling stops here).
    async fn cost(
        &mut self,
        sys: &System,
        w: &Window,
        load: &Load,
    ) -> anyhow::Result<sampler::CostSummary> {
        let sampling = self.sampling.take().context("sampling already stopped")?;
        let say = self.say_fn();
        sampling
            .finish_cell(
                w.rated_start_us,
                w.edges.rated_sec(),
                crate::measure::sampling::workload_facts(
                    &sys.description,
                    load.published_rated,
                    load.deliveries_rated,
                    load.partitions,
                ),
                self.opts.sampler_url.as_deref(),
                self.inv.started_unix_ms(),
                say,
            )
            .await
    }

    /// The figures, the VOID rule, the held rule, the warnings and the outcome.
    pub(super) async fn judge(
        &mut self,
        sys: &System,
        run: &Running,
        w: &Window,
        d: &mut Drained,
        verdict: &checker::Verdict,
    ) -> Result<Judged<W::Body>, Ended> {
        let s = self.s();
        let load = self.workload.load();
        let cost = self.cost(sys, w, &load).await?;
        let ending = Ending {
            env: &run.env,
            verdict,
            rated_sec: w.edges.rated_sec(),
            wall_rated_sec: w.edges.wall_sec,
            deliveries_in_window: w.deliveries_in_window,
            stream_counters: &run.counters,
        };
        let figures = self.workload.figures(&ending)?;
        let loader = LoaderFigures::measure(
            w.edges.cpu_seconds,
            w.edges.wall_sec,
            w.deliveries_in_window,
        );
        let mut void_reasons = crate::cell::void_rule::reasons(
            &s.void,
            &crate::cell::void_rule::LoaderLoad {
                shed_pacer: load.shed_pacer,
                unit: load.unit,
                cores: loader.cpu_cores_mean,
                cores_available: loader.cores_available,
                schedule_lag_p99_ms: load.schedule_lag.p99_ms,
                host_steal_frac: cost.host_steal_frac_mean,
            },
        );
        // A fault that did not take effect (a cut that let traffic through, a leader
        // the system would not name): the cell did not test what it says.
        if let Some(f) = &d.faults {
            void_reasons.extend(f.ineffective());
        }
        let load_verdict = crate::cell::load_rule::verdict(
            &s.held,
            &crate::cell::load_rule::LoadFacts {
                served_in_window: self.workload.served_in_window(&ending),
                failed: load.failed,
                shed: load.shed_backpressure,
                unit: load.unit,
                drain: d.end,
            },
        );
        let abandoned = self.meeting.abandoned();
        let outcome = self.outcome(
            run,
            verdict.pass,
            figures.identity_holds,
            &void_reasons,
            &abandoned,
        );
        let mut judged = Judged {
            outcome,
            body: figures.body,
            loader,
            void_reasons,
            load: load_verdict,
            warnings: figures.warnings,
            faults: None,
            cost,
            resources: None,
            abandoned,
            identity_holds: figures.identity_holds,
        };
        self.warnings(sys, run, w, d, &load, &mut judged);
        // The budget is restored here, its block with each side's use.
        judged.resources = self
            .budget
            .take()
            .map(|b| b.finish(&judged.cost, &self.opts.out.join("samples.csv")));
        Ok(judged)
    }

    /// How the cell ended: a signal to this loader, another loader's abort, or the
    /// checker's verdict under the VOID rule.
    fn outcome(
        &self,
        run: &Running,
        pass: bool,
        identity_holds: bool,
        void_reasons: &[String],
        abandoned: &Option<Fail>,
    ) -> Outcome {
        let me = self.meeting.index();
        if self.signal.is_cancelled() && abandoned.as_ref().is_none_or(|a| Some(a.loader) == me) {
            // Stopped by Ctrl-C or SIGTERM (this loader's own signal): the record is
            // complete, over the window as it ran; the verdict on what was delivered
            // is in it.
            Outcome::Interrupted
        } else if abandoned.is_some() {
            Outcome::Abandoned
        } else if run.halt.is_cancelled() {
            Outcome::Interrupted
        } else {
            match crate::cell::void_rule::outcome(pass, identity_holds, void_reasons) {
                Outcome::Pass if !self.verifies() => Outcome::Share,
                o => o,
            }
        }
    }

    /// Every warning of the cell, in the record's order, around the workload's own
    /// (already in `judged`); the faults' block is built on the way (its warnings are
    /// among them).
    fn warnings(
        &mut self,
        sys: &System,
        run: &Running,
        w: &Window,
        d: &mut Drained,
        load: &Load,
        judged: &mut Judged<W::Body>,
    ) {
        let workload_warnings = std::mem::take(&mut judged.warnings);
        let mut warnings = d.consume_errors.clone();
        warnings.extend(sys.provenance_warnings.iter().cloned());
        warnings.extend(
            self.budget
                .as_ref()
                .map(|b| b.warnings())
                .unwrap_or_default(),
        );
        warnings.extend(d.stalled.clone());
        warnings.extend(workload_warnings);
        let cost = &judged.cost;
        if let Some(f) = crate::cell::void_rule::notable_steal(cost.host_steal_frac_mean) {
            warnings.push(format!(
                "CPU steal: the hypervisor took {:.1} % of the host's CPU time in the rated window (worst second {:.1} %); the loader and the system had that much less, and a schedule lag may be the host's",
                100.0 * f,
                100.0 * cost.host_steal_frac_peak.unwrap_or(f)
            ));
        }
        if let Some(crate::cell::faults::FaultsEnded {
            events,
            spans,
            proxy,
            cluster,
        }) = d.faults.take()
        {
            let rated_sec = w.edges.rated_sec();
            let (record, fault_warnings, lines) =
                crate::cell::faults::report::build(&crate::cell::faults::report::Inputs {
                    scenario: self.s(),
                    dir: &self.opts.out,
                    events,
                    spans,
                    proxy,
                    cluster,
                    readings: &d.readings,
                    traffic_start_unix_ms: w.start_us / 1000,
                    rated_start_unix_ms: w.rated_start_us / 1000,
                    rated_end_unix_ms: w.rated_start_us / 1000 + (rated_sec * 1000.0) as i64,
                    load,
                    stream_counters: &run.counters,
                });
            warnings.extend(fault_warnings);
            self.inv.fault_lines = lines;
            judged.faults = Some(record);
        }
        for t in &cost.missing_system_targets {
            warnings.push(format!(
                "sample target {t} was absent (no value in any sample): the system's cost figures leave it out; check sample.targets (or the system's process name)"
            ));
        }
        if !judged.identity_holds {
            warnings.push(
                "accounting identity offered = published + shed + failed does not hold".into(),
            );
        }
        if sys.description.durability == adapters::Durability::None {
            // A tier the adapter found on the server, never a durable one in disguise.
            warnings.push(format!(
                "NOT DURABLE: {} persists nothing here (durability none, as found at setup): every acknowledged message is lost on a restart",
                sys.description.system
            ));
        }
        if let Some(a) = &judged.abandoned {
            warnings.push(format!(
                "ABANDONED: loader {} failed at {}: {}; every loader stopped its traffic early",
                a.loader, a.stage, a.why
            ));
        }
        judged.warnings = warnings;
    }
}
