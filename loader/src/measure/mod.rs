//! What a cell measures with, the same for every workload: the cell's clock, the
//! counters, the latency histograms (and their interval logs' serializer) and the rated window that decides what counts,
//! and the resource sampler that runs beside every cell.

pub mod clock;
pub mod counters;
pub mod deflate;
pub mod histograms;
pub mod outcomes;
pub mod phase;
pub mod sampling;
pub mod window;
