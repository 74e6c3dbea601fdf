//! The simulated work of a cell's stages, timed by one clock for the whole cell
//! instead of one tokio timer (and its wake-up) per message.
//!
//! A stage hands over a key-batch's work as one [`WorkTimer::work`] call: one
//! duration per message. Each message takes one of its stage's *lanes* (the stage's
//! lane budget) for its duration, in the order given, first come first served across
//! the stage's batches, exactly as a FIFO semaphore would; a message that finds every
//! lane busy waits for the next lane to free. The call completes when the batch's
//! last message has finished: one wake-up per key-batch.
//!
//! A freed lane passes to the next waiting message at the instant it was due to free,
//! not when the timer noticed, so the timer's own lateness never adds to the work
//! times that follow it; a message that arrived after that instant (while the late
//! timer still counted the lane busy) starts when it arrived, never before.
//!
//! The bookkeeping is [`Lanes`], pure and driven by explicit instants (its tests need
//! no clock). Two drivers move it:
//! - in real time, one thread per cell, waking at most every [`TICK`]: a message's
//!   work ends between 0 and one tick (plus the kernel's wake-up latency) after it is
//!   due, where tokio's millisecond timer rounds every sleep up by up to 1 ms. The
//!   same thread steps the cell's pacers ([`WorkTimer::pace`]), at their raised
//!   priority, so one thread wakes where three did;
//! - or, when the scenario says `clock: runtime`, one task on the runtime sleeping on
//!   a `timerfd` in its I/O driver ([`FdTimer`]): as precise, one thread switch per
//!   look instead of two, at the runtime's priority rather than raised;
//! - in the runtime's paused virtual time (deterministic tests), one task sleeping to
//!   the next instant due, so virtual work times are exact.
//!
//! What it saved, measured side by side on control-dense (docs/performance.md): about
//! a fifth of the loader's CPU per delivery, and end-to-end p50 within 1 ms of the
//! ideal work time where tokio's timer left it 2 ms above.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::pacing::fd_timer::{FdTimer, RuntimeSleep};
use crate::pacing::pacer::{Paced, Pacer, Slot, Step, Timing, MIN_TICK};

/// The real-time thread's least sleep between two looks, the pacers' own (see
/// [`MIN_TICK`]): it bounds the thread's wake-ups to 1/TICK per second, and is the most
/// a message's work overruns its drawn time because of this timer (before the
/// kernel's own wake-up latency; half of it on average). Measured side by side, a
/// 500 µs tick saved a further ~12 % of the loader's CPU but moved end-to-end p50 to
/// 1.2 ms above the ideal work time (docs/performance.md).
pub const TICK: Duration = MIN_TICK;

/// How long the real-time driver sleeps when nothing is pending (a new batch wakes it).
const IDLE_SLEEP: Duration = Duration::from_millis(50);

/// One key-batch's work: done when its last message has finished.
#[derive(Debug, Default)]
struct Job {
    state: Mutex<JobState>,
}

#[derive(Debug, Default)]
struct JobState {
    /// Messages not yet finished.
    remaining: usize,
    done: bool,
    /// Done because the timer was stopped ([`WorkTimer::stop`]), not because its
    /// messages finished.
    aborted: bool,
    waker: Option<Waker>,
}

impl Job {
    /// One message finished; the job's waker when it was the last.
    fn finish_one(&self) -> Option<Waker> {
        let mut st = self.state.lock();
        st.remaining = st.remaining.saturating_sub(1);
        if st.remaining == 0 && !st.done {
            st.done = true;
            return st.waker.take();
        }
        None
    }

    /// The timer stopped: the batch is done, unfinished; its waker if it was waiting.
    fn abort(&self) -> Option<Waker> {
        let mut st = self.state.lock();
        if st.done {
            return None;
        }
        st.done = true;
        st.aborted = true;
        st.waker.take()
    }
}

/// A message at work: when it is due to finish, and its batch.
#[derive(Debug)]
struct Running {
    due: Instant,
    /// Submission order: breaks ties between equal instants deterministically.
    order: u64,
    lane_group: usize,
    job: Arc<Job>,
}

impl PartialEq for Running {
    fn eq(&self, other: &Self) -> bool {
        (self.due, self.order) == (other.due, other.order)
    }
}
impl Eq for Running {}
impl PartialOrd for Running {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Running {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.due, self.order).cmp(&(other.due, other.order))
    }
}

/// One stage's lanes: how many, how many are busy, and who waits for one.
#[derive(Debug)]
struct LaneGroup {
    budget: usize,
    busy: usize,
    /// Each waiting message's work, its batch, and when it arrived.
    waiting: VecDeque<(Duration, Arc<Job>, Instant)>,
}

/// The lanes of every stage and the messages at work on them: the timer's pure state.
#[derive(Debug, Default)]
pub struct Lanes {
    groups: Vec<LaneGroup>,
    running: BinaryHeap<Reverse<Running>>,
    order: u64,
}

impl Lanes {
    /// Add a stage with `budget` lanes (at least one); returns its index.
    pub fn add_group(&mut self, budget: usize) -> usize {
        self.groups.push(LaneGroup {
            budget: budget.max(1),
            busy: 0,
            waiting: VecDeque::new(),
        });
        self.groups.len() - 1
    }

    fn start(&mut self, group: usize, at: Instant, work: Duration, job: Arc<Job>) {
        self.groups[group].busy += 1;
        self.order += 1;
        self.running.push(Reverse(Running {
            due: at + work,
            order: self.order,
            lane_group: group,
            job,
        }));
    }

    /// Put a batch's messages to work at `now` (or in the queue for a lane). Returns
    /// when the first of those that started is due.
    fn submit(
        &mut self,
        group: usize,
        now: Instant,
        works: &[Duration],
        job: &Arc<Job>,
    ) -> Option<Instant> {
        let mut first: Option<Instant> = None;
        for &w in works {
            let g = &mut self.groups[group];
            if g.busy < g.budget && g.waiting.is_empty() {
                self.start(group, now, w, job.clone());
                first = Some(first.map_or(now + w, |f| f.min(now + w)));
            } else {
                g.waiting.push_back((w, job.clone(), now));
            }
        }
        first
    }

    /// Finish every message due at or before `now`, handing each freed lane to the
    /// next waiting message at the instant it freed (or at the message's arrival, if
    /// that was later: a late timer must not start work before it arrived). Pushes
    /// the wakers of batches that completed.
    fn expire(&mut self, now: Instant, woken: &mut Vec<Waker>) {
        while let Some(Reverse(top)) = self.running.peek() {
            if top.due > now {
                break;
            }
            let Reverse(r) = self.running.pop().expect("peeked");
            if let Some(w) = r.job.finish_one() {
                woken.push(w);
            }
            let g = &mut self.groups[r.lane_group];
            g.busy -= 1;
            if let Some((work, job, arrived)) = g.waiting.pop_front() {
                self.start(r.lane_group, r.due.max(arrived), work, job);
            }
        }
    }

    /// Mark every batch with a message at work or waiting as aborted, pushing the
    /// wakers of those that were waited for. Their messages keep their lanes until
    /// due, so the bookkeeping stays whole.
    fn abort_all(&mut self, woken: &mut Vec<Waker>) {
        let running = self.running.iter().map(|Reverse(r)| &r.job);
        let waiting = self
            .groups
            .iter()
            .flat_map(|g| g.waiting.iter().map(|(_, j, _)| j));
        for job in running.chain(waiting) {
            if let Some(w) = job.abort() {
                woken.push(w);
            }
        }
    }

    /// When the next message is due, if any is at work.
    pub fn next_due(&self) -> Option<Instant> {
        self.running.peek().map(|Reverse(r)| r.due)
    }

    /// Messages at work and waiting for a lane, over every stage.
    pub fn pending(&self) -> usize {
        self.running.len() + self.groups.iter().map(|g| g.waiting.len()).sum::<usize>()
    }
}

struct Shared {
    state: Mutex<State>,
    /// Pacers the real-time thread steps (see [`WorkTimer::pace`]).
    pacers: Mutex<Vec<Attached>>,
    shutdown: AtomicBool,
    /// Wakes the virtual-time driver task.
    notify: Notify,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("state", &self.state)
            .field("pacers", &self.pacers.lock().len())
            .finish_non_exhaustive()
    }
}

/// A pacer on the timer's thread. Dropping it drops the pacer (and its emit closure,
/// which closes its publishers' queues), then `done`, which tells [`Paced::finish`].
struct Attached {
    pacer: Box<dyn Step>,
    start: Instant,
    stop: Arc<AtomicBool>,
    _done: tokio::sync::oneshot::Sender<()>,
}

#[derive(Debug)]
struct State {
    lanes: Lanes,
    /// When the driver will look next; `None` while it is looking. A submission due
    /// earlier wakes it.
    wake_at: Option<Instant>,
    /// [`WorkTimer::stop`] was called: every batch ends at once, unfinished.
    stopped: bool,
}

/// What drives the timer in real time (in virtual time a task on the virtual timer
/// always does): a thread of its own at the pacers' raised priority, or a task on the
/// runtime sleeping on a `timerfd` ([`FdTimer`]). The scenario's `clock` chooses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Drive {
    #[default]
    Thread,
    Runtime,
}

/// How the timer's driver is woken.
#[derive(Debug)]
enum Driver {
    Thread(std::thread::Thread),
    /// A task on the runtime, on a `timerfd` (real time, [`FdTimer`]).
    Runtime,
    /// A task on the runtime's virtual timer.
    Task,
}

impl Driver {
    fn wake(&self, shared: &Shared) {
        match self {
            Driver::Thread(t) => t.unpark(),
            Driver::Runtime | Driver::Task => shared.notify.notify_one(),
        }
    }
}

/// The cell's work timer (see the module docs). Dropping it stops its driver.
#[derive(Debug)]
pub struct WorkTimer {
    shared: Arc<Shared>,
    driver: Driver,
}

impl WorkTimer {
    /// A timer over `lanes`' stages, driven in `timing`'s time. Call from inside the
    /// runtime (the virtual-time driver is a task of it).
    pub fn start(lanes: Lanes, timing: Timing, drive: Drive) -> std::io::Result<Arc<WorkTimer>> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                lanes,
                wake_at: None,
                stopped: false,
            }),
            pacers: Mutex::new(Vec::new()),
            shutdown: AtomicBool::new(false),
            notify: Notify::new(),
        });
        let driver = match timing {
            Timing::Real if drive == Drive::Runtime => {
                let sleep = RuntimeSleep::on(FdTimer::new()?);
                tokio::spawn(drive_runtime(shared.clone(), sleep));
                Driver::Runtime
            }
            Timing::Real => {
                let s = shared.clone();
                let h = std::thread::Builder::new()
                    .name("work-timer".into())
                    .spawn(move || drive_thread(&s))?;
                Driver::Thread(h.thread().clone())
            }
            Timing::Virtual => {
                tokio::spawn(drive_task(shared.clone()));
                Driver::Task
            }
        };
        Ok(Arc::new(WorkTimer { shared, driver }))
    }

    /// Put one batch to work on stage `group`: one duration per message. The future
    /// completes with `true` when every message has finished, or with `false` once
    /// the timer is [stopped](WorkTimer::stop), at once for a batch at work then and
    /// for any submitted after; dropping it early leaves its messages to finish in
    /// the timer, which then frees their lanes.
    pub fn work(&self, group: usize, works: &[Duration]) -> WorkDone {
        self.work_from(group, Instant::now(), works)
    }

    /// [`WorkTimer::work`] from `now`, an instant the caller has just read (a stage
    /// reads one for the batch's arrival and its work: one clock read, not two).
    pub fn work_from(&self, group: usize, now: Instant, works: &[Duration]) -> WorkDone {
        let job = Arc::new(Job::default());
        if works.is_empty() {
            job.state.lock().done = true;
            return WorkDone { job };
        }
        job.state.lock().remaining = works.len();
        let wake = {
            let mut st = self.shared.state.lock();
            if st.stopped {
                drop(st);
                job.abort();
                return WorkDone { job };
            }
            // Only what this batch started can be due before the driver looks next.
            let due = st.lanes.submit(group, now, works, &job);
            let early = matches!((due, st.wake_at), (Some(d), Some(w)) if d < w);
            if early {
                st.wake_at = None;
            }
            early
        };
        if wake {
            self.driver.wake(&self.shared);
        }
        WorkDone { job }
    }

    /// End every batch at work now, and every batch submitted later at once, each
    /// unfinished (its [`WorkDone`] gives `false`): the run is stopping. One call
    /// for the cell replaces a cancellation future around every batch's work.
    pub fn stop(&self) {
        let mut woken = Vec::new();
        {
            let mut st = self.shared.state.lock();
            st.stopped = true;
            st.lanes.abort_all(&mut woken);
        }
        for w in woken {
            w.wake();
        }
    }

    /// Stop this timer when `token` fires ([`WorkTimer::stop`]): a task that holds
    /// the timer only weakly, so a cell that ends without firing it still drops it.
    pub fn stop_on(self: &Arc<Self>, token: tokio_util::sync::CancellationToken) {
        let timer = Arc::downgrade(self);
        tokio::spawn(async move {
            token.cancelled().await;
            if let Some(t) = timer.upgrade() {
                t.stop();
            }
        });
    }

    /// Run `pacer` beside `workers`, in the timer's own time: in real time on this
    /// timer's thread, which then wakes once for both (and runs at the pacers' raised
    /// priority); in virtual time as [`Paced::start`] does.
    pub fn pace<E>(&self, pacer: Pacer<E>, workers: JoinSet<()>) -> Paced
    where
        E: FnMut(Slot) -> bool + Send + 'static,
    {
        match &self.driver {
            Driver::Thread(_) | Driver::Runtime => {
                let stop = Arc::new(AtomicBool::new(false));
                let (done, rx) = tokio::sync::oneshot::channel();
                self.shared.pacers.lock().push(Attached {
                    start: pacer.start_instant(),
                    pacer: Box::new(pacer),
                    stop: stop.clone(),
                    _done: done,
                });
                self.driver.wake(&self.shared);
                Paced::shared(rx, workers, stop)
            }
            Driver::Task => Paced::start(pacer, workers, Timing::Virtual),
        }
    }
}

impl Drop for WorkTimer {
    fn drop(&mut self) {
        self.shared.shutdown.store(true, Ordering::Release);
        self.driver.wake(&self.shared);
    }
}

/// A batch's work, completing when its last message has finished (`true`) or the
/// timer was stopped first (`false`).
#[derive(Debug)]
pub struct WorkDone {
    job: Arc<Job>,
}

impl Future for WorkDone {
    type Output = bool;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<bool> {
        let mut st = self.job.state.lock();
        if st.done {
            return Poll::Ready(!st.aborted);
        }
        match &st.waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => st.waker = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

/// Finish what is due at `now`, push the wakers of the batches that completed (the
/// caller wakes them outside the lock), and say when to look next: the next instant
/// due but not before `now + tick`, or `other` if sooner; `None` when nothing is at
/// work (sleep until a submission wakes the driver).
fn step(
    shared: &Shared,
    now: Instant,
    tick: Duration,
    other: Option<Instant>,
    woken: &mut Vec<Waker>,
) -> Option<Instant> {
    let mut st = shared.state.lock();
    st.lanes.expire(now, woken);
    let next = match (st.lanes.next_due().map(|d| d.max(now + tick)), other) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    // Far in the future when idle: any submission is earlier and wakes the driver.
    st.wake_at = Some(next.unwrap_or(now + IDLE_SLEEP * 1000));
    next
}

/// Step every attached pacer at `now`; returns the soonest wake-up they ask for.
/// A pacer whose schedule is done, or that was stopped, is dropped.
fn step_pacers(shared: &Shared, now: Instant) -> Option<Instant> {
    let mut next: Option<Instant> = None;
    let mut pacers = shared.pacers.lock();
    pacers.retain_mut(|a| {
        if a.stop.load(Ordering::Relaxed) {
            return false;
        }
        if now < a.start {
            // Nothing is due before the start (a step now would release slot 0,
            // whose due time is the start, early).
            next = Some(next.map_or(a.start, |n| n.min(a.start)));
            return true;
        }
        match a.pacer.step(now.saturating_duration_since(a.start)) {
            Some(wake) => {
                let at = a.start + wake;
                next = Some(next.map_or(at, |n| n.min(at)));
                true
            }
            None => false,
        }
    });
    next
}

fn drive_thread(shared: &Shared) {
    // The thread paces the cell's traffic: it asks for the pacers' priority. It does
    // bounded work per wake-up and sleeps at least a tick between two.
    crate::pacing::priority::raise_current_thread();
    let mut woken = Vec::with_capacity(256);
    while !shared.shutdown.load(Ordering::Acquire) {
        let now = Instant::now();
        let paced = step_pacers(shared, now);
        let next = step(shared, now, TICK, paced, &mut woken);
        for w in woken.drain(..) {
            w.wake();
        }
        // The work's next look is at least a tick away (`step`) and so is a pacer's
        // (`MIN_TICK`); the floor here keeps a raised-priority thread from spinning
        // whatever either asks.
        let sleep = match next {
            Some(at) => at.saturating_duration_since(now).max(TICK),
            None => IDLE_SLEEP,
        };
        std::thread::park_timeout(sleep);
    }
    // Pacers still attached end with the timer (their Paced sees them done).
    shared.pacers.lock().clear();
}

/// The real-time driver as a task of the runtime: as [`drive_thread`], sleeping on a
/// `timerfd` in the runtime's I/O driver instead of parking a thread of its own.
async fn drive_runtime(shared: Arc<Shared>, mut sleep: RuntimeSleep) {
    crate::pacing::priority::note_task_pacer();
    let mut woken = Vec::with_capacity(256);
    while !shared.shutdown.load(Ordering::Acquire) {
        let notified = shared.notify.notified();
        let now = Instant::now();
        let paced = step_pacers(&shared, now);
        let next = step(&shared, now, TICK, paced, &mut woken);
        for w in woken.drain(..) {
            w.wake();
        }
        match next {
            // Never sooner than a tick, as the thread's floor.
            Some(at) => tokio::select! {
                _ = sleep.sleep_until(at.max(now + TICK)) => {}
                _ = notified => {}
            },
            None => notified.await,
        }
    }
    shared.pacers.lock().clear();
}

async fn drive_task(shared: Arc<Shared>) {
    let mut woken = Vec::new();
    while !shared.shutdown.load(Ordering::Acquire) {
        let notified = shared.notify.notified();
        let next = step(&shared, Instant::now(), Duration::ZERO, None, &mut woken);
        for w in woken.drain(..) {
            w.wake();
        }
        match next {
            Some(at) => {
                tokio::select! {
                    _ = tokio::time::sleep_until(at) => {}
                    _ = notified => {}
                }
            }
            None => notified.await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn done(job: &Arc<Job>) -> bool {
        job.state.lock().done
    }

    /// A runtime like a cell's: two workers, real time.
    fn two_workers() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
    }

    fn job(n: usize) -> Arc<Job> {
        let j = Arc::new(Job::default());
        j.state.lock().remaining = n;
        j
    }

    #[test]
    fn a_batch_is_done_when_its_longest_message_is() {
        let t0 = Instant::now();
        let mut lanes = Lanes::default();
        let g = lanes.add_group(8);
        let j = job(3);
        lanes.submit(g, t0, &[ms(10), ms(30), ms(20)], &j);
        let mut w = Vec::new();
        lanes.expire(t0 + ms(29), &mut w);
        assert!(!done(&j));
        assert_eq!(lanes.pending(), 1);
        lanes.expire(t0 + ms(30), &mut w);
        assert!(done(&j));
        assert_eq!(lanes.pending(), 0);
        assert_eq!(lanes.next_due(), None);
    }

    #[test]
    fn lanes_are_shared_first_come_first_served_and_pass_on_at_the_instant_they_free() {
        let t0 = Instant::now();
        let mut lanes = Lanes::default();
        let g = lanes.add_group(2);
        let (a, b) = (job(2), job(2));
        lanes.submit(g, t0, &[ms(10), ms(20)], &a);
        // Both lanes busy: b's messages wait, in order.
        lanes.submit(g, t0 + ms(1), &[ms(5), ms(5)], &b);
        assert_eq!(lanes.next_due(), Some(t0 + ms(10)));
        let mut w = Vec::new();
        // The timer looks late (at 13 ms): b's first message still started at 10 ms.
        lanes.expire(t0 + ms(13), &mut w);
        assert_eq!(lanes.next_due(), Some(t0 + ms(15)));
        lanes.expire(t0 + ms(15), &mut w);
        // b's second message took the lane freed at 15 ms.
        assert_eq!(lanes.next_due(), Some(t0 + ms(20)));
        lanes.expire(t0 + ms(20) - Duration::from_micros(1), &mut w);
        assert!(!done(&a) && !done(&b));
        // a's last message and b's last both end at 20 ms.
        lanes.expire(t0 + ms(20), &mut w);
        assert!(done(&a) && done(&b));
        assert_eq!(w.len(), 0, "jobs made by hand have no waker");
    }

    /// A message that arrives after its lane was due to free, while the late timer
    /// still counts the lane busy, starts when it arrived: its work is never cut
    /// short by the timer's lateness (seen under load: 2.87 ms of a 4 ms work).
    #[test]
    fn a_message_that_arrives_after_the_lane_freed_starts_when_it_arrived() {
        let t0 = Instant::now();
        let mut lanes = Lanes::default();
        let g = lanes.add_group(1);
        let (a, b) = (job(1), job(1));
        lanes.submit(g, t0, &[ms(10)], &a);
        // The lane is due to free at 10 ms; b arrives at 12 ms and the timer, late,
        // has not freed it yet: b waits.
        lanes.submit(g, t0 + ms(12), &[ms(4)], &b);
        let mut w = Vec::new();
        // The timer looks at 15 ms: b starts at 12 ms (not at 10 ms) and ends at 16.
        lanes.expire(t0 + ms(15), &mut w);
        assert!(done(&a));
        assert!(!done(&b), "b's 4 ms cut short: ended by 15 ms");
        assert_eq!(lanes.next_due(), Some(t0 + ms(16)));
        lanes.expire(t0 + ms(16), &mut w);
        assert!(done(&b));
    }

    #[test]
    fn stages_do_not_share_lanes() {
        let t0 = Instant::now();
        let mut lanes = Lanes::default();
        let (g1, g2) = (lanes.add_group(1), lanes.add_group(1));
        let (a, b) = (job(1), job(1));
        lanes.submit(g1, t0, &[ms(10)], &a);
        lanes.submit(g2, t0, &[ms(10)], &b);
        let mut w = Vec::new();
        lanes.expire(t0 + ms(10), &mut w);
        assert!(done(&a) && done(&b));
    }

    #[test]
    fn a_zero_budget_still_gets_one_lane() {
        let t0 = Instant::now();
        let mut lanes = Lanes::default();
        let g = lanes.add_group(0);
        let a = job(2);
        lanes.submit(g, t0, &[ms(1), ms(1)], &a);
        let mut w = Vec::new();
        lanes.expire(t0 + ms(1), &mut w);
        assert!(!done(&a));
        lanes.expire(t0 + ms(2), &mut w);
        assert!(done(&a));
    }

    #[tokio::test(start_paused = true)]
    async fn in_virtual_time_work_takes_exactly_its_duration() {
        let mut lanes = Lanes::default();
        let g = lanes.add_group(4);
        let timer = WorkTimer::start(lanes, Timing::Virtual, Drive::Thread).unwrap();
        let t0 = Instant::now();
        timer.work(g, &[ms(15), ms(7)]).await;
        assert_eq!(t0.elapsed(), ms(15));
        // Five messages on four lanes: the fifth starts when the first lane frees.
        let t1 = Instant::now();
        timer.work(g, &[ms(3), ms(9), ms(9), ms(9), ms(4)]).await;
        assert_eq!(t1.elapsed(), ms(9));
        let t2 = Instant::now();
        timer.work(g, &[ms(9), ms(9), ms(9), ms(9), ms(4)]).await;
        assert_eq!(t2.elapsed(), ms(13));
        assert!(timer.work(g, &[]).await, "no work is done work");
    }

    /// The cell's stop ends the batches at work at once, unfinished, and every batch
    /// submitted after it; a batch that finished before it stays finished. (Break W1,
    /// docs/testing.md: `stop` that sets the flag without aborting the jobs at work
    /// lets both batches run their 50 ms and end finished.)
    #[tokio::test(start_paused = true)]
    async fn the_stop_ends_the_work_at_once_unfinished() {
        let mut lanes = Lanes::default();
        let g = lanes.add_group(1);
        let timer = WorkTimer::start(lanes, Timing::Virtual, Drive::Thread).unwrap();
        let stop = tokio_util::sync::CancellationToken::new();
        timer.stop_on(stop.clone());
        assert!(timer.work(g, &[ms(2)]).await, "finished before the stop");
        let t0 = Instant::now();
        // One batch at work, one waiting for the lane.
        let (at_work, waiting) = (timer.work(g, &[ms(50)]), timer.work(g, &[ms(50)]));
        let stopper = async {
            tokio::time::sleep(ms(5)).await;
            stop.cancel();
        };
        let (a, b, ()) = tokio::join!(at_work, waiting, stopper);
        assert!(!a && !b, "both end unfinished: {a} {b}");
        assert_eq!(t0.elapsed(), ms(5), "at the stop, not when due");
        assert!(!timer.work(g, &[ms(1)]).await, "submitted after the stop");
        assert_eq!(t0.elapsed(), ms(5));
    }

    /// A pacer of `rate` slots/s for `run_for`, counting what it emits.
    fn counting_pacer(
        rate: f64,
        run_for: Duration,
    ) -> (
        Pacer<impl FnMut(Slot) -> bool + Send + 'static>,
        Arc<std::sync::atomic::AtomicU64>,
    ) {
        counting_pacer_from(rate, run_for, Duration::ZERO)
    }

    /// The same, starting `lead` from now.
    fn counting_pacer_from(
        rate: f64,
        run_for: Duration,
        lead: Duration,
    ) -> (
        Pacer<impl FnMut(Slot) -> bool + Send + 'static>,
        Arc<std::sync::atomic::AtomicU64>,
    ) {
        use crate::measure::clock::Clock;
        use crate::measure::counters::FlowCounters;
        use crate::measure::histograms::Metric;
        use crate::measure::window::RatedWindow;
        use crate::pacing::pacer::{PacerSinks, PacerSpec};
        use crate::pacing::schedule::Schedule;
        let origin = Instant::now() + lead;
        let seen = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let s2 = seen.clone();
        let sinks = PacerSinks {
            counters: Arc::new(FlowCounters::default()),
            window: Arc::new(RatedWindow::default()),
            lag: Arc::new(Metric::new("lag")),
            clock: Clock::anchored_at(origin, 0),
        };
        let spec = PacerSpec {
            name: "t".into(),
            schedule: Schedule { rate, ramp: 0.0 },
            units_per_slot: 1,
            run_for,
            start: origin,
            start_us: 0,
        };
        let p = Pacer::new(spec, sinks, move |_s: Slot| {
            s2.fetch_add(1, Ordering::Relaxed);
            true
        });
        (p, seen)
    }

    #[test]
    fn pacers_on_the_timer_thread_run_their_schedule_and_stop_when_told() {
        pacers_on_the_timer_run_their_schedule_and_stop_when_told(Drive::Thread);
    }

    #[test]
    fn pacers_on_the_runtime_clock_run_their_schedule_and_stop_when_told() {
        pacers_on_the_timer_run_their_schedule_and_stop_when_told(Drive::Runtime);
    }

    fn pacers_on_the_timer_run_their_schedule_and_stop_when_told(drive: Drive) {
        two_workers().block_on(async {
            let mut lanes = Lanes::default();
            let g = lanes.add_group(4);
            let timer = WorkTimer::start(lanes, Timing::Real, drive).unwrap();
            let (a, seen_a) = counting_pacer(2000.0, ms(100));
            let (b, seen_b) = counting_pacer(1000.0, Duration::from_secs(3600));
            let pa = timer.pace(a, JoinSet::new());
            let pb = timer.pace(b, JoinSet::new());
            // Work goes on beside the pacers, on the same thread.
            timer.work(g, &[ms(5), ms(5)]).await;
            pa.finish().await;
            assert_eq!(seen_a.load(Ordering::Relaxed), 200, "the whole schedule");
            // The hour-long one ends when stopped, having paced a little.
            pb.stop_early();
            pb.finish().await;
            assert!(seen_b.load(Ordering::Relaxed) > 0);
        });
    }

    #[test]
    fn a_pacer_attached_before_its_start_releases_nothing_until_then() {
        for drive in [Drive::Thread, Drive::Runtime] {
            a_pacer_attached_early_waits(drive);
        }
    }

    fn a_pacer_attached_early_waits(drive: Drive) {
        two_workers().block_on(async {
            let timer = WorkTimer::start(Lanes::default(), Timing::Real, drive).unwrap();
            let (p, seen) = counting_pacer_from(1000.0, ms(50), ms(2000));
            let paced = timer.pace(p, JoinSet::new());
            // Slot 0 is due at the start, not when the pacer is attached.
            tokio::time::sleep(ms(150)).await;
            assert_eq!(seen.load(Ordering::Relaxed), 0, "a slot released early");
            paced.finish().await;
            assert_eq!(seen.load(Ordering::Relaxed), 50, "the whole schedule");
        });
    }

    #[test]
    fn in_real_time_work_ends_after_its_duration_and_within_a_bounded_overrun() {
        work_ends_after_its_duration_and_within_a_bounded_overrun(Drive::Thread);
    }

    #[test]
    fn on_the_runtime_clock_work_ends_after_its_duration_and_within_a_bounded_overrun() {
        work_ends_after_its_duration_and_within_a_bounded_overrun(Drive::Runtime);
    }

    fn work_ends_after_its_duration_and_within_a_bounded_overrun(drive: Drive) {
        two_workers().block_on(async {
            let mut lanes = Lanes::default();
            let g = lanes.add_group(64);
            let timer = WorkTimer::start(lanes, Timing::Real, drive).unwrap();
            let mut handles = Vec::new();
            for i in 0..50u64 {
                let timer = timer.clone();
                handles.push(tokio::spawn(async move {
                    let t0 = Instant::now();
                    timer.work(g, &[ms(2 + i % 7), ms(1)]).await;
                    (t0.elapsed(), ms(2 + i % 7))
                }));
            }
            for h in handles {
                let (took, want) = h.await.unwrap();
                // Never early. The overrun bound is loose on purpose (a loaded CI
                // machine may delay a thread by far more than a tick): it only
                // catches a timer that does not wake.
                assert!(took >= want, "work took {took:?} < {want:?}");
                assert!(took < want + ms(2000), "work took {took:?} for {want:?}");
            }
        });
    }
}
