//! Which partitions a push request goes to: the active window of the partition
//! space and its rotation.
//!
//! The window is `W` consecutive partitions of the space `[0, S)` starting at
//! `start = (⌊t / every⌋ · step) mod S`, wrapping at the end of the space. Requests
//! walk the window's slots round robin, grouped by push worker: slot `j` belongs to
//! worker class `j mod workers`, and request `r` takes the next
//! `partitions_per_request` slots of class `r mod workers`. Because `workers`
//! divides both `W` and `S`, partition `p` always belongs to worker `p mod workers`
//! wherever the window stands, so every partition's pushes go through one FIFO and
//! stay in seq order.

use crate::scenario::stream::Shape;

#[derive(Debug, Clone)]
pub struct Picker {
    shape: Shape,
    workers: u64,
    per_class: u64,
    spread: u64,
    next: u64,
}

impl Picker {
    /// `workers` must divide both the window and the space (see `scenario::stream::workers_for`).
    pub fn new(shape: Shape, workers: u64, spread: u64) -> Picker {
        let workers = workers.max(1);
        debug_assert!(shape.window.is_multiple_of(workers) && shape.space.is_multiple_of(workers));
        Picker {
            shape,
            workers,
            per_class: (shape.window / workers).max(1),
            spread: spread.max(1),
            next: 0,
        }
    }

    /// First partition of the window at `t_us` after the start of paced traffic.
    pub fn window_start(&self, t_us: u64) -> u64 {
        if self.shape.rotate_every_us == 0 {
            return 0;
        }
        let step_index = t_us / self.shape.rotate_every_us;
        // (step_index · step) mod S without overflow for any realistic run.
        ((step_index % self.shape.space) as u128 * self.shape.rotate_step as u128
            % self.shape.space as u128) as u64
    }

    /// Partitions of the next request scheduled at `t_us`, appended to `out`.
    /// Returns the push worker they all belong to.
    pub fn pick(&mut self, t_us: u64, out: &mut Vec<u64>) -> usize {
        let r = self.next;
        self.next += 1;
        let start = self.window_start(t_us);
        let class = r % self.workers;
        let round = r / self.workers;
        let first = out.len();
        for i in 0..self.spread {
            let pos = (round * self.spread + i) % self.per_class;
            let slot = class + self.workers * pos;
            out.push((start + slot) % self.shape.space);
        }
        (out[first] % self.workers) as usize
    }

    /// Partitions per request.
    pub fn spread(&self) -> u64 {
        self.spread
    }

    /// Partitions entering the window per second (0 for a static window).
    pub fn partitions_per_sec(&self) -> f64 {
        if self.shape.rotate_every_us == 0 {
            0.0
        } else {
            self.shape.rotate_step as f64 * 1e6 / self.shape.rotate_every_us as f64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn shape(space: u64, window: u64, every_us: u64, step: u64) -> Shape {
        Shape {
            space,
            window,
            rotate_every_us: every_us,
            rotate_step: step,
        }
    }

    #[test]
    fn fixed_set_is_round_robin_over_every_partition() {
        let mut p = Picker::new(shape(200, 200, 0, 0), 50, 1);
        let mut seen = vec![0u32; 200];
        let mut out = Vec::new();
        for _ in 0..200 {
            out.clear();
            p.pick(123, &mut out);
            seen[out[0] as usize] += 1;
        }
        assert!(seen.iter().all(|&c| c == 1), "{seen:?}");
    }

    #[test]
    fn window_rotates_and_covers_the_space() {
        // S = 10 000, W = 100, moving by 100 every 1 ms: covered in 100 ms.
        let sh = shape(10_000, 100, 1000, 100);
        let mut p = Picker::new(sh, 10, 1);
        let mut seen = vec![false; 10_000];
        let mut out = Vec::new();
        for ms in 0..100u64 {
            for _ in 0..100 {
                out.clear();
                p.pick(ms * 1000 + 10, &mut out);
                let q = out[0];
                assert!(q >= ms * 100 && q < ms * 100 + 100, "ms {ms}: {q}");
                seen[q as usize] = true;
            }
        }
        assert!(seen.iter().all(|&s| s));
        // Then it wraps to the start of the space.
        assert_eq!(p.window_start(100_000), 0);
        assert_eq!(p.window_start(100_999), 0);
        assert_eq!(p.window_start(101_000), 100);
    }

    #[test]
    fn seed_001_figures() {
        let sh = shape(1_000_000, 1000, 1_000_000, 1000);
        let p = Picker::new(sh, 50, 1);
        assert_eq!(p.partitions_per_sec(), 1000.0);
        assert_eq!(p.window_start(999_999_999), 999_000);
        assert_eq!(p.window_start(1_000_000_000), 0);
    }

    proptest! {
        #[test]
        fn picks_stay_in_the_window_and_share_a_worker(
            workers_pow in 0u32..4,
            per_class in 1u64..20,
            windows in 1u64..30,
            step_frac in 1u64..4,
            spread_sel in 0u64..20,
            every_us in 1u64..5000,
            times in proptest::collection::vec(0u64..10_000_000, 1..200),
        ) {
            let workers = 1u64 << workers_pow;
            let window = workers * per_class;
            let space = window * windows;
            let step = (window / step_frac).max(1) / workers * workers;
            let step = step.max(workers);
            let spread = 1 + spread_sel % per_class;
            let sh = shape(space, window, every_us, step);
            let mut p = Picker::new(sh, workers, spread);
            let mut sorted = times.clone();
            sorted.sort_unstable();
            let mut out = Vec::new();
            for t in sorted {
                out.clear();
                let w = p.pick(t, &mut out);
                prop_assert_eq!(out.len() as u64, spread);
                let start = p.window_start(t);
                for &q in &out {
                    prop_assert!(q < space);
                    // Inside [start, start + W) modulo S.
                    let off = (q + space - start) % space;
                    prop_assert!(off < window, "q {} start {} window {}", q, start, window);
                    prop_assert_eq!((q % workers) as usize, w);
                }
                // A request never names a partition twice.
                let mut d = out.clone();
                d.sort_unstable();
                d.dedup();
                prop_assert_eq!(d.len(), out.len());
            }
        }
    }
}
