//! Groth16 over BLS12-381: the CPU reference prover of cuzk, shaped so a GPU backend can sit
//! behind the same calls.
//!
//! Flow (arkworks-style phases):
//! 1. [`R1cs`] — sparse A, B, C in CSR form, built with [`R1csBuilder`] or loaded from a file;
//!    the last `num_public + 1` rows bind the instance variables (see [`r1cs`]).
//! 2. [`setup::generate_parameters`] — a [`ProvingKey`] from random toxic waste, by Lagrange
//!    coefficients at τ and windowed fixed-base scalar multiplication.
//! 3. [`prover::create_proof`] — witness map (a, b, c = A·z, B·z, C·z over the domain), quotient
//!    H, five MSMs and the assembly with r, s; the heavy steps go through a [`ProverBackend`].
//! 4. [`verifier::verify_proof`] — one multi-Miller loop and one final exponentiation.
//!
//! [`select_backend`] picks the CPU or the [`GpuBackend`]. [`testing::demo::circuit`] makes
//! realistic test circuits ([`testing::demo::circuit_with`]: any share of bits). Key generation
//! (CPU and GPU, fixed-base kernels) is [`setup`]. Files (cuzk's own format and others') are
//! read and written by the `cuzk-formats` crate above this one.

#![deny(unsafe_code)]

pub mod backend;
pub mod gpu;
// The launchers of this crate's kernels (key generation, the witness map): the one module
// allowed `unsafe`.
#[allow(unsafe_code)]
pub mod kernels;
pub mod keys;
pub mod prover;
pub mod r1cs;
mod select;
pub mod setup;
pub mod testing;
mod timing;
pub mod verifier;

pub use backend::{
    BackendError, BackendErrorKind, CpuBackend, Evaluations, HeldCircuit, HostVec, MsmValue,
    ProverBackend, QuotientMsm, Stage, StagedEvaluations, StagedWitness, StagingNeeds, WitnessMsms,
    witness_msm_order,
};
pub use gpu::GpuBackend;
pub use keys::{
    HeldKey, KeyIdentity, KeyQueries, KeyRef, PreparedVerifyingKey, Proof, ProvingKey, Query,
    VerifyingKey,
};
pub use prover::{
    ProofTimings, ProveError, assemble, check_inputs, create_proof, create_proof_with_backend,
    create_proof_with_randomness, witness_map,
};
pub use r1cs::{
    LinearCombination, R1cs, R1csBuilder, R1csError, Row, RowEvaluator, SparseMatrix, Variable,
    Witness, WitnessBuffer, WitnessError,
};
pub use select::{BackendChoice, GpuUnavailable, select_backend};
pub use setup::{
    SetupError, SetupTimings, ToxicWaste, generate_parameters, generate_parameters_with_toxic_waste,
};
pub use verifier::{VerifyError, prepare_verifying_key, verify_proof};

pub use cuzk_field::Fr;
pub use cuzk_ntt::Domain;

/// Every kernel set the prover and key generation launch (the NTT's, the MSM's and this crate's),
/// for whole-build checks such as `cuzk devices`' first-load timing.
pub fn kernel_sets() -> [&'static cuzk_gpu::Kernels; 3] {
    [
        &cuzk_ntt::kernels::KERNELS,
        &cuzk_msm::kernels::KERNELS,
        &kernels::KERNELS,
    ]
}
