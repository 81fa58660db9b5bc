//! Inputs the fuzzer (`cargo xtask fuzz`) found to crash a reader, each refused with a clear
//! error since. The raw inputs are replayed by `fuzz/tests/replay.rs` too.

use cuzk_formats::iden3::MAX_PUBLIC;
use cuzk_formats::{CircomR1cs, FormatError};
use rand::SeedableRng;

/// A header whose public-signal count no byte of the file pays for (2^32-scale nWires and
/// nPubOut with no constraints) made `to_r1cs` reserve 34 GB for instance rows.
#[test]
fn an_r1cs_header_with_billions_of_public_signals_is_refused() {
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(1);
    let (r1cs, _) = cuzk_groth16::testing::demo::circuit(3, 1, &mut rng).unwrap();
    let mut c = CircomR1cs::from_r1cs(&r1cs);
    c.num_wires = u32::MAX - 1;
    c.num_pub_out = 0xFF00_FF00;
    c.constraints.clear();
    c.wire_to_label = None;
    let e = CircomR1cs::from_bytes("big.r1cs", &c.to_bytes()).unwrap_err();
    assert!(
        matches!(&e, FormatError::Invalid { field, .. } if field == "header.nPubOut + nPubIn"),
        "{e}"
    );
    assert!(e.to_string().contains("public signals"), "{e}");
    // Built by hand, the same counts are refused before anything is allocated.
    let e = c.to_r1cs("hand-built").unwrap_err();
    assert!(e.to_string().contains("public signals"), "{e}");
    // Both counts at u32::MAX do not overflow their sum.
    c.num_pub_in = u32::MAX;
    c.num_pub_out = u32::MAX;
    assert_eq!(c.num_public(), 2 * u32::MAX as usize);
    assert!(c.to_r1cs("hand-built").is_err());
    // The limit itself is accepted by the header check.
    c.num_pub_out = MAX_PUBLIC as u32;
    c.num_pub_in = 0;
    let r = c.to_r1cs("hand-built");
    assert!(
        r.as_ref()
            .err()
            .is_none_or(|e| !e.to_string().contains("public signals")),
        "{:?}",
        r.err()
    );
}
