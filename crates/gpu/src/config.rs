//! The environment knobs, read once per process into one typed configuration
//! (the README's "Configuration" table lists each).

use std::sync::OnceLock;

use cuzk_vram::{BudgetConfig, VramError};

/// Every `CUZK_*` setting that changes what the prover does. Read from the environment once
/// ([`Config::get`]); [`Config::from_lookup`] builds one from any key lookup (tests).
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Device and pinned-host budgets (`CUZK_VRAM_LIMIT`, `CUZK_VRAM_MARGIN`,
    /// `CUZK_VRAM_MARGIN_FRACTION`, `CUZK_PINNED_LIMIT`).
    pub budget: BudgetConfig,
    /// `CUZK_SYNC_LAUNCHES=1`: wait for every kernel after its launch, so a fault names it.
    pub sync_launches: bool,
    /// `CUZK_MSM_WINDOW`: the Pippenger window bits of every new MSM context (cuzk-msm
    /// ignores values outside its range).
    pub msm_window: Option<u32>,
    /// `CUZK_NTT_SPLIT`: NTT pass bits in DIF order, e.g. `10,8,6` (cuzk-ntt uses them for the
    /// size they sum to when every pass is in its kernels' range).
    pub ntt_split: Option<Vec<u32>>,
    /// `CUZK_NTT_ROOTS_LG`: cap on the order of the NTT roots table (0 turns it off).
    pub ntt_roots_lg: Option<u32>,
}

impl Config {
    /// The process's configuration, read from the environment on first use. A malformed
    /// budget size is an error (every later call returns it too); the other knobs ignore a
    /// value that does not parse.
    pub fn get() -> Result<&'static Config, VramError> {
        static CONFIG: OnceLock<Result<Config, VramError>> = OnceLock::new();
        CONFIG
            .get_or_init(|| Self::from_lookup(|k| std::env::var(k).ok()))
            .as_ref()
            .map_err(Clone::clone)
    }

    /// The configuration `get` returns, from `get(key)` instead of the environment.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, VramError> {
        let number = |key: &str| get(key).and_then(|v| v.trim().parse::<u32>().ok());
        Ok(Self {
            budget: BudgetConfig::from_lookup(&get)?,
            sync_launches: get("CUZK_SYNC_LAUNCHES").is_some_and(|v| v != "0"),
            msm_window: number("CUZK_MSM_WINDOW"),
            ntt_split: get("CUZK_NTT_SPLIT").and_then(|v| parse_list(&v)),
            ntt_roots_lg: number("CUZK_NTT_ROOTS_LG"),
        })
    }
}

/// `a,b,c` as numbers; `None` when empty or any field is not a number.
fn parse_list(v: &str) -> Option<Vec<u32>> {
    let bits: Vec<u32> = v
        .split(',')
        .map(|f| f.trim().parse::<u32>().ok())
        .collect::<Option<_>>()?;
    (!bits.is_empty()).then_some(bits)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(pairs: &[(&str, &str)]) -> Result<Config, VramError> {
        Config::from_lookup(|k| {
            pairs
                .iter()
                .find(|(key, _)| *key == k)
                .map(|(_, v)| v.to_string())
        })
    }

    #[test]
    fn reads_every_knob() {
        let c = of(&[
            ("CUZK_VRAM_LIMIT", "16GiB"),
            ("CUZK_SYNC_LAUNCHES", "1"),
            ("CUZK_MSM_WINDOW", " 16 "),
            ("CUZK_NTT_SPLIT", "10, 8,6"),
            ("CUZK_NTT_ROOTS_LG", "24"),
        ])
        .unwrap();
        assert_eq!(c.budget.vram_limit, Some(16 << 30));
        assert!(c.sync_launches);
        assert_eq!(c.msm_window, Some(16));
        assert_eq!(c.ntt_split, Some(vec![10, 8, 6]));
        assert_eq!(c.ntt_roots_lg, Some(24));
        let d = of(&[]).unwrap();
        assert_eq!(d.budget, BudgetConfig::default());
        assert!(!d.sync_launches && d.msm_window.is_none() && d.ntt_split.is_none());
        assert!(!of(&[("CUZK_SYNC_LAUNCHES", "0")]).unwrap().sync_launches);
    }

    #[test]
    fn malformed_values() {
        assert!(of(&[("CUZK_VRAM_LIMIT", "lots")]).is_err());
        for bad in ["", "10,,6", "10,8,x", "10;8;6"] {
            assert_eq!(
                of(&[("CUZK_NTT_SPLIT", bad)]).unwrap().ntt_split,
                None,
                "{bad:?}"
            );
        }
        assert_eq!(of(&[("CUZK_MSM_WINDOW", "x")]).unwrap().msm_window, None);
    }
}
