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

use std::sync::{Arc, Mutex, PoisonError};

use bellpepper_core::{Circuit, SynthesisError};
use blstrs::Scalar;
use cuzk_field::Fr;
use cuzk_field::blstrs::AsBlstrsMut;
use cuzk_groth16::{Witness, WitnessBuffer};
use rayon::prelude::*;

use crate::{Aux, BellpepperError, CompiledCircuit, WitnessCs, fr_from_scalar};

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
    fn write_witness(self, cs: &mut WitnessCs<'_>) -> Result<(), SynthesisError>;
}

/// A circuit as a part: its own synthesis.
#[derive(Debug)]
pub struct Gadgets<C>(pub C);

impl<C: Circuit<Scalar> + Send> WitnessPart for Gadgets<C> {
    fn write_witness(self, cs: &mut WitnessCs<'_>) -> Result<(), SynthesisError> {
        self.0.synthesize(cs)
    }
}

impl CompiledCircuit {
    /// The witness of this circuit from `groups` of parts, synthesized in parallel: each part
    /// is a circuit that synthesizes its group's head, then its own sub-circuit; the circuit's
    /// own synthesis is every group's head followed by its parts' sub-circuits, groups in
    /// order, parts in order. A single part is the whole circuit.
    ///
    /// The parts' sizes are kept: the next call with as many groups of as many parts writes
    /// its parts in place (see `witness_in_place`), into `reuse` if given (a finished witness
    /// of this circuit), else into fresh memory.
    pub fn witness_of_parts<P: WitnessPart>(
        &self,
        groups: Vec<Vec<P>>,
        reuse: Option<WitnessBuffer>,
    ) -> Result<Witness, BellpepperError> {
        if groups.is_empty() || groups.iter().any(Vec::is_empty) {
            return Err(PartsError::Empty.into());
        }
        let kept = self
            .parts_layout
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if let Some(layout) = kept.filter(|l| l.fits(&groups)) {
            return self.witness_in_place(&layout, groups, reuse);
        }
        // Each part's share of the aux values (its head is small): a part's vector is sized
        // once rather than doubled from empty.
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
        self.join_and_keep_layout(systems)
    }

    fn join_and_keep_layout(
        &self,
        systems: Vec<Vec<WitnessCs<'_>>>,
    ) -> Result<Witness, BellpepperError> {
        let sizes = systems
            .iter()
            .map(|g| g.iter().map(|cs| cs.aux.len()).collect())
            .collect();
        let (witness, head) = self.join(systems)?;
        *self
            .parts_layout
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(Arc::new(PartsLayout { sizes, head }));
        Ok(witness)
    }

    /// `witness_of_parts` in a kept layout. Each group's first part writes its values straight
    /// into its slot of the witness; each later part copies its own values into theirs once
    /// done (and keeps its head, to check). So no part's vector outlives its part and nothing
    /// is copied after: a 32 GiB PoRep partition's ~250 sections fault in and copy no vectors
    /// of their own (4.2 GB). Parts of other sizes than the kept ones (the circuit split
    /// another way) are joined as in the first call.
    ///
    /// A witness returned from here has had every entry written: the slots tile the aux
    /// values, each part fills its slot or is a misfit (and misfits are joined into fresh
    /// memory), and the parts' inputs tile the public ones. So `reuse`'s stale values are
    /// never read and need no zeroing.
    fn witness_in_place<P: WitnessPart>(
        &self,
        layout: &PartsLayout,
        groups: Vec<Vec<P>>,
        reuse: Option<WitnessBuffer>,
    ) -> Result<Witness, BellpepperError> {
        let inputs = self.r1cs.num_public();
        let len = 1 + inputs + self.r1cs.num_private();
        let mut z = reuse
            .and_then(|b| b.into_stale(len))
            .unwrap_or_else(|| zeroed(len));
        z[0] = Fr::ONE;
        let (public, private) = z[1..].split_at_mut(inputs);
        let mut rest = private.as_blstrs_mut();
        let mut slots = Vec::with_capacity(layout.sizes.iter().map(Vec::len).sum());
        for (parts, sizes) in groups.into_iter().zip(&layout.sizes) {
            for (j, (part, &size)) in parts.into_iter().zip(sizes).enumerate() {
                let own = size - own(j, layout.head);
                let (to, tail) = std::mem::take(&mut rest).split_at_mut(own);
                rest = tail;
                slots.push((j, part, size, to));
            }
        }
        let written = slots
            .into_par_iter()
            .map(|(j, part, size, to)| {
                if j == 0 {
                    let mut cs = WitnessCs::in_slot(to);
                    part.write_witness(&mut cs)?;
                    let written = match cs.aux {
                        Aux::InSlot { slot, len } if len == slot.len() => Written::InSlot(slot),
                        aux => Written::Misfit(aux.into_vec()),
                    };
                    return Ok((cs.inputs, written));
                }
                let mut cs = WitnessCs::with_capacity(0, size);
                part.write_witness(&mut cs)?;
                let mut values = cs.aux.into_vec();
                if values.len() != size {
                    return Ok((cs.inputs, Written::Misfit(values)));
                }
                to.copy_from_slice(&values[layout.head..]);
                values.truncate(layout.head);
                values.shrink_to_fit();
                Ok((cs.inputs, Written::Copied { head: values, to }))
            })
            .collect::<Result<Vec<_>, BellpepperError>>()?;

        let mut written = written.into_iter();
        let mut parts: Vec<Vec<_>> = layout
            .sizes
            .iter()
            .map(|g| written.by_ref().take(g.len()).collect())
            .collect();
        if parts
            .iter()
            .flatten()
            .any(|(_, w)| matches!(w, Written::Misfit(_)))
        {
            let systems = parts
                .into_iter()
                .map(|g| {
                    g.into_iter()
                        .map(|(inputs, w)| WitnessCs::of_values(inputs, Aux::Owned(w.into_vec())))
                        .collect()
                })
                .collect();
            return self.join_and_keep_layout(systems);
        }
        let parts_inputs = || parts.iter().map(|g| g.iter().map(|(i, _)| &i[..]));
        let head_inputs = self.head_inputs(parts_inputs())?;
        check_heads(
            parts
                .iter()
                .map(|g| g.iter().map(|(i, w)| (&i[..], w.head(layout.head)))),
            head_inputs,
            layout.head,
        )?;
        copy_inputs(public, parts_inputs(), head_inputs);
        parts.clear();
        Ok(Witness::from_assignment(inputs, z)?)
    }

    /// Takes the parts, so that each is dropped once its values are copied: with many parts
    /// the host holds little more than the witness and one part (a whole circuit's one part
    /// is held twice until copied, as in `witness`). Returns the head's aux values with it.
    fn join(&self, systems: Vec<Vec<WitnessCs<'_>>>) -> Result<(Witness, usize), BellpepperError> {
        let (inputs, aux) = (self.r1cs.num_public(), self.r1cs.num_private());
        let repeats: usize = systems.iter().map(|g| g.len() - 1).sum();
        let parts_inputs = || systems.iter().map(|g| g.iter().map(|cs| &cs.inputs[..]));
        let head_inputs = self.head_inputs(parts_inputs())?;
        let found_aux = systems.iter().flatten().map(|cs| cs.aux.len()).sum();
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
        check_heads(
            systems
                .iter()
                .map(|g| g.iter().map(|cs| (&cs.inputs[..], cs.aux.values()))),
            head_inputs,
            head_aux,
        )?;
        let mut z = zeroed(1 + inputs + aux);
        z[0] = Fr::ONE;
        let (public, private) = z[1..].split_at_mut(inputs);
        copy_inputs(public, parts_inputs(), head_inputs);
        // Each part's aux values into its own slice of the witness, on every core (across
        // parts, and within a large one); each part is dropped once copied.
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
                .zip(cs.aux.values()[skip..].par_chunks(CHUNK))
                .for_each(|(to, from)| {
                    for (d, v) in to.iter_mut().zip(from) {
                        *d = fr_from_scalar(v);
                    }
                });
        });
        Ok((Witness::from_assignment(inputs, z)?, head_aux))
    }

    /// The head's inputs, from every part's inputs (each starting with its own one).
    fn head_inputs<'s, G: Iterator<Item = &'s [Scalar]>>(
        &self,
        groups: impl Iterator<Item = G>,
    ) -> Result<usize, PartsError> {
        let (mut found, mut repeats) = (0, 0);
        for group in groups {
            for (j, inputs) in group.enumerate() {
                found += inputs.len() - 1;
                repeats += usize::from(j > 0);
            }
        }
        head_size("inputs", found, self.r1cs.num_public(), repeats)
    }
}

/// The sizes of a circuit's parts from a join, kept for the next: a part's size follows from
/// the circuit's shape and how the caller splits it, never from the values, so the next
/// witness of as many groups of as many parts is written in place.
#[derive(Debug)]
pub(crate) struct PartsLayout {
    /// Each part's aux values, group by group.
    sizes: Vec<Vec<usize>>,
    /// A head's aux values, which a group's later parts repeat.
    head: usize,
}

impl PartsLayout {
    fn fits<P>(&self, groups: &[Vec<P>]) -> bool {
        self.sizes.len() == groups.len()
            && self
                .sizes
                .iter()
                .zip(groups)
                .all(|(s, g)| s.len() == g.len())
    }
}

/// A compiled circuit's kept layout, shared by its clones.
pub(crate) type KeptLayout = Arc<Mutex<Option<Arc<PartsLayout>>>>;

/// Where a part's values went in `witness_in_place`.
enum Written<'a> {
    /// A group's first part: all its values, in its slot.
    InSlot(&'a mut [Scalar]),
    /// A later part: its own values copied into place, its head kept to check.
    Copied {
        head: Vec<Scalar>,
        to: &'a mut [Scalar],
    },
    /// A part not of its kept size: all its values, to join by copying.
    Misfit(Vec<Scalar>),
}

impl Written<'_> {
    /// The part's first `n` aux values (its group's head), where it has them.
    fn head(&self, n: usize) -> &[Scalar] {
        match self {
            Self::InSlot(slot) => &slot[..n],
            Self::Copied { head, .. } => head,
            Self::Misfit(values) => &values[..n.min(values.len())],
        }
    }

    fn into_vec(self) -> Vec<Scalar> {
        match self {
            Self::InSlot(slot) => slot.to_vec(),
            Self::Copied { mut head, to } => {
                head.extend_from_slice(to);
                head
            }
            Self::Misfit(values) => values,
        }
    }
}

/// How many of part `j`'s leading values are its group's head, which only the first keeps.
fn own(j: usize, head: usize) -> usize {
    if j == 0 { 0 } else { head }
}

/// Every part of a group has its group's first part's head: the same first `head_inputs`
/// inputs (after the one) and `head_aux` aux values. Each part is given as its inputs and its
/// aux values (at least its head's).
fn check_heads<'s, G: Iterator<Item = (&'s [Scalar], &'s [Scalar])>>(
    groups: impl Iterator<Item = G>,
    head_inputs: usize,
    head_aux: usize,
) -> Result<(), PartsError> {
    for (group, mut parts) in groups.enumerate() {
        let Some(first) = parts.next() else { continue };
        for (part, (inputs, aux)) in parts.enumerate() {
            if inputs.get(1..=head_inputs) != first.0.get(1..=head_inputs)
                || aux.get(..head_aux) != first.1.get(..head_aux)
            {
                return Err(PartsError::HeadsDiffer {
                    group,
                    part: part + 1,
                });
            }
        }
    }
    Ok(())
}

/// The parts' inputs into the witness's, each group's head once.
fn copy_inputs<'s, G: Iterator<Item = &'s [Scalar]>>(
    public: &mut [Fr],
    groups: impl Iterator<Item = G>,
    head_inputs: usize,
) {
    let mut at = 0;
    for group in groups {
        for (j, inputs) in group.enumerate() {
            let values = &inputs[1 + own(j, head_inputs)..];
            for (d, v) in public[at..at + values.len()].iter_mut().zip(values) {
                *d = fr_from_scalar(v);
            }
            at += values.len();
        }
    }
}

/// `n` zeros, written on every core so that the pages are faulted in in parallel too.
fn zeroed(n: usize) -> Vec<Fr> {
    let mut z = Vec::with_capacity(n);
    z.par_extend(rayon::iter::repeat_n(Fr::ZERO, n));
    z
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

#[cfg(test)]
mod tests;
