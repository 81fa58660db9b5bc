//! Witness-only synthesis of one circuit in parallel parts.
//!
//! Many circuits are a few shared allocations (a head: commitments, their hash, an id's bits)
//! followed by independent sub-circuits that read them (one per challenge). bellpepper gives
//! no way to synthesize such a circuit's sub-circuits on separate threads unless the circuit
//! itself splits (`is_extensible`/`extend`), and most do not. But any such circuit built with
//! fewer challenges is the same head followed by those challenges' sub-circuits. So the caller
//! builds one circuit per part (the head and one challenge, say), cuzk synthesizes them all
//! on rayon's pool, and joins their assignments, keeping one head per group of parts.
//!
//! The head's size is not told: with `n_g` parts in group `g`, the parts' aux values sum to the
//! compiled circuit's plus `Σ (n_g − 1)` heads, so the size follows (the same for the
//! inputs); a group's parts share a head, so it has aux values. Every part's head must equal
//! its group's first part's, which also checks that size; the prover's evaluation of A·z,
//! B·z, C·z checks the joined witness row by row.

use bellpepper_core::{Circuit, SynthesisError};
use blstrs::Scalar;
use cuzk_field::Fr;
use cuzk_groth16::Witness;
use rayon::prelude::*;

use crate::{BellpepperError, CompiledCircuit, WitnessCs, fr_from_scalar};

/// Why parts could not be joined into the compiled circuit's witness.
#[derive(Debug, thiserror::Error)]
pub enum PartsError {
    #[error("no parts given (or a group with none)")]
    Empty,
    #[error(
        "the parts' {what} ({found}) are not the compiled circuit's ({expected}) plus {repeats} equal, non-empty heads: not parts of this circuit"
    )]
    Sizes {
        what: &'static str,
        found: usize,
        expected: usize,
        repeats: usize,
    },
    #[error(
        "part {part} of group {group} has another head than the group's first part: not parts of one circuit"
    )]
    HeadsDiffer { group: usize, part: usize },
}

/// One part of a circuit's witness: what a part's synthesis would leave in a [`WitnessCs`].
/// A circuit gives it through its gadgets ([`Gadgets`]); a native generator writes the same
/// values directly (see [`crate::native_sha256`]).
pub trait WitnessPart: Send {
    fn write_witness(self, cs: &mut WitnessCs) -> Result<(), SynthesisError>;
}

/// A circuit as a part: its own synthesis.
#[derive(Debug)]
pub struct Gadgets<C>(pub C);

impl<C: Circuit<Scalar> + Send> WitnessPart for Gadgets<C> {
    fn write_witness(self, cs: &mut WitnessCs) -> Result<(), SynthesisError> {
        self.0.synthesize(cs)
    }
}

impl CompiledCircuit {
    /// The witness of this circuit from `groups` of parts, synthesized in parallel: each part
    /// is a circuit that synthesizes its group's head, then its own sub-circuit; the circuit's
    /// own synthesis is every group's head followed by its parts' sub-circuits, groups in
    /// order, parts in order. A single part is the whole circuit.
    pub fn witness_of_parts<P: WitnessPart>(
        &self,
        groups: Vec<Vec<P>>,
    ) -> Result<Witness, BellpepperError> {
        if groups.is_empty() || groups.iter().any(Vec::is_empty) {
            return Err(PartsError::Empty.into());
        }
        // Each part's share of the aux values (its head is small): a part's vector is sized
        // once rather than doubled from empty (a 32 GiB PoRep part holds ~230 MB).
        let share = self.r1cs.num_private() / groups.iter().map(Vec::len).sum::<usize>();
        let systems = groups
            .into_par_iter()
            .map(|group| {
                group
                    .into_par_iter()
                    .map(|part| {
                        let mut cs = WitnessCs::with_capacity(0, share + share / 64);
                        part.write_witness(&mut cs)?;
                        Ok(cs)
                    })
                    .collect::<Result<Vec<_>, BellpepperError>>()
            })
            .collect::<Result<Vec<_>, _>>()?;
        self.join(systems)
    }

    /// Takes the parts, so that each is dropped once its values are copied: with many parts
    /// the host holds little more than the witness and one part (a whole circuit's one part
    /// is held twice until copied, as in `witness`).
    fn join(&self, systems: Vec<Vec<WitnessCs>>) -> Result<Witness, BellpepperError> {
        let (inputs, aux) = (self.r1cs.num_public(), self.r1cs.num_private());
        let repeats: usize = systems.iter().map(|g| g.len() - 1).sum();
        let all = || systems.iter().flatten();
        // Each part's inputs start with its own one.
        let head_inputs = head_size(
            "inputs",
            all().map(|cs| cs.inputs.len() - 1).sum(),
            inputs,
            repeats,
        )?;
        let found_aux = all().map(|cs| cs.aux.len()).sum();
        let head_aux = head_size("aux values", found_aux, aux, repeats)?;
        // Parts share a group because they share a head: it has aux values, if not inputs.
        if head_aux == 0 && repeats > 0 {
            return Err(PartsError::Sizes {
                what: "aux values",
                found: found_aux,
                expected: aux,
                repeats,
            }
            .into());
        }

        for (group, parts) in systems.iter().enumerate() {
            let first = &parts[0];
            for (part, cs) in parts.iter().enumerate().skip(1) {
                if cs.inputs.get(1..=head_inputs) != first.inputs.get(1..=head_inputs)
                    || cs.aux.get(..head_aux) != first.aux.get(..head_aux)
                {
                    return Err(PartsError::HeadsDiffer { group, part }.into());
                }
            }
        }
        // A part's own values: all of its group's first part's, the rest after the head.
        let own = |j: usize, head: usize| if j == 0 { 0 } else { head };
        // Filled on every core first, so that the pages are faulted in in parallel too.
        let mut z = Vec::with_capacity(1 + inputs + aux);
        z.par_extend(rayon::iter::repeat_n(Fr::ZERO, 1 + inputs + aux));
        z[0] = Fr::ONE;
        let (public, private) = z[1..].split_at_mut(inputs);
        let mut at = 0;
        for parts in &systems {
            for (j, cs) in parts.iter().enumerate() {
                let values = &cs.inputs[1 + own(j, head_inputs)..];
                for (d, v) in public[at..at + values.len()].iter_mut().zip(values) {
                    *d = fr_from_scalar(v);
                }
                at += values.len();
            }
        }
        // Each part's aux values into its own slice of the witness, on every core (across
        // parts, and within a large one: a 32 GiB PoRep partition's parts are ~230 MB each, a
        // WindowPoSt partition's 23,490 small ones); each part is dropped once copied.
        let mut rest = private;
        let mut copies = Vec::with_capacity(systems.iter().map(Vec::len).sum());
        for parts in systems {
            for (j, cs) in parts.into_iter().enumerate() {
                let skip = own(j, head_aux);
                let (to, tail) = std::mem::take(&mut rest).split_at_mut(cs.aux.len() - skip);
                rest = tail;
                copies.push((cs, skip, to));
            }
        }
        copies.into_par_iter().for_each(|(cs, skip, to)| {
            const CHUNK: usize = 1 << 16;
            to.par_chunks_mut(CHUNK)
                .zip(cs.aux[skip..].par_chunks(CHUNK))
                .for_each(|(to, from)| {
                    for (d, v) in to.iter_mut().zip(from) {
                        *d = fr_from_scalar(v);
                    }
                });
        });
        Ok(Witness::from_assignment(inputs, z)?)
    }
}

/// The head's size from the parts' total `found`, the circuit's `expected` and the number of
/// repeated heads.
fn head_size(
    what: &'static str,
    found: usize,
    expected: usize,
    repeats: usize,
) -> Result<usize, PartsError> {
    let extra = found.checked_sub(expected);
    match (extra, repeats) {
        (Some(0), _) => Ok(0),
        (Some(e), r) if r > 0 && e % r == 0 => Ok(e / r),
        _ => Err(PartsError::Sizes {
            what,
            found,
            expected,
            repeats,
        }),
    }
}
