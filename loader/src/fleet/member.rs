//! One loader's side of the rendezvous: it joins, beats every [`BEAT`] from a task of
//! its own (so a long setup or a busy drain never looks like silence), waits at the
//! barriers the cell lifecycle asks for, and learns of an abort within a beat.
//!
//! Loader 0 also serves the rendezvous (its [`Board`]) and keeps serving it after its
//! own record is written, until every loader has said it is done (or the barrier
//! timeout), so that no loader loses the rendezvous during its drain.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::fleet::clock::{ClockBound, LoaderHost};
use crate::fleet::frontier::{DeltaTracker, FrontierDelta};
use crate::fleet::http;
use crate::fleet::rendezvous::{self, Beat, Board, Fail, Join, Stage, View};
use crate::fleet::FleetSpec;

/// How often a loader beats.
pub const BEAT: Duration = Duration::from_millis(250);
/// One request's deadline.
const IO: Duration = Duration::from_secs(5);

/// Where a loader's frontier comes from (`shared` cells, while draining): the keys,
/// the flow of each stream, the flows, and the two tables' readers.
pub trait FrontierSource: Send + Sync {
    fn keys(&self) -> u64;
    fn stream_flow(&self) -> Vec<usize>;
    fn flows(&self) -> usize;
    fn produced(&self, flow: usize, key: u64) -> i64;
    fn seen(&self, stream: usize, key: u64) -> i64;
}

/// What the next beat says.
#[derive(Default)]
struct Status {
    stage: Option<Stage>,
    processed: u64,
    moved: u64,
    producers_done: bool,
    frontier: Option<Arc<dyn FrontierSource>>,
}

/// Why a loader gave up on the cell: which loader failed, at which stage, and why.
pub type Abandon = Fail;

/// A loader, joined to its cell's rendezvous.
pub struct Member {
    pub spec: FleetSpec,
    status: Arc<Mutex<Status>>,
    view: watch::Receiver<Option<View>>,
    abort: Arc<Mutex<Option<Fail>>>,
    /// Fires when the cell is abandoned (by any loader, or the rendezvous is lost).
    lost: CancellationToken,
    stop_beats: CancellationToken,
    beats: Mutex<Option<JoinHandle<()>>>,
    server: Mutex<Option<(CancellationToken, JoinHandle<()>)>>,
    /// Every loader's host and clock, as they joined.
    hosts: Mutex<Vec<Option<(LoaderHost, ClockBound)>>>,
}

impl std::fmt::Debug for Member {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Member")
            .field("spec", &self.spec)
            .finish_non_exhaustive()
    }
}

impl Member {
    /// A beat of this loader's status as it stands, without a frontier.
    fn beat_now(&self) -> Beat {
        let st = self.status.lock();
        Beat {
            loader: self.index(),
            stage: st.stage,
            processed: st.processed,
            moved: st.moved,
            producers_done: st.producers_done,
            frontier: None,
        }
    }

    /// Serve the rendezvous (loader 0), join it, and start beating. An error is a
    /// loader that never got into the cell: the caller records why.
    pub async fn start(spec: FleetSpec, digest: String) -> Result<Arc<Member>, Abandon> {
        let index = spec.share.index;
        let fail = |why: String| Fail {
            loader: index,
            stage: "join".into(),
            why,
        };
        let addr = spec
            .rendezvous_host_port()
            .ok_or_else(|| fail("no rendezvous address".into()))?
            .to_string();
        let mut server = None;
        if index == 0 {
            let listen: SocketAddr = match spec.listen {
                Some(a) => a,
                None => tokio::net::lookup_host(&addr)
                    .await
                    .ok()
                    .and_then(|mut a| a.next())
                    .ok_or_else(|| fail(format!("cannot resolve the rendezvous {addr} to listen on it; give --rendezvous-listen")))?,
            };
            let listener = tokio::net::TcpListener::bind(listen)
                .await
                .map_err(|e| fail(format!("cannot listen on {listen} for the rendezvous: {e}")))?;
            let board = Arc::new(Mutex::new(Board::new(
                spec.share.count,
                spec.barrier_timeout,
                spec.silence(),
                Instant::now(),
            )));
            let stop = CancellationToken::new();
            let task = tokio::spawn(rendezvous::serve(listener, board, stop.clone()));
            server = Some((stop, task));
        }
        let host = LoaderHost::this();
        let join = Join {
            loader: index,
            count: spec.share.count,
            digest,
            host: host.clone(),
            clock: ClockBound::read_off_runtime().await,
        };
        let body = serde_json::to_vec(&join).expect("serialisable");
        // The other loaders may start before loader 0 listens: retry until the
        // barrier timeout.
        let deadline = Instant::now() + spec.barrier_timeout;
        let first: View = loop {
            match http::call(&addr, "POST", "/join", &body, IO).await {
                Ok((200, b)) => match serde_json::from_slice(&b) {
                    Ok(v) => break v,
                    Err(e) => {
                        return Err(fail(format!("rendezvous {addr}: bad answer to join: {e}")))
                    }
                },
                Ok((_, b)) => {
                    let why = serde_json::from_slice::<serde_json::Value>(&b)
                        .ok()
                        .and_then(|v| v["error"].as_str().map(str::to_string))
                        .unwrap_or_else(|| String::from_utf8_lossy(&b).into_owned());
                    stop_server(server).await;
                    return Err(fail(format!(
                        "the rendezvous {addr} refused this loader: {why}"
                    )));
                }
                Err(e) => {
                    if Instant::now() >= deadline {
                        stop_server(server).await;
                        return Err(fail(format!(
                            "loader 0's rendezvous {addr} did not answer within the barrier timeout ({:.0} s): {e}",
                            spec.barrier_timeout.as_secs_f64()
                        )));
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        };
        let (tx, rx) = watch::channel(Some(first));
        let m = Arc::new(Member {
            status: Arc::new(Mutex::new(Status {
                stage: Some(Stage::Joined),
                ..Default::default()
            })),
            view: rx,
            abort: Arc::new(Mutex::new(None)),
            lost: CancellationToken::new(),
            stop_beats: CancellationToken::new(),
            beats: Mutex::new(None),
            server: Mutex::new(server),
            hosts: Mutex::new(vec![None; spec.share.count as usize]),
            spec,
        });
        let task = tokio::spawn(beat_loop(m.clone(), addr, tx));
        *m.beats.lock() = Some(task);
        Ok(m)
    }

    pub fn index(&self) -> u64 {
        self.spec.share.index
    }

    /// Fires when the cell is abandoned.
    pub fn lost(&self) -> CancellationToken {
        self.lost.clone()
    }

    /// Why the cell was abandoned, if it was.
    pub fn abandoned(&self) -> Option<Fail> {
        self.abort.lock().clone()
    }

    pub fn set_stage(&self, s: Stage) {
        let mut st = self.status.lock();
        st.stage = st.stage.max(Some(s));
    }

    /// What this loader has done so far (for the cell's global progress).
    pub fn set_progress(&self, processed: u64, moved: u64, producers_done: bool) {
        let mut st = self.status.lock();
        st.processed = processed;
        st.moved = moved;
        st.producers_done = producers_done;
    }

    /// Send the frontier with every beat from now on.
    pub fn send_frontier(&self, src: Arc<dyn FrontierSource>) {
        self.status.lock().frontier = Some(src);
    }

    /// The latest view of the cell.
    pub fn view(&self) -> Option<View> {
        self.view.borrow().clone()
    }

    /// Every loader's host and clock bound (as they joined), once known.
    pub fn hosts(&self) -> Vec<Option<(LoaderHost, ClockBound)>> {
        self.hosts.lock().clone()
    }

    /// Give up on the cell: tell the rendezvous (best effort) and every waiter.
    pub async fn fail(&self, stage: &str, why: String) {
        let f = Fail {
            loader: self.index(),
            stage: stage.into(),
            why,
        };
        {
            let mut a = self.abort.lock();
            if a.is_none() {
                *a = Some(f.clone());
            }
        }
        if let Some(addr) = self.spec.rendezvous_host_port() {
            let body = serde_json::to_vec(&f).expect("serialisable");
            let _ = http::call(addr, "POST", "/fail", &body, IO).await;
        }
        self.lost.cancel();
    }

    /// Wait until `ready(view)` holds, the cell is abandoned, or the barrier timeout
    /// passes (then this loader abandons it, naming who it waited for).
    pub async fn wait(
        &self,
        barrier: &str,
        ready: impl Fn(&View) -> bool,
        waiting_for: impl Fn(&View) -> Vec<u64>,
    ) -> Result<View, Abandon> {
        let deadline = tokio::time::Instant::now() + self.spec.barrier_timeout;
        let mut rx = self.view.clone();
        loop {
            if let Some(a) = self.abandoned() {
                return Err(a);
            }
            if let Some(v) = rx.borrow_and_update().clone() {
                if ready(&v) {
                    return Ok(v);
                }
            }
            tokio::select! {
                _ = self.lost.cancelled() => {}
                r = rx.changed() => { if r.is_err() { tokio::time::sleep(BEAT).await; } }
                _ = tokio::time::sleep_until(deadline) => {
                    let who = self.view().map(|v| waiting_for(&v)).unwrap_or_default();
                    let why = format!(
                        "waited {:.0} s (the barrier timeout) at the {barrier} barrier for loader(s) {who:?}",
                        self.spec.barrier_timeout.as_secs_f64()
                    );
                    self.fail(barrier, why).await;
                    return Err(self.abandoned().expect("just set"));
                }
            }
        }
    }

    /// This loader's record is written: say so, and (loader 0) keep the rendezvous
    /// up until every loader has said so too, the cell was abandoned, or the barrier
    /// timeout passes.
    pub async fn finish(&self) {
        self.set_stage(Stage::Done);
        if self.index() == 0 {
            let deadline = tokio::time::Instant::now() + self.spec.barrier_timeout;
            let mut rx = self.view.clone();
            loop {
                let done = rx
                    .borrow_and_update()
                    .as_ref()
                    .is_some_and(|v| v.all_at == Some(Stage::Done) || v.abort.is_some());
                if done || self.abandoned().is_some() {
                    break;
                }
                tokio::select! {
                    r = rx.changed() => { if r.is_err() { break; } }
                    _ = tokio::time::sleep_until(deadline) => break,
                }
            }
        } else {
            // One beat so the rendezvous hears "done" before this loader goes.
            tokio::time::sleep(BEAT * 2).await;
        }
        self.stop_beats.cancel();
        let beats = self.beats.lock().take();
        if let Some(t) = beats {
            let _ = tokio::time::timeout(IO, t).await;
        }
        let server = self.server.lock().take();
        stop_server(server).await;
    }
}

async fn stop_server(server: Option<(CancellationToken, JoinHandle<()>)>) {
    if let Some((stop, task)) = server {
        stop.cancel();
        let _ = tokio::time::timeout(IO, task).await;
    }
}

/// Beat every [`BEAT`] until told to stop; publish each view; abandon the cell when
/// the view says so, or when the rendezvous has not answered for the silence limit.
async fn beat_loop(m: Arc<Member>, addr: String, tx: watch::Sender<Option<View>>) {
    let mut tracker = DeltaTracker::default();
    let mut unanswered_since: Option<Instant> = None;
    let silence = m.spec.silence();
    loop {
        let mut beat = m.beat_now();
        let src = m.status.lock().frontier.clone();
        if let Some(src) = &src {
            beat.frontier = Some(frontier_delta(&mut tracker, src.as_ref()));
        }
        let body = serde_json::to_vec(&beat).expect("serialisable");
        match http::call(&addr, "POST", "/beat", &body, IO).await {
            Ok((200, b)) => {
                unanswered_since = None;
                if let Ok(v) = serde_json::from_slice::<View>(&b) {
                    {
                        let mut hosts = m.hosts.lock();
                        for mv in &v.members {
                            if let (Some(h), Some(c)) = (&mv.host, &mv.clock) {
                                if let Some(slot) = hosts.get_mut(mv.loader as usize) {
                                    *slot = Some((h.clone(), c.clone()));
                                }
                            }
                        }
                    }
                    if let Some(a) = &v.abort {
                        let mut mine = m.abort.lock();
                        if mine.is_none() {
                            *mine = Some(a.clone());
                        }
                        drop(mine);
                        m.lost.cancel();
                    }
                    let _ = tx.send(Some(v));
                }
            }
            Ok((_, b)) => {
                tracker.forget();
                let why = serde_json::from_slice::<serde_json::Value>(&b)
                    .ok()
                    .and_then(|v| v["error"].as_str().map(str::to_string))
                    .unwrap_or_else(|| String::from_utf8_lossy(&b).into_owned());
                let mut mine = m.abort.lock();
                if mine.is_none() {
                    *mine = Some(Fail {
                        loader: m.index(),
                        stage: beat.stage.map_or("join", |s| s.name()).into(),
                        why: format!("the rendezvous refused a beat: {why}"),
                    });
                }
                drop(mine);
                m.lost.cancel();
            }
            Err(e) => {
                tracker.forget();
                let since = *unanswered_since.get_or_insert_with(Instant::now);
                if since.elapsed() > silence && m.index() != 0 {
                    let mut mine = m.abort.lock();
                    if mine.is_none() {
                        *mine = Some(Fail {
                            loader: 0,
                            stage: "rendezvous".into(),
                            why: format!(
                                "loader 0's rendezvous {addr} stopped answering for {:.1} s ({e}): loader 0's process or host is gone",
                                since.elapsed().as_secs_f64()
                            ),
                        });
                    }
                    drop(mine);
                    m.lost.cancel();
                }
            }
        }
        tokio::select! {
            _ = m.stop_beats.cancelled() => {
                // The last word: this loader's final stage.
                let last = m.beat_now();
                let body = serde_json::to_vec(&last).expect("serialisable");
                let _ = http::call(&addr, "POST", "/beat", &body, IO).await;
                break;
            }
            _ = tokio::time::sleep(BEAT) => {}
        }
    }
}

fn frontier_delta(tracker: &mut DeltaTracker, src: &dyn FrontierSource) -> FrontierDelta {
    let stream_flow = src.stream_flow();
    tracker.delta(
        src.keys(),
        &stream_flow,
        src.flows(),
        |f, k| src.produced(f, k),
        |s, k| src.seen(s, k),
    )
}
