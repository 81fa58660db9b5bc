//! filecoin-proofs' crates switch on OpenCL, CUDA and hwloc by default, and feature
//! unification turns a feature on for every user of a crate once any crate in the graph asks
//! for it: the graph of cuzk-filecoin must ask for none of them.

use std::process::Command;

#[test]
fn no_gpu_or_hwloc_features_in_the_dependency_graph() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(&cargo)
        .args([
            "tree",
            "--offline",
            "--locked",
            "-e",
            "features",
            "-p",
            "cuzk-filecoin",
            "--prefix",
            "none",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap_or_else(|e| panic!("running {cargo} tree: {e}"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{cargo} tree failed: {stderr}");
    let tree = String::from_utf8_lossy(&out.stdout);
    // The graph is the real one: filecoin-proofs and its porep crate are in it.
    for krate in [
        "filecoin-proofs v19",
        "storage-proofs-porep v19",
        "bellperson v0.27",
    ] {
        assert!(tree.contains(krate), "{krate} is not in the graph:\n{tree}");
    }
    let banned = [
        "feature \"opencl\"",
        "feature \"cuda\"",
        "feature \"cuda-supraseal\"",
        "feature \"multicore-sdr\"",
        // Crates only the GPU and hwloc features pull in (bellperson always depends on
        // ec-gpu-gen, which without its features builds no GPU code).
        "hwloc",
        "rust-gpu-tools",
    ];
    let found: Vec<&str> = tree
        .lines()
        .filter(|l| banned.iter().any(|b| l.contains(b)))
        .collect();
    assert!(
        found.is_empty(),
        "GPU or hwloc features in cuzk-filecoin's graph:\n{}",
        found.join("\n")
    );
}
