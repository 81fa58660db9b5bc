//! SHA-256 of 64-byte messages (bellpepper's gadget) proven by cuzk with parameters from
//! bellperson's `generate_random_parameters`, verified by bellperson's `verify_proof`.
//!
//! `cargo run --release -p cuzk-bellpepper --example sha256 -- [HASHES] [auto|cpu|gpu]`:
//! HASHES messages (default 1, 45,391 constraints for one: 24 make more than 2^20), on the GPU
//! when one is present (`auto`). The GPU suite runs the same flow as
//! `gpu_sha256_bellperson_parameters_prove_on_the_gpu`.

#[path = "../tests/support/sha256_flow.rs"]
mod sha256_flow;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let hashes: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(1);
    let choice: cuzk_groth16::BackendChoice = args
        .next()
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(cuzk_groth16::BackendChoice::Auto);
    sha256_flow::run(hashes, choice)?;
    Ok(())
}
