//! `cuzk filecoin …`: Filecoin proofs from filecoin-proofs' own inputs (cuzk-filecoin), in
//! this process or, with `--daemon`, through a daemon's `cuzk.v1.Prover` API; `bench-c2` times
//! the daemon's PoRep C2 against filecoin-proofs' own.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use cuzk_daemon::{client, pb};
use cuzk_filecoin::{
    C1Output, CircuitName, FilecoinProver, ParamStore, PostKind, PostProof, PostStatement,
    PostVanilla, ProofKind, SealProof, SnapStatement, SnapVanilla,
};
use cuzk_groth16::BackendChoice;

use crate::daemon_client::Conn;

#[derive(Subcommand, Debug)]
pub enum FilecoinCommand {
    /// PoRep C2: prove a C1 output (filecoin-ffi's JSON, filecoin-proofs' bare JSON or curio's
    /// wrapper) and write filecoin-proofs' proof bytes (192 per partition). With --daemon
    /// (here and in window-post, winning-post and snap): through that daemon, which reads its
    /// own Filecoin parameter directory; prints the daemon's per-phase timings.
    PorepC2 {
        #[command(flatten)]
        c1: C1Args,
        /// Where to write the proof.
        #[arg(long)]
        proof: PathBuf,
        #[command(flatten)]
        params: ParamArgs,
        #[command(flatten)]
        conn: Conn,
    },
    /// PoRep C2 through a daemon against filecoin-proofs' own: warms the daemon with one proof
    /// (its circuit loaded and compiled), times --proofs more through it (--in-flight at once),
    /// runs filecoin-proofs' `seal_commit_phase2` once in this process on the CPU (its
    /// parameters from FIL_PROOFS_PARAMETER_CACHE, which must be --param-dir: the files both
    /// sides use), checks every proof with `verify_seal` and prints the daemon's seconds per
    /// proof, filecoin-proofs' seconds and their ratio.
    BenchC2(BenchC2Args),
    /// Check a proof with filecoin-proofs' own verifier; exits non-zero if it fails.
    #[command(subcommand)]
    Verify(VerifyCommand),
    /// Generate a C1 output's circuit parameters with cuzk's setup from random toxic waste,
    /// under filecoin-proofs' file names, into a directory of generated parameters (never one
    /// of published ones). For tests and private networks only.
    GenParams {
        #[command(flatten)]
        c1: C1Args,
        #[command(flatten)]
        params: ParamArgs,
    },
    /// WindowPoSt, one partition: prove that partition's vanilla proofs (bincode of
    /// `Vec<FallbackPoStSectorProof>`, what filecoin-proofs-api's callers pass) and write
    /// filecoin-proofs' 192 bytes.
    WindowPost {
        #[command(flatten)]
        post: PostArgs,
        /// The partition's index (its sectors' place among all the PoSt's sectors).
        #[arg(long, default_value_t = 0)]
        partition: usize,
        /// Where to write the proof.
        #[arg(long)]
        proof: PathBuf,
        #[command(flatten)]
        params: ParamArgs,
        #[command(flatten)]
        conn: Conn,
    },
    /// WinningPoSt: prove its vanilla proofs and write filecoin-proofs' 192 bytes.
    WinningPost {
        #[command(flatten)]
        post: PostArgs,
        /// Where to write the proof.
        #[arg(long)]
        proof: PathBuf,
        #[command(flatten)]
        params: ParamArgs,
        #[command(flatten)]
        conn: Conn,
    },
    /// Generate a PoSt circuit's parameters (built from these vanilla proofs) with cuzk's
    /// setup from random toxic waste, as gen-params does for PoRep. For tests and private
    /// networks only.
    GenPostParams {
        #[command(flatten)]
        post: PostArgs,
        /// WindowPoSt or WinningPoSt.
        #[arg(long)]
        winning: bool,
        #[command(flatten)]
        params: ParamArgs,
    },
    /// PoSt vanilla proofs of sectors 1..=N, a test workload: sealed with random data by
    /// filecoin-proofs on the CPU, then proven as filecoin-proofs proves them
    /// (`generate_fallback_sector_challenges`, `generate_single_vanilla_proof`); or, with
    /// --sparse, built from sparse trees without sealing.
    PostVanilla {
        /// Registered PoSt proof (default StackedDrgWindow2KiBV1_2).
        #[arg(long, default_value = "StackedDrgWindow2KiBV1_2")]
        post_proof: PostProof,
        #[arg(long, default_value_t = 1)]
        sectors: u64,
        #[arg(long, default_value_t = 1000)]
        miner_id: u64,
        /// 32 bytes of hex (a field element: the last byte below 0x40).
        #[arg(long)]
        randomness: String,
        #[command(flatten)]
        source: WorkloadSource,
        /// Where to write the vanilla proofs.
        #[arg(long)]
        vanilla: PathBuf,
    },
    /// SnapDeals: prove an update's vanilla partition proofs (bincode of
    /// `Vec<PartitionProof>`) and write filecoin-proofs' bytes (192 per partition).
    Snap {
        #[command(flatten)]
        snap: SnapArgs,
        /// The vanilla partition proofs file.
        #[arg(long)]
        vanilla: PathBuf,
        /// Where to write the proof.
        #[arg(long)]
        proof: PathBuf,
        #[command(flatten)]
        params: ParamArgs,
        #[command(flatten)]
        conn: Conn,
    },
    /// Generate the SnapDeals circuit's parameters (built from these vanilla proofs) with
    /// cuzk's setup from random toxic waste. For tests and private networks only.
    GenSnapParams {
        #[command(flatten)]
        snap: SnapArgs,
        #[arg(long)]
        vanilla: PathBuf,
        #[command(flatten)]
        params: ParamArgs,
    },
    /// A SnapDeals update's vanilla partition proofs, a test workload: a sector of random data
    /// sealed, updated with new random data (encode_into) and proven
    /// (generate_partition_proofs); or, with --sparse, built from sparse trees without sealing.
    /// Prints the update's commitments.
    SnapVanilla {
        #[arg(long, default_value = "2KiB")]
        seal_proof: SealProof,
        #[arg(long, default_value_t = 1000)]
        miner_id: u64,
        #[arg(long, default_value_t = 1)]
        sector_id: u64,
        #[command(flatten)]
        source: WorkloadSource,
        /// Where to write the vanilla partition proofs.
        #[arg(long)]
        vanilla: PathBuf,
    },
    /// A C1 output as filecoin-ffi writes it, a test workload: a sector of random data sealed
    /// by filecoin-proofs on the CPU (add_piece, PC1, PC2, C1); or, with --sparse, built from
    /// sparse trees without sealing (any sector size in seconds; filecoin-proofs' vanilla
    /// verifier checks it).
    Seal {
        /// Registered proof or size: StackedDrg2KiBV1_1, 2KiB, 8MiB, 512MiB, 32GiB, 64GiB.
        #[arg(long, default_value = "2KiB")]
        seal_proof: SealProof,
        #[arg(long, default_value_t = 1000)]
        miner_id: u64,
        #[arg(long, default_value_t = 1)]
        sector_id: u64,
        #[command(flatten)]
        source: WorkloadSource,
        /// Where to write the C1 JSON.
        #[arg(long)]
        c1: PathBuf,
    },
}

#[derive(Subcommand, Debug)]
pub enum VerifyCommand {
    /// filecoin-proofs' `verify_empty_sector_update_proof`.
    Snap {
        #[command(flatten)]
        snap: SnapArgs,
        #[arg(long)]
        proof: PathBuf,
        #[command(flatten)]
        params: ParamArgs,
    },
    /// filecoin-proofs' `verify_window_post` of a whole WindowPoSt: one --proof per
    /// partition, in order, and the same partitions' --vanilla files (which name the sectors:
    /// ids and comm_r).
    WindowPost {
        #[command(flatten)]
        post: PostArgs,
        /// More partitions' vanilla proofs files, after --vanilla's.
        #[arg(long)]
        more_vanilla: Vec<PathBuf>,
        /// Each partition's proof, in order.
        #[arg(long, required = true)]
        proof: Vec<PathBuf>,
        #[command(flatten)]
        params: ParamArgs,
    },
    /// filecoin-proofs' `verify_winning_post` (the --vanilla file names the sector).
    WinningPost {
        #[command(flatten)]
        post: PostArgs,
        #[arg(long)]
        proof: PathBuf,
        #[command(flatten)]
        params: ParamArgs,
    },
    /// filecoin-proofs' `verify_seal`.
    Porep {
        #[command(flatten)]
        c1: C1Args,
        #[arg(long)]
        proof: PathBuf,
        /// The miner actor id (its prover id is the id's LEB128 bytes, as curio makes it).
        #[arg(long)]
        miner_id: u64,
        /// The sector number (curio's wrapper carries it).
        #[arg(long)]
        sector_id: Option<u64>,
        #[command(flatten)]
        params: ParamArgs,
    },
}

/// Where a test workload comes from: sectors sealed for real, or sparse trees.
#[derive(Args, Debug)]
#[group(required = true, multiple = false)]
pub struct WorkloadSource {
    /// Seal for real: the scratch directory for the sectors' files (removed afterwards).
    #[arg(long)]
    work_dir: Option<PathBuf>,
    /// Build it from sparse trees instead: only the challenged nodes (and PoRep's parents)
    /// hold data, so any sector size takes seconds (`cuzk_filecoin::sparse`).
    #[arg(long)]
    sparse: bool,
}

#[derive(Args, Debug)]
pub struct PostArgs {
    /// The vanilla proofs file: bincode of `Vec<FallbackPoStSectorProof>`.
    #[arg(long)]
    vanilla: PathBuf,
    /// Registered PoSt proof (default: StackedDrgWindow2KiBV1_2 for WindowPoSt,
    /// StackedDrgWinning2KiBV1 for WinningPoSt).
    #[arg(long)]
    post_proof: Option<PostProof>,
    /// The challenge randomness: 32 bytes of hex.
    #[arg(long)]
    randomness: String,
    /// The prover id: 32 bytes of hex.
    #[arg(
        long,
        conflicts_with = "miner_id",
        required_unless_present = "miner_id"
    )]
    prover_id: Option<String>,
    /// Or the miner actor id (its prover id is the id's LEB128 bytes, as curio makes it).
    #[arg(long)]
    miner_id: Option<u64>,
}

impl PostArgs {
    fn proof(&self, kind: PostKind) -> PostProof {
        self.post_proof.unwrap_or(match kind {
            PostKind::Window => PostProof::window(SealProof::StackedDrg2KiBV1_1),
            PostKind::Winning => PostProof::winning(SealProof::StackedDrg2KiBV1_1),
        })
    }

    fn statement(&self) -> Result<PostStatement> {
        let prover_id = match (&self.prover_id, self.miner_id) {
            (Some(hex), _) => hex32("--prover-id", hex)?,
            (None, Some(m)) => cuzk_filecoin::prover_id_from_miner(m),
            (None, None) => bail!("--prover-id or --miner-id is needed"),
        };
        Ok(PostStatement {
            randomness: hex32("--randomness", &self.randomness)?,
            prover_id,
        })
    }

    fn read(&self, kind: PostKind) -> Result<PostVanilla> {
        read_vanilla(&self.vanilla, self.proof(kind))
    }

    /// The daemon's request of this PoSt (the vanilla proofs unparsed: the daemon parses them).
    fn request(&self, kind: PostKind) -> Result<pb::FilecoinProof> {
        let Some(miner_id) = self.miner_id else {
            bail!("--daemon names the prover by --miner-id (the API's miner_id), not --prover-id");
        };
        Ok(pb::FilecoinProof {
            kind: match kind {
                PostKind::Window => pb::FilecoinKind::WindowPost,
                PostKind::Winning => pb::FilecoinKind::WinningPost,
            } as i32,
            registered_proof: self.proof(kind).to_string(),
            vanilla_proofs: read(&self.vanilla)?,
            randomness: hex32("--randomness", &self.randomness)?.to_vec(),
            miner_id,
            ..Default::default()
        })
    }
}

fn read_vanilla(path: &Path, proof: PostProof) -> Result<PostVanilla> {
    let start = Instant::now();
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let v = PostVanilla::parse(&path.display().to_string(), &bytes, proof)?;
    println!(
        "parse          {:>10.1} ms  ({proof}, {} sectors)",
        ms(start),
        v.len()
    );
    Ok(v)
}

/// 32 bytes from 64 hex digits.
fn hex32(what: &str, s: &str) -> Result<[u8; 32]> {
    let s = s.trim().trim_start_matches("0x");
    if s.len() != 64 || !s.is_ascii() {
        bail!("{what}: 64 hex digits (32 bytes) expected, got {:?}", s);
    }
    let mut out = [0u8; 32];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16)
            .with_context(|| format!("{what}: not hex: {s:?}"))?;
    }
    Ok(out)
}

#[derive(Args, Debug)]
pub struct SnapArgs {
    /// The sector's registered seal proof or size (2KiB, 32GiB, ...).
    #[arg(long, default_value = "2KiB")]
    seal_proof: SealProof,
    /// The sector key's comm_r: 32 bytes of hex.
    #[arg(long)]
    comm_r_old: String,
    /// The updated replica's comm_r.
    #[arg(long)]
    comm_r_new: String,
    /// The new data's comm_d.
    #[arg(long)]
    comm_d_new: String,
}

impl SnapArgs {
    fn statement(&self) -> Result<SnapStatement> {
        Ok(SnapStatement {
            comm_r_old: hex32("--comm-r-old", &self.comm_r_old)?,
            comm_r_new: hex32("--comm-r-new", &self.comm_r_new)?,
            comm_d_new: hex32("--comm-d-new", &self.comm_d_new)?,
        })
    }

    fn read(&self, path: &Path) -> Result<SnapVanilla> {
        let start = Instant::now();
        let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        let v = SnapVanilla::parse(&path.display().to_string(), &bytes, self.seal_proof)?;
        println!(
            "parse          {:>10.1} ms  ({})",
            ms(start),
            self.seal_proof
        );
        Ok(v)
    }
}

fn hex(bytes: &[u8; 32]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[derive(Args, Debug)]
pub struct C1Args {
    /// The C1 output file.
    #[arg(long)]
    c1: PathBuf,
    /// Its registered proof: needed for filecoin-proofs' bare JSON, which does not say it.
    #[arg(long)]
    seal_proof: Option<SealProof>,
}

#[derive(Args, Debug)]
pub struct ParamArgs {
    /// The parameter directory (default: FIL_PROOFS_PARAMETER_CACHE, else
    /// /var/tmp/filecoin-proof-parameters/).
    #[arg(long)]
    param_dir: Option<PathBuf>,
    /// filecoin-proofs' parameters.json, to check the files against its digests.
    #[arg(long)]
    manifest: Option<PathBuf>,
}

impl ParamArgs {
    /// A daemon reads its own filecoin_param_dir: these flags are for proofs in this process.
    fn in_process_only(&self) -> Result<()> {
        if self.param_dir.is_some() || self.manifest.is_some() {
            bail!(
                "--param-dir and --manifest apply in this process; with --daemon the daemon reads its own filecoin_param_dir"
            );
        }
        Ok(())
    }

    fn store(&self) -> Result<ParamStore> {
        let store = match &self.param_dir {
            Some(d) => ParamStore::new(d),
            None => ParamStore::from_env(),
        };
        Ok(match &self.manifest {
            Some(m) => store.with_manifest(m)?,
            None => store,
        })
    }
}

impl C1Args {
    fn read(&self) -> Result<C1Output> {
        let start = Instant::now();
        let bytes =
            std::fs::read(&self.c1).with_context(|| format!("reading {}", self.c1.display()))?;
        let c1 = C1Output::parse(&self.c1.display().to_string(), &bytes, self.seal_proof)?;
        println!(
            "parse          {:>10.1} ms  ({}, {:?} form, {} partitions)",
            ms(start),
            c1.seal_proof,
            c1.form,
            c1.partitions()
        );
        Ok(c1)
    }
}

fn ms(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1e3
}

pub fn run(command: FilecoinCommand, choice: BackendChoice) -> Result<()> {
    match command {
        FilecoinCommand::PorepC2 {
            c1,
            proof,
            params,
            conn,
        } if conn.named() => {
            params.in_process_only()?;
            let f = pb::FilecoinProof {
                kind: pb::FilecoinKind::PorepC2 as i32,
                registered_proof: c1.seal_proof.map(|p| p.to_string()).unwrap_or_default(),
                c1_output: read(&c1.c1)?,
                ..Default::default()
            };
            through_daemon(&conn, f, &proof)
        }
        FilecoinCommand::BenchC2(a) => bench_c2(&a),
        FilecoinCommand::PorepC2 {
            c1, proof, params, ..
        } => {
            let c1 = c1.read()?;
            let backend = cuzk_groth16::select_backend(choice)?;
            println!("backend: {}", backend.describe());
            let prover = FilecoinProver::new(backend, params.store()?);
            let start = Instant::now();
            let p = prover.prove_porep_c2(&c1, &mut rand::rngs::OsRng)?;
            print!("{}", p.timings);
            println!("total          {:>10.1} ms", ms(start));
            write(&proof, &p.bytes)
        }
        FilecoinCommand::Verify(VerifyCommand::WindowPost {
            post,
            more_vanilla,
            proof,
            params,
        }) => {
            let kind = PostKind::Window;
            let mut sectors = post.read(kind)?.sectors();
            for f in &more_vanilla {
                sectors.extend(read_vanilla(f, post.proof(kind))?.sectors());
            }
            let mut bytes = Vec::new();
            for f in &proof {
                bytes.extend(std::fs::read(f).with_context(|| format!("reading {}", f.display()))?);
            }
            let start = Instant::now();
            let ok = cuzk_filecoin::verify_window_post(
                post.proof(kind),
                &post.statement()?,
                &sectors,
                &bytes,
                &params.store()?,
            )?;
            println!("verify         {:>10.1} ms", ms(start));
            if !ok {
                bail!("verify_window_post rejects {}", proof[0].display());
            }
            println!("verify_window_post accepts {} partitions", proof.len());
            Ok(())
        }
        FilecoinCommand::Verify(VerifyCommand::WinningPost {
            post,
            proof,
            params,
        }) => {
            let kind = PostKind::Winning;
            let sectors = post.read(kind)?.sectors();
            let bytes =
                std::fs::read(&proof).with_context(|| format!("reading {}", proof.display()))?;
            let start = Instant::now();
            let ok = cuzk_filecoin::verify_winning_post(
                post.proof(kind),
                &post.statement()?,
                &sectors,
                &bytes,
                &params.store()?,
            )?;
            println!("verify         {:>10.1} ms", ms(start));
            if !ok {
                bail!("verify_winning_post rejects {}", proof.display());
            }
            println!("verify_winning_post accepts {}", proof.display());
            Ok(())
        }
        FilecoinCommand::Verify(VerifyCommand::Snap {
            snap,
            proof,
            params,
        }) => {
            let bytes =
                std::fs::read(&proof).with_context(|| format!("reading {}", proof.display()))?;
            let start = Instant::now();
            let ok = cuzk_filecoin::verify_snap(
                snap.seal_proof,
                &snap.statement()?,
                &bytes,
                &params.store()?,
            )?;
            println!("verify         {:>10.1} ms", ms(start));
            if !ok {
                bail!(
                    "verify_empty_sector_update_proof rejects {}",
                    proof.display()
                );
            }
            println!(
                "verify_empty_sector_update_proof accepts {}",
                proof.display()
            );
            Ok(())
        }
        FilecoinCommand::Verify(VerifyCommand::Porep {
            c1,
            proof,
            miner_id,
            sector_id,
            params,
        }) => {
            let c1 = c1.read()?;
            let sector_id = match (sector_id, c1.sector_number) {
                (Some(s), _) | (None, Some(s)) => s,
                (None, None) => bail!("--sector-id is needed: this C1 form does not carry it"),
            };
            let bytes =
                std::fs::read(&proof).with_context(|| format!("reading {}", proof.display()))?;
            let start = Instant::now();
            let ok = cuzk_filecoin::verify_porep(
                &c1,
                &bytes,
                cuzk_filecoin::prover_id_from_miner(miner_id),
                sector_id,
                &params.store()?,
            )?;
            println!("verify         {:>10.1} ms", ms(start));
            if !ok {
                bail!("verify_seal rejects {}", proof.display());
            }
            println!("verify_seal accepts {}", proof.display());
            Ok(())
        }
        FilecoinCommand::WindowPost {
            post,
            partition,
            proof,
            params,
            conn,
        } if conn.named() => {
            params.in_process_only()?;
            let f = pb::FilecoinProof {
                kind: pb::FilecoinKind::WindowPost as i32,
                partition: u32::try_from(partition).context("--partition")?,
                ..post.request(PostKind::Window)?
            };
            through_daemon(&conn, f, &proof)
        }
        FilecoinCommand::WindowPost {
            post,
            partition,
            proof,
            params,
            ..
        } => {
            let v = post.read(PostKind::Window)?;
            let st = post.statement()?;
            let prover = post_prover(choice, &params)?;
            let start = Instant::now();
            let file = post.vanilla.display().to_string();
            let p = prover.prove_window_post(&file, &v, &st, partition, &mut rand::rngs::OsRng)?;
            print!("{}", p.timings);
            println!("total          {:>10.1} ms", ms(start));
            write(&proof, &p.bytes)
        }
        FilecoinCommand::WinningPost {
            post,
            proof,
            params,
            conn,
        } if conn.named() => {
            params.in_process_only()?;
            let f = post.request(PostKind::Winning)?;
            through_daemon(&conn, f, &proof)
        }
        FilecoinCommand::WinningPost {
            post,
            proof,
            params,
            ..
        } => {
            let v = post.read(PostKind::Winning)?;
            let st = post.statement()?;
            let prover = post_prover(choice, &params)?;
            let start = Instant::now();
            let file = post.vanilla.display().to_string();
            let p = prover.prove_winning_post(&file, &v, &st, &mut rand::rngs::OsRng)?;
            print!("{}", p.timings);
            println!("total          {:>10.1} ms", ms(start));
            write(&proof, &p.bytes)
        }
        FilecoinCommand::GenPostParams {
            post,
            winning,
            params,
        } => {
            let kind = if winning {
                PostKind::Winning
            } else {
                PostKind::Window
            };
            let v = post.read(kind)?;
            let st = post.statement()?;
            let store = params.store()?;
            let start = Instant::now();
            let made = store.generate_post(&v, &st, &mut rand::rngs::OsRng)?;
            generated(&store, &ParamStore::post_circuit_id(v.proof)?, made, start);
            Ok(())
        }
        FilecoinCommand::PostVanilla {
            post_proof,
            sectors,
            miner_id,
            randomness,
            source,
            vanilla,
        } => {
            let randomness = hex32("--randomness", &randomness)?;
            let rng = &mut rand::rngs::OsRng;
            let Some(work_dir) = source.work_dir else {
                let start = Instant::now();
                let ids: Vec<u64> = (1..=sectors).collect();
                let bytes = cuzk_filecoin::sparse::sparse_post(
                    post_proof, miner_id, &ids, randomness, rng,
                )?;
                println!("sparse vanilla {:>10.1} ms  ({sectors} sectors)", ms(start));
                return write(&vanilla, &bytes);
            };
            let start = Instant::now();
            let sealed = (1..=sectors)
                .map(|id| -> Result<_> {
                    Ok(cuzk_filecoin::workload::seal_sector(
                        post_proof.sector,
                        &work_dir.join(format!("sector-{id}")),
                        miner_id,
                        id,
                        rng,
                    )?)
                })
                .collect::<Result<Vec<_>>>()?;
            println!("seal           {:>10.1} ms  ({sectors} sectors)", ms(start));
            let start = Instant::now();
            let refs: Vec<_> = sealed.iter().collect();
            let bytes = cuzk_filecoin::workload::post_vanilla_proofs(post_proof, &refs, randomness);
            std::fs::remove_dir_all(&work_dir).ok();
            let bytes = bytes?;
            println!("vanilla        {:>10.1} ms", ms(start));
            write(&vanilla, &bytes)
        }
        FilecoinCommand::Snap {
            snap,
            vanilla,
            proof,
            params,
            conn,
        } if conn.named() => {
            params.in_process_only()?;
            let st = snap.statement()?;
            let f = pb::FilecoinProof {
                kind: pb::FilecoinKind::SnapDeals as i32,
                registered_proof: snap.seal_proof.to_string(),
                vanilla_proofs: read(&vanilla)?,
                comm_r_old: st.comm_r_old.to_vec(),
                comm_r_new: st.comm_r_new.to_vec(),
                comm_d_new: st.comm_d_new.to_vec(),
                ..Default::default()
            };
            through_daemon(&conn, f, &proof)
        }
        FilecoinCommand::Snap {
            snap,
            vanilla,
            proof,
            params,
            ..
        } => {
            let v = snap.read(&vanilla)?;
            let st = snap.statement()?;
            let prover = post_prover(choice, &params)?;
            let start = Instant::now();
            let file = vanilla.display().to_string();
            let p = prover.prove_snap(&file, &v, &st, &mut rand::rngs::OsRng)?;
            print!("{}", p.timings);
            println!("total          {:>10.1} ms", ms(start));
            write(&proof, &p.bytes)
        }
        FilecoinCommand::GenSnapParams {
            snap,
            vanilla,
            params,
        } => {
            let v = snap.read(&vanilla)?;
            let store = params.store()?;
            let start = Instant::now();
            let made = store.generate_snap(&v, &snap.statement()?, &mut rand::rngs::OsRng)?;
            let name = CircuitName {
                kind: ProofKind::SnapDeals,
                sector: v.seal_proof,
            };
            generated(&store, &name.cache_id()?, made, start);
            Ok(())
        }
        FilecoinCommand::SnapVanilla {
            seal_proof,
            miner_id,
            sector_id,
            source,
            vanilla,
        } => {
            let start = Instant::now();
            let rng = &mut rand::rngs::OsRng;
            let (st, bytes) = match source.work_dir {
                Some(work_dir) => {
                    let update = (|| -> Result<_> {
                        let s = cuzk_filecoin::workload::seal_sector(
                            seal_proof, &work_dir, miner_id, sector_id, rng,
                        )?;
                        Ok(cuzk_filecoin::workload::snap_update(&s, rng)?)
                    })();
                    // The sector's files go, whether or not the update was made.
                    std::fs::remove_dir_all(&work_dir).ok();
                    let update = update?;
                    println!("seal, update   {:>10.1} ms", ms(start));
                    update
                }
                None => {
                    let update = cuzk_filecoin::sparse::sparse_snap(seal_proof, rng)?;
                    println!("sparse update  {:>10.1} ms", ms(start));
                    update
                }
            };
            println!("comm_r_old {}", hex(&st.comm_r_old));
            println!("comm_r_new {}", hex(&st.comm_r_new));
            println!("comm_d_new {}", hex(&st.comm_d_new));
            write(&vanilla, &bytes)
        }
        FilecoinCommand::GenParams { c1, params } => {
            let c1 = c1.read()?;
            let store = params.store()?;
            let start = Instant::now();
            let made = store.generate_porep(&c1, &mut rand::rngs::OsRng)?;
            generated(&store, &c1.circuit_id()?, made, start);
            Ok(())
        }
        FilecoinCommand::Seal {
            seal_proof,
            miner_id,
            sector_id,
            source,
            c1,
        } => {
            let start = Instant::now();
            let rng = &mut rand::rngs::OsRng;
            let commit = match source.work_dir {
                Some(work_dir) => {
                    let sector = cuzk_filecoin::workload::seal_sector(
                        seal_proof, &work_dir, miner_id, sector_id, rng,
                    );
                    std::fs::remove_dir_all(&work_dir).ok();
                    let commit = sector?.commit;
                    println!("seal           {:>10.1} ms", ms(start));
                    commit
                }
                None => {
                    let commit =
                        cuzk_filecoin::sparse::sparse_seal(seal_proof, miner_id, sector_id, rng)?;
                    println!("sparse C1      {:>10.1} ms", ms(start));
                    commit
                }
            };
            write(&c1, &commit.c1_json)
        }
    }
}

/// What a gen-*-params command did with circuit `id`'s parameter file.
fn generated(store: &ParamStore, id: &str, made: bool, start: Instant) {
    println!(
        "{} {} ({:.1} s)",
        if made { "wrote" } else { "already there:" },
        store.params_path(id).display(),
        start.elapsed().as_secs_f64()
    );
}

fn post_prover(choice: BackendChoice, params: &ParamArgs) -> Result<FilecoinProver> {
    let backend = cuzk_groth16::select_backend(choice)?;
    println!("backend: {}", backend.describe());
    Ok(FilecoinProver::new(backend, params.store()?))
}

fn write(path: &Path, bytes: &[u8]) -> Result<()> {
    std::fs::write(path, bytes).with_context(|| format!("writing {}", path.display()))
}

fn read(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("reading {}", path.display()))
}

/// Submits a Filecoin proof to the daemon (its large input streamed after the header) and
/// waits for it; returns the answer and the seconds from submit to proof.
async fn daemon_proof(
    c: &mut client::Client,
    f: pb::FilecoinProof,
) -> Result<(pb::ProofResponse, Duration)> {
    let t = Instant::now();
    let messages = client::filecoin_stream(pb::SubmitHeader::default(), f, client::CHUNK);
    let s = c
        .submit(tokio_stream::iter(messages))
        .await
        .context("the daemon refused the proof")?
        .into_inner();
    let r = crate::daemon_client::await_finished(c, &s.job_id, &s.job_token).await?;
    Ok((r, t.elapsed()))
}

/// The daemon's per-phase timings of a proof: each phase summed over its partitions, in the
/// order the phases first ran.
fn daemon_timings(r: &pb::ProofResponse) -> String {
    use std::fmt::Write;
    let t = r.timings.clone().unwrap_or_default();
    let mut phases: Vec<(&str, f64, usize)> = Vec::new();
    for p in &t.phases {
        let secs = p.end_s - p.start_s;
        match phases.iter_mut().find(|(n, ..)| *n == p.phase) {
            Some(e) => {
                e.1 += secs;
                e.2 += 1;
            }
            None => phases.push((&p.phase, secs, 1)),
        }
    }
    let mut o = String::new();
    let _ = writeln!(o, "queue wait     {:>10.1} ms", t.queue_wait_s * 1e3);
    for (name, secs, n) in phases {
        let times = if n > 1 {
            format!("  ({n} times)")
        } else {
            String::new()
        };
        let _ = writeln!(o, "{name:<14} {:>10.1} ms{times}", secs * 1e3);
    }
    let _ = writeln!(
        o,
        "lock wait      {:>10.1} ms\nlock hold      {:>10.1} ms\ndaemon total   {:>10.1} ms  (device {} worker {})",
        t.lock_wait_s * 1e3,
        t.lock_hold_s * 1e3,
        r.latency_s * 1e3,
        r.device,
        r.worker
    );
    o
}

/// `--daemon`: proves through the daemon, prints its timings and writes the proof.
fn through_daemon(conn: &Conn, f: pb::FilecoinProof, proof: &Path) -> Result<()> {
    let rt = crate::daemon_client::runtime(4)?;
    let (r, secs) = rt.block_on(async {
        let mut c = crate::daemon_client::connect(conn).await?;
        daemon_proof(&mut c, f).await
    })?;
    print!("{}", daemon_timings(&r));
    println!("total          {:>10.1} ms", secs.as_secs_f64() * 1e3);
    write(proof, &r.proof)
}

#[derive(Args, Debug)]
pub struct BenchC2Args {
    #[command(flatten)]
    c1: C1Args,
    #[command(flatten)]
    conn: Conn,
    /// Timed proofs through the daemon.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    proofs: u32,
    /// Timed proofs in flight at once: sectors back to back, the synthesis of one beside the
    /// GPU work of another.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    in_flight: u32,
    /// The sector's miner actor id (verify_seal's prover id).
    #[arg(long)]
    miner_id: u64,
    /// The sector number (curio's wrapper carries it).
    #[arg(long)]
    sector_id: Option<u64>,
    /// Leave out filecoin-proofs' own CPU C2 (hours at 32 GiB, and it needs the `.params`
    /// file a daemon with `filecoin_generate_keys` never writes); the table then gives the
    /// daemon's GPU-bound figure instead of the ratio.
    #[arg(long)]
    no_baseline: bool,
    /// Draw the timed run's timeline (SVG: each device's GPU lock and workers as lanes).
    #[arg(long)]
    timeline: Option<PathBuf>,
    #[command(flatten)]
    params: ParamArgs,
}

/// What the timed proofs of `bench-c2` gave: each proof's seconds from submit, in order, the
/// wall time of them all, and the GPU lock's hold over that time.
struct TimedRun {
    proofs: Vec<(pb::ProofResponse, f64)>,
    wall: f64,
    lock_held: f64,
}

fn bench_c2(a: &BenchC2Args) -> Result<()> {
    if !a.conn.named() {
        bail!("bench-c2 needs --daemon (the daemon whose C2 it times)");
    }
    let c1 = a.c1.read()?;
    let sector_id = match (a.sector_id, c1.sector_number) {
        (Some(s), _) | (None, Some(s)) => s,
        (None, None) => bail!("--sector-id is needed: this C1 form does not carry it"),
    };
    let prover_id = cuzk_filecoin::prover_id_from_miner(a.miner_id);
    let store = a.params.store()?;
    // Before any proof: filecoin-proofs must read the same files as --param-dir.
    cuzk_filecoin::check_verifier_dir(&store)?;
    let request = pb::FilecoinProof {
        kind: pb::FilecoinKind::PorepC2 as i32,
        registered_proof: c1.seal_proof.to_string(),
        c1_output: read(&a.c1.c1)?,
        ..Default::default()
    };
    let rt = crate::daemon_client::runtime(4)?;
    let mut c = rt.block_on(crate::daemon_client::connect(&a.conn))?;
    // The first proof loads and compiles the circuit in the daemon: untimed.
    let (warm, secs) = rt.block_on(daemon_proof(&mut c, request.clone()))?;
    println!(
        "daemon warm-up {:>10.3} s  (circuit loaded)",
        secs.as_secs_f64()
    );
    print!("{}", daemon_timings(&warm));
    let run = rt.block_on(timed_proofs(
        &c,
        &request,
        a.proofs,
        a.in_flight,
        a.timeline.as_deref(),
    ))?;
    let mut out = vec![warm.proof];
    let mut times = Vec::new();
    for (k, (r, secs)) in run.proofs.into_iter().enumerate() {
        let t = r.timings.clone().unwrap_or_default();
        println!(
            "daemon proof {k} {secs:>8.3} s  (daemon {:.3} s, lock hold {:.3} s)",
            r.latency_s, t.lock_hold_s
        );
        times.push(secs);
        out.push(r.proof);
    }
    let theirs = if a.no_baseline {
        None
    } else {
        let start = Instant::now();
        let proof = cuzk_filecoin::filecoin_proofs_c2(&c1, prover_id, sector_id, &store)?;
        let fp = start.elapsed().as_secs_f64();
        println!("filecoin-proofs seal_commit_phase2 (CPU) {fp:.3} s");
        out.push(proof);
        Some(fp)
    };
    for (k, proof) in out.iter().enumerate() {
        if !cuzk_filecoin::verify_porep(&c1, proof, prover_id, sector_id, &store)? {
            bail!("verify_seal rejects proof {k} of {}", out.len());
        }
    }
    println!("verify_seal accepts all {} proofs", out.len());
    times.sort_by(f64::total_cmp);
    let median = cuzk_scheduler::stats::median(&times).context("no timed proof")?;
    let per_proof = run.wall / f64::from(a.proofs);
    println!("\n| {} PoRep C2 | seconds |", c1.seal_proof);
    println!("| --- | --- |");
    println!(
        "| cuzk daemon, {} proofs, {} in flight: wall per proof | {per_proof:.3} |",
        a.proofs, a.in_flight
    );
    println!("| cuzk daemon, latency median | {median:.3} |");
    println!(
        "| GPU lock held per proof | {:.3} ({:.0}% of the wall) |",
        run.lock_held / f64::from(a.proofs),
        100.0 * run.lock_held / run.wall
    );
    if let Some(fp) = theirs {
        println!("| filecoin-proofs, CPU | {fp:.3} |");
        println!("| ratio | {:.1}x |", fp / per_proof);
    }
    Ok(())
}

/// Each phase of the timeline's spans: how many, their median and their sum (a partition's
/// synthesis against its GPU phases says which bounds the run).
fn print_phases(spans: &[pb::Span]) {
    let mut phases: Vec<(&str, Vec<f64>)> = Vec::new();
    for s in spans {
        let d = s.end_s - s.start_s;
        match phases.iter_mut().find(|(p, _)| *p == s.phase) {
            Some((_, v)) => v.push(d),
            None => phases.push((&s.phase, vec![d])),
        }
    }
    println!("\n| phase | spans | median s | total s |\n| --- | --- | --- | --- |");
    for (phase, mut v) in phases {
        v.sort_by(f64::total_cmp);
        let total: f64 = v.iter().sum();
        println!(
            "| {phase} | {} | {:.3} | {total:.1} |",
            v.len(),
            v[v.len() / 2]
        );
    }
}

/// `proofs` proofs of `request`, `in_flight` at a time, each on its own connection; the
/// daemon's timeline of them drawn to `svg`.
async fn timed_proofs(
    c: &client::Client,
    request: &pb::FilecoinProof,
    proofs: u32,
    in_flight: u32,
    svg: Option<&Path>,
) -> Result<TimedRun> {
    let mut c = c.clone();
    let busy = |s: &pb::StatusResponse| s.devices.iter().map(|d| d.busy_seconds).sum::<f64>();
    let before = busy(&c.status(pb::StatusRequest {}).await?.into_inner());
    let t0 = c
        .timeline(pb::TimelineRequest { last_s: 1.0 })
        .await?
        .into_inner()
        .now_s;
    let gate = Arc::new(tokio::sync::Semaphore::new(in_flight as usize));
    let start = Instant::now();
    let tasks: Vec<_> = (0..proofs)
        .map(|_| {
            let (mut c, request, gate) = (c.clone(), request.clone(), gate.clone());
            tokio::spawn(async move {
                let _permit = gate.acquire_owned().await?;
                daemon_proof(&mut c, request).await
            })
        })
        .collect();
    let mut done = Vec::new();
    for t in tasks {
        let (r, secs) = t.await.context("a timed proof's task failed")??;
        done.push((r, secs.as_secs_f64()));
    }
    let wall = start.elapsed().as_secs_f64();
    let lock_held = busy(&c.status(pb::StatusRequest {}).await?.into_inner()) - before;
    if let Some(p) = svg {
        let timeline = c
            .timeline(pb::TimelineRequest { last_s: wall + 5.0 })
            .await?
            .into_inner();
        let spans: Vec<pb::Span> = timeline
            .spans
            .into_iter()
            .filter(|s| s.end_s >= t0)
            .collect();
        std::fs::write(p, crate::svg::timeline(&spans, &timeline.devices)?)
            .with_context(|| format!("cannot write {}", p.display()))?;
        println!("timeline: {}", p.display());
        print_phases(&spans);
    }
    Ok(TimedRun {
        proofs: done,
        wall,
        lock_held,
    })
}
