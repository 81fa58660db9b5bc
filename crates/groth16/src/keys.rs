//! Proving key, verifying key, prepared verifying key and proof (arkworks layout).

use std::sync::atomic::{AtomicU64, Ordering};

use core::fmt;

use cuzk_field::{DecodeError, G1Affine, G2Affine, G2Prepared, Gt};

/// Which proving-key query an MSM runs over, so a backend can keep each query's points
/// resident on a device between proofs. `BG2` is the G2 query; the rest are G1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Query {
    A,
    BG1,
    BG2,
    H,
    L,
}

impl Query {
    pub const ALL: [Query; 5] = [Query::A, Query::BG1, Query::BG2, Query::H, Query::L];

    /// The group of the query's points.
    pub fn group(self) -> cuzk_msm::Group {
        match self {
            Query::BG2 => cuzk_msm::Group::G2,
            _ => cuzk_msm::Group::G1,
        }
    }

    /// The name of the MSM's timing span.
    pub fn span(self) -> &'static str {
        match self {
            Query::A => "msm_a",
            Query::BG1 => "msm_b_g1",
            Query::BG2 => "msm_b_g2",
            Query::H => "msm_h",
            Query::L => "msm_l",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Query::A => "A",
            Query::BG1 => "B (G1)",
            Query::BG2 => "B (G2)",
            Query::H => "H",
            Query::L => "L",
        }
    }
}

impl fmt::Display for Query {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

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

/// Tells one key's points from every other key's in the process, so a backend keeps a copy of
/// them (resident on a device) only while it proves that key. Assigned when a key is made or
/// loaded and never forged: a [`ProvingKey`] whose points may have changed (a clone, or
/// [`ProvingKey::queries_mut`]) gets a new one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KeyIdentity(u64);

impl KeyIdentity {
    fn next() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Self(NEXT.fetch_add(1, Ordering::Relaxed))
    }
}

/// The query points of a proving key.
///
/// Every query is indexed like the assignment it is multiplied with, identity points included
/// (a variable that never appears in A has the identity as its `a_query` entry): no density
/// bitmaps, so CPU and GPU MSMs read the witness slices directly, and the sparse-aware MSM
/// skips the zero terms.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeyQueries {
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
}

/// Everything the prover needs besides the circuit and the witness, its points on the host.
/// A key whose points only a device holds is a [`HeldKey`].
///
/// The queries are reached through accessors so that the key's [`KeyIdentity`] always names
/// these points: a clone, or a key whose queries were handed out mutably, is another key.
/// Equality compares the contents.
#[derive(Debug)]
pub struct ProvingKey {
    pub vk: VerifyingKey,
    pub beta_g1: G1Affine,
    pub delta_g1: G1Affine,
    queries: KeyQueries,
    identity: KeyIdentity,
}

impl Clone for ProvingKey {
    fn clone(&self) -> Self {
        Self::new(
            self.vk.clone(),
            self.beta_g1,
            self.delta_g1,
            self.queries.clone(),
        )
    }
}

impl PartialEq for ProvingKey {
    fn eq(&self, other: &Self) -> bool {
        (&self.vk, self.beta_g1, self.delta_g1, &self.queries)
            == (&other.vk, other.beta_g1, other.delta_g1, &other.queries)
    }
}

impl Eq for ProvingKey {}

impl ProvingKey {
    pub fn new(
        vk: VerifyingKey,
        beta_g1: G1Affine,
        delta_g1: G1Affine,
        queries: KeyQueries,
    ) -> Self {
        Self {
            vk,
            beta_g1,
            delta_g1,
            queries,
            identity: KeyIdentity::next(),
        }
    }

    pub fn queries(&self) -> &KeyQueries {
        &self.queries
    }

    /// The queries to change; the key becomes another key (a new [`KeyIdentity`]), so no
    /// backend proves it with points it copied before.
    pub fn queries_mut(&mut self) -> &mut KeyQueries {
        self.identity = KeyIdentity::next();
        &mut self.queries
    }

    pub fn a_query(&self) -> &[G1Affine] {
        &self.queries.a_query
    }

    pub fn b_g1_query(&self) -> &[G1Affine] {
        &self.queries.b_g1_query
    }

    pub fn b_g2_query(&self) -> &[G2Affine] {
        &self.queries.b_g2_query
    }

    pub fn h_query(&self) -> &[G1Affine] {
        &self.queries.h_query
    }

    pub fn l_query(&self) -> &[G1Affine] {
        &self.queries.l_query
    }

    pub fn identity(&self) -> KeyIdentity {
        self.identity
    }

    pub fn num_variables(&self) -> usize {
        self.queries.a_query.len()
    }

    /// How many points `q` has.
    pub fn query_len(&self, q: Query) -> usize {
        let k = &self.queries;
        match q {
            Query::A => k.a_query.len(),
            Query::BG1 => k.b_g1_query.len(),
            Query::BG2 => k.b_g2_query.len(),
            Query::H => k.h_query.len(),
            Query::L => k.l_query.len(),
        }
    }

    pub fn num_public(&self) -> usize {
        self.vk.num_public()
    }

    /// The QAP domain size n the key was made for.
    pub fn domain_size(&self) -> usize {
        self.queries.h_query.len() + 1
    }
}

/// A proving key whose query points only the GPU backend that made it holds, in device memory
/// or in page-locked host memory it streams from
/// ([`GpuBackend::generate_key`](crate::GpuBackend::generate_key)): a key too large for host
/// memory beside its circuit (a 2^27 key is 72 GiB) never has a host copy. It has the
/// verifying key, the single points and the shape; only a backend holding its points (by its
/// [`KeyIdentity`]) proves it, and nothing can write it to a file.
#[derive(Debug)]
pub struct HeldKey {
    pub vk: VerifyingKey,
    pub beta_g1: G1Affine,
    pub delta_g1: G1Affine,
    num_variables: usize,
    num_private: usize,
    domain_size: usize,
    identity: KeyIdentity,
}

impl HeldKey {
    /// The key of points just placed on a device: `num_variables` and `num_private` are the
    /// circuit's, `domain_size` its QAP domain's.
    pub(crate) fn new(
        vk: VerifyingKey,
        beta_g1: G1Affine,
        delta_g1: G1Affine,
        num_variables: usize,
        num_private: usize,
        domain_size: usize,
    ) -> Self {
        Self {
            vk,
            beta_g1,
            delta_g1,
            num_variables,
            num_private,
            domain_size,
            identity: KeyIdentity::next(),
        }
    }

    pub fn identity(&self) -> KeyIdentity {
        self.identity
    }

    /// How many points `q` has on the device.
    pub fn query_len(&self, q: Query) -> usize {
        match q {
            Query::A | Query::BG1 | Query::BG2 => self.num_variables,
            Query::H => self.domain_size - 1,
            Query::L => self.num_private,
        }
    }
}

/// A proving key as the prover's phases take it: its points on the host, or held by a device.
/// Every backend proves a host key; a held key only on the backend that holds it
/// ([`KeyRef::host`] is where the others refuse it).
#[derive(Debug, Clone, Copy)]
pub enum KeyRef<'a> {
    Host(&'a ProvingKey),
    Held(&'a HeldKey),
}

impl<'a> From<&'a ProvingKey> for KeyRef<'a> {
    fn from(pk: &'a ProvingKey) -> Self {
        Self::Host(pk)
    }
}

impl<'a> From<&'a HeldKey> for KeyRef<'a> {
    fn from(k: &'a HeldKey) -> Self {
        Self::Held(k)
    }
}

impl<'a> KeyRef<'a> {
    pub fn identity(self) -> KeyIdentity {
        match self {
            Self::Host(pk) => pk.identity,
            Self::Held(k) => k.identity,
        }
    }

    pub fn vk(self) -> &'a VerifyingKey {
        match self {
            Self::Host(pk) => &pk.vk,
            Self::Held(k) => &k.vk,
        }
    }

    pub fn beta_g1(self) -> G1Affine {
        match self {
            Self::Host(pk) => pk.beta_g1,
            Self::Held(k) => k.beta_g1,
        }
    }

    pub fn delta_g1(self) -> G1Affine {
        match self {
            Self::Host(pk) => pk.delta_g1,
            Self::Held(k) => k.delta_g1,
        }
    }

    pub fn query_len(self, q: Query) -> usize {
        match self {
            Self::Host(pk) => pk.query_len(q),
            Self::Held(k) => k.query_len(q),
        }
    }

    pub fn num_variables(self) -> usize {
        self.query_len(Query::A)
    }

    pub fn domain_size(self) -> usize {
        self.query_len(Query::H) + 1
    }

    pub fn is_held(self) -> bool {
        matches!(self, Self::Held(_))
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

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;
    use crate::Fr;
    use crate::testing::{SimBackend, demo};
    use crate::{
        BackendErrorKind, CpuBackend, ProveError, ProverBackend, create_proof_with_backend,
    };

    /// A held key reaches a backend without its points only through [`KeyRef`], and every
    /// such backend refuses it with the one typed kind before touching anything.
    #[test]
    fn a_held_key_is_refused_by_backends_without_its_points() {
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(3);
        let (r1cs, w) = demo::circuit(6, 2, &mut rng).unwrap();
        let pk = crate::generate_parameters(&r1cs, &mut rng).unwrap();
        let held = HeldKey::new(
            pk.vk.clone(),
            pk.beta_g1,
            pk.delta_g1,
            pk.num_variables(),
            pk.l_query().len(),
            pk.domain_size(),
        );
        for q in Query::ALL {
            assert_eq!(held.query_len(q), pk.query_len(q), "{q}");
        }
        let mem = 64 << 20;
        let vram = cuzk_vram::Vram::with_budgets(
            std::sync::Arc::new(cuzk_vram::FakeBackend::new(mem)),
            cuzk_vram::Budget::new("device", mem),
            cuzk_vram::Budget::new("host", mem),
        );
        let sim = SimBackend::new(vram);
        let backends: [&dyn ProverBackend; 2] = [&CpuBackend, &sim];
        for b in backends {
            let (r, s) = (Fr::random(&mut rng), Fr::random(&mut rng));
            match create_proof_with_backend(b, &held, &r1cs, &w, r, s) {
                Err(ProveError::Backend(e)) => {
                    assert_eq!(e.kind(), BackendErrorKind::HeldKey, "{e}");
                    assert!(e.to_string().contains("held by the GPU backend"), "{e}");
                }
                other => panic!("{}: {other:?}", b.name()),
            }
            assert!(create_proof_with_backend(b, &pk, &r1cs, &w, r, s).is_ok());
        }
    }
}
