//! Poseidon's witness without the gadget: the values neptune's `circuit::poseidon_hash`
//! allocates, in its order, computed on field elements.
//!
//! The gadget keeps each state element as an allocated variable or a linear combination, and
//! builds and scales those combinations through every round's matrix product whatever the
//! system; here an element is its value and whether it is allocated. The rounds follow
//! neptune 11's `PoseidonCircuit::hash` (the optimized constants, the sparse matrices of the
//! partial rounds, the domain tag's constant first S-box); the tests check the values against
//! the gadget's.

use bellpepper_core::SynthesisError;
use bellpepper_core::num::AllocatedNum;
use blstrs::Scalar;
use cuzk_field::Fr;
use cuzk_field::blstrs::AsCuzk;
use ff::Field;
use neptune::poseidon::{Arity, PoseidonConstants};

use crate::WitnessCs;

/// A state element: allocated, or a linear combination (its value is all that is kept).
#[derive(Clone, Copy)]
enum Elt {
    Allocated(Scalar),
    Num(Scalar),
}

impl Elt {
    #[inline]
    fn value(self) -> Scalar {
        match self {
            Elt::Allocated(v) | Elt::Num(v) => v,
        }
    }
}

#[inline]
fn alloc(cs: &mut WitnessCs<'_>, v: Scalar) -> Scalar {
    cs.push_aux(v);
    v
}

/// `Elt::ensure_allocated`: a combination becomes a variable.
fn ensure_allocated(cs: &mut WitnessCs<'_>, e: Elt) -> Scalar {
    match e {
        Elt::Allocated(v) => v,
        Elt::Num(v) => alloc(cs, v),
    }
}

/// `quintic_s_box` (`pre` empty) and `quintic_s_box_pre_add`: the input, its square, fourth
/// and fifth powers (the fifth plus `post`), as variables.
fn s_box(cs: &mut WitnessCs<'_>, e: Elt, pre: Option<Scalar>, post: Option<Scalar>) -> Elt {
    let l = ensure_allocated(cs, e);
    let x = l + pre.unwrap_or(Scalar::ZERO);
    let l2 = alloc(cs, x.square());
    let l4 = alloc(cs, l2.square());
    Elt::Allocated(alloc(cs, l4 * x + post.unwrap_or(Scalar::ZERO)))
}

struct Permutation<'a, A: Arity<Scalar>> {
    constants: &'a PoseidonConstants<Scalar, A>,
    elements: Vec<Elt>,
    /// The elements' values for a matrix product, kept between rounds (no allocation per
    /// round).
    values: Vec<Scalar>,
    offset: usize,
    round: usize,
}

impl<'a, A: Arity<Scalar>> Permutation<'a, A> {
    fn keys(&mut self, n: usize) -> &'a [Scalar] {
        let keys = &self.constants.compressed_round_constants[self.offset..self.offset + n];
        self.offset += n;
        keys
    }

    fn full_round(&mut self, cs: &mut WitnessCs<'_>, first: bool, last: bool) {
        let width = self.elements.len();
        let pre = if first { self.keys(width) } else { &[] };
        let post = if first || !last {
            self.keys(width)
        } else {
            &[]
        };
        for i in 0..width {
            let e = self.elements[i];
            self.elements[i] = match (first, i) {
                // The domain tag is a constant: its S-box is computed, not allocated.
                (true, 0) => {
                    let x = e.value() + pre[0];
                    Elt::Num(x.square().square() * x + post[0])
                }
                (true, _) => s_box(cs, e, Some(pre[i]), Some(post[i])),
                _ => s_box(cs, e, None, post.get(i).copied()),
            };
        }
        self.product_mds();
    }

    fn partial_round(&mut self, cs: &mut WitnessCs<'_>) {
        let key = self.keys(1)[0];
        self.elements[0] = s_box(cs, self.elements[0], None, Some(key));
        self.product_mds();
    }

    fn product_mds(&mut self) {
        let c = self.constants;
        let sparse_offset = c.half_full_rounds - 1;
        self.values.clear();
        self.values.extend(self.elements.iter().map(|e| e.value()));
        let values = self.values.as_cuzk();
        if self.round > sparse_offset && self.round < c.half_full_rounds + c.partial_rounds {
            let m = &c.sparse_matrixes[self.round - sparse_offset - 1];
            let first = self.values[0];
            let sum = Fr::sum_of_products(values.iter().zip(m.w_hat.as_cuzk()));
            for (e, v) in self.elements[1..].iter_mut().zip(&m.v_rest) {
                *e = Elt::Num(e.value() + first * v);
            }
            self.elements[0] = Elt::Num(sum.into());
        } else {
            let m = if self.round == sparse_offset {
                &c.pre_sparse_matrix
            } else {
                &c.mds_matrices.m
            };
            // Element j is column j of the matrix against the state.
            for (j, e) in self.elements.iter_mut().enumerate() {
                let column = m.iter().map(|row| &row.as_cuzk()[j]);
                *e = Elt::Num(Fr::sum_of_products(values.iter().zip(column)).into());
            }
        }
        self.round += 1;
    }
}

/// neptune's `circuit::poseidon_hash` of `preimage` (as many elements as the arity): the
/// digest, as the gadget's last variable.
pub fn poseidon_hash<A: Arity<Scalar>>(
    cs: &mut WitnessCs<'_>,
    preimage: &[AllocatedNum<Scalar>],
    constants: &PoseidonConstants<Scalar, A>,
) -> Result<AllocatedNum<Scalar>, SynthesisError> {
    if preimage.len() != A::to_usize() {
        return Err(SynthesisError::MalformedProofs(format!(
            "Poseidon of arity {} over {} elements",
            A::to_usize(),
            preimage.len()
        )));
    }
    let mut elements = Vec::with_capacity(preimage.len() + 1);
    elements.push(Elt::Num(constants.domain_tag));
    for p in preimage {
        elements.push(Elt::Allocated(
            p.get_value().ok_or(SynthesisError::AssignmentMissing)?,
        ));
    }
    let mut p = Permutation {
        constants,
        values: Vec::with_capacity(elements.len()),
        elements,
        offset: 0,
        round: 0,
    };
    let half = constants.full_rounds / 2;
    p.full_round(cs, true, false);
    for _ in 1..half {
        p.full_round(cs, false, false);
    }
    for _ in 0..constants.partial_rounds {
        p.partial_round(cs);
    }
    for _ in 0..half - 1 {
        p.full_round(cs, false, false);
    }
    p.full_round(cs, false, true);
    let digest = p.elements[1].value();
    match p.elements[1] {
        Elt::Allocated(_) => Err(SynthesisError::Unsatisfiable),
        Elt::Num(_) => AllocatedNum::alloc(cs, || Ok(digest)),
    }
}

#[cfg(test)]
mod tests;
