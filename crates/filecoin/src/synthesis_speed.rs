//! Witness-only synthesis of every Filecoin circuit against bellperson's own synthesis of the
//! same circuit, in one run (issues 43 and 39). Ignored: it takes minutes. The workloads come
//! from sparse trees (`crate::sparse`), so any sector size can be timed.
//!
//! `CUZK_SYNTH_SECTORS=2KiB,8MiB,32GiB cargo test -p cuzk-filecoin --lib synthesis_speed --
//! --ignored --nocapture` (default: 2KiB; the test profile is optimized). `CUZK_SYNTH_ONLY=Post`
//! times only the circuits whose name contains it; `CUZK_SYNTH_RUNS` sets the runs (3).
//!
//! bellperson's figure is its prover's own "synthesis time" log line: `ProvingAssignment`
//! (evaluating a, b and c as it goes) over the circuit, as `create_random_proof_batch` runs it.
//! Its parameters are a source that fails at the first key read, which comes right after
//! synthesis, so no parameters are needed. Each cuzk witness must equal the one its compile
//! produced (same statement, same assignment), which must satisfy every row.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bellperson::groth16::{ParameterSource, VerifyingKey};
use bellperson::{Circuit, SynthesisError};
use blstrs::{Bls12, G1Affine, G2Affine, Scalar};
use cuzk_bellpepper::CompiledCircuit;
use rand::SeedableRng;

use crate::c1::with_phase1;
use crate::porep::PorepCircuits;
use crate::post::{post_circuit, with_sectors};
use crate::snap::{SnapPartition, snap_circuits, with_proofs};
use crate::sparse::{sparse_post, sparse_seal, sparse_snap};
use crate::synth::PartitionCircuit;
use crate::{C1Output, PostProof, PostStatement, PostVanilla, SealProof, SnapVanilla};

fn runs() -> usize {
    std::env::var("CUZK_SYNTH_RUNS").map_or(3, |r| {
        r.parse()
            .unwrap_or_else(|e| panic!("CUZK_SYNTH_RUNS: {r}: {e}"))
    })
}
const STOP: &str = "cuzk: stop after synthesis";

/// bellperson parameters that end its prover at the first key read, after synthesis.
struct StopAfterSynthesis;

fn stop<T>() -> Result<T, SynthesisError> {
    Err(SynthesisError::IoError(std::io::Error::other(STOP)))
}

impl ParameterSource<Bls12> for StopAfterSynthesis {
    type G1Builder = (Arc<Vec<G1Affine>>, usize);
    type G2Builder = (Arc<Vec<G2Affine>>, usize);
    fn get_vk(&self, _: usize) -> Result<&VerifyingKey<Bls12>, SynthesisError> {
        stop()
    }
    fn get_h(&self, _: usize) -> Result<Self::G1Builder, SynthesisError> {
        stop()
    }
    fn get_l(&self, _: usize) -> Result<Self::G1Builder, SynthesisError> {
        stop()
    }
    fn get_a(
        &self,
        _: usize,
        _: usize,
    ) -> Result<(Self::G1Builder, Self::G1Builder), SynthesisError> {
        stop()
    }
    fn get_b_g1(
        &self,
        _: usize,
        _: usize,
    ) -> Result<(Self::G1Builder, Self::G1Builder), SynthesisError> {
        stop()
    }
    fn get_b_g2(
        &self,
        _: usize,
        _: usize,
    ) -> Result<(Self::G2Builder, Self::G2Builder), SynthesisError> {
        stop()
    }
}

/// Keeps bellperson's "synthesis time: {:?}" log lines.
struct SynthesisLog(Mutex<Vec<Duration>>);

static LOG: SynthesisLog = SynthesisLog(Mutex::new(Vec::new()));

impl log::Log for SynthesisLog {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.target().starts_with("bellperson")
    }
    fn log(&self, r: &log::Record<'_>) {
        if !self.enabled(r.metadata()) {
            return;
        }
        let msg = r.args().to_string();
        if let Some(d) = msg.strip_prefix("synthesis time: ") {
            let d = parse_debug_duration(d).unwrap_or_else(|| panic!("bellperson logged {msg:?}"));
            self.0.lock().unwrap().push(d);
        }
    }
    fn flush(&self) {}
}

/// `Duration`'s `Debug` form (`1.5s`, `850.2ms`, `12µs`, `7ns`).
fn parse_debug_duration(s: &str) -> Option<Duration> {
    let (num, scale) = [("ns", 1e-9), ("µs", 1e-6), ("ms", 1e-3), ("s", 1.0)]
        .into_iter()
        .find_map(|(unit, scale)| Some((s.strip_suffix(unit)?, scale)))?;
    Some(Duration::from_secs_f64(num.parse::<f64>().ok()? * scale))
}

/// bellperson's synthesis of `circuit`, by its own clock.
fn bellperson_synthesis<C: Circuit<Scalar> + Send>(circuit: C) -> Duration {
    let before = LOG.0.lock().unwrap().len();
    let rng = &mut rand_chacha::ChaCha8Rng::seed_from_u64(1);
    match bellperson::groth16::create_random_proof_batch(vec![circuit], StopAfterSynthesis, rng) {
        Err(SynthesisError::IoError(e)) if e.to_string() == STOP => {}
        Err(e) => panic!("bellperson's synthesis failed: {e}"),
        Ok(_) => panic!("bellperson proved without parameters"),
    }
    let log = LOG.0.lock().unwrap();
    assert_eq!(log.len(), before + 1, "bellperson logged no synthesis time");
    log[before]
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// One circuit's row: bellperson's synthesis, cuzk's full synthesis (the compile), cuzk's
/// witness-only synthesis of the whole circuit (one thread) and of its parts (on rayon's
/// pool, as the prover runs it); medians of [`runs`], taken in turn.
fn bench<P: PartitionCircuit>(name: &str, build: impl Fn() -> P) {
    if std::env::var("CUZK_SYNTH_ONLY").is_ok_and(|only| !name.contains(&only)) {
        return;
    }
    let whole = || build().whole().expect("circuit");
    // Idle rayon workers spin a while before they sleep: on a small machine the previous
    // contender's would take the next one's cores.
    let settle = || std::thread::sleep(Duration::from_millis(100));
    let t = Instant::now();
    let (compiled, expected) = CompiledCircuit::compile(whole()).expect("cuzk synthesis");
    let full = t.elapsed();
    let rows = compiled.r1cs().num_constraints();
    // The circuit's own compile (replicated from one challenge, for PoRep and PoSt) must be
    // that system, at any size.
    let circuit = build();
    settle();
    let t = Instant::now();
    let (own, own_witness) = circuit.compile(0).expect("the circuit's own compile");
    let own_time = t.elapsed();
    assert!(
        own.r1cs() == compiled.r1cs(),
        "{name}: the own compile's system differs"
    );
    assert!(
        own_witness.assignment() == expected.assignment(),
        "{name}: the own compile's witness differs"
    );
    drop((own, own_witness));
    let (mut bp, mut wit, mut parts, mut reused) = (vec![], vec![], vec![], vec![]);
    for _ in 0..runs() {
        let circuit = whole();
        settle();
        bp.push(bellperson_synthesis(circuit));

        let circuit = whole();
        settle();
        let t = Instant::now();
        let w = compiled.witness(circuit).expect("witness-only synthesis");
        wit.push(t.elapsed());
        assert!(
            w.assignment() == expected.assignment(),
            "{name}: witnesses differ"
        );

        // In parts into fresh memory, then into that witness's storage, as the engine's next
        // job of a key writes.
        let in_parts = |reuse, times: &mut Vec<Duration>| {
            let circuit = build().parts().expect("parts");
            settle();
            let t = Instant::now();
            let w = compiled
                .witness_of_parts(circuit, reuse)
                .expect("witness-only synthesis in parts");
            times.push(t.elapsed());
            assert!(
                w.assignment() == expected.assignment(),
                "{name}: the parts' witness differs"
            );
            w
        };
        let w = in_parts(None, &mut parts);
        in_parts(Some(w.into_buffer()), &mut reused);
    }
    compiled
        .r1cs()
        .is_satisfied(&expected)
        .expect("every row satisfied");
    let (bp, wit, parts, reused) = (median(bp), median(wit), median(parts), median(reused));
    println!(
        "| {name} | {rows} | {:.1} | {:.1} | {:.1} | {:.1} | {:.2}x | {:.1} | {:.2}x | {:.1} | {:.2}x |",
        ms(bp),
        ms(full),
        ms(own_time),
        ms(wit),
        bp.as_secs_f64() / wit.as_secs_f64(),
        ms(parts),
        bp.as_secs_f64() / parts.as_secs_f64(),
        ms(reused),
        bp.as_secs_f64() / reused.as_secs_f64(),
    );
}

/// The sector sizes asked for, with their names (`2KiB`).
fn sectors() -> Vec<(String, SealProof)> {
    let list = std::env::var("CUZK_SYNTH_SECTORS").unwrap_or_else(|_| "2KiB".into());
    list.split(',')
        .map(|s| {
            let s = s.trim();
            let p = s
                .parse()
                .unwrap_or_else(|e| panic!("CUZK_SYNTH_SECTORS: {s}: {e}"));
            (s.to_string(), p)
        })
        .collect()
}

#[test]
#[ignore = "times synthesis for minutes; run with --release --ignored --nocapture"]
fn synthesis_speed_against_bellperson() {
    log::set_logger(&LOG).expect("no other logger in this test binary");
    log::set_max_level(log::LevelFilter::Info);
    println!(
        "threads: {} (bellperson's WindowPoSt synthesis extends per sector on rayon's pool)",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    println!(
        "| circuit | constraints | bellperson synthesis ms | cuzk full (compile) ms | \
         cuzk compile as the prover runs it (replicated) ms | cuzk witness-only, whole ms | bellperson / that | cuzk witness-only, parts ms | \
         bellperson / that | parts into the last witness's storage ms | bellperson / that |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for (size, seal_proof) in sectors() {
        let rng = &mut rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let commit = sparse_seal(seal_proof, 1000, 1, rng).expect("sparse C1");
        let c1 = C1Output::parse("c1.json", &commit.c1_json, None).expect("parse");
        with_phase1!(&c1.phase1, |o| {
            let circuits = PorepCircuits::new(seal_proof, o).expect("circuits");
            bench(&format!("PoRep {size}"), || circuits.partition(0).unwrap());
        });

        let mut randomness = [5u8; 32];
        randomness[31] &= 0x3f;
        let st = PostStatement {
            randomness,
            prover_id: commit.prover_id(),
        };
        for proof in [
            PostProof::window(seal_proof),
            PostProof::winning(seal_proof),
        ] {
            let bytes = sparse_post(proof, 1000, &[1], randomness, rng).expect("vanilla");
            let vanilla = PostVanilla::parse("vanilla.bin", &bytes, proof).expect("parse");
            with_sectors!(&vanilla.sectors, |v| {
                bench(&format!("{:?}PoSt {size}", proof.kind), || {
                    post_circuit("vanilla.bin", proof, &st, v, 0)
                        .expect("circuit")
                        .1
                        .circuit
                })
            });
        }

        let (st, bytes) = sparse_snap(seal_proof, rng).expect("SnapDeals update");
        let vanilla = SnapVanilla::parse("snap.bin", &bytes, seal_proof).expect("parse");
        // The last partition: from 8 MiB up its partition bits are not all zero.
        with_proofs!(&vanilla.proofs, |v| {
            let k = v.len() - 1;
            bench(&format!("SnapDeals {size} (partition {k})"), || {
                SnapPartition::new(
                    snap_circuits("snap.bin", seal_proof, &st, v, k..k + 1, false)
                        .expect("circuits")
                        .1
                        .swap_remove(0),
                    k,
                )
            })
        });
    }
}

#[test]
fn parses_durations_as_debug_prints_them() {
    for d in [
        Duration::from_nanos(7),
        Duration::from_micros(12),
        Duration::from_micros(850_200),
        Duration::from_millis(1500),
        Duration::from_secs(75),
    ] {
        let back = parse_debug_duration(&format!("{d:?}")).unwrap();
        assert!(
            back.abs_diff(d) <= Duration::from_nanos(1),
            "{d:?} read as {back:?}"
        );
    }
    assert_eq!(parse_debug_duration("12 parsecs"), None);
}
