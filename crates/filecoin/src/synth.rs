//! How one partition's circuit is synthesized: fully, compiling it with its parameters, or
//! its witness only, with the circuit compiled before. Each proof kind builds its circuit as a
//! [`PartitionCircuit`] and hands it to a [`Synth`], which asks for it whole (to compile it)
//! or in parts (for a witness-only synthesis on every core: about one part per challenge).

use bellperson::Circuit;
use blstrs::Scalar;
use cuzk_bellpepper::batch::{BatchError, CircuitProver};
use cuzk_bellpepper::{BellpepperError, CompiledCircuit, WitnessPart};
use cuzk_formats::BpParameters;
use cuzk_groth16::{Witness, WitnessBuffer};

use crate::FilecoinError;

/// One partition's circuit, built whole or as groups of parts in the circuit's order (see
/// `CompiledCircuit::witness_of_parts`), each part a native generator of its values: its
/// group's head (the allocations its challenges share) and one challenge (PoSt), or a section
/// of the circuit that is a group of its own (SnapDeals, whose head is too large to repeat;
/// PoRep, whose challenges are too large to balance 16 cores).
pub(crate) trait PartitionCircuit: Sized {
    type Circuit: Circuit<Scalar> + Send;
    type Part: WitnessPart;
    fn whole(self) -> Result<Self::Circuit, FilecoinError>;
    fn parts(self) -> Result<Vec<Vec<Self::Part>>, FilecoinError>;

    /// The circuit's system and this instance's witness (partition `partition`'s): a full
    /// synthesis of the whole circuit, unless the circuit replicates its system from one head
    /// and sub-circuit (`CompiledCircuit::replicate`).
    fn compile(self, partition: usize) -> Result<(CompiledCircuit, Witness), FilecoinError> {
        CompiledCircuit::compile(self.whole()?).map_err(synthesis_error(partition))
    }
}

/// A synthesis error of partition `partition`.
pub(crate) fn synthesis_error(partition: usize) -> impl Fn(BellpepperError) -> FilecoinError {
    move |source| partition_error(BatchError::Synthesis { index: 0, source }, partition)
}

/// How to synthesize one partition's circuit: fully, compiling it with its parameters
/// ([`Compile`]), or its witness only, in parts, with the circuit compiled before
/// ([`WitnessOnly`]).
pub(crate) trait Synth {
    type Out;
    fn run<P: PartitionCircuit>(
        self,
        circuit: P,
        partition: usize,
    ) -> Result<Self::Out, FilecoinError>;
    fn witness(out: &Self::Out) -> &Witness;
}

pub(crate) struct Compile<'a> {
    pub(crate) params: BpParameters,
    pub(crate) name: &'a str,
}

impl Synth for Compile<'_> {
    type Out = (CircuitProver, Witness);
    fn run<P: PartitionCircuit>(
        self,
        circuit: P,
        partition: usize,
    ) -> Result<Self::Out, FilecoinError> {
        let (compiled, witness) = CompileCircuit.run(circuit, partition)?;
        let prover = CircuitProver::new(compiled, self.params, self.name)
            .map_err(|e| partition_error(e, partition))?;
        Ok((prover, witness))
    }
    fn witness(out: &Self::Out) -> &Witness {
        &out.1
    }
}

/// A full synthesis that keeps the circuit, for a prover whose key comes from elsewhere.
pub(crate) struct CompileCircuit;

impl Synth for CompileCircuit {
    type Out = (CompiledCircuit, Witness);
    fn run<P: PartitionCircuit>(
        self,
        circuit: P,
        partition: usize,
    ) -> Result<Self::Out, FilecoinError> {
        circuit.compile(partition)
    }
    fn witness(out: &Self::Out) -> &Witness {
        &out.1
    }
}

/// A witness-only synthesis in parts with the circuit compiled before, into a finished
/// witness's storage if one is given.
pub(crate) struct WitnessOnly<'a> {
    pub(crate) compiled: &'a CompiledCircuit,
    pub(crate) reuse: Option<WitnessBuffer>,
}

impl Synth for WitnessOnly<'_> {
    type Out = Witness;
    fn run<P: PartitionCircuit>(
        self,
        circuit: P,
        partition: usize,
    ) -> Result<Witness, FilecoinError> {
        self.compiled
            .witness_of_parts(circuit.parts()?, self.reuse)
            .map_err(synthesis_error(partition))
    }
    fn witness(out: &Witness) -> &Witness {
        out
    }
}

/// A batch error that names a circuit names a partition (the batch's first is `first`).
pub(crate) fn partition_error(e: BatchError, first: usize) -> FilecoinError {
    match e {
        BatchError::Synthesis { index, .. } | BatchError::Prove { index, .. } => {
            FilecoinError::Partition {
                partition: first + index,
                source: Box::new(e),
            }
        }
        other => FilecoinError::Batch(other),
    }
}
