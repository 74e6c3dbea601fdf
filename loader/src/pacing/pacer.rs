//! The pacer: one per producer, the same for every workload. It follows the
//! open-loop [`Schedule`] and releases every slot when it is due, handing it to the
//! workload's *emit* closure, which queues it for a publisher without waiting. A slot
//! that finds its queue full is shed (counted, never retried); a pacer that falls
//! more than [`CATCH_UP_CAP`] slots behind skips the excess (counted as pacer shed:
//! the loader could not hold the schedule, and the cell is VOID).
//!
//! Every slot is stamped with its *scheduled* instant, so every latency measured
//! from the stamp is corrected for coordinated omission.
//!
//! [`Pacer`] is the schedule-following state machine, driven by the elapsed time it
//! is given (tests drive it with a mock clock); [`Paced`] runs one on its own OS
//! thread at raised priority, or on a thread it shares with the cell's other clocked
//! work ([`crate::pacing::work_timer::WorkTimer::pace`]), or as a task on the runtime:
//! on its virtual timer when the cell's time is virtual, on a `timerfd` when a stream
//! cell asks for it (`stream.push.pacer: runtime`: as precise, and cheaper).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::measure::clock::Clock;
use crate::measure::counters::FlowCounters;
use crate::measure::histograms::Metric;
use crate::measure::window::RatedWindow;
use crate::pacing::failpoint::Stall;
use crate::pacing::fd_timer::RuntimeSleep;
use crate::pacing::schedule::Schedule;

/// Catch-up cap: a pacer more than this many slots behind skips the excess.
pub const CATCH_UP_CAP: u64 = 8192;
/// Minimum time between two pacer wake-ups.
pub const MIN_TICK: Duration = Duration::from_micros(250);

/// One slot of the schedule, as the emit closure sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    /// Index in the schedule (0, 1, …).
    pub k: u64,
    /// When it is due, µs after paced traffic started.
    pub due_us: u64,
    /// The scheduled instant, µs since the epoch: the stamp latencies start from.
    pub ts: i64,
    /// The pacer fell behind and skips this slot: the closure consumes what the slot
    /// would have used (a key, a partition pick) and sends nothing.
    pub skipped: bool,
}

/// How the pacer's time passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Timing {
    /// Real time: the pacer runs on its own thread at raised priority.
    #[default]
    Real,
    /// The runtime's paused, virtual time (deterministic tests): the pacer is a task.
    Virtual,
}

/// What a pacer paces.
#[derive(Debug, Clone)]
pub struct PacerSpec {
    /// Thread name (`pacer-A`).
    pub name: String,
    /// Slots per second at full rate, and the ramp.
    pub schedule: Schedule,
    /// Units (events, messages) one slot offers: what the counters count.
    pub units_per_slot: u64,
    /// Paced traffic runs `[start, start + run_for)`.
    pub run_for: Duration,
    pub start: Instant,
    /// `start` on the cell's clock, µs since the epoch.
    pub start_us: i64,
}

/// Where a pacer counts what it releases.
#[derive(Debug, Clone)]
pub struct PacerSinks {
    pub counters: Arc<FlowCounters>,
    pub window: Arc<RatedWindow>,
    /// Hand-over − scheduled instant, per slot.
    pub lag: Arc<Metric>,
    pub clock: Clock,
}

/// The schedule-following state machine.
pub struct Pacer<E> {
    spec: PacerSpec,
    sinks: PacerSinks,
    total: u64,
    k: u64,
    emit: E,
    lag_batch: Vec<i64>,
    /// A test's failpoint: a stall in which nothing is released
    /// ([`crate::pacing::failpoint`]).
    stall: Option<Stall>,
}

impl<E> std::fmt::Debug for Pacer<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pacer")
            .field("spec", &self.spec)
            .field("k", &self.k)
            .field("total", &self.total)
            .finish_non_exhaustive()
    }
}

impl<E: FnMut(Slot) -> bool + Send + 'static> Pacer<E> {
    /// A pacer that hands each due slot to `emit`, which returns whether it queued
    /// the slot (false: its queue was full, the slot is shed).
    pub fn new(spec: PacerSpec, sinks: PacerSinks, emit: E) -> Self {
        let total = spec.schedule.total_before(spec.run_for.as_secs_f64());
        Pacer {
            spec,
            sinks,
            total,
            k: 0,
            emit,
            lag_batch: Vec::with_capacity(256),
            stall: Stall::from_env(),
        }
    }

    /// When paced traffic starts.
    pub fn start_instant(&self) -> Instant {
        self.spec.start
    }

    /// Slots in the whole schedule.
    pub fn total(&self) -> u64 {
        self.total
    }

    fn slot(&self, k: u64, skipped: bool) -> Slot {
        let due = self.spec.schedule.due(k);
        Slot {
            k,
            due_us: (due * 1e6) as u64,
            ts: self.spec.start_us + (due * 1e6) as i64,
            skipped,
        }
    }

    /// Release every slot owed `elapsed` after the start. Returns when to be called
    /// again (as time since the start), or `None` once the schedule is done.
    pub fn step(&mut self, elapsed: Duration) -> Option<Duration> {
        if self.k >= self.total {
            return None;
        }
        if let Some(stall) = self.stall {
            match stall.holds(elapsed) {
                Some(end) => return Some(end),
                None if elapsed >= stall.at => self.stall = None,
                None => {}
            }
        }
        let units = self.spec.units_per_slot;
        let c = &self.sinks.counters;
        let sched = self.spec.schedule;
        let owed = sched.owed(elapsed.as_secs_f64()).min(self.total);
        if owed > self.k + CATCH_UP_CAP {
            // Skipped slots are offered and shed: the loader could not keep up.
            let skip = owed - self.k - CATCH_UP_CAP;
            for j in 0..skip {
                let s = self.slot(self.k + j, true);
                (self.emit)(s);
            }
            c.offered.add(skip * units);
            c.shed_pacer.add(skip * units);
            self.k += skip;
        }
        let now_us = self.sinks.clock.now_us();
        while self.k < owed {
            let s = self.slot(self.k, false);
            c.offered.add(units);
            if self.sinks.window.is_rated(s.ts) {
                c.offered_rated.add(units);
            }
            if !(self.emit)(s) {
                c.shed_backpressure.add(units);
            }
            self.lag_batch.push(now_us - s.ts);
            self.k += 1;
        }
        self.sinks.lag.record_many(&self.lag_batch);
        self.lag_batch.clear();
        if self.k >= self.total {
            return None;
        }
        // The next slot's due time, but never sooner than MIN_TICK from now.
        let next_due = Duration::from_secs_f64(sched.due(self.k));
        Some(next_due.max(elapsed + MIN_TICK))
    }
}

/// Step `pacer` as a task of the runtime, sleeping with `sleep`, until its schedule is
/// done or `stop` is set.
async fn run_as_task<E>(mut pacer: Pacer<E>, stop: Arc<AtomicBool>, mut sleep: RuntimeSleep)
where
    E: FnMut(Slot) -> bool + Send + 'static,
{
    let start = pacer.spec.start;
    sleep.sleep_until(start).await;
    while !stop.load(Ordering::Relaxed) {
        let Some(wake) = pacer.step(start.elapsed()) else {
            break;
        };
        sleep.sleep_until(start + wake).await;
    }
}

/// A pacer with its emit closure's type erased: what a shared thread steps.
pub trait Step: Send {
    /// [`Pacer::step`].
    fn step(&mut self, elapsed: Duration) -> Option<Duration>;
}

impl<E: FnMut(Slot) -> bool + Send + 'static> Step for Pacer<E> {
    fn step(&mut self, elapsed: Duration) -> Option<Duration> {
        Pacer::step(self, elapsed)
    }
}

enum Driver {
    Thread(thread::JoinHandle<()>),
    Task(tokio::task::JoinHandle<()>),
    /// Stepped by a shared thread, which drops the pacer (closing this receiver) when
    /// its schedule is done or it is stopped.
    Shared(tokio::sync::oneshot::Receiver<()>),
}

/// A running producer: its pacer and the publish workers it feeds.
pub struct Paced {
    driver: Option<Driver>,
    workers: JoinSet<()>,
    stop: Arc<AtomicBool>,
}

impl std::fmt::Debug for Paced {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Paced").finish_non_exhaustive()
    }
}

impl Paced {
    /// Run `pacer` beside `workers` (already spawned): on its own OS thread at raised
    /// priority in real time, as a task in virtual time. When the pacer ends (its
    /// schedule done, or stopped) it drops its emit closure, which closes the
    /// workers' queues so they finish what they hold.
    pub fn start<E>(mut pacer: Pacer<E>, workers: JoinSet<()>, timing: Timing) -> Paced
    where
        E: FnMut(Slot) -> bool + Send + 'static,
    {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let start = pacer.spec.start;
        let driver = match timing {
            Timing::Real => {
                let name = pacer.spec.name.clone();
                let h = thread::Builder::new()
                    .name(name)
                    .spawn(move || {
                        crate::pacing::priority::raise_current_thread();
                        let start = start.into_std();
                        // Nothing is due before the start: `elapsed` saturates at zero,
                        // where slot 0 is due.
                        let early = start.saturating_duration_since(std::time::Instant::now());
                        if !early.is_zero() {
                            thread::sleep(early);
                        }
                        while !flag.load(Ordering::Relaxed) {
                            let Some(wake) = pacer.step(start.elapsed()) else {
                                break;
                            };
                            let elapsed = start.elapsed();
                            if wake > elapsed {
                                thread::sleep(wake - elapsed);
                            }
                        }
                    })
                    .expect("spawn pacer thread");
                Driver::Thread(h)
            }
            Timing::Virtual => Driver::Task(tokio::spawn(run_as_task(
                pacer,
                flag,
                RuntimeSleep::tokio(),
            ))),
        };
        Paced {
            driver: Some(driver),
            workers,
            stop,
        }
    }

    /// Run `pacer` beside `workers` as a task of the runtime: no thread of its own, so
    /// the worker that wakes for it hands the slots over itself. In real time it sleeps
    /// on a `timerfd` in the runtime's I/O driver ([`RuntimeSleep`]: the kernel's
    /// sub-millisecond timer, where tokio's rounds each wake-up up to the next whole
    /// millisecond); in virtual time on the runtime's virtual timer. Call from inside
    /// the runtime.
    pub fn start_as_task<E>(pacer: Pacer<E>, workers: JoinSet<()>, timing: Timing) -> Paced
    where
        E: FnMut(Slot) -> bool + Send + 'static,
    {
        crate::pacing::priority::note_task_pacer();
        let sleep = match timing {
            Timing::Real => RuntimeSleep::fine(),
            Timing::Virtual => RuntimeSleep::tokio(),
        };
        let stop = Arc::new(AtomicBool::new(false));
        let driver = Driver::Task(tokio::spawn(run_as_task(pacer, stop.clone(), sleep)));
        Paced {
            driver: Some(driver),
            workers,
            stop,
        }
    }

    /// A pacer stepped by a shared thread: `done` closes when the thread has dropped
    /// it, and the thread drops it once `stop` is set.
    pub fn shared(
        done: tokio::sync::oneshot::Receiver<()>,
        workers: JoinSet<()>,
        stop: Arc<AtomicBool>,
    ) -> Paced {
        Paced {
            driver: Some(Driver::Shared(done)),
            workers,
            stop,
        }
    }

    /// Stop pacing now (Ctrl-C); what is queued is still published.
    pub fn stop_early(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Wait for the pacer to finish its schedule and the workers to publish what
    /// they hold.
    pub async fn finish(mut self) {
        match self.driver.take() {
            Some(Driver::Thread(h)) => {
                let _ = tokio::task::spawn_blocking(move || h.join()).await;
            }
            Some(Driver::Task(h)) => {
                let _ = h.await;
            }
            Some(Driver::Shared(done)) => {
                // Closed, never sent: the thread dropped the pacer.
                let _ = done.await;
            }
            None => {}
        }
        while self.workers.join_next().await.is_some() {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pacer(
        rate: f64,
        run_for: Duration,
        units: u64,
        accept: impl FnMut(Slot) -> bool + Send + 'static,
    ) -> (Pacer<impl FnMut(Slot) -> bool + Send + 'static>, PacerSinks) {
        let origin = Instant::now();
        let sinks = PacerSinks {
            counters: Arc::new(FlowCounters::default()),
            window: Arc::new(RatedWindow::default()),
            lag: Arc::new(Metric::new("lag")),
            clock: Clock::anchored_at(origin, 0),
        };
        sinks.window.set(0, i64::MAX);
        let spec = PacerSpec {
            name: "t".into(),
            schedule: Schedule { rate, ramp: 0.0 },
            units_per_slot: units,
            run_for,
            start: origin,
            start_us: 0,
        };
        (Pacer::new(spec, sinks.clone(), accept), sinks)
    }

    #[test]
    fn releases_what_is_owed_and_says_when_to_wake() {
        let seen = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let s2 = seen.clone();
        let (mut p, sinks) = pacer(1000.0, Duration::from_secs(1), 1, move |s| {
            s2.lock().push(s);
            true
        });
        assert_eq!(p.total(), 1000);
        // At t = 0 the first slot is due; the next at 1 ms.
        assert_eq!(p.step(Duration::ZERO), Some(Duration::from_millis(1)));
        // At 10.5 ms, slots 1..=10 are owed; the next wake is slot 11's due time.
        assert_eq!(
            p.step(Duration::from_micros(10_500)),
            Some(Duration::from_millis(11))
        );
        let got = seen.lock().clone();
        assert_eq!(got.len(), 11);
        assert_eq!(got[10].ts, 10_000, "stamped with the scheduled instant");
        assert!(got.iter().all(|s| !s.skipped));
        // Late calls never ask to wake sooner than MIN_TICK.
        let w = p.step(Duration::from_micros(11_000)).unwrap();
        assert!(w >= Duration::from_micros(11_000) + MIN_TICK, "{w:?}");
        assert_eq!(p.step(Duration::from_secs(2)), None, "schedule done");
        let c = sinks.counters.snapshot();
        assert_eq!(c.offered, 1000);
        assert_eq!(c.offered_rated, 1000);
        assert_eq!(c.shed, 0);
    }

    #[test]
    fn a_full_queue_sheds_and_a_late_pacer_skips_beyond_the_cap() {
        let mut n = 0u64;
        let skipped = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let sk = skipped.clone();
        let (mut p, sinks) = pacer(100_000.0, Duration::from_secs(1), 3, move |s| {
            if s.skipped {
                sk.fetch_add(1, Ordering::Relaxed);
                return true;
            }
            n += 1;
            n.is_multiple_of(2)
        });
        // 0.2 s late: 20 001 slots owed, CATCH_UP_CAP released, the rest skipped.
        p.step(Duration::from_millis(200));
        let c = sinks.counters.snapshot();
        let skip = 20_001 - CATCH_UP_CAP;
        assert_eq!(skipped.load(Ordering::Relaxed), skip);
        assert_eq!(c.shed_pacer, 3 * skip, "counted in units");
        assert_eq!(c.offered, 3 * 20_001);
        assert_eq!(c.shed_backpressure, 3 * (CATCH_UP_CAP / 2));
        assert_eq!(sinks.lag.summary().count, CATCH_UP_CAP);
    }

    #[test]
    fn a_stalled_pacer_releases_nothing_then_skips_beyond_the_cap() {
        let (mut p, sinks) = pacer(20_000.0, Duration::from_secs(3), 1, |_| true);
        p.stall = Some(Stall {
            at: Duration::from_secs(1),
            len: Duration::from_secs(1),
        });
        // On time up to 999 ms: nothing skipped.
        for ms in 0..1000 {
            p.step(Duration::from_millis(ms));
        }
        let before = sinks.counters.snapshot().offered;
        assert_eq!(before, 19_981, "slots 0..=19 980 are due by 999 ms");
        assert_eq!(sinks.counters.snapshot().shed_pacer, 0);
        // Inside the stall: nothing released, and it asks to be woken at its end.
        assert_eq!(
            p.step(Duration::from_millis(1500)),
            Some(Duration::from_secs(2))
        );
        assert_eq!(sinks.counters.snapshot().offered, before);
        // At its end 20 001 slots are owed: the cap released, the rest skipped.
        p.step(Duration::from_secs(2));
        let c = sinks.counters.snapshot();
        assert_eq!(c.offered, 40_001);
        assert_eq!(c.shed_pacer, 40_001 - before - CATCH_UP_CAP);
        assert!(p.stall.is_none(), "a stall happens once");
    }

    #[tokio::test(start_paused = true)]
    async fn a_virtual_pacer_runs_its_schedule_in_virtual_time() {
        let n = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let n2 = n.clone();
        let (p, sinks) = pacer(500.0, Duration::from_secs(2), 1, move |_| {
            n2.fetch_add(1, Ordering::Relaxed);
            true
        });
        let t0 = Instant::now();
        Paced::start(p, JoinSet::new(), Timing::Virtual)
            .finish()
            .await;
        assert_eq!(n.load(Ordering::Relaxed), 1000);
        assert_eq!(sinks.counters.snapshot().offered, 1000);
        // The last slot is due at 1.998 s. Virtual time moves in the timer's whole
        // milliseconds, so a slot is released at most 1 ms late.
        assert!(t0.elapsed() <= Duration::from_secs(2), "{:?}", t0.elapsed());
        assert!(
            sinks.lag.summary().max_ms <= 1.001,
            "{:?}",
            sinks.lag.summary()
        );
    }
}
