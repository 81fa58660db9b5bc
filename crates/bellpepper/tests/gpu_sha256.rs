//! The H200 check: bellpepper's SHA-256 at more than 2^20 constraints (24 messages;
//! `CUZK_SHA256_HASHES` overrides), bellperson parameters, proven on the GPU, verified by
//! bellperson. A GPU test: ignored on the CPU suite, run by `bundle/run.sh`.

mod support;

#[test]
#[ignore = "gpu"]
fn gpu_sha256_bellperson_parameters_prove_on_the_gpu() {
    let hashes = std::env::var("CUZK_SHA256_HASHES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(24);
    let constraints = support::sha256_flow::run(hashes, cuzk_groth16::BackendChoice::Gpu)
        .unwrap_or_else(|e| panic!("SHA-256 x{hashes} on the GPU: {e}"));
    if hashes >= 24 {
        assert!(constraints > 1 << 20, "{constraints} constraints");
    }
}
