//! `cuzk`: prove and verify Groth16 statements over BLS12-381.
//!
//! `cuzk demo` makes a circuit and its parameters, proves, verifies and prints timings; the
//! other commands do the same steps one at a time on files (see `cuzk help`).

#![forbid(unsafe_code)]

use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};
use cuzk_groth16::{ProofTimings, R1cs, Witness, io};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

#[derive(Parser, Debug)]
#[command(name = "cuzk", version, about = "GPU Groth16 prover for BLS12-381")]
struct Cli {
    /// Log level for progress events on stderr (error, warn, info, debug, trace).
    #[arg(long, global = true, default_value = "warn", env = "CUZK_LOG")]
    log: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Make a demo circuit and its parameters, prove, verify, and print a timing table.
    Demo {
        /// The circuit has 2^K constraints.
        #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(4..=28))]
        log_constraints: u32,
        #[arg(long, default_value_t = 4)]
        public_inputs: usize,
        /// Seed for the circuit, the toxic waste and the proof randomness.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// Write a demo circuit and a satisfying witness to files.
    Circuit {
        #[arg(long, value_parser = clap::value_parser!(u32).range(4..=28))]
        log_constraints: u32,
        #[arg(long, default_value_t = 4)]
        public_inputs: usize,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        #[arg(long)]
        r1cs: PathBuf,
        #[arg(long)]
        witness: PathBuf,
    },
    /// Generate a proving key and a verifying key for a circuit, from random toxic waste.
    Setup {
        #[arg(long)]
        r1cs: PathBuf,
        #[arg(long)]
        pk: PathBuf,
        #[arg(long)]
        vk: PathBuf,
    },
    /// Prove that a witness satisfies a circuit.
    Prove {
        #[arg(long)]
        r1cs: PathBuf,
        #[arg(long)]
        pk: PathBuf,
        #[arg(long)]
        witness: PathBuf,
        #[arg(long)]
        proof: PathBuf,
        /// Also write the public inputs (a witness file with no private part), for `verify`.
        #[arg(long)]
        public_out: Option<PathBuf>,
    },
    /// Check a proof against a verifying key and public inputs; exits non-zero if it fails.
    Verify {
        #[arg(long)]
        vk: PathBuf,
        #[arg(long)]
        proof: PathBuf,
        /// A witness file; only its public inputs are read.
        #[arg(long)]
        public: PathBuf,
    },
}

fn main() {
    let cli = Cli::parse();
    let filter = tracing_subscriber::EnvFilter::try_new(&cli.log)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    if let Err(err) = run(cli.command) {
        eprintln!("error: {err:#}");
        std::process::exit(1);
    }
}

fn run(command: Command) -> Result<()> {
    match command {
        Command::Demo {
            log_constraints,
            public_inputs,
            seed,
        } => demo(log_constraints, public_inputs, seed),
        Command::Circuit {
            log_constraints,
            public_inputs,
            seed,
            r1cs,
            witness,
        } => {
            let (circuit, w) = cuzk_groth16::demo::circuit(
                log_constraints,
                public_inputs,
                &mut ChaCha20Rng::seed_from_u64(seed),
            )?;
            write_file(&r1cs, |f| io::write_r1cs(f, &circuit))?;
            write_file(&witness, |f| io::write_witness(f, &w))?;
            println!(
                "wrote {} ({} constraints, {} variables) and {}",
                r1cs.display(),
                circuit.num_constraints(),
                circuit.num_variables(),
                witness.display()
            );
            Ok(())
        }
        Command::Setup { r1cs, pk, vk } => {
            let circuit = read_file(&r1cs, io::read_r1cs)?;
            let (key, timings) = cuzk_groth16::generate_parameters_with_toxic_waste(
                &circuit,
                &cuzk_groth16::ToxicWaste::random(&mut rand::rngs::OsRng),
            )?;
            write_file(&pk, |f| io::write_proving_key(f, &key))?;
            write_file(&vk, |f| io::write_verifying_key(f, &key.vk))?;
            print_table("setup", timings.rows());
            Ok(())
        }
        Command::Prove {
            r1cs,
            pk,
            witness,
            proof,
            public_out,
        } => {
            let circuit = read_file(&r1cs, io::read_r1cs)?;
            let key = read_file(&pk, io::read_proving_key)?;
            let w = read_file(&witness, io::read_witness)?;
            let (p, timings) = prove(&key, &circuit, &w, &mut rand::rngs::OsRng)?;
            write_file(&proof, |f| io::write_proof(f, &p))?;
            if let Some(path) = public_out {
                write_file(&path, |f| {
                    io::write_witness(f, &Witness::new(w.public_inputs(), &[]))
                })?;
            }
            print_proof_timings(&timings);
            Ok(())
        }
        Command::Verify { vk, proof, public } => {
            let key = read_file(&vk, io::read_verifying_key)?;
            let p = read_file(&proof, io::read_proof)?;
            let inputs = read_file(&public, io::read_witness)?;
            let start = Instant::now();
            cuzk_groth16::verify_proof(
                &cuzk_groth16::prepare_verifying_key(&key),
                &p,
                inputs.public_inputs(),
            )
            .context("proof does not verify")?;
            println!("proof verifies ({:.1} ms)", ms(start.elapsed()));
            Ok(())
        }
    }
}

fn demo(log_constraints: u32, public_inputs: usize, seed: u64) -> Result<()> {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    println!(
        "cuzk demo: 2^{log_constraints} constraints, {public_inputs} public inputs, CPU backend"
    );
    let start = Instant::now();
    let (circuit, witness) = cuzk_groth16::demo::circuit(log_constraints, public_inputs, &mut rng)?;
    let make_circuit = start.elapsed();
    println!(
        "circuit: {} constraints, {} variables",
        circuit.num_constraints(),
        circuit.num_variables()
    );

    let start = Instant::now();
    let (pk, setup) = cuzk_groth16::generate_parameters_with_toxic_waste(
        &circuit,
        &cuzk_groth16::ToxicWaste::random(&mut rng),
    )?;
    let setup_total = start.elapsed();
    let (proof, timings) = prove(&pk, &circuit, &witness, &mut rng)?;

    let start = Instant::now();
    let pvk = cuzk_groth16::prepare_verifying_key(&pk.vk);
    cuzk_groth16::verify_proof(&pvk, &proof, witness.public_inputs())
        .context("the demo proof does not verify")?;
    let verify = start.elapsed();

    print_table("setup", setup.rows());
    print_proof_timings(&timings);
    print_table(
        "demo",
        [
            ("make circuit", make_circuit),
            ("setup", setup_total),
            ("prove", timings.total),
            ("verify", verify),
        ],
    );
    println!("proof verified");
    Ok(())
}

fn prove(
    pk: &cuzk_groth16::ProvingKey,
    circuit: &R1cs,
    witness: &Witness,
    rng: &mut impl rand::RngCore,
) -> Result<(cuzk_groth16::Proof, ProofTimings)> {
    let (r, s) = (cuzk_field::Fr::random(rng), cuzk_field::Fr::random(rng));
    Ok(cuzk_groth16::create_proof_with_backend(
        &cuzk_groth16::CpuBackend,
        pk,
        circuit,
        witness,
        r,
        s,
    )?)
}

fn print_proof_timings(timings: &ProofTimings) {
    print_table("prove", timings.rows());
}

fn print_table(title: &str, rows: impl IntoIterator<Item = (&'static str, Duration)>) {
    println!("\n{title:<24} {:>12}", "ms");
    for (name, d) in rows {
        println!("  {name:<22} {:>12.1}", ms(d));
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn read_file<T, E>(path: &Path, read: impl FnOnce(BufReader<File>) -> Result<T, E>) -> Result<T>
where
    E: std::error::Error + Send + Sync + 'static,
{
    let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    read(BufReader::new(file)).with_context(|| format!("cannot read {}", path.display()))
}

fn write_file<E>(
    path: &Path,
    write: impl FnOnce(&mut BufWriter<File>) -> Result<(), E>,
) -> Result<()>
where
    E: std::error::Error + Send + Sync + 'static,
{
    if path.as_os_str().is_empty() {
        bail!("empty output path");
    }
    let file = File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    let mut out = BufWriter::new(file);
    write(&mut out).with_context(|| format!("cannot write {}", path.display()))?;
    out.flush()
        .with_context(|| format!("cannot write {}", path.display()))
}
