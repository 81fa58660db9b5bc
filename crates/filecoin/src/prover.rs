//! The prover the CLI and the daemon call: compiled circuits kept per circuit id.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use cuzk_bellpepper::batch::{BatchError, CircuitProver};
use cuzk_groth16::{ProverBackend, Witness};
use filecoin_proofs::{MerkleTreeTrait, SealCommitPhase1Output};

use crate::c1::with_phase1;
use crate::porep::{PorepCircuit, cache_id, partition_circuits};
use crate::{C1Output, FilecoinError, PARTITION_PROOF_BYTES, ParamStore, PorepProof, PorepTimings};

/// Proves Filecoin proofs on one backend, with the parameters of a [`ParamStore`]. The first
/// proof of a circuit (a proof kind and sector size) loads its parameters and compiles it;
/// later proofs synthesize witnesses only.
#[derive(Debug)]
pub struct FilecoinProver {
    backend: Box<dyn ProverBackend>,
    params: ParamStore,
    /// By filecoin-proofs' cache id (which names the parameter files).
    circuits: Mutex<HashMap<String, Arc<CircuitProver>>>,
}

impl FilecoinProver {
    pub fn new(backend: Box<dyn ProverBackend>, params: ParamStore) -> Self {
        Self {
            backend,
            params,
            circuits: Mutex::new(HashMap::new()),
        }
    }

    pub fn params(&self) -> &ParamStore {
        &self.params
    }

    pub fn backend(&self) -> &dyn ProverBackend {
        &*self.backend
    }

    /// PoRep C2: every partition's proof, in filecoin-proofs' layout.
    pub fn prove_porep_c2(
        &self,
        c1: &C1Output,
        rng: &mut impl rand::RngCore,
    ) -> Result<PorepProof, FilecoinError> {
        with_phase1!(&c1.phase1, |o| self.prove_porep_tree(c1, o, rng))
    }

    fn prove_porep_tree<Tree: 'static + MerkleTreeTrait>(
        &self,
        c1: &C1Output,
        phase1: &SealCommitPhase1Output<Tree>,
        rng: &mut impl rand::RngCore,
    ) -> Result<PorepProof, FilecoinError> {
        let mut timings = PorepTimings::default();
        let start = Instant::now();
        let circuits = partition_circuits(c1.seal_proof, phase1)?;
        timings.circuits = start.elapsed();
        let id = cache_id::<Tree>(&c1.seal_proof.config())?;
        let (prover, witnesses) = self.witnesses(&id, circuits, &mut timings)?;

        let mut bytes = Vec::with_capacity(witnesses.len() * PARTITION_PROOF_BYTES);
        for (k, w) in witnesses.iter().enumerate() {
            let start = Instant::now();
            let (proof, _) = prover
                .prove(&*self.backend, w, rng)
                .map_err(|source| partition_error(BatchError::Prove { index: k, source }))?;
            timings.partitions.push(start.elapsed());
            bytes.extend_from_slice(&cuzk_formats::bellperson::proof_to_bytes(&proof));
        }
        Ok(PorepProof { bytes, timings })
    }

    /// The circuit's prover (compiled from partition 0 the first time) and every partition's
    /// witness.
    fn witnesses<Tree: 'static + MerkleTreeTrait>(
        &self,
        id: &str,
        circuits: Vec<PorepCircuit<Tree>>,
        timings: &mut PorepTimings,
    ) -> Result<(Arc<CircuitProver>, Vec<Witness>), FilecoinError> {
        let cached = self.lock().get(id).cloned();
        if let Some(prover) = cached {
            let start = Instant::now();
            let w = prover.witnesses(circuits, 0).map_err(partition_error)?;
            timings.synthesis = start.elapsed();
            return Ok((prover, w));
        }
        let start = Instant::now();
        let params = self.params.load_params(id)?;
        timings.load_params = Some(start.elapsed());
        let start = Instant::now();
        let mut circuits = circuits.into_iter();
        let first = circuits
            .next()
            .ok_or_else(|| FilecoinError::field("C1 output", "vanilla_proofs", "no partitions"))?;
        let name = self.params.params_path(id).display().to_string();
        let (prover, first) =
            CircuitProver::compile(first, params, &name).map_err(partition_error)?;
        let rest = prover
            .witnesses(circuits.collect(), 1)
            .map_err(partition_error)?;
        timings.synthesis = start.elapsed();
        let prover = Arc::new(prover);
        self.lock().insert(id.to_string(), prover.clone());
        Ok((prover, std::iter::once(first).chain(rest).collect()))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<CircuitProver>>> {
        // The map is only read and inserted into: a panic elsewhere cannot leave it torn.
        self.circuits
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A batch error that names a circuit names a partition.
fn partition_error(e: BatchError) -> FilecoinError {
    match e {
        BatchError::Synthesis { index, .. } | BatchError::Prove { index, .. } => {
            FilecoinError::Partition {
                partition: index,
                source: Box::new(e),
            }
        }
        other => FilecoinError::Batch(other),
    }
}
