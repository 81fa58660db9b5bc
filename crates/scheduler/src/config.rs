//! Engine configuration.

use cuzk_groth16::BackendChoice;
use cuzk_vram::BudgetConfig;

const GIB: u64 = 1 << 30;

/// How many GPU workers each device runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workers {
    /// What the device's memory admits for the keys loaded on it, at most
    /// [`Workers::AUTO_MAX`]: a second worker takes jobs only while the staging room holds one
    /// job's witness beside another's a, b, c. A worker the room cannot serve would hold a job
    /// at the staging gate that another device could run.
    Auto,
    /// Exactly this many per device. Admission keeps any number safe: jobs wait for room.
    Fixed(usize),
}

impl Workers {
    /// Two, since one proof's CPU phases already overlap another's device phases.
    pub const AUTO_MAX: usize = 2;

    /// Worker threads started per device.
    pub fn threads(self) -> usize {
        match self {
            Workers::Auto => Self::AUTO_MAX,
            Workers::Fixed(n) => n.max(1),
        }
    }
}

/// How an [`crate::Engine`] is set up. `Default` is what a user gets with no settings: every
/// GPU of the host (the CPU when there is none), the workers each device's memory admits (at
/// most two), self-check on.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Which prover: the GPUs when present (auto), the CPU, or the GPUs only.
    pub backend: BackendChoice,
    /// GPU ordinals to use; `None`: all of them.
    pub gpus: Option<Vec<usize>>,
    /// Splits each physical device into this many logical devices, each with an equal share
    /// of its budget (tests of multi-device scheduling on one GPU or on the CPU).
    pub split: usize,
    /// GPU workers per device.
    pub workers_per_device: Workers,
    /// Witnesses read or computed ahead of the workers at once (queued jobs, in queue order,
    /// while host memory leaves room for one more job beside them); 0: each worker makes its
    /// own.
    pub read_ahead: usize,
    /// Keeps a key's circuit (its A, B, C) on each device whose memory has room for it beside
    /// the key and the staging of two proofs, so that the device makes a, b, c from the
    /// witness: the host then neither evaluates them nor copies them over the bus. `false`:
    /// the host's witness map always, the device memory left to key points and staging.
    pub witness_map_on_device: bool,
    /// Device budgets of the GPUs (`CUZK_VRAM_LIMIT` and the margins; `CUZK_PINNED_LIMIT`).
    pub vram: BudgetConfig,
    /// Simulated device memory of the CPU backend (per device before any split).
    pub cpu_device_memory: u64,
    /// Host memory the engine may charge to keys, circuits and jobs in flight, beside the
    /// GPUs' pinned budget; `None`: the physical RAM less a margin (the larger of 4 GiB and
    /// 10%) less that pinned budget.
    pub host_memory: Option<u64>,
    /// Verify every proof with the pairing check before returning it.
    pub self_check: bool,
    /// Spans kept for [`crate::Engine::timeline`].
    pub timeline_spans: usize,
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            backend: BackendChoice::Auto,
            gpus: None,
            split: 1,
            workers_per_device: Workers::Auto,
            read_ahead: 2,
            witness_map_on_device: true,
            vram: BudgetConfig::default(),
            cpu_device_memory: 16 * GIB,
            host_memory: None,
            self_check: true,
            timeline_spans: 200_000,
        }
    }
}

impl EngineConfig {
    /// The defaults with the device budgets of the process's configuration
    /// (`CUZK_VRAM_LIMIT`, ... read once by [`cuzk_gpu::Config::get`]).
    pub fn from_env() -> Result<Self, cuzk_vram::VramError> {
        Ok(Self {
            vram: cuzk_gpu::Config::get()?.budget.clone(),
            ..Self::default()
        })
    }

    /// The host memory budget beside `pinned` bytes of pinned budget: the configured one, or
    /// physical RAM less a margin less `pinned` (at least 1 GiB: a larger job is then refused
    /// with the gate's error, not admitted).
    pub fn host_budget(&self, pinned: u64) -> u64 {
        self.host_memory.unwrap_or_else(|| {
            let ram = cuzk_vram::physical_ram().unwrap_or(16 * GIB);
            ram.saturating_sub((ram / 10).max(4 * GIB))
                .saturating_sub(pinned)
                .max(GIB)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The default host budget leaves the GPUs' pinned budget out; a configured one is kept.
    #[test]
    fn host_budget_leaves_the_pinned_budget_out() {
        let c = EngineConfig::default();
        let all = c.host_budget(0);
        assert_eq!(c.host_budget(GIB), all - GIB);
        assert_eq!(c.host_budget(u64::MAX), GIB);
        let set = EngineConfig {
            host_memory: Some(3 * GIB),
            ..EngineConfig::default()
        };
        assert_eq!(set.host_budget(GIB), 3 * GIB);
    }
}
