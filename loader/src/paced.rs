//! A running producer of either workload: one pacer thread that releases the
//! schedule's events and hands them to async publish workers, and how it stops.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;

use tokio::task::JoinSet;

#[derive(Debug)]
pub struct Paced {
    pacer: Option<thread::JoinHandle<()>>,
    workers: JoinSet<()>,
    stop: Arc<AtomicBool>,
}

impl Paced {
    /// Run `pace` on its own OS thread named `name`, beside `workers` (already
    /// spawned). `pace` must return soon after the flag it is given is set.
    pub fn start<F>(name: String, workers: JoinSet<()>, pace: F) -> Paced
    where
        F: FnOnce(&AtomicBool) + Send + 'static,
    {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let pacer = thread::Builder::new()
            .name(name)
            .spawn(move || pace(&flag))
            .expect("spawn pacer thread");
        Paced {
            pacer: Some(pacer),
            workers,
            stop,
        }
    }

    /// Stop pacing now (Ctrl-C); what is queued is still published.
    pub fn stop_early(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Wait for the pacer to finish its schedule and the workers to publish what they
    /// hold.
    pub async fn finish(mut self) {
        if let Some(h) = self.pacer.take() {
            let _ = tokio::task::spawn_blocking(move || h.join()).await;
        }
        while self.workers.join_next().await.is_some() {}
    }
}
