//! Which part of its life a cell is in, as the live progress and `report.csv` show it.

use std::sync::atomic::{AtomicU8, Ordering};

/// The phases of a cell, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Seq 0 of every key flows through the system before paced traffic.
    Hydrate,
    /// Paced traffic kept out of the figures.
    Warmup,
    /// The rated window: what the figures are about.
    Rated,
    /// Paced traffic stopped; consumers catch up.
    Drain,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Hydrate => "hydrate",
            Phase::Warmup => "warmup",
            Phase::Rated => "rated",
            Phase::Drain => "drain",
        }
    }

    fn from_u8(v: u8) -> Phase {
        match v {
            0 => Phase::Hydrate,
            1 => Phase::Warmup,
            2 => Phase::Rated,
            _ => Phase::Drain,
        }
    }
}

/// The current phase, shared between the cell and its live progress.
#[derive(Debug)]
pub struct PhaseCell(AtomicU8);

impl PhaseCell {
    pub fn new(p: Phase) -> PhaseCell {
        PhaseCell(AtomicU8::new(p as u8))
    }

    pub fn set(&self, p: Phase) {
        self.0.store(p as u8, Ordering::Relaxed);
    }

    pub fn get(&self) -> Phase {
        Phase::from_u8(self.0.load(Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_phase() {
        let c = PhaseCell::new(Phase::Hydrate);
        for p in [Phase::Hydrate, Phase::Warmup, Phase::Rated, Phase::Drain] {
            c.set(p);
            assert_eq!(c.get(), p);
        }
        assert_eq!(Phase::Warmup.name(), "warmup");
    }
}
