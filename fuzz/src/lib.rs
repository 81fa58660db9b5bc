//! Fuzz targets for every parser cuzk has: its own files, bellperson parameters, iden3's r1cs
//! and wtns, snarkjs's zkey and JSON, the daemon's TOML config and gRPC requests, and the
//! Filecoin inputs (PoRep C1 output, PoSt and SnapDeals vanilla proofs).
//!
//! Each target is one function over raw bytes, shared by the libFuzzer driver
//! (`src/bin/fuzz.rs`, built and run by `cargo xtask fuzz`) and by `cargo test`, which replays
//! the committed corpus (`corpus/<target>/`) and every crash found (`regressions/<target>/`).
//! A target may return an error from the parser under test; it must never panic, hang, or
//! allocate memory the input does not pay for (the driver runs with a malloc limit).

use std::path::{Path, PathBuf};

pub mod daemon;
pub mod filecoin;
mod files;

/// What a parser made of one input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The input was accepted (a valid file, or a request the daemon served).
    Accepted,
    /// The parser returned an error.
    Rejected,
}

impl<T, E> From<Result<T, E>> for Outcome {
    fn from(r: Result<T, E>) -> Self {
        match r {
            Ok(_) => Outcome::Accepted,
            Err(_) => Outcome::Rejected,
        }
    }
}

/// One fuzz target: its name (the corpus folder) and its harness.
#[derive(Debug, Clone, Copy)]
pub struct Target {
    pub name: &'static str,
    pub run: fn(&[u8]) -> Outcome,
}

/// Every target, in the order the smoke runs them.
pub const TARGETS: &[Target] = &[
    Target {
        name: "cuzk_r1cs",
        run: files::cuzk_r1cs,
    },
    Target {
        name: "cuzk_pk",
        run: files::cuzk_pk,
    },
    Target {
        name: "cuzk_witness",
        run: files::cuzk_witness,
    },
    Target {
        name: "cuzk_proof_vk",
        run: files::cuzk_proof_vk,
    },
    Target {
        name: "bellperson_params",
        run: files::bellperson_params,
    },
    Target {
        name: "bellperson_vk_proof",
        run: files::bellperson_vk_proof,
    },
    Target {
        name: "iden3_r1cs",
        run: files::iden3_r1cs,
    },
    Target {
        name: "iden3_wtns",
        run: files::iden3_wtns,
    },
    Target {
        name: "zkey",
        run: files::zkey,
    },
    Target {
        name: "snarkjs_json",
        run: files::snarkjs_json,
    },
    Target {
        name: "daemon_config",
        run: daemon::config,
    },
    Target {
        name: "daemon_requests",
        run: daemon::requests,
    },
    Target {
        name: "filecoin_c1",
        run: filecoin::c1,
    },
    Target {
        name: "filecoin_post_vanilla",
        run: filecoin::post_vanilla,
    },
    Target {
        name: "filecoin_snap_vanilla",
        run: filecoin::snap_vanilla,
    },
];

/// The target called `name`.
pub fn target(name: &str) -> Option<&'static Target> {
    TARGETS.iter().find(|t| t.name == name)
}

/// This crate's folder (the corpus and regressions live beside the sources).
pub fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn corpus_dir(name: &str) -> PathBuf {
    crate_dir().join("corpus").join(name)
}

pub fn regressions_dir(name: &str) -> PathBuf {
    crate_dir().join("regressions").join(name)
}

/// The files of a folder, sorted (none when it does not exist).
pub fn files_in(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    match std::fs::read_dir(dir) {
        Ok(rd) => {
            for e in rd {
                let p = e?.path();
                if p.is_file() {
                    out.push(p);
                }
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    out.sort();
    Ok(out)
}

/// Small circuits and keys shared by the seeds and the harnesses that need a circuit.
pub mod fixture {
    use cuzk_groth16::{ProvingKey, R1cs, ToxicWaste, Witness};
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    /// A satisfied 2^`log`-row circuit with one public input, its key and its witness.
    pub fn circuit(log: u32, seed: u64) -> (R1cs, Witness, ProvingKey) {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let (r1cs, w) =
            cuzk_groth16::testing::demo::circuit(log, 1, &mut rng).expect("a small demo circuit");
        let (pk, _) = cuzk_groth16::generate_parameters_with_toxic_waste(
            &r1cs,
            &ToxicWaste::random(&mut rng),
        )
        .expect("setup of a small circuit");
        (r1cs, w, pk)
    }
}

/// The largest single allocation a harness may make. Inputs are at most 64 KiB, so anything
/// near this size was sized by a length field the input did not pay for.
pub const ALLOC_CAP: usize = 64 << 20;

/// The system allocator, aborting on an allocation above [`ALLOC_CAP`] (libFuzzer's own
/// malloc limit needs a sanitizer runtime, which stable Rust does not link). The fuzz driver
/// and the replay test install it as their global allocator, so both report such inputs.
#[derive(Debug)]
pub struct CappedAlloc;

impl CappedAlloc {
    fn check(size: usize) {
        if size > ALLOC_CAP {
            // Formatting integers into stderr does not allocate.
            eprintln!(
                "cuzk-fuzz: an allocation of {size} bytes (cap {ALLOC_CAP}): unbounded by the input"
            );
            std::process::abort();
        }
    }
}

// SAFETY: every call is forwarded to `System` with the caller's arguments unchanged.
unsafe impl std::alloc::GlobalAlloc for CappedAlloc {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        Self::check(layout.size());
        // SAFETY: the caller's contract for `alloc` is the one `System` needs.
        unsafe { std::alloc::System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        Self::check(layout.size());
        // SAFETY: as for `alloc`.
        unsafe { std::alloc::System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        // SAFETY: `ptr` came from `System` with this layout (every allocation goes there).
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        Self::check(new_size);
        // SAFETY: as for `dealloc`; `new_size` is the caller's.
        unsafe { std::alloc::System.realloc(ptr, layout, new_size) }
    }
}
