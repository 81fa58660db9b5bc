//! Valid vanilla proofs of any sector size without a sealed sector, from sparse trees.
//!
//! A proof opens few nodes: the challenged ones and, for PoRep, their parents. Here only those
//! leaves hold values of their own. Every other leaf holds its run's value: one run for a whole
//! tree, or SnapDeals' 2^h runs, over which its encoding is uniform. So each level's untouched
//! subtrees hash to one value, computed once, and a 32 GiB sector's proofs take seconds.
//!
//! - PoRep: the data is one random value in every node. The challenged nodes' labels are
//!   computed from their parents' labels, which are random. `comm_c`, `comm_r_last`, `comm_r`
//!   and `comm_d` are computed as filecoin-proofs computes them.
//! - PoSt: each sector's challenged leaves are random, its `comm_c` is random.
//! - SnapDeals: the old replica and the new data are one random value each. The new replica is
//!   uniform over each run of nodes that shares its `rho`.
//!
//! Every generator checks what it made with filecoin-proofs' own vanilla verifier before
//! returning it.

use std::collections::{BTreeMap, BTreeSet};

use blstrs::Scalar as Fr;
use filecoin_hashers::sha256::Sha256Hasher;
use filecoin_hashers::{Domain, HashFunction, Hasher};
use filecoin_proofs::{
    DefaultPieceHasher, FallbackPoStSectorProof, MerkleTreeTrait, PoRepConfig,
    SealCommitPhase1Output, TreeRHasher, generate_fallback_sector_challenges,
};
use merkletree::hash::Algorithm;
use rand::RngCore;
use storage_proofs_core::drgraph::Graph;
use storage_proofs_core::merkle::MerkleProof;
use storage_proofs_core::proof::ProofScheme;
use storage_proofs_core::sector::SectorId;
use storage_proofs_porep::stacked::{
    self, Challenges, Column, ColumnProof, EncodingProof, LabelingProof, ReplicaColumnProof,
    StackedDrg, TOTAL_PARENTS, generate_replica_id,
};
use storage_proofs_post::fallback::{Proof as PostVanillaProof, SectorProof};
use storage_proofs_update::constants::h_default;
use storage_proofs_update::{
    ChallengeProof, Challenges as SnapChallenges, EmptySectorUpdate, PartitionProof,
    PublicInputs as SnapPublicInputs, PublicParams as SnapPublicParams, phi, rho,
};
use typenum::Unsigned;

use crate::error::upstream;
use crate::post::post_circuit;
use crate::seal_proof::{upper_arities, with_shape};
use crate::workload::{SealCommit, api_c1_json};
use crate::{
    FilecoinError, PostKind, PostProof, PostStatement, SealProof, SnapStatement,
    prover_id_from_miner,
};

/// A Merkle tree of which only some leaves hold values of their own; the others hold their
/// run's value.
struct SparseTree<H: Hasher> {
    /// Bottom up: the arity of each level's parents.
    arities: Vec<usize>,
    /// `levels[0]` is the leaves; the last holds the root.
    levels: Vec<Level<H::Domain>>,
    /// Leaves per run.
    run: usize,
}

struct Level<D> {
    /// Leaves under one node of this level.
    span: usize,
    /// Nodes over a leaf of its own, or over more than one run.
    nodes: BTreeMap<usize, D>,
    /// By run: the value of any other node. Empty where a node spans several runs.
    runs: Vec<D>,
}

impl<D: Copy> Level<D> {
    fn node(&self, i: usize, run: usize) -> D {
        match self.nodes.get(&i) {
            Some(v) => *v,
            None => self.runs[i * self.span / run],
        }
    }
}

fn hash<H: Hasher>(children: &[H::Domain], height: usize) -> H::Domain {
    // As storage-proofs' `InclusionPath::root` hashes a path: the proofs must verify there.
    let mut f = H::Function::default();
    f.reset();
    f.multi_node(children, height)
}

impl<H: Hasher> SparseTree<H> {
    /// `runs` split the leaves into equal runs; `leaves` are those with values of their own.
    fn new(
        arities: Vec<usize>,
        runs: Vec<H::Domain>,
        leaves: BTreeMap<usize, H::Domain>,
    ) -> Result<Self, FilecoinError> {
        let count: usize = arities.iter().product();
        if runs.is_empty() || !count.is_multiple_of(runs.len()) {
            return Err(FilecoinError::FilecoinProofs(format!(
                "sparse tree: {} runs do not split {count} leaves",
                runs.len()
            )));
        }
        if let Some((&i, _)) = leaves.range(count..).next() {
            return Err(FilecoinError::FilecoinProofs(format!(
                "sparse tree: leaf {i} is outside its {count} leaves"
            )));
        }
        let run = count / runs.len();
        let mut levels = vec![Level {
            span: 1,
            nodes: leaves,
            runs,
        }];
        for (height, &arity) in arities.iter().enumerate() {
            let below = &levels[height];
            let span = below.span * arity;
            let (runs, parents): (Vec<_>, BTreeSet<usize>) = if span <= run {
                let runs = below
                    .runs
                    .iter()
                    .map(|v| hash::<H>(&vec![*v; arity], height))
                    .collect();
                (runs, below.nodes.keys().map(|i| i / arity).collect())
            } else {
                (Vec::new(), (0..count / span).collect())
            };
            let nodes = parents
                .into_iter()
                .map(|p| {
                    let children: Vec<_> = (p * arity..(p + 1) * arity)
                        .map(|i| below.node(i, run))
                        .collect();
                    (p, hash::<H>(&children, height))
                })
                .collect();
            levels.push(Level { span, nodes, runs });
        }
        Ok(Self {
            arities,
            levels,
            run,
        })
    }

    fn root(&self) -> H::Domain {
        self.levels[self.levels.len() - 1].node(0, self.run)
    }

    fn node(&self, level: usize, i: usize) -> H::Domain {
        self.levels[level].node(i, self.run)
    }

    /// The proof of leaf `i`, in storage-proofs' form (its last one or two path elements are
    /// the sub and top trees' where the shape has them).
    fn proof<B, S, T>(&self, leaf: usize) -> MerkleProof<H, B, S, T>
    where
        B: filecoin_hashers::PoseidonArity,
        S: filecoin_hashers::PoseidonArity,
        T: filecoin_hashers::PoseidonArity,
    {
        let mut path = Vec::with_capacity(self.arities.len());
        let mut i = leaf;
        for (height, &arity) in self.arities.iter().enumerate() {
            let first = i / arity * arity;
            let siblings = (first..first + arity)
                .filter(|&j| j != i)
                .map(|j| self.node(height, j))
                .collect();
            path.push((siblings, i % arity));
            i /= arity;
        }
        MerkleProof::from_parts(self.node(0, leaf), self.root(), path)
    }
}

/// The arities of `Tree`'s levels, bottom up, for a sector of `nodes` leaves.
fn shape<Tree: MerkleTreeTrait>(nodes: usize) -> Result<Vec<usize>, FilecoinError> {
    let base = Tree::Arity::to_usize();
    let upper = upper_arities::<Tree>();
    let mut base_leaves = nodes / upper.iter().product::<usize>();
    let mut arities = Vec::new();
    while base_leaves > 1 && base_leaves.is_multiple_of(base) {
        base_leaves /= base;
        arities.push(base);
    }
    if base_leaves != 1 {
        return Err(FilecoinError::FilecoinProofs(format!(
            "{nodes} nodes do not fit a tree of arities {base}/{upper:?}"
        )));
    }
    arities.extend(upper);
    Ok(arities)
}

fn binary_shape(nodes: usize) -> Vec<usize> {
    vec![2; nodes.trailing_zeros() as usize]
}

/// 32 random bytes below 2^254, as filecoin-proofs keeps tickets, seeds, labels and data.
fn random_fr32(rng: &mut dyn RngCore) -> [u8; 32] {
    let mut b = [0u8; 32];
    rng.fill_bytes(&mut b);
    b[31] &= 0x3f;
    b
}

fn domain<D: Domain>(bytes: &[u8]) -> Result<D, FilecoinError> {
    D::try_from_bytes(bytes).map_err(upstream)
}

fn bytes32(d: &impl Domain) -> [u8; 32] {
    let mut b = [0u8; 32];
    b.copy_from_slice(&d.into_bytes());
    b
}

/// A PoRep C1 output of a sector that was never sealed (see the module's doc), as filecoin-ffi
/// writes it. filecoin-proofs' `verify_all_partitions` accepts its vanilla proofs, so its C2
/// is accepted by `verify_seal` with `miner_id` and `sector_id`.
pub fn sparse_seal(
    seal_proof: SealProof,
    miner_id: u64,
    sector_id: u64,
    rng: &mut dyn RngCore,
) -> Result<SealCommit, FilecoinError> {
    let prover_id = prover_id_from_miner(miner_id);
    let value = with_shape!(
        seal_proof,
        Tree,
        sparse_c1::<Tree>(&seal_proof.config(), prover_id, sector_id, rng)
            .and_then(|c1| serde_json::to_value(&c1)
                .map_err(|e| FilecoinError::FilecoinProofs(format!("writing C1 JSON: {e}"))))
    )?;
    let (c1_json, comm_r) = api_c1_json(seal_proof, value)?;
    Ok(SealCommit {
        seal_proof,
        miner_id,
        sector_id,
        c1_json,
        comm_r,
    })
}

type TreeDomain<Tree> = <<Tree as MerkleTreeTrait>::Hasher as Hasher>::Domain;

/// A PoRep label: SHA-256 of the replica id, layer and node, then the parents' labels
/// (`LabelingProof::create_label`, which is private).
fn label<D: Domain>(
    replica_id: &D,
    layer: u32,
    node: u64,
    parents: &[D],
) -> Result<D, FilecoinError> {
    let mut bytes = Vec::with_capacity(64 + 32 * parents.len());
    bytes.extend_from_slice(replica_id.as_ref());
    bytes.extend_from_slice(&layer.to_be_bytes());
    bytes.extend_from_slice(&node.to_be_bytes());
    bytes.resize(64, 0);
    for p in parents {
        bytes.extend_from_slice(p.as_ref());
    }
    domain(<<Sha256Hasher as Hasher>::Function as HashFunction<_>>::hash(&bytes).as_ref())
}

fn sparse_c1<Tree: 'static + MerkleTreeTrait>(
    config: &PoRepConfig,
    prover_id: [u8; 32],
    sector_id: u64,
    rng: &mut dyn RngCore,
) -> Result<SealCommitPhase1Output<Tree>, FilecoinError> {
    let pp = filecoin_proofs::parameters::public_params::<Tree>(config).map_err(upstream)?;
    let Challenges::Interactive(challenges) = &pp.challenges else {
        return Err(FilecoinError::FilecoinProofs(
            "sparse PoRep: only interactive PoRep challenges".into(),
        ));
    };
    let nodes = pp.graph.size();
    let layers = pp.num_layers;

    let data: <DefaultPieceHasher as Hasher>::Domain = domain(&random_fr32(rng))?;
    let tree_d =
        SparseTree::<DefaultPieceHasher>::new(binary_shape(nodes), vec![data], BTreeMap::new())?;
    let comm_d = tree_d.root();
    let ticket = random_fr32(rng);
    let seed = random_fr32(rng);
    let replica_id = generate_replica_id::<Tree::Hasher, _>(
        &prover_id,
        sector_id,
        &ticket,
        comm_d,
        &config.porep_id,
    );
    let by_partition: Vec<Vec<usize>> = (0..usize::from(config.partitions))
        .map(|k| challenges.derive(nodes, &replica_id, &seed, k as u8))
        .collect();
    let challenged: BTreeSet<usize> = by_partition.iter().flatten().copied().collect();

    let base_degree = pp.graph.base_graph().degree();
    let mut parents_of = BTreeMap::new();
    for &c in &challenged {
        let mut p = vec![0u32; pp.graph.degree()];
        pp.graph.parents(c, &mut p).map_err(upstream)?;
        parents_of.insert(c, p.into_iter().map(|p| p as usize).collect::<Vec<_>>());
    }
    // Every opened column: a parent's labels are random, a challenged node's are computed below
    // in node order within each layer (a DRG parent comes before its child, an expander parent
    // is read from the layer before).
    let mut columns: BTreeMap<usize, Vec<TreeDomain<Tree>>> = BTreeMap::new();
    for &p in parents_of.values().flatten() {
        if !challenged.contains(&p) && !columns.contains_key(&p) {
            let labels = (0..layers)
                .map(|_| domain(&random_fr32(rng)))
                .collect::<Result<_, _>>()?;
            columns.insert(p, labels);
        }
    }
    for &c in &challenged {
        columns.insert(c, vec![TreeDomain::<Tree>::default(); layers]);
    }
    let parent_labels =
        |columns: &BTreeMap<usize, Vec<TreeDomain<Tree>>>, c: usize, layer: usize| {
            let parents = &parents_of[&c];
            let used = if layer == 1 {
                base_degree
            } else {
                parents.len()
            };
            let data: Vec<TreeDomain<Tree>> = parents[..used]
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    columns[p][if i < base_degree {
                        layer - 1
                    } else {
                        layer - 2
                    }]
                })
                .collect();
            // Repeated to TOTAL_PARENTS, as the labeling hashes them.
            data.iter()
                .copied()
                .cycle()
                .take(TOTAL_PARENTS)
                .collect::<Vec<_>>()
        };
    for layer in 1..=layers {
        for &c in &challenged {
            let parents = parent_labels(&columns, c, layer);
            let l = label(&replica_id, layer as u32, c as u64, &parents)?;
            columns
                .get_mut(&c)
                .expect("every challenged column is there")[layer - 1] = l;
        }
    }

    let arities = shape::<Tree>(nodes)?;
    let data_fr: Fr = data.into();
    let replica: BTreeMap<usize, TreeDomain<Tree>> = challenged
        .iter()
        .map(|&c| {
            let key: Fr = columns[&c][layers - 1].into();
            (c, (key + data_fr).into())
        })
        .collect();
    let column_of =
        |n: usize| Column::<Tree::Hasher>::new(n as u32, columns[&n].clone()).map_err(upstream);
    let column_leaves = columns
        .keys()
        .map(|&n| Ok((n, column_of(n)?.hash().into())))
        .collect::<Result<BTreeMap<_, _>, FilecoinError>>()?;
    let zero = TreeDomain::<Tree>::default();
    let tree_c = SparseTree::<Tree::Hasher>::new(arities.clone(), vec![zero], column_leaves)?;
    let tree_r = SparseTree::<Tree::Hasher>::new(arities, vec![zero], replica)?;
    let comm_c = tree_c.root();
    let comm_r_last = tree_r.root();
    let comm_r = <Tree::Hasher as Hasher>::Function::hash2(&comm_c, &comm_r_last);

    let column_proof =
        |n: usize| ColumnProof::from_column(column_of(n)?, tree_c.proof(n)).map_err(upstream);
    let vanilla_proofs = by_partition
        .iter()
        .map(|cs| {
            cs.iter()
                .map(|&c| {
                    let parents = &parents_of[&c];
                    Ok(stacked::Proof {
                        comm_d_proofs: tree_d.proof(c),
                        comm_r_last_proof: tree_r.proof(c),
                        replica_column_proofs: ReplicaColumnProof {
                            c_x: column_proof(c)?,
                            drg_parents: parents[..base_degree]
                                .iter()
                                .map(|&p| column_proof(p))
                                .collect::<Result<_, _>>()?,
                            exp_parents: parents[base_degree..]
                                .iter()
                                .map(|&p| column_proof(p))
                                .collect::<Result<_, _>>()?,
                        },
                        labeling_proofs: (1..=layers)
                            .map(|l| {
                                LabelingProof::new(
                                    l as u32,
                                    c as u64,
                                    parent_labels(&columns, c, l),
                                )
                            })
                            .collect(),
                        encoding_proof: EncodingProof::new(
                            layers as u32,
                            c as u64,
                            parent_labels(&columns, c, layers),
                        ),
                    })
                })
                .collect::<Result<Vec<_>, FilecoinError>>()
        })
        .collect::<Result<Vec<_>, _>>()?;

    let public = stacked::PublicInputs {
        replica_id,
        seed: Some(seed),
        tau: Some(stacked::Tau { comm_d, comm_r }),
        k: None,
    };
    let valid = StackedDrg::<Tree, DefaultPieceHasher>::verify_all_partitions(
        &pp,
        &public,
        &vanilla_proofs,
    )
    .map_err(upstream)?;
    if !valid {
        return Err(FilecoinError::FilecoinProofs(
            "sparse PoRep: filecoin-proofs rejects the generated vanilla proofs".into(),
        ));
    }
    Ok(SealCommitPhase1Output {
        vanilla_proofs,
        comm_r: bytes32(&comm_r),
        comm_d: bytes32(&comm_d),
        replica_id,
        seed,
        ticket,
    })
}

/// PoSt vanilla proofs of `sector_ids` (miner `miner_id`'s, never sealed: see the module's
/// doc), as [`crate::workload::post_vanilla_proofs`] returns them: the bincode of
/// `Vec<FallbackPoStSectorProof<Tree>>`, in `sector_ids`' order.
pub fn sparse_post(
    proof: PostProof,
    miner_id: u64,
    sector_ids: &[u64],
    randomness: [u8; 32],
    rng: &mut dyn RngCore,
) -> Result<Vec<u8>, FilecoinError> {
    with_shape!(
        proof.sector,
        Tree,
        sparse_post_tree::<Tree>(
            proof,
            prover_id_from_miner(miner_id),
            sector_ids,
            randomness,
            rng
        )
    )
}

fn sparse_post_tree<Tree: 'static + MerkleTreeTrait>(
    proof: PostProof,
    prover_id: [u8; 32],
    sector_ids: &[u64],
    randomness: [u8; 32],
    rng: &mut dyn RngCore,
) -> Result<Vec<u8>, FilecoinError> {
    let config = proof.config()?;
    let ids: Vec<SectorId> = sector_ids.iter().map(|&s| SectorId::from(s)).collect();
    let challenges =
        generate_fallback_sector_challenges::<Tree>(&config, &randomness, &ids, prover_id)
            .map_err(upstream)?;
    let nodes = (proof.sector.sector_size() / 32) as usize;
    let arities = shape::<Tree>(nodes)?;
    let zero = TreeDomain::<Tree>::default();
    let mut proofs: Vec<FallbackPoStSectorProof<Tree>> = Vec::with_capacity(ids.len());
    // WinningPoSt challenges its one sector only.
    for id in &ids {
        let Some(cs) = challenges.get(id) else {
            continue;
        };
        let leaves = cs
            .iter()
            .map(|&c| Ok((c as usize, domain(&random_fr32(rng))?)))
            .collect::<Result<BTreeMap<_, _>, FilecoinError>>()?;
        let tree_r = SparseTree::<Tree::Hasher>::new(arities.clone(), vec![zero], leaves)?;
        let comm_c: TreeDomain<Tree> = domain(&random_fr32(rng))?;
        let comm_r_last = tree_r.root();
        let inclusion_proofs = cs.iter().map(|&c| tree_r.proof(c as usize)).collect();
        proofs.push(FallbackPoStSectorProof {
            sector_id: *id,
            comm_r: <Tree::Hasher as Hasher>::Function::hash2(&comm_c, &comm_r_last),
            vanilla_proof: PostVanillaProof {
                sectors: vec![SectorProof {
                    inclusion_proofs,
                    comm_c,
                    comm_r_last,
                }],
            },
        });
    }
    // filecoin-proofs' check of each partition's vanilla proofs, as the prover runs it.
    let st = PostStatement {
        randomness,
        prover_id,
    };
    let per_partition = match proof.kind {
        PostKind::Window => config.sector_count,
        PostKind::Winning => proofs.len().max(1),
    };
    for (k, chunk) in proofs.chunks(per_partition).enumerate() {
        post_circuit("sparse PoSt", proof, &st, chunk, k)?;
    }
    bincode::serialize(&proofs)
        .map_err(|e| FilecoinError::FilecoinProofs(format!("writing vanilla proofs: {e}")))
}

/// A SnapDeals update of a sector that was never sealed (see the module's doc): its statement
/// and the bincode of `Vec<PartitionProof<Tree>>`, as [`crate::workload::snap_update`] returns
/// them. filecoin-proofs' `verify_all_partitions` accepts the partition proofs.
pub fn sparse_snap(
    seal_proof: SealProof,
    rng: &mut dyn RngCore,
) -> Result<(SnapStatement, Vec<u8>), FilecoinError> {
    with_shape!(seal_proof, Tree, sparse_snap_tree::<Tree>(seal_proof, rng))
}

fn sparse_snap_tree<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    seal_proof: SealProof,
    rng: &mut dyn RngCore,
) -> Result<(SnapStatement, Vec<u8>), FilecoinError> {
    type TreeD = Sha256Hasher;
    let nodes = (seal_proof.sector_size() / 32) as usize;
    let pp = SnapPublicParams::from_sector_size(seal_proof.sector_size());
    let h = h_default(nodes);
    let arities = shape::<Tree>(nodes)?;
    let comm_c: TreeDomain<Tree> = domain(&random_fr32(rng))?;
    let old: TreeDomain<Tree> = domain(&random_fr32(rng))?;
    let data: <TreeD as Hasher>::Domain = domain(&random_fr32(rng))?;

    let tree_r_old = SparseTree::<Tree::Hasher>::new(arities.clone(), vec![old], BTreeMap::new())?;
    let tree_d = SparseTree::<TreeD>::new(binary_shape(nodes), vec![data], BTreeMap::new())?;
    let comm_r_old = <Tree::Hasher as Hasher>::Function::hash2(&comm_c, &tree_r_old.root());
    let comm_d_new = tree_d.root();
    let phi = phi(&comm_d_new, &comm_r_old);
    // new = old + data * rho(phi, high h bits of the node): uniform over each of 2^h runs.
    let (old_fr, data_fr): (Fr, Fr) = (old.into(), data.into());
    let runs = (0..1u32 << h)
        .map(|high| (old_fr + data_fr * rho(&phi, high)).into())
        .collect();
    let tree_r_new = SparseTree::<Tree::Hasher>::new(arities, runs, BTreeMap::new())?;
    let comm_r_new = <Tree::Hasher as Hasher>::Function::hash2(&comm_c, &tree_r_new.root());

    let apex_height = pp.challenge_bit_len - pp.partition_bit_len - pp.apex_leaf_bit_len;
    let partitions: Vec<PartitionProof<Tree>> = (0..pp.partition_count)
        .map(|k| PartitionProof {
            comm_c,
            apex_leafs: (k * pp.apex_leaf_count..(k + 1) * pp.apex_leaf_count)
                .map(|i| tree_d.node(apex_height, i))
                .collect(),
            challenge_proofs: SnapChallenges::new(nodes, comm_r_new, k)
                .map(|c| ChallengeProof {
                    proof_r_old: tree_r_old.proof(c as usize),
                    proof_d_new: tree_d.proof(c as usize),
                    proof_r_new: tree_r_new.proof(c as usize),
                })
                .collect(),
        })
        .collect();

    let public = SnapPublicInputs {
        k: 0,
        comm_r_old,
        comm_d_new,
        comm_r_new,
        h,
    };
    let valid = EmptySectorUpdate::<Tree>::verify_all_partitions(&pp, &public, &partitions)
        .map_err(upstream)?;
    if !valid {
        return Err(FilecoinError::FilecoinProofs(
            "sparse SnapDeals: filecoin-proofs rejects the generated partition proofs".into(),
        ));
    }
    let st = SnapStatement {
        comm_r_old: bytes32(&comm_r_old),
        comm_r_new: bytes32(&comm_r_new),
        comm_d_new: bytes32(&comm_d_new),
    };
    let bytes = bincode::serialize(&partitions)
        .map_err(|e| FilecoinError::FilecoinProofs(format!("writing partition proofs: {e}")))?;
    Ok((st, bytes))
}
