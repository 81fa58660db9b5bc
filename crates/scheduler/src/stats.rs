//! Quantiles of sorted samples for the benches' and simulations' reports. One rank rule
//! (nearest rank) for all of them, so a p50 or p95 means the same in every report.

/// The `q`-quantile of `sorted` (ascending) by nearest rank: the smallest sample with at least
/// a `q` share of the samples at or below it, so always one of the samples. `q` outside
/// [0, 1] is clamped (0 gives the least sample, 1 the greatest). None for an empty slice.
pub fn quantile<T: Copy>(sorted: &[T], q: f64) -> Option<T> {
    if sorted.is_empty() {
        return None;
    }
    // `as usize` saturates (a NaN `q` becomes 0), and the clamp keeps the rank in 1..=len.
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    Some(sorted[rank - 1])
}

/// The nearest-rank median: for an even count, the lower of the two middle samples.
pub fn median<T: Copy>(sorted: &[T]) -> Option<T> {
    quantile(sorted, 0.5)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn empty_has_no_quantile() {
        assert_eq!(quantile::<f64>(&[], 0.5), None);
        assert_eq!(median::<u32>(&[]), None);
    }

    #[test]
    fn quantile_takes_the_nearest_rank() {
        let v: Vec<u32> = (1..=100).collect();
        assert_eq!(quantile(&v, 0.5), Some(50));
        assert_eq!(quantile(&v, 0.95), Some(95));
        assert_eq!(quantile(&v, 0.99), Some(99));
        assert_eq!(quantile(&v, 0.951), Some(96));
        assert_eq!(quantile(&v, 1.0), Some(100));
        assert_eq!(quantile(&v, 0.0), Some(1));
        assert_eq!(quantile(&[7.5], 0.99), Some(7.5));
    }

    #[test]
    fn quantile_clamps_q() {
        let v = [1, 2, 3];
        assert_eq!(quantile(&v, -1.0), Some(1));
        assert_eq!(quantile(&v, 2.0), Some(3));
        assert_eq!(quantile(&v, f64::NAN), Some(1));
    }

    #[test]
    fn median_is_the_lower_middle() {
        assert_eq!(median(&[1, 2, 3]), Some(2));
        assert_eq!(median(&[1, 2, 3, 4]), Some(2));
        let d = [Duration::from_millis(3), Duration::from_millis(8)];
        assert_eq!(median(&d), Some(Duration::from_millis(3)));
    }
}
