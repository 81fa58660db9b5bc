//! Proving key, verifying key, prepared verifying key and proof (arkworks layout).

use cuzk_field::{DecodeError, G1Affine, G2Affine, G2Prepared, Gt};

/// What a verifier needs: `e(A, B) = e(α, β) · e(Σ x_i·ic_i, γ) · e(C, δ)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyingKey {
    pub alpha_g1: G1Affine,
    pub beta_g2: G2Affine,
    pub gamma_g2: G2Affine,
    pub delta_g2: G2Affine,
    /// `(β·u_i(τ) + α·v_i(τ) + w_i(τ)) / γ · G1` for the one and each public input
    /// (`num_public + 1` points).
    pub ic: Vec<G1Affine>,
}

impl VerifyingKey {
    pub fn num_public(&self) -> usize {
        self.ic.len().saturating_sub(1)
    }
}

/// Everything the prover needs besides the circuit and the witness.
///
/// Every query is indexed like the assignment it is multiplied with, identity points included
/// (a variable that never appears in A has the identity as its `a_query` entry): no density
/// bitmaps, so CPU and GPU MSMs read the witness slices directly, and the sparse-aware MSM
/// skips the zero terms.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProvingKey {
    pub vk: VerifyingKey,
    pub beta_g1: G1Affine,
    pub delta_g1: G1Affine,
    /// `u_i(τ) · G1` for every variable (`num_variables` points).
    pub a_query: Vec<G1Affine>,
    /// `v_i(τ) · G1` for every variable.
    pub b_g1_query: Vec<G1Affine>,
    /// `v_i(τ) · G2` for every variable.
    pub b_g2_query: Vec<G2Affine>,
    /// `τ^i · Z(τ) / δ · G1` for `i < n − 1` (H has degree at most n − 2).
    pub h_query: Vec<G1Affine>,
    /// `(β·u_i(τ) + α·v_i(τ) + w_i(τ)) / δ · G1` for each private variable.
    pub l_query: Vec<G1Affine>,
    /// `Some` for a key whose query points only the GPU backend that made it holds (in device
    /// memory, or in page-locked host memory it streams from): the five vectors above are
    /// then empty.
    pub held: Option<DeviceHeld>,
}

/// The shape of a key held by a device ([`crate::GpuBackend::generate_key`]): a key too large
/// for host memory beside its circuit (a 2^27 key is 72 GiB) never has a host copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceHeld {
    /// Tells this key's device points from every other key's in the process.
    pub token: u64,
    pub num_variables: usize,
    pub num_private: usize,
    pub domain_size: usize,
}

impl ProvingKey {
    pub fn num_variables(&self) -> usize {
        self.held.map_or(self.a_query.len(), |h| h.num_variables)
    }

    /// How many points `q` has, on the host or held by a device.
    pub fn query_len(&self, q: crate::Query) -> usize {
        use crate::Query;
        match (self.held, q) {
            (Some(h), Query::A | Query::BG1 | Query::BG2) => h.num_variables,
            (Some(h), Query::H) => h.domain_size - 1,
            (Some(h), Query::L) => h.num_private,
            (None, Query::A) => self.a_query.len(),
            (None, Query::BG1) => self.b_g1_query.len(),
            (None, Query::BG2) => self.b_g2_query.len(),
            (None, Query::H) => self.h_query.len(),
            (None, Query::L) => self.l_query.len(),
        }
    }

    pub fn num_public(&self) -> usize {
        self.vk.num_public()
    }

    /// The QAP domain size n the key was made for.
    pub fn domain_size(&self) -> usize {
        self.held.map_or(self.h_query.len() + 1, |h| h.domain_size)
    }
}

/// A verifying key with `e(α, β)` computed and `−γ`, `−δ` prepared for the Miller loop.
#[derive(Clone, Debug)]
pub struct PreparedVerifyingKey {
    pub vk: VerifyingKey,
    pub alpha_g1_beta_g2: Gt,
    pub neg_gamma_g2: G2Prepared,
    pub neg_delta_g2: G2Prepared,
}

/// A Groth16 proof: `A ∈ G1`, `B ∈ G2`, `C ∈ G1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Proof {
    pub a: G1Affine,
    pub b: G2Affine,
    pub c: G1Affine,
}

impl Proof {
    /// Compressed size: A (48) ‖ B (96) ‖ C (48).
    pub const BYTES: usize = 192;

    /// The compressed zcash encoding of A, B, C, concatenated (the bellperson layout).
    pub fn to_bytes(&self) -> [u8; Self::BYTES] {
        let mut out = [0u8; Self::BYTES];
        out[..48].copy_from_slice(&self.a.to_compressed());
        out[48..144].copy_from_slice(&self.b.to_compressed());
        out[144..].copy_from_slice(&self.c.to_compressed());
        out
    }

    /// Decodes and fully checks (canonical, on curve, in subgroup) each point.
    pub fn from_bytes(bytes: &[u8; Self::BYTES]) -> Result<Self, DecodeError> {
        let g1 = |b: &[u8]| G1Affine::from_compressed(b.try_into().expect("48 bytes"));
        Ok(Self {
            a: g1(&bytes[..48])?,
            b: G2Affine::from_compressed(bytes[48..144].try_into().expect("96 bytes"))?,
            c: g1(&bytes[144..])?,
        })
    }
}
