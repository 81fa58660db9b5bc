//! cuzk-filecoin's integration tests, in one binary: each test binary instantiates much of the
//! filecoin-proofs tree at opt-level 3, so one binary builds in a fraction of five's time.

mod features;
mod porep_c2;
mod post;
mod snap;
mod sparse;
mod support;
