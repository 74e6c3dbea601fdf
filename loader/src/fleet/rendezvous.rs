//! The rendezvous: where the loaders of one cell meet. Loader 0 serves it over HTTP
//! (`--rendezvous-listen`); every loader, loader 0 included, reaches it at
//! `--rendezvous` (in Kubernetes, loader 0's pod through the Job's headless Service).
//!
//! Everything goes through three requests, each a JSON body:
//! - `POST /join` (`Join`): a loader arrives, with its index, the loader count, a
//!   digest of its resolved scenario, its host and its clock bound. A count or digest
//!   that differs from loader 0's aborts the cell (two loaders would run different
//!   cells).
//! - `POST /beat` (`Beat`): every 250 ms, a loader says where it is in the cell's life
//!   ([`Stage`]), and in a `shared` cell its progress (what its stages processed, and
//!   during the drain its [`FrontierDelta`]); the answer is the [`View`]: every
//!   loader's stage, whether loader 0 has set the topology up, the start instant once
//!   every loader is ready, the abort if any, and the cell's global progress.
//! - `POST /fail` (`Fail`): a loader gives up, with the stage and the reason; the cell
//!   is aborted for all of them, and each record says which loader failed and why.
//!
//! `GET /state` answers the view, for a person with `curl`.
//!
//! The rendezvous aborts the cell by itself when a loader that joined falls silent for
//! longer than the silence limit (it crashed, or its host did), or when a loader has
//! not joined within the barrier timeout. The start instant is set once, when every
//! loader has reported [`Stage::Ready`]: the current time plus [`START_LEAD`], in Unix
//! µs, so that every loader can reach it on its own clock.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::fleet::clock::{ClockBound, LoaderHost};
use crate::fleet::frontier::{Frontier, FrontierDelta};
use crate::fleet::http;

/// From the moment the last loader is ready to the start instant.
pub const START_LEAD: Duration = Duration::from_millis(1000);

/// Where a loader is in the cell's life, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stage {
    /// Arrived; setting up (loader 0) or waiting for the topology (the others).
    Joined,
    /// The topology is set up (loader 0's says every other loader may attach).
    TopologyReady,
    /// Consumers started and its keys hydrated: waiting for the start instant.
    Ready,
    /// Pacing its share.
    Running,
    /// Draining.
    Draining,
    /// Drained; verifying and writing its record.
    Drained,
    /// Its record is written.
    Done,
}

impl Stage {
    pub fn name(&self) -> &'static str {
        match self {
            Stage::Joined => "joined",
            Stage::TopologyReady => "topology-ready",
            Stage::Ready => "ready",
            Stage::Running => "running",
            Stage::Draining => "draining",
            Stage::Drained => "drained",
            Stage::Done => "done",
        }
    }
}

/// `POST /join`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Join {
    pub loader: u64,
    pub count: u64,
    /// A digest of the resolved scenario: every loader must run the same cell.
    pub digest: String,
    pub host: LoaderHost,
    pub clock: ClockBound,
}

/// `POST /beat`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Beat {
    pub loader: u64,
    pub stage: Option<Stage>,
    /// Messages its stages processed so far.
    pub processed: u64,
    /// Its publishes and deliveries so far (the drain's "nothing moved").
    pub moved: u64,
    /// Its producers have finished.
    pub producers_done: bool,
    /// Its frontier since its last beat (`shared` cells, while draining).
    pub frontier: Option<FrontierDelta>,
}

/// `POST /fail`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Fail {
    pub loader: u64,
    pub stage: String,
    pub why: String,
}

/// One loader as the rendezvous sees it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MemberView {
    pub loader: u64,
    pub joined: bool,
    pub stage: Option<Stage>,
    pub host: Option<LoaderHost>,
    pub clock: Option<ClockBound>,
    /// Milliseconds since it was last heard from.
    pub silent_ms: Option<u64>,
}

/// The answer to a beat: the cell as the rendezvous sees it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct View {
    pub count: u64,
    pub members: Vec<MemberView>,
    /// Loader 0 has set the topology up.
    pub topology_ready: bool,
    /// When paced traffic starts, Unix µs (set once every loader is ready).
    pub start_unix_us: Option<i64>,
    /// Why the cell was abandoned, and by which loader.
    pub abort: Option<Fail>,
    /// Sums over the loaders' last beats.
    pub processed: u64,
    pub moved: u64,
    /// Every loader's producers have finished.
    pub producers_done: bool,
    /// Every stream has processed every key's highest acknowledged seq (from the
    /// frontier deltas; `shared` cells).
    pub caught_up: bool,
    /// (stream, key) pairs still behind.
    pub behind: u64,
    /// Every loader has reached this stage at least.
    pub all_at: Option<Stage>,
}

impl View {
    /// Loaders that have not reached `stage`.
    pub fn not_at(&self, stage: Stage) -> Vec<u64> {
        self.members
            .iter()
            .filter(|m| m.stage.is_none_or(|s| s < stage))
            .map(|m| m.loader)
            .collect()
    }
}

#[derive(Debug, Default)]
struct Member {
    join: Option<Join>,
    stage: Option<Stage>,
    heard: Option<Instant>,
    processed: u64,
    moved: u64,
    producers_done: bool,
}

/// The rendezvous's state. Time is passed in, so the rules test without a clock.
#[derive(Debug)]
pub struct Board {
    count: u64,
    /// How long a joined loader may be silent.
    silence: Duration,
    /// How long every loader has to join.
    barrier_timeout: Duration,
    opened: Instant,
    members: Vec<Member>,
    digest: Option<String>,
    start_unix_us: Option<i64>,
    abort: Option<Fail>,
    frontier: Frontier,
}

impl Board {
    pub fn new(count: u64, barrier_timeout: Duration, silence: Duration, now: Instant) -> Board {
        Board {
            count,
            silence,
            barrier_timeout,
            opened: now,
            members: (0..count).map(|_| Member::default()).collect(),
            digest: None,
            start_unix_us: None,
            abort: None,
            frontier: Frontier::default(),
        }
    }

    fn abort(&mut self, f: Fail) {
        if self.abort.is_none() {
            self.abort = Some(f);
        }
    }

    /// A loader arrives. `Err` (and the cell aborted) when it cannot be part of it.
    pub fn join(&mut self, j: Join, now: Instant) -> Result<(), String> {
        let why = if j.loader >= self.count {
            Some(format!(
                "loader {} joined a rendezvous of {} loaders (indices 0..{})",
                j.loader,
                self.count,
                self.count - 1
            ))
        } else if j.count != self.count {
            Some(format!(
                "loader {} was started with --loader-count {}, loader 0 with {}: give every loader the same count",
                j.loader, j.count, self.count
            ))
        } else if self.digest.as_ref().is_some_and(|d| *d != j.digest) {
            Some(format!(
                "loader {}'s resolved scenario differs from the first loader's (digest {} against {}): every loader must run the same scenario with the same --set values",
                j.loader,
                j.digest,
                self.digest.as_deref().unwrap_or("")
            ))
        } else if self.members[j.loader as usize].join.is_some()
            && self.members[j.loader as usize]
                .join
                .as_ref()
                .is_some_and(|old| old.host != j.host)
        {
            Some(format!(
                "two loaders claim index {} ({} pid {} and {} pid {})",
                j.loader,
                self.members[j.loader as usize]
                    .join
                    .as_ref()
                    .map_or("", |o| o.host.hostname.as_str()),
                self.members[j.loader as usize]
                    .join
                    .as_ref()
                    .map_or(0, |o| o.host.pid),
                j.host.hostname,
                j.host.pid
            ))
        } else {
            None
        };
        if let Some(why) = why {
            self.abort(Fail {
                loader: j.loader,
                stage: "join".into(),
                why: why.clone(),
            });
            return Err(why);
        }
        if self.digest.is_none() {
            self.digest = Some(j.digest.clone());
        }
        let m = &mut self.members[j.loader as usize];
        m.heard = Some(now);
        m.stage = m.stage.max(Some(Stage::Joined));
        m.join = Some(j);
        Ok(())
    }

    /// A loader's beat.
    pub fn beat(&mut self, b: &Beat, now: Instant, now_unix_us: i64) -> Result<(), String> {
        let Some(m) = self.members.get_mut(b.loader as usize) else {
            return Err(format!("no loader {} in this cell", b.loader));
        };
        if m.join.is_none() {
            return Err(format!("loader {} beat before joining", b.loader));
        }
        m.heard = Some(now);
        if let Some(s) = b.stage {
            m.stage = m.stage.max(Some(s));
        }
        m.processed = b.processed;
        m.moved = b.moved;
        m.producers_done = b.producers_done;
        if let Some(d) = &b.frontier {
            if let Err(e) = self.frontier.merge(d) {
                let why = format!("loader {}: {e}", b.loader);
                self.abort(Fail {
                    loader: b.loader,
                    stage: "drain".into(),
                    why: why.clone(),
                });
                return Err(why);
            }
        }
        self.settle(now, now_unix_us);
        Ok(())
    }

    /// A loader gives up.
    pub fn fail(&mut self, f: Fail) {
        self.abort(f);
    }

    /// Apply the time rules: silence, loaders that never came, the start instant.
    pub fn settle(&mut self, now: Instant, now_unix_us: i64) {
        if self.abort.is_some() {
            return;
        }
        for (i, m) in self.members.iter().enumerate() {
            match (m.heard, m.stage) {
                (Some(h), Some(s)) if s < Stage::Done => {
                    let quiet = now.saturating_duration_since(h);
                    if quiet > self.silence {
                        let f = Fail {
                            loader: i as u64,
                            stage: s.name().into(),
                            why: format!(
                                "loader {i} stopped answering the rendezvous: nothing heard for {:.1} s (at stage {}); its process or its host is gone",
                                quiet.as_secs_f64(),
                                s.name()
                            ),
                        };
                        self.abort = Some(f);
                        return;
                    }
                }
                (None, _) if now.saturating_duration_since(self.opened) > self.barrier_timeout => {
                    self.abort = Some(Fail {
                        loader: i as u64,
                        stage: "join".into(),
                        why: format!(
                            "loader {i} never reached the rendezvous within the barrier timeout ({:.0} s)",
                            self.barrier_timeout.as_secs_f64()
                        ),
                    });
                    return;
                }
                _ => {}
            }
        }
        if self.start_unix_us.is_none()
            && self
                .members
                .iter()
                .all(|m| m.stage.is_some_and(|s| s >= Stage::Ready))
        {
            self.start_unix_us = Some(now_unix_us + START_LEAD.as_micros() as i64);
        }
    }

    pub fn view(&self, now: Instant) -> View {
        let members = self
            .members
            .iter()
            .enumerate()
            .map(|(i, m)| MemberView {
                loader: i as u64,
                joined: m.join.is_some(),
                stage: m.stage,
                host: m.join.as_ref().map(|j| j.host.clone()),
                clock: m.join.as_ref().map(|j| j.clock.clone()),
                silent_ms: m
                    .heard
                    .map(|h| now.saturating_duration_since(h).as_millis() as u64),
            })
            .collect();
        View {
            count: self.count,
            members,
            topology_ready: self
                .members
                .first()
                .and_then(|m| m.stage)
                .is_some_and(|s| s >= Stage::TopologyReady),
            start_unix_us: self.start_unix_us,
            abort: self.abort.clone(),
            processed: self.members.iter().map(|m| m.processed).sum(),
            moved: self.members.iter().map(|m| m.moved).sum(),
            producers_done: self.members.iter().all(|m| m.producers_done),
            caught_up: self.frontier.caught_up(),
            behind: self.frontier.behind(),
            all_at: self.members.iter().map(|m| m.stage).min().flatten(),
        }
    }
}

/// Unix µs now.
pub fn unix_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64)
}

/// Serve the board on `listener` until `stop`.
pub async fn serve(listener: TcpListener, board: Arc<Mutex<Board>>, stop: CancellationToken) {
    loop {
        tokio::select! {
            _ = stop.cancelled() => break,
            acc = listener.accept() => {
                let Ok((mut sock, _)) = acc else {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                };
                let board = board.clone();
                tokio::spawn(async move {
                    let _ = tokio::time::timeout(Duration::from_secs(30), handle(&mut sock, &board)).await;
                });
            }
        }
    }
}

fn json<T: Serialize>(v: &T) -> Vec<u8> {
    serde_json::to_vec(v).unwrap_or_else(|_| b"{}".to_vec())
}

fn error_body(why: &str) -> Vec<u8> {
    json(&serde_json::json!({ "error": why }))
}

async fn handle(sock: &mut tokio::net::TcpStream, board: &Mutex<Board>) -> std::io::Result<()> {
    let req = match http::read_request(sock, Duration::from_secs(10)).await {
        Ok(r) => r,
        Err(e) => return http::respond(sock, 400, &error_body(&e.to_string())).await,
    };
    let now = Instant::now();
    let (code, body) = match (req.method.as_str(), req.path.as_str()) {
        ("GET", "/state") => {
            let mut b = board.lock();
            b.settle(now, unix_us());
            (200, json(&b.view(now)))
        }
        ("POST", "/join") => match serde_json::from_slice::<Join>(&req.body) {
            Ok(j) => {
                let mut b = board.lock();
                match b.join(j, now) {
                    Ok(()) => (200, json(&b.view(now))),
                    Err(why) => (409, error_body(&why)),
                }
            }
            Err(e) => (400, error_body(&format!("join: {e}"))),
        },
        ("POST", "/beat") => match serde_json::from_slice::<Beat>(&req.body) {
            Ok(beat) => {
                let mut b = board.lock();
                match b.beat(&beat, now, unix_us()) {
                    Ok(()) => (200, json(&b.view(now))),
                    Err(why) => (409, error_body(&why)),
                }
            }
            Err(e) => (400, error_body(&format!("beat: {e}"))),
        },
        ("POST", "/fail") => match serde_json::from_slice::<Fail>(&req.body) {
            Ok(f) => {
                let mut b = board.lock();
                b.fail(f);
                (200, json(&b.view(now)))
            }
            Err(e) => (400, error_body(&format!("fail: {e}"))),
        },
        (_, "/state" | "/join" | "/beat" | "/fail") => (405, error_body("wrong method")),
        _ => (404, error_body("not found")),
    };
    http::respond(sock, code, &body).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn join(loader: u64, count: u64, digest: &str) -> Join {
        Join {
            loader,
            count,
            digest: digest.into(),
            host: LoaderHost {
                hostname: "h".into(),
                boot_id: "b".into(),
                pid: 100 + loader as u32,
            },
            clock: ClockBound::unknown("test"),
        }
    }

    fn beat(loader: u64, stage: Stage) -> Beat {
        Beat {
            loader,
            stage: Some(stage),
            ..Default::default()
        }
    }

    #[test]
    fn the_start_instant_waits_for_every_loader() {
        let t0 = Instant::now();
        let mut b = Board::new(2, Duration::from_secs(60), Duration::from_secs(10), t0);
        b.join(join(0, 2, "d"), t0).unwrap();
        b.beat(&beat(0, Stage::TopologyReady), t0, 1_000).unwrap();
        assert!(b.view(t0).topology_ready);
        b.beat(&beat(0, Stage::Ready), t0, 1_000).unwrap();
        assert_eq!(b.view(t0).start_unix_us, None);
        assert_eq!(b.view(t0).not_at(Stage::Ready), vec![1]);
        b.join(join(1, 2, "d"), t0).unwrap();
        b.beat(&beat(1, Stage::Ready), t0, 5_000).unwrap();
        let v = b.view(t0);
        assert_eq!(v.start_unix_us, Some(5_000 + START_LEAD.as_micros() as i64));
        assert_eq!(v.all_at, Some(Stage::Ready));
        // Set once: a later beat does not move it.
        b.beat(&beat(1, Stage::Running), t0, 9_000).unwrap();
        assert_eq!(b.view(t0).start_unix_us, v.start_unix_us);
        assert!(b.view(t0).abort.is_none());
    }

    #[test]
    fn a_different_cell_or_count_aborts() {
        let t0 = Instant::now();
        let mut b = Board::new(2, Duration::from_secs(60), Duration::from_secs(10), t0);
        b.join(join(0, 2, "d"), t0).unwrap();
        let e = b.join(join(1, 2, "other"), t0).unwrap_err();
        assert!(e.contains("differs"), "{e}");
        assert_eq!(b.view(t0).abort.unwrap().loader, 1);

        let mut b = Board::new(2, Duration::from_secs(60), Duration::from_secs(10), t0);
        let e = b.join(join(1, 3, "d"), t0).unwrap_err();
        assert!(e.contains("--loader-count 3"), "{e}");
        let mut b = Board::new(2, Duration::from_secs(60), Duration::from_secs(10), t0);
        assert!(b.join(join(2, 2, "d"), t0).is_err());
    }

    #[test]
    fn a_silent_loader_and_a_missing_one_abort_the_cell() {
        let t0 = Instant::now();
        let mut b = Board::new(2, Duration::from_secs(60), Duration::from_secs(10), t0);
        b.join(join(0, 2, "d"), t0).unwrap();
        b.join(join(1, 2, "d"), t0).unwrap();
        b.beat(&beat(0, Stage::Ready), t0 + Duration::from_secs(11), 0)
            .unwrap();
        let a = b.view(t0).abort.expect("loader 1 fell silent");
        assert_eq!(a.loader, 1);
        assert!(a.why.contains("stopped answering"), "{}", a.why);

        let mut b = Board::new(2, Duration::from_secs(60), Duration::from_secs(10), t0);
        b.join(join(0, 2, "d"), t0).unwrap();
        for s in 1..=61u64 {
            b.beat(&beat(0, Stage::Ready), t0 + Duration::from_secs(s), 0)
                .unwrap();
        }
        let a = b.view(t0).abort.expect("loader 1 never came");
        assert_eq!((a.loader, a.stage.as_str()), (1, "join"));
        assert!(a.why.contains("never reached"), "{}", a.why);
    }

    #[test]
    fn a_done_loader_may_go_quiet_and_the_first_abort_stays() {
        let t0 = Instant::now();
        let mut b = Board::new(2, Duration::from_secs(60), Duration::from_secs(10), t0);
        b.join(join(0, 2, "d"), t0).unwrap();
        b.join(join(1, 2, "d"), t0).unwrap();
        b.beat(&beat(1, Stage::Done), t0, 0).unwrap();
        b.beat(&beat(0, Stage::Drained), t0 + Duration::from_secs(30), 0)
            .unwrap();
        assert!(b.view(t0).abort.is_none());
        b.fail(Fail {
            loader: 0,
            stage: "verify".into(),
            why: "first".into(),
        });
        b.fail(Fail {
            loader: 1,
            stage: "x".into(),
            why: "second".into(),
        });
        assert_eq!(b.view(t0).abort.unwrap().why, "first");
    }

    #[tokio::test]
    async fn served_over_http() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let board = Arc::new(Mutex::new(Board::new(
            1,
            Duration::from_secs(60),
            Duration::from_secs(10),
            Instant::now(),
        )));
        let stop = CancellationToken::new();
        let server = tokio::spawn(serve(listener, board, stop.clone()));
        let io = Duration::from_secs(5);
        let (code, _) = http::call(&addr, "POST", "/join", &json(&join(0, 1, "d")), io)
            .await
            .unwrap();
        assert_eq!(code, 200);
        let (code, body) = http::call(&addr, "POST", "/beat", &json(&beat(0, Stage::Ready)), io)
            .await
            .unwrap();
        assert_eq!(code, 200);
        let v: View = serde_json::from_slice(&body).unwrap();
        assert!(v.start_unix_us.is_some());
        let (code, _) = http::call(&addr, "POST", "/beat", b"not json", io)
            .await
            .unwrap();
        assert_eq!(code, 400);
        let (code, _) = http::call(&addr, "GET", "/nope", b"", io).await.unwrap();
        assert_eq!(code, 404);
        stop.cancel();
        server.await.unwrap();
    }
}
