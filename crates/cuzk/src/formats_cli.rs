//! `cuzk prove` and `cuzk verify` on every file format cuzk reads, and `cuzk bench-params`.
//!
//! Formats are detected from the files' first bytes (cuzk's `CUZK` magic, iden3's `r1cs`,
//! `wtns`, `zkey`, JSON), bellperson's magic-less files by elimination; `--pk-format` forces
//! the key's. A zkey proves on the CPU with snarkjs's own domain (cuzk-formats); everything
//! else goes through cuzk's prover and the chosen backend.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use cuzk_field::{Fr, G1Affine, G2Affine};
use cuzk_formats::bellperson::{proof_from_bytes, proof_to_bytes};
use cuzk_formats::{
    BpParameters, BpVerifyingKey, CircomR1cs, Digest, KeyKind, PointChecks, Wtns, Zkey, cuzk,
    snarkjs,
};
use cuzk_groth16::{BackendChoice, Proof, R1cs, VerifyingKey, Witness};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PkFormat {
    /// From the file's first bytes.
    Auto,
    Cuzk,
    Bellperson,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ProofFormat {
    /// snarkjs JSON for a `.json` path or a zkey, bellperson's 192 bytes for bellperson
    /// parameters, cuzk's file otherwise.
    Auto,
    Cuzk,
    Bellperson,
    Snarkjs,
}

/// `cuzk prove`: cuzk or bellperson keys with cuzk or circom circuits, or a snarkjs zkey.
#[derive(Args, Debug)]
pub struct ProveArgs {
    /// The circuit: cuzk's file or circom's `.r1cs` (detected).
    #[arg(long, required_unless_present = "zkey")]
    r1cs: Option<PathBuf>,
    /// The proving key: cuzk's file or bellperson's parameters.
    #[arg(long, required_unless_present = "zkey")]
    pk: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "auto")]
    pk_format: PkFormat,
    /// Load bellperson parameters trusted by this digest of the whole file (`sha256:HEX`,
    /// `blake2b:HEX`, a BLAKE2b-512 prefix of 16+ bytes as Filecoin publishes, or `blake3:HEX`,
    /// the fastest) instead of subgroup-checking every point.
    #[arg(long)]
    pk_digest: Option<String>,
    /// The witness: cuzk's file or a `.wtns` (detected).
    #[arg(long, required_unless_present = "wtns")]
    witness: Option<PathBuf>,
    /// A snarkjs Groth16 key: proves as snarkjs does (CPU), with `--wtns`.
    #[arg(long, requires = "wtns", conflicts_with_all = ["r1cs", "pk", "witness"])]
    zkey: Option<PathBuf>,
    /// A circom witness (`.wtns`).
    #[arg(long, conflicts_with = "witness")]
    wtns: Option<PathBuf>,
    #[arg(long)]
    proof: PathBuf,
    #[arg(long, value_enum, default_value = "auto")]
    proof_format: ProofFormat,
    /// Also write the public inputs: snarkjs's `public.json` for a `.json` path, else a cuzk
    /// witness file with no private part.
    #[arg(long = "public-out", visible_alias = "public")]
    public_out: Option<PathBuf>,
}

/// `cuzk verify`: cuzk, bellperson or snarkjs verifying keys and proofs.
#[derive(Args, Debug)]
pub struct VerifyArgs {
    /// cuzk's verifying key, bellperson's `VerifyingKey`, or `verification_key.json`.
    #[arg(long)]
    vk: PathBuf,
    /// cuzk's proof, bellperson's 192 bytes, or `proof.json`.
    #[arg(long)]
    proof: PathBuf,
    /// The public inputs: a cuzk witness file (only its public part is read) or `public.json`.
    #[arg(long)]
    public: PathBuf,
}

/// `cuzk bench-params`: loading a bellperson parameters file of a given size.
#[derive(Args, Debug)]
pub struct BenchParamsArgs {
    /// Queries of 2^K points each (h, l, a, b_g1 in G1 and b_g2 in G2: full density); 2^24
    /// makes a 9.7 GB file.
    #[arg(long, value_parser = clap::value_parser!(u32).range(4..=27))]
    log_size: u32,
    /// Folder for the generated file (deleted afterwards unless --keep).
    #[arg(long)]
    dir: Option<PathBuf>,
    #[arg(long)]
    keep: bool,
    /// Load each mode this many times (the best time is reported; the fully checked load of a
    /// 2^24 file takes minutes on 16 cores without a GPU; with one, the subgroup checks run on
    /// it).
    #[arg(long, default_value_t = 1)]
    runs: u32,
    /// Skip the fully checked load (hours on 2 cores without a GPU at 2^24).
    #[arg(long)]
    no_full: bool,
}

fn head(path: &Path) -> Result<Vec<u8>> {
    let mut f =
        std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut b = vec![0u8; 16];
    let mut got = 0;
    while got < b.len() {
        let k = f
            .read(&mut b[got..])
            .with_context(|| format!("cannot read {}", path.display()))?;
        if k == 0 {
            break;
        }
        got += k;
    }
    b.truncate(got);
    Ok(b)
}

fn is_json(b: &[u8]) -> bool {
    matches!(
        b.iter().find(|c| !c.is_ascii_whitespace()),
        Some(b'{' | b'[')
    )
}

fn is_json_path(p: &Path) -> bool {
    p.extension().is_some_and(|e| e == "json")
}

/// cuzk's circuit file or circom's `.r1cs`, by the first bytes.
pub(crate) fn read_circuit(path: &Path) -> Result<R1cs> {
    if head(path)?.starts_with(b"r1cs") {
        let r = CircomR1cs::read(path)?;
        Ok(r.to_r1cs(&path.display().to_string())?)
    } else {
        crate::read_file(path, cuzk::read_r1cs)
    }
}

fn read_witness(path: &Path, num_public: usize) -> Result<Witness> {
    if head(path)?.starts_with(b"wtns") {
        Ok(Wtns::read(path)?.to_witness(num_public, &path.display().to_string())?)
    } else {
        crate::read_file(path, cuzk::read_witness)
    }
}

fn write_proof(path: &Path, p: &Proof, format: ProofFormat) -> Result<()> {
    match format {
        ProofFormat::Snarkjs => Ok(snarkjs::write_proof(path, p)?),
        ProofFormat::Bellperson => std::fs::write(path, proof_to_bytes(p))
            .with_context(|| format!("cannot write {}", path.display())),
        ProofFormat::Cuzk | ProofFormat::Auto => {
            crate::write_file(path, |f| cuzk::write_proof(f, p))
        }
    }
}

fn write_public(path: &Path, inputs: &[Fr]) -> Result<()> {
    if is_json_path(path) {
        Ok(snarkjs::write_public(path, inputs)?)
    } else {
        crate::write_file(path, |f| cuzk::write_witness(f, &Witness::new(inputs, &[])))
    }
}

pub fn prove(args: ProveArgs, choice: BackendChoice) -> Result<()> {
    let auto_json = is_json_path(&args.proof);
    if let Some(zkey_path) = &args.zkey {
        let wtns_path = args.wtns.as_ref().context("--zkey needs --wtns")?;
        let start = Instant::now();
        let zkey = Zkey::read(zkey_path, &PointChecks::Full)?;
        let wtns = Wtns::read(wtns_path)?;
        let load = start.elapsed();
        let mut rng = rand::rngs::OsRng;
        let start = Instant::now();
        let proof = zkey.prove(
            &wtns.values,
            Fr::random(&mut rng),
            Fr::random(&mut rng),
            &wtns_path.display().to_string(),
        )?;
        let prove = start.elapsed();
        self_check(
            &zkey.verifying_key(),
            &proof,
            &wtns.values[1..=zkey.n_public],
        )?;
        let format = match args.proof_format {
            ProofFormat::Auto => ProofFormat::Snarkjs,
            f => f,
        };
        write_proof(&args.proof, &proof, format)?;
        if let Some(p) = &args.public_out {
            write_public(p, &wtns.values[1..=zkey.n_public])?;
        }
        crate::print_table("prove (zkey, CPU)", [("load", load), ("prove", prove)]);
        return Ok(());
    }
    let (Some(r1cs_path), Some(pk_path)) = (&args.r1cs, &args.pk) else {
        bail!("--r1cs and --pk are needed (or --zkey and --wtns)");
    };
    let circuit = read_circuit(r1cs_path)?;
    let witness_path = args
        .witness
        .as_ref()
        .or(args.wtns.as_ref())
        .context("--witness (or --wtns) is needed")?;
    let w = read_witness(witness_path, circuit.num_public())?;
    let kind = match args.pk_format {
        PkFormat::Cuzk => KeyKind::Cuzk,
        PkFormat::Bellperson => KeyKind::Bellperson,
        PkFormat::Auto => {
            head(pk_path)?;
            cuzk_formats::detect_key(pk_path)?
        }
    };
    let start = Instant::now();
    let key = match kind {
        KeyKind::Cuzk => crate::read_file(pk_path, |f, r| {
            cuzk::read_proving_key(f, r, &PointChecks::Full)
        })?,
        KeyKind::Zkey => bail!(
            "{} is a snarkjs zkey: prove it with --zkey and --wtns",
            pk_path.display()
        ),
        KeyKind::Bellperson => {
            let checks = match &args.pk_digest {
                Some(d) => PointChecks::TrustedDigest(
                    Digest::parse(d)
                        .map_err(anyhow::Error::msg)
                        .context("--pk-digest")?,
                ),
                None => PointChecks::Full,
            };
            BpParameters::read(pk_path, &checks)?
                .into_proving_key(&circuit, &pk_path.display().to_string())?
        }
    };
    let load = start.elapsed();
    let backend = crate::backend(choice)?;
    let (p, timings) = crate::prove(&*backend, &key, &circuit, &w, &mut rand::rngs::OsRng)?;
    self_check(&key.vk, &p, w.public_inputs())?;
    let format = match args.proof_format {
        ProofFormat::Auto if auto_json => ProofFormat::Snarkjs,
        ProofFormat::Auto if kind == KeyKind::Bellperson => ProofFormat::Bellperson,
        f => f,
    };
    write_proof(&args.proof, &p, format)?;
    if let Some(path) = &args.public_out {
        write_public(path, w.public_inputs())?;
    }
    crate::print_table("load key", [("load", load)]);
    crate::print_proof_timings(&timings);
    Ok(())
}

/// A proof that does not pass the pairing check is never written; one that does says so.
fn self_check(vk: &VerifyingKey, p: &Proof, public: &[Fr]) -> Result<()> {
    let start = Instant::now();
    cuzk_groth16::verify_proof(&cuzk_groth16::prepare_verifying_key(vk), p, public)
        .context("the proof failed its self-check (pairing verification); not written")?;
    println!(
        "self-check passed: the proof verifies against the key's verifying key ({:.1} ms)",
        crate::ms(start.elapsed())
    );
    Ok(())
}

fn read_vk(path: &Path) -> Result<VerifyingKey> {
    let h = head(path)?;
    if is_json(&h) {
        Ok(snarkjs::read_vk(path)?)
    } else if h.starts_with(&cuzk::MAGIC) {
        crate::read_file(path, cuzk::read_verifying_key)
    } else {
        Ok(BpVerifyingKey::read(path)?.to_cuzk())
    }
}

fn read_proof(path: &Path) -> Result<Proof> {
    let h = head(path)?;
    if is_json(&h) {
        Ok(snarkjs::read_proof(path)?)
    } else if h.starts_with(&cuzk::MAGIC) {
        crate::read_file(path, cuzk::read_proof)
    } else {
        let b = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
        Ok(proof_from_bytes(&path.display().to_string(), &b)?)
    }
}

fn read_public(path: &Path) -> Result<Vec<Fr>> {
    if is_json(&head(path)?) {
        Ok(snarkjs::read_public(path)?)
    } else {
        Ok(crate::read_file(path, cuzk::read_witness)?
            .public_inputs()
            .to_vec())
    }
}

pub fn verify(args: VerifyArgs) -> Result<()> {
    let key = read_vk(&args.vk)?;
    let p = read_proof(&args.proof)?;
    let inputs = read_public(&args.public)?;
    let start = Instant::now();
    cuzk_groth16::verify_proof(&cuzk_groth16::prepare_verifying_key(&key), &p, &inputs)
        .context("proof does not verify")?;
    println!("proof verifies ({:.1} ms)", crate::ms(start.elapsed()));
    Ok(())
}

pub fn bench_params(args: BenchParamsArgs) -> Result<()> {
    use rand::SeedableRng;
    let n = 1usize << args.log_size;
    let dir = args.dir.clone().unwrap_or_else(std::env::temp_dir);
    let path = dir.join(format!("cuzk-bench-2^{}.params", args.log_size));
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(1);
    let start = Instant::now();
    let g1 =
        |rng: &mut rand_chacha::ChaCha20Rng| cuzk_msm::testing::random_points::<G1Affine>(n, rng);
    let vk_g1 = cuzk_msm::testing::random_points::<G1Affine>(5, &mut rng);
    let vk_g2 = cuzk_msm::testing::random_points::<G2Affine>(3, &mut rng);
    let params = BpParameters {
        vk: BpVerifyingKey {
            alpha_g1: vk_g1[0],
            beta_g1: vk_g1[1],
            beta_g2: vk_g2[0],
            gamma_g2: vk_g2[1],
            delta_g1: vk_g1[2],
            delta_g2: vk_g2[2],
            ic: vk_g1[3..].to_vec(),
        },
        h: g1(&mut rng),
        l: g1(&mut rng),
        a: g1(&mut rng),
        b_g1: g1(&mut rng),
        b_g2: cuzk_msm::testing::random_points::<G2Affine>(n, &mut rng),
    };
    params.write_file(&path)?;
    // Each load is compared with these (the first and last point of every query).
    let ends = |q: &[G1Affine]| [q[0], q[q.len() - 1]];
    let sample = |p: &BpParameters| {
        (
            [ends(&p.h), ends(&p.l), ends(&p.a), ends(&p.b_g1)],
            [p.b_g2[0], p.b_g2[p.b_g2.len() - 1]],
            p.vk.ic.clone(),
        )
    };
    let expected = sample(&params);
    drop(params);
    let made = start.elapsed();
    let bytes = std::fs::metadata(&path)?.len() as f64;
    let gb = bytes / 1e9;
    println!(
        "bellperson params 2^{}: {:.2} GB written in {:.1} s ({}), {} threads",
        args.log_size,
        gb,
        made.as_secs_f64(),
        path.display(),
        rayon::current_num_threads()
    );
    // Digests of the file, the way a caller would have them (timed: read and hash alone).
    let hash_time = |d: Digest| -> Result<(f64, Vec<u8>)> {
        let t = Instant::now();
        let data = std::fs::read(&path)?;
        let out = d.compute_like(&data);
        Ok((t.elapsed().as_secs_f64(), out))
    };
    let (t_sha, s) = hash_time(Digest::Sha256([0; 32]))?;
    let sha = Digest::Sha256(
        s.try_into()
            .map_err(|_| anyhow::anyhow!("SHA-256 is 32 bytes"))?,
    );
    let (t_b2, b) = hash_time(Digest::Blake2b(vec![]))?;
    let blake = Digest::Blake2b(b);
    let (t_b3, b) = hash_time(Digest::Blake3([0; 32]))?;
    let blake3 = Digest::Blake3(
        b.try_into()
            .map_err(|_| anyhow::anyhow!("BLAKE3 is 32 bytes"))?,
    );
    let full = match cuzk_msm::subgroup::Gpu::available() {
        Some(g) => format!("full checks (GPU {})", g.info().name),
        None => "full checks (CPU)".to_string(),
    };
    let modes = [
        ("trusted by SHA-256", PointChecks::TrustedDigest(sha)),
        ("trusted by BLAKE2b-512", PointChecks::TrustedDigest(blake)),
        ("trusted by BLAKE3", PointChecks::TrustedDigest(blake3)),
        (full.as_str(), PointChecks::Full),
    ];
    println!("\n{:<32} {:>10} {:>10}", "load (page cache)", "s", "GB/s");
    for (name, t) in [
        ("read + SHA-256 only", t_sha),
        ("read + BLAKE2b only", t_b2),
        ("read + BLAKE3 only", t_b3),
    ] {
        println!("{name:<32} {t:>10.2} {:>10.2}", gb / t);
    }
    for (name, checks) in modes {
        if args.no_full && checks == PointChecks::Full {
            continue;
        }
        let mut best = f64::MAX;
        for _ in 0..args.runs.max(1) {
            let t = Instant::now();
            let p = BpParameters::read(&path, &checks)?;
            best = best.min(t.elapsed().as_secs_f64());
            if sample(&p) != expected {
                bail!("{name}: the loaded points differ from the written ones");
            }
            drop(p);
        }
        println!("{name:<32} {best:>10.2} {:>10.2}", gb / best);
    }
    if !args.keep {
        let _ = std::fs::remove_file(&path);
    }
    Ok(())
}
