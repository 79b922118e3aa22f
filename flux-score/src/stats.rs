//! Intervals and tests for research use. Which one is used where:
//!
//! * a proportion (accuracy, pass rate of a group): the **Wilson score interval** at 95 %
//!   ([`wilson`]), which stays inside [0, 1] and behaves at 0/n and n/n, unlike the normal
//!   approximation;
//! * a mean of per-instance scores in [0, 1] (partial credit, pass@k): a **percentile
//!   bootstrap** over instances ([`bootstrap_mean`], 2,000 resamples);
//! * two runs on the same instances: a **paired bootstrap** of the difference of means
//!   ([`paired_bootstrap`]) and the **exact McNemar test** on the discordant pairs
//!   ([`mcnemar_exact`]).
//!
//! The bootstrap's generator is seeded (SplitMix64, fixed seed), so a report is reproducible
//! to the last digit.

/// z for a two-sided 95 % interval.
pub const Z95: f64 = 1.959_963_984_540_054;
/// Bootstrap resamples.
pub const RESAMPLES: usize = 2000;
const SEED: u64 = 0x5eed_f1a5_2026_0001;

/// Wilson score interval (95 %) of `k` successes in `n` trials; `(0, 1)` when `n == 0`.
pub fn wilson(k: usize, n: usize) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let (k, n) = (k as f64, n as f64);
    let p = k / n;
    let z2 = Z95 * Z95;
    let denom = 1.0 + z2 / n;
    let centre = (p + z2 / (2.0 * n)) / denom;
    let half = Z95 * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / denom;
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

/// SplitMix64: small, fast, good enough to draw resample indices.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let pos = q * (sorted.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

pub fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// Mean and 95 % percentile-bootstrap interval of `v`; `(0, 0, 0)` when empty.
pub fn bootstrap_mean(v: &[f64]) -> (f64, f64, f64) {
    if v.is_empty() {
        return (0.0, 0.0, 0.0);
    }
    let mut rng = Rng(SEED);
    let n = v.len();
    let mut means: Vec<f64> = (0..RESAMPLES)
        .map(|_| (0..n).map(|_| v[rng.below(n)]).sum::<f64>() / n as f64)
        .collect();
    means.sort_by(f64::total_cmp);
    (
        mean(v),
        percentile(&means, 0.025),
        percentile(&means, 0.975),
    )
}

/// Mean of `b - a` over pairs and its 95 % paired-bootstrap interval (pairs resampled
/// together).
pub fn paired_bootstrap(a: &[f64], b: &[f64]) -> (f64, f64, f64) {
    let d: Vec<f64> = a.iter().zip(b).map(|(x, y)| y - x).collect();
    bootstrap_mean(&d)
}

/// Two-sided exact McNemar p-value from the discordant counts: `b` pairs where only the
/// first run passed, `c` where only the second did (binomial test of min(b, c) in b + c at ½).
pub fn mcnemar_exact(b: usize, c: usize) -> f64 {
    let n = b + c;
    if n == 0 {
        return 1.0;
    }
    let k = b.min(c);
    // P(X <= k) for X ~ Bin(n, 1/2), in log space for large n.
    let ln_half_n = -(n as f64) * std::f64::consts::LN_2;
    let mut ln_c = 0.0f64; // ln C(n, 0)
    let mut cdf = 0.0;
    for i in 0..=k {
        if i > 0 {
            ln_c += ((n - i + 1) as f64).ln() - (i as f64).ln();
        }
        cdf += (ln_c + ln_half_n).exp();
    }
    (2.0 * cdf).min(1.0)
}

/// Unbiased pass@k of one instance with `c` correct of `n` samples (Chen et al. 2021):
/// 1 − C(n−c, k) / C(n, k).
pub fn pass_at_k(n: usize, c: usize, k: usize) -> f64 {
    if k == 0 || n == 0 || k > n {
        return 0.0;
    }
    if n - c < k {
        return 1.0;
    }
    let mut prod = 1.0;
    for i in (n - c + 1)..=n {
        prod *= 1.0 - k as f64 / i as f64;
    }
    1.0 - prod
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn wilson_known_values() {
        // 8 of 10: (0.4902, 0.9433) — the textbook Wilson interval.
        let (lo, hi) = wilson(8, 10);
        assert!(
            close(lo, 0.4902, 1e-4) && close(hi, 0.9433, 1e-4),
            "{lo} {hi}"
        );
        let (lo, hi) = wilson(0, 10);
        assert!(close(lo, 0.0, 1e-12) && close(hi, 0.2775, 1e-4), "{hi}");
        let (lo, hi) = wilson(10, 10);
        assert!(close(lo, 0.7225, 1e-4) && close(hi, 1.0, 1e-12), "{lo}");
        assert_eq!(wilson(0, 0), (0.0, 1.0));
    }

    #[test]
    fn mcnemar_known_values() {
        // b = 1, c = 9: 2 * P(X <= 1 | n = 10) = 2 * 11/1024.
        assert!(close(mcnemar_exact(1, 9), 22.0 / 1024.0, 1e-12));
        assert_eq!(mcnemar_exact(5, 5), 1.0);
        assert_eq!(mcnemar_exact(0, 0), 1.0);
        assert!(mcnemar_exact(0, 2000) < 1e-300 || mcnemar_exact(0, 2000) == 0.0);
    }

    #[test]
    fn pass_at_k_known_values() {
        assert_eq!(pass_at_k(5, 0, 1), 0.0);
        assert_eq!(pass_at_k(5, 5, 3), 1.0);
        assert!(close(pass_at_k(5, 2, 1), 0.4, 1e-12));
        // 1 - C(3,2)/C(5,2) = 1 - 3/10.
        assert!(close(pass_at_k(5, 2, 2), 0.7, 1e-12));
        assert_eq!(pass_at_k(3, 3, 4), 0.0, "k > n is undefined: 0");
    }

    #[test]
    fn bootstrap_is_reproducible_and_brackets_the_mean() {
        let v: Vec<f64> = (0..50)
            .map(|i| if i % 4 == 0 { 1.0 } else { 0.25 })
            .collect();
        let (m, lo, hi) = bootstrap_mean(&v);
        assert!(lo < m && m < hi, "{lo} {m} {hi}");
        assert_eq!(bootstrap_mean(&v), (m, lo, hi), "seeded");
        let same = vec![0.5; 20];
        assert_eq!(bootstrap_mean(&same), (0.5, 0.5, 0.5));
        let (d, lo, hi) = paired_bootstrap(&[0.0, 0.0, 1.0, 0.0], &[1.0, 1.0, 1.0, 1.0]);
        assert!(close(d, 0.75, 1e-12) && lo <= d && d <= hi);
    }
}
