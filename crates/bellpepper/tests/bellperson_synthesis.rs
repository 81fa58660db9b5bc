//! The kept system's witness path against bellperson's own prover, whose every proof starts with
//! a full synthesis that evaluates A·z, B·z, C·z as it goes (`ProvingAssignment`; bellperson
//! logs its time as "synthesis time"). That synthesis stores no system, so it is cheaper than
//! cuzk's full synthesis (`synthesize`, which keeps one): it is the least any full synthesis of
//! this circuit costs, and with bellpepper's SHA-256 gadget it is little more than the gadget's
//! own work. The overlapped witness path must still beat it.

use std::sync::Mutex;
use std::time::Duration;

use bellperson::groth16 as bp;
use blstrs::Bls12;
use cuzk_bellpepper::CompiledCircuit;
use cuzk_bellpepper::sha256_circuit::Sha256Circuit;
use cuzk_field::Fr;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

/// bellperson's "synthesis time: {:?}" lines, as durations.
static SYNTHESIS: Mutex<Vec<Duration>> = Mutex::new(Vec::new());

struct SynthesisTimes;

impl log::Log for SynthesisTimes {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.target().starts_with("bellperson")
    }

    fn log(&self, r: &log::Record<'_>) {
        let line = r.args().to_string();
        if let Some(d) = line.strip_prefix("synthesis time: ") {
            let d = parse_debug_duration(d).unwrap_or_else(|| panic!("unreadable: {line}"));
            SYNTHESIS.lock().unwrap().push(d);
        }
    }

    fn flush(&self) {}
}

/// A `Duration`'s `Debug` text ("35.71ms", "1.2s", "812.5µs").
fn parse_debug_duration(s: &str) -> Option<Duration> {
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let (num, unit) = s.split_at(split);
    let v: f64 = num.parse().ok()?;
    let secs = match unit {
        "s" => v,
        "ms" => v / 1e3,
        "µs" => v / 1e6,
        "ns" => v / 1e9,
        _ => return None,
    };
    Some(Duration::from_secs_f64(secs))
}

#[test]
fn overlapped_witness_path_beats_bellpersons_own_synthesis() {
    assert_eq!(
        parse_debug_duration(&format!("{:?}", Duration::from_micros(35_714))),
        Some(Duration::from_micros(35_714))
    );
    log::set_logger(&SynthesisTimes).unwrap();
    log::set_max_level(log::LevelFilter::Info);

    let hashes = 2;
    let mut rng = ChaCha20Rng::seed_from_u64(7);
    let params =
        bp::generate_random_parameters::<Bls12, _, _>(Sha256Circuit::blank(hashes), &mut rng)
            .unwrap();
    let (compiled, _) = CompiledCircuit::compile(Sha256Circuit::new(hashes, 1)).unwrap();
    let n = compiled.r1cs().num_constraints();
    let zeros = || vec![Fr::ZERO; n];
    let (mut a, mut b, mut c) = (zeros(), zeros(), zeros());
    let pvk = bp::prepare_verifying_key(&params.vk);
    let next = Sha256Circuit::new(hashes, 2);

    let mut overlapped = Duration::MAX;
    for _ in 0..3 {
        let proof = bp::create_random_proof(next.clone(), &params, &mut rng).unwrap();
        assert!(bp::verify_proof(&pvk, &proof, &next.public_inputs()).unwrap());
        let t = std::time::Instant::now();
        compiled
            .witness_and_evaluations(next.clone(), &mut a, &mut b, &mut c)
            .expect("the witness satisfies every row");
        overlapped = overlapped.min(t.elapsed());
    }
    let times = SYNTHESIS.lock().unwrap().clone();
    assert_eq!(
        times.len(),
        3,
        "bellperson logged {} synthesis times",
        times.len()
    );
    let bellperson = times.into_iter().min().unwrap();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "SHA-256 x{hashes} ({n} constraints), best of 3: bellperson's prover synthesis {:.1} ms; cuzk's overlapped witness path {:.1} ms: {:.2}x",
        ms(bellperson),
        ms(overlapped),
        bellperson.as_secs_f64() / overlapped.as_secs_f64()
    );
    assert!(
        overlapped < bellperson,
        "the witness path ({:.1} ms) is not faster than bellperson's full synthesis ({:.1} ms)",
        ms(overlapped),
        ms(bellperson)
    );
}
