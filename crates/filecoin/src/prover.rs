//! The prover the CLI and the daemon call: compiled circuits kept per circuit id.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use cuzk_bellpepper::batch::{BatchError, CircuitProver};
use cuzk_groth16::{ProverBackend, Witness};
use filecoin_proofs::{MerkleTreeTrait, SealCommitPhase1Output};
use rayon::prelude::*;

use crate::c1::with_phase1;
use crate::porep::PorepCircuits;
use crate::synth::{Compile, PartitionCircuit, Synth, WitnessOnly};
use crate::{C1Output, FilecoinError, PARTITION_PROOF_BYTES, ParamStore, PorepProof, ProofTimings};

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
        rng: &mut dyn rand::RngCore,
    ) -> Result<PorepProof, FilecoinError> {
        with_phase1!(&c1.phase1, |o| self.prove_porep_tree(c1, o, rng))
    }

    fn prove_porep_tree<Tree: 'static + MerkleTreeTrait>(
        &self,
        c1: &C1Output,
        phase1: &SealCommitPhase1Output<Tree>,
        rng: &mut dyn rand::RngCore,
    ) -> Result<PorepProof, FilecoinError> {
        let mut timings = ProofTimings::default();
        let start = Instant::now();
        let circuits = PorepCircuits::new(c1.seal_proof, phase1)?;
        let partitions = (0..circuits.len())
            .map(|k| circuits.partition(k))
            .collect::<Result<Vec<_>, _>>()?;
        timings.circuits = start.elapsed();
        let id = c1.seal_proof.cache_id::<Tree>()?;
        let bytes = self.prove_circuits(&id, partitions, 0, &mut timings, |_, _| Ok(()), rng)?;
        Ok(PorepProof { bytes, timings })
    }

    /// Proves instances of the circuit filecoin-proofs names `id` (its cache id, which names
    /// the parameter files), in order: 192 bytes each. The first proof of a circuit loads its
    /// parameters and compiles it from `circuits[0]`; later ones synthesize witnesses only,
    /// all partitions and their parts at once. `check` sees each witness before it is proven.
    /// Errors name partitions from `first_partition` on.
    pub(crate) fn prove_circuits<P: PartitionCircuit + Send>(
        &self,
        id: &str,
        circuits: Vec<P>,
        first_partition: usize,
        timings: &mut ProofTimings,
        check: impl Fn(usize, &Witness) -> Result<(), FilecoinError>,
        rng: &mut dyn rand::RngCore,
    ) -> Result<Vec<u8>, FilecoinError> {
        timings.first_partition = first_partition;
        let (prover, witnesses) = self.witnesses(id, circuits, first_partition, timings)?;
        for (k, w) in witnesses.iter().enumerate() {
            check(first_partition + k, w)?;
        }
        let mut bytes = Vec::with_capacity(witnesses.len() * PARTITION_PROOF_BYTES);
        for (k, w) in witnesses.iter().enumerate() {
            let start = Instant::now();
            let (proof, _) = prover.prove(&*self.backend, w, rng).map_err(|source| {
                FilecoinError::Partition {
                    partition: first_partition + k,
                    source: Box::new(BatchError::Prove { index: k, source }),
                }
            })?;
            timings.partitions.push(start.elapsed());
            bytes.extend_from_slice(&cuzk_formats::bellperson::proof_to_bytes(&proof));
        }
        Ok(bytes)
    }

    /// The circuit's prover (compiled from the first circuit the first time) and every
    /// circuit's witness.
    fn witnesses<P: PartitionCircuit + Send>(
        &self,
        id: &str,
        circuits: Vec<P>,
        first_partition: usize,
        timings: &mut ProofTimings,
    ) -> Result<(Arc<CircuitProver>, Vec<Witness>), FilecoinError> {
        let mut circuits = circuits.into_iter();
        let cached = self.lock().get(id).cloned();
        let mut compile = std::time::Duration::ZERO;
        let (prover, first) = match cached {
            Some(prover) => (prover, None),
            None => {
                let first = circuits
                    .next()
                    .ok_or(FilecoinError::Batch(BatchError::Empty))?;
                let start = Instant::now();
                let params = self.params.load_params(id)?;
                timings.load_params = Some(start.elapsed());
                let name = self.params.params_path(id).display().to_string();
                let start = Instant::now();
                let (prover, w) = Compile {
                    params,
                    name: &name,
                }
                .run(first, first_partition)?;
                compile = start.elapsed();
                (Arc::new(prover), Some(w))
            }
        };
        let start = Instant::now();
        let skip = usize::from(first.is_some());
        let rest = circuits
            .collect::<Vec<_>>()
            .into_par_iter()
            .enumerate()
            .map(|(k, c)| {
                let only = WitnessOnly {
                    compiled: prover.compiled(),
                    reuse: None,
                };
                only.run(c, first_partition + skip + k)
            })
            .collect::<Result<Vec<_>, _>>()?;
        timings.synthesis = compile + start.elapsed();
        if first.is_some() {
            self.lock().insert(id.to_string(), prover.clone());
        }
        Ok((prover, first.into_iter().chain(rest).collect()))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<CircuitProver>>> {
        // The map is only read and inserted into: a panic elsewhere cannot leave it torn.
        self.circuits
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
