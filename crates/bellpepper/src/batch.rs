//! Proving many instances of one bellpepper circuit with bellperson parameters: the one path
//! from `Circuit`s and a bellperson `.params` file to Groth16 proofs.
//!
//! [`CircuitProver::compile`] synthesizes the first instance fully, keeps its system
//! ([`CompiledCircuit`]) and maps the parameters onto it
//! ([`BpParameters::into_proving_key`]); every later instance runs witness-only synthesis.
//! [`prove_batch`] does all of it in one call, and with the `bellperson` feature
//! `create_random_proof_batch` takes and returns bellperson's own types, as bellperson's
//! function of the same name does.
//!
//! ```
//! use bellpepper_core::{Circuit, ConstraintSystem, SynthesisError, num::AllocatedNum};
//! use blstrs::Scalar;
//! use cuzk_bellpepper::batch::prove_batch;
//! use cuzk_formats::BpParameters;
//! use rand::SeedableRng;
//!
//! /// Knows x with x² = y (y public).
//! struct Square(u64);
//! impl Circuit<Scalar> for Square {
//!     fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
//!         let x = AllocatedNum::alloc(cs.namespace(|| "x"), || Ok(Scalar::from(self.0)))?;
//!         let y = x.square(cs.namespace(|| "x²"))?;
//!         y.inputize(cs.namespace(|| "y"))
//!     }
//! }
//!
//! let rng = &mut rand_chacha::ChaCha8Rng::seed_from_u64(1);
//! // Parameters as bellperson writes them (here made by cuzk's setup, for the example).
//! let (r1cs, _) = cuzk_bellpepper::synthesize(Square(1)).unwrap();
//! let params = BpParameters::from_proving_key(
//!     &cuzk_groth16::generate_parameters(&r1cs, rng).unwrap(),
//! )
//! .unwrap();
//! let proofs = prove_batch(
//!     vec![Square(3), Square(4)],
//!     params.clone(),
//!     "square.params",
//!     &cuzk_groth16::CpuBackend,
//!     rng,
//! )
//! .unwrap();
//! assert_eq!(proofs.len(), 2);
//! let pvk = cuzk_groth16::prepare_verifying_key(&params.vk.to_cuzk());
//! let nine = cuzk_bellpepper::fr_from_scalar(&Scalar::from(9u64));
//! cuzk_groth16::verify_proof(&pvk, &proofs[0], &[nine]).unwrap();
//! ```

use bellpepper_core::Circuit;
use blstrs::Scalar;
use cuzk_field::Fr;
use cuzk_formats::{BpParameters, FormatError};
use cuzk_groth16::{
    ProofTimings, ProveError, ProverBackend, ProvingKey, Witness, create_proof_with_backend,
};
use rand::RngCore;
use rayon::prelude::*;

use crate::{BellpepperError, CompiledCircuit};

/// Why a batch could not be proven; each error names the circuit (its index in the batch).
#[derive(Debug, thiserror::Error)]
pub enum BatchError {
    #[error("no circuits to prove")]
    Empty,
    #[error("circuit {index}: {source}")]
    Synthesis {
        index: usize,
        source: BellpepperError,
    },
    #[error("parameters: {0}")]
    Parameters(#[from] FormatError),
    #[error("circuit {index}: {source}")]
    Prove { index: usize, source: ProveError },
    /// bellperson could not write its parameters or read cuzk's proof.
    #[error("bellperson's {what}: {source}")]
    Bellperson {
        what: &'static str,
        source: std::io::Error,
    },
}

/// One circuit, compiled once, and its proving key: proves any number of its instances.
#[derive(Debug)]
pub struct CircuitProver {
    compiled: CompiledCircuit,
    key: ProvingKey,
}

impl CircuitProver {
    /// Synthesizes `first` fully and maps `params` (bellperson parameters of this circuit;
    /// `params_name` names them in errors) onto its system. Returns the prover and `first`'s
    /// witness. Parameters of another circuit are a [`FormatError::Mismatch`] naming the first
    /// query whose size differs.
    pub fn compile<C: Circuit<Scalar>>(
        first: C,
        params: BpParameters,
        params_name: &str,
    ) -> Result<(Self, Witness), BatchError> {
        let (compiled, witness) = CompiledCircuit::compile(first)
            .map_err(|source| BatchError::Synthesis { index: 0, source })?;
        Ok((Self::new(compiled, params, params_name)?, witness))
    }

    /// Maps `params` onto a circuit compiled before (see [`Self::compile`]).
    pub fn new(
        compiled: CompiledCircuit,
        params: BpParameters,
        params_name: &str,
    ) -> Result<Self, BatchError> {
        let key = params.into_proving_key(compiled.r1cs(), params_name)?;
        Ok(Self { compiled, key })
    }

    pub fn compiled(&self) -> &CompiledCircuit {
        &self.compiled
    }

    pub fn key(&self) -> &ProvingKey {
        &self.key
    }

    /// The compiled circuit and its key, for a caller that proves elsewhere (an engine).
    pub fn into_parts(self) -> (CompiledCircuit, ProvingKey) {
        (self.compiled, self.key)
    }

    /// Witness-only synthesis of each circuit, in parallel; errors name the circuit's index
    /// plus `first_index`.
    pub fn witnesses<C: Circuit<Scalar> + Send>(
        &self,
        circuits: Vec<C>,
        first_index: usize,
    ) -> Result<Vec<Witness>, BatchError> {
        circuits
            .into_par_iter()
            .enumerate()
            .map(|(i, c)| {
                self.compiled
                    .witness(c)
                    .map_err(|source| BatchError::Synthesis {
                        index: first_index + i,
                        source,
                    })
            })
            .collect()
    }

    /// One proof with fresh random r, s. An unsatisfied witness is an error naming the first
    /// failing constraint.
    pub fn prove(
        &self,
        backend: &dyn ProverBackend,
        witness: &Witness,
        rng: &mut (impl RngCore + ?Sized),
    ) -> Result<(cuzk_groth16::Proof, ProofTimings), ProveError> {
        let (r, s) = (Fr::random(&mut *rng), Fr::random(&mut *rng));
        create_proof_with_backend(backend, &self.key, self.compiled.r1cs(), witness, r, s)
    }
}

/// Proves every circuit of `circuits` (instances of one circuit) with `params`, in order:
/// the first is compiled, the rest synthesize witness-only.
pub fn prove_batch<C: Circuit<Scalar> + Send>(
    circuits: Vec<C>,
    params: BpParameters,
    params_name: &str,
    backend: &dyn ProverBackend,
    rng: &mut impl RngCore,
) -> Result<Vec<cuzk_groth16::Proof>, BatchError> {
    let mut circuits = circuits.into_iter();
    let first = circuits.next().ok_or(BatchError::Empty)?;
    let (prover, first_witness) = CircuitProver::compile(first, params, params_name)?;
    let rest = prover.witnesses(circuits.collect(), 1)?;
    std::iter::once(first_witness)
        .chain(rest)
        .enumerate()
        .map(|(index, w)| {
            prover
                .prove(backend, &w, rng)
                .map(|(p, _)| p)
                .map_err(|source| BatchError::Prove { index, source })
        })
        .collect()
}

/// bellperson's `create_random_proof_batch` on cuzk's prover (the CPU backend): bellperson's
/// parameters in, bellperson's proofs out.
#[cfg(feature = "bellperson")]
pub fn create_random_proof_batch<C: Circuit<Scalar> + Send>(
    circuits: Vec<C>,
    params: &bellperson::groth16::Parameters<blstrs::Bls12>,
    rng: &mut impl RngCore,
) -> Result<Vec<bellperson::groth16::Proof<blstrs::Bls12>>, BatchError> {
    let name = "bellperson parameters";
    let mut bytes = Vec::new();
    params
        .write(&mut bytes)
        .map_err(|source| BatchError::Bellperson {
            what: "parameters",
            source,
        })?;
    // The points come from a bellperson object, which checked them when it read or made
    // them: the digest of the bytes just written vouches for them.
    let digest = cuzk_formats::Digest::Blake3(*blake3::hash(&bytes).as_bytes());
    let params = BpParameters::from_bytes(
        name,
        &bytes,
        &cuzk_formats::PointChecks::TrustedDigest(digest),
    )?;
    drop(bytes);
    prove_batch(circuits, params, name, &cuzk_groth16::CpuBackend, rng)?
        .iter()
        .map(to_bellperson_proof)
        .collect()
}

/// cuzk's proof as bellperson's (the same 192 bytes).
#[cfg(feature = "bellperson")]
pub fn to_bellperson_proof(
    proof: &cuzk_groth16::Proof,
) -> Result<bellperson::groth16::Proof<blstrs::Bls12>, BatchError> {
    let bytes = cuzk_formats::bellperson::proof_to_bytes(proof);
    bellperson::groth16::Proof::read(&bytes[..]).map_err(|source| BatchError::Bellperson {
        what: "proof",
        source,
    })
}
