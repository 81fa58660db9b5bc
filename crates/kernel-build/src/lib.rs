//! The one way cuzk builds its CUDA kernels, shared by every build script that embeds kernels
//! and by `xtask` (a build-dependency of those crates, a dependency of xtask): finding nvcc,
//! compiling entry files to fatbins through the content-hash cache (`CUZK_KERNEL_CACHE`),
//! `CUZK_CUDA_ARCHS`, `CUZK_NO_CUDA`/`NVCC`, and the ptxas report parser. Standard library only.
//!
//! Kernel sources live in `kernels/`: shared headers in `ff/`, `ec/`, `host_emu/`, and one
//! folder per owner whose `*.cu` files are the entry points that owner embeds ([`DOMAINS`]).
//! A kernel crate's build script is one call, `cuzk_kernel_build::embed("ntt")`, and its
//! launcher module `include!`s the generated `kernels.rs` (one `cuzk_gpu::Module` constant per
//! entry file and the crate's `KERNELS`). Without nvcc the build still succeeds: the modules
//! are there but not built, and launches return `GpuError::KernelsNotBuilt`.

mod nvcc;
pub use nvcc::*;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The folders of `kernels/` that hold entry files, and the crate that embeds each one.
pub const DOMAINS: &[(&str, &str)] = &[
    ("ntt", "cuzk-ntt"),
    ("msm", "cuzk-msm"),
    ("groth16", "cuzk-groth16"),
    ("test", "cuzk-test-kernels"),
];

/// The repository root of the package whose build script is running (`crates/<name>/../..`),
/// canonical, so that build scripts and xtask compute the same kernel cache keys.
pub fn repo_root() -> PathBuf {
    let manifest =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    manifest.join("../..").canonicalize().expect("repo root")
}

/// The kernel cache of a build script: `CUZK_KERNEL_CACHE`, else `<target dir>/cuzk-kernel-cache`
/// (cargo marks its target dir root with CACHEDIR.TAG), shared by all profiles.
pub fn build_cache_dir(out_dir: &Path) -> PathBuf {
    std::env::var_os("CUZK_KERNEL_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            out_dir
                .ancestors()
                .find(|d| d.join("CACHEDIR.TAG").is_file())
                .map_or_else(|| out_dir.join("cache"), |t| t.join("cuzk-kernel-cache"))
        })
}

fn rerun_directives(root: &Path) {
    println!("cargo::rustc-check-cfg=cfg(cuzk_kernels)");
    println!("cargo::rerun-if-changed=build.rs");
    for v in ENV_VARS {
        println!("cargo::rerun-if-env-changed={v}");
    }
    println!("cargo::rerun-if-changed={}", root.join("kernels").display());
}

/// nvcc for a build script, or None after printing why (and, when none was found, a rerun
/// trigger on the path `cargo xtask setup-cuda` installs to).
fn build_nvcc(root: &Path) -> Option<PathBuf> {
    match find_nvcc(root) {
        Ok(p) => {
            println!("cargo::rerun-if-changed={}", p.display());
            Some(p)
        }
        Err(why) => {
            if why == NoNvcc::NotFound {
                println!("cargo::rerun-if-changed={}", root.join(PIP_NVCC).display());
            }
            println!(
                "cargo::warning=CUDA kernels not built ({why}); GPU calls will fail. Run `cargo xtask setup-cuda`."
            );
            None
        }
    }
}

/// Build script of the runtime (cuzk-gpu), which embeds no kernels: sets `cfg(cuzk_kernels)`
/// when nvcc is found (then every kernel crate of the same build embeds its kernels, or the
/// build fails), `CUZK_KERNEL_ARCHS` to the SASS archs they are built for,
/// `CUZK_KERNEL_PTX` to the PTX they embed and `CUZK_CUDA_VERSION` to nvcc's version.
pub fn probe() {
    let root = repo_root();
    rerun_directives(&root);
    let Some(nvcc) = build_nvcc(&root) else {
        println!("cargo::rustc-env=CUZK_KERNEL_ARCHS=");
        println!("cargo::rustc-env=CUZK_KERNEL_PTX=");
        println!("cargo::rustc-env=CUZK_CUDA_VERSION=");
        return;
    };
    let archs = archs().unwrap_or_else(|e| panic!("{e}"));
    let version = nvcc_version(&nvcc).unwrap_or_else(|e| panic!("{e}"));
    println!("cargo::rustc-cfg=cuzk_kernels");
    println!("cargo::rustc-env=CUZK_KERNEL_ARCHS={}", archs.join(","));
    let ptx = nvcc::embedded_ptx(&archs).unwrap_or_default();
    println!("cargo::rustc-env=CUZK_KERNEL_PTX={ptx}");
    println!("cargo::rustc-env=CUZK_CUDA_VERSION={version}");
}

/// Build script of a kernel crate: compiles every `kernels/<domain>/*.cu` (one nvcc per file,
/// in parallel, through the cache) and writes `$OUT_DIR/kernels.rs` with one `cuzk_gpu::Module`
/// constant per entry file (`ntt.cu` -> `NTT`) and `KERNELS`, the crate's `cuzk_gpu::Kernels`.
/// Sets `cfg(cuzk_kernels)` when built. A kernel that does not compile fails the build.
pub fn embed(domain: &str) {
    let root = repo_root();
    rerun_directives(&root);
    let kernels = root.join("kernels");
    let entries = entry_files(&kernels.join(domain));
    assert!(!entries.is_empty(), "no kernels/{domain}/*.cu entry files");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let stems: Vec<String> = entries.iter().map(|p| stem(p)).collect();
    let Some(nvcc) = build_nvcc(&root) else {
        write_rs(&out, domain, &stems, None, "", "");
        return;
    };
    let archs = archs_for(domain).unwrap_or_else(|e| panic!("{e}"));
    let cache = build_cache_dir(&out);

    let results: Vec<(PathBuf, Result<String, String>)> = std::thread::scope(|s| {
        let handles: Vec<_> = entries
            .iter()
            .map(|src| {
                let (nvcc, kernels, archs, out, cache) = (&nvcc, &kernels, &archs, &out, &cache);
                s.spawn(move || {
                    let fatbin = out.join(format!("{}.fatbin", stem(src)));
                    let r = compile_cached(nvcc, src, kernels, archs, cache, &fatbin)
                        .map(|(log, _)| log);
                    (src.clone(), r)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("compile thread panicked"))
            .collect()
    });

    let mut report = String::new();
    let mut failures = Vec::new();
    for (src, r) in results {
        match r {
            Ok(log) => {
                let reps = parse_ptxas(&log);
                for k in reps.iter().filter(|k| k.spill_stores + k.spill_loads > 0) {
                    println!(
                        "cargo::warning=kernel {} ({}) spills {} B stores / {} B loads (see `cargo xtask kernels`)",
                        k.name, k.arch, k.spill_stores, k.spill_loads
                    );
                }
                report.push_str(&format_table(&format!("{domain}/{}.cu", stem(&src)), &reps));
            }
            Err(e) => failures.push(e),
        }
    }
    if !failures.is_empty() {
        // A kernel that does not compile fails the build (and CI), like Rust code would.
        panic!("CUDA kernel compilation failed:\n{}", failures.join("\n"));
    }
    println!("cargo::rustc-cfg=cuzk_kernels");
    write_rs(&out, domain, &stems, Some(&out), &archs.join(","), &report);
}

fn stem(p: &Path) -> String {
    p.file_stem()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned()
}

/// `$OUT_DIR/kernels.rs`; `fatbins` is the folder of `<stem>.fatbin` files, None when not built.
fn write_rs(
    out: &Path,
    domain: &str,
    stems: &[String],
    fatbins: Option<&Path>,
    archs: &str,
    report: &str,
) {
    let mut s = format!("// @generated by cuzk-kernel-build from kernels/{domain}/*.cu\n");
    for stem in stems {
        let value = match fatbins {
            Some(dir) => format!(
                "::cuzk_gpu::Module::new({stem:?}, include_bytes!({:?}))",
                dir.join(format!("{stem}.fatbin"))
            ),
            None => format!("::cuzk_gpu::Module::not_built({stem:?})"),
        };
        let _ = writeln!(
            s,
            "/// `kernels/{domain}/{stem}.cu`.\npub const {}: ::cuzk_gpu::Module = {value};",
            const_name(stem)
        );
    }
    let list: Vec<String> = stems.iter().map(|s| const_name(s)).collect();
    let _ = writeln!(
        s,
        "/// This crate's kernels: its modules, the SASS archs they hold (and PTX)\n\
         /// and the ptxas resource report of the build.\n\
         pub static KERNELS: ::cuzk_gpu::Kernels = ::cuzk_gpu::Kernels::new(&[{}], {archs:?}, {report:?});",
        list.join(", ")
    );
    std::fs::write(out.join("kernels.rs"), s).expect("write kernels.rs");
}

/// Compiles `kernels/<source>` with g++ (the kernels' PTX emulated on the host) and runs it on a
/// fresh folder holding `files`, with `args` after the folder; returns its output, panicking
/// unless it exits 0. For the kernel crates' host-emulation tests (a dev-dependency there).
pub fn run_host_emu(source: &str, files: &[(&str, &[u8])], args: &[String]) -> String {
    let stem = source.replace(['/', '.'], "-");
    let dir = std::env::temp_dir().join(format!("cuzk-{stem}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("create the emulator's folder");
    for (name, bytes) in files {
        std::fs::write(dir.join(name), bytes).expect("write an emulator input");
    }
    let kernels = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../kernels");
    let exe = dir.join("emu");
    let cc = std::process::Command::new(std::env::var("CXX").unwrap_or_else(|_| "g++".into()))
        .args([
            "-std=c++20",
            "-O1",
            "-pthread",
            "-Wno-unknown-pragmas",
            "-I",
        ])
        .arg(&kernels)
        .arg("-o")
        .arg(&exe)
        .arg(kernels.join(source))
        .status()
        .expect("run g++");
    assert!(cc.success(), "g++ failed on {source}");
    let out = std::process::Command::new(&exe)
        .arg(&dir)
        .args(args)
        .output()
        .expect("run the emulator");
    let _ = std::fs::remove_dir_all(&dir);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{source}: {text}{err}");
    text
}
