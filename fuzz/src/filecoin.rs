//! The Filecoin inputs a storage provider hands cuzk: a PoRep C1 output (JSON, in its three
//! forms) and the PoSt and SnapDeals vanilla proofs (bincode).
//!
//! The first byte of an input picks what the rest is read as (the registered proof a caller
//! states beside the bytes), so one corpus covers every sector size's tree shape.

use cuzk_filecoin::{C1Output, PostKind, PostProof, PostVanilla, SealProof, SnapVanilla};

use crate::Outcome;

const FILE: &str = "fuzz-input";

fn split(data: &[u8]) -> Option<(u8, &[u8])> {
    data.split_first().map(|(b, rest)| (*b, rest))
}

/// First byte 0: no stated proof (the JSON must name it); k > 0: stated `SealProof::ALL[k-1]`.
pub(crate) fn c1(data: &[u8]) -> Outcome {
    let Some((pick, rest)) = split(data) else {
        return Outcome::Rejected;
    };
    let stated = match usize::from(pick) % (SealProof::ALL.len() + 1) {
        0 => None,
        k => Some(SealProof::ALL[k - 1]),
    };
    C1Output::parse(FILE, rest, stated).into()
}

/// The PoSt kinds a first byte picks: WindowPoSt and WinningPoSt of every sector size.
fn post_proof(pick: u8) -> PostProof {
    let sector = SealProof::ALL[usize::from(pick / 2) % SealProof::ALL.len()];
    if pick.is_multiple_of(2) {
        PostProof::window(sector)
    } else {
        PostProof::winning(sector)
    }
}

pub(crate) fn post_vanilla(data: &[u8]) -> Outcome {
    let Some((pick, rest)) = split(data) else {
        return Outcome::Rejected;
    };
    PostVanilla::parse(FILE, rest, post_proof(pick)).into()
}

pub(crate) fn snap_vanilla(data: &[u8]) -> Outcome {
    let Some((pick, rest)) = split(data) else {
        return Outcome::Rejected;
    };
    let seal_proof = SealProof::ALL[usize::from(pick) % SealProof::ALL.len()];
    SnapVanilla::parse(FILE, rest, seal_proof).into()
}

/// The first byte that makes [`post_vanilla`] read the rest as `proof`'s vanilla proofs.
pub fn post_pick(proof: PostProof) -> u8 {
    2 * seal_pick(proof.sector) + u8::from(proof.kind == PostKind::Winning)
}

/// The first byte that makes [`snap_vanilla`] read the rest as `seal_proof`'s update proofs.
pub fn seal_pick(seal_proof: SealProof) -> u8 {
    let k = SealProof::ALL
        .iter()
        .position(|&p| p == seal_proof)
        .expect("a listed seal proof");
    k as u8
}
