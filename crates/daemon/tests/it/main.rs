//! cuzk-daemon's integration tests, in one binary: each test binary instantiates its own share
//! of tonic, tokio and the prover at opt-level 3, so one binary builds in a fraction of six's
//! time.

mod curio;
mod daemon;
mod gpu_soak;
mod reliability;
mod support;
mod tls;
mod upload;
