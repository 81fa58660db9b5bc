//! Criterion benches of the CPU reference live in `benches/`; run `cargo bench -p cuzk-benches`.

#![forbid(unsafe_code)]
