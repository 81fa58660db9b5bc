//! Filecoin proofs on cuzk, from filecoin-proofs' own inputs, checked by filecoin-proofs' own
//! verifier.
//!
//! - [`C1Output::parse`] reads a PoRep C1 output in the three forms it travels in: the
//!   `serde_json` of filecoin-proofs' `SealCommitPhase1Output<Tree>`, the filecoin-proofs-api
//!   form that filecoin-ffi writes (with `registered_proof`), and curio's wrapper
//!   `{"SectorNum","Phase1Out":base64(JSON),"SectorSize"}`.
//! - [`FilecoinProver::prove_porep_c2`] builds each partition's circuit through storage-proofs'
//!   public API exactly as `seal_commit_phase2` does (`StackedCompound::circuit`), synthesizes
//!   it with cuzk-bellpepper (the first proof of a circuit compiles it; later ones synthesize
//!   the witness only, each challenge on a core of its own), proves on the chosen backend and
//!   returns filecoin-proofs' proof bytes: 192 per partition, in partition order.
//! - [`ParamStore`] finds filecoin-proofs' `.params`/`.vk` files by their own names and
//!   decides how far to check them (a `parameters.json` digest, a BLAKE3 digest cuzk recorded,
//!   or a full point check); [`ParamStore::generate_porep`] writes locally made parameters
//!   under those names, for tests and private networks.
//! - [`verify_porep`] is filecoin-proofs' `verify_seal`; [`filecoin_proofs_c2`] is its own
//!   `seal_commit_phase2` on the CPU, the baseline of `cuzk filecoin bench-c2`.
//! - [`FilecoinProver::prove_window_post`] (one partition) and
//!   [`FilecoinProver::prove_winning_post`] prove PoSt from the vanilla proofs
//!   filecoin-proofs-api takes ([`PostVanilla`]), their circuits built as
//!   `generate_single_window_post_with_vanilla` and `generate_winning_post_with_vanilla`
//!   build them; [`verify_window_post`] and [`verify_winning_post`] are filecoin-proofs'.
//! - [`workload`] seals test sectors with filecoin-proofs; [`sparse`] builds valid C1 outputs,
//!   PoSt vanilla proofs and SnapDeals updates of any sector size from sparse trees, without
//!   sealing (the 32 GiB workloads no test machine can seal).
//! - [`PartitionedProof`] splits any of these proofs into partitions for a prover that runs
//!   each as a job of its own (the daemon's engine): the circuit compiled once from a
//!   partition, then each partition's witness by witness-only synthesis.

#![forbid(unsafe_code)]

/// The tests' heap is the `cuzk` binary's, so `synthesis_speed` times what the prover runs.
#[cfg(test)]
#[global_allocator]
static HEAP: cuzk_vram::LargePages = cuzk_vram::LargePages;

mod c1;
mod error;
mod job;
mod native_snap;
mod native_witness;
mod params;
mod porep;
mod post;
mod prover;
mod seal_proof;
mod snap;
pub mod sparse;
mod synth;
#[cfg(test)]
mod synthesis_speed;
#[cfg(test)]
mod tests;
pub mod workload;

pub use c1::{C1Form, C1Output};
pub use error::FilecoinError;
pub use job::{CircuitName, PartitionedProof, ProofKind};
pub use params::{GENERATED_MARKER, ParamStore, check_verifier_dir};
pub use porep::{
    PorepProof, PorepTimings, ProofTimings, filecoin_proofs_c2, prover_id_from_miner, verify_porep,
};
pub use post::{
    PostKind, PostProof, PostProofBytes, PostStatement, PostVanilla, verify_window_post,
    verify_winning_post,
};
pub use prover::FilecoinProver;
pub use seal_proof::SealProof;
pub use snap::{SnapProof, SnapStatement, SnapVanilla, verify_snap};

/// Bytes of one partition's Groth16 proof in filecoin-proofs' layout.
pub const PARTITION_PROOF_BYTES: usize = 192;
