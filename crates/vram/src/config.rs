//! Budget configuration: safety margins and optional caps, with env-var overrides.

use crate::error::{Result, VramError};

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// How the device and pinned-host budgets are computed.
///
/// Device budget = `min(free_at_start - margin, vram_limit)` where
/// `margin = max(margin_floor, margin_fraction * total_memory)`.
/// The margin absorbs what the budget cannot see: the CUDA context, module images, allocation
/// granularity (cuMemAlloc rounds to 2 MiB pages for large buffers), other processes' growth.
#[derive(Debug, Clone, PartialEq)]
pub struct BudgetConfig {
    /// Absolute margin kept free on the device. Default 512 MiB (`CUZK_VRAM_MARGIN`).
    pub margin_floor: u64,
    /// Margin as a fraction of the device's total memory. Default 0.05 (`CUZK_VRAM_MARGIN_FRACTION`).
    pub margin_fraction: f64,
    /// Optional cap, e.g. 16 GiB to emulate a smaller card on an H200 (`CUZK_VRAM_LIMIT`).
    pub vram_limit: Option<u64>,
    /// Pinned host memory budget. Default: half of physical RAM (`CUZK_PINNED_LIMIT`).
    pub pinned_limit: Option<u64>,
}

pub const DEFAULT_MARGIN_FLOOR: u64 = 512 * MIB;
pub const DEFAULT_MARGIN_FRACTION: f64 = 0.05;

impl Default for BudgetConfig {
    fn default() -> Self {
        Self {
            margin_floor: DEFAULT_MARGIN_FLOOR,
            margin_fraction: DEFAULT_MARGIN_FRACTION,
            vram_limit: None,
            pinned_limit: None,
        }
    }
}

impl BudgetConfig {
    /// Defaults overridden by `CUZK_VRAM_LIMIT`, `CUZK_VRAM_MARGIN`, `CUZK_VRAM_MARGIN_FRACTION`,
    /// `CUZK_PINNED_LIMIT` where `get` has them (sizes like `16GiB`, `512MiB`, `1.5G`, `4096`);
    /// the process's values come from `cuzk_gpu::Config`, read once.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let mut c = Self::default();
        let size = |key: &'static str| -> Result<Option<u64>> {
            match get(key) {
                Some(v) if !v.trim().is_empty() => {
                    parse_size(&v)
                        .map(Some)
                        .map_err(|reason| VramError::Config {
                            key,
                            value: v.clone(),
                            reason,
                        })
                }
                _ => Ok(None),
            }
        };
        c.vram_limit = size("CUZK_VRAM_LIMIT")?;
        c.pinned_limit = size("CUZK_PINNED_LIMIT")?;
        if let Some(m) = size("CUZK_VRAM_MARGIN")? {
            c.margin_floor = m;
        }
        const KEY: &str = "CUZK_VRAM_MARGIN_FRACTION";
        if let Some(v) = get(KEY).filter(|v| !v.trim().is_empty()) {
            let bad = |reason: &str| VramError::Config {
                key: KEY,
                value: v.clone(),
                reason: reason.into(),
            };
            let f: f64 = v.trim().parse().map_err(|_| bad("not a number"))?;
            if !(0.0..1.0).contains(&f) {
                return Err(bad("must be in [0, 1)"));
            }
            c.margin_fraction = f;
        }
        Ok(c)
    }

    /// Safety margin for a device with `total_mem` bytes.
    pub fn margin(&self, total_mem: u64) -> u64 {
        self.margin_floor
            .max((self.margin_fraction * total_mem as f64) as u64)
    }

    /// The device budget given what `cuMemGetInfo` reported at start.
    pub fn device_budget(&self, free_at_start: u64, total_mem: u64) -> u64 {
        let b = free_at_start.saturating_sub(self.margin(total_mem));
        self.vram_limit.map_or(b, |l| b.min(l))
    }

    /// The pinned host memory budget (`physical_ram` as read from the OS, if known).
    pub fn pinned_budget(&self, physical_ram: Option<u64>) -> u64 {
        self.pinned_limit
            .unwrap_or_else(|| physical_ram.map_or(8 * GIB, |r| r / 2))
    }
}

/// Parses `16GiB`, `16G`, `512 MiB`, `1.5GB`, `4096`, `64k` (binary units; `B` optional).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    if num.is_empty() {
        return Err("expected a number, e.g. 16GiB".into());
    }
    let n: f64 = num.parse().map_err(|_| format!("bad number {num:?}"))?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => MIB,
        "g" | "gb" | "gib" => GIB,
        "t" | "tb" | "tib" => 1 << 40,
        u => return Err(format!("unknown unit {u:?} (use B, KiB, MiB, GiB, TiB)")),
    };
    let v = n * mult as f64;
    if !v.is_finite() || v >= u64::MAX as f64 {
        return Err("too large".into());
    }
    Ok(v as u64)
}

/// Physical RAM from /proc/meminfo (Linux); `None` elsewhere.
pub fn physical_ram() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = s.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("16GiB"), Ok(16 * GIB));
        assert_eq!(parse_size(" 16 G "), Ok(16 * GIB));
        assert_eq!(parse_size("512MiB"), Ok(512 * MIB));
        assert_eq!(parse_size("1.5gb"), Ok(3 * GIB / 2));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64k"), Ok(65536));
        assert!(parse_size("GiB").is_err());
        assert!(parse_size("12 parsecs").is_err());
        assert!(parse_size("1.2.3G").is_err());
    }

    #[test]
    fn budget_formula() {
        let c = BudgetConfig::default();
        // 140 GiB card: 5% = 7 GiB > 512 MiB floor.
        assert_eq!(c.margin(140 * GIB), 7 * GIB);
        assert_eq!(c.device_budget(139 * GIB, 140 * GIB), 132 * GIB);
        // 8 GiB card: 5% = 409.6 MiB < floor.
        assert_eq!(c.margin(8 * GIB), 512 * MIB);
        // Less free than the margin: zero, not underflow.
        assert_eq!(c.device_budget(100 * MIB, 8 * GIB), 0);
        let capped = BudgetConfig {
            vram_limit: Some(16 * GIB),
            ..c.clone()
        };
        assert_eq!(capped.device_budget(139 * GIB, 140 * GIB), 16 * GIB);
        assert_eq!(capped.device_budget(10 * GIB, 140 * GIB), 3 * GIB);
        assert_eq!(c.pinned_budget(Some(64 * GIB)), 32 * GIB);
    }

    #[test]
    fn env_overrides() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(kk, _)| *kk == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        let c = BudgetConfig::from_lookup(env(&[
            ("CUZK_VRAM_LIMIT", "16GiB"),
            ("CUZK_VRAM_MARGIN", "1GiB"),
            ("CUZK_VRAM_MARGIN_FRACTION", "0.1"),
            ("CUZK_PINNED_LIMIT", "2G"),
        ]))
        .unwrap();
        assert_eq!(
            c,
            BudgetConfig {
                margin_floor: GIB,
                margin_fraction: 0.1,
                vram_limit: Some(16 * GIB),
                pinned_limit: Some(2 * GIB)
            }
        );
        assert_eq!(
            BudgetConfig::from_lookup(env(&[])).unwrap(),
            BudgetConfig::default()
        );
        let e = BudgetConfig::from_lookup(env(&[("CUZK_VRAM_LIMIT", "lots")])).unwrap_err();
        assert!(
            matches!(
                e,
                VramError::Config {
                    key: "CUZK_VRAM_LIMIT",
                    ..
                }
            ),
            "{e}"
        );
        assert!(BudgetConfig::from_lookup(env(&[("CUZK_VRAM_MARGIN_FRACTION", "1.5")])).is_err());
    }
}
