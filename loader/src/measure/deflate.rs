//! The interval logs' serializer: HdrHistogram's V2 compressed encoding, byte for
//! byte what `hdrhistogram`'s own `V2DeflateSerializer` writes, with one zlib
//! compressor kept for the whole run.
//!
//! `V2DeflateSerializer` builds a new compressor for every histogram it writes: some
//! 300 KB of zeroed tables (miniz_oxide's `CompressorOxide` and `HashBuffers`),
//! allocated and freed once per interval log line. The allocator hands that memory
//! back to the kernel between seconds, so every line faulted fresh pages in and the
//! kernel zeroed them again: 3–4 % of a 2000 msg/s stream cell's CPU in a `perf`
//! profile (docs/performance.md, "The harness tax per adapter"), a cost per second that
//! a client library's bare loop does not pay. Here the compressor is reset between
//! histograms instead, which gives the same bytes (a test below compares them with
//! hdrhistogram's serializer's).

use std::io::Write;

use flate2::write::ZlibEncoder;
use flate2::Compression;
use hdrhistogram::serialization::{Serializer, V2DeflateSerializeError, V2Serializer};
use hdrhistogram::{Counter, Histogram};

/// The V2 compressed encoding's cookie (`V2_COMPRESSED_COOKIE` in hdrhistogram, which
/// does not export it): the base 0x1c849304 with the word size bits 0x10.
const V2_COMPRESSED_COOKIE: u32 = 0x1c84_9304 | 0x10;

/// HdrHistogram's V2 deflate encoding with one reused compressor.
pub struct ReusedDeflate {
    v2: V2Serializer,
    uncompressed: Vec<u8>,
    /// The output buffer between two histograms (the encoder holds it while writing).
    compressed: Vec<u8>,
    zlib: ZlibEncoder<Vec<u8>>,
}

impl std::fmt::Debug for ReusedDeflate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReusedDeflate").finish_non_exhaustive()
    }
}

impl Default for ReusedDeflate {
    fn default() -> Self {
        ReusedDeflate {
            v2: V2Serializer::new(),
            uncompressed: Vec::new(),
            compressed: Vec::new(),
            zlib: ZlibEncoder::new(Vec::new(), Compression::default()),
        }
    }
}

impl Serializer for ReusedDeflate {
    type SerializeError = V2DeflateSerializeError;

    fn serialize<T: Counter, W: Write>(
        &mut self,
        h: &Histogram<T>,
        writer: &mut W,
    ) -> Result<usize, V2DeflateSerializeError> {
        self.uncompressed.clear();
        let n = self
            .v2
            .serialize(h, &mut self.uncompressed)
            .map_err(V2DeflateSerializeError::InternalSerializationError)?;
        let mut out = std::mem::take(&mut self.compressed);
        out.clear();
        // The cookie, then the compressed length, filled in below.
        out.extend_from_slice(&V2_COMPRESSED_COOKIE.to_be_bytes());
        out.extend_from_slice(&[0; 4]);
        // `reset` finishes the (empty) stream into the old buffer, restarts the
        // compressor without reallocating its tables, and writes into `out` from now.
        self.zlib.reset(out)?;
        self.zlib.write_all(&self.uncompressed[..n])?;
        self.zlib.try_finish()?;
        let mut out = self.zlib.reset(Vec::new())?;
        let len = out.len();
        out[4..8].copy_from_slice(&((len - 8) as u32).to_be_bytes());
        writer.write_all(&out)?;
        self.compressed = out;
        Ok(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hdrhistogram::serialization::{Deserializer, V2DeflateSerializer};

    fn histograms() -> Vec<Histogram<u64>> {
        let mut out = Vec::new();
        // Empty, one value, a spread, a wide one, then a small one again: a reset
        // compressor must not carry anything from the wide one into the next.
        out.push(crate::measure::histograms::new_hist());
        let mut h = crate::measure::histograms::new_hist();
        h.record(1234).unwrap();
        out.push(h);
        let mut h = crate::measure::histograms::new_hist();
        for v in 1..20_000u64 {
            h.record(v * 37 % 900_000 + 1).unwrap();
        }
        out.push(h);
        let mut h = crate::measure::histograms::new_hist();
        for i in 0..5_000u64 {
            h.record_n((i * i) % 3_000_000_000 + 1, i % 7 + 1).unwrap();
        }
        out.push(h);
        let mut h = crate::measure::histograms::new_hist();
        h.record_n(45_000, 300).unwrap();
        out.push(h);
        out
    }

    #[test]
    fn writes_the_bytes_hdrhistograms_serializer_writes() {
        let mut ours = ReusedDeflate::default();
        let mut theirs = V2DeflateSerializer::new();
        for (i, h) in histograms().iter().enumerate() {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            let na = ours.serialize(h, &mut a).unwrap();
            let nb = theirs.serialize(h, &mut b).unwrap();
            assert_eq!(na, a.len(), "histogram {i}: the length returned");
            assert_eq!(nb, b.len());
            assert_eq!(a, b, "histogram {i}: the same bytes as V2DeflateSerializer");
        }
    }

    #[test]
    fn what_it_writes_reads_back() {
        let mut ours = ReusedDeflate::default();
        let mut buf = Vec::new();
        let hs = histograms();
        for h in &hs {
            ours.serialize(h, &mut buf).unwrap();
        }
        let mut r = std::io::Cursor::new(buf);
        let mut d = Deserializer::new();
        for h in &hs {
            let back: Histogram<u64> = d.deserialize(&mut r).unwrap();
            assert_eq!(back.len(), h.len());
            assert_eq!(back, *h);
        }
    }
}
