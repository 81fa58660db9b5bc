//! How one partition's circuit is synthesized: fully, compiling it with its parameters, or
//! its witness only, with the circuit compiled before. Each proof kind builds its circuit and
//! hands it to a [`Synth`].

use bellperson::Circuit;
use blstrs::Scalar;
use cuzk_bellpepper::CompiledCircuit;
use cuzk_bellpepper::batch::{BatchError, CircuitProver};
use cuzk_formats::BpParameters;
use cuzk_groth16::Witness;

use crate::FilecoinError;

/// How to synthesize one partition's circuit: fully, compiling it with its parameters
/// ([`Compile`]), or its witness only, with the circuit compiled before.
pub(crate) trait Synth {
    type Out;
    fn run<C: Circuit<Scalar>>(
        self,
        circuit: C,
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
    fn run<C: Circuit<Scalar>>(
        self,
        circuit: C,
        partition: usize,
    ) -> Result<Self::Out, FilecoinError> {
        CircuitProver::compile(circuit, self.params, self.name)
            .map_err(|e| partition_error(e, partition))
    }
    fn witness(out: &Self::Out) -> &Witness {
        &out.1
    }
}

impl Synth for &CompiledCircuit {
    type Out = Witness;
    fn run<C: Circuit<Scalar>>(
        self,
        circuit: C,
        partition: usize,
    ) -> Result<Witness, FilecoinError> {
        self.witness(circuit).map_err(|source| {
            partition_error(BatchError::Synthesis { index: 0, source }, partition)
        })
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
