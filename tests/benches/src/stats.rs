//! Order statistics over the samples of a comparison.
//!
//! Every figure is a median: on a shared 2-core machine a mean is dragged by
//! whatever else ran during one round, a median is not. Ratios are taken per
//! round (each round runs every contender back to back, so a round's ratio
//! compares like with like) and then summarised by their median and
//! interquartile range, which shows how noisy the run was.

use std::time::Duration;

/// The spread of a set of values: median and interquartile range.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    pub median: f64,
    pub p25: f64,
    pub p75: f64,
}

impl Spread {
    /// The spread of `values`; `None` when there are none (or any is NaN).
    pub fn of(values: &[f64]) -> Option<Spread> {
        if values.is_empty() || values.iter().any(|value| value.is_nan()) {
            return None;
        }
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        Some(Spread {
            median: quantile(&sorted, 0.5),
            p25: quantile(&sorted, 0.25),
            p75: quantile(&sorted, 0.75),
        })
    }
}

/// The spread of `ours[i] / theirs[i]` (values measured in the same round
/// paired); `None` unless both have the same, non-zero length.
pub fn paired_ratio(ours: &[f64], theirs: &[f64]) -> Option<Spread> {
    if ours.len() != theirs.len() {
        return None;
    }
    let ratios: Vec<f64> = ours.iter().zip(theirs).map(|(a, b)| a / b).collect();
    Spread::of(&ratios)
}

/// The `q`-quantile (0 ≤ q ≤ 1) of sorted, non-empty `sorted`, linearly
/// interpolated between neighbouring ranks.
fn quantile(sorted: &[f64], q: f64) -> f64 {
    let rank = q.clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let below = rank.floor() as usize;
    let above = rank.ceil() as usize;
    let weight = rank - below as f64;
    sorted[below] * (1.0 - weight) + sorted[above] * weight
}

/// The time per operation of each round of one contender.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Samples {
    per_op: Vec<Duration>,
}

impl Samples {
    /// Records a round that ran `iterations` operations in `elapsed`.
    pub fn push(&mut self, elapsed: Duration, iterations: usize) {
        let iterations = u32::try_from(iterations.max(1)).unwrap_or(u32::MAX);
        self.per_op.push(elapsed / iterations);
    }

    /// How many rounds were recorded.
    pub fn len(&self) -> usize {
        self.per_op.len()
    }

    /// Whether no round was recorded.
    pub fn is_empty(&self) -> bool {
        self.per_op.is_empty()
    }

    /// The median time per operation (zero when empty).
    pub fn median(&self) -> Duration {
        Spread::of(&self.seconds())
            .map(|spread| Duration::from_secs_f64(spread.median))
            .unwrap_or_default()
    }

    /// This contender's time over `peer`'s, round by round; `None` unless
    /// both have the same, non-zero number of rounds.
    pub fn ratio_to(&self, peer: &Samples) -> Option<Spread> {
        paired_ratio(&self.seconds(), &peer.seconds())
    }

    fn seconds(&self) -> Vec<f64> {
        self.per_op.iter().map(Duration::as_secs_f64).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples(micros: &[u64]) -> Samples {
        let mut samples = Samples::default();
        for &value in micros {
            samples.push(Duration::from_micros(value * 10), 10);
        }
        samples
    }

    #[test]
    fn spread_interpolates_quartiles_and_ignores_order() {
        let spread = Spread::of(&[4.0, 1.0, 3.0, 2.0, 5.0]).expect("values");
        assert_eq!(spread.median, 3.0);
        assert_eq!(spread.p25, 2.0);
        assert_eq!(spread.p75, 4.0);
        let even = Spread::of(&[1.0, 2.0, 3.0, 4.0]).expect("values");
        assert_eq!(even.median, 2.5);
        assert_eq!(even.p25, 1.75);
    }

    #[test]
    fn spread_of_nothing_or_nan_is_none() {
        assert_eq!(Spread::of(&[]), None);
        assert_eq!(Spread::of(&[1.0, f64::NAN]), None);
    }

    #[test]
    fn samples_are_per_operation_and_their_median_resists_an_outlier() {
        let samples = samples(&[10, 11, 500, 9, 10]);
        assert_eq!(samples.len(), 5);
        assert_eq!(samples.median(), Duration::from_micros(10));
        assert_eq!(Samples::default().median(), Duration::ZERO);
    }

    #[test]
    fn ratios_are_paired_round_by_round() {
        // Round 3 was slow for both sides: the paired ratio stays 2.
        let ours = samples(&[20, 22, 200]);
        let peer = samples(&[10, 11, 100]);
        let spread = ours.ratio_to(&peer).expect("same rounds");
        assert!((spread.median - 2.0).abs() < 1e-9, "{spread:?}");
        assert!((spread.p25 - 2.0).abs() < 1e-9 && (spread.p75 - 2.0).abs() < 1e-9);
    }

    #[test]
    fn paired_ratios_of_plain_values() {
        let spread = paired_ratio(&[2.0, 4.0, 9.0], &[1.0, 2.0, 3.0]).expect("paired");
        assert_eq!(spread.median, 2.0);
        assert_eq!(paired_ratio(&[1.0], &[1.0, 2.0]), None);
    }

    #[test]
    fn ratios_need_the_same_number_of_rounds() {
        assert_eq!(samples(&[1, 2]).ratio_to(&samples(&[1])), None);
        assert_eq!(Samples::default().ratio_to(&Samples::default()), None);
    }
}
