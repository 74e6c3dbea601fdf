//! The cell as phases: a [`CellRun`] whose methods are the life of one cell, in
//! order: join, set up, start the consumers, hydrate, pace, drain, wind down,
//! verify, judge and record. Each phase hands the next what it made ([`System`],
//! [`Running`], [`Window`], [`Drained`], [`Judged`]); the cell's own state (its
//! record's files, sampling, the budget, the meeting) lives on the `CellRun`.
//!
//! A phase that fails ends the cell: alone, with the error (no record claims
//! success); one loader of several, by telling the others and recording the cell as
//! `ABANDONED` ([`CellRun::or_abandon`]). Being one loader of several is the
//! [`Meeting`]'s business, never a branch here.

mod drain;
mod judge;
mod record;
mod start;
mod traffic;

use std::time::SystemTime;

use anyhow::Result;
use tokio_util::sync::CancellationToken;

use crate::cell::meeting::{Joined, Meeting, Solo};
use crate::cell::workload::Workload;
use crate::cell::{CellReport, Outcome, RunOptions};
use crate::fleet::clock::ClockBound;
use crate::fleet::rendezvous::Fail;
use crate::fleet::{FleetSpec, LoadersRecord, Member};
use crate::measure::clock::Clock;
use crate::measure::sampling::Sampling;
use crate::record::invocation::InvocationFile;
use crate::scenario::{Loaded, Scenario};

pub(crate) use drain::Drained;
pub(crate) use judge::Judged;
pub(crate) use start::{Running, System};
pub(crate) use traffic::Window;

/// How a phase can end the cell besides handing on: with its record written (given
/// up, or refused by the system), or with an error that is not the system's.
pub(crate) enum Ended {
    Report(Box<CellReport>),
    Error(anyhow::Error),
}

impl From<anyhow::Error> for Ended {
    fn from(e: anyhow::Error) -> Self {
        Ended::Error(e)
    }
}

/// The console, unless the cell is quiet.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Say {
    quiet: bool,
}

impl Say {
    pub fn line(&self, m: String) {
        if !self.quiet {
            eprintln!("{m}");
        }
    }
}

/// One cell of `W`, from its first file to its record.
pub(crate) struct CellRun<'a, W: Workload> {
    workload: W,
    loaded: &'a Loaded,
    opts: &'a RunOptions,
    /// Ctrl-C or SIGTERM to this loader.
    signal: &'a CancellationToken,
    meeting: Box<dyn Meeting>,
    clock: Clock,
    inv: InvocationFile,
    /// Taken when the cell's sampling stops (at its record, or when given up).
    sampling: Option<Sampling>,
    /// Taken when the budget is restored (at the judgement; on drop otherwise).
    budget: Option<crate::cell::budget::Session>,
    /// One loader of several: the clock's bound at the start.
    clock_start: Option<ClockBound>,
    say: Say,
}

impl<'a, W: Workload> CellRun<'a, W> {
    /// The cell's first steps: its budget enforced, its clock anchored,
    /// `invocation.txt` begun, sampling started, the banner said.
    pub fn begin(
        workload: W,
        loaded: &'a Loaded,
        opts: &'a RunOptions,
        signal: &'a CancellationToken,
    ) -> Result<Self> {
        let s = &loaded.scenario;
        // Enforced before anything is written or started; restored by the judgement,
        // or on drop on any other way out.
        let budget = crate::cell::budget::Session::apply(s)?;
        let clock = Clock::anchor();
        crate::pacing::priority::forget();
        let inv = InvocationFile::begin(loaded, &opts.argv, &opts.scenario_path, &opts.out)?;
        crate::record::incomplete::begin(&opts.out);
        if let Some(live) = crate::console::live::hub() {
            let (index, count) = opts
                .fleet
                .as_ref()
                .map_or((0, 1), |f| (f.share.index, f.share.count));
            live.cell_started(&s.name, s.system.name(), index, count);
        }
        let sampling = crate::measure::sampling::start(s, &opts.out)?;
        if let (Some(live), Some(view)) = (crate::console::live::hub(), sampling.view()) {
            live.set_samples(view, sampling.system_labels.clone());
        }
        let say = Say { quiet: opts.quiet };
        for line in workload.banner() {
            say.line(line);
        }
        say.line(budget.headline());
        for w in budget.warnings() {
            say.line(format!("warning: {w}"));
        }
        Ok(CellRun {
            workload,
            loaded,
            opts,
            signal,
            meeting: Box::new(Solo),
            clock,
            inv,
            sampling: Some(sampling),
            budget: Some(budget),
            clock_start: None,
            say,
        })
    }

    /// Live the cell's phases and return its report.
    pub async fn run(mut self) -> Result<CellReport> {
        let r = match self.phases().await {
            Ok(r) => Ok(r),
            Err(Ended::Report(r)) => Ok(*r),
            Err(Ended::Error(e)) => Err(e),
        };
        if let Some(live) = crate::console::live::hub() {
            match &r {
                Ok(r) => live.cell_ended(r.outcome.name(), r.load.as_ref().map(|l| l.held)),
                Err(_) => live.cell_ended("ERROR", None),
            }
        }
        r
    }

    async fn phases(&mut self) -> Result<CellReport, Ended> {
        self.join().await?;
        let system = self.set_up().await?;
        let mut running = self.start_consumers(&system).await?;
        let hydration_sec = self.hydrate(&running).await?;
        let mut window = self.pace(&system, &running).await?;
        let ended = self.drain(&system, &running, &mut window).await?;
        let mut drained = self
            .wind_down(&system, &mut running, &mut window, ended)
            .await?;
        if let Some(live) = crate::console::live::hub() {
            live.set_phase("verifying");
        }
        let verdict = self.verify(&drained).await?;
        let judged = self
            .judge(&system, &running, &window, &mut drained, &verdict)
            .await?;
        self.record(&system, &window, &drained, &verdict, judged, hydration_sec)
            .await
    }

    fn s(&self) -> &'a Scenario {
        &self.loaded.scenario
    }

    /// The console as a closure, for what takes one.
    fn say_fn(&self) -> impl Fn(String) + Sync + Copy {
        let say = self.say;
        move |m| say.line(m)
    }

    /// One loader of several joins the rendezvous first (loader 0 serves it).
    async fn join(&mut self) -> Result<(), Ended> {
        let Some(f) = self.opts.fleet.clone() else {
            return Ok(());
        };
        self.clock_start = Some(ClockBound::read_off_runtime().await);
        if f.alone() {
            return Ok(());
        }
        self.say.line(format!(
            "loader {} of {} ({} topology): joining the rendezvous {}",
            f.share.index,
            f.share.count,
            f.topology.name(),
            f.rendezvous
        ));
        match Member::start(f.clone(), f.digest.clone()).await {
            Ok(m) => {
                let shared = f.topology == crate::scenario::FleetTopology::Shared;
                self.meeting = Box::new(Joined::new(m, shared));
                Ok(())
            }
            Err(why) => Err(self.give_up(&why).await),
        }
    }

    /// `r`'s value, or the cell ended: alone, with the error; one loader of several,
    /// told to the others and recorded as given up at `stage`.
    async fn or_abandon<T, E: Into<anyhow::Error>>(
        &mut self,
        stage: &str,
        r: std::result::Result<T, E>,
    ) -> Result<T, Ended> {
        match r {
            Ok(v) => Ok(v),
            Err(e) => {
                let e: anyhow::Error = e.into();
                match self.meeting.fail(stage, format!("{e:#}")).await {
                    Some(why) => Err(self.give_up(&why).await),
                    None => Err(Ended::Error(e)),
                }
            }
        }
    }

    /// A barrier's wait: passed, or the cell given up (and recorded as such).
    async fn barrier<T>(&mut self, r: std::result::Result<T, Fail>) -> Result<T, Ended> {
        match r {
            Ok(v) => Ok(v),
            Err(why) => Err(self.give_up(&why).await),
        }
    }

    /// Record a loader that gave the cell up before pacing it, and end.
    async fn give_up(&mut self, why: &Fail) -> Ended {
        match self.abandoned(why).await {
            Ok(report) => Ended::Report(Box::new(report)),
            Err(e) => Ended::Error(e),
        }
    }

    async fn abandoned(&mut self, why: &Fail) -> Result<CellReport> {
        let Some(f) = self.opts.fleet.as_ref() else {
            anyhow::bail!("loader {} failed at {}: {}", why.loader, why.stage, why.why);
        };
        let clock_end = ClockBound::read_off_runtime().await;
        let loaders = self.loaders_record(f, None, clock_end, Some(why.clone()));
        let (summary, record) = crate::fleet::abandoned::record(
            &self.opts.out,
            self.s(),
            &self.inv.host,
            self.inv.started,
            why,
            &loaders,
        )?;
        self.close(Outcome::Abandoned, SystemTime::now())?;
        Ok(CellReport {
            outcome: Outcome::Abandoned,
            load: None,
            dir: self.opts.out.clone(),
            summary,
            record,
        })
    }

    /// The cell's record is written: `invocation.txt` gets its outcome, the
    /// incomplete marker goes, sampling stops.
    fn close(&mut self, outcome: Outcome, ended: SystemTime) -> Result<()> {
        self.inv.write(Some(ended), Some(outcome.name()))?;
        crate::record::incomplete::end();
        if let Some(s) = self.sampling.take() {
            s.stop();
        }
        Ok(())
    }

    /// The `loaders` section of this loader's record.
    fn loaders_record(
        &self,
        f: &FleetSpec,
        start_unix_us: Option<i64>,
        clock_end: ClockBound,
        abandoned: Option<Fail>,
    ) -> LoadersRecord {
        LoadersRecord {
            count: f.share.count,
            index: Some(f.share.index),
            topology: f.topology.name().into(),
            rendezvous: f.rendezvous.clone(),
            share: Some(crate::fleet::ShareRecord {
                properties_owned: f.share.owned(f.properties),
                rate_fraction: f.rate_fraction,
                rule: format!("p mod {} = {}", f.share.count, f.share.index),
            }),
            namespace: f.namespace(),
            verified_alone: f.verifies_alone(),
            start_unix_us,
            host: Some(crate::fleet::clock::LoaderHost::this()),
            clock_start: self.clock_start.clone(),
            clock_end: Some(clock_end),
            hosts: self.meeting.hosts(),
            abandoned,
            loaders: Vec::new(),
        }
    }
}

/// The fleet spec of a loader of several (`None` alone, or the only loader).
pub(crate) fn several(opts: &RunOptions) -> Option<&FleetSpec> {
    opts.fleet.as_ref().filter(|f| !f.alone())
}
