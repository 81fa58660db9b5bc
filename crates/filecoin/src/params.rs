//! filecoin-proofs' parameter files, found by filecoin-proofs' own names.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use cuzk_formats::{BpParameters, BpVerifyingKey, Digest, PointChecks};
use storage_proofs_core::parameter_cache::{metadata_id, parameter_id, verifying_key_id};

use crate::FilecoinError;

/// filecoin-proofs' default parameter directory.
const DEFAULT_DIR: &str = "/var/tmp/filecoin-proof-parameters/";

/// A directory of locally generated parameters has this file, and no published file is ever
/// beside it: both kinds have the same names.
pub const GENERATED_MARKER: &str = "GENERATED-BY-CUZK";

/// The BLAKE3 digest cuzk records beside a parameters file after one full point check, as
/// `blake3:HEX`: later loads hash the file instead of checking every point.
const DIGEST_SUFFIX: &str = "cuzk-blake3";

/// Where the parameters are, and how far they are trusted.
#[derive(Clone, Debug)]
pub struct ParamStore {
    dir: PathBuf,
    /// `parameters.json`: file name → the first 16 bytes of its BLAKE2b-512, in hex.
    manifest: Option<(PathBuf, HashMap<String, String>)>,
}

#[derive(serde::Deserialize)]
struct ManifestEntry {
    digest: String,
}

impl ParamStore {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            manifest: None,
        }
    }

    /// `FIL_PROOFS_PARAMETER_CACHE`, else filecoin-proofs' default directory.
    pub fn from_env() -> Self {
        Self::new(
            std::env::var_os("FIL_PROOFS_PARAMETER_CACHE")
                .map_or_else(|| PathBuf::from(DEFAULT_DIR), PathBuf::from),
        )
    }

    /// Checks every parameters file against this `parameters.json` (filecoin-proofs'
    /// manifest of the published files) instead of cuzk's own digests.
    pub fn with_manifest(mut self, path: &Path) -> Result<Self, FilecoinError> {
        let file = path.display().to_string();
        let bytes =
            std::fs::read(path).map_err(|e| FilecoinError::io(format!("reading {file}"), e))?;
        let entries: HashMap<String, ManifestEntry> =
            serde_json::from_slice(&bytes).map_err(|source| FilecoinError::Json {
                file: file.clone(),
                path: String::new(),
                source,
            })?;
        let digests = entries.into_iter().map(|(k, v)| (k, v.digest)).collect();
        self.manifest = Some((path.to_path_buf(), digests));
        Ok(self)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `v28-{cache id}.params`, filecoin-proofs' name for a circuit's parameters.
    pub fn params_path(&self, cache_id: &str) -> PathBuf {
        self.dir.join(parameter_id(cache_id))
    }

    pub fn vk_path(&self, cache_id: &str) -> PathBuf {
        self.dir.join(verifying_key_id(cache_id))
    }

    fn digest_path(params: &Path) -> PathBuf {
        let mut p = params.as_os_str().to_owned();
        p.push(".");
        p.push(DIGEST_SUFFIX);
        PathBuf::from(p)
    }

    /// Loads a circuit's parameters: checked against `parameters.json` when one is given,
    /// else against the digest cuzk recorded, else point by point (and then the digest is
    /// recorded for next time).
    pub fn load_params(&self, cache_id: &str) -> Result<BpParameters, FilecoinError> {
        let path = self.params_path(cache_id);
        if !path.is_file() {
            return Err(FilecoinError::MissingParameters {
                path,
                circuit: cache_id.to_string(),
            });
        }
        let record = Self::digest_path(&path);
        let checks = match &self.manifest {
            Some((manifest, digests)) => {
                let name = parameter_id(cache_id);
                let hex = digests.get(&name).ok_or_else(|| FilecoinError::Field {
                    file: manifest.display().to_string(),
                    field: "(entries)",
                    reason: format!("no entry for {name}"),
                })?;
                let digest = Digest::parse(&format!("blake2b:{hex}")).map_err(|reason| {
                    FilecoinError::Field {
                        file: manifest.display().to_string(),
                        field: "digest",
                        reason: format!("{name}: {reason}"),
                    }
                })?;
                PointChecks::TrustedDigest(digest)
            }
            None if record.is_file() => {
                let text = std::fs::read_to_string(&record)
                    .map_err(|e| FilecoinError::io(format!("reading {}", record.display()), e))?;
                let digest = Digest::parse(text.trim()).map_err(|reason| FilecoinError::Field {
                    file: record.display().to_string(),
                    field: "digest",
                    reason,
                })?;
                PointChecks::TrustedDigest(digest)
            }
            None => PointChecks::Full,
        };
        let params = BpParameters::read(&path, &checks)?;
        if matches!(checks, PointChecks::Full) {
            // Fully checked: later loads trust its digest. A read-only directory only costs
            // those loads the full check again.
            if let Err(e) = record_digest(&path) {
                tracing::warn!("{e}");
            }
        }
        Ok(params)
    }

    /// Writes locally generated parameters (and their verifying key, metadata and digest)
    /// under filecoin-proofs' names. Refuses a directory that holds parameter files but no
    /// [`GENERATED_MARKER`]: those are published ones.
    pub fn write_generated(
        &self,
        cache_id: &str,
        sector_size: u64,
        params: &BpParameters,
    ) -> Result<(), FilecoinError> {
        self.claim_generated()?;
        let path = self.params_path(cache_id);
        let tmp = path.with_extension("params.partial");
        params.write_file(&tmp)?;
        std::fs::rename(&tmp, &path)
            .map_err(|e| FilecoinError::io(format!("renaming {}", tmp.display()), e))?;
        self.write_vk_and_metadata(cache_id, sector_size, &params.vk)?;
        record_digest(&path)
    }

    /// Writes the verifying key of a key made without a parameters file (held on a device, or
    /// a daemon's key made at load) under filecoin-proofs' name, for its verifier, and removes
    /// any parameters file of the circuit: it would hold another key. The directory must be
    /// one of generated parameters, as for [`Self::write_generated`].
    pub fn write_generated_vk(
        &self,
        cache_id: &str,
        sector_size: u64,
        vk: &BpVerifyingKey,
    ) -> Result<(), FilecoinError> {
        self.claim_generated()?;
        let params = self.params_path(cache_id);
        for stale in [Self::digest_path(&params), params] {
            match std::fs::remove_file(&stale) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(FilecoinError::io(
                        format!("removing {}", stale.display()),
                        e,
                    ));
                }
            }
        }
        self.write_vk_and_metadata(cache_id, sector_size, vk)
    }

    /// The `.vk` (whole or not at all: a verifier may read it meanwhile) and the `.meta` of a
    /// generated key.
    fn write_vk_and_metadata(
        &self,
        cache_id: &str,
        sector_size: u64,
        vk: &BpVerifyingKey,
    ) -> Result<(), FilecoinError> {
        let vk_path = self.vk_path(cache_id);
        let tmp = vk_path.with_extension("vk.partial");
        write_file(&tmp, &vk.to_bytes())?;
        std::fs::rename(&tmp, &vk_path)
            .map_err(|e| FilecoinError::io(format!("renaming {}", tmp.display()), e))?;
        let meta = serde_json::json!({ "sector_size": sector_size }).to_string();
        write_file(&self.dir.join(metadata_id(cache_id)), meta.as_bytes())
    }

    /// Marks the directory as one of generated parameters (creating it), unless it holds
    /// parameter files without the [`GENERATED_MARKER`]: published ones, which this refuses.
    pub fn claim_generated(&self) -> Result<(), FilecoinError> {
        let dir = &self.dir;
        std::fs::create_dir_all(dir)
            .map_err(|e| FilecoinError::io(format!("creating {}", dir.display()), e))?;
        let marker = dir.join(GENERATED_MARKER);
        if marker.is_file() {
            return Ok(());
        }
        let entries = std::fs::read_dir(dir)
            .map_err(|e| FilecoinError::io(format!("listing {}", dir.display()), e))?;
        let published = entries.filter_map(Result::ok).any(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.ends_with(".params") || name.ends_with(".vk")
        });
        if published {
            return Err(FilecoinError::MixedParameters {
                dir: dir.clone(),
                marker: GENERATED_MARKER,
            });
        }
        write_file(
            &marker,
            b"Parameters made locally by cuzk from random toxic waste: not Filecoin's.\n",
        )
    }

    /// Generates the parameters of the circuit filecoin-proofs names `cache_id` with cuzk's
    /// CPU setup from random toxic waste, unless they are there already, and writes them
    /// under filecoin-proofs' names (see [`ParamStore::write_generated`]). `first` makes one
    /// instance of the circuit: cuzk's synthesis needs its values, where filecoin-proofs'
    /// paramcache uses a blank circuit. Returns whether it generated them.
    pub(crate) fn generate_circuit<C: bellperson::Circuit<blstrs::Scalar>>(
        &self,
        cache_id: &str,
        sector_size: u64,
        first: impl FnOnce() -> Result<C, FilecoinError>,
        rng: &mut dyn rand::RngCore,
    ) -> Result<bool, FilecoinError> {
        self.with_generation_lock(|| {
            if self.params_path(cache_id).is_file() && self.vk_path(cache_id).is_file() {
                return Ok(false);
            }
            let (r1cs, _) = cuzk_bellpepper::synthesize(first()?).map_err(|e| {
                FilecoinError::Batch(cuzk_bellpepper::batch::BatchError::Synthesis {
                    index: 0,
                    source: e,
                })
            })?;
            let pk = cuzk_groth16::generate_parameters(&r1cs, rng).map_err(|e| {
                FilecoinError::Setup {
                    circuit: cache_id.to_string(),
                    reason: e.to_string(),
                }
            })?;
            let params = BpParameters::from_proving_key(&pk)?;
            self.write_generated(cache_id, sector_size, &params)?;
            Ok(true)
        })
    }

    /// Holds an exclusive lock on the directory's generation lock file while `f` runs, so
    /// that parallel processes generate each file once.
    pub(crate) fn with_generation_lock<T>(
        &self,
        f: impl FnOnce() -> Result<T, FilecoinError>,
    ) -> Result<T, FilecoinError> {
        std::fs::create_dir_all(&self.dir)
            .map_err(|e| FilecoinError::io(format!("creating {}", self.dir.display()), e))?;
        let path = self.dir.join(".cuzk-generate.lock");
        let lock = File::create(&path)
            .map_err(|e| FilecoinError::io(format!("creating {}", path.display()), e))?;
        lock.lock()
            .map_err(|e| FilecoinError::io(format!("locking {}", path.display()), e))?;
        let out = f();
        drop(lock);
        out
    }
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), FilecoinError> {
    let what = || format!("writing {}", path.display());
    let f = File::create(path).map_err(|e| FilecoinError::io(what(), e))?;
    let mut w = BufWriter::new(f);
    w.write_all(bytes)
        .and_then(|()| w.flush())
        .map_err(|e| FilecoinError::io(what(), e))
}

/// Hashes the file and records `blake3:HEX` beside it.
fn record_digest(params: &Path) -> Result<(), FilecoinError> {
    let mut h = blake3::Hasher::new();
    let f = File::open(params)
        .map_err(|e| FilecoinError::io(format!("reading {}", params.display()), e))?;
    h.update_reader(f)
        .map_err(|e| FilecoinError::io(format!("hashing {}", params.display()), e))?;
    let text = format!("blake3:{}\n", h.finalize().to_hex());
    write_file(&ParamStore::digest_path(params), text.as_bytes())
}

/// filecoin-proofs reads verifying keys from its own settings (`FIL_PROOFS_PARAMETER_CACHE`,
/// read once per process): `store` must be that directory, or this is an error saying so.
pub fn check_verifier_dir(store: &ParamStore) -> Result<(), FilecoinError> {
    let settings = storage_proofs_core::parameter_cache::parameter_cache_dir();
    if !same_dir(&settings, store.dir()) {
        return Err(FilecoinError::VerifierDir {
            settings,
            store: store.dir().to_path_buf(),
        });
    }
    Ok(())
}

fn same_dir(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}
