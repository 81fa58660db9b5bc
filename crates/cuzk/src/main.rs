//! `cuzk`: prove and verify Groth16 statements over BLS12-381.
//!
//! `cuzk demo` makes a circuit and its parameters, proves, verifies and prints timings; the
//! other commands do the same steps one at a time on files (see `cuzk help`). `--backend`
//! picks the prover engine (auto: the GPU when present), `devices` lists the GPUs and `bench`
//! times repeated proofs phase by phase.

#![forbid(unsafe_code)]

mod bench;
mod bench_daemon;
mod daemon_cli;
mod daemon_client;
mod filecoin_cli;
mod formats_cli;
mod progress;
mod queue_cli;
mod svg;

use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};
use cuzk_formats::{FormatError, cuzk};
use cuzk_groth16::{BackendChoice, ProofTimings, ProverBackend, R1cs, Witness};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

/// A proof's gigabyte host buffers on huge pages: their page faults were most of a witness's
/// synthesis (`cuzk_vram::LargePages`).
#[global_allocator]
static HEAP: cuzk_vram::LargePages = cuzk_vram::LargePages;

#[derive(Parser, Debug)]
#[command(name = "cuzk", version = version(), about = "GPU Groth16 prover for BLS12-381")]
struct Cli {
    /// Log level for progress events on stderr (error, warn, info, debug, trace).
    #[arg(long, global = true, default_value = "warn", env = "CUZK_LOG")]
    log: String,
    /// Prover engine: auto (the GPU when one is present and the kernels are built), cpu, gpu.
    #[arg(long, global = true, default_value = "auto", value_parser = parse_backend)]
    backend: BackendChoice,
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
    /// List the GPUs and the VRAM budget the prover would use.
    Devices,
    /// Time proofs of a demo circuit through the proving engine: setup, a warm-up, then N
    /// proofs with J in flight (each verified), a per-phase table of medians, throughput,
    /// latency, the GPU's busy share, peak VRAM and peak host memory; `--sizes` repeats it per
    /// size and `--plot` draws time per proof against size. With --queue: N proofs of --key
    /// and --witness through the PostgreSQL queue, J in flight, across every host claiming
    /// from it, each checked with --vk.
    Bench(bench::Args),
    /// Write a demo circuit and a satisfying witness to files.
    Circuit {
        #[arg(long, value_parser = clap::value_parser!(u32).range(4..=28))]
        log_constraints: u32,
        /// Percent of the constraints that are bit decompositions (70 realistic, 0 full-width).
        #[arg(long, default_value_t = 70, value_parser = clap::value_parser!(u32).range(0..=100))]
        boolean_percent: u32,
        #[arg(long, default_value_t = 4)]
        public_inputs: usize,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        #[arg(long)]
        r1cs: PathBuf,
        #[arg(long)]
        witness: PathBuf,
    },
    /// Generate a proving key and a verifying key for a circuit, from random toxic waste; on
    /// the GPU when `--backend` picks one (the same key the CPU would make).
    Setup {
        #[arg(long)]
        r1cs: PathBuf,
        #[arg(long)]
        pk: PathBuf,
        #[arg(long)]
        vk: PathBuf,
    },
    /// Prove that a witness satisfies a circuit: cuzk or bellperson keys (`--pk-format`),
    /// cuzk or circom circuits and witnesses, or a snarkjs `--zkey` with a `--wtns`.
    Prove(formats_cli::ProveArgs),
    /// Check a proof against a verifying key and public inputs (cuzk, bellperson or snarkjs
    /// files); exits non-zero if it fails.
    Verify(formats_cli::VerifyArgs),
    /// Time loading a generated bellperson parameters file: trusted by digest and fully checked.
    BenchParams(formats_cli::BenchParamsArgs),
    /// Filecoin proofs from filecoin-proofs' inputs, checked by its verifiers (filecoin_cli.rs).
    #[command(subcommand)]
    Filecoin(filecoin_cli::FilecoinCommand),
    /// The daemon and its clients (daemon_cli.rs).
    #[command(flatten)]
    Daemon(daemon_cli::DaemonCommand),
}

/// The version, the commit, and the kernels' archs and CUDA release (`cuzk --version`).
fn version() -> &'static str {
    static TEXT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TEXT.get_or_init(|| {
        let kernels = if cuzk_gpu::kernels_built() {
            let archs = cuzk_gpu::kernel_archs();
            let ptx = match cuzk_gpu::kernel_ptx() {
                "" => "no",
                p => p,
            };
            format!(
                "{archs} + {ptx} PTX, CUDA {}",
                cuzk_gpu::kernel_cuda_version()
            )
        } else {
            "none (built without nvcc: CPU only)".to_string()
        };
        format!(
            "{} (commit {})\nkernels: {kernels}",
            env!("CARGO_PKG_VERSION"),
            env!("CUZK_GIT_COMMIT")
        )
    })
}

fn main() {
    let cli = Cli::parse();
    let filter = tracing_subscriber::EnvFilter::try_new(&cli.log)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    // Colour only on a terminal: a log file or journald would keep the escape codes.
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        .init();
    if let Err(err) = run(cli.command, cli.backend) {
        eprintln!("error: {err:#}");
        std::process::exit(1);
    }
}

fn run(command: Command, choice: BackendChoice) -> Result<()> {
    match command {
        Command::Daemon(c) => daemon_cli::run(c, choice),
        Command::Filecoin(c) => filecoin_cli::run(c, choice),
        Command::Demo {
            log_constraints,
            public_inputs,
            seed,
        } => demo(log_constraints, public_inputs, seed, choice),
        Command::Devices => {
            print!("{}", cuzk_gpu::devices_report(&cuzk_groth16::kernel_sets()));
            Ok(())
        }
        Command::Bench(args) => match args.queue.queue.clone() {
            None => bench::run(args, choice),
            Some(url) => {
                let (Some(key), Some(witness)) = (args.key, args.witness) else {
                    bail!("bench --queue needs --key and --witness");
                };
                let work = queue_cli::Work {
                    key,
                    witness,
                    priority: cuzk_scheduler::Priority::Normal,
                };
                tokio::runtime::Builder::new_multi_thread()
                    .enable_all()
                    .build()
                    .context("cannot start the async runtime")?
                    .block_on(queue_cli::bench(
                        &url,
                        work,
                        args.queued,
                        (args.proofs as usize, args.concurrency as usize),
                    ))
            }
        },
        Command::Circuit {
            log_constraints,
            boolean_percent,
            public_inputs,
            seed,
            r1cs,
            witness,
        } => {
            let (circuit, w) = cuzk_groth16::testing::demo::circuit_with(
                log_constraints,
                public_inputs,
                boolean_percent,
                &mut ChaCha20Rng::seed_from_u64(seed),
            )?;
            write_file(&r1cs, |f| cuzk::write_r1cs(f, &circuit))?;
            write_file(&witness, |f| cuzk::write_witness(f, &w))?;
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
            let bar = progress::spinner(format!("reading {}", r1cs.display()));
            let circuit = formats_cli::read_circuit(&r1cs)?;
            let tw = cuzk_groth16::ToxicWaste::random(&mut rand::rngs::OsRng);
            let gpu = setup_gpu(choice)?;
            bar.set_message(format!(
                "making the key of {} constraints on the {}",
                circuit.num_constraints(),
                if gpu.is_some() { "GPU" } else { "CPU" }
            ));
            let (key, timings) = match gpu {
                Some(gpu) => {
                    cuzk_groth16::setup::gpu::generate_parameters_gpu(&gpu, &circuit, &tw)?
                }
                None => cuzk_groth16::generate_parameters_with_toxic_waste(&circuit, &tw)?,
            };
            bar.set_message(format!("writing {}", pk.display()));
            write_file(&pk, |f| cuzk::write_proving_key(f, &key))?;
            write_file(&vk, |f| cuzk::write_verifying_key(f, &key.vk))?;
            progress::done(bar, format!("wrote {} and {}", pk.display(), vk.display()));
            print_table("setup", timings.rows());
            Ok(())
        }
        Command::Prove(args) => formats_cli::prove(args, choice),
        Command::Verify(args) => formats_cli::verify(args),
        Command::BenchParams(args) => formats_cli::bench_params(args),
    }
}

/// The GPU a key is made on: the first one unless `--backend cpu`; `--backend gpu` needs it.
fn setup_gpu(choice: BackendChoice) -> Result<Option<cuzk_gpu::Gpu>> {
    let usable = || cuzk_gpu::driver_present() && cuzk_gpu::kernels_built();
    Ok(match choice {
        BackendChoice::Cpu => None,
        BackendChoice::Gpu if !usable() => {
            anyhow::bail!("--backend gpu: no usable GPU for the setup")
        }
        BackendChoice::Gpu => Some(cuzk_gpu::Gpu::first()?),
        BackendChoice::Auto => usable().then(|| cuzk_gpu::Gpu::first().ok()).flatten(),
    })
}

fn parse_backend(s: &str) -> Result<BackendChoice, String> {
    s.parse()
}

fn backend(choice: BackendChoice) -> Result<Box<dyn ProverBackend>> {
    Ok(cuzk_groth16::select_backend(choice)?)
}

fn demo(
    log_constraints: u32,
    public_inputs: usize,
    seed: u64,
    choice: BackendChoice,
) -> Result<()> {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let backend = backend(choice)?;
    println!(
        "cuzk demo: 2^{log_constraints} constraints, {public_inputs} public inputs, backend: {}",
        backend.describe()
    );
    if backend.name() != "gpu"
        && !cuzk_gpu::kernels_built()
        && cuzk_gpu::device_count().is_ok_and(|n| n > 0)
    {
        println!(
            "hint: this machine has a GPU but cuzk was built without kernels (no nvcc): run \
             `cargo xtask setup-cuda`, then this command again, to prove on the GPU"
        );
    }
    let start = Instant::now();
    let (circuit, witness) =
        cuzk_groth16::testing::demo::circuit(log_constraints, public_inputs, &mut rng)?;
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
    let (proof, timings) = prove(&*backend, &pk, &circuit, &witness, &mut rng)?;

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
    backend: &dyn ProverBackend,
    pk: &cuzk_groth16::ProvingKey,
    circuit: &R1cs,
    witness: &Witness,
    rng: &mut impl rand::RngCore,
) -> Result<(cuzk_groth16::Proof, ProofTimings)> {
    let (r, s) = (cuzk_field::Fr::random(rng), cuzk_field::Fr::random(rng));
    Ok(cuzk_groth16::create_proof_with_backend(
        backend, pk, circuit, witness, r, s,
    )?)
}

pub(crate) const MIB: f64 = (1u64 << 20) as f64;

/// Peak resident set of this process (VmHWM in /proc/self/status), in bytes.
pub(crate) fn peak_host_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

fn print_proof_timings(timings: &ProofTimings) {
    print_table("prove", timings.rows());
}

pub(crate) fn print_table(title: &str, rows: impl IntoIterator<Item = (&'static str, Duration)>) {
    println!("\n{title:<24} {:>12}", "ms");
    for (name, d) in rows {
        println!("  {name:<22} {:>12.1}", ms(d));
    }
}

pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Reads a cuzk file with `read`, whose errors name the path.
fn read_file<T>(
    path: &Path,
    read: impl FnOnce(&str, BufReader<File>) -> Result<T, FormatError>,
) -> Result<T> {
    let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    Ok(read(&path.display().to_string(), BufReader::new(file))?)
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
