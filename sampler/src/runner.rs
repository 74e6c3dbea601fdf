//! The sampling thread: a current-thread tokio runtime on its own OS thread,
//! ticking on a drift-free grid.

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use tokio::sync::oneshot;
use tokio::time::MissedTickBehavior;

use crate::probe::{self, CgroupProbe, CgroupSource, HostProbe, ProcProbe, ProcSource, ProcTable};
use crate::samples::{sanitize, write_row, Sample, SampleSet, HEADER, VERSION_LINE};
use crate::spec::{TargetKind, TargetSpec};
use crate::{SamplerConfig, SamplerError};

/// Namespace for [`Sampler::start`]; the free function [`start`] is the same.
#[derive(Debug)]
pub struct Sampler;

impl Sampler {
    /// See [`start`].
    pub fn start(config: SamplerConfig, out_csv: &Path) -> Result<SamplerHandle, SamplerError> {
        start(config, out_csv)
    }
}

/// Starts sampling on a dedicated thread, writing `out_csv` (created or
/// truncated; flushed after every tick). A `host` and a `loader` target are
/// added when the config has none. The first tick establishes baselines, so
/// its rates are empty.
pub fn start(config: SamplerConfig, out_csv: &Path) -> Result<SamplerHandle, SamplerError> {
    start_inner(config, Some(out_csv))
}

enum AnyProbe {
    Cgroup(CgroupProbe),
    Proc(ProcProbe),
    Host(HostProbe),
    #[cfg(feature = "postgres")]
    Pg(crate::pg::PgProbe),
}

struct Target {
    label: Arc<str>,
    kind: TargetKind,
    probe: AnyProbe,
}

type Shared = Arc<Mutex<Vec<Sample>>>;

/// The rows a running sampler has taken, read while it runs ([`SamplerHandle::view`]).
#[derive(Debug, Clone)]
pub struct SampleView {
    shared: Shared,
}

impl SampleView {
    /// The rows of the latest tick (every target's every metric at one instant);
    /// empty before the first.
    pub fn latest(&self) -> Vec<Sample> {
        let rows = lock(&self.shared);
        let Some(last) = rows.last().map(|r| r.unix_ms) else {
            return Vec::new();
        };
        let i = rows.partition_point(|r| r.unix_ms < last);
        rows[i..].to_vec()
    }
}

/// A running sampler. Dropping it stops the thread too (discarding errors).
#[derive(Debug)]
pub struct SamplerHandle {
    stop_tx: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<Result<(), SamplerError>>>,
    shared: Shared,
}

impl SamplerHandle {
    /// Stops sampling, flushes the CSV and returns every row taken.
    pub fn stop(mut self) -> Result<SampleSet, SamplerError> {
        self.finish()?;
        let rows = std::mem::take(&mut *lock(&self.shared));
        Ok(SampleSet { rows })
    }

    /// Rows with `unix_ms >= since_unix_ms` taken so far.
    pub fn rows_since(&self, since_unix_ms: u64) -> Vec<Sample> {
        let rows = lock(&self.shared);
        // Rows are in time order: binary search the first one.
        let i = rows.partition_point(|r| r.unix_ms < since_unix_ms);
        rows[i..].to_vec()
    }

    /// A handle on the rows as they are taken, for a reader beside the run (the
    /// live metrics): it reads the same rows `samples.csv` gets.
    pub fn view(&self) -> SampleView {
        SampleView {
            shared: self.shared.clone(),
        }
    }

    /// Number of rows taken so far.
    pub fn row_count(&self) -> usize {
        lock(&self.shared).len()
    }

    fn finish(&mut self) -> Result<(), SamplerError> {
        if let Some(tx) = self.stop_tx.take() {
            let _ = tx.send(());
        }
        match self.thread.take() {
            Some(t) => t
                .join()
                .map_err(|_| SamplerError::Thread("sampler thread panicked".into()))?,
            None => Ok(()),
        }
    }
}

impl Drop for SamplerHandle {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}

fn lock(m: &Mutex<Vec<Sample>>) -> std::sync::MutexGuard<'_, Vec<Sample>> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn build_targets(config: &SamplerConfig) -> Result<Vec<Target>, SamplerError> {
    let mut specs = config.targets.clone();
    if !specs.iter().any(|(_, s)| *s == TargetSpec::Host) {
        specs.push(("host".into(), TargetSpec::Host));
    }
    if !specs.iter().any(|(_, s)| *s == TargetSpec::Loader) {
        specs.push(("loader".into(), TargetSpec::Loader));
    }
    let roots = probe::cgroup2_roots();
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for (label, spec) in specs {
        let label = if label.trim().is_empty() {
            spec.to_string()
        } else {
            label
        };
        let label = sanitize(&label);
        if !seen.insert(label.clone()) {
            return Err(SamplerError::DuplicateLabel(label));
        }
        let probe = match &spec {
            TargetSpec::CgroupPath(p) => AnyProbe::Cgroup(CgroupProbe::new(
                CgroupSource::Path(p.clone()),
                roots.clone(),
            )),
            TargetSpec::CgroupGlob(g) => AnyProbe::Cgroup(CgroupProbe::new(
                CgroupSource::Glob(g.clone()),
                roots.clone(),
            )),
            TargetSpec::Container(c) => AnyProbe::Cgroup(CgroupProbe::new(
                CgroupSource::Container(c.clone()),
                roots.clone(),
            )),
            TargetSpec::Pid(p) => AnyProbe::Proc(ProcProbe::new(ProcSource::Pid(*p))),
            TargetSpec::PidFile(f) => {
                AnyProbe::Proc(ProcProbe::new(ProcSource::PidFile(f.clone())))
            }
            TargetSpec::ProcessPattern(p) => {
                AnyProbe::Proc(ProcProbe::new(ProcSource::Pattern(p.clone())))
            }
            TargetSpec::Loader => AnyProbe::Proc(ProcProbe::new(ProcSource::Loader)),
            TargetSpec::Host => AnyProbe::Host(HostProbe::default()),
            #[cfg(feature = "postgres")]
            TargetSpec::Postgres { dsn } => AnyProbe::Pg(crate::pg::PgProbe::new(dsn.clone())),
            #[cfg(not(feature = "postgres"))]
            TargetSpec::Postgres { .. } => {
                return Err(SamplerError::FeatureDisabled(spec.to_string()))
            }
        };
        out.push(Target {
            label: Arc::from(label.as_str()),
            kind: spec.kind(),
            probe,
        });
    }
    Ok(out)
}

pub(crate) fn start_inner(
    config: SamplerConfig,
    out_csv: Option<&Path>,
) -> Result<SamplerHandle, SamplerError> {
    let targets = build_targets(&config)?;
    let budgets = config.budgets.clone();
    let writer = match out_csv {
        Some(p) => {
            let f = std::fs::File::create(p).map_err(|e| SamplerError::io(p, e))?;
            let mut w = std::io::BufWriter::new(f);
            writeln!(w, "{VERSION_LINE}\n{HEADER}")
                .and_then(|_| w.flush())
                .map_err(|e| SamplerError::io(p, e))?;
            Some((p.to_path_buf(), w))
        }
        None => None,
    };
    let interval = if config.interval.is_zero() {
        std::time::Duration::from_secs(1)
    } else {
        config.interval
    };
    let shared: Shared = Arc::default();
    let (stop_tx, stop_rx) = oneshot::channel();
    let sh = shared.clone();
    let thread = std::thread::Builder::new()
        .name("crossbench-sampler".into())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| SamplerError::Thread(e.to_string()))?;
            rt.block_on(run(targets, &budgets, interval, writer, sh, stop_rx))
        })
        .map_err(|e| SamplerError::Thread(e.to_string()))?;
    Ok(SamplerHandle {
        stop_tx: Some(stop_tx),
        thread: Some(thread),
        shared,
    })
}

async fn run(
    mut targets: Vec<Target>,
    budgets: &[(String, String, f64)],
    interval: std::time::Duration,
    mut writer: Option<(PathBuf, std::io::BufWriter<std::fs::File>)>,
    shared: Shared,
    mut stop_rx: oneshot::Receiver<()>,
) -> Result<(), SamplerError> {
    let mut ticker = tokio::time::interval(interval);
    // Skip keeps ticks on the original grid after a stall instead of bursting.
    ticker.set_missed_tick_behavior(MissedTickBehavior::Skip);
    let started = Instant::now();
    let mut resolved_at: Option<Instant> = None;
    let need_cmdlines = targets
        .iter()
        .any(|t| matches!(&t.probe, AnyProbe::Proc(p) if p.needs_cmdlines()));
    let has_proc = targets.iter().any(|t| matches!(t.probe, AnyProbe::Proc(_)));
    let mut metric_names: HashMap<String, Arc<str>> = HashMap::new();
    let mut first_err: Option<SamplerError> = None;
    let mut batch: Vec<Sample> = Vec::new();
    loop {
        tokio::select! {
            biased;
            _ = &mut stop_rx => break,
            _ = ticker.tick() => {}
        }
        let now = Instant::now();
        let unix_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        let elapsed_s = (now.duration_since(started).as_millis() as f64) / 1000.0;
        if has_proc && resolved_at.is_none_or(|t| now.duration_since(t) >= probe::RESOLVE_EVERY) {
            let table = ProcTable::scan(need_cmdlines);
            for t in &mut targets {
                if let AnyProbe::Proc(p) = &mut t.probe {
                    p.resolve(&table);
                }
            }
            resolved_at = Some(now);
        }
        batch.clear();
        for t in &mut targets {
            let mut metrics = match &mut t.probe {
                AnyProbe::Cgroup(p) => p.sample(Instant::now()),
                AnyProbe::Proc(p) => p.sample(Instant::now()),
                AnyProbe::Host(p) => p.sample(Instant::now()),
                #[cfg(feature = "postgres")]
                AnyProbe::Pg(p) => p.sample().await,
            };
            // The side's budget beside the target's own figures.
            metrics.extend(
                budgets
                    .iter()
                    .filter(|(l, _, _)| sanitize(l) == *t.label)
                    .map(|(_, m, v)| (m.clone(), Some(*v))),
            );
            for (m, value) in metrics {
                let metric = match metric_names.get(&m) {
                    Some(a) => a.clone(),
                    None => {
                        let a: Arc<str> = Arc::from(m.as_str());
                        metric_names.insert(m, a.clone());
                        a
                    }
                };
                batch.push(Sample {
                    unix_ms,
                    elapsed_s,
                    target: t.label.clone(),
                    kind: t.kind,
                    metric,
                    value: value.filter(|v| v.is_finite()),
                });
            }
        }
        if let Some((path, w)) = &mut writer {
            let res = batch
                .iter()
                .try_for_each(|r| write_row(w, r))
                .and_then(|_| w.flush());
            if let Err(e) = res {
                // Keep sampling into memory; report the error at stop.
                first_err.get_or_insert(SamplerError::io(path, e));
                writer = None;
            }
        }
        lock(&shared).extend(batch.drain(..));
    }
    if let Some((path, mut w)) = writer {
        if let Err(e) = w.flush() {
            first_err.get_or_insert(SamplerError::io(&path, e));
        }
    }
    first_err.map_or(Ok(()), Err)
}
