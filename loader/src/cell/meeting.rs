//! Where the cell's life meets the other loaders of its cell, if it has any: the
//! four meetings at the rendezvous ([`crate::fleet`]) and what a loader tells the
//! others on the way. [`Solo`] is the ordinary cell, one loader alone, for which
//! every meeting is immediate and every message goes nowhere; [`Joined`] is one
//! loader of several, over its [`Member`]. The phases ([`crate::cell::phases`]) call
//! the trait and never ask which of the two they have.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::cell::faults::timeline::Tally;
use crate::cell::workload::FleetLink;
use crate::fleet::clock::LoaderHost;
use crate::fleet::member::FrontierSource;
use crate::fleet::rendezvous::{Fail, Stage, View};
use crate::fleet::Member;
use crate::measure::clock::Clock;

/// Whose progress ends the drain: this loader's own, or the cell's as the
/// rendezvous merges every loader's (`shared` cells of several loaders).
#[derive(Debug)]
pub enum Progress {
    Mine,
    /// The rendezvous's latest view, when it has one.
    Global(Option<View>),
}

/// The rendezvous as the phases meet it.
#[async_trait]
pub trait Meeting: Send + Sync {
    /// The member the workload's [`FleetLink`] carries (`None` alone).
    fn member(&self) -> Option<Arc<Member>>;
    /// This loader's index among the cell's loaders (`None` alone).
    fn index(&self) -> Option<u64>;
    /// Tell the others this loader failed at `stage`. The failure as the cell records
    /// it, or `None` alone (the error is then this cell's own, not an abandonment).
    async fn fail(&self, stage: &str, why: String) -> Option<Fail>;
    /// How far this loader has got.
    fn set_stage(&self, stage: Stage);
    /// A loader that attaches to loader 0's topology waits for it.
    async fn topology(&self, sets_up: bool, say: &(dyn Fn(String) + Sync)) -> Result<(), Fail>;
    /// The token the traffic obeys: this loader's own signal, and any loader's abort
    /// (a signal here is told to the others).
    fn halt_on(&self, interrupt: &CancellationToken) -> CancellationToken;
    /// Keep telling the rendezvous what this loader has done, until the cell ends.
    fn beat(&self, tally: Tally, producers_done: Arc<AtomicBool>);
    /// Wait at the start barrier; the instant paced traffic starts, and it on the
    /// cell's clock (µs).
    async fn start_at(
        &self,
        clock: Clock,
        link: Option<&FleetLink>,
        say: &(dyn Fn(String) + Sync),
    ) -> Result<(Instant, i64), Fail>;
    /// The drain begins; a `shared` cell's frontier goes with every beat from now on.
    fn drain_begins(&self, frontier: Option<Arc<dyn FrontierSource>>);
    /// Whose progress the drain reads.
    fn progress(&self) -> Progress;
    /// Why the cell was abandoned, if it was.
    fn abandoned(&self) -> Option<Fail>;
    /// Every loader's host as it joined (empty alone).
    fn hosts(&self) -> Vec<Option<LoaderHost>>;
    /// This loader's record is written (loader 0 keeps the rendezvous up for the rest).
    async fn finish(&self);
}

/// One loader alone: nobody to meet.
#[derive(Debug)]
pub struct Solo;

/// Paced traffic starts this long after the start is decided, alone.
const SOLO_LEAD: Duration = Duration::from_millis(50);

#[async_trait]
impl Meeting for Solo {
    fn member(&self) -> Option<Arc<Member>> {
        None
    }
    fn index(&self) -> Option<u64> {
        None
    }
    async fn fail(&self, _stage: &str, _why: String) -> Option<Fail> {
        None
    }
    fn set_stage(&self, _stage: Stage) {}
    async fn topology(&self, _sets_up: bool, _say: &(dyn Fn(String) + Sync)) -> Result<(), Fail> {
        Ok(())
    }
    fn halt_on(&self, interrupt: &CancellationToken) -> CancellationToken {
        interrupt.child_token()
    }
    fn beat(&self, _tally: Tally, _producers_done: Arc<AtomicBool>) {}
    async fn start_at(
        &self,
        clock: Clock,
        _link: Option<&FleetLink>,
        _say: &(dyn Fn(String) + Sync),
    ) -> Result<(Instant, i64), Fail> {
        let start = Instant::now() + SOLO_LEAD;
        Ok((start, clock.us_at(start)))
    }
    fn drain_begins(&self, _frontier: Option<Arc<dyn FrontierSource>>) {}
    fn progress(&self) -> Progress {
        Progress::Mine
    }
    fn abandoned(&self) -> Option<Fail> {
        None
    }
    fn hosts(&self) -> Vec<Option<LoaderHost>> {
        Vec::new()
    }
    async fn finish(&self) {}
}

/// One loader of several, joined to the cell's rendezvous.
#[derive(Debug)]
pub struct Joined {
    member: Arc<Member>,
    /// The `shared` topology: the drain ends on the cell's global frontier.
    shared: bool,
}

impl Joined {
    pub fn new(member: Arc<Member>, shared: bool) -> Self {
        Joined { member, shared }
    }
}

#[async_trait]
impl Meeting for Joined {
    fn member(&self) -> Option<Arc<Member>> {
        Some(self.member.clone())
    }
    fn index(&self) -> Option<u64> {
        Some(self.member.index())
    }
    async fn fail(&self, stage: &str, why: String) -> Option<Fail> {
        self.member.fail(stage, why).await;
        self.member.abandoned()
    }
    fn set_stage(&self, stage: Stage) {
        self.member.set_stage(stage);
    }
    async fn topology(&self, sets_up: bool, say: &(dyn Fn(String) + Sync)) -> Result<(), Fail> {
        if sets_up {
            return Ok(());
        }
        say("waiting for loader 0's topology".into());
        self.member
            .wait("topology", |v| v.topology_ready, |_| vec![0])
            .await
            .map(|_| ())
    }
    fn halt_on(&self, interrupt: &CancellationToken) -> CancellationToken {
        let halt = CancellationToken::new();
        let (h, interrupt, m) = (halt.clone(), interrupt.clone(), self.member.clone());
        tokio::spawn(async move {
            let lost = m.lost();
            tokio::select! {
                _ = interrupt.cancelled() => {
                    m.fail("running", "stopped by Ctrl-C or SIGTERM".into()).await;
                }
                _ = lost.cancelled() => {}
            }
            h.cancel();
        });
        halt
    }
    fn beat(&self, tally: Tally, done: Arc<AtomicBool>) {
        let m = self.member.clone();
        tokio::spawn(async move {
            loop {
                let d = (tally.delivered)();
                m.set_progress(d, d + (tally.published)(), done.load(Ordering::Acquire));
                if m.lost().is_cancelled() {
                    break;
                }
                tokio::time::sleep(crate::fleet::member::BEAT).await;
            }
        });
    }
    async fn start_at(
        &self,
        clock: Clock,
        link: Option<&FleetLink>,
        say: &(dyn Fn(String) + Sync),
    ) -> Result<(Instant, i64), Fail> {
        let m = &self.member;
        m.set_stage(Stage::Ready);
        say("ready: waiting at the start barrier".into());
        let v = m
            .wait(
                "start",
                |v| v.start_unix_us.is_some(),
                |v| v.not_at(Stage::Ready),
            )
            .await?;
        let us = v.start_unix_us.expect("the barrier waited for it");
        if let Some(link) = link {
            let me = m.hosts().get(m.index() as usize).cloned().flatten();
            let same: Vec<bool> = m
                .hosts()
                .iter()
                .map(|h| match (&me, h) {
                    (Some((a, _)), Some((b, _))) => a.same_clock(b),
                    _ => false,
                })
                .collect();
            let _ = link.same_clock.set(same);
        }
        m.set_stage(Stage::Running);
        say(format!(
            "start barrier passed: pacing from {} (in {:.0} ms)",
            crate::record::invocation::utc(
                std::time::UNIX_EPOCH + Duration::from_micros(us.max(0) as u64)
            ),
            (us - clock.now_us()) as f64 / 1000.0
        ));
        Ok((clock.instant_of(us), us))
    }
    fn drain_begins(&self, frontier: Option<Arc<dyn FrontierSource>>) {
        self.member.set_stage(Stage::Draining);
        if let (true, Some(src)) = (self.shared, frontier) {
            self.member.send_frontier(src);
        }
    }
    fn progress(&self) -> Progress {
        match self.shared {
            true => Progress::Global(self.member.view()),
            false => Progress::Mine,
        }
    }
    fn abandoned(&self) -> Option<Fail> {
        self.member.abandoned()
    }
    fn hosts(&self) -> Vec<Option<LoaderHost>> {
        self.member
            .hosts()
            .into_iter()
            .map(|h| h.map(|(h, _)| h))
            .collect()
    }
    async fn finish(&self) {
        self.member.finish().await;
    }
}
