//! The Groth16 verifier: e(A, B) · e(IC(x), −γ) · e(C, −δ) = e(α, β), as one multi-Miller loop
//! of three pairs and one final exponentiation.

use cuzk_field::{Fr, G1Affine, G2Prepared, multi_miller_loop, pairing};

use crate::keys::{PreparedVerifyingKey, Proof, VerifyingKey};

/// Why a proof was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    #[error("{found} public inputs given, the verifying key expects {expected}")]
    PublicInputCount { expected: usize, found: usize },
    #[error("the pairing check failed: the proof is invalid for these public inputs")]
    InvalidProof,
}

pub fn prepare_verifying_key(vk: &VerifyingKey) -> PreparedVerifyingKey {
    PreparedVerifyingKey {
        vk: vk.clone(),
        alpha_g1_beta_g2: pairing(&vk.alpha_g1, &vk.beta_g2),
        neg_gamma_g2: G2Prepared::from(-vk.gamma_g2),
        neg_delta_g2: G2Prepared::from(-vk.delta_g2),
    }
}

/// `Ok` iff the proof verifies for these public inputs (not including the leading one).
pub fn verify_proof(
    pvk: &PreparedVerifyingKey,
    proof: &Proof,
    public_inputs: &[Fr],
) -> Result<(), VerifyError> {
    let ic = &pvk.vk.ic;
    if ic.len() != public_inputs.len() + 1 {
        return Err(VerifyError::PublicInputCount {
            expected: ic.len().saturating_sub(1),
            found: public_inputs.len(),
        });
    }
    let inputs =
        cuzk_msm::cpu::msm(&ic[1..], public_inputs).map_err(|_| VerifyError::PublicInputCount {
            expected: ic.len() - 1,
            found: public_inputs.len(),
        })?;
    let acc = ic[0].to_projective() + inputs;
    let acc: G1Affine = acc.to_affine();
    let b = G2Prepared::from(proof.b);
    let ml = multi_miller_loop(&[
        (&proof.a, &b),
        (&acc, &pvk.neg_gamma_g2),
        (&proof.c, &pvk.neg_delta_g2),
    ]);
    if ml.final_exponentiation() == pvk.alpha_g1_beta_g2 {
        Ok(())
    } else {
        Err(VerifyError::InvalidProof)
    }
}
