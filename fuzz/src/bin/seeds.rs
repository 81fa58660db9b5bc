//! Writes the seed corpus: small valid files of every format, made by cuzk's writers from
//! real circuits, the Filecoin inputs of a 2 KiB sector sealed by filecoin-proofs, plus the files of a snarkjs/circom run when a folder of them is given.
//!
//! `cargo run -p cuzk-fuzz --features seeds --bin cuzk-fuzz-seeds -- [--snarkjs DIR]` (DIR
//! holding chain.r1cs, chain.wtns, chain.zkey, proof.json, public.json, vk.json) rewrites
//! `corpus/<target>/seed-*`.

use std::path::Path;

use base64::Engine as _;
use cuzk_daemon::pb;
use cuzk_formats::{BpParameters, BpVerifyingKey, CircomR1cs, Wtns, bellperson, cuzk, snarkjs};
use cuzk_fuzz::daemon::{frame, method, write_key_files};
use rand::SeedableRng;

/// Errors as strings: this tool only reports them.
type Result<T> = std::result::Result<T, String>;

/// A seed its target accepts.
fn put(target: &str, name: &str, bytes: &[u8]) -> Result<()> {
    write(target, &format!("seed-{name}"), bytes)
}

/// A seed its target must refuse (`rejected-*`: the replay test checks that).
fn put_rejected(target: &str, name: &str, bytes: &[u8]) -> Result<()> {
    write(target, &format!("rejected-{name}"), bytes)
}

fn write(target: &str, name: &str, bytes: &[u8]) -> Result<()> {
    let dir = cuzk_fuzz::corpus_dir(target);
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let p = dir.join(name);
    std::fs::write(&p, bytes).map_err(|e| format!("{}: {e}", p.display()))?;
    println!("{:>8} B  {}", bytes.len(), p.display());
    Ok(())
}

fn cuzk_file(f: impl FnOnce(&mut Vec<u8>) -> std::io::Result<()>) -> Vec<u8> {
    let mut v = Vec::new();
    f(&mut v).expect("writing to memory");
    v
}

fn cuzk_and_foreign() -> Result<()> {
    for (log, seed) in [(3u32, 1u64), (5, 2)] {
        let tag = format!("log{log}");
        let (r1cs, w, pk) = cuzk_fuzz::fixture::circuit(log, seed);
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
        let proof = cuzk_groth16::create_proof(&pk, &r1cs, &w, &mut rng)
            .map_err(|e| format!("prove: {e}"))?;
        put(
            "cuzk_r1cs",
            &tag,
            &cuzk_file(|v| cuzk::write_r1cs(v, &r1cs)),
        )?;
        put(
            "cuzk_pk",
            &tag,
            &cuzk_file(|v| cuzk::write_proving_key(v, &pk)),
        )?;
        put(
            "cuzk_witness",
            &tag,
            &cuzk_file(|v| cuzk::write_witness(v, &w)),
        )?;
        put(
            "cuzk_proof_vk",
            &format!("proof-{tag}"),
            &cuzk_file(|v| cuzk::write_proof(v, &proof)),
        )?;
        put(
            "cuzk_proof_vk",
            &format!("vk-{tag}"),
            &cuzk_file(|v| cuzk::write_verifying_key(v, &pk.vk)),
        )?;
        let bp = BpParameters::from_proving_key(&pk).map_err(|e| e.to_string())?;
        let mut params = Vec::new();
        bp.write(&mut params).map_err(|e| e.to_string())?;
        put("bellperson_params", &tag, &params)?;
        put(
            "bellperson_vk_proof",
            &format!("vk-{tag}"),
            &BpVerifyingKey::from_proving_key(&pk).to_bytes(),
        )?;
        put(
            "bellperson_vk_proof",
            &format!("proof-{tag}"),
            &bellperson::proof_to_bytes(&proof),
        )?;
        put("iden3_r1cs", &tag, &CircomR1cs::from_r1cs(&r1cs).to_bytes())?;
        let wtns = Wtns {
            values: w.assignment().to_vec(),
        };
        put("iden3_wtns", &tag, &wtns.to_bytes())?;
        let json = |v: serde_json::Value| v.to_string().into_bytes();
        put(
            "snarkjs_json",
            &format!("proof-{tag}"),
            &json(snarkjs::proof_to_json(&proof)),
        )?;
        put(
            "snarkjs_json",
            &format!("public-{tag}"),
            &json(snarkjs::public_to_json(w.public_inputs())),
        )?;
        put(
            "snarkjs_json",
            &format!("vk-{tag}"),
            &json(snarkjs::vk_to_json(&pk.vk)),
        )?;
    }
    Ok(())
}

/// Real files of snarkjs and circom (copied as they are).
fn snarkjs_files(dir: &Path) -> Result<()> {
    for (file, target) in [
        ("chain.r1cs", "iden3_r1cs"),
        ("chain.wtns", "iden3_wtns"),
        ("chain.zkey", "zkey"),
        ("proof.json", "snarkjs_json"),
        ("public.json", "snarkjs_json"),
        ("vk.json", "snarkjs_json"),
    ] {
        let p = dir.join(file);
        let b = std::fs::read(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        put(target, &format!("snarkjs-{file}"), &b)?;
    }
    Ok(())
}

fn daemon() -> Result<()> {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../cuzk.example.toml");
    let text = std::fs::read(&example).map_err(|e| format!("{}: {e}", example.display()))?;
    put("daemon_config", "example", &text)?;
    put(
        "daemon_config",
        "tcp",
        b"listen = \"127.0.0.1:9000\"\ntoken_file = \"token\"\nbackend = \"cpu\"\n\
          [[keys]]\nid = \"k\"\npk = \"k.pk\"\nr1cs = \"k.r1cs\"\ndevices = [0]\n",
    )?;
    let dir = std::env::temp_dir().join(format!("cuzk-fuzz-seeds-{}", std::process::id()));
    let wit = write_key_files(&dir).map_err(|e| e.to_string())?;
    let _ = std::fs::remove_dir_all(&dir);
    let msg = |m: u8, body: Vec<u8>| [vec![m], body].concat();
    use prost::Message;
    put(
        "daemon_requests",
        "load_key",
        &msg(
            method::LOAD_KEY,
            pb::LoadKeyRequest {
                key_id: "k2".into(),
                pk_path: "k.pk".into(),
                r1cs_path: "k.r1cs".into(),
                devices: vec![0],
                trusted: false,
            }
            .encode_to_vec(),
        ),
    )?;
    put(
        "daemon_requests",
        "unload_key",
        &msg(
            method::UNLOAD_KEY,
            pb::UnloadKeyRequest { key_id: "k".into() }.encode_to_vec(),
        ),
    )?;
    let header = pb::SubmitHeader {
        key_id: "k".into(),
        priority: pb::Priority::High as i32,
        request_id: "seed".into(),
        ..Default::default()
    };
    let chunks = cuzk_daemon::client::bytes_stream(header.clone(), &wit);
    put(
        "daemon_requests",
        "submit_bytes",
        &msg(method::SUBMIT, frame(&chunks)),
    )?;
    // No request_id: the same id would name the job above, which the harness cancelled.
    let anonymous = pb::SubmitHeader {
        request_id: String::new(),
        ..header.clone()
    };
    let prove = cuzk_daemon::client::bytes_stream(anonymous, &wit);
    put(
        "daemon_requests",
        "prove_bytes",
        &msg(method::PROVE, frame(&prove)),
    )?;
    let by_path = pb::SubmitRequest {
        msg: Some(pb::submit_request::Msg::Header(pb::SubmitHeader {
            witness: Some(pb::submit_header::Witness::WitnessPath("k.wit".into())),
            device: Some(0),
            ..header
        })),
    };
    put(
        "daemon_requests",
        "submit_path",
        &msg(method::SUBMIT, frame(&[by_path])),
    )?;
    let id = pb::AwaitRequest {
        job_id: "0123456789abcdef0123456789abcdef".into(),
        job_token: "fedcba9876543210fedcba9876543210".into(),
        timeout_ms: 1,
    };
    // Another client's job ids cannot be awaited or cancelled: both are refused.
    put_rejected(
        "daemon_requests",
        "await",
        &msg(method::AWAIT, id.encode_to_vec()),
    )?;
    let cancel = pb::CancelRequest {
        job_id: id.job_id,
        job_token: id.job_token,
    };
    put_rejected(
        "daemon_requests",
        "cancel",
        &msg(method::CANCEL, cancel.encode_to_vec()),
    )?;
    put(
        "daemon_requests",
        "timeline",
        &msg(
            method::TIMELINE,
            pb::TimelineRequest { last_s: 1.0 }.encode_to_vec(),
        ),
    )?;
    Ok(())
}

/// A 2 KiB sector sealed by filecoin-proofs: its C1 output in the three forms, its PoSt and
/// SnapDeals vanilla proofs, each behind the first byte its harness reads.
fn filecoin() -> Result<()> {
    use cuzk_filecoin::workload::{post_vanilla_proofs, seal_sector, snap_update};
    use cuzk_filecoin::{PostProof, SealProof};
    use cuzk_fuzz::filecoin::{post_pick, seal_pick};
    const KIB2: SealProof = SealProof::StackedDrg2KiBV1_1;
    let e = |e: cuzk_filecoin::FilecoinError| e.to_string();
    let dir = std::env::temp_dir().join(format!("cuzk-fuzz-seeds-{}", std::process::id()));
    let rng = &mut rand_chacha::ChaCha20Rng::seed_from_u64(3);
    let sector = seal_sector(KIB2, &dir, 1000, 1, rng).map_err(e)?;
    let with = |pick: u8, bytes: &[u8]| [&[pick][..], bytes].concat();

    let api: serde_json::Value =
        serde_json::from_slice(&sector.commit.c1_json).map_err(|e| e.to_string())?;
    // filecoin-proofs' bare form: no registered proof, the one shape's proofs unwrapped.
    let mut bare = api.clone();
    let obj = bare.as_object_mut().ok_or("C1 JSON is not an object")?;
    obj.remove("registered_proof");
    let proofs = obj.remove("vanilla_proofs").ok_or("no vanilla_proofs")?;
    let proofs = proofs
        .as_object()
        .and_then(|o| o.values().next())
        .ok_or("vanilla_proofs")?;
    obj.insert("vanilla_proofs".into(), proofs.clone());
    let curio = serde_json::json!({
        "SectorNum": sector.commit.sector_id,
        "Phase1Out": base64::engine::general_purpose::STANDARD.encode(&sector.commit.c1_json),
        "SectorSize": KIB2.sector_size(),
    });
    let json = |v: &serde_json::Value| serde_json::to_vec(v).expect("JSON of a JSON value");
    put("filecoin_c1", "api", &with(0, &sector.commit.c1_json))?;
    put(
        "filecoin_c1",
        "bare",
        &with(1 + seal_pick(KIB2), &json(&bare)),
    )?;
    put("filecoin_c1", "curio", &with(0, &json(&curio)))?;
    // The bare form names no proof: without a stated one it is refused.
    put_rejected("filecoin_c1", "bare_unstated", &with(0, &json(&bare)))?;
    put_rejected(
        "filecoin_c1",
        "truncated",
        &with(0, &sector.commit.c1_json[..sector.commit.c1_json.len() / 2]),
    )?;

    let mut randomness = [7u8; 32];
    randomness[31] &= 0x3f;
    for (name, proof) in [
        ("window", PostProof::window(KIB2)),
        ("winning", PostProof::winning(KIB2)),
    ] {
        let v = post_vanilla_proofs(proof, &[&sector], randomness).map_err(e)?;
        put("filecoin_post_vanilla", name, &with(post_pick(proof), &v))?;
        put_rejected(
            "filecoin_post_vanilla",
            &format!("{name}_truncated"),
            &with(post_pick(proof), &v[..v.len() - 1]),
        )?;
    }

    let (_, v) = snap_update(&sector, rng).map_err(e)?;
    put(
        "filecoin_snap_vanilla",
        "update",
        &with(seal_pick(KIB2), &v),
    )?;
    // 32 GiB proofs have another tree shape: a 2 KiB update's bytes are not theirs.
    put_rejected(
        "filecoin_snap_vanilla",
        "wrong_size",
        &with(seal_pick(SealProof::StackedDrg32GiBV1_1), &v),
    )?;
    std::fs::remove_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok(())
}

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let snarkjs = match args.as_slice() {
        [] => None,
        [flag, dir] if flag == "--snarkjs" => Some(dir.clone()),
        _ => {
            eprintln!("usage: cuzk-fuzz-seeds [--snarkjs DIR]");
            return std::process::ExitCode::from(2);
        }
    };
    let r = cuzk_and_foreign()
        .and_then(|()| daemon())
        .and_then(|()| filecoin())
        .and_then(|()| snarkjs.map_or(Ok(()), |d| snarkjs_files(Path::new(&d))));
    match r {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
