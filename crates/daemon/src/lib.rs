//! `cuzk daemon`: the cuzk proving service.
//!
//! A long-lived process that holds an [`cuzk_scheduler::Engine`] with keys loaded once and
//! serves the `cuzk.v1.Prover` gRPC API (`proto/cuzk/v1/cuzk.proto`) and curio's
//! `cuzk.v1.ProvingEngine` (Filecoin proofs: [`curio`], [`filecoin`]) on a unix socket of mode
//! 0600 (or TCP with a bearer token, over TLS unless on loopback), with the standard health
//! service and server reflection (v1 and v1alpha), and optionally an HTTP port for `GET /metrics`, `/status` and `/timeline`.
//!
//! The handlers stay thin: they check a request, translate it into engine calls and the
//! answer back. A job's id and its token are random 128-bit values; Await and Cancel need
//! both, so one client cannot read another's proofs. A witness arrives as a stream of chunks
//! (bounded by the key's witness size and a daemon-wide upload budget, returned when the
//! stream ends or its client goes away) or as a path on the daemon's host.

#![forbid(unsafe_code)]

pub mod auth;
pub mod client;
pub mod config;
mod connections;
pub mod curio;
mod curio_jobs;
pub mod filecoin;
mod http;
pub mod metrics;
pub mod paths;
pub mod priority;
pub mod queue_mode;
mod rpc_timing;
mod server;
pub mod service;
mod status;
pub mod tls;
mod unix_authority;
mod upload;

/// The generated `cuzk.v1` messages, client and server.
#[allow(clippy::all, missing_debug_implementations)]
pub mod pb {
    tonic::include_proto!("cuzk.v1");

    /// The encoded descriptor set, for server reflection.
    pub const FILE_DESCRIPTOR_SET: &[u8] =
        tonic::include_file_descriptor_set!("cuzk_v1_descriptor");
}

/// curio's `cuzk.v1` (`proto/curio/cuzk/v1/proving.proto`): the messages, client and server of
/// `cuzk.v1.ProvingEngine`.
#[allow(clippy::all, missing_debug_implementations)]
pub mod curio_pb {
    include!(concat!(env!("OUT_DIR"), "/curio/cuzk.v1.rs"));
}

pub use config::{DaemonConfig, DaemonOverrides, KeyConfig, Listen};
pub use connections::MAX_CONNECTIONS;
pub use http::{status_json, timeline_json};
pub use server::{Daemon, DaemonError};
pub use service::Shared;
pub use tls::TlsConfig;
