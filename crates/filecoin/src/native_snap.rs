//! A SnapDeals partition's witness in parts, written directly: the values storage-proofs-update
//! 19.1's `EmptySectorUpdateCircuit::synthesize` allocates, in its order, with every SHA-256
//! and Poseidon native (as in [`crate::native_witness`]) and the rest through bellperson's and
//! storage-proofs' gadgets, or written out after storage-proofs-update's own gadgets where
//! those are private to it (`get_challenge_high_bits`, `label_r_new`, `gen_challenge_bits`).
//!
//! PoRep's and PoSt's parts each repeat their small head; this circuit's head holds its apex
//! tree (127 SHA-256 from 8 MiB up, more than a 32 GiB challenge's TreeD path) and every
//! challenge's random bits, so it cannot be repeated per challenge. The parts are consecutive
//! sections instead, each a group of its own (`witness_of_parts` joins groups in order): the
//! head, runs of the apex tree's hashes, the partition path with the challenge bits, then one
//! challenge each. A section reads what earlier ones allocated as plain values, computed once
//! when the sections are made ([`Shared`]).
//!
//! The system itself cannot be replicated from one challenge (`CompiledCircuit::replicate`):
//! the head grows with the challenge count (one digest per 9 to 42 challenges), and each
//! challenge reads its own slice of a digest's bits, so challenges differ in the head columns
//! they read. A SnapDeals partition compiles by a full synthesis, once per circuit.

use std::ops::Range;
use std::sync::Arc;

use bellperson::SynthesisError;
use bellperson::gadgets::boolean::{AllocatedBit, Boolean, field_into_allocated_bits_le};
use bellperson::gadgets::multipack;
use bellperson::gadgets::num::AllocatedNum;
use blstrs::Scalar as Fr;
use cuzk_bellpepper::native_poseidon;
use cuzk_bellpepper::{WitnessCs, WitnessPart};
use ff::{Field, PrimeField, PrimeFieldBits};
use filecoin_hashers::{HashFunction, Hasher, PoseidonArity};
use filecoin_proofs::{MerkleTreeTrait, TreeRHasher};
use storage_proofs_core::gadgets::insertion::{insert, select};
use storage_proofs_update::EmptySectorUpdateCircuit;
use storage_proofs_update::PublicParams;
use storage_proofs_update::circuit::{PrivateInputs, PublicInputs};
use storage_proofs_update::constants::{POSEIDON_CONSTANTS_GEN_RANDOMNESS, TreeDHasher, hs};
use typenum::{U2, Unsigned};

use crate::native_witness::{LevelHash, alloc, poseidon_of_leaves, sha256_of_leaves};
use crate::seal_proof::upper_arities;

/// The apex tree's hashes per part: a run about as long as a 32 GiB challenge's TreeD path.
const APEX_HASHES_PER_PART: usize = 16;

/// What the sections read: the partition's head values and, computed plainly from them, the
/// values that sections after the head read from earlier ones.
pub(crate) struct Shared {
    k_and_h_select: Fr,
    /// `k_and_h_select`'s low bits: the partition's, then the h-select bits.
    k_and_h_select_bits: Vec<bool>,
    partition_bit_len: usize,
    hs: [usize; 6],
    comm_r_old: Fr,
    comm_d_new: Fr,
    comm_r_new: Fr,
    comm_c: Fr,
    root_r_old: Fr,
    root_r_new: Fr,
    /// The apex tree with TreeD's hash, its leaves first, up to its root.
    apex_tree: Vec<Vec<Fr>>,
    partition_path: Vec<Fr>,
    phi: Fr,
    /// The challenges' digests (`gen_challenge_bits`): their indices, from `k`'s first.
    digest_indices: Range<u64>,
    apex_leaf_bit_len: usize,
}

impl Shared {
    fn partition_bits(&self) -> &[bool] {
        &self.k_and_h_select_bits[..self.partition_bit_len]
    }

    fn h_select_bits(&self) -> &[bool] {
        &self.k_and_h_select_bits[self.partition_bit_len..]
    }
}

/// One challenge's values: its bits (the random ones, then the partition's) and its three
/// Merkle proofs (TreeD's only up to the apex leaf, the rest is the partition path).
pub(crate) struct Challenge {
    bits: Vec<bool>,
    leaf_r_old: Fr,
    leaf_d_new: Fr,
    leaf_r_new: Fr,
    path_r_old: Vec<Vec<Fr>>,
    path_r_new: Vec<Vec<Fr>>,
    path_d_to_apex_leaf: Vec<Fr>,
}

/// A consecutive section of a SnapDeals partition's witness.
pub(crate) enum SnapSection {
    /// The public inputs, the partition and h-select bits, phi, comm_c, both TreeR roots, the
    /// apex leaves, the partition path and the two comm_r checks.
    Head(Arc<Shared>),
    /// Hashes of the apex tree, numbered row by row from its leaves (`apex_por`).
    ApexHashes(Arc<Shared>, Range<usize>),
    /// The partition path from the apex root to comm_d_new, then `gen_challenge_bits`.
    PartitionPathAndChallengeBits(Arc<Shared>),
    Challenge(Arc<Shared>, Box<Challenge>),
}

/// The sections of `circuit`'s witness, one per group, in the circuit's order; checked for
/// what the circuit asserts (a malformed proof is an error here, where the circuit panics).
pub(crate) fn sections<Tree: MerkleTreeTrait<Hasher = TreeRHasher>>(
    circuit: EmptySectorUpdateCircuit<Tree>,
) -> Result<Vec<Vec<SnapSection>>, String> {
    let EmptySectorUpdateCircuit {
        pub_params:
            PublicParams {
                sector_nodes,
                challenge_count,
                challenge_bit_len,
                partition_count,
                partition_bit_len,
                apex_leaf_count,
                apex_leaf_bit_len,
            },
        pub_inputs:
            PublicInputs {
                k_and_h_select,
                comm_r_old,
                comm_d_new,
                comm_r_new,
            },
        priv_inputs:
            PrivateInputs {
                comm_c,
                root_r_old,
                root_r_new,
                apex_leafs,
                challenge_proofs,
            },
    } = circuit;
    let hs = hs(sector_nodes);
    let k_and_h_select = value(k_and_h_select, "k_and_h_select")?;
    let bits: Vec<bool> = k_and_h_select.to_le_bits().into_iter().collect();
    let k_and_h_select_bits = bits[..partition_bit_len + hs.len()].to_vec();
    let k = bits[..partition_bit_len]
        .iter()
        .rev()
        .fold(0usize, |k, &b| (k << 1) | usize::from(b));
    if k >= partition_count {
        return Err(format!("partition {k} of {partition_count}"));
    }
    if k_and_h_select_bits[partition_bit_len..]
        .iter()
        .filter(|&&b| b)
        .count()
        != 1
        || bits[partition_bit_len + hs.len()..].iter().any(|&b| b)
    {
        return Err("h_select does not have exactly one bit set".into());
    }
    if apex_leafs.len() != apex_leaf_count || apex_leaf_count != 1 << apex_leaf_bit_len {
        return Err(format!(
            "{} apex leaves, the circuit {apex_leaf_count} (2^{apex_leaf_bit_len})",
            apex_leafs.len()
        ));
    }
    if challenge_proofs.len() != challenge_count {
        return Err(format!(
            "{} challenge proofs, the circuit {challenge_count}",
            challenge_proofs.len()
        ));
    }
    let to_apex_leaf = challenge_bit_len
        .checked_sub(partition_bit_len + apex_leaf_bit_len)
        .ok_or("a TreeD shorter than its apex tree and partition path")?;
    let bits_per_challenge = challenge_bit_len - partition_bit_len;
    let challenges_per_digest = (Fr::CAPACITY as usize)
        .checked_div(bits_per_challenge)
        .filter(|&n| n > 0)
        .ok_or("challenges of no random bits")?;
    let digests = challenge_count.div_ceil(challenges_per_digest) as u64;
    let first_digest = k as u64 * digests;

    let comm_r_new = value(comm_r_new, "comm_r_new")?;
    // gen_challenge_bits: each digest's bits, a run of `bits_per_challenge` per challenge,
    // then the partition's bits.
    let partition_bits = &k_and_h_select_bits[..partition_bit_len];
    let mut challenge_bits = Vec::with_capacity(challenge_count);
    for index in first_digest..first_digest + digests {
        let digest = poseidon_value([comm_r_new, Fr::from(index)])?;
        let bits: Vec<bool> = digest.to_le_bits().into_iter().collect();
        challenge_bits.extend(
            bits.chunks(bits_per_challenge)
                .take(challenges_per_digest)
                .map(|random| [random, partition_bits].concat()),
        );
    }

    let tree_r_arities = tree_r_arities::<Tree>(challenge_bit_len)?;
    let mut partition_path = None;
    let mut challenges = Vec::with_capacity(challenge_count);
    for (i, (proof, bits)) in challenge_proofs.into_iter().zip(challenge_bits).enumerate() {
        let what = |what: &str| format!("challenge {i}: {what}");
        if proof.path_d_new.len() != challenge_bit_len
            || proof.path_d_new.iter().any(|s| s.len() != 1)
        {
            return Err(what("a TreeD path of another shape"));
        }
        let path_d_new = proof
            .path_d_new
            .iter()
            .map(|s| value(s[0], "a TreeD sibling"))
            .collect::<Result<Vec<_>, _>>()?;
        let (to_apex, rest) = path_d_new.split_at(to_apex_leaf);
        let partition_part = rest[apex_leaf_bit_len..].to_vec();
        match &partition_path {
            None => partition_path = Some(partition_part),
            Some(p) if *p == partition_part => {}
            Some(_) => return Err(what("another partition path than challenge 0's")),
        }
        let tree_r_path = |path: Vec<Vec<Option<Fr>>>| -> Result<Vec<Vec<Fr>>, String> {
            if path
                .iter()
                .map(|s| s.len() + 1)
                .ne(tree_r_arities.iter().copied())
            {
                return Err(what("a TreeR path of another shape"));
            }
            path.into_iter()
                .map(|s| s.into_iter().map(|v| value(v, "a TreeR sibling")).collect())
                .collect()
        };
        challenges.push(Challenge {
            bits,
            leaf_r_old: value(proof.leaf_r_old, "leaf_r_old")?,
            leaf_d_new: value(proof.leaf_d_new, "leaf_d_new")?,
            leaf_r_new: value(proof.leaf_r_new, "leaf_r_new")?,
            path_r_old: tree_r_path(proof.path_r_old)?,
            path_r_new: tree_r_path(proof.path_r_new)?,
            path_d_to_apex_leaf: to_apex.to_vec(),
        });
    }

    let apex_leafs = apex_leafs
        .into_iter()
        .map(|v| value(v, "an apex leaf"))
        .collect::<Result<Vec<_>, _>>()?;
    let comm_r_old = value(comm_r_old, "comm_r_old")?;
    let comm_d_new = value(comm_d_new, "comm_d_new")?;
    let shared = Arc::new(Shared {
        k_and_h_select,
        k_and_h_select_bits,
        partition_bit_len,
        hs,
        comm_r_old,
        comm_d_new,
        comm_r_new,
        comm_c: value(comm_c, "comm_c")?,
        root_r_old: value(root_r_old, "root_r_old")?,
        root_r_new: value(root_r_new, "root_r_new")?,
        apex_tree: apex_tree(apex_leafs),
        partition_path: partition_path.ok_or("no challenges")?,
        phi: poseidon_value([comm_d_new, comm_r_old])?,
        digest_indices: first_digest..first_digest + digests,
        apex_leaf_bit_len,
    });
    let apex_hashes = apex_leaf_count - 1;
    let mut sections = vec![vec![SnapSection::Head(shared.clone())]];
    for start in (0..apex_hashes).step_by(APEX_HASHES_PER_PART) {
        let end = apex_hashes.min(start + APEX_HASHES_PER_PART);
        sections.push(vec![SnapSection::ApexHashes(shared.clone(), start..end)]);
    }
    sections.push(vec![SnapSection::PartitionPathAndChallengeBits(
        shared.clone(),
    )]);
    sections.extend(
        challenges
            .into_iter()
            .map(|c| vec![SnapSection::Challenge(shared.clone(), Box::new(c))]),
    );
    Ok(sections)
}

fn value(v: Option<Fr>, what: &str) -> Result<Fr, String> {
    v.ok_or_else(|| format!("no {what}"))
}

/// The arities of a TreeR path's levels, leaf first, for `challenge_bit_len` bits.
fn tree_r_arities<Tree: MerkleTreeTrait>(challenge_bit_len: usize) -> Result<Vec<usize>, String> {
    let upper = upper_arities::<Tree>();
    let base = Tree::Arity::to_usize();
    let upper_bits: usize = upper.iter().map(|a| a.trailing_zeros() as usize).sum();
    let base_bits = base.trailing_zeros() as usize;
    match challenge_bit_len.checked_sub(upper_bits) {
        Some(bits) if base.is_power_of_two() && base_bits > 0 && bits % base_bits == 0 => {
            Ok([vec![base; bits / base_bits], upper].concat())
        }
        _ => Err(format!(
            "a {challenge_bit_len}-bit challenge does not fit TreeR's shape"
        )),
    }
}

/// The apex tree over `leaves` (a power of two of them), with TreeD's hash.
fn apex_tree(leaves: Vec<Fr>) -> Vec<Vec<Fr>> {
    let mut tree = vec![leaves];
    while let Some(row) = tree.last().filter(|row| row.len() > 1) {
        let next = row
            .chunks(2)
            .map(|pair| {
                <TreeDHasher as Hasher>::Function::hash2(&pair[0].into(), &pair[1].into()).into()
            })
            .collect();
        tree.push(next);
    }
    tree
}

/// Poseidon with storage-proofs-update's randomness constants, as a value.
fn poseidon_value(preimage: [Fr; 2]) -> Result<Fr, String> {
    let mut scratch = Earlier::default();
    let digest = scratch
        .nums(&preimage)
        .and_then(|p| {
            native_poseidon::poseidon_hash(&mut scratch.0, &p, &*POSEIDON_CONSTANTS_GEN_RANDOMNESS)
        })
        .map_err(|e| format!("Poseidon: {e}"))?;
    digest
        .get_value()
        .ok_or_else(|| "Poseidon: no value".into())
}

/// Values that an earlier section allocated, as the gadgets take them. A witness-only system
/// keeps values and never reads a variable, so they are allocated in a scratch system: the
/// section's own holds only what it allocates itself.
#[derive(Default)]
struct Earlier(WitnessCs<'static>);

impl Earlier {
    fn num(&mut self, v: Fr) -> Result<AllocatedNum<Fr>, SynthesisError> {
        AllocatedNum::alloc(&mut self.0, || Ok(v))
    }

    fn nums(&mut self, values: &[Fr]) -> Result<Vec<AllocatedNum<Fr>>, SynthesisError> {
        values.iter().map(|&v| self.num(v)).collect()
    }

    fn bits(&mut self, bits: &[bool]) -> Result<Vec<AllocatedBit>, SynthesisError> {
        bits.iter()
            .map(|&b| AllocatedBit::alloc(&mut self.0, Some(b)))
            .collect()
    }
}

impl WitnessPart for SnapSection {
    fn write_witness(self, cs: &mut WitnessCs<'_>) -> Result<(), SynthesisError> {
        match self {
            SnapSection::Head(shared) => write_head(cs, &shared),
            SnapSection::ApexHashes(shared, hashes) => write_apex_hashes(cs, &shared, hashes),
            SnapSection::PartitionPathAndChallengeBits(shared) => {
                write_partition_path_and_challenge_bits(cs, &shared)
            }
            SnapSection::Challenge(shared, challenge) => write_challenge(cs, &shared, *challenge),
        }
    }
}

fn input(cs: &mut WitnessCs<'_>, value: Fr) -> Result<AllocatedNum<Fr>, SynthesisError> {
    let num = alloc(cs, value)?;
    num.inputize(&mut *cs)?;
    Ok(num)
}

fn booleans(bits: Vec<AllocatedBit>) -> Vec<Boolean> {
    bits.into_iter().map(Boolean::from).collect()
}

/// `synthesize` up to `apex_por`.
fn write_head(cs: &mut WitnessCs<'_>, s: &Shared) -> Result<(), SynthesisError> {
    input(cs, s.k_and_h_select)?;
    let bits = s
        .k_and_h_select_bits
        .iter()
        .map(|&b| AllocatedBit::alloc(&mut *cs, Some(b)))
        .collect::<Result<Vec<_>, _>>()?;
    let partition_bits = booleans(bits[..s.partition_bit_len].to_vec());
    multipack::pack_bits(&mut *cs, &partition_bits)?;
    let comm_r_old = input(cs, s.comm_r_old)?;
    let comm_d_new = input(cs, s.comm_d_new)?;
    input(cs, s.comm_r_new)?;
    native_poseidon::poseidon_hash(
        cs,
        &[comm_d_new, comm_r_old],
        &*POSEIDON_CONSTANTS_GEN_RANDOMNESS,
    )?;
    let comm_c = alloc(cs, s.comm_c)?;
    let root_r_old = alloc(cs, s.root_r_old)?;
    let root_r_new = alloc(cs, s.root_r_new)?;
    for &leaf in &s.apex_tree[0] {
        alloc(cs, leaf)?;
    }
    for &sibling in &s.partition_path {
        alloc(cs, sibling)?;
    }
    // comm_r = H(comm_c || root_r), old and new: the hashes' values; the equalities are rows.
    native_poseidon::poseidon_hash(cs, &[comm_c.clone(), root_r_old], U2::PARAMETERS())?;
    native_poseidon::poseidon_hash(cs, &[comm_c, root_r_new], U2::PARAMETERS())?;
    Ok(())
}

/// `apex_por`'s tree: hashes `hashes`, numbered row by row from the leaves.
fn write_apex_hashes(
    cs: &mut WitnessCs<'_>,
    s: &Shared,
    hashes: Range<usize>,
) -> Result<(), SynthesisError> {
    let mut earlier = Earlier::default();
    let mut first_of_row = 0;
    for row in &s.apex_tree[..s.apex_tree.len() - 1] {
        let pairs = row.len() / 2;
        let run = hashes.start.max(first_of_row)..hashes.end.min(first_of_row + pairs);
        for h in run {
            let pair = 2 * (h - first_of_row);
            let leaves = earlier.nums(&row[pair..pair + 2])?;
            sha256_of_leaves(cs, &leaves)?;
        }
        first_of_row += pairs;
    }
    Ok(())
}

/// The rest of `apex_por` (the partition path from the apex root to comm_d_new), then
/// `gen_challenge_bits`: each digest's index, the digest and its bits.
fn write_partition_path_and_challenge_bits(
    cs: &mut WitnessCs<'_>,
    s: &Shared,
) -> Result<(), SynthesisError> {
    let mut earlier = Earlier::default();
    let partition_bits = booleans(earlier.bits(s.partition_bits())?);
    let apex_root = s.apex_tree.last().and_then(|row| row.first());
    let apex_root = earlier.num(*apex_root.ok_or(SynthesisError::AssignmentMissing)?)?;
    let path = s
        .partition_path
        .iter()
        .map(|&sibling| earlier.num(sibling).map(|n| vec![n]))
        .collect::<Result<Vec<_>, _>>()?;
    merkle_path(cs, &partition_bits, apex_root, &path, sha256_of_leaves)?;

    let comm_r_new = earlier.num(s.comm_r_new)?;
    for index in s.digest_indices.clone() {
        let index = alloc(cs, Fr::from(index))?;
        let digest = native_poseidon::poseidon_hash(
            cs,
            &[comm_r_new.clone(), index],
            &*POSEIDON_CONSTANTS_GEN_RANDOMNESS,
        )?;
        field_into_allocated_bits_le(&mut *cs, digest.get_value())?;
    }
    Ok(())
}

/// One challenge of `synthesize`'s loop.
fn write_challenge(cs: &mut WitnessCs<'_>, s: &Shared, c: Challenge) -> Result<(), SynthesisError> {
    let mut earlier = Earlier::default();
    let c_bits = booleans(earlier.bits(&c.bits)?);
    let h_select_bits = booleans(earlier.bits(s.h_select_bits())?);
    let c_high = challenge_high_bits(cs, &c_bits, &h_select_bits, &s.hs)?;
    let phi = earlier.num(s.phi)?;
    let rho =
        native_poseidon::poseidon_hash(cs, &[phi, c_high], &*POSEIDON_CONSTANTS_GEN_RANDOMNESS)?;
    let leaf_r_old = alloc(cs, c.leaf_r_old)?;
    let leaf_d_new = alloc(cs, c.leaf_d_new)?;
    let leaf_r_new = label_r_new(cs, &leaf_r_old, &leaf_d_new, &rho)?;
    // The circuit asserts this: the proof's new leaf must be the old one's encoding.
    if leaf_r_new.get_value() != Some(c.leaf_r_new) {
        return Err(SynthesisError::MalformedProofs(
            "a challenge's leaf_r_new is not its leaf_r_old encoded with its leaf_d_new".into(),
        ));
    }
    let path_r_old = alloc_path(cs, &c.path_r_old)?;
    merkle_path(cs, &c_bits, leaf_r_old, &path_r_old, poseidon_of_leaves)?;
    let path_r_new = alloc_path(cs, &c.path_r_new)?;
    merkle_path(cs, &c_bits, leaf_r_new, &path_r_new, poseidon_of_leaves)?;

    let to_apex_leaf = c.path_d_to_apex_leaf.len();
    let apex_leaves = earlier.nums(&s.apex_tree[0])?;
    let apex_leaf_bits = &c_bits[to_apex_leaf..to_apex_leaf + s.apex_leaf_bit_len];
    select(&mut *cs, &apex_leaves, apex_leaf_bits)?;
    let path_d: Vec<Vec<Fr>> = c.path_d_to_apex_leaf.iter().map(|&s| vec![s]).collect();
    let path_d = alloc_path(cs, &path_d)?;
    merkle_path(
        cs,
        &c_bits[..to_apex_leaf],
        leaf_d_new,
        &path_d,
        sha256_of_leaves,
    )
}

fn alloc_path(
    cs: &mut WitnessCs<'_>,
    path: &[Vec<Fr>],
) -> Result<Vec<Vec<AllocatedNum<Fr>>>, SynthesisError> {
    path.iter()
        .map(|siblings| siblings.iter().map(|&s| alloc(cs, s)).collect())
        .collect()
}

/// storage-proofs' `por_no_challenge_input` (its siblings allocated before), its hashes
/// native: per level, the node inserted among its siblings at the index the next bits give
/// (storage-proofs' `insert`), then hashed; the root's equality is a row only.
pub(crate) fn merkle_path(
    cs: &mut WitnessCs<'_>,
    bits: &[Boolean],
    leaf: AllocatedNum<Fr>,
    path: &[Vec<AllocatedNum<Fr>>],
    hash: LevelHash,
) -> Result<(), SynthesisError> {
    let mut cur = leaf;
    let mut bits = bits.iter();
    for siblings in path {
        let n = (siblings.len() + 1).trailing_zeros() as usize;
        let index: Vec<Boolean> = bits.by_ref().take(n).cloned().collect();
        if index.len() != n || siblings.len() + 1 != 1 << n {
            return Err(SynthesisError::MalformedProofs(
                "a Merkle path of another shape than its challenge".into(),
            ));
        }
        let inserted = insert(&mut *cs, &cur, &index, siblings)?;
        cur = hash(cs, &inserted)?;
    }
    if bits.next().is_some() {
        return Err(SynthesisError::MalformedProofs(
            "a Merkle path shorter than its challenge".into(),
        ));
    }
    Ok(())
}

/// storage-proofs-update's `get_challenge_high_bits`: for each `h` of `hs`, the challenge's
/// `h` high bits packed, and that times its h-select bit; then their sum, the selected one.
fn challenge_high_bits(
    cs: &mut WitnessCs<'_>,
    c_bits: &[Boolean],
    h_select_bits: &[Boolean],
    hs: &[usize],
) -> Result<AllocatedNum<Fr>, SynthesisError> {
    let mut sum = Fr::ZERO;
    for (&h, selected) in hs.iter().zip(h_select_bits) {
        let high = c_bits.len().checked_sub(h).ok_or_else(|| {
            SynthesisError::MalformedProofs(format!("{h} high bits of a shorter challenge"))
        })?;
        let c_high = multipack::pack_bits(&mut *cs, &c_bits[high..])?;
        let value = match selected.get_value() {
            Some(true) => c_high.get_value(),
            Some(false) => Some(Fr::ZERO),
            None => None,
        }
        .ok_or(SynthesisError::AssignmentMissing)?;
        alloc(cs, value)?;
        sum += value;
    }
    alloc(cs, sum)
}

/// storage-proofs-update's `label_r_new`: `label_r_old + label_d_new · rho`.
fn label_r_new(
    cs: &mut WitnessCs<'_>,
    label_r_old: &AllocatedNum<Fr>,
    label_d_new: &AllocatedNum<Fr>,
    rho: &AllocatedNum<Fr>,
) -> Result<AllocatedNum<Fr>, SynthesisError> {
    let product = label_d_new.mul(&mut *cs, rho)?;
    let sum = label_r_old
        .get_value()
        .zip(product.get_value())
        .map(|(old, product)| old + product)
        .ok_or(SynthesisError::AssignmentMissing)?;
    alloc(cs, sum)
}

#[cfg(test)]
mod tests {
    //! The native Merkle path against storage-proofs' `por_no_challenge_input`, at TreeD's and
    //! TreeR's shapes: both after the same allocations, the witnesses must be equal.

    use bellperson::{Circuit, ConstraintSystem};
    use cuzk_bellpepper::CompiledCircuit;
    use filecoin_proofs::{SectorShapeSub8, SectorShapeTop2};
    use rand::SeedableRng;
    use storage_proofs_core::gadgets::por::por_no_challenge_input;
    use storage_proofs_update::constants::TreeD;

    use super::*;

    /// A leaf, its random path of `arities` and its challenge's bits.
    #[derive(Clone)]
    struct PathValues {
        bits: Vec<bool>,
        leaf: Fr,
        path: Vec<Vec<Fr>>,
        root: Fr,
    }

    impl PathValues {
        fn random(arities: &[usize], seed: u64) -> Self {
            let rng = &mut rand_chacha::ChaCha8Rng::seed_from_u64(seed);
            let bits_len: u32 = arities.iter().map(|a| a.trailing_zeros()).sum();
            Self {
                bits: (0..bits_len).map(|_| rand::Rng::r#gen(rng)).collect(),
                leaf: Fr::random(&mut *rng),
                path: arities
                    .iter()
                    .map(|&a| (1..a).map(|_| Fr::random(&mut *rng)).collect())
                    .collect(),
                root: Fr::random(&mut *rng),
            }
        }

        /// The bits, leaf, siblings and root, allocated in `cs`.
        #[allow(clippy::type_complexity)]
        fn alloc<CS: ConstraintSystem<Fr>>(
            &self,
            cs: &mut CS,
        ) -> (
            Vec<AllocatedBit>,
            AllocatedNum<Fr>,
            Vec<Vec<AllocatedNum<Fr>>>,
            AllocatedNum<Fr>,
        ) {
            let mut num = |v: Fr| AllocatedNum::alloc(&mut *cs, || Ok(v)).unwrap();
            let (leaf, root) = (num(self.leaf), num(self.root));
            let path = self
                .path
                .iter()
                .map(|s| s.iter().map(|&v| num(v)).collect())
                .collect();
            let bits = self
                .bits
                .iter()
                .map(|&b| AllocatedBit::alloc(&mut *cs, Some(b)).unwrap())
                .collect();
            (bits, leaf, path, root)
        }
    }

    struct Gadget<Tree>(PathValues, std::marker::PhantomData<Tree>);

    impl<Tree: MerkleTreeTrait> Circuit<Fr> for Gadget<Tree> {
        fn synthesize<CS: ConstraintSystem<Fr>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
            let (bits, leaf, path, root) = self.0.alloc(cs);
            por_no_challenge_input::<Tree, _>(cs, bits, leaf, path, root)
        }
    }

    struct Native(PathValues, LevelHash);

    impl WitnessPart for Native {
        fn write_witness(self, cs: &mut WitnessCs<'_>) -> Result<(), SynthesisError> {
            let (bits, leaf, path, _) = self.0.alloc(cs);
            merkle_path(cs, &booleans(bits), leaf, &path, self.1)
        }
    }

    fn check<Tree: MerkleTreeTrait>(arities: &[usize], hash: LevelHash) {
        for seed in 0..2 {
            let values = PathValues::random(arities, seed);
            let gadget = Gadget::<Tree>(values.clone(), std::marker::PhantomData);
            let (compiled, expected) = CompiledCircuit::compile(gadget).unwrap();
            let native = compiled
                .witness_of_parts(vec![vec![Native(values, hash)]], None)
                .unwrap();
            assert!(
                native.assignment() == expected.assignment(),
                "arities {arities:?}, seed {seed}: witnesses differ"
            );
        }
    }

    #[test]
    fn native_merkle_path_leaves_the_gadgets_witness() {
        check::<TreeD>(&[2; 5], sha256_of_leaves);
        check::<SectorShapeSub8>(&[8, 8, 8], poseidon_of_leaves);
        check::<SectorShapeTop2>(&[8, 8, 8, 2], poseidon_of_leaves);
    }

    #[test]
    fn a_path_of_another_shape_than_its_challenge_is_an_error() {
        let values = PathValues::random(&[8, 8], 0);
        let mut cs = WitnessCs::default();
        let (bits, leaf, path, _) = values.alloc(&mut cs);
        let short = booleans(bits[..5].to_vec());
        let long = booleans([bits.clone(), bits].concat());
        for bits in [short, long] {
            assert!(matches!(
                merkle_path(&mut cs, &bits, leaf.clone(), &path, poseidon_of_leaves),
                Err(SynthesisError::MalformedProofs(_))
            ));
        }
    }
}
