//! The cuzk job queue in PostgreSQL: many GPU hosts, one queue.
//!
//! Jobs are rows of `cuzk_jobs` (schema in `migrations/`, applied at start by refinery). A host
//! claims queued rows of the keys it holds with `FOR UPDATE SKIP LOCKED`, as many as its
//! engine can start ([`worker`]), and holds each under a lease (owner, attempt) that its
//! heartbeat renews. The result (proof, public inputs, timings, host) is written by the one
//! statement that marks the job done, guarded by the lease, so a job is done at most once; an
//! expired lease returns the job to the queue, so none is lost. Failures are retried up to a
//! cap with the last error kept; a cancel set on the row stops the job on whichever host runs
//! it. Priorities are three levels, FIFO within a level.
//!
//! [`Queue`] is the database side (a deadpool of tokio-postgres connections that re-dials
//! after the server restarts, over TLS by libpq's `sslmode`), [`worker::spawn`] the host side over a
//! [`cuzk_scheduler::Engine`], [`sim`] the scale simulation, and [`tempdb`] a throwaway server
//! for tests.

#![forbid(unsafe_code)]

mod config;
mod db;
pub mod sim;
pub mod tempdb;
mod tls;
pub mod worker;

pub use config::QueueConfig;
pub use db::{
    CancelOutcome, Claimed, HostRow, Job, Lease, NewJob, Outcome, Queue, QueueError, QueueStatus,
    State, Submitted, WitnessRef,
};
pub use tls::SslMode;
pub use worker::{Stopper, WitnessResolver, WorkerHandle, key_digest, witness_checksum};
