//! cuzk developer tasks (`cargo xtask <cmd>`, the rust-analyzer pattern).
#![forbid(unsafe_code)]

// The one nvcc finder/compiler, shared with every kernel crate's build script.
use cuzk_kernel_build as nvcc;

mod dist;
mod fuzz;
mod reliability;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail, ensure};

const USAGE: &str = "usage: cargo xtask <command>

  setup-cuda        find nvcc, or install the pinned PyPI CUDA 13.0 toolkit into .cuda/pip
  kernels           compile kernels/<domain>/*.cu for every arch, print registers/smem/stack/
                    spills per kernel and arch; fails on compile errors and on spills not
                    accepted by a `cuzk: allow-spills <kernel>[@<archs>] <reason>` line in a
                    PERF-NOTES.md
  codegen [--check] bindgen kernels/cuzk_shared.h -> crates/gpu/src/bindings.rs
                    (--check: fail if the committed file is stale); finds libclang, or
                    installs the pinned PyPI wheel into .cuda/libclang
  test [ARGS]       the CPU suite: kernels, the bindings check, cargo test --workspace [ARGS],
                    a check that the bench executables compile, `dist --check`, and the fuzz smoke
                    (CUZK_FUZZ_SMOKE_SECS per target, default 12; 0 skips it; skipped under CI
                    unless set)
  gpu-test          build and run only the GPU tests (#[ignore = \"gpu\"] fns named gpu_*);
                    fails without a GPU or if any listed GPU test did not run
  bundle            release, stripped GPU test/bench binaries + cuzk + run.sh in bundle/
                    (sm_90 + PTX only; must stay under 60 MiB)
  dist [--check]    the release archive dist/cuzk-<version>-linux-x86_64.tar.xz and its .sha256:
                    stripped cuzk with kernels for every default arch (fails if one does not
                    compile), example config, systemd unit, README, licenses, third-party list;
                    --check (CI): test-profile build, then unpack it, run its --version and demo
  fuzz [--smoke | --time SECS] [--target NAME]... [--list]
                    build the libFuzzer driver of fuzz/ (stable, coverage-instrumented) and
                    fuzz each target (--smoke: 25 s each); fails on any crashing input
  reliability [--gpu DIR] [--fuzz-secs N]
                    the reliability suite's CPU parts (fuzz smoke, security, crash-restart,
                    host memory, failure injection) -> RELIABILITY.md; --gpu DIR: the GPU rows
                    from the logs of an H200 run of xtask/device/service.sh

env: NVCC, CUDA_HOME, CUDA_PATH (nvcc location), CUZK_CUDA_ARCHS=sm_90 (fewer archs, faster),
     CUZK_NO_CUDA=1 (build without kernels), LIBCLANG_PATH (libclang for codegen)";

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(cmd) = args.first() else {
        println!("{USAGE}");
        return Ok(());
    };
    let rest = &args[1..];
    match cmd.as_str() {
        "setup-cuda" => setup_cuda(),
        "kernels" => kernels(),
        "codegen" => codegen(rest.iter().any(|a| a == "--check")),
        // The bindgen run itself, in a child process whose LIBCLANG_PATH codegen chose.
        BINDGEN_CHILD => bindgen_child(rest.iter().any(|a| a == "--check")),
        "test" => test(rest),
        "gpu-test" => gpu_test(),
        "bundle" => bundle(),
        "dist" => dist::main(rest),
        "fuzz" => fuzz::main(rest),
        "reliability" => reliability::main(rest),
        "help" | "--help" | "-h" => {
            println!("{USAGE}");
            Ok(())
        }
        other => bail!("unknown command {other:?}\n\n{USAGE}"),
    }
}

fn root() -> PathBuf {
    let r = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the repo root");
    r.canonicalize().unwrap_or_else(|_| r.to_path_buf())
}

fn cargo() -> Command {
    let mut c = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    c.current_dir(root());
    // CI builds once from scratch: incremental state would only add gigabytes to its disk.
    if std::env::var_os("CI").is_some() {
        c.env("CARGO_INCREMENTAL", "0");
    }
    c
}

fn run(cmd: &mut Command) -> Result<()> {
    eprintln!("$ {cmd:?}");
    let st = cmd.status().with_context(|| format!("running {cmd:?}"))?;
    ensure!(st.success(), "{cmd:?} failed: {st}");
    Ok(())
}

// ---------------------------------------------------------------- setup-cuda

fn setup_cuda() -> Result<()> {
    let root = root();
    let nvcc = match nvcc::find_nvcc(&root) {
        Ok(p) => p,
        Err(nvcc::NoNvcc::NotFound) => {
            eprintln!(
                "no nvcc found; installing the pinned PyPI toolkit into {}",
                nvcc::PIP_TARGET
            );
            pip_install(&root, nvcc::PIP_TARGET, nvcc::PIP_PACKAGES)?;
            nvcc::find_nvcc(&root)
                .map_err(|e| anyhow::anyhow!("nvcc still not found after install: {e}"))?
        }
        Err(e) => bail!("{e}"),
    };
    let out = Command::new(&nvcc)
        .arg("--version")
        .output()
        .with_context(|| format!("running {}", nvcc.display()))?;
    ensure!(out.status.success(), "{} --version failed", nvcc.display());
    let version = String::from_utf8_lossy(&out.stdout);
    println!("nvcc: {}", nvcc.display());
    println!("{}", version.lines().last().unwrap_or_default());
    for inc in nvcc::extra_includes(&nvcc) {
        println!("extra include: {}", inc.display());
    }
    println!(
        "kernels build automatically with cargo build (each kernel crate's build.rs); `cargo xtask kernels` shows resource use."
    );
    Ok(())
}

// ---------------------------------------------------------------- kernels

/// (entry stem, Ok((ptxas log, from cache, compile time)) or the compile error).
type Compiled = (String, Result<(String, bool, std::time::Duration), String>);

fn kernels() -> Result<()> {
    let root = root();
    let nvcc =
        nvcc::find_nvcc(&root).map_err(|e| anyhow::anyhow!("{e}; run `cargo xtask setup-cuda`"))?;
    let archs = nvcc::archs().map_err(anyhow::Error::msg)?;
    let kdir = root.join("kernels");
    // Each entry file with its domain's archs (the test kernels' are fewer), as build.rs has them.
    let entries = nvcc::DOMAINS
        .iter()
        .flat_map(|(d, _)| {
            nvcc::entry_files(&kdir.join(d))
                .into_iter()
                .map(move |p| (p, *d))
        })
        .map(|(p, d)| Ok((p, nvcc::archs_for(d).map_err(anyhow::Error::msg)?)))
        .collect::<Result<Vec<_>>>()?;
    ensure!(!entries.is_empty(), "no kernels/<domain>/*.cu files");
    let out_dir = root.join("target/xtask-kernels");
    fs::create_dir_all(&out_dir)?;
    println!(
        "nvcc {} for {} (+PTX; the test kernels for {}), {} entry files",
        nvcc.display(),
        archs.join(","),
        nvcc::archs_for("test")
            .map_err(anyhow::Error::msg)?
            .join(","),
        entries.len()
    );

    let results: Vec<Compiled> = std::thread::scope(|s| {
        let hs: Vec<_> = entries
            .iter()
            .map(|(src, archs)| {
                let (nvcc, kdir, out_dir) = (&nvcc, &kdir, &out_dir);
                s.spawn(move || {
                    let stem = src
                        .file_stem()
                        .unwrap_or_default()
                        .to_string_lossy()
                        .into_owned();
                    let t = std::time::Instant::now();
                    let r = nvcc::compile_cached(
                        nvcc,
                        src,
                        kdir,
                        archs,
                        &cache_dir(),
                        &out_dir.join(format!("{stem}.fatbin")),
                    );
                    (stem, r.map(|(log, cached)| (log, cached, t.elapsed())))
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().expect("compile thread panicked"))
            .collect()
    });

    let allowed = nvcc::allowed_spills(&perf_notes(&root)?);
    let mut errors = Vec::new();
    let mut spills = Vec::new();
    for (stem, r) in results {
        match r {
            Ok((log, cached, took)) => {
                let reps = nvcc::parse_ptxas(&log);
                print!("{}", nvcc::format_table(&format!("{stem}.cu"), &reps));
                let size = fs::metadata(out_dir.join(format!("{stem}.fatbin")))
                    .map(|m| m.len())
                    .unwrap_or(0);
                let how = if cached {
                    "cached".to_string()
                } else {
                    format!("compiled in {:.1} s", took.as_secs_f64())
                };
                println!("  fatbin {} KiB, {how}\n", size / 1024);
                for k in reps.iter().filter(|k| k.spill_stores + k.spill_loads > 0) {
                    if !allowed.iter().any(|a| a.covers(&k.name, &k.arch)) {
                        spills.push(format!(
                            "{stem}.cu: {} ({}) spills {} B / {} B",
                            k.name, k.arch, k.spill_stores, k.spill_loads
                        ));
                    }
                }
            }
            Err(e) => errors.push(e),
        }
    }
    ensure!(
        errors.is_empty(),
        "kernel compilation failed:\n{}",
        errors.join("\n")
    );
    ensure!(
        spills.is_empty(),
        "local-memory spills not accepted by a `{} <kernel>[@<archs>] <reason>` line in a PERF-NOTES.md:\n  {}",
        nvcc::ALLOW_SPILLS_MARKER,
        spills.join("\n  ")
    );
    println!("all kernels compiled, no unallowed spills");
    Ok(())
}

/// The kernel cache build.rs uses: `CUZK_KERNEL_CACHE`, else the one of the default target
/// dir (see nvcc::compile_cached).
fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("CUZK_KERNEL_CACHE") {
        return PathBuf::from(dir);
    }
    std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| root().join("target"), PathBuf::from)
        .join("cuzk-kernel-cache")
}

/// The PERF-NOTES.md of every crate and kernel folder, where accepted spills are recorded.
fn perf_notes(root: &Path) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for dir in ["crates", "kernels"] {
        for e in fs::read_dir(root.join(dir))? {
            let p = e?.path().join("PERF-NOTES.md");
            if p.is_file() {
                out.push(fs::read_to_string(&p).with_context(|| p.display().to_string())?);
            }
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------- codegen

const BINDINGS: &str = "crates/gpu/src/bindings.rs";
const BINDGEN_CHILD: &str = "__bindgen";
/// Exit status of the bindgen child when it cannot load libclang.
const NO_LIBCLANG: i32 = 3;
/// Where codegen installs libclang when the machine has none, relative to the repo root, and
/// the pinned wheel (it ships libclang.so in clang/native/, like the pinned nvcc wheels).
const LIBCLANG_TARGET: &str = ".cuda/libclang";
const LIBCLANG_DIR: &str = ".cuda/libclang/clang/native";
const LIBCLANG_WHEEL: &str = "libclang==18.1.1";

/// Runs bindgen in a child process (bindgen loads libclang from `LIBCLANG_PATH` or the system
/// paths); where no libclang is found, installs the pinned wheel and runs it again with
/// `LIBCLANG_PATH` pointing there. Fails when the check cannot run.
fn codegen(check: bool) -> Result<()> {
    let root = root();
    let installed = root.join(LIBCLANG_DIR);
    let child = |libclang: Option<&Path>| -> Result<std::process::ExitStatus> {
        let mut c = Command::new(std::env::current_exe()?);
        c.arg(BINDGEN_CHILD).current_dir(&root);
        if check {
            c.arg("--check");
        }
        if let Some(dir) = libclang {
            c.env("LIBCLANG_PATH", dir);
        }
        Ok(c.status()?)
    };
    let user_path = std::env::var_os("LIBCLANG_PATH").is_some();
    let first = (!user_path && installed.is_dir()).then_some(installed.as_path());
    let st = child(first)?;
    if st.code() == Some(NO_LIBCLANG) && !user_path && first.is_none() {
        eprintln!("no libclang found; installing the pinned PyPI wheel into {LIBCLANG_TARGET}");
        pip_install(&root, LIBCLANG_TARGET, &[LIBCLANG_WHEEL])?;
        ensure!(
            installed.join("libclang.so").is_file(),
            "{LIBCLANG_WHEEL} installed no {LIBCLANG_DIR}/libclang.so"
        );
        let st = child(Some(&installed))?;
        ensure!(st.success(), "codegen failed with {LIBCLANG_DIR}: {st}");
        return Ok(());
    }
    ensure!(
        st.success(),
        "codegen failed ({st}){}",
        if st.code() == Some(NO_LIBCLANG) {
            " : libclang could not be loaded (LIBCLANG_PATH, or remove it to use the pinned wheel)"
        } else {
            ""
        }
    );
    Ok(())
}

fn bindgen_child(check: bool) -> Result<()> {
    let root = root();
    let header = root.join("kernels/cuzk_shared.h");
    let builder = bindgen::Builder::default()
        .header(header.to_string_lossy())
        .allowlist_file(".*cuzk_shared\\.h")
        .layout_tests(true)
        .derive_default(true)
        .derive_eq(true)
        .use_core();
    // bindgen panics when it cannot dlopen libclang; the parent reads the exit status. That
    // failure is expected on a fresh machine, so its message goes out without a backtrace.
    std::panic::set_hook(Box::new(|info| eprintln!("{info}")));
    let bindings =
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| builder.generate())) {
            Err(_) => {
                eprintln!("bindgen could not load libclang");
                std::process::exit(NO_LIBCLANG)
            }
            Ok(Err(e)) => bail!("bindgen failed on {}: {e}", header.display()),
            Ok(Ok(b)) => b,
        };
    let text = format!(
        "// @generated by `cargo xtask codegen` from kernels/cuzk_shared.h. Do not edit.\n{}",
        bindings
    );
    let path = root.join(BINDINGS);
    let old = fs::read_to_string(&path).unwrap_or_default();
    if check {
        ensure!(
            old == text,
            "{BINDINGS} is stale: run `cargo xtask codegen` and commit it"
        );
        println!("{BINDINGS} is up to date");
    } else if old == text {
        println!("{BINDINGS} unchanged");
    } else {
        fs::write(&path, text)?;
        println!("wrote {BINDINGS}");
    }
    Ok(())
}

/// `python3 -m pip install --no-deps --upgrade --target <target> <packages>` in the repo root.
fn pip_install(root: &Path, target: &str, packages: &[&str]) -> Result<()> {
    let py = if Command::new("python3").arg("--version").output().is_ok() {
        "python3"
    } else {
        "python"
    };
    run(Command::new(py)
        .current_dir(root)
        .args([
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--upgrade",
            "--target",
            target,
        ])
        .args(packages))
}

// ---------------------------------------------------------------- test / gpu-test

/// The CPU suite, as CI runs it: make sure nvcc is there (so kernels compile and a kernel
/// that does not compile fails the build), check the generated bindings, run all tests.
fn test(extra: &[String]) -> Result<()> {
    match nvcc::find_nvcc(&root()) {
        Ok(_) => {}
        Err(nvcc::NoNvcc::NotFound) => setup_cuda()?,
        // An explicit CUZK_NO_CUDA / NVCC choice: build without kernels.
        Err(e) => eprintln!("note: {e}; testing without kernels"),
    }
    codegen(true)?;
    // The test profile is optimized (opt-level 3 in the root Cargo.toml).
    run(cargo().args(["test", "--workspace"]).args(extra))?;
    // The GPU bench executables run only on a GPU machine; here they must compile. (Building
    // them instead, `cargo test --workspace --benches --no-run`, resolves dev-dependency
    // features differently and rebuilds the TLS stack and the crates above it twice.)
    run(cargo().args(["check", "-p", "cuzk-benches", "--benches"]))?;
    // The release archive from the test build (its binary and the kernels of every arch), and
    // the spill check of every kernel on every arch (the test build filled the kernel cache).
    if nvcc::find_nvcc(&root()).is_ok() {
        kernels()?;
        dist::main(&["--check".to_string()])?;
    } else {
        eprintln!("note: no nvcc: `dist --check` skipped (a release needs its kernels)");
    }
    // The fuzz smoke (an instrumented build of ~10 min from scratch, then 12 targets):
    // CUZK_FUZZ_SMOKE_SECS per target, 0 to skip. CI skips it unless asked: its 2-core box
    // has 90 minutes for a fresh build and the whole suite, and the corpus and every
    // regression ran above as plain tests.
    let secs = match std::env::var("CUZK_FUZZ_SMOKE_SECS") {
        Ok(s) => s.parse().context("CUZK_FUZZ_SMOKE_SECS")?,
        Err(_) if std::env::var_os("CI").is_some() => 0,
        Err(_) => fuzz::CI_SMOKE_SECS,
    };
    if secs > 0 {
        fuzz::check(&fuzz::run_all(&fuzz::targets()?, secs)?)?;
    } else {
        eprintln!(
            "skipped: the fuzz smoke (CI, or CUZK_FUZZ_SMOKE_SECS=0; the corpus and regressions \
             ran as tests; `cargo xtask fuzz --smoke` runs it)"
        );
    }
    Ok(())
}

/// A test or bench executable built by cargo.
struct Artifact {
    /// `<package>-<target>` (unique in the workspace).
    name: String,
    path: PathBuf,
}

/// Builds with `cargo <args> --message-format=json` and returns the executables (only
/// libtest harnesses when `harness_only`: `cargo test` also reports the bins it builds).
fn build_executables(
    args: &[&str],
    envs: &[(&str, &str)],
    harness_only: bool,
) -> Result<Vec<Artifact>> {
    let mut cmd = cargo();
    cmd.args(args)
        .arg("--message-format=json-render-diagnostics")
        .stdout(Stdio::piped());
    for (k, v) in envs {
        cmd.env(k, v);
    }
    eprintln!("$ {cmd:?}");
    let out = cmd.spawn()?.wait_with_output()?;
    ensure!(out.status.success(), "cargo {} failed", args.join(" "));
    let mut v = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(msg) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if msg["reason"] != "compiler-artifact" {
            continue;
        }
        let Some(exe) = msg["executable"].as_str() else {
            continue;
        };
        if harness_only && msg["profile"]["test"] != true {
            continue;
        }
        let target = msg["target"]["name"].as_str().unwrap_or("bin");
        let pkg = package_name(msg["package_id"].as_str().unwrap_or("unknown"));
        let name = if pkg.replace('-', "_") == target.replace('-', "_") {
            pkg
        } else {
            format!("{pkg}-{target}")
        };
        v.push(Artifact {
            name,
            path: PathBuf::from(exe),
        });
    }
    Ok(v)
}

/// `path+file:///x/crates/gpu#cuzk-gpu@0.1.0` -> `cuzk-gpu`; `path+file:///x/xtask#0.1.0` -> `xtask`.
fn package_name(id: &str) -> String {
    let (url, frag) = id.rsplit_once('#').unwrap_or((id, ""));
    match frag.split_once('@') {
        Some((name, _)) => name.to_string(),
        None => url.rsplit('/').next().unwrap_or(url).to_string(),
    }
}

/// GPU tests of a libtest executable: ignored tests whose name starts with `gpu_`.
fn list_gpu_tests(exe: &Path) -> Result<Vec<String>> {
    let out = Command::new(exe)
        .args(["--list", "--ignored", "gpu_"])
        .output()
        .with_context(|| exe.display().to_string())?;
    ensure!(out.status.success(), "{} --list failed", exe.display());
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.strip_suffix(": test"))
        .filter(|n| {
            n.rsplit("::")
                .next()
                .is_some_and(|last| last.starts_with("gpu_"))
        })
        .map(str::to_string)
        .collect())
}

/// Fills `dir` with tests/ (only executables that have GPU tests), gpu-tests.txt and run.sh.
fn stage_tests(dir: &Path, exes: &[Artifact], strip: bool) -> Result<usize> {
    fs::create_dir_all(dir.join("tests"))?;
    let mut manifest = String::new();
    let mut count = 0;
    for a in exes {
        let tests = list_gpu_tests(&a.path)?;
        if tests.is_empty() {
            continue;
        }
        copy_exe(&a.path, &dir.join("tests").join(&a.name), strip)?;
        for t in &tests {
            let _ = writeln!(manifest, "{} {t}", a.name);
        }
        count += tests.len();
        println!("  {:<40} {} GPU tests", a.name, tests.len());
    }
    fs::write(dir.join("gpu-tests.txt"), manifest)?;
    write_script(&dir.join("run.sh"))?;
    Ok(count)
}

fn copy_exe(from: &Path, to: &Path, strip: bool) -> Result<()> {
    fs::copy(from, to).with_context(|| format!("copy {} -> {}", from.display(), to.display()))?;
    if strip {
        let st = Command::new("strip").arg(to).status();
        if !st.is_ok_and(|s| s.success()) {
            eprintln!("warning: could not strip {}", to.display());
        }
    }
    Ok(())
}

fn write_script(path: &Path) -> Result<()> {
    fs::write(path, include_str!("run.sh"))?;
    set_executable(path)
}

fn set_executable(path: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mut p = fs::metadata(path)?.permissions();
    p.set_mode(0o755);
    fs::set_permissions(path, p)?;
    Ok(())
}

fn gpu_test() -> Result<()> {
    let exes = build_executables(&["test", "--workspace", "--no-run"], &[], true)?;
    let dir = root().join("target/gpu-test");
    let _ = fs::remove_dir_all(&dir);
    let n = stage_tests(&dir, &exes, false)?;
    ensure!(
        n > 0,
        "no GPU tests found (GPU tests are #[ignore = \"gpu\"] fns named gpu_*)"
    );
    // run.sh fails without a GPU and when any listed test did not run.
    run(&mut Command::new(dir.join("run.sh")))
}

// ---------------------------------------------------------------- bundle

/// The device tool carries at most 64 MiB; what the bundle carries is its packed form.
const BUNDLE_LIMIT: u64 = 60 << 20;
/// Bench executables to bundle: `<package>-<bench target> [args...]` per line.
const BENCH_LIST: &str = "xtask/gpu-benches.txt";

fn bundle() -> Result<()> {
    let root = root();
    let dir = root.join("bundle");
    let _ = fs::remove_dir_all(&dir);
    let _ = fs::remove_file(root.join("bundle.tar.xz"));
    fs::create_dir_all(&dir)?;
    // Cargo's own release dir, shared with `dist`: switching archs reruns only the kernel
    // build scripts (their cubins are cached), never the dependencies.
    let target_dir = root.join("target");
    let td = target_dir.to_string_lossy().into_owned();
    let cache = cache_dir().to_string_lossy().into_owned();
    let envs = [
        ("CUZK_CUDA_ARCHS", "sm_90"),
        ("CUZK_KERNEL_CACHE", cache.as_str()),
    ];
    let nvcc = nvcc::find_nvcc(&root).map_err(|e| {
        anyhow::anyhow!("{e}: a bundle without kernels is useless; run `cargo xtask setup-cuda`")
    })?;
    println!("bundle: nvcc {}", nvcc.display());

    let tests = build_executables(
        &[
            "test",
            "--workspace",
            "--release",
            "--no-run",
            "--target-dir",
            &td,
        ],
        &envs,
        true,
    )?;
    let n = stage_tests(&dir, &tests, true)?;
    ensure!(n > 0, "no GPU tests found");

    let bench_list = fs::read_to_string(root.join(BENCH_LIST)).unwrap_or_default();
    let wanted: Vec<&str> = bench_list
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    if !wanted.is_empty() {
        // Every executable (harness-less benches too: looked up by name below).
        let benches = build_executables(
            &["bench", "--workspace", "--no-run", "--target-dir", &td],
            &envs,
            false,
        )?;
        let by_name: BTreeMap<&str, &Artifact> =
            benches.iter().map(|a| (a.name.as_str(), a)).collect();
        fs::create_dir_all(dir.join("benches"))?;
        for line in &wanted {
            let name = line.split_whitespace().next().unwrap_or_default();
            let a = by_name.get(name).with_context(|| {
                format!(
                    "{BENCH_LIST}: no bench executable {name:?} (have: {:?})",
                    by_name.keys().collect::<Vec<_>>()
                )
            })?;
            copy_exe(&a.path, &dir.join("benches").join(name), true)?;
        }
        fs::write(dir.join("benches.txt"), wanted.join("\n") + "\n")?;
    }

    if root.join("crates/cuzk/Cargo.toml").is_file() {
        let bins = build_executables(
            &["build", "--release", "-p", "cuzk", "--target-dir", &td],
            &envs,
            false,
        )?;
        match bins
            .iter()
            .find(|a| a.path.file_name().is_some_and(|f| f == "cuzk"))
        {
            Some(a) => copy_exe(&a.path, &dir.join("cuzk"), true)?,
            None => eprintln!("warning: package cuzk built no `cuzk` binary; skipped"),
        }
    } else {
        eprintln!("note: crates/cuzk does not exist yet; bundle has no cuzk binary");
    }

    // The binaries share most of their bytes (the same kernels and crates), which xz's window
    // finds and gzip's does not: 88 MiB packs into about 24.
    let packed = root.join("bundle.tar.xz");
    let st = Command::new("tar")
        .current_dir(&root)
        .env("XZ_OPT", "-6 -T0")
        .args(["-cJf", "bundle.tar.xz", "bundle"])
        .status()
        .context("tar (with xz) is needed to pack the bundle")?;
    ensure!(st.success(), "tar -cJf bundle.tar.xz bundle failed");
    let size = fs::metadata(&packed)?.len();
    println!(
        "bundle/: {n} GPU tests, {:.1} MiB; bundle.tar.xz {:.1} MiB (limit {} MiB)",
        dir_size(&dir)? as f64 / (1 << 20) as f64,
        size as f64 / (1 << 20) as f64,
        BUNDLE_LIMIT >> 20
    );
    ensure!(
        size < BUNDLE_LIMIT,
        "bundle.tar.xz is {size} bytes, over the {} MiB limit",
        BUNDLE_LIMIT >> 20
    );
    println!(
        "on the GPU machine: tar -xJf bundle.tar.xz && bundle/run.sh (python3 -m tarfile -e bundle.tar.xz . where tar has no xz)"
    );
    Ok(())
}

fn dir_size(p: &Path) -> Result<u64> {
    let mut total = 0;
    for e in fs::read_dir(p)? {
        let e = e?;
        let m = e.metadata()?;
        total += if m.is_dir() {
            dir_size(&e.path())?
        } else {
            m.len()
        };
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn package_names() {
        assert_eq!(
            package_name("path+file:///x/crates/gpu#cuzk-gpu@0.1.0"),
            "cuzk-gpu"
        );
        assert_eq!(package_name("path+file:///x/xtask#0.1.0"), "xtask");
    }
}
