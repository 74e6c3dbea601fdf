//! Targeted pops (mode `targeted`): every pop worker of a stream owns a static,
//! contiguous slice of the partitions and sweeps it with non-waiting pops of one
//! partition each. A non-empty batch is handled and acked in its own task, so a slow
//! partition never holds up the rest of its slice: the sweep skips a partition while
//! its batch is in the stage and goes on. A sweep starts at most every `sweep_floor`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use super::client::encode;
use super::stream::{nap, Stream};

/// Partition names of a topic: the keys themselves (`p<N>`) when every key has its own
/// lane, else the hashed lane names (`l<N>`), as `lanes::lane_key` places them.
pub(crate) fn partition_names(keys: u64, lanes: u64) -> Vec<String> {
    if lanes >= keys {
        (0..keys).map(|k| format!("p{k}")).collect()
    } else {
        (0..lanes).map(|l| format!("l{l}")).collect()
    }
}

/// The contiguous slice worker `idx` of `workers` owns (may be empty).
pub(crate) fn slice(names: &[String], idx: usize, workers: usize) -> Vec<String> {
    let per = names.len().div_ceil(workers.max(1)).max(1);
    let from = (idx * per).min(names.len());
    let to = ((idx + 1) * per).min(names.len());
    names[from..to].to_vec()
}

/// Claims a targeted stream may hold at once: `per_lane` (default 2) times the
/// stage's lane budget (what it can work on at once), so the next batches are popped
/// while the current ones run, and no batch waits for the stage long enough to
/// outlive its lease.
pub(crate) fn claim_limit(stage_lanes: usize, per_lane: usize) -> usize {
    stage_lanes.max(1).saturating_mul(per_lane.max(1))
}

/// One sweeping worker; runs until the stream's stop token fires, then waits for its
/// batches still in the stage. `slots` bounds the claims in flight of the whole
/// stream (see [`claim_limit`]).
pub(crate) async fn sweep_loop(
    s: Arc<Stream>,
    owned: Vec<String>,
    floor: Duration,
    slots: Arc<Semaphore>,
) {
    let paths: Vec<(String, String)> = owned
        .into_iter()
        .map(|p| {
            let path = format!(
                "/api/v1/pop/queue/{}/partition/{}?batch={}&consumerGroup={}&wait=false&autoAck=false",
                encode(&s.queue),
                encode(&p),
                s.batch,
                encode(&s.group)
            );
            (p, path)
        })
        .collect();
    let mut tasks: JoinSet<()> = JoinSet::new();
    let mut err_backoff = Duration::from_millis(50);
    'run: loop {
        let start = Instant::now();
        s.stats.sweeps.inc();
        for (partition, path) in &paths {
            if s.stop.is_cancelled() {
                break 'run;
            }
            while tasks.try_join_next().is_some() {}
            if s.is_in_flight(partition) {
                continue;
            }
            let slot = match slots.clone().try_acquire_owned() {
                Ok(p) => p,
                Err(_) => {
                    s.stats.claim_waits.inc();
                    tokio::select! {
                        _ = s.stop.cancelled() => break 'run,
                        p = slots.clone().acquire_owned() => match p {
                            Ok(p) => p,
                            Err(_) => break 'run,
                        },
                    }
                }
            };
            let claims = match s.pop(path, Duration::ZERO).await {
                Ok(c) => {
                    err_backoff = Duration::from_millis(50);
                    c
                }
                Err(_) => {
                    if nap(err_backoff, &s.stop).await {
                        break 'run;
                    }
                    err_backoff = (err_backoff * 2).min(Duration::from_secs(2));
                    continue;
                }
            };
            if claims.is_empty() {
                continue;
            }
            if s.stop.is_cancelled() {
                s.release(claims).await;
                break 'run;
            }
            // A one-partition pop holds one claim, which keeps the slot until settled.
            let mut slot = Some(slot);
            for c in claims {
                if !s.try_claim(&c.partition) {
                    s.release(vec![c]).await;
                    continue;
                }
                let s2 = s.clone();
                let held = slot.take();
                tasks.spawn(async move {
                    let done = s2.run(c).await;
                    s2.settle(vec![done]).await;
                    drop(held);
                });
            }
        }
        let spent = start.elapsed();
        if spent < floor && nap(floor - spent, &s.stop).await {
            break;
        }
    }
    while tasks.join_next().await.is_some() {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_cover_every_partition_once() {
        let names = partition_names(10, 10);
        assert_eq!(names[3], "p3");
        let mut all = Vec::new();
        for i in 0..4 {
            all.extend(slice(&names, i, 4));
        }
        assert_eq!(all, names);
        assert_eq!(slice(&names, 9, 12), ["p9"]);
        assert!(slice(&names, 11, 12).is_empty());
        assert_eq!(partition_names(100, 8).last().unwrap(), "l7");
    }
}
