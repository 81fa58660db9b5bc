//! Parts of Filecoin circuits' witnesses, written directly: the values storage-proofs'
//! circuits allocate, in their order, with every SHA-256 ([`native_sha256`]) and Poseidon
//! ([`native_poseidon`]) computed natively and the rest (bit decompositions, packing,
//! selection) through storage-proofs' and bellperson's own gadgets.
//! - A PoRep partition's sections ([`PorepSection`]): `StackedCircuit`'s head, then each
//!   challenge in pieces, after storage-proofs-porep 19.1's `StackedCircuit::synthesize` and
//!   `Proof::synthesize`; a challenge's 11 labels and comm_d path are ~99% of a 32 GiB
//!   partition's rows.
//! - A PoSt partition's sections ([`PostSection`]): each `Sector`'s head, then each of its
//!   inclusion proofs, after storage-proofs-post 19.1's `Sector::synthesize`.
//!
//! Every PoRep and PoSt tree of Filecoin's shapes hashes with Poseidon (comm_d's with SHA-256),
//! which these parts assume. The synthesis tests check the joined witnesses equal to the
//! circuits' own at 2 KiB, and `synthesis_speed` at any size.

use std::marker::PhantomData;
use std::sync::Arc;

use bellperson::SynthesisError;
use bellperson::gadgets::boolean::{AllocatedBit, Boolean};
use bellperson::gadgets::multipack;
use bellperson::gadgets::num::AllocatedNum;
use blstrs::Scalar as Fr;
use cuzk_bellpepper::native_poseidon;
use cuzk_bellpepper::native_sha256::{self, Bit};
use cuzk_bellpepper::{WitnessCs, WitnessPart};
use ff::PrimeField;
use filecoin_hashers::{Hasher, POSEIDON_CONSTANTS_2, POSEIDON_CONSTANTS_11, PoseidonArity};
use filecoin_proofs::{DefaultPieceHasher, MerkleTreeTrait};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use sha2::{Digest, Sha256};
use storage_proofs_core::gadgets::encode::encode;
use storage_proofs_core::gadgets::insertion::insert;
use storage_proofs_core::gadgets::uint64::UInt64;
use storage_proofs_core::merkle::{MerkleProof, MerkleProofTrait};
use storage_proofs_porep::stacked;
use typenum::{U2, U4, U8, U16, Unsigned};

use crate::seal_proof::upper_arities;

/// A Merkle path as the circuit takes it: each level's siblings and the index among them.
pub(crate) type Path = Vec<(Vec<Option<Fr>>, Option<usize>)>;

/// A tree's hash of one level's nodes.
pub(crate) type LevelHash =
    fn(&mut WitnessCs<'_>, &[AllocatedNum<Fr>]) -> Result<AllocatedNum<Fr>, SynthesisError>;

/// The partition's shared values (`StackedCircuit`'s fields besides its proofs).
#[derive(Clone, Copy)]
pub(crate) struct Head {
    pub(crate) replica_id: Fr,
    pub(crate) comm_d: Fr,
    pub(crate) comm_r: Fr,
    pub(crate) comm_r_last: Fr,
    pub(crate) comm_c: Fr,
}

/// A parent's column: its value at every layer and its path in the comm_c tree.
struct Column {
    rows: Vec<Fr>,
    path: Path,
}

/// The head and one challenge's values, read from its vanilla proof: what its sections write.
pub(crate) struct ChallengeWitness<Tree> {
    head: Head,
    data_leaf: Fr,
    comm_d_path: Path,
    drg_parents: Vec<Column>,
    exp_parents: Vec<Column>,
    node: u64,
    comm_r_last_path: Path,
    c_x_path: Path,
    _tree: PhantomData<fn() -> Tree>,
}

/// storage-proofs keeps a column proof's column and path, and a labeling proof's node,
/// crate-private; their serde form is public. These read it (bincode 1: fields in order).
#[derive(Deserialize)]
#[serde(bound = "D: DeserializeOwned, P: DeserializeOwned")]
struct ColumnProofView<D, P> {
    column: ColumnView<D>,
    inclusion_proof: P,
}

#[derive(Deserialize)]
#[serde(bound = "D: DeserializeOwned")]
struct ColumnView<D> {
    #[allow(dead_code)]
    index: u32,
    rows: Vec<D>,
    #[allow(dead_code)]
    _h: PhantomData<()>,
}

#[derive(Deserialize)]
#[serde(bound = "D: DeserializeOwned")]
struct LabelingProofView<D> {
    #[allow(dead_code)]
    parents: Vec<D>,
    #[allow(dead_code)]
    layer_index: u32,
    node: u64,
}

/// Reads `value` through its serde form as `T`.
fn view<T: DeserializeOwned>(value: &impl serde::Serialize) -> Result<T, String> {
    bincode::serialize(value)
        .and_then(|bytes| bincode::deserialize(&bytes))
        .map_err(|e| format!("reading a vanilla proof: {e}"))
}

type TreeProof<Tree> = MerkleProof<
    <Tree as MerkleTreeTrait>::Hasher,
    <Tree as MerkleTreeTrait>::Arity,
    <Tree as MerkleTreeTrait>::SubTreeArity,
    <Tree as MerkleTreeTrait>::TopTreeArity,
>;
type Domain<Tree> = <<Tree as MerkleTreeTrait>::Hasher as Hasher>::Domain;

impl<Tree: 'static + MerkleTreeTrait> ChallengeWitness<Tree> {
    /// The part of challenge `proof`, checked for the shape the circuit needs (a malformed
    /// proof is an error here, where storage-proofs' circuit would panic).
    pub(crate) fn new(
        head: Head,
        proof: &stacked::Proof<Tree, DefaultPieceHasher>,
    ) -> Result<Self, String> {
        let columns = |proofs: &[stacked::ColumnProof<TreeProof<Tree>>]| {
            proofs
                .iter()
                .map(|p| {
                    let v: ColumnProofView<Domain<Tree>, TreeProof<Tree>> = view(p)?;
                    Ok(Column {
                        rows: v.column.rows.into_iter().map(Into::into).collect(),
                        path: v.inclusion_proof.as_options(),
                    })
                })
                .collect::<Result<Vec<_>, String>>()
        };
        let rcp = &proof.replica_column_proofs;
        let drg_parents = columns(&rcp.drg_parents)?;
        let exp_parents = columns(&rcp.exp_parents)?;
        let layers = drg_parents.first().map_or(0, |c| c.rows.len());
        if layers == 0 || exp_parents.is_empty() {
            return Err("a challenge without parents or layers".into());
        }
        if drg_parents
            .iter()
            .chain(&exp_parents)
            .any(|c| c.rows.len() != layers)
        {
            return Err("parent columns of different heights".into());
        }
        if exp_parents.len() + drg_parents.len() < 9 {
            return Err("fewer than 9 parents".into());
        }
        let c_x: ColumnProofView<Domain<Tree>, TreeProof<Tree>> = view(&rcp.c_x)?;
        let labeling: LabelingProofView<Domain<Tree>> = view(
            proof
                .labeling_proofs
                .first()
                .ok_or("a challenge without labeling proofs")?,
        )?;
        let comm_d_path = proof.comm_d_proofs.as_options();
        if comm_d_path.iter().any(|(siblings, _)| siblings.len() != 1) {
            return Err("a comm_d path that is not binary".into());
        }
        let comm_r_last_path = proof.comm_r_last_proof.as_options();
        let c_x_path = c_x.inclusion_proof.as_options();
        check_tree_path::<Tree>(&comm_r_last_path, "the comm_r_last path")?;
        check_tree_path::<Tree>(&c_x_path, "the comm_c path")?;
        for c in drg_parents.iter().chain(&exp_parents) {
            check_tree_path::<Tree>(&c.path, "a parent's comm_c path")?;
        }
        Ok(Self {
            head,
            data_leaf: proof.comm_d_proofs.leaf().into(),
            comm_d_path,
            drg_parents,
            exp_parents,
            node: labeling.node,
            comm_r_last_path,
            c_x_path,
            _tree: PhantomData,
        })
    }
}

/// Each level of `path` has as many nodes as `Tree` has there: its base arity, then its
/// sub-tree's and top tree's, if any.
fn check_tree_path<Tree: MerkleTreeTrait>(path: &Path, what: &str) -> Result<(), String> {
    let tail = upper_arities::<Tree>();
    let n = path.len();
    if n < tail.len() {
        return Err(format!("{what} is too short for the tree"));
    }
    for (level, (siblings, _)) in path.iter().enumerate() {
        let expected = match (level + tail.len()).checked_sub(n) {
            Some(t) => tail[t],
            None => Tree::Arity::to_usize(),
        };
        if siblings.len() + 1 != expected {
            return Err(format!(
                "{what}: level {level} has {} nodes, the tree {expected}",
                siblings.len() + 1
            ));
        }
    }
    Ok(())
}

pub(crate) fn alloc(cs: &mut WitnessCs<'_>, value: Fr) -> Result<AllocatedNum<Fr>, SynthesisError> {
    AllocatedNum::alloc(cs, || Ok(value))
}

fn bits(booleans: &[Boolean]) -> Result<Vec<Bit>, SynthesisError> {
    booleans.iter().map(Bit::of).collect()
}

/// storage-proofs' `reverse_bit_numbering`: pad to whole bytes, reverse each byte's bits.
fn reverse_bit_numbering(mut bits: Vec<Bit>) -> Vec<Bit> {
    while !bits.len().is_multiple_of(8) {
        bits.push(Bit::Constant(false));
    }
    bits.chunks(8)
        .flat_map(|c| c.iter().rev())
        .copied()
        .collect()
}

/// `StackedCircuit::synthesize` before its challenges.
fn write_head(cs: &mut WitnessCs<'_>, head: &Head) -> Result<(), SynthesisError> {
    let replica_id = alloc(cs, head.replica_id)?;
    replica_id.inputize(&mut *cs)?;
    replica_id_bits(cs, &replica_id)?;
    let comm_d = alloc(cs, head.comm_d)?;
    comm_d.inputize(&mut *cs)?;
    let comm_r = alloc(cs, head.comm_r)?;
    comm_r.inputize(&mut *cs)?;
    let comm_r_last = alloc(cs, head.comm_r_last)?;
    let comm_c = alloc(cs, head.comm_c)?;
    // Then comm_r = H(comm_c || comm_r_last): the hash's values; the equality is a row only.
    native_poseidon::poseidon_hash(cs, &[comm_c, comm_r_last], U2::PARAMETERS())?;
    Ok(())
}

/// The replica id's bits as the head allocates them: the one head value a challenge reads
/// other than through rows.
fn replica_id_bits(
    cs: &mut WitnessCs<'_>,
    replica_id: &AllocatedNum<Fr>,
) -> Result<Vec<Bit>, SynthesisError> {
    Ok(reverse_bit_numbering(bits(
        &replica_id.to_bits_le(&mut *cs)?,
    )?))
}

/// A section of a PoRep partition's witness: the partition's head, or a piece of one challenge
/// (`stacked::circuit::Proof::synthesize`): its comm_d path, its parents' columns, one layer's
/// label, then the rest. A challenge is ~7.2M rows at 32 GiB, so a partition's 18 challenges
/// as parts left 16 cores idle for a second round; its ~250 sections keep them all busy.
/// Each section is synthesized alone: what it reads of earlier sections (the replica id's bits,
/// a column's rows, the labels) it recomputes from the vanilla proof's values in a scratch
/// system, since a witness-only synthesis reads values, never variables.
pub(crate) enum PorepSection<Tree> {
    Head(Head),
    CommD(Arc<ChallengeWitness<Tree>>),
    Columns(Arc<ChallengeWitness<Tree>>),
    Label(Arc<ChallengeWitness<Tree>>, usize),
    Rest(Arc<ChallengeWitness<Tree>>),
}

impl<Tree> ChallengeWitness<Tree> {
    /// This challenge's sections, in the circuit's order.
    pub(crate) fn sections(self) -> impl Iterator<Item = PorepSection<Tree>> {
        let layers = self.layers();
        let c = Arc::new(self);
        [
            PorepSection::CommD(c.clone()),
            PorepSection::Columns(c.clone()),
        ]
        .into_iter()
        .chain((1..=layers).map({
            let c = c.clone();
            move |layer| PorepSection::Label(c.clone(), layer)
        }))
        .chain([PorepSection::Rest(c)])
    }

    fn layers(&self) -> usize {
        self.drg_parents[0].rows.len()
    }

    /// The rows layer `layer`'s label reads: the DRG parents' at the layer below it (their
    /// column's row `layer − 1`), then, above layer 1, the expander parents' two below.
    fn label_rows(&self, layer: usize) -> Vec<Fr> {
        let mut rows: Vec<Fr> = self.drg_parents.iter().map(|c| c.rows[layer - 1]).collect();
        if layer > 1 {
            rows.extend(self.exp_parents.iter().map(|c| c.rows[layer - 2]));
        }
        rows
    }

    /// Layer `layer`'s label as `create_label` computes it, on plain bytes (the values the
    /// label sections allocate, for the sections after them).
    fn label_value(&self, layer: usize) -> Fr {
        let mut h = Sha256::new();
        h.update(self.head.replica_id.to_repr());
        h.update((layer as u32).to_be_bytes());
        h.update(self.node.to_be_bytes());
        h.update([0u8; 20]);
        for p in repeat_parents(self.label_rows(layer), layer) {
            h.update(p.to_repr());
        }
        let mut digest: [u8; 32] = h.finalize().into();
        // The circuit packs the digest's first 254 bits (little-endian).
        digest[31] &= 0b0011_1111;
        Option::from(Fr::from_repr(digest)).expect("254 bits are below the modulus")
    }
}

/// storage-proofs repeats a label's parents (6 DRG parents on layer 1, then 14) up to 37.
fn repeat_parents<T: Clone>(parents: Vec<T>, layer: usize) -> Vec<T> {
    let mut expanded = parents.clone();
    if layer > 1 {
        expanded.extend_from_slice(&parents);
        expanded.extend_from_slice(&parents[..9]);
    } else {
        for _ in 0..5 {
            expanded.extend_from_slice(&parents);
        }
        expanded.push(parents[0].clone());
    }
    expanded
}

impl<Tree: 'static + MerkleTreeTrait> WitnessPart for PorepSection<Tree> {
    fn write_witness(self, cs: &mut WitnessCs<'_>) -> Result<(), SynthesisError> {
        // Earlier sections' values, allocated where the section's own rows never see them.
        let mut scratch = WitnessCs::default();
        match self {
            PorepSection::Head(head) => write_head(cs, &head),
            PorepSection::CommD(c) => {
                let data_leaf = alloc(cs, c.data_leaf)?;
                inclusion(cs, &c.comm_d_path, &data_leaf, sha256_of_leaves)
            }
            PorepSection::Columns(c) => {
                for column in c.drg_parents.iter().chain(&c.exp_parents) {
                    let rows = column
                        .rows
                        .iter()
                        .map(|r| alloc(cs, *r))
                        .collect::<Result<Vec<_>, _>>()?;
                    let hash = hash_single_column(cs, &rows)?;
                    inclusion(cs, &column.path, &hash, poseidon_of_leaves)?;
                }
                UInt64::alloc(&mut *cs, Some(c.node))?.pack_into_input(&mut *cs)
            }
            PorepSection::Label(c, layer) => {
                let replica_id = alloc(&mut scratch, c.head.replica_id)?;
                let replica_id_bits = replica_id_bits(&mut scratch, &replica_id)?;
                let node_bits = bits(&UInt64::alloc(&mut scratch, Some(c.node))?.to_bits_be())?;
                let mut parents = Vec::new();
                for r in c.label_rows(layer) {
                    let b = alloc(&mut scratch, r)?.to_bits_le(&mut *cs)?;
                    parents.push(reverse_bit_numbering(bits(&b)?));
                }
                let expanded = repeat_parents(parents, layer);
                create_label(cs, &replica_id_bits, &expanded, layer as u32, &node_bits).map(drop)
            }
            PorepSection::Rest(c) => {
                let labels = (1..=c.layers())
                    .map(|layer| alloc(&mut scratch, c.label_value(layer)))
                    .collect::<Result<Vec<_>, _>>()?;
                let data_leaf = alloc(&mut scratch, c.data_leaf)?;
                let encoded = encode(&mut *cs, &labels[labels.len() - 1], &data_leaf)?;
                inclusion(cs, &c.comm_r_last_path, &encoded, poseidon_of_leaves)?;
                let column_hash = hash_single_column(cs, &labels)?;
                inclusion(cs, &c.c_x_path, &column_hash, poseidon_of_leaves)
            }
        }
    }
}

/// A piece of a PoSt partition's witness, after `Sector::synthesize`: a sector's head or one
/// of its challenges. Each is a group of its own for `witness_of_parts` (a challenge reads no
/// value of its head), so every piece is written in place.
pub(crate) enum PostSection<Tree> {
    /// The sector's `[comm_r_last, comm_c, comm_r]`, and comm_r's hash.
    Head([Fr; 3]),
    /// A challenged leaf and its inclusion proof.
    Challenge(Fr, Path, PhantomData<fn() -> Tree>),
}

impl<Tree: 'static + MerkleTreeTrait> PostSection<Tree> {
    /// A challenged leaf and its path, checked for the tree's shape.
    pub(crate) fn challenge(leaf: Fr, path: Path) -> Result<Self, String> {
        check_tree_path::<Tree>(&path, "a challenge's path")?;
        Ok(Self::Challenge(leaf, path, PhantomData))
    }
}

impl<Tree: 'static + MerkleTreeTrait> WitnessPart for PostSection<Tree> {
    fn write_witness(self, cs: &mut WitnessCs<'_>) -> Result<(), SynthesisError> {
        match self {
            Self::Head([comm_r_last, comm_c, comm_r]) => {
                let comm_r_last = alloc(cs, comm_r_last)?;
                let comm_c = alloc(cs, comm_c)?;
                let comm_r = alloc(cs, comm_r)?;
                comm_r.inputize(&mut *cs)?;
                // comm_r = H(comm_c || comm_r_last): the hash's values; the equality is a row.
                native_poseidon::poseidon_hash(cs, &[comm_c, comm_r_last], U2::PARAMETERS())?;
                Ok(())
            }
            Self::Challenge(leaf, path, _) => {
                let leaf = alloc(cs, leaf)?;
                inclusion(cs, &path, &leaf, poseidon_of_leaves)
            }
        }
    }
}

/// storage-proofs' `create_label_circuit`: SHA-256 of the replica id, the layer and node,
/// and the 37 parents, 32 bytes each, packed into a field element.
fn create_label(
    cs: &mut WitnessCs<'_>,
    replica_id: &[Bit],
    parents: &[Vec<Bit>],
    layer: u32,
    node: &[Bit],
) -> Result<AllocatedNum<Fr>, SynthesisError> {
    if parents.len() != stacked::TOTAL_PARENTS {
        return Err(SynthesisError::MalformedProofs(format!(
            "{} parents to a label, not {}",
            parents.len(),
            stacked::TOTAL_PARENTS
        )));
    }
    let pad_to = |bits: &mut Vec<Bit>, multiple: usize| {
        while !bits.len().is_multiple_of(multiple) {
            bits.push(Bit::Constant(false));
        }
    };
    let mut preimage = Vec::with_capacity((2 + parents.len()) * 256);
    preimage.extend_from_slice(replica_id);
    pad_to(&mut preimage, 256);
    preimage.extend((0..32).rev().map(|i| Bit::Constant((layer >> i) & 1 == 1)));
    preimage.extend_from_slice(node);
    pad_to(&mut preimage, 512);
    for parent in parents {
        preimage.extend_from_slice(parent);
        pad_to(&mut preimage, 256);
    }
    let digest = native_sha256::sha256(cs, &preimage);
    let bits = reverse_bit_numbering(digest);
    native_sha256::pack_bits(cs, &bits[..Fr::CAPACITY as usize])
}

/// A private `PoRCircuit` from `leaf` (storage-proofs' gadget, written out): per level its
/// index bits, its siblings, the node inserted among them (storage-proofs' `insert`) and their
/// hash; then the index bits packed into an input (the computed root equals the root: a row).
fn inclusion(
    cs: &mut WitnessCs<'_>,
    path: &Path,
    leaf: &AllocatedNum<Fr>,
    hash: LevelHash,
) -> Result<(), SynthesisError> {
    let mut cur = leaf.clone();
    let mut index_bits = Vec::new();
    for (siblings, index) in path {
        let bits = (siblings.len() + 1).trailing_zeros();
        let level_bits = (0..bits)
            .map(|i| {
                let bit = index.map(|x| (x >> i) & 1 == 1);
                AllocatedBit::alloc(&mut *cs, bit).map(Boolean::from)
            })
            .collect::<Result<Vec<_>, _>>()?;
        index_bits.extend_from_slice(&level_bits);
        let siblings = siblings
            .iter()
            .map(|s| AllocatedNum::alloc(&mut *cs, || s.ok_or(SynthesisError::AssignmentMissing)))
            .collect::<Result<Vec<_>, _>>()?;
        let inserted = insert(&mut *cs, &cur, &level_bits, &siblings)?;
        cur = hash(cs, &inserted)?;
    }
    multipack::pack_into_inputs(&mut *cs, &index_bits)
}

/// filecoin-hashers' `PoseidonFunction::hash_multi_leaf_circuit`: Poseidon of the arity.
pub(crate) fn poseidon_of_leaves(
    cs: &mut WitnessCs<'_>,
    leaves: &[AllocatedNum<Fr>],
) -> Result<AllocatedNum<Fr>, SynthesisError> {
    match leaves.len() {
        2 => native_poseidon::poseidon_hash(cs, leaves, U2::PARAMETERS()),
        4 => native_poseidon::poseidon_hash(cs, leaves, U4::PARAMETERS()),
        8 => native_poseidon::poseidon_hash(cs, leaves, U8::PARAMETERS()),
        16 => native_poseidon::poseidon_hash(cs, leaves, U16::PARAMETERS()),
        n => Err(SynthesisError::MalformedProofs(format!(
            "a tree level of {n} nodes"
        ))),
    }
}

/// filecoin-hashers' `Sha256Function::hash_multi_leaf_circuit`: each leaf's bits, bytes in
/// order, hashed, the digest's first 254 bits (each byte's least significant first) packed.
pub(crate) fn sha256_of_leaves(
    cs: &mut WitnessCs<'_>,
    leaves: &[AllocatedNum<Fr>],
) -> Result<AllocatedNum<Fr>, SynthesisError> {
    let mut preimage = Vec::with_capacity(leaves.len() * 256);
    for leaf in leaves {
        let mut b = bits(&leaf.to_bits_le(&mut *cs)?)?;
        while !b.len().is_multiple_of(8) {
            b.push(Bit::Constant(false));
        }
        preimage.extend(b.chunks_exact(8).flat_map(|c| c.iter().rev()).copied());
    }
    let digest = native_sha256::sha256(cs, &preimage);
    let le: Vec<Bit> = digest
        .chunks(8)
        .flat_map(|c| c.iter().rev())
        .take(Fr::CAPACITY as usize)
        .copied()
        .collect();
    native_sha256::pack_bits(cs, &le)
}

/// storage-proofs-porep's `hash_single_column`: Poseidon of a column of 2 or 11.
fn hash_single_column(
    cs: &mut WitnessCs<'_>,
    column: &[AllocatedNum<Fr>],
) -> Result<AllocatedNum<Fr>, SynthesisError> {
    match column.len() {
        2 => native_poseidon::poseidon_hash(cs, column, &POSEIDON_CONSTANTS_2),
        11 => native_poseidon::poseidon_hash(cs, column, &POSEIDON_CONSTANTS_11),
        n => Err(SynthesisError::MalformedProofs(format!(
            "a column of {n} layers (2 or 11 hash)"
        ))),
    }
}
