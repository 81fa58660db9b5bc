//! The cuzk proving engine: many proofs at once on every device of a host, pre-staged and
//! pipelined, under memory admission that no setting can push out of memory.
//!
//! A [`Engine`] holds loaded keys (a proving key and its circuit, by id, made resident per
//! device as its memory plan allows), a priority queue of jobs, and per device a set of workers.
//! A job runs as the prover's phases ([`cuzk_groth16::ProverBackend`]'s staged steps):
//!
//! 1. CPU: host memory admitted, witness read or computed by the caller's function
//!    ([`WitnessSource::Compute`]), each done ahead while the job is queued when host memory
//!    leaves room ([`read_ahead`]), and checked;
//! 2. copy: the witness staged on the device (outside the GPU lock);
//! 3. device, under the GPU lock: the four witness MSMs — while a thread of the same job runs
//!    the witness map into pinned buffers;
//! 4. copy: a, b, c staged (outside the lock);
//! 5. device, under the lock: the quotient and the H MSM;
//! 6. CPU: assembly and the pairing self-check.
//!
//! So one worker's CPU phases and uploads overlap another's kernels.
//!
//! **Memory argument.** Per device, the budget splits into the keys' resident points, the
//! *lock room* (the most one device phase allocates; only the GPU lock's holder allocates
//! there), the per-device tables, and the *staging room*: the rest. Staged data is taken only
//! through the staging gate, whose capacity is that rest, and then reserved from the budget
//! before anything is allocated; the lock holder never waits for staging room, and a stager
//! never holds the lock. So every reservation fits when admitted, no phase allocates beyond its
//! room, and any mix of workers, jobs, caps and host budgets finishes every job, slower at
//! worst. Every byte is RAII: a failed or cancelled job returns all it held.
//!
//! Waits (GPU lock, staging room, host memory) are served by priority, FIFO within a level; a
//! lock holder yields between MSMs to a waiting job of higher priority. Cancellation takes a
//! queued job out at once and stops a running one at its next phase boundary. With no GPU the
//! same engine runs on the CPU, its staged data in a simulated device memory
//! ([`cuzk_groth16::testing::SimBackend`]).

#![forbid(unsafe_code)]

mod config;
mod engine;
mod gate;
mod job;
mod keys;
mod queue;
mod read_ahead;
mod run;
pub mod stats;

pub use config::{EngineConfig, Workers};
pub use engine::{Counters, DeviceStatus, Engine, EngineError, EngineStatus, WorkerStatus};
pub use gate::{Gate, GateError, Permit, Rank};
pub use job::{
    JobError, JobHandle, JobId, JobOutput, JobSpec, JobStatus, JobTimings, LOAD_LANE, Priority,
    READ_AHEAD_LANE, Span, SpanKind, WitnessFn, WitnessSource,
};
pub use keys::KeySource;
