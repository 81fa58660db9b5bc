//! Kernel modules (fatbins a kernel crate embeds), lazily loaded per device, and the checked
//! launch layer.
//!
//! Each kernel crate (cuzk-ntt, cuzk-msm, cuzk-groth16's setup, cuzk-test-kernels) embeds its
//! own entry files through `cuzk-kernel-build`, which generates one [`Module`] constant per
//! file and the crate's [`Kernels`]; its one launcher module wraps each kernel in a safe, typed
//! function that checks buffer lengths and then calls [`Gpu::launch`]:
//!
//! ```ignore
//! pub fn smoke_fill(gpu: &Gpu, stream: &Stream, out: &mut DeviceBuffer<u32>, seed: u32) -> Result<()> {
//!     let p = cuzk_smoke_params { n: u32::try_from(out.len())?, seed };
//!     let cfg = LaunchConfig::for_elements(out.len(), CUZK_DEFAULT_BLOCK)?;
//!     // SAFETY: the kernel writes out[0..p.n] only and p.n == out.len().
//!     unsafe { gpu.launch(stream, &SMOKE, "cuzk_smoke_fill", cfg, &[out, &p]) }
//! }
//! ```

use std::collections::HashMap;
use std::ffi::{CString, c_void};
use std::sync::Arc;

use bytemuck::Pod;
use cudarc::driver::{CudaContext, result, sys};
use cuzk_vram::DeviceBuffer;
use cuzk_vram::inject::Site;
use parking_lot::Mutex;

use crate::device::{Gpu, Stream};
use crate::error::{GpuError, Result, cuda};

/// Whether this build found nvcc, so that every kernel crate in it embeds compiled kernels.
pub const fn kernels_built() -> bool {
    cfg!(cuzk_kernels)
}

pub(crate) fn require_kernels() -> Result<()> {
    if kernels_built() {
        Ok(())
    } else {
        Err(GpuError::KernelsNotBuilt)
    }
}

/// SASS archs the kernels were built for (empty without kernels).
pub fn kernel_archs() -> &'static str {
    env!("CUZK_KERNEL_ARCHS")
}

/// The PTX the kernels embed for cards without SASS to JIT, e.g. `compute_100` (empty without
/// kernels or PTX).
pub fn kernel_ptx() -> &'static str {
    env!("CUZK_KERNEL_PTX")
}

/// The version of nvcc that built the kernels, e.g. `13.0.88` (empty without kernels).
pub fn kernel_cuda_version() -> &'static str {
    env!("CUZK_CUDA_VERSION")
}

/// How a build's kernels run on a device of one compute capability.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KernelFit {
    /// Machine code for this arch, or for an older minor of its major, which the device runs
    /// as it is (CUDA's binary compatibility within a major).
    Sass(String),
    /// No machine code it can run: the driver compiles this PTX at the first load.
    Jit(String),
    /// The device is older than every target.
    Unsupported,
    /// The build has no kernels.
    NotBuilt,
}

/// (major, minor, arch-specific, name) of each `sm_NN` target in `archs`; an arch-specific
/// target (`sm_90a`) runs on its own arch only and carries no PTX.
fn targets(archs: &str) -> Vec<(i32, i32, bool, &str)> {
    archs
        .split(',')
        .filter_map(|a| {
            let n = a.strip_prefix("sm_")?;
            let digits = n.trim_end_matches(|c: char| c.is_ascii_alphabetic());
            let v: i32 = digits.parse().ok()?;
            Some((v / 10, v % 10, digits.len() != n.len(), a))
        })
        .collect()
}

impl KernelFit {
    /// `archs` and `ptx` as [`kernel_archs`] and [`kernel_ptx`] give them (`sm_80,sm_90`,
    /// `compute_80`); `cc` the device's compute capability.
    pub fn of(archs: &str, ptx: &str, cc: (i32, i32)) -> Self {
        let targets = targets(archs);
        if targets.is_empty() {
            return Self::NotBuilt;
        }
        let sass = targets
            .iter()
            .filter(|&&(ma, mi, specific, _)| {
                ma == cc.0 && if specific { mi == cc.1 } else { mi <= cc.1 }
            })
            .max_by_key(|&&(_, mi, _, _)| mi);
        if let Some(&(_, _, _, a)) = sass {
            return Self::Sass(a.to_string());
        }
        let ptx_cc = ptx
            .strip_prefix("compute_")
            .and_then(|n| n.parse::<i32>().ok())
            .map(|v| (v / 10, v % 10));
        match ptx_cc {
            Some(p) if p <= cc => Self::Jit(ptx.to_string()),
            _ => Self::Unsupported,
        }
    }
}

/// One kernel entry file (`kernels/<domain>/<name>.cu`) as its crate embeds it. Names are
/// unique across crates: a device loads each module once, by name.
#[derive(Debug, Clone, Copy)]
pub struct Module {
    name: &'static str,
    fatbin: Option<&'static [u8]>,
}

impl Module {
    /// A compiled module.
    pub const fn new(name: &'static str, fatbin: &'static [u8]) -> Self {
        Self {
            name,
            fatbin: Some(fatbin),
        }
    }
    /// A module of a build without nvcc: launching from it is `KernelsNotBuilt`.
    pub const fn not_built(name: &'static str) -> Self {
        Self { name, fatbin: None }
    }
    /// The entry file's stem.
    pub const fn name(&self) -> &'static str {
        self.name
    }
    /// The fatbin, or `KernelsNotBuilt`.
    pub fn fatbin(&self) -> Result<&'static [u8]> {
        self.fatbin.ok_or(GpuError::KernelsNotBuilt)
    }
}

/// The kernels one crate embeds (generated by `cuzk-kernel-build` into the crate's OUT_DIR).
#[derive(Debug)]
pub struct Kernels {
    modules: &'static [Module],
    archs: &'static str,
    ptxas_report: &'static str,
}

impl Kernels {
    pub const fn new(
        modules: &'static [Module],
        archs: &'static str,
        ptxas_report: &'static str,
    ) -> Self {
        Self {
            modules,
            archs,
            ptxas_report,
        }
    }
    /// Whether every module is compiled.
    pub fn built(&self) -> bool {
        !self.modules.is_empty() && self.modules.iter().all(|m| m.fatbin.is_some())
    }
    pub fn modules(&self) -> &'static [Module] {
        self.modules
    }
    /// The module named `name`.
    pub fn module(&self, name: &str) -> Result<&'static Module> {
        self.modules
            .iter()
            .find(|m| m.name == name)
            .ok_or_else(|| GpuError::UnknownModule(name.to_string()))
    }
    /// SASS archs of the fatbins; empty when not built.
    pub fn archs(&self) -> &'static str {
        self.archs
    }
    /// ptxas resource report of the build (registers, smem, spills per kernel and arch).
    pub fn ptxas_report(&self) -> &'static str {
        self.ptxas_report
    }
}

struct Loaded {
    raw: sys::CUmodule,
    ctx: Arc<CudaContext>,
}

// SAFETY: a CUmodule handle may be used from any thread once its context is bound.
unsafe impl Send for Loaded {}
// SAFETY: as above; the handle is never mutated.
unsafe impl Sync for Loaded {}

impl Drop for Loaded {
    fn drop(&mut self) {
        let _ = self.ctx.bind_to_thread();
        // SAFETY: loaded by us, unloaded once; functions hold an Arc<Module> so none outlive it.
        let _ = unsafe { result::module::unload(self.raw) };
    }
}

/// A kernel handle plus its parameter sizes (from `cuFuncGetParamInfo`), used to reject
/// launches whose arguments do not match the kernel's signature.
#[derive(Clone)]
pub(crate) struct Function {
    raw: sys::CUfunction,
    param_sizes: Option<Vec<usize>>,
    _module: Arc<Loaded>,
}

// SAFETY: as for Loaded.
unsafe impl Send for Function {}
// SAFETY: as for Loaded.
unsafe impl Sync for Function {}

#[derive(Default)]
pub(crate) struct ModuleCache {
    modules: Mutex<HashMap<&'static str, Arc<Loaded>>>,
    functions: Mutex<HashMap<(&'static str, String), Function>>,
}

fn load_module(ctx: &Arc<CudaContext>, image: &[u8]) -> Result<Loaded> {
    // cuModuleLoadData reads the fatbin header in place; give it 8-byte alignment
    // (include_bytes! only guarantees 1).
    let mut aligned = vec![0u64; image.len().div_ceil(8)];
    bytemuck::cast_slice_mut::<u64, u8>(&mut aligned)[..image.len()].copy_from_slice(image);
    ctx.bind_to_thread().map_err(cuda("cuCtxSetCurrent"))?;
    // SAFETY: `aligned` holds a complete fatbin produced by nvcc; the driver copies what it keeps.
    let raw = unsafe { result::module::load_data(aligned.as_ptr().cast()) }
        .map_err(cuda("cuModuleLoadData"))?;
    Ok(Loaded {
        raw,
        ctx: ctx.clone(),
    })
}

/// Loads every function of `m` now (CUDA loads them lazily otherwise) and returns the largest
/// local memory (stack frame) one thread of them needs, in bytes. The context must be bound.
fn load_functions(m: &Loaded) -> Result<usize> {
    let mut count = 0u32;
    // SAFETY: m.raw is a live module; count is a valid out-pointer.
    unsafe { sys::cuModuleGetFunctionCount(&mut count, m.raw) }
        .result()
        .map_err(cuda("cuModuleGetFunctionCount"))?;
    let mut functions = vec![std::ptr::null_mut(); count as usize];
    // SAFETY: `functions` holds `count` writable handles.
    unsafe { sys::cuModuleEnumerateFunctions(functions.as_mut_ptr(), count, m.raw) }
        .result()
        .map_err(cuda("cuModuleEnumerateFunctions"))?;
    let mut frame = 0usize;
    for f in functions {
        // SAFETY: f is a function handle of the live module m.
        unsafe { sys::cuFuncLoad(f) }
            .result()
            .map_err(cuda("cuFuncLoad"))?;
        let mut local = 0i32;
        // SAFETY: f is loaded; local is a valid out-pointer.
        unsafe {
            sys::cuFuncGetAttribute(
                &mut local,
                sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES,
                f,
            )
        }
        .result()
        .map_err(cuda("cuFuncGetAttribute(LOCAL_SIZE_BYTES)"))?;
        frame = frame.max(usize::try_from(local).unwrap_or(0));
    }
    Ok(frame)
}

/// A steady reading of free memory ([`cuzk_vram::Vram::steady_reading`]), retried for up to a
/// second while our own buffers come and go.
fn steady(vram: &cuzk_vram::Vram) -> Result<Option<(cuzk_vram::MemInfo, u64)>> {
    let start = std::time::Instant::now();
    loop {
        if let Some(r) = vram.steady_reading()? {
            return Ok(Some(r));
        }
        if start.elapsed() > std::time::Duration::from_secs(1) {
            return Ok(None);
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// Raises the context's per-thread stack to `frame` bytes when it is smaller: the driver
/// reserves the local memory for every resident thread now, and no launch grows it later.
/// The context must be bound.
fn reserve_local_memory(frame: usize) -> Result<()> {
    let mut stack = 0usize;
    // SAFETY: a valid out-pointer; the bound context is queried.
    unsafe { sys::cuCtxGetLimit(&mut stack, sys::CUlimit::CU_LIMIT_STACK_SIZE) }
        .result()
        .map_err(cuda("cuCtxGetLimit(STACK_SIZE)"))?;
    if frame > stack {
        // SAFETY: sets a limit of the bound context; the driver waits for work in flight.
        unsafe { sys::cuCtxSetLimit(sys::CUlimit::CU_LIMIT_STACK_SIZE, frame) }
            .result()
            .map_err(cuda("cuCtxSetLimit(STACK_SIZE)"))?;
    }
    Ok(())
}

fn param_sizes(f: sys::CUfunction) -> Option<Vec<usize>> {
    let mut v = Vec::new();
    for i in 0..256 {
        let (mut off, mut size) = (0usize, 0usize);
        // SAFETY: f is a live function handle; out-pointers are valid locals.
        match unsafe { sys::cuFuncGetParamInfo(f, i, &mut off, &mut size) } {
            sys::CUresult::CUDA_SUCCESS => v.push(size),
            // Past the last parameter.
            sys::CUresult::CUDA_ERROR_INVALID_VALUE => return Some(v),
            // Older driver without the query: launch unchecked rather than fail.
            _ => return None,
        }
    }
    Some(v)
}

impl Gpu {
    /// Loads (once per device) `module` and returns kernel `func` from it.
    pub(crate) fn function(&self, module: &Module, func: &str) -> Result<Function> {
        let cache = &self.inner.modules;
        let key = (module.name, func.to_string());
        if let Some(f) = cache.functions.lock().get(&key) {
            return Ok(f.clone());
        }
        let m = self.loaded(module)?;
        let name = CString::new(func).map_err(|_| GpuError::InvalidLaunch {
            kernel: func.to_string(),
            reason: "name contains NUL".into(),
        })?;
        self.inner
            .ctx
            .bind_to_thread()
            .map_err(cuda("cuCtxSetCurrent"))?;
        // SAFETY: m.raw is a live module.
        let raw = unsafe { result::module::get_function(m.raw, name) }
            .map_err(cuda("cuModuleGetFunction"))?;
        let f = Function {
            raw,
            param_sizes: param_sizes(raw),
            _module: m,
        };
        cache.functions.lock().insert(key, f.clone());
        Ok(f)
    }

    /// Loads `module` once per device, with every function in it, and reserves the local
    /// memory of its largest stack frame. The driver would otherwise load each function and
    /// grow the local memory at a first launch, in the middle of a job, outside the budget:
    /// so the bytes are taken here and counted as the kernels'
    /// ([`cuzk_vram::Vram::add_kernel_bytes`]).
    fn loaded(&self, module: &Module) -> Result<Arc<Loaded>> {
        let image = module.fatbin()?;
        let mut mods = self.inner.modules.modules.lock();
        if let Some(m) = mods.get(module.name) {
            return Ok(m.clone());
        }
        let vram = &self.inner.vram;
        let before = steady(vram)?;
        let m = Arc::new(load_module(&self.inner.ctx, image)?);
        let frame = load_functions(&m)?;
        reserve_local_memory(frame)?;
        // Free memory fell by the driver's bytes and by our buffers allocated meanwhile.
        // (Without a steady reading on either side, after a second of allocation traffic, the
        // module's bytes stay uncounted: the memory watch then reports them as unexplained.)
        if let (Some((before, ours_before)), Some((after, ours_after))) = (before, steady(vram)?) {
            let taken = (before.free + ours_before).saturating_sub(after.free + ours_after);
            vram.add_kernel_bytes(taken);
        }
        mods.insert(module.name, m.clone());
        Ok(m)
    }

    /// Loads every module of `kernels` now (otherwise each loads on its first launch).
    pub fn load_modules(&self, kernels: &Kernels) -> Result<()> {
        if !kernels.built() {
            return Err(GpuError::KernelsNotBuilt);
        }
        for m in kernels.modules() {
            self.loaded(m)?;
        }
        Ok(())
    }

    /// Launches `module`/`func` on `stream` and checks the launch result. Argument count and
    /// sizes are checked against the kernel's signature (`cuFuncGetParamInfo`). Set
    /// `CUZK_SYNC_LAUNCHES=1` to also synchronize after each launch, so that a faulting kernel
    /// is named in the error instead of surfacing at a later call.
    ///
    /// # Safety
    /// The kernel must only access memory inside the buffers passed, given the other
    /// arguments and `cfg` (the caller checks lengths), and buffers it writes must not be
    /// read or written by anyone else until the stream has passed the kernel.
    pub unsafe fn launch(
        &self,
        stream: &Stream,
        module: &Module,
        func: &str,
        cfg: LaunchConfig,
        args: &[&dyn KernelArg],
    ) -> Result<()> {
        let invalid = |reason: String| GpuError::InvalidLaunch {
            kernel: format!("{}::{func}", module.name),
            reason,
        };
        if !Arc::ptr_eq(stream.cuda().context(), &self.inner.ctx) {
            return Err(invalid(format!(
                "stream {:?} belongs to another device",
                stream.name()
            )));
        }
        cfg.validate().map_err(invalid)?;
        let f = self.function(module, func)?;
        if let Some(sizes) = &f.param_sizes {
            let got: Vec<usize> = args.iter().map(|a| a.size()).collect();
            if &got != sizes {
                return Err(invalid(format!(
                    "kernel takes parameters of sizes {sizes:?}, got {got:?}"
                )));
            }
        }
        let mut params: Vec<*mut c_void> = args.iter().map(|a| a.param_ptr()).collect();
        crate::error::injected(Site::Launch, "cuLaunchKernel")?;
        self.inner
            .ctx
            .bind_to_thread()
            .map_err(cuda("cuCtxSetCurrent"))?;
        if cfg.shared_bytes > DEFAULT_MAX_DYNAMIC_SHARED {
            // Above 48 KiB of dynamic shared memory the function's limit must be raised first
            // (opt-in; the device maximum is checked by the driver, an error names the launch).
            let bytes = i32::try_from(cfg.shared_bytes)
                .map_err(|_| invalid(format!("{} bytes of shared memory", cfg.shared_bytes)))?;
            // SAFETY: f.raw is a live function of a loaded module, current context bound.
            unsafe {
                result::function::set_function_attribute(
                    f.raw,
                    sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    bytes,
                )
            }
            .map_err(cuda("cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)"))?;
        }
        // SAFETY: f is live; params point at values that live until this call returns (the
        // driver copies them); memory safety of the kernel itself is the caller's contract.
        unsafe {
            result::launch_kernel(
                f.raw,
                cfg.grid,
                cfg.block,
                cfg.shared_bytes,
                stream.cuda().cu_stream(),
                &mut params,
            )
        }
        .map_err(cuda("cuLaunchKernel"))?;
        if crate::Config::get().is_ok_and(|c| c.sync_launches) {
            stream.synchronize().map_err(|e| match e {
                GpuError::Cuda { name, .. } => GpuError::Cuda {
                    op: "kernel execution (CUZK_SYNC_LAUNCHES)",
                    name: format!("{name} in {}::{func}", module.name),
                },
                e => e,
            })?;
        }
        Ok(())
    }
}

/// Dynamic shared memory a kernel may use without raising its limit (48 KiB).
const DEFAULT_MAX_DYNAMIC_SHARED: u32 = 48 << 10;

/// Grid, block and dynamic shared memory of a launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchConfig {
    pub grid: (u32, u32, u32),
    pub block: (u32, u32, u32),
    pub shared_bytes: u32,
}

impl LaunchConfig {
    /// One thread per element, `block` threads per block (grid rounded up; kernels must
    /// bounds-check or grid-stride).
    pub fn for_elements(n: usize, block: u32) -> Result<Self> {
        let block = block.max(1);
        let blocks = n.div_ceil(block as usize).max(1);
        let grid = u32::try_from(blocks).map_err(|_| GpuError::InvalidLaunch {
            kernel: String::new(),
            reason: format!("{n} elements need too many blocks"),
        })?;
        Ok(Self {
            grid: (grid, 1, 1),
            block: (block, 1, 1),
            shared_bytes: 0,
        })
    }

    pub fn with_shared(mut self, bytes: u32) -> Self {
        self.shared_bytes = bytes;
        self
    }

    fn validate(&self) -> Result<(), String> {
        let (g, b) = (self.grid, self.block);
        if [g.0, g.1, g.2, b.0, b.1, b.2].contains(&0) {
            return Err(format!("zero dimension in grid {g:?} / block {b:?}"));
        }
        if b.0 as u64 * b.1 as u64 * b.2 as u64 > 1024 {
            return Err(format!("block {b:?} has more than 1024 threads"));
        }
        if g.1 > 65535 || g.2 > 65535 {
            return Err(format!("grid {g:?}: y and z are limited to 65535"));
        }
        Ok(())
    }
}

/// A value that can be passed as a kernel parameter. Implemented for scalars, device buffers
/// (passed as their device pointer) and the `#[repr(C)]` structs of `cuzk_shared.h`.
pub trait KernelArg {
    /// Pointer to the parameter's bytes, valid while `self` is borrowed.
    fn param_ptr(&self) -> *mut c_void;
    /// Size of the parameter in bytes, as the kernel sees it.
    fn size(&self) -> usize;
}

macro_rules! by_value_kernel_arg {
    ($($t:ty),* $(,)?) => {$(
        impl KernelArg for $t {
            fn param_ptr(&self) -> *mut std::ffi::c_void {
                (self as *const $t).cast_mut().cast()
            }
            fn size(&self) -> usize {
                std::mem::size_of::<$t>()
            }
        }
    )*};
}
pub(crate) use by_value_kernel_arg;

by_value_kernel_arg!(u8, i8, u16, i16, u32, i32, u64, i64, f32, f64);

impl<T: Pod> KernelArg for DeviceBuffer<T> {
    fn param_ptr(&self) -> *mut c_void {
        (self.device_ptr_ref() as *const u64).cast_mut().cast()
    }
    fn size(&self) -> usize {
        std::mem::size_of::<u64>()
    }
}

#[cfg(test)]
mod fit_tests {
    use super::KernelFit;

    const ARCHS: &str = "sm_80,sm_86,sm_89,sm_90,sm_100,sm_120";
    const PTX: &str = "compute_100";

    #[test]
    fn each_card_finds_its_machine_code_or_the_ptx() {
        let sass = |a: &str| KernelFit::Sass(a.to_string());
        assert_eq!(KernelFit::of(ARCHS, PTX, (9, 0)), sass("sm_90"));
        assert_eq!(KernelFit::of(ARCHS, PTX, (8, 7)), sass("sm_86"));
        assert_eq!(KernelFit::of(ARCHS, PTX, (10, 3)), sass("sm_100"));
        assert_eq!(KernelFit::of(ARCHS, PTX, (12, 1)), sass("sm_120"));
        assert_eq!(
            KernelFit::of(ARCHS, PTX, (13, 0)),
            KernelFit::Jit("compute_100".into())
        );
        assert_eq!(KernelFit::of(ARCHS, PTX, (7, 5)), KernelFit::Unsupported);
        // Without Blackwell targets, Blackwell cards JIT the embedded PTX.
        assert_eq!(
            KernelFit::of("sm_80,sm_90", "compute_80", (12, 0)),
            KernelFit::Jit("compute_80".into())
        );
        assert_eq!(
            KernelFit::of("sm_90", "compute_90", (8, 9)),
            KernelFit::Unsupported
        );
        assert_eq!(KernelFit::of("sm_90a", "", (9, 0)), sass("sm_90a"));
        assert_eq!(KernelFit::of("sm_90a", "", (10, 0)), KernelFit::Unsupported);
        assert_eq!(KernelFit::of("", "", (9, 0)), KernelFit::NotBuilt);
    }
}
