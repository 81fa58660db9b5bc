//! Finding nvcc, compiling kernel entry files to fatbins, the content-hash cache and the
//! ptxas report parser.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// SASS targets of a full build: A100, RTX 30xx, RTX 40xx/L40, H100/H200, B200, RTX 50xx. PTX
/// is embedded too ([`embedded_ptx`]), so that later GPUs can JIT.
pub const DEFAULT_ARCHS: &[&str] = &["sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120"];
/// Env vars that change what gets built (build.rs reruns when they change).
pub const ENV_VARS: &[&str] = &[
    "NVCC",
    "CUDA_HOME",
    "CUDA_PATH",
    "CUZK_CUDA_ARCHS",
    "CUZK_NO_CUDA",
    "CUZK_KERNEL_CACHE",
    "CUZK_FATBIN_COMPRESS",
];
/// Where `cargo xtask setup-cuda` installs the pinned PyPI toolkit, relative to the repo root.
pub const PIP_TARGET: &str = ".cuda/pip";
pub const PIP_NVCC: &str = ".cuda/pip/nvidia/cu13/bin/nvcc";
/// Pinned wheels: newer nvvm/crt emit PTX that a CUDA 13.0 driver rejects.
pub const PIP_PACKAGES: &[&str] = &[
    "nvidia-cuda-nvcc==13.0.88",
    "nvidia-nvvm==13.0.88",
    "nvidia-cuda-crt==13.0.88",
    "nvidia-cuda-runtime==13.0.96",
    "nvidia-cuda-cccl==13.0.85",
];
/// The PERF-NOTES.md line that accepts a kernel's local-memory spills, with the reason:
/// `cuzk: allow-spills NAME[@sm_80,sm_120] why`.
pub const ALLOW_SPILLS_MARKER: &str = "cuzk: allow-spills";

/// Why no nvcc was found (for messages).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoNvcc {
    /// `CUZK_NO_CUDA=1`.
    Disabled,
    /// `NVCC` names a file that does not exist.
    BadEnv(PathBuf),
    /// Nothing in CUDA_HOME, CUDA_PATH, PATH, /usr/local/cuda or the repo's .cuda/.
    NotFound,
}

impl std::fmt::Display for NoNvcc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NoNvcc::Disabled => write!(f, "CUZK_NO_CUDA is set"),
            NoNvcc::BadEnv(p) => write!(f, "NVCC={} does not exist", p.display()),
            NoNvcc::NotFound => write!(
                f,
                "no nvcc in NVCC, CUDA_HOME, CUDA_PATH, PATH, /usr/local/cuda or {PIP_NVCC}"
            ),
        }
    }
}

fn env_nonempty(k: &str) -> Option<String> {
    std::env::var(k).ok().filter(|v| !v.trim().is_empty())
}

/// Finds nvcc: `NVCC` (exclusive when set), `CUDA_HOME`, `CUDA_PATH`, `PATH`,
/// `/usr/local/cuda/bin`, then `<repo>/.cuda/pip/nvidia/cu13/bin/nvcc`.
pub fn find_nvcc(repo_root: &Path) -> Result<PathBuf, NoNvcc> {
    if env_nonempty("CUZK_NO_CUDA").is_some_and(|v| v != "0") {
        return Err(NoNvcc::Disabled);
    }
    if let Some(p) = env_nonempty("NVCC") {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(NoNvcc::BadEnv(p))
        };
    }
    let mut candidates = Vec::new();
    for k in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(h) = env_nonempty(k) {
            candidates.push(PathBuf::from(h).join("bin/nvcc"));
        }
    }
    if let Some(path) = std::env::var_os("PATH") {
        candidates.extend(std::env::split_paths(&path).map(|d| d.join("nvcc")));
    }
    candidates.push(PathBuf::from("/usr/local/cuda/bin/nvcc"));
    candidates.push(repo_root.join(PIP_NVCC));
    candidates
        .into_iter()
        .find(|p| p.is_file())
        .ok_or(NoNvcc::NotFound)
}

/// nvcc's release and build number, e.g. `13.0.88`, from the `V13.0.88` of `nvcc --version`.
pub fn nvcc_version(nvcc: &Path) -> Result<String, String> {
    let out = Command::new(nvcc)
        .arg("--version")
        .output()
        .map_err(|e| format!("cannot run {}: {e}", nvcc.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    parse_nvcc_version(&text)
        .ok_or_else(|| format!("{} --version printed no version: {text}", nvcc.display()))
}

fn parse_nvcc_version(text: &str) -> Option<String> {
    text.split_whitespace()
        .filter_map(|w| w.strip_prefix('V'))
        .find(|v| v.split('.').count() >= 2 && v.split('.').all(|n| n.parse::<u32>().is_ok()))
        .map(str::to_string)
}

/// The archs of the test-only kernels (`kernels/test`) when `CUZK_CUDA_ARCHS` is unset: the GPU
/// test machine's (newer cards JIT its PTX). No release ships them, and the six archs of
/// [`DEFAULT_ARCHS`] cost CI's two cores about three more minutes of nvcc.
pub const TEST_ARCHS: &[&str] = &["sm_90"];

/// The SASS archs of the kernels in `kernels/<domain>`: [`archs`], except [`TEST_ARCHS`] for
/// `test` when `CUZK_CUDA_ARCHS` is unset.
pub fn archs_for(domain: &str) -> Result<Vec<String>, String> {
    if domain == "test" && env_nonempty("CUZK_CUDA_ARCHS").is_none() {
        return Ok(TEST_ARCHS.iter().map(|s| s.to_string()).collect());
    }
    archs()
}

/// SASS archs from `CUZK_CUDA_ARCHS` (comma/space separated, e.g. `sm_90`), else the full list.
pub fn archs() -> Result<Vec<String>, String> {
    match env_nonempty("CUZK_CUDA_ARCHS") {
        None => Ok(DEFAULT_ARCHS.iter().map(|s| s.to_string()).collect()),
        Some(v) => {
            let list: Vec<String> = v
                .split([',', ' '])
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect();
            for a in &list {
                let ok = a
                    .strip_prefix("sm_")
                    .is_some_and(|n| n.len() >= 2 && n.chars().all(|c| c.is_ascii_alphanumeric()));
                if !ok {
                    return Err(format!("CUZK_CUDA_ARCHS: {a:?} is not like sm_90"));
                }
            }
            Ok(list)
        }
    }
}

/// The NVVM generation whose PTX an arch-neutral target gets. cicc (CUDA 13.0) writes one PTX
/// for every target below sm_100 (NVVM 7) and another for every target from sm_100 on (NVVM
/// 20), equal up to the `.target` line for every entry file (compute_80/86/89/90 and
/// compute_100/120); ptxas' sm_90 cubins from the compute_80 and compute_90 PTX of `check.cu`
/// differ only in the `.note.nv.cuinfo` byte naming the virtual arch. So each generation's PTX
/// is made once.
fn nvvm_generation(arch: &str) -> u32 {
    if arch_number(arch) >= 100 { 20 } else { 7 }
}

/// `sm_90a` -> 90.
fn arch_number(arch: &str) -> u32 {
    arch[3..]
        .trim_end_matches(|c: char| c.is_alphabetic())
        .parse()
        .unwrap_or(0)
}

/// An arch-specific target (`sm_90a`) runs on its own arch only and gets PTX of its own.
fn is_arch_specific(arch: &str) -> bool {
    arch.ends_with(|c: char| c.is_ascii_alphabetic())
}

/// The arch-neutral targets of each PTX generation, oldest first.
fn generations(archs: &[String]) -> Vec<Vec<&String>> {
    let mut neutral: Vec<&String> = archs.iter().filter(|a| !is_arch_specific(a)).collect();
    neutral.sort_by_key(|a| arch_number(a));
    let mut out: Vec<Vec<&String>> = Vec::new();
    for a in neutral {
        match out.last_mut() {
            Some(g) if nvvm_generation(g[0]) == nvvm_generation(a) => g.push(a),
            _ => out.push(vec![a]),
        }
    }
    out
}

/// The PTX a build of `archs` embeds, for cards without SASS to JIT (`compute_100` for the
/// default archs): the newest generation's, made for its oldest target.
pub fn embedded_ptx(archs: &[String]) -> Option<String> {
    let newest = generations(archs).pop()?;
    Some(format!("compute_{}", &newest[0][3..]))
}

/// `-gencode` flags: one PTX per generation, made for its oldest target, and SASS for each
/// target from it (one cicc run per generation instead of one per arch); the newest
/// generation's PTX is embedded too.
pub fn gencode_args(archs: &[String]) -> Vec<String> {
    let ptx = embedded_ptx(archs);
    let mut v = Vec::new();
    for g in generations(archs) {
        let virt = format!("compute_{}", &g[0][3..]);
        let mut codes: Vec<String> = g.iter().map(|a| a.to_string()).collect();
        if ptx.as_ref() == Some(&virt) {
            codes.push(virt.clone());
        }
        v.push("-gencode".to_string());
        v.push(format!("arch={virt},code=[{}]", codes.join(",")));
    }
    for a in archs.iter().filter(|a| is_arch_specific(a)) {
        let n = &a[3..];
        v.push("-gencode".to_string());
        v.push(format!("arch=compute_{n},code=sm_{n}"));
    }
    v
}

/// The `*.cu` entry files directly in `dir` (one domain folder such as `kernels/ntt`), sorted.
pub fn entry_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "cu"))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Include dirs besides the kernels dir: CCCL headers of the PyPI toolkit live in
/// `<toolkit>/include/cccl`, which nvcc does not search by itself.
pub fn extra_includes(nvcc: &Path) -> Vec<PathBuf> {
    let Some(root) = nvcc.parent().and_then(Path::parent) else {
        return Vec::new();
    };
    [root.join("include/cccl")]
        .into_iter()
        .filter(|p| p.is_dir())
        .collect()
}

fn base_args(nvcc: &Path, kernels_dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = ["-std=c++17", "-I"].iter().map(|s| s.to_string()).collect();
    v.push(kernels_dir.display().to_string());
    for inc in extra_includes(nvcc) {
        v.push("-I".into());
        v.push(inc.display().to_string());
    }
    v
}

/// Fatbin compression (`CUZK_FATBIN_COMPRESS`, default `size`: about 3x smaller than nvcc's
/// default, which keeps every test binary and the bundle small; needs a CUDA >= 12.8 driver).
pub fn compress_mode() -> String {
    env_nonempty("CUZK_FATBIN_COMPRESS").unwrap_or_else(|| "size".into())
}

/// Compiles one entry file to a fatbin at `out`; returns ptxas' `-v` report (stderr).
pub fn compile(
    nvcc: &Path,
    src: &Path,
    kernels_dir: &Path,
    archs: &[String],
    out: &Path,
) -> Result<String, String> {
    let mut cmd = Command::new(nvcc);
    cmd.arg("-fatbin")
        .args(["-O3", "-Xptxas", "-v", "--threads", "0"]);
    cmd.arg(format!("--compress-mode={}", compress_mode()));
    cmd.args(base_args(nvcc, kernels_dir))
        .args(gencode_args(archs));
    cmd.arg("-o").arg(out).arg(src);
    let output = cmd
        .output()
        .map_err(|e| format!("cannot run {}: {e}", nvcc.display()))?;
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    if !output.status.success() {
        let stdout = String::from_utf8_lossy(&output.stdout);
        return Err(format!(
            "nvcc failed on {} ({}):\n{stdout}{stderr}",
            src.display(),
            output.status
        ));
    }
    Ok(stderr)
}

/// Files `src` includes, from `nvcc -M` (preprocessor only, fast).
pub fn dependencies(nvcc: &Path, src: &Path, kernels_dir: &Path) -> Result<Vec<PathBuf>, String> {
    let out = Command::new(nvcc)
        .arg("-M")
        .args(base_args(nvcc, kernels_dir))
        .arg(src)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", nvcc.display()))?;
    if !out.status.success() {
        return Err(format!(
            "nvcc -M failed on {}:\n{}",
            src.display(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter(|t| *t != "\\" && !t.ends_with(':'))
        .map(PathBuf::from)
        .collect())
}

/// The cache key of a compilation: nvcc, archs, flags, and the contents of every included file
/// inside `kernels_dir` (other includes, i.e. toolkit and system headers, by path only).
pub fn cache_key(
    nvcc: &Path,
    src: &Path,
    kernels_dir: &Path,
    archs: &[String],
) -> Result<String, String> {
    use std::hash::{Hash, Hasher};
    // DefaultHasher::new() has fixed keys, so keys are stable across runs of one toolchain.
    let mut h = std::hash::DefaultHasher::new();
    (
        nvcc.canonicalize().unwrap_or_else(|_| nvcc.to_path_buf()),
        archs,
        base_args(nvcc, kernels_dir),
        gencode_args(archs),
        compress_mode(),
        "-O3 -Xptxas -v v1",
    )
        .hash(&mut h);
    let kdir = kernels_dir
        .canonicalize()
        .map_err(|e| format!("{}: {e}", kernels_dir.display()))?;
    let mut deps = dependencies(nvcc, src, kernels_dir)?;
    deps.push(src.to_path_buf());
    for d in deps {
        let c = d.canonicalize().unwrap_or(d);
        c.hash(&mut h);
        if c.starts_with(&kdir) {
            std::fs::read(&c)
                .map_err(|e| format!("{}: {e}", c.display()))?
                .hash(&mut h);
        }
    }
    Ok(format!("{:016x}", h.finish()))
}

/// `compile` with a content-addressed cache in `cache_dir` (shared by build profiles and by
/// xtask, so an unchanged entry file is never recompiled: a full 4-arch build of the MSM
/// kernels takes minutes on 2 cores). Returns (ptxas report, whether it came from the cache).
pub fn compile_cached(
    nvcc: &Path,
    src: &Path,
    kernels_dir: &Path,
    archs: &[String],
    cache_dir: &Path,
    out: &Path,
) -> Result<(String, bool), String> {
    let key = cache_key(nvcc, src, kernels_dir, archs)?;
    let stem = src
        .file_stem()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    let cached_bin = cache_dir.join(format!("{stem}-{key}.fatbin"));
    let cached_log = cache_dir.join(format!("{stem}-{key}.log"));
    if let (Ok(bin), Ok(log)) = (
        std::fs::read(&cached_bin),
        std::fs::read_to_string(&cached_log),
    ) {
        std::fs::write(out, bin).map_err(|e| format!("{}: {e}", out.display()))?;
        return Ok((log, true));
    }
    let log = compile(nvcc, src, kernels_dir, archs, out)?;
    // Write-then-rename so concurrent builds never see half a file; the cache is best effort.
    if std::fs::create_dir_all(cache_dir).is_ok() {
        let tmp = cache_dir.join(format!(".{stem}-{key}.{}", std::process::id()));
        if std::fs::copy(out, &tmp).is_ok() {
            let _ = std::fs::rename(&tmp, &cached_bin);
        }
        if std::fs::write(&tmp, &log).is_ok() {
            let _ = std::fs::rename(&tmp, &cached_log);
        }
    }
    Ok((log, false))
}

/// Resource use of one kernel for one arch, from `-Xptxas -v`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KernelReport {
    pub name: String,
    pub arch: String,
    pub registers: u32,
    pub shared_bytes: u64,
    pub stack_bytes: u64,
    pub spill_stores: u64,
    pub spill_loads: u64,
}

fn number_before(line: &str, suffix: &str) -> Option<u64> {
    let i = line.find(suffix)?;
    line[..i]
        .split(|c: char| !c.is_ascii_digit())
        .rfind(|s| !s.is_empty())?
        .parse()
        .ok()
}

/// Parses ptxas `-v` output: for each "Compiling entry function 'NAME' for 'sm_XX'" the
/// "Function properties" blocks that follow ("N bytes stack frame, N bytes spill stores, N
/// bytes spill loads") and the "Used N registers, ... N bytes smem" line. The stack frame is
/// the kernel's own; spills add those of the out-of-line functions listed under the kernel,
/// since the kernel executes them.
pub fn parse_ptxas(log: &str) -> Vec<KernelReport> {
    let mut out: Vec<KernelReport> = Vec::new();
    let mut cur: Option<KernelReport> = None;
    // Whether the last "Function properties for X" named the kernel itself.
    let mut own = false;
    for line in log.lines() {
        if let Some(rest) = line.split("Compiling entry function '").nth(1) {
            out.extend(cur.take());
            let mut parts = rest.split('\'');
            let name = parts.next().unwrap_or_default().to_string();
            let arch = parts.nth(1).unwrap_or_default().to_string();
            cur = Some(KernelReport {
                name,
                arch,
                ..Default::default()
            });
        } else if line.contains("Compiling function '") {
            // A non-inlined device function compiled on its own: not part of a kernel block.
            out.extend(cur.take());
        } else if let Some(k) = cur.as_mut() {
            if let Some(f) = line.split("Function properties for ").nth(1) {
                own = f.trim() == k.name;
            } else if line.contains("bytes stack frame") {
                if own {
                    k.stack_bytes = number_before(line, "bytes stack frame").unwrap_or(0);
                }
                k.spill_stores += number_before(line, "bytes spill stores").unwrap_or(0);
                k.spill_loads += number_before(line, "bytes spill loads").unwrap_or(0);
            } else if line.contains("registers") && line.contains("Used") {
                k.registers = number_before(line, "registers").unwrap_or(0) as u32;
                k.shared_bytes = number_before(line, "bytes smem").unwrap_or(0);
            }
        }
    }
    out.extend(cur);
    out
}

/// A spill accepted in a PERF-NOTES.md: `cuzk: allow-spills NAME[@sm_80,sm_86] reason`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedSpill {
    /// A kernel name, or a part of the names of several.
    pub kernel: String,
    /// The archs it is accepted on; `None`: every arch.
    pub archs: Option<Vec<String>>,
}

impl AllowedSpill {
    pub fn covers(&self, kernel: &str, arch: &str) -> bool {
        kernel.contains(self.kernel.as_str())
            && self
                .archs
                .as_ref()
                .is_none_or(|a| a.iter().any(|x| x == arch))
    }
}

/// The spills accepted by `cuzk: allow-spills NAME[@ARCH,ARCH] reason` lines in `texts`.
pub fn allowed_spills(texts: &[String]) -> Vec<AllowedSpill> {
    texts
        .iter()
        .flat_map(|s| s.lines())
        .filter_map(|l| l.split(ALLOW_SPILLS_MARKER).nth(1))
        .filter_map(|rest| rest.split_whitespace().next())
        .map(|word| {
            let word = word.trim_matches('`');
            match word.split_once('@') {
                Some((k, archs)) => AllowedSpill {
                    kernel: k.to_string(),
                    archs: Some(archs.split(',').map(str::to_string).collect()),
                },
                None => AllowedSpill {
                    kernel: word.to_string(),
                    archs: None,
                },
            }
        })
        .collect()
}

/// A fixed-width table of reports.
pub fn format_table(file: &str, reports: &[KernelReport]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{file}:");
    let _ = writeln!(
        s,
        "  {:<40} {:<7} {:>5} {:>9} {:>7} {:>8} {:>8}",
        "kernel", "arch", "regs", "smem(B)", "stack", "spill-st", "spill-ld"
    );
    for r in reports {
        let _ = writeln!(
            s,
            "  {:<40} {:<7} {:>5} {:>9} {:>7} {:>8} {:>8}",
            r.name,
            r.arch,
            r.registers,
            r.shared_bytes,
            r.stack_bytes,
            r.spill_stores,
            r.spill_loads
        );
    }
    s
}

/// Rust identifier for the fatbin constant of an entry file stem: `msm_g1` -> `MSM_G1`.
pub fn const_name(stem: &str) -> String {
    let mut s: String = stem
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    if s.starts_with(|c: char| c.is_ascii_digit()) {
        s.insert(0, '_');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvcc_version_is_read_from_its_banner() {
        let banner = "nvcc: NVIDIA (R) Cuda compiler driver\nCopyright (c) 2005-2025 NVIDIA Corporation\n\
                      Built on Wed_Jul_16_07:30:01_PM_PDT_2025\n\
                      Cuda compilation tools, release 13.0, V13.0.88\n\
                      Build cuda_13.0.r13.0/compiler.36424714_0\n";
        assert_eq!(parse_nvcc_version(banner).as_deref(), Some("13.0.88"));
        assert_eq!(parse_nvcc_version("Version of nothing"), None);
    }

    const LOG: &str = "ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'cuzk_smoke_fill' for 'sm_80'
ptxas info    : Function properties for cuzk_smoke_fill
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 10 registers, used 0 barriers, 368 bytes cmem[0]
ptxas info    : Compiling function 'helper' for 'sm_90'
ptxas info    : Function properties for helper
    8 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Compiling entry function '_Z3bigPj' for 'sm_90'
ptxas info    : Function properties for _Z3bigPj
    96 bytes stack frame, 40 bytes spill stores, 44 bytes spill loads
ptxas info    : Function properties for _Z6calleev
    16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 4096 bytes smem, 368 bytes cmem[0]
ptxas info    : Compiling entry function 'clean_kernel_with_spilling_callee' for 'sm_90'
ptxas info    : Function properties for clean_kernel_with_spilling_callee
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Function properties for _Z6calleev
    16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 40 registers, used 0 barriers, 368 bytes cmem[0]
";

    #[test]
    fn parses_ptxas() {
        let r = parse_ptxas(LOG);
        assert_eq!(r.len(), 3, "{r:?}");
        assert_eq!(
            r[0],
            KernelReport {
                name: "cuzk_smoke_fill".into(),
                arch: "sm_80".into(),
                registers: 10,
                ..Default::default()
            }
        );
        assert_eq!(
            r[1],
            KernelReport {
                name: "_Z3bigPj".into(),
                arch: "sm_90".into(),
                registers: 255,
                shared_bytes: 4096,
                stack_bytes: 96,
                spill_stores: 48,
                spill_loads: 48
            }
        );
        assert_eq!(
            r[2],
            KernelReport {
                name: "clean_kernel_with_spilling_callee".into(),
                arch: "sm_90".into(),
                registers: 40,
                spill_stores: 8,
                spill_loads: 4,
                ..Default::default()
            },
            "a callee's spills count for the kernel that calls it"
        );
    }

    #[test]
    fn gencode_and_names() {
        let v = |l: &[&str]| -> Vec<String> { l.iter().map(|s| s.to_string()).collect() };
        assert_eq!(
            gencode_args(&v(&["sm_90", "sm_120", "sm_80", "sm_100", "sm_90a"])),
            [
                "-gencode",
                "arch=compute_80,code=[sm_80,sm_90]",
                "-gencode",
                "arch=compute_100,code=[sm_100,sm_120,compute_100]",
                "-gencode",
                "arch=compute_90a,code=sm_90a",
            ]
        );
        assert_eq!(
            gencode_args(&v(&["sm_90"])),
            ["-gencode", "arch=compute_90,code=[sm_90,compute_90]"]
        );
        assert_eq!(embedded_ptx(&v(&["sm_89", "sm_86"])).unwrap(), "compute_86");
        assert_eq!(embedded_ptx(&v(&["sm_90a"])), None);
        assert_eq!(const_name("msm-g1"), "MSM_G1");
        let allowed = allowed_spills(&[
            "- `cuzk: allow-spills big_kernel` why\n- cuzk: allow-spills pass4@sm_80,sm_120 why\n"
                .into(),
        ]);
        assert!(allowed[0].covers("cuzk_big_kernel", "sm_90"));
        assert!(allowed[1].covers("ntt_pass4_dif", "sm_120"));
        assert!(!allowed[1].covers("ntt_pass4_dif", "sm_90"));
        assert!(!allowed[0].covers("small_kernel", "sm_90"));
    }
}
