//! Faults injected during a cell (the scenario's `faults:` list and `proxy:` section),
//! written once for every workload: the schedule runs against the rated window's
//! start, each fault's actions (signals, commands, toxics) are recorded with their
//! instants, pids, commands and exit codes, and the service's loss of availability
//! and its recovery are measured afterwards ([`timeline`]).
//!
//! A fault that began is always ended, whatever happens to the cell: a paused victim
//! gets its SIGCONT and a toxic is switched off when the cell ends, is interrupted or
//! fails (the guard's `Drop`), and a killed victim is restarted (its `restart`
//! command) when the cell ends before the fault's duration did.

pub mod command;
pub mod network;
pub mod placement;
pub mod proxy;
pub mod report;
pub mod target;
pub mod timeline;

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde::Serialize;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use adapters::Durability;

use crate::cell::faults::command::{run_command, CommandOutcome};
use crate::cell::faults::network::Connectivity;
use crate::cell::faults::proxy::{Active, Proxy, ProxyFigures};
use crate::cell::faults::target::{signal, signal_pids, Signal};
use crate::cell::faults::timeline::{Recovery, Span, Unavailability};
use crate::measure::clock::Clock;
use crate::scenario::cluster::{ClusterNode, ClusterSection};
use crate::scenario::faults::{FaultKind, FaultSpec, Victim};
use crate::scenario::Scenario;

/// Why this cell may lose acknowledged writes without failing: its tier promises
/// nothing across the crash or restart it injects. `None`: every loss fails.
pub fn loss_allowed(s: &Scenario) -> Option<String> {
    let crashes = s
        .faults
        .iter()
        .any(|f| matches!(f.kind, FaultKind::Kill | FaultKind::Restart));
    let tier_keeps_nothing = matches!(s.durability, Durability::Memory | Durability::None);
    (crashes && tier_keeps_nothing).then(|| {
        format!(
            "durability={}: the tier keeps nothing across the kill or restart this cell injects",
            if s.durability == Durability::None {
                "none"
            } else {
                "memory"
            }
        )
    })
}

/// One thing a fault did.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FaultEvent {
    /// Index in the schedule.
    pub fault: usize,
    /// `sigkill`, `sigstop`, `sigcont`, `restart`, `toxic-on`, `toxic-off`, `skipped`.
    pub action: String,
    /// From the start of the rated window.
    pub at_ms: i64,
    pub unix_ms: i64,
    /// The victim as named.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Processes signalled.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pids: Vec<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<CommandOutcome>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Cluster faults: what was cut or killed (`[n2] | [n1, n3]`; `n2, leader of 3 of
    /// 3 streams`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// A partition's or a heal's check of the network between the nodes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connectivity: Option<Connectivity>,
    /// Why the fault did not do what the schedule says (a cut that let traffic
    /// through, a leader the system would not name): the cell is VOID.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ineffective: Option<String>,
}

/// What the faults did to the service.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FaultFigures {
    pub unavailability_ms: Unavailability,
    /// Per fault, in schedule order.
    pub recovery: Vec<Recovery>,
    /// The worst end-to-end latency of a rated unit.
    pub max_e2e_lag_ms: f64,
    /// Publish attempts that failed, by error class (each was retried or given up).
    pub publish_errors_by_class: std::collections::BTreeMap<String, u64>,
    /// Consumer-side: failed receives, failed acks, reconnects (all streams).
    pub receive_errors: u64,
    pub ack_errors: u64,
    pub reconnects: u64,
    /// Units given up, and of those the indeterminate ones.
    pub failed: u64,
    pub failed_indeterminate: u64,
}

/// The `faults` block of `result.json`.
#[derive(Debug, Clone, Serialize)]
pub struct FaultRecord {
    pub schedule: Vec<FaultSpec>,
    pub events: Vec<FaultEvent>,
    /// Each fault's span (ms from the start of the rated window; `end_ms` null: it
    /// never ended in the cell).
    pub spans: Vec<SpanMs>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proxy: Option<ProxyFigures>,
    /// A cell with a `cluster:` section: where its streams were led, second by
    /// second ([`placement`]; added 2026-12, additive).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<placement::ClusterRecord>,
    pub figures: FaultFigures,
    /// Why lost acknowledged writes are allowed in this cell, if they are.
    pub loss_allowed: Option<String>,
}

#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
pub struct SpanMs {
    pub start_ms: Option<i64>,
    pub end_ms: Option<i64>,
}

/// What the running schedule shares with its tasks.
#[derive(Debug, Default)]
struct Shared {
    events: Mutex<Vec<FaultEvent>>,
    spans: Mutex<Vec<(Option<i64>, Option<i64>)>>,
    /// Processes a pause stopped and has not yet continued.
    paused: Mutex<Vec<u32>>,
    /// Partitions cut and not yet healed (schedule indexes): a heal ends their spans,
    /// and the end of the cell heals them.
    cut: Mutex<Vec<usize>>,
    /// Nodes a `kill-leader` killed and has not restarted: a heal does not expect
    /// them to answer.
    down: Mutex<Vec<String>>,
}

/// The faults of a cell, running.
#[derive(Debug)]
pub struct Faults {
    shared: Arc<Shared>,
    tasks: Vec<JoinHandle<()>>,
    end: CancellationToken,
    proxy: Option<Arc<Proxy>>,
    cluster: Option<Arc<ClusterSection>>,
    schedule: Vec<FaultSpec>,
    clock: Clock,
    rated_start_unix_ms: i64,
    /// The cluster's placement, read every second ([`placement`]).
    placement: Option<JoinHandle<placement::ClusterRecord>>,
}

/// What the faults did, once ended.
#[derive(Debug)]
pub struct FaultsEnded {
    pub events: Vec<FaultEvent>,
    pub spans: Vec<Span>,
    pub proxy: Option<ProxyFigures>,
    pub cluster: Option<placement::ClusterRecord>,
}

impl FaultsEnded {
    /// Why the cell did not test what its schedule says: one sentence per fault that
    /// did not take effect.
    pub fn ineffective(&self) -> Vec<String> {
        self.events
            .iter()
            .filter_map(|e| {
                e.ineffective.as_ref().map(|why| {
                    format!("fault[{}] {} did not take effect: {why}", e.fault, e.action)
                })
            })
            .collect()
    }
}

struct Ctx {
    spec: FaultSpec,
    index: usize,
    shared: Arc<Shared>,
    end: CancellationToken,
    proxy: Option<Arc<Proxy>>,
    cluster: Option<Arc<ClusterSection>>,
    broker: Option<Arc<dyn adapters::Broker>>,
    clock: Clock,
    rated_start: Instant,
    rated_start_unix_ms: i64,
}

/// How long a `kill-leader` or `isolate: leader` waits for the system to say who
/// leads: it asks again every [`LEADER_ASK_AGAIN`] while the answer names no leader
/// (a management API still busy after a heal, an election under way).
const LEADER_ANSWER: Duration = Duration::from_secs(15);

/// The pause between two questions of who leads, within [`LEADER_ANSWER`].
const LEADER_ASK_AGAIN: Duration = Duration::from_millis(500);

/// Ask `ask` who leads `stream` (empty: the node leading the most streams) until an
/// answer names a leader: again every `again` while the answers name none, until
/// `within` has passed or `end` is cancelled. The error is the last answer's, with how
/// many times the system was asked and the first reason a stream went unanswered.
async fn who_leads<F, Fut>(
    mut ask: F,
    stream: &str,
    end: &CancellationToken,
    within: Duration,
    again: Duration,
) -> Result<(adapters::placement::Placement, String), String>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<adapters::placement::Placement>>,
{
    let deadline = tokio::time::Instant::now() + within;
    let mut asked = 0u32;
    loop {
        asked += 1;
        let p = match tokio::time::timeout_at(deadline, ask()).await {
            Err(_) if asked == 1 => {
                return Err(format!("the system did not say who leads within {within:?}"))
            }
            Err(_) => {
                return Err(format!(
                    "the system named no leader within {within:?} (asked {asked} times; the last question was not answered)"
                ))
            }
            Ok(p) => p.ok_or("this adapter cannot say where its streams are led (give its management or monitoring address, docs/reliability.md)")?,
        };
        let named = if stream.is_empty() {
            p.busiest_leader().map(str::to_string)
        } else {
            p.leaders.get(stream).cloned()
        };
        if let Some(id) = named {
            return Ok((p, id));
        }
        let later = tokio::time::Instant::now() + again;
        let over = later >= deadline
            || tokio::select! {
                _ = end.cancelled() => true,
                _ = tokio::time::sleep_until(later) => false,
            };
        if over {
            let times = if asked == 1 {
                "asked once".to_string()
            } else {
                format!("asked {asked} times within {within:?}")
            };
            let why = p
                .unanswered
                .values()
                .next()
                .map(|w| format!("; the first unanswered: {w}"))
                .unwrap_or_default();
            return Err(if stream.is_empty() {
                format!(
                    "no stream had a leader the system would name ({} leaderless, {} unanswered; {times}{why})",
                    p.leaderless.len(),
                    p.unanswered.len()
                )
            } else {
                format!(
                    "the system named no leader of {stream} (streams it answered for: {}; {times}{why})",
                    p.leaders.keys().cloned().collect::<Vec<_>>().join(", ")
                )
            });
        }
    }
}

impl Ctx {
    fn now_ms(&self) -> (i64, i64) {
        let unix = self.clock.now_us() / 1000;
        (unix - self.rated_start_unix_ms, unix)
    }

    fn log(
        &self,
        action: &str,
        pids: Vec<u32>,
        command: Option<CommandOutcome>,
        error: Option<String>,
    ) -> i64 {
        let (at_ms, unix_ms) = self.now_ms();
        self.shared.events.lock().push(FaultEvent {
            fault: self.index,
            action: action.into(),
            at_ms,
            unix_ms,
            target: self.spec.target.clone(),
            pids,
            command,
            error,
            detail: None,
            connectivity: None,
            ineffective: None,
        });
        unix_ms
    }

    /// Log a cluster fault's event, with what it cut or killed and what it checked.
    fn log_cluster(&self, action: &str, e: ClusterEvent) -> i64 {
        let (at_ms, unix_ms) = self.now_ms();
        let commands_failed: Vec<String> = e
            .commands
            .iter()
            .filter(|c| !c.ok())
            .map(|c| {
                format!(
                    "`{}` exited with {:?}{}: {}",
                    c.command.lines().next().unwrap_or_default(),
                    c.exit_code,
                    if c.timed_out { " (timed out)" } else { "" },
                    c.output_tail.trim()
                )
            })
            .collect();
        let error = e
            .error
            .or_else(|| (!commands_failed.is_empty()).then(|| commands_failed.join("; ")));
        self.shared.events.lock().push(FaultEvent {
            fault: self.index,
            action: action.into(),
            at_ms,
            unix_ms,
            target: e.node.map(|n| format!("node:{n}")),
            pids: e.pids,
            command: e.commands.into_iter().next(),
            error,
            detail: e.detail,
            connectivity: e.connectivity,
            ineffective: e.ineffective,
        });
        unix_ms
    }

    /// The node that leads `params.stream` (or the most streams), as the adapter's
    /// placement answers ([`who_leads`]), and the sentence that says so.
    async fn leader(&self, cluster: &ClusterSection) -> Result<(ClusterNode, String), String> {
        let Some(b) = &self.broker else {
            return Err("no adapter to ask who leads".into());
        };
        let (p, id) = who_leads(
            || b.placement(),
            &self.spec.params.stream,
            &self.end,
            LEADER_ANSWER,
            LEADER_ASK_AGAIN,
        )
        .await?;
        let node = cluster.node_of_system_id(&id).cloned().ok_or_else(|| {
            format!(
                "the leader {id:?} is none of cluster.nodes ({}): give each node's `id` as the system names it",
                cluster.names().join(", ")
            )
        })?;
        let led = p.leaders.values().filter(|l| **l == id).count();
        Ok((
            node.clone(),
            format!(
                "{} ({id}), leader of {led} of {} streams",
                node.name,
                p.leaders.len()
            ),
        ))
    }

    async fn partition(&self, cluster: &ClusterSection) {
        let timeout = self.spec.command_timeout.0;
        let p = &self.spec.params;
        let (sides, leader) = if p.isolate == "leader" {
            match self.leader(cluster).await {
                Ok((node, said)) => (network::isolate(cluster, &node.name), Some(said)),
                Err(why) => {
                    self.log_cluster(
                        "partition",
                        ClusterEvent {
                            ineffective: Some(format!("no leader to isolate: {why}")),
                            error: Some(why),
                            ..Default::default()
                        },
                    );
                    return;
                }
            }
        } else if !p.isolate.is_empty() {
            (network::isolate(cluster, &p.isolate), None)
        } else {
            (p.sides.clone(), None)
        };
        // Registered before the rules go in, so an end that comes in between heals.
        self.shared.cut.lock().push(self.index);
        let commands = network::cut(cluster, &sides, timeout).await;
        let seen = network::check(cluster, &sides).await;
        let ineffective = (!seen.cut_holds()).then(|| {
            if seen.across_tried == 0 {
                format!("the cut could not be checked: {}", seen.errors.join("; "))
            } else {
                format!(
                    "the partition did not drop traffic: {} of {} connections across the cut went through ({})",
                    seen.across_connected.len(),
                    seen.across_tried,
                    seen.across_connected.join(", ")
                )
            }
        });
        let detail = match leader {
            Some(l) => format!("{} (isolated: {l})", network::describe(&sides)),
            None => network::describe(&sides),
        };
        let t = self.log_cluster(
            "partition",
            ClusterEvent {
                commands,
                detail: Some(detail),
                connectivity: Some(seen),
                ineffective,
                ..Default::default()
            },
        );
        self.span(Some(t), None);
        if !self.spec.duration.0.is_zero() {
            self.hold(self.spec.duration.0).await;
            self.heal(cluster).await;
        }
    }

    /// End every partition: remove the rules, check that every node reaches every
    /// other again, and end the spans of the partitions that were cut.
    async fn heal(&self, cluster: &ClusterSection) {
        let cut = std::mem::take(&mut *self.shared.cut.lock());
        let commands = network::heal(cluster, self.spec.command_timeout.0).await;
        let seen = network::check(cluster, &[]).await;
        let down = self.shared.down.lock().clone();
        // Pairs that should connect again: neither end is a node a fault keeps down.
        let refused: Vec<&String> = seen
            .within_refused
            .iter()
            .filter(|p| {
                !down
                    .iter()
                    .any(|d| p.starts_with(&format!("{d} -> ")) || p.contains(&format!(" -> {d} ")))
            })
            .collect();
        let healed = refused.is_empty() && seen.errors.is_empty();
        let ineffective = (!healed).then(|| {
            format!(
                "the heal did not join the nodes again: {}",
                refused
                    .iter()
                    .map(|s| s.as_str())
                    .chain(seen.errors.iter().map(String::as_str))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        });
        let t = self.log_cluster(
            "heal",
            ClusterEvent {
                commands,
                detail: Some(if !healed {
                    "not every node reaches every other".into()
                } else if down.is_empty() {
                    "every node reaches every other".into()
                } else {
                    format!(
                        "every node reaches every other but {} (down)",
                        down.join(", ")
                    )
                }),
                connectivity: Some(seen),
                ineffective,
                ..Default::default()
            },
        );
        let mut spans = self.shared.spans.lock();
        for i in cut.into_iter().chain(std::iter::once(self.index)) {
            if spans[i].0.is_none() {
                spans[i].0 = Some(t);
            }
            spans[i].1 = Some(t);
        }
    }

    async fn kill_leader(&self, cluster: &ClusterSection) {
        let timeout = self.spec.command_timeout.0;
        let (node, said) = match self.leader(cluster).await {
            Ok(l) => l,
            Err(why) => {
                self.log_cluster(
                    "sigkill",
                    ClusterEvent {
                        ineffective: Some(format!("no leader to kill: {why}")),
                        error: Some(why),
                        ..Default::default()
                    },
                );
                return;
            }
        };
        let s = signal(
            &Victim::PidFile(node.pidfile.clone()),
            Signal::Kill,
            timeout,
        )
        .await;
        let ineffective = s.pids.is_empty().then(|| {
            format!(
                "nothing was killed: {}",
                s.error.clone().unwrap_or_default()
            )
        });
        if !s.pids.is_empty() {
            self.shared.down.lock().push(node.name.clone());
        }
        let t = self.log_cluster(
            "sigkill",
            ClusterEvent {
                node: Some(node.name.clone()),
                pids: s.pids,
                detail: Some(said),
                error: s.error,
                ineffective,
                ..Default::default()
            },
        );
        self.span(Some(t), None);
        if !self.spec.duration.0.is_zero() && !node.restart.is_empty() {
            // Down for `duration`, or until the cell ends: brought back either way.
            self.hold(self.spec.duration.0).await;
            let out = run_command(&node.restart, timeout).await;
            if out.ok() {
                self.shared.down.lock().retain(|d| *d != node.name);
            }
            let t = self.log_cluster(
                "restart",
                ClusterEvent {
                    node: Some(node.name.clone()),
                    commands: vec![out],
                    ..Default::default()
                },
            );
            self.span(None, Some(t));
        }
    }

    fn span(&self, start: Option<i64>, end: Option<i64>) {
        let mut s = self.shared.spans.lock();
        let slot = &mut s[self.index];
        if start.is_some() {
            slot.0 = start;
        }
        if end.is_some() {
            slot.1 = end;
        }
    }

    /// Wait `d`, or less when the cell ends first (`false` then).
    async fn hold(&self, d: Duration) -> bool {
        tokio::select! {
            _ = self.end.cancelled() => false,
            _ = tokio::time::sleep(d) => true,
        }
    }

    async fn restart(&self) {
        let Some(cmd) = &self.spec.restart else {
            return;
        };
        let out = run_command(cmd, self.spec.command_timeout.0).await;
        let error = (!out.ok()).then(|| {
            if out.timed_out {
                format!(
                    "the restart command did not finish within {}",
                    crate::scenario::Dur(self.spec.command_timeout.0)
                )
            } else {
                format!("the restart command exited with {:?}", out.exit_code)
            }
        });
        let t = self.log("restart", Vec::new(), Some(out), error);
        self.span(None, Some(t));
    }

    async fn run(self) {
        let at = self.rated_start + self.spec.at.0;
        tokio::select! {
            _ = self.end.cancelled() => {
                self.log("skipped", Vec::new(), None, Some("the cell ended before the fault's time".into()));
                return;
            }
            _ = tokio::time::sleep_until(at) => {}
        }
        let victim = self
            .spec
            .target
            .as_deref()
            .and_then(|t| Victim::parse(t).ok());
        let timeout = self.spec.command_timeout.0;
        match self.spec.kind {
            FaultKind::Kill => {
                let Some(v) = victim else { return };
                let s = signal(&v, Signal::Kill, timeout).await;
                let t = self.log("sigkill", s.pids, s.command, s.error);
                self.span(Some(t), None);
                if self.spec.restart.is_some() {
                    // Down for `duration`, or until the cell ends: the victim is
                    // brought back either way.
                    self.hold(self.spec.duration.0).await;
                    self.restart().await;
                }
            }
            FaultKind::Restart => {
                let (_, t) = self.now_ms();
                self.span(Some(t), None);
                self.restart().await;
            }
            FaultKind::Pause => {
                let Some(v) = victim else { return };
                let local = matches!(v, Victim::Pid(_) | Victim::PidFile(_) | Victim::Process(_));
                let pids = if local {
                    target::resolve(&v)
                } else {
                    Vec::new()
                };
                let stopped = match &v {
                    _ if local => {
                        // Registered before the signal, so a guard that fires in
                        // between still continues them.
                        self.shared.paused.lock().extend(&pids);
                        signal_pids(&pids, Signal::Stop)
                    }
                    _ => signal(&v, Signal::Stop, timeout).await,
                };
                let t = self.log(
                    "sigstop",
                    stopped.pids.clone(),
                    stopped.command,
                    stopped.error,
                );
                self.span(Some(t), None);
                self.hold(self.spec.duration.0).await;
                let cont = match &v {
                    _ if local => {
                        let c = signal_pids(&pids, Signal::Cont);
                        self.shared.paused.lock().retain(|p| !pids.contains(p));
                        c
                    }
                    _ => signal(&v, Signal::Cont, timeout).await,
                };
                let t = self.log("sigcont", cont.pids, cont.command, cont.error);
                self.span(None, Some(t));
            }
            FaultKind::Proxy => {
                let (Some(p), Some(toxic)) = (&self.proxy, self.spec.params.toxic) else {
                    return;
                };
                p.set(Active::of(toxic, &self.spec.params));
                let t = self.log(
                    &format!("toxic-on:{}", toxic.name()),
                    Vec::new(),
                    None,
                    None,
                );
                self.span(Some(t), None);
                self.hold(self.spec.duration.0).await;
                p.set(Active::None);
                let t = self.log(
                    &format!("toxic-off:{}", toxic.name()),
                    Vec::new(),
                    None,
                    None,
                );
                self.span(None, Some(t));
            }
            FaultKind::Partition => {
                if let Some(c) = self.cluster.clone() {
                    self.partition(&c).await;
                }
            }
            FaultKind::Heal => {
                if let Some(c) = self.cluster.clone() {
                    self.heal(&c).await;
                }
            }
            FaultKind::KillLeader => {
                if let Some(c) = self.cluster.clone() {
                    self.kill_leader(&c).await;
                }
            }
        }
    }
}

/// What a cluster fault logs.
#[derive(Default)]
struct ClusterEvent {
    node: Option<String>,
    pids: Vec<u32>,
    commands: Vec<CommandOutcome>,
    detail: Option<String>,
    connectivity: Option<Connectivity>,
    ineffective: Option<String>,
    error: Option<String>,
}

impl Faults {
    /// The proxy the scenario asks for, in front of the system's address; the
    /// adapter is then built with [`adapters::SystemOptions::routed_to`] its address.
    pub async fn start_proxy(s: &Scenario) -> anyhow::Result<Option<Arc<Proxy>>> {
        let Some(p) = &s.proxy else {
            return Ok(None);
        };
        let upstream = if p.upstream.is_empty() {
            s.options
                .endpoint()
                .map_err(|m| anyhow::anyhow!("proxy: {m}"))?
        } else {
            p.upstream.clone()
        };
        let addr = crate::scenario::faults::loopback_addr(&upstream)
            .map_err(|m| anyhow::anyhow!("proxy.upstream: {m}"))?;
        let proxy = Proxy::start(addr)
            .await
            .map_err(|e| anyhow::anyhow!("starting the proxy in front of {addr}: {e}"))?;
        Ok(Some(Arc::new(proxy)))
    }

    /// Start the schedule against the rated window starting at `rated_start`.
    pub fn start(
        s: &Scenario,
        proxy: Option<Arc<Proxy>>,
        broker: Option<Arc<dyn adapters::Broker>>,
        tally: Option<timeline::Tally>,
        clock: Clock,
        rated_start: Instant,
    ) -> Faults {
        let cluster = s.cluster.clone().map(Arc::new);
        let shared = Arc::new(Shared::default());
        *shared.spans.lock() = vec![(None, None); s.faults.len()];
        let end = CancellationToken::new();
        let rated_start_unix_ms = clock.us_at(rated_start) / 1000;
        let placement = match (&cluster, &broker, tally) {
            (Some(c), Some(b), Some(t)) => Some(placement::record(
                b.clone(),
                c.clone(),
                t,
                clock,
                rated_start_unix_ms,
                end.clone(),
            )),
            _ => None,
        };
        let tasks = s
            .faults
            .iter()
            .enumerate()
            .map(|(index, spec)| {
                tokio::spawn(
                    Ctx {
                        spec: spec.clone(),
                        index,
                        shared: shared.clone(),
                        end: end.clone(),
                        proxy: proxy.clone(),
                        cluster: cluster.clone(),
                        broker: broker.clone(),
                        clock,
                        rated_start,
                        rated_start_unix_ms,
                    }
                    .run(),
                )
            })
            .collect();
        Faults {
            shared,
            tasks,
            end,
            proxy,
            cluster,
            schedule: s.faults.clone(),
            clock,
            rated_start_unix_ms,
            placement,
        }
    }

    /// End every fault (continue the paused, switch toxics off, restart the killed)
    /// and return what happened. Every command has its own deadline, so this ends.
    pub async fn finish(mut self) -> FaultsEnded {
        self.end.cancel();
        for t in std::mem::take(&mut self.tasks) {
            let _ = t.await;
        }
        // A partition still cut (duration 0 and no heal) is healed, and checked.
        if let Some(c) = self.cluster.clone() {
            if !self.shared.cut.lock().is_empty() {
                self.heal_at_end(&c).await;
            }
        }
        self.release();
        let events = self.shared.events.lock().clone();
        let spans = self
            .shared
            .spans
            .lock()
            .iter()
            .map(|&(s, e)| Span {
                start_unix_ms: s.unwrap_or(i64::MAX),
                end_unix_ms: e,
            })
            .collect();
        let cluster = match self.placement.take() {
            Some(t) => t.await.ok(),
            None => None,
        };
        FaultsEnded {
            events,
            spans,
            proxy: self.proxy.as_ref().map(|p| p.figures()),
            cluster,
        }
    }

    /// The end of the cell heals what no fault healed, logged as the first partition
    /// still cut.
    async fn heal_at_end(&self, c: &ClusterSection) {
        let index = self.shared.cut.lock()[0];
        let ctx = Ctx {
            spec: self.schedule[index].clone(),
            index,
            shared: self.shared.clone(),
            end: self.end.clone(),
            proxy: None,
            cluster: self.cluster.clone(),
            broker: None,
            clock: self.clock,
            rated_start: Instant::now(),
            rated_start_unix_ms: self.rated_start_unix_ms,
        };
        ctx.heal(c).await;
    }

    /// Continue anything still paused and switch the proxy's toxic off (also on drop).
    fn release(&self) {
        let paused = std::mem::take(&mut *self.shared.paused.lock());
        if !paused.is_empty() {
            signal_pids(&paused, Signal::Cont);
        }
        if let Some(p) = &self.proxy {
            p.set(Active::None);
        }
        // A drop before `finish` (the cell failed): the rules go, unchecked.
        if let Some(c) = &self.cluster {
            if !std::mem::take(&mut *self.shared.cut.lock()).is_empty() {
                network::heal_blocking(c);
            }
        }
    }

    pub fn rated_start_unix_ms(&self) -> i64 {
        self.rated_start_unix_ms
    }
}

impl Drop for Faults {
    fn drop(&mut self) {
        self.end.cancel();
        self.release();
    }
}

/// The spans as the record shows them (ms from the start of the rated window).
pub fn spans_ms(spans: &[Span], rated_start_unix_ms: i64) -> Vec<SpanMs> {
    spans
        .iter()
        .map(|s| SpanMs {
            start_ms: (s.start_unix_ms != i64::MAX).then(|| s.start_unix_ms - rated_start_unix_ms),
            end_ms: s.end_unix_ms.map(|e| e - rated_start_unix_ms),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario(extra: &str) -> Scenario {
        crate::scenario::parse(
            &format!("name: t\nsystem: mem\nrate: 100\nproperties: 10\nduration: 10s\n{extra}"),
            "t",
            &[],
        )
        .unwrap()
    }

    #[test]
    fn loss_is_allowed_only_for_a_memory_tier_under_a_crash() {
        let kill = "faults:\n  - {kind: kill, target: 'proc:some-broker', at: 2s}\n";
        assert!(loss_allowed(&scenario(kill)).is_none());
        assert!(loss_allowed(&scenario(&format!("durability: memory\n{kill}"))).is_some());
        let pause = "durability: memory\nfaults:\n  - {kind: pause, target: 'proc:some-broker', at: 2s, duration: 1s}\n";
        assert!(loss_allowed(&scenario(pause)).is_none());
    }

    #[tokio::test]
    async fn a_pause_is_continued_even_when_the_cell_ends_first() {
        let mut child = std::process::Command::new("sleep")
            .arg("876543")
            .spawn()
            .unwrap();
        let s = scenario(&format!(
            "faults:\n  - {{kind: pause, target: 'pid:{}', at: 0s, duration: 1h}}\n",
            child.id()
        ));
        let f = Faults::start(&s, None, None, None, Clock::anchor(), Instant::now());
        // Wait for the SIGSTOP.
        let stat = || std::fs::read_to_string(format!("/proc/{}/stat", child.id())).unwrap();
        let state = |st: String| {
            st.rsplit_once(')')
                .unwrap()
                .1
                .split_whitespace()
                .next()
                .unwrap()
                .to_string()
        };
        let t0 = std::time::Instant::now();
        while state(stat()) != "T" {
            assert!(t0.elapsed() < Duration::from_secs(5), "never stopped");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let FaultsEnded { events, spans, .. } = f.finish().await;
        assert_ne!(state(stat()), "T", "continued at the end of the cell");
        let actions: Vec<&str> = events.iter().map(|e| e.action.as_str()).collect();
        assert_eq!(actions, ["sigstop", "sigcont"]);
        assert!(spans[0].end_unix_ms.is_some());
        child.kill().unwrap();
        child.wait().unwrap();
    }

    /// Answers in turn: the first `unanswered` answers name no leader, then one does.
    fn answers(
        unanswered: usize,
    ) -> (
        std::sync::Arc<std::sync::atomic::AtomicUsize>,
        impl FnMut() -> std::future::Ready<Option<adapters::placement::Placement>>,
    ) {
        let asked = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let n = asked.clone();
        let ask = move || {
            let k = n.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let mut p = adapters::placement::Placement::default();
            if k < unanswered {
                p.unanswered
                    .insert("q1".into(), "GET /api/queues: no answer within 5s".into());
            } else {
                p.leaders.insert("q1".into(), "rabbit@n2".into());
            }
            std::future::ready(Some(p))
        };
        (asked, ask)
    }

    #[tokio::test]
    async fn who_leads_asks_again_while_no_leader_is_named() {
        let end = CancellationToken::new();
        let ms = Duration::from_millis;
        let (asked, ask) = answers(2);
        let (_, id) = who_leads(ask, "", &end, ms(2000), ms(10)).await.unwrap();
        assert_eq!(id, "rabbit@n2");
        assert_eq!(asked.load(std::sync::atomic::Ordering::SeqCst), 3);
        // Never named within the time: the last answer's reason, and how often.
        let (asked, ask) = answers(usize::MAX);
        let why = who_leads(ask, "q1", &end, ms(100), ms(10))
            .await
            .unwrap_err();
        let n = asked.load(std::sync::atomic::Ordering::SeqCst);
        assert!(n >= 3, "asked {n} times");
        assert!(why.contains("named no leader of q1"), "{why}");
        assert!(why.contains(&format!("asked {n} times")), "{why}");
        assert!(why.contains("no answer within 5s"), "{why}");
        // The cell's end stops the asking at once.
        end.cancel();
        let (asked, ask) = answers(usize::MAX);
        let why = who_leads(ask, "", &end, ms(10_000), ms(10))
            .await
            .unwrap_err();
        assert_eq!(asked.load(std::sync::atomic::Ordering::SeqCst), 1);
        assert!(
            why.contains("0 leaderless, 1 unanswered; asked once"),
            "{why}"
        );
    }

    #[tokio::test]
    async fn a_kill_runs_its_restart_and_records_the_exit_code() {
        let mut child = std::process::Command::new("sleep")
            .arg("765432")
            .spawn()
            .unwrap();
        let s = scenario(
            "faults:\n  - {kind: kill, target: 'proc:sleep 765432', at: 0s, duration: 100ms, restart: 'exit 4'}\n",
        );
        let f = Faults::start(&s, None, None, None, Clock::anchor(), Instant::now());
        let status = tokio::task::spawn_blocking(move || child.wait().unwrap())
            .await
            .unwrap();
        assert!(!status.success());
        tokio::time::sleep(Duration::from_millis(400)).await;
        let FaultsEnded { events, spans, .. } = f.finish().await;
        assert_eq!(events[0].action, "sigkill");
        assert_eq!(events[0].pids.len(), 1);
        assert_eq!(events[1].action, "restart");
        assert_eq!(events[1].command.as_ref().unwrap().exit_code, Some(4));
        assert!(events[1].error.as_ref().unwrap().contains("exited with"));
        assert!(spans[0].end_unix_ms.unwrap() >= spans[0].start_unix_ms);
    }
}
