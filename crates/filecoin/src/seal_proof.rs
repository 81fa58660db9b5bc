//! The registered PoRep proofs cuzk proves: `StackedDrg*V1_1`, one per sector size.

use filecoin_proofs::{MerkleTreeTrait, PoRepConfig};
use storage_proofs_core::api_version::ApiVersion;
use typenum::Unsigned;

use crate::FilecoinError;
use crate::error::upstream;

/// A `StackedDrg{size}V1_1` registered seal proof (interactive PoRep, API version 1.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Deserialize)]
pub enum SealProof {
    #[serde(rename = "StackedDrg2KiBV1_1")]
    StackedDrg2KiBV1_1,
    #[serde(rename = "StackedDrg8MiBV1_1")]
    StackedDrg8MiBV1_1,
    #[serde(rename = "StackedDrg512MiBV1_1")]
    StackedDrg512MiBV1_1,
    #[serde(rename = "StackedDrg32GiBV1_1")]
    StackedDrg32GiBV1_1,
    #[serde(rename = "StackedDrg64GiBV1_1")]
    StackedDrg64GiBV1_1,
}

impl SealProof {
    pub const ALL: [SealProof; 5] = [
        SealProof::StackedDrg2KiBV1_1,
        SealProof::StackedDrg8MiBV1_1,
        SealProof::StackedDrg512MiBV1_1,
        SealProof::StackedDrg32GiBV1_1,
        SealProof::StackedDrg64GiBV1_1,
    ];

    pub fn sector_size(self) -> u64 {
        match self {
            SealProof::StackedDrg2KiBV1_1 => 2 << 10,
            SealProof::StackedDrg8MiBV1_1 => 8 << 20,
            SealProof::StackedDrg512MiBV1_1 => 512 << 20,
            SealProof::StackedDrg32GiBV1_1 => 32 << 30,
            SealProof::StackedDrg64GiBV1_1 => 64 << 30,
        }
    }

    /// The V1_1 proof of a sector size in bytes.
    pub fn from_sector_size(bytes: u64) -> Result<Self, FilecoinError> {
        Self::ALL
            .into_iter()
            .find(|p| p.sector_size() == bytes)
            .ok_or(FilecoinError::UnknownSectorSize(bytes))
    }

    /// Its number in the chain's registry (`RegisteredSealProof`): 5..=9.
    pub fn registered_number(self) -> u64 {
        5 + Self::ALL.iter().position(|&p| p == self).unwrap_or(0) as u64
    }

    pub fn name(self) -> &'static str {
        match self {
            SealProof::StackedDrg2KiBV1_1 => "StackedDrg2KiBV1_1",
            SealProof::StackedDrg8MiBV1_1 => "StackedDrg8MiBV1_1",
            SealProof::StackedDrg512MiBV1_1 => "StackedDrg512MiBV1_1",
            SealProof::StackedDrg32GiBV1_1 => "StackedDrg32GiBV1_1",
            SealProof::StackedDrg64GiBV1_1 => "StackedDrg64GiBV1_1",
        }
    }

    /// The PoRep id: the registered number, little endian, in the first 8 of 32 bytes.
    pub fn porep_id(self) -> [u8; 32] {
        let mut id = [0u8; 32];
        id[..8].copy_from_slice(&self.registered_number().to_le_bytes());
        id
    }

    /// filecoin-proofs' configuration (its partition count comes from filecoin-proofs).
    pub fn config(self) -> PoRepConfig {
        PoRepConfig::new_groth16(self.sector_size(), self.porep_id(), ApiVersion::V1_1_0)
    }

    pub fn partitions(self) -> usize {
        usize::from(self.config().partitions)
    }
}

impl std::fmt::Display for SealProof {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for SealProof {
    type Err = FilecoinError;

    /// A registered proof name (`StackedDrg2KiBV1_1`) or a sector size (`2KiB`, `32GiB`).
    fn from_str(s: &str) -> Result<Self, FilecoinError> {
        Self::ALL
            .into_iter()
            .find(|p| {
                p.name() == s
                    || p.name()
                        .trim_start_matches("StackedDrg")
                        .trim_end_matches("V1_1")
                        == s
            })
            .ok_or_else(|| FilecoinError::UnknownSealProof(s.to_string()))
    }
}

/// Runs `$body` with `$tree` the tree shape of `$sector` (a [`SealProof`]).
macro_rules! with_shape {
    ($sector:expr, $tree:ident, $body:expr) => {
        match $sector {
            $crate::SealProof::StackedDrg2KiBV1_1
            | $crate::SealProof::StackedDrg8MiBV1_1
            | $crate::SealProof::StackedDrg512MiBV1_1 => {
                type $tree = filecoin_proofs::SectorShapeBase;
                $body
            }
            $crate::SealProof::StackedDrg32GiBV1_1 => {
                type $tree = filecoin_proofs::SectorShapeSub8;
                $body
            }
            $crate::SealProof::StackedDrg64GiBV1_1 => {
                type $tree = filecoin_proofs::SectorShapeTop2;
                $body
            }
        }
    };
}
pub(crate) use with_shape;

impl SealProof {
    /// filecoin-proofs' cache id of this PoRep circuit with the tree shape `Tree` (its
    /// parameter files are `v28-{id}.params` and `.vk`).
    pub(crate) fn cache_id<Tree: 'static + filecoin_proofs::MerkleTreeTrait>(
        self,
    ) -> Result<String, FilecoinError> {
        self.config()
            .get_cache_identifier::<Tree>()
            .map_err(upstream)
    }
}

/// The arities of `Tree`'s levels above its base trees, bottom up: its sub-tree's and top
/// tree's, those it has.
pub(crate) fn upper_arities<Tree: MerkleTreeTrait>() -> Vec<usize> {
    [
        Tree::SubTreeArity::to_usize(),
        Tree::TopTreeArity::to_usize(),
    ]
    .into_iter()
    .filter(|&a| a > 0)
    .collect()
}
