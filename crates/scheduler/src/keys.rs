//! Keys: where they come from, how one is loaded on each device, and unloading.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;

use cuzk_formats::{FormatError, PointChecks, cuzk};
use cuzk_groth16::testing::SimBackend;
use cuzk_groth16::{
    BackendError, Domain, GpuBackend, HeldCircuit, HeldKey, KeyRef, PreparedVerifyingKey,
    ProverBackend, ProvingKey, Query, R1cs, StagingNeeds,
};

use crate::engine::{Device, EngineError, Inner};
use crate::gate::{GateError, Permit};
use crate::job::{JobError, Priority};

/// Where a key comes from.
#[derive(Debug, Clone)]
pub enum KeySource {
    Memory {
        pk: Arc<ProvingKey>,
        r1cs: Arc<R1cs>,
    },
    /// cuzk's proving-key and circuit files, the key's points checked as `checks` says.
    Files {
        pk: std::path::PathBuf,
        r1cs: std::path::PathBuf,
        checks: PointChecks,
    },
    /// A key made on an engine's GPU by [`GpuBackend::generate_key`] (on the [`Gpu`] of
    /// [`crate::Engine::gpu`]), whose points only `backend` holds: it loads on that device
    /// alone.
    ///
    /// [`Gpu`]: cuzk_gpu::Gpu
    Held {
        pk: Arc<HeldKey>,
        r1cs: Arc<R1cs>,
        backend: Arc<GpuBackend>,
        device: usize,
    },
}
/// A key as loaded on one device.
pub(crate) struct Loaded {
    pub(crate) backend: Arc<dyn ProverBackend>,
    pub(crate) needs: StagingNeeds,
    /// Device bytes held between proofs: key points and the circuit.
    pub(crate) resident: u64,
    /// The circuit's matrices where the backend evaluates them: its proofs skip the host's
    /// witness map and stage the witness with room for a, b, c at once.
    pub(crate) circuit: Option<HeldCircuit>,
}

impl Loaded {
    /// Device bytes one proof stages: its witness, then a, b, c, or both at once when the
    /// device makes a, b, c itself.
    pub(crate) fn staged_at_once(&self) -> u64 {
        match self.circuit {
            Some(_) => self.needs.staged(),
            None => self.needs.witness.max(self.needs.evaluations),
        }
    }
}
/// A loaded key's points: on the host (any backend proves it), or held by the GPU backend
/// that made them (that backend alone proves it).
pub(crate) enum KeyPoints {
    Host(Arc<ProvingKey>),
    Held(Arc<HeldKey>),
}

impl KeyPoints {
    pub(crate) fn key(&self) -> KeyRef<'_> {
        match self {
            Self::Host(pk) => KeyRef::Host(pk),
            Self::Held(k) => KeyRef::Held(k),
        }
    }
}

pub(crate) struct Key {
    pub(crate) id: String,
    pub(crate) pk: KeyPoints,
    pub(crate) r1cs: Arc<R1cs>,
    pub(crate) pvk: PreparedVerifyingKey,
    pub(crate) domain: Domain,
    /// Indexed by device; `None` where the key is not loaded.
    pub(crate) on: Vec<Option<Loaded>>,
    pub(crate) _host: Permit,
}
/// The loaded keys by id.
#[derive(Default)]
pub(crate) struct KeyTable(RwLock<HashMap<String, Arc<Key>>>);

impl KeyTable {
    pub(crate) fn get(&self, id: &str) -> Option<Arc<Key>> {
        self.0.read().get(id).cloned()
    }

    pub(crate) fn contains(&self, id: &str) -> bool {
        self.0.read().contains_key(id)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.read().is_empty()
    }

    /// Adds `key` unless its id is taken meanwhile.
    fn insert(&self, key: Arc<Key>) -> Result<(), EngineError> {
        let mut keys = self.0.write();
        if keys.contains_key(&key.id) {
            return Err(EngineError::KeyExists(key.id.clone()));
        }
        keys.insert(key.id.clone(), key);
        Ok(())
    }

    fn remove(&self, id: &str) -> Option<Arc<Key>> {
        self.0.write().remove(id)
    }

    /// Whether key `id` is loaded on device `d`.
    pub(crate) fn is_loaded(&self, id: &str, d: usize) -> bool {
        self.0
            .read()
            .get(id)
            .is_some_and(|k| k.on.get(d).is_some_and(Option::is_some))
    }

    /// The keys loaded on device `d`: id, resident bytes, staging needs.
    pub(crate) fn loaded_on(&self, d: usize) -> Vec<(String, u64, StagingNeeds)> {
        self.0
            .read()
            .values()
            .filter_map(|k| {
                let l = k.on.get(d)?.as_ref()?;
                Some((k.id.clone(), l.resident, l.needs))
            })
            .collect()
    }

    /// What one proof of key `id` stages, on the first device it is loaded on.
    pub(crate) fn needs(&self, id: &str) -> Option<StagingNeeds> {
        let keys = self.0.read();
        keys.get(id)?.on.iter().flatten().next().map(|l| l.needs)
    }

    /// The host bytes of the largest job of any loaded key (witness and evaluations).
    pub(crate) fn largest_job(&self) -> u64 {
        self.0
            .read()
            .values()
            .flat_map(|k| k.on.iter().flatten())
            .map(|l| l.needs.staged())
            .max()
            .unwrap_or(0)
    }

    /// (id, constraints, devices it is loaded on), by id.
    pub(crate) fn list(&self) -> Vec<(String, usize, Vec<usize>)> {
        let mut v: Vec<_> = self
            .0
            .read()
            .values()
            .map(|k| {
                let on = (0..k.on.len()).filter(|&d| k.on[d].is_some()).collect();
                (k.id.clone(), k.r1cs.num_constraints(), on)
            })
            .collect();
        v.sort();
        v
    }
}

/// Host bytes of a key and its circuit in memory (a held key's points are not on the host).
pub(crate) fn key_host_bytes(pk: &KeyPoints, r1cs: &R1cs) -> u64 {
    let g1 = std::mem::size_of::<cuzk_field::G1Affine>() as u64;
    let g2 = std::mem::size_of::<cuzk_field::G2Affine>() as u64;
    let points = match pk {
        KeyPoints::Host(pk) => {
            let g1s = [Query::A, Query::BG1, Query::H, Query::L].map(|q| pk.query_len(q));
            g1s.iter().sum::<usize>() as u64 * g1 + pk.query_len(Query::BG2) as u64 * g2
        }
        KeyPoints::Held(_) => 0,
    };
    let matrices: u64 = [r1cs.a(), r1cs.b(), r1cs.c()]
        .iter()
        .map(|m| m.host_bytes())
        .sum();
    points + matrices
}

/// Reads a cuzk file with `f`, which names the path in its errors.
pub(crate) fn read<T>(
    path: &std::path::Path,
    f: impl FnOnce(&str, std::io::BufReader<std::fs::File>) -> Result<T, FormatError>,
) -> Result<T, EngineError> {
    let file = std::fs::File::open(path).map_err(|source| EngineError::Open {
        path: path.display().to_string(),
        source,
    })?;
    f(&path.display().to_string(), std::io::BufReader::new(file)).map_err(EngineError::File)
}

impl Inner {
    pub(crate) fn load_key(
        &self,
        id: &str,
        source: KeySource,
        devices: Option<&[usize]>,
    ) -> Result<(), EngineError> {
        if self.closing() {
            return Err(EngineError::Shutdown);
        }
        if self.keys().contains(id) {
            return Err(EngineError::KeyExists(id.into()));
        }
        let (pk, r1cs, held) = match source {
            KeySource::Memory { pk, r1cs } => (KeyPoints::Host(pk), r1cs, None),
            KeySource::Files { pk, r1cs, checks } => {
                tracing::info!(key = id, path = %pk.display(), ?checks, "reading proving key");
                let p = read(&pk, |f, r| cuzk::read_proving_key(f, r, &checks))?;
                let c = read(&r1cs, cuzk::read_r1cs)?;
                (KeyPoints::Host(Arc::new(p)), Arc::new(c), None)
            }
            KeySource::Held {
                pk,
                r1cs,
                backend,
                device,
            } => (KeyPoints::Held(pk), r1cs, Some((backend, device))),
        };
        let key = pk.key();
        let domain =
            Domain::for_size(r1cs.num_constraints()).map_err(|e| EngineError::Mismatch {
                key: id.into(),
                reason: e.to_string(),
            })?;
        let n = domain.size();
        let shape = [
            ("a_query", r1cs.num_variables(), key.query_len(Query::A)),
            (
                "b_g1_query",
                r1cs.num_variables(),
                key.query_len(Query::BG1),
            ),
            (
                "b_g2_query",
                r1cs.num_variables(),
                key.query_len(Query::BG2),
            ),
            ("h_query", n - 1, key.query_len(Query::H)),
            ("l_query", r1cs.num_private(), key.query_len(Query::L)),
            ("ic", r1cs.num_public() + 1, key.vk().ic.len()),
        ];
        if let Some((what, want, got)) = shape.into_iter().find(|(_, w, g)| w != g) {
            return Err(EngineError::Mismatch {
                key: id.into(),
                reason: format!("{what} has {got} entries, expected {want}"),
            });
        }
        // A key whose proofs could never be admitted beside it is refused now: its jobs would
        // wait for host memory forever.
        let key_bytes = key_host_bytes(&pk, &r1cs);
        let job = StagingNeeds::nominal(r1cs.num_variables(), n).map_or(u64::MAX, |s| s.staged());
        let capacity = self.host().capacity();
        if key_bytes.saturating_add(job) > capacity {
            return Err(EngineError::Host(GateError::TooLarge {
                gate: "host memory (the key and one proof)",
                need: key_bytes.saturating_add(job),
                capacity,
            }));
        }
        let host = self
            .host()
            .try_acquire(key_bytes)
            .map_err(EngineError::Host)?;
        let wanted: Vec<usize> = match (&held, devices) {
            (Some((_, d)), None) => vec![*d],
            (Some((_, d)), Some(list)) if list == [*d] => vec![*d],
            (Some((_, d)), Some(_)) => {
                return Err(EngineError::Backend {
                    device: *d,
                    source: BackendError::new(
                        "engine",
                        format!("a key held by device {d} loads on that device only"),
                    ),
                });
            }
            (None, Some(list)) => list.to_vec(),
            (None, None) => (0..self.devices().len()).collect(),
        };
        let mut on: Vec<Option<Loaded>> = (0..self.devices().len()).map(|_| None).collect();
        for d in wanted {
            let dev = self.devices().get(d).ok_or_else(|| EngineError::Backend {
                device: d,
                source: BackendError::new("engine", format!("no device {d}")),
            })?;
            let backend = held.as_ref().map(|(b, _)| b.clone());
            on[d] = Some(self.load_on(dev, id, key, &r1cs, n, backend)?);
        }
        let pvk = cuzk_groth16::prepare_verifying_key(key.vk());
        let key = Arc::new(Key {
            id: id.into(),
            pvk,
            pk,
            r1cs,
            domain,
            on,
            _host: host,
        });
        self.keys().insert(key)?;
        for d in self.devices() {
            self.refresh_staging(d);
        }
        self.queue().notify();
        Ok(())
    }

    /// Loads `pk` on one device, holding its GPU lock so that no device phase runs meanwhile;
    /// `held` is the backend that holds a device-made key's points.
    pub(crate) fn load_on(
        &self,
        dev: &Device,
        id: &str,
        pk: KeyRef<'_>,
        r1cs: &Arc<R1cs>,
        n: usize,
        held: Option<Arc<GpuBackend>>,
    ) -> Result<Loaded, EngineError> {
        let never = || false;
        let _lock = dev.lock().acquire(1, Priority::High, &never)?;
        let backend_err = |source| EngineError::Backend {
            device: dev.index(),
            source,
        };
        let workers = self.config().workers_per_device.threads();
        // The circuit goes to the device when it fits beside the key, the lock room and the
        // staging of two proofs' witness and a, b, c at once (one with a single worker). It
        // only saves host work: a device that cannot take it proves with the host's witness map.
        let hold = |b: &dyn ProverBackend, needs: &StagingNeeds, tables: u64| {
            if !self.config().witness_map_on_device {
                return None;
            }
            let keep_free = needs.staged() * workers.clamp(1, 2) as u64 + needs.lock + tables;
            b.hold_circuit(r1cs, keep_free)
                .map_err(|e| {
                    tracing::warn!(key = id, device = %dev.name(), error = %e, "circuit not held on the device: the host makes a, b, c")
                })
                .ok()
                .flatten()
        };
        let (backend, needs, points, circuit): (Arc<dyn ProverBackend>, StagingNeeds, u64, _) =
            match dev.gpu() {
                Some(gpu) => {
                    let b = match held {
                        Some(b) if b.gpu().vram().budget().same_as(dev.vram().budget()) => b,
                        Some(_) => {
                            return Err(backend_err(BackendError::new(
                                "engine",
                                "the key's points are held by another device (make it on Engine::gpu's device)",
                            )));
                        }
                        None => Arc::new(GpuBackend::new(gpu.clone())),
                    };
                    // A set per worker, and at least one beside a single worker for the
                    // evaluations made ahead, which only borrow a set idle here: a third set
                    // beside two workers' would hold 12.9 GB more at 2^27.
                    let ahead = if self.config().read_ahead > 0 {
                        crate::job::MAP_AHEAD
                    } else {
                        0
                    };
                    b.set_evaluation_sets(workers.max(1 + ahead));
                    let needs = b.staging_needs(pk, n).map_err(backend_err)?;
                    // Two workers overlap one proof's a, b, c with another's witness.
                    let target = if workers > 1 {
                        needs.staged()
                    } else {
                        needs.witness.max(needs.evaluations)
                    };
                    let plan = b.load_staged(pk, n, target).map_err(backend_err)?;
                    // The lock room as the key is placed: a streamed query's MSM runs in chunks.
                    let needs = StagingNeeds {
                        lock: plan.lock_bytes(),
                        ..needs
                    };
                    let circuit = hold(&*b, &needs, crate::engine::DEVICE_TABLES);
                    if circuit.is_none() {
                        // One worker's and the one made ahead (or a second worker's); a worker
                        // that finds none idle pins its own at its first proof.
                        b.pin_evaluation_sets(n, 1 + ahead);
                    }
                    tracing::info!(
                        key = id,
                        device = %dev.name(),
                        resident = b.resident_bytes(),
                        lock = plan.lock_bytes(),
                        staging = target,
                        circuit = circuit.as_ref().map_or(0, HeldCircuit::bytes),
                        "key loaded"
                    );
                    let points = b.resident_bytes();
                    (b as Arc<dyn ProverBackend>, needs, points, circuit)
                }
                None if held.is_some() => {
                    return Err(backend_err(BackendError::new(
                        "engine",
                        "a key held by a GPU cannot load on a CPU device",
                    )));
                }
                None => {
                    let b = SimBackend::new(dev.vram().clone());
                    let needs = b.staging_needs(pk, n).map_err(backend_err)?;
                    let circuit = hold(&b, &needs, 0);
                    (Arc::new(b) as Arc<dyn ProverBackend>, needs, 0, circuit)
                }
            };
        let resident = points + circuit.as_ref().map_or(0, HeldCircuit::bytes);
        let loaded = Loaded {
            backend,
            needs,
            resident,
            circuit,
        };
        let room = self.staging_room(dev, Some(&loaded));
        let need = loaded.staged_at_once();
        if room < need {
            return Err(EngineError::NoRoom {
                device: dev.index(),
                name: dev.name().to_owned(),
                key: id.into(),
                need,
                room,
            });
        }
        Ok(loaded)
    }

    pub(crate) fn unload_key(&self, id: &str) -> Result<(), EngineError> {
        let key = self
            .keys()
            .remove(id)
            .ok_or_else(|| EngineError::UnknownKey(id.into()))?;
        for j in self.queue().remove_all(|j| j.key == id) {
            self.finish(&j, Err(JobError::UnknownKey(format!("{id} (unloaded)"))));
        }
        // Running jobs hold the key; its memory returns when the last one ends.
        while Arc::strong_count(&key) > 1 {
            std::thread::sleep(Duration::from_millis(10));
        }
        drop(key);
        let none_left = self.keys().is_empty();
        for d in self.devices() {
            // No key left: no job can use the device's caches (NTT tables and roots, MSM
            // scratch) until one loads, so their memory goes back and the budget reads empty.
            if none_left {
                if let Some(gpu) = d.gpu() {
                    gpu.drop_cached();
                }
                d.vram().budget().reclaim_all();
            }
            self.refresh_staging(d);
        }
        Ok(())
    }
}
