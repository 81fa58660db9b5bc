//! `cargo xtask dist`: the release archive a storage provider installs.
//!
//! `dist/cuzk-<version>-linux-x86_64.tar.xz` holds `cuzk-<version>-linux-x86_64/` with the
//! stripped `cuzk` binary (kernels for every arch of [`nvcc::DEFAULT_ARCHS`] plus the PTX of
//! `nvcc::embedded_ptx`, compute_100), `cuzk.example.toml`, `cuzk.service`, the README, the
//! license files and `THIRD-PARTY-LICENSES` (every crate the binary links, from `cargo
//! metadata`), and beside the archive its `.sha256`. The tar is made reproducible (sorted
//! names, the commit's time, no owners), so the same checkout and toolchain give the same
//! archive bytes up to the binary.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::fs;
use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail, ensure};
use sha2::{Digest, Sha256};

use crate::{build_executables, cache_dir, cargo, copy_exe, nvcc, root};

const TARGET: &str = "x86_64-unknown-linux-gnu";
/// The systemd unit shipped in the archive; the README shows the same text.
const UNIT: &str = "deploy/cuzk.service";
const SHIPPED_DOCS: &[&str] = &[
    "README.md",
    "LICENSE-MIT",
    "LICENSE-APACHE",
    "cuzk.example.toml",
];

pub fn main(args: &[String]) -> Result<()> {
    let check = match args {
        [] => false,
        [a] if a == "--check" => true,
        _ => bail!("usage: cargo xtask dist [--check]"),
    };
    let root = root();
    let nvcc = nvcc::find_nvcc(&root).map_err(|e| {
        anyhow::anyhow!("{e}: a release without kernels is CPU-only; run `cargo xtask setup-cuda`")
    })?;
    // Every listed arch must compile: set the list explicitly, whatever the caller's env says.
    let archs = nvcc::DEFAULT_ARCHS.join(",");
    println!("dist: nvcc {} for {archs}", nvcc.display());
    unit_matches_readme(&root)?;

    // --check (CI) takes the `cuzk` the test suite built (`cargo test --workspace` builds it
    // for the end-to-end tests, with the workspace's features: a `-p cuzk` build would unify
    // other features and recompile much of the tree); a release shares cargo's release dir
    // with `bundle` (only the kernel build scripts rerun for the other archs).
    let cache = cache_dir().to_string_lossy().into_owned();
    let td = root.join("target").to_string_lossy().into_owned();
    let (args, envs) = if check {
        ensure!(
            std::env::var("CUZK_CUDA_ARCHS").map_or(true, |a| a == archs),
            "dist --check builds the default archs: unset CUZK_CUDA_ARCHS"
        );
        (
            vec!["test", "--workspace", "--no-run", "--target-dir", &td],
            vec![],
        )
    } else {
        (
            vec!["build", "-p", "cuzk", "--release", "--target-dir", &td],
            vec![
                ("CUZK_CUDA_ARCHS", archs.as_str()),
                ("CUZK_KERNEL_CACHE", cache.as_str()),
            ],
        )
    };
    let bins = build_executables(&args, &envs, false)?;
    let exe = bins
        .iter()
        .find(|a| a.path.file_name().is_some_and(|f| f == "cuzk"))
        .context("package cuzk built no `cuzk` binary")?;

    let version = package_version(&root)?;
    let name = format!("cuzk-{version}-linux-x86_64");
    let out = root.join("dist");
    let _ = fs::remove_dir_all(&out);
    let stage = out.join(&name);
    fs::create_dir_all(&stage)?;
    copy_exe(&exe.path, &stage.join("cuzk"), true)?;
    for f in SHIPPED_DOCS {
        fs::copy(root.join(f), stage.join(f)).with_context(|| format!("copy {f}"))?;
    }
    fs::copy(root.join(UNIT), stage.join("cuzk.service"))?;
    fs::write(
        stage.join("THIRD-PARTY-LICENSES"),
        third_party_licenses(&root)?,
    )?;

    let archive = out.join(format!("{name}.tar.xz"));
    pack(&root, &out, &name, &archive)?;
    let digest = hex(&Sha256::digest(fs::read(&archive)?));
    let sum_file = out.join(format!("{name}.tar.xz.sha256"));
    fs::write(&sum_file, format!("{digest}  {name}.tar.xz\n"))?;
    println!(
        "dist: {} ({:.1} MiB), sha256 {digest}",
        archive.display(),
        fs::metadata(&archive)?.len() as f64 / (1 << 20) as f64
    );

    if check {
        check_archive(&out, &name, &archive, &archs)?;
    }
    Ok(())
}

/// The README's unit and the shipped one are the same text.
fn unit_matches_readme(root: &Path) -> Result<()> {
    let unit = fs::read_to_string(root.join(UNIT)).with_context(|| UNIT.to_string())?;
    let readme = fs::read_to_string(root.join("README.md"))?;
    ensure!(
        readme.contains(unit.trim_end()),
        "README.md no longer shows {UNIT} as it is: make them the same text"
    );
    Ok(())
}

fn package_version(root: &Path) -> Result<String> {
    let meta = metadata(root, false)?;
    meta["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["name"] == "cuzk")
        .and_then(|p| p["version"].as_str())
        .map(str::to_string)
        .context("cargo metadata lists no package cuzk")
}

fn metadata(root: &Path, resolve: bool) -> Result<serde_json::Value> {
    let mut cmd = cargo();
    cmd.current_dir(root).args([
        "metadata",
        "--format-version",
        "1",
        "--filter-platform",
        TARGET,
    ]);
    if !resolve {
        cmd.arg("--no-deps");
    }
    let out = cmd.output().context("cargo metadata")?;
    ensure!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(serde_json::from_slice(&out.stdout)?)
}

/// Name, version, license and repository of every third-party crate the `cuzk` binary links:
/// the normal dependencies reachable from it (build scripts and proc-macros do not ship).
fn third_party_licenses(root: &Path) -> Result<String> {
    let meta = metadata(root, true)?;
    let packages: BTreeMap<&str, &serde_json::Value> = meta["packages"]
        .as_array()
        .context("cargo metadata: no packages")?
        .iter()
        .filter_map(|p| Some((p["id"].as_str()?, p)))
        .collect();
    let nodes: BTreeMap<&str, &serde_json::Value> = meta["resolve"]["nodes"]
        .as_array()
        .context("cargo metadata: no resolve graph")?
        .iter()
        .filter_map(|n| Some((n["id"].as_str()?, n)))
        .collect();
    let members: BTreeSet<&str> = meta["workspace_members"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m.as_str())
        .collect();
    let start = packages
        .iter()
        .find(|(id, p)| p["name"] == "cuzk" && members.contains(*id))
        .map(|(id, _)| *id)
        .context("no package cuzk in the workspace")?;

    let mut seen = BTreeSet::from([start]);
    let mut todo = vec![start];
    while let Some(id) = todo.pop() {
        let Some(node) = nodes.get(id) else { continue };
        for dep in node["deps"].as_array().into_iter().flatten() {
            let normal = dep["dep_kinds"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|k| k["kind"].is_null());
            let Some(dep_id) = dep["pkg"].as_str() else {
                continue;
            };
            let proc_macro = packages.get(dep_id).is_some_and(|p| {
                p["targets"].as_array().into_iter().flatten().any(|t| {
                    t["kind"]
                        .as_array()
                        .is_some_and(|k| k.iter().any(|k| k == "proc-macro"))
                })
            });
            if normal && !proc_macro && seen.insert(dep_id) {
                todo.push(dep_id);
            }
        }
    }

    let mut rows: Vec<(String, String, String, String)> = seen
        .iter()
        .filter(|id| !members.contains(*id))
        .filter_map(|id| packages.get(id))
        .map(|p| {
            let s = |k: &str| p[k].as_str().unwrap_or("").to_string();
            let license = match (p["license"].as_str(), p["license_file"].as_str()) {
                (Some(l), _) => l.to_string(),
                (None, Some(f)) => format!("see {f} in the crate"),
                (None, None) => "not declared".into(),
            };
            (s("name"), s("version"), license, s("repository"))
        })
        .collect();
    rows.sort();
    ensure!(
        !rows.is_empty(),
        "the cuzk binary links no third-party crate?"
    );
    let mut text = format!(
        "Third-party crates linked into the cuzk binary ({} crates), with their licenses as\n\
         each declares it. Their license texts are in each crate's source package on crates.io.\n\n",
        rows.len()
    );
    for (name, version, license, repo) in rows {
        let _ = writeln!(text, "{name} {version}: {license}  {repo}");
    }
    Ok(text)
}

/// A reproducible tar.xz of `out/name`: sorted names, no owners, every mtime the commit's.
fn pack(root: &Path, out: &Path, name: &str, archive: &Path) -> Result<()> {
    let epoch = Command::new("git")
        .current_dir(root)
        .args(["log", "-1", "--format=%ct"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "0".into());
    let st = Command::new("tar")
        .current_dir(out)
        .env("XZ_OPT", "-6")
        .args([
            "--sort=name",
            "--owner=0",
            "--group=0",
            "--numeric-owner",
            &format!("--mtime=@{epoch}"),
            "-cJf",
        ])
        .arg(archive)
        .arg(name)
        .status()
        .context("tar (GNU, with xz) packs the archive")?;
    ensure!(st.success(), "tar failed for {}", archive.display());
    Ok(())
}

/// Unpacks the archive elsewhere, checks its digest file, its contents, and runs its binary:
/// `--version` must name every arch, and the demo must prove and verify on the CPU.
fn check_archive(out: &Path, name: &str, archive: &Path, archs: &str) -> Result<()> {
    let sums = fs::read_to_string(out.join(format!("{name}.tar.xz.sha256")))?;
    let want = sums.split_whitespace().next().unwrap_or_default();
    ensure!(
        hex(&Sha256::digest(fs::read(archive)?)) == want,
        "the .sha256 file does not match the archive"
    );
    let dir = out.join("unpacked");
    fs::create_dir_all(&dir)?;
    let st = Command::new("tar")
        .current_dir(&dir)
        .arg("-xJf")
        .arg(archive)
        .status()?;
    ensure!(st.success(), "tar -xJf {} failed", archive.display());
    let top = dir.join(name);
    for f in SHIPPED_DOCS
        .iter()
        .chain(&["cuzk", "cuzk.service", "THIRD-PARTY-LICENSES"])
    {
        ensure!(top.join(f).is_file(), "the archive lacks {f}");
    }
    let cuzk = top.join("cuzk");
    let version = output(Command::new(&cuzk).arg("--version"))?;
    print!("{version}");
    for a in archs.split(',') {
        ensure!(
            version.contains(a),
            "`cuzk --version` does not list {a}: {version}"
        );
    }
    let demo = output(
        Command::new(&cuzk)
            .args(["--backend", "cpu", "demo", "--log-constraints", "10"])
            .env_remove("CUZK_LOG"),
    )?;
    print!("{demo}");
    ensure!(
        demo.contains("proof verified"),
        "the archive's demo did not say the proof verified:\n{demo}"
    );
    println!("dist --check: the archive unpacks, names its kernels and proves on the CPU");
    Ok(())
}

fn output(cmd: &mut Command) -> Result<String> {
    let out = cmd
        .output()
        .with_context(|| format!("cannot run {cmd:?}"))?;
    ensure!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}
