//! A real gadget circuit for tests, benches and the example: SHA-256 (bellpepper's gadget) of
//! `count` 64-byte messages, each digest packed into public inputs.

use bellpepper::gadgets::{multipack, sha256::sha256};
use bellpepper_core::boolean::{AllocatedBit, Boolean};
use bellpepper_core::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::Scalar;

/// `messages[i]` is hashed; with `None` values (parameter generation) the bits are unknown.
#[derive(Clone, Debug)]
pub struct Sha256Circuit {
    pub messages: Vec<Option<[u8; 64]>>,
}

impl Sha256Circuit {
    /// `count` distinct messages derived from `seed`.
    pub fn new(count: usize, seed: u8) -> Self {
        let messages = (0..count)
            .map(|i| {
                let mut m = [0u8; 64];
                for (j, b) in m.iter_mut().enumerate() {
                    *b = (i as u8).wrapping_mul(31) ^ (j as u8).wrapping_mul(7) ^ seed;
                }
                Some(m)
            })
            .collect();
        Self { messages }
    }

    /// The same shape with no values (for parameter generation).
    pub fn blank(count: usize) -> Self {
        Self {
            messages: vec![None; count],
        }
    }

    /// The public inputs bellperson's verifier takes: each digest, packed as
    /// `multipack::pack_into_inputs` packs it.
    pub fn public_inputs(&self) -> Vec<Scalar> {
        use sha2::Digest as _;
        let mut out = Vec::new();
        for m in self.messages.iter().flatten() {
            let d = sha2::Sha256::digest(m);
            let bits = multipack::bytes_to_bits(&d);
            out.extend(multipack::compute_multipacking::<Scalar>(&bits));
        }
        out
    }
}

impl Circuit<Scalar> for Sha256Circuit {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        for (i, m) in self.messages.iter().enumerate() {
            let mut cs = cs.namespace(|| format!("message {i}"));
            let bits: Vec<bool> = match m {
                Some(m) => multipack::bytes_to_bits(m),
                None => vec![false; 512],
            };
            let input = bits
                .iter()
                .enumerate()
                .map(|(j, b)| {
                    let v = m.map(|_| *b);
                    AllocatedBit::alloc(cs.namespace(|| format!("bit {j}")), v).map(Boolean::from)
                })
                .collect::<Result<Vec<_>, _>>()?;
            let digest = sha256(cs.namespace(|| "sha256"), &input)?;
            multipack::pack_into_inputs(cs.namespace(|| "digest"), &digest)?;
        }
        Ok(())
    }
}
