//! `cuzk filecoin …`: Filecoin proofs from filecoin-proofs' own inputs (cuzk-filecoin).

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use cuzk_filecoin::{C1Output, FilecoinProver, ParamStore, SealProof};
use cuzk_groth16::BackendChoice;

#[derive(Subcommand, Debug)]
pub enum FilecoinCommand {
    /// PoRep C2: prove a C1 output (filecoin-ffi's JSON, filecoin-proofs' bare JSON or curio's
    /// wrapper) and write filecoin-proofs' proof bytes (192 per partition).
    PorepC2 {
        #[command(flatten)]
        c1: C1Args,
        /// Where to write the proof.
        #[arg(long)]
        proof: PathBuf,
        #[command(flatten)]
        params: ParamArgs,
    },
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
    /// Seal a sector of random data with filecoin-proofs on the CPU (add_piece, PC1, PC2,
    /// C1) and write its C1 output as filecoin-ffi does: a test workload.
    Seal {
        /// Registered proof or size: StackedDrg2KiBV1_1, 2KiB, 8MiB, 512MiB, 32GiB, 64GiB.
        #[arg(long, default_value = "2KiB")]
        seal_proof: SealProof,
        #[arg(long, default_value_t = 1000)]
        miner_id: u64,
        #[arg(long, default_value_t = 1)]
        sector_id: u64,
        /// Scratch directory for the sector's files (removed afterwards).
        #[arg(long)]
        work_dir: PathBuf,
        /// Where to write the C1 JSON.
        #[arg(long)]
        c1: PathBuf,
    },
}

#[derive(Subcommand, Debug)]
pub enum VerifyCommand {
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
        FilecoinCommand::PorepC2 { c1, proof, params } => {
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
        FilecoinCommand::GenParams { c1, params } => {
            let c1 = c1.read()?;
            let store = params.store()?;
            let start = Instant::now();
            let made = store.generate_porep(&c1, &mut rand::rngs::OsRng)?;
            let id = c1.circuit_id()?;
            println!(
                "{} {} ({:.1} s)",
                if made { "wrote" } else { "already there:" },
                store.params_path(&id).display(),
                start.elapsed().as_secs_f64()
            );
            Ok(())
        }
        FilecoinCommand::Seal {
            seal_proof,
            miner_id,
            sector_id,
            work_dir,
            c1,
        } => {
            let start = Instant::now();
            let sector = cuzk_filecoin::workload::seal_sector(
                seal_proof,
                &work_dir,
                miner_id,
                sector_id,
                &mut rand::rngs::OsRng,
            )?;
            std::fs::remove_dir_all(&work_dir).ok();
            println!("seal           {:>10.1} ms", ms(start));
            write(&c1, &sector.c1_json)
        }
    }
}

fn write(path: &Path, bytes: &[u8]) -> Result<()> {
    std::fs::write(path, bytes).with_context(|| format!("writing {}", path.display()))
}
