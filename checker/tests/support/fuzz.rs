//! What the fuzz tests of every crate share (issue 17): the case count
//! (`CROSSBENCH_FUZZ_CASES`), the runner, rewriting a case's file in place, and the
//! mutations of valid inputs. Included by path from `checker/tests/fuzz_checker.rs`,
//! `loader/tests/fuzz_inputs.rs` and `report/tests/fuzz_report.rs`.
#![allow(dead_code)]

use std::fs;
use std::io::Write;
use std::path::Path;
use std::time::Instant;

use proptest::prelude::*;
use proptest::test_runner::{RngAlgorithm, TestCaseError, TestRunner};

/// Cases per property: `CROSSBENCH_FUZZ_CASES`, 10 000 by default.
pub fn fuzz_cases() -> u32 {
    std::env::var("CROSSBENCH_FUZZ_CASES")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(10_000)
}

/// Run `test` on `cases` values of `strategy` (regressions are kept next to
/// `source`, the calling test file, as `proptest!` keeps them), and say how long it took.
pub fn fuzz<S: Strategy>(
    source: &'static str,
    name: &str,
    cases: u32,
    strategy: S,
    test: impl Fn(S::Value) -> Result<(), TestCaseError>,
) {
    let config = ProptestConfig {
        cases,
        source_file: Some(source),
        // ChaCha is slow in a debug build; the cases need no cryptographic randomness.
        rng_algorithm: RngAlgorithm::XorShift,
        ..ProptestConfig::default()
    };
    let mut runner = TestRunner::new(config);
    let t0 = Instant::now();
    let result = runner.run(&strategy, test);
    eprintln!("fuzz {name}: {cases} cases in {:.2?}", t0.elapsed());
    if let Err(e) = result {
        panic!("{name}: {e}");
    }
}

/// Give `path` the content `bytes`. The file is overwritten in place and cut to
/// length, never truncated to zero and rewritten (ext4 then flushes it on close, and
/// every case would wait for the disk) nor created anew (ext4 then scans its inode
/// bitmap past the recently deleted ones, slower with every case).
pub fn rewrite(path: &Path, bytes: &[u8]) {
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .expect("open the case's file");
    f.write_all(bytes).expect("write the case's file");
    f.set_len(bytes.len() as u64).expect("cut the case's file");
}

/// Mutations of valid inputs.
pub mod mutate {
    use std::fmt;

    use proptest::prelude::*;

    /// Numbers that break parsers: bounds and their neighbours, signs, floats, junk.
    pub const NUMBERS: &[&str] = &[
        "0",
        "1",
        "-1",
        "-0",
        "+1",
        "2",
        "255",
        "65535",
        "4294967295",
        "4294967296",
        "9223372036854775806",
        "9223372036854775807",
        "9223372036854775808",
        "-9223372036854775807",
        "-9223372036854775808",
        "-9223372036854775809",
        "18446744073709551615",
        "18446744073709551616",
        "99999999999999999999999999999999",
        "1e308",
        "1e309",
        "0.5",
        "NaN",
        ".inf",
        "0x1F",
        "1_000",
        "007",
        "",
    ];

    /// One edit of an input.
    #[derive(Debug, Clone)]
    pub enum Op {
        FlipBit(usize, u8),
        InsertBytes(usize, Vec<u8>),
        InsertToken(usize, usize),
        Delete(usize, usize),
        Truncate(usize),
        DupLine(usize),
        DropLine(usize),
        SwapLines(usize, usize),
        Number(usize, usize),
        Value(usize, usize),
    }

    pub fn op() -> impl Strategy<Value = Op> {
        let i = any::<usize>;
        prop_oneof![
            2 => (i(), 0u8..8).prop_map(|(a, b)| Op::FlipBit(a, b)),
            1 => (i(), prop::collection::vec(any::<u8>(), 1..8)).prop_map(|(a, b)| Op::InsertBytes(a, b)),
            2 => (i(), i()).prop_map(|(a, b)| Op::InsertToken(a, b)),
            1 => (i(), 1usize..24).prop_map(|(a, b)| Op::Delete(a, b)),
            1 => i().prop_map(Op::Truncate),
            1 => i().prop_map(Op::DupLine),
            1 => i().prop_map(Op::DropLine),
            1 => (i(), i()).prop_map(|(a, b)| Op::SwapLines(a, b)),
            4 => (i(), i()).prop_map(|(a, b)| Op::Number(a, b)),
            3 => (i(), i()).prop_map(|(a, b)| Op::Value(a, b)),
        ]
    }

    /// Line spans (end exclusive, newline included when present).
    fn lines(b: &[u8]) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        let mut s = 0;
        for (i, &c) in b.iter().enumerate() {
            if c == b'\n' {
                out.push((s, i + 1));
                s = i + 1;
            }
        }
        if s < b.len() {
            out.push((s, b.len()));
        }
        out
    }

    /// Spans of the numbers (an optional `-` and digits).
    fn numbers(b: &[u8]) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < b.len() {
            let start = i;
            if b[i] == b'-' && b.get(i + 1).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
            if b[i].is_ascii_digit() {
                while i < b.len() && b[i].is_ascii_digit() {
                    i += 1;
                }
                out.push((start, i));
            } else {
                i = start + 1;
            }
        }
        out
    }

    fn apply_one(b: &mut Vec<u8>, op: &Op, tokens: &[&str]) {
        match op {
            Op::FlipBit(i, bit) => {
                if !b.is_empty() {
                    let i = i % b.len();
                    b[i] ^= 1 << bit;
                }
            }
            Op::InsertBytes(i, v) => {
                let i = i % (b.len() + 1);
                b.splice(i..i, v.iter().copied());
            }
            Op::InsertToken(i, t) => {
                let i = i % (b.len() + 1);
                let t = tokens[t % tokens.len()].as_bytes();
                b.splice(i..i, t.iter().copied());
            }
            Op::Delete(i, n) => {
                if !b.is_empty() {
                    let i = i % b.len();
                    let e = (i + n).min(b.len());
                    b.drain(i..e);
                }
            }
            Op::Truncate(i) => b.truncate(i % (b.len() + 1)),
            Op::DupLine(i) => {
                let ls = lines(b);
                if !ls.is_empty() {
                    let (s, e) = ls[i % ls.len()];
                    let mut l = b[s..e].to_vec();
                    if l.last() != Some(&b'\n') {
                        l.insert(0, b'\n');
                    }
                    b.splice(e..e, l);
                }
            }
            Op::DropLine(i) => {
                let ls = lines(b);
                if !ls.is_empty() {
                    let (s, e) = ls[i % ls.len()];
                    b.drain(s..e);
                }
            }
            Op::SwapLines(x, y) => {
                let ls = lines(b);
                if ls.len() > 1 {
                    let mut parts: Vec<Vec<u8>> =
                        ls.iter().map(|&(s, e)| b[s..e].to_vec()).collect();
                    if parts.last().is_some_and(|l| l.last() != Some(&b'\n')) {
                        parts.last_mut().expect("non-empty").push(b'\n');
                    }
                    let n = parts.len();
                    parts.swap(x % n, y % n);
                    *b = parts.concat();
                }
            }
            Op::Number(i, k) => {
                let ns = numbers(b);
                let new = NUMBERS[k % NUMBERS.len()].as_bytes();
                if ns.is_empty() {
                    let i = i % (b.len() + 1);
                    b.splice(i..i, new.iter().copied());
                } else {
                    let (s, e) = ns[i % ns.len()];
                    b.splice(s..e, new.iter().copied());
                }
            }
            Op::Value(i, k) => {
                let ls = lines(b);
                if ls.is_empty() {
                    return;
                }
                let (s, mut e) = ls[i % ls.len()];
                if b[e - 1] == b'\n' {
                    e -= 1;
                }
                let junk = tokens[k % tokens.len()].as_bytes();
                let line = &b[s..e];
                // After the first `:` or `=` (a field's value), else the last word.
                let at = match line.iter().position(|&c| c == b':' || c == b'=') {
                    Some(p) => s + p + 1,
                    None => s + line.iter().rposition(|&c| c == b' ').map_or(0, |p| p + 1),
                };
                let mut v = Vec::with_capacity(junk.len() + 1);
                if at > s && b[at - 1] == b':' {
                    v.push(b' ');
                }
                v.extend_from_slice(junk);
                b.splice(at..e, v);
            }
        }
    }

    /// `seed` with `ops` applied in order.
    pub fn apply(seed: &[u8], ops: &[Op], tokens: &[&str]) -> Vec<u8> {
        let mut b = seed.to_vec();
        for op in ops {
            apply_one(&mut b, op, tokens);
        }
        b
    }

    /// Bytes shown as text in failure reports.
    #[derive(Clone)]
    pub struct Input(pub Vec<u8>);

    impl fmt::Debug for Input {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "{:?}", String::from_utf8_lossy(&self.0))
        }
    }

    impl Input {
        pub fn text(&self) -> String {
            String::from_utf8_lossy(&self.0).into_owned()
        }
    }

    /// Seeds as owned bytes.
    pub fn seeds(texts: &[&str]) -> Vec<Vec<u8>> {
        texts.iter().map(|t| t.as_bytes().to_vec()).collect()
    }

    /// Arbitrary bytes, arbitrary text, token soups, and (mostly) mutated seeds.
    pub fn input(
        seeds: Vec<Vec<u8>>,
        tokens: &'static [&'static str],
    ) -> impl Strategy<Value = Input> {
        prop_oneof![
            1 => prop::collection::vec(any::<u8>(), 0..256).prop_map(Input),
            1 => any::<String>().prop_map(|s| Input(s.into_bytes())),
            1 => prop::collection::vec(prop::sample::select(tokens), 0..48)
                .prop_map(|v| Input(v.concat().into_bytes())),
            6 => (prop::sample::select(seeds), prop::collection::vec(op(), 1..8))
                .prop_map(move |(s, ops)| Input(apply(&s, &ops, tokens))),
        ]
    }
}
