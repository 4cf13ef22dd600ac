//! Paired comparisons of two programs on a machine whose speed drifts.
//!
//! On a shared virtual machine the speed of the host moves by 20–30 % within
//! a minute, so two medians measured minutes apart compare two moments of
//! the host rather than two programs. A *pair* runs A and B back to back,
//! alternating which one goes first (A B, B A, A B, …), and keeps only the
//! ratio B/A of its two measurements; the verdict is the median of those
//! ratios, with
//!
//! - its distribution-free confidence interval: the order statistics
//!   `[x(l), x(n+1-l)]` of the sorted ratios for the largest `l` such that
//!   `P(Binomial(n, 1/2) < l) ≤ (1 − confidence) / 2` ([`median_interval`]);
//! - a two-sided sign test of how many pairs B won ([`sign_test`]).
//!
//! Neither assumes anything about the distribution of the times: drift,
//! outliers and skew only widen the interval. Used by `server-demo ab` (the
//! servers' CPU per request over alternating slices) and by the `paired`
//! command (any two commands that print a time), whose figures the README
//! cites.

use regex::Regex;
use serde::{Deserialize, Serialize};

/// The median (mean of the middle two for an even count); 0 for none.
///
/// ```
/// assert_eq!(paired::median(vec![3.0, 1.0, 2.0]), 2.0);
/// assert_eq!(paired::median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
/// ```
pub fn median(mut xs: Vec<f64>) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    }
}

/// P(X ≤ k) for X ~ Binomial(n, 1/2).
fn binomial_half_cdf(k: usize, n: usize) -> f64 {
    // In logarithms: 2^-n underflows past n = 1074.
    let ln_half_n = -(n as f64) * std::f64::consts::LN_2;
    let mut ln_choose = 0.0; // ln C(n, 0)
    let mut sum = 0.0;
    for i in 0..=k.min(n) {
        if i > 0 {
            ln_choose += ((n - i + 1) as f64).ln() - (i as f64).ln();
        }
        sum += (ln_choose + ln_half_n).exp();
    }
    sum.min(1.0)
}

/// Two-sided sign test: the probability, if each of `n` pairs is equally
/// likely to go either way, of a split at least as uneven as `below` of
/// `n`.
pub fn sign_test(below: usize, n: usize) -> f64 {
    if n == 0 {
        return 1.0;
    }
    let k = below.min(n - below);
    (2.0 * binomial_half_cdf(k, n)).min(1.0)
}

/// The distribution-free interval for the median of the population that
/// `sorted` (ascending) samples: `[x(l), x(n+1-l)]` for the largest `l`
/// with P(Binomial(n, 1/2) < l) ≤ (1 − confidence) / 2; none when even
/// the extremes do not reach the confidence (n < 6 at 95 %).
pub fn median_interval(sorted: &[f64], confidence: f64) -> Option<(f64, f64)> {
    let n = sorted.len();
    let tail = (1.0 - confidence) / 2.0;
    let l = (1..=n / 2)
        .take_while(|&l| binomial_half_cdf(l - 1, n) <= tail)
        .last()?;
    Some((sorted[l - 1], sorted[n - l]))
}

/// What a set of pairs says about B against A.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// Pairs counted (both measurements positive).
    pub pairs: usize,
    /// Median of A's measurements.
    pub a_median: f64,
    /// Median of B's measurements.
    pub b_median: f64,
    /// Median over the pairs of B/A.
    pub ratio: f64,
    /// Its distribution-free interval, if the pairs are enough for
    /// `confidence`.
    pub interval: Option<(f64, f64)>,
    /// The interval's confidence.
    pub confidence: f64,
    /// Pairs in which B measured less than A.
    pub b_lower: usize,
    /// Two-sided sign test of `b_lower` among the pairs that were not ties.
    pub sign_test_p: f64,
}

/// The verdict of `pairs` of measurements `(a, b)` (pairs with a
/// measurement that is not positive are left out).
///
/// ```
/// let pairs = [(10.0, 12.0), (11.0, 12.1), (9.0, 10.8), (10.0, 11.0)];
/// let v = paired::verdict(&pairs, 0.95);
/// assert_eq!(v.pairs, 4);
/// assert!((v.ratio - 1.15).abs() < 1e-9);
/// assert_eq!(v.b_lower, 0);
/// assert_eq!(v.interval, None); // four pairs cannot give 95 %
/// ```
pub fn verdict(pairs: &[(f64, f64)], confidence: f64) -> Verdict {
    let kept: Vec<(f64, f64)> = pairs
        .iter()
        .copied()
        .filter(|&(a, b)| a > 0.0 && b > 0.0)
        .collect();
    let mut ratios: Vec<f64> = kept.iter().map(|&(a, b)| b / a).collect();
    ratios.sort_by(f64::total_cmp);
    let b_lower = ratios.iter().filter(|&&r| r < 1.0).count();
    let ties = ratios.iter().filter(|&&r| r == 1.0).count();
    Verdict {
        pairs: kept.len(),
        a_median: median(kept.iter().map(|p| p.0).collect()),
        b_median: median(kept.iter().map(|p| p.1).collect()),
        ratio: median(ratios.clone()),
        interval: median_interval(&ratios, confidence),
        confidence,
        b_lower,
        sign_test_p: sign_test(b_lower, kept.len() - ties),
    }
}

/// Finds a program's measurement in its output.
#[derive(Clone, Debug)]
pub struct Measurement {
    pattern: Regex,
}

/// The default [`Measurement`]: the first number followed by a unit of time
/// (`ns`, `µs`/`us`, `ms` or `s`), as `sync_profile` prints
/// (`24.8 ms; sync collections …`, `227.2 ns per request …`).
pub const TIME: &str = r"(\d+(?:\.\d+)?)\s*(ns|µs|us|ms|s)\b";

impl Measurement {
    /// A measurement found by `pattern`: its first match, whose first
    /// capture group is the number and whose second, if the pattern has
    /// one, a unit of time (the number is then converted to seconds, so
    /// that two programs may print different units).
    pub fn new(pattern: &str) -> Result<Measurement, String> {
        let pattern = Regex::new(pattern).map_err(|e| e.to_string())?;
        if pattern.captures_len() < 2 {
            return Err(format!(
                "the pattern `{pattern}` has no capture group for the number"
            ));
        }
        Ok(Measurement { pattern })
    }

    /// The pattern.
    pub fn as_str(&self) -> &str {
        self.pattern.as_str()
    }

    /// Whether measurements are times in seconds (the pattern has a unit
    /// group).
    pub fn is_time(&self) -> bool {
        self.pattern.captures_len() > 2
    }

    /// The measurement in `output`, if the pattern matches and its number
    /// parses (and its unit, if any, is one of time).
    ///
    /// ```
    /// let m = paired::Measurement::new(paired::TIME).unwrap();
    /// assert_eq!(m.find("24.5 ms; sync collections 17"), Some(0.0245));
    /// assert_eq!(m.find("alive\n227 ns per request"), Some(227e-9));
    /// assert_eq!(m.find("3 steps"), None);
    /// ```
    pub fn find(&self, output: &str) -> Option<f64> {
        let captures = self.pattern.captures(output)?;
        let number: f64 = captures.get(1)?.as_str().parse().ok()?;
        let scale = match captures.get(2).map(|unit| unit.as_str()) {
            None => 1.0,
            Some("ns") => 1e-9,
            Some("µs" | "us") => 1e-6,
            Some("ms") => 1e-3,
            Some("s") => 1.0,
            Some(_) => return None,
        };
        Some(number * scale)
    }
}

/// The machine the numbers come from (recorded with every comparison:
/// ratios carry between runs on one machine only).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Machine {
    /// CPUs available to this process.
    pub cpus: usize,
    /// `model name` from /proc/cpuinfo.
    pub cpu_model: String,
    /// Kernel release.
    pub kernel: String,
    /// Total memory, MiB.
    pub memory_mib: u64,
}

/// This machine, from `/proc` (fields it cannot read say "unknown", or 0).
pub fn machine() -> Machine {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu_model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .and_then(|l| l.split_once(':'))
        .map_or("unknown CPU".to_owned(), |(_, m)| m.trim().to_owned());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map_or("unknown".to_owned(), |s| s.trim().to_owned());
    let memory_mib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kb| kb / 1024);
    Machine {
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        cpu_model,
        kernel,
        memory_mib,
    }
}

/// `x` for a reader: a time in seconds with the unit that suits it, else
/// the plain number.
///
/// ```
/// assert_eq!(paired::human(0.0173, true), "17.30 ms");
/// assert_eq!(paired::human(2.25e-7, true), "225.0 ns");
/// assert_eq!(paired::human(5877.0, false), "5877");
/// ```
pub fn human(x: f64, time: bool) -> String {
    if !time {
        return format!("{x:.4}")
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_owned();
    }
    let (value, unit) = match x.abs() {
        t if t >= 1.0 => (x, "s"),
        t if t >= 1e-3 => (x * 1e3, "ms"),
        t if t >= 1e-6 => (x * 1e6, "µs"),
        _ => (x * 1e9, "ns"),
    };
    let decimals = if value.abs() >= 100.0 { 1 } else { 2 };
    format!("{value:.decimals$} {unit}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binomial_tails_and_the_sign_test() {
        assert!((binomial_half_cdf(0, 10) - 1.0 / 1024.0).abs() < 1e-12);
        assert!((binomial_half_cdf(10, 10) - 1.0).abs() < 1e-12);
        // P(X ≤ 5) for n = 20 is 21,700 / 2^20.
        assert!((binomial_half_cdf(5, 20) - 21_700.0 / 1_048_576.0).abs() < 1e-12);
        // Far past 2^-1074 without underflow: symmetric around n/2.
        assert!((binomial_half_cdf(1000, 2000) - 0.5).abs() < 0.01);
        assert!((sign_test(0, 10) - 2.0 / 1024.0).abs() < 1e-12);
        assert_eq!(sign_test(10, 10), sign_test(0, 10));
        assert_eq!(sign_test(5, 10), 1.0);
        assert_eq!(sign_test(0, 0), 1.0);
    }

    #[test]
    fn the_median_interval_takes_the_binomial_order_statistics() {
        let xs: Vec<f64> = (1..=20).map(f64::from).collect();
        // n = 20: P(X ≤ 5) = 0.0207 ≤ 0.025 < P(X ≤ 6): x(6) .. x(15).
        assert_eq!(median_interval(&xs, 0.95), Some((6.0, 15.0)));
        // n = 6: only the extremes, P(X ≤ 0) = 1/64 ≤ 0.025.
        assert_eq!(median_interval(&xs[..6], 0.95), Some((1.0, 6.0)));
        // n = 5: 1/32 > 0.025, no interval.
        assert_eq!(median_interval(&xs[..5], 0.95), None);
    }

    #[test]
    fn median_of_none_odd_and_even_counts() {
        assert_eq!(median(vec![]), 0.0);
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
    }

    #[test]
    fn the_verdict_is_the_median_of_the_pairs_ratios_not_of_the_medians() {
        // The host sped up and slowed down between pairs: the medians of A
        // and B (20 and 30) come from different moments and read 1.5.
        let pairs = [(10.0, 11.0), (20.0, 30.0), (30.0, 33.0)];
        let v = verdict(&pairs, 0.95);
        assert_eq!(v.pairs, 3);
        assert!((v.ratio - 1.1).abs() < 1e-12);
        assert_eq!((v.a_median, v.b_median), (20.0, 30.0));
        assert_eq!(v.interval, None);
        assert_eq!(v.b_lower, 0);
        assert!((v.sign_test_p - 2.0 / 8.0).abs() < 1e-12);
        // Six pairs, all 20 % apart: the 95 % interval is the extremes.
        let six: Vec<(f64, f64)> = (1..=6)
            .map(|i| (f64::from(i), 1.25 * f64::from(i)))
            .collect();
        let v = verdict(&six, 0.95);
        assert_eq!(v.interval, Some((1.25, 1.25)));
        assert!((v.sign_test_p - 2.0 / 64.0).abs() < 1e-12);
    }

    #[test]
    fn pairs_without_a_positive_measurement_and_ties_are_left_out() {
        let v = verdict(&[(1.0, 1.0), (0.0, 2.0), (2.0, 1.0), (2.0, 3.0)], 0.95);
        assert_eq!(v.pairs, 3);
        assert_eq!(v.b_lower, 1);
        // One won and one lost among the two that were not ties.
        assert_eq!(v.sign_test_p, 1.0);
    }

    #[test]
    fn measurements_convert_their_units_and_need_a_number_group() {
        let time = Measurement::new(TIME).unwrap();
        assert_eq!(time.find("took 1.5 s"), Some(1.5));
        assert_eq!(time.find("12 us"), Some(12e-6));
        assert_eq!(time.find("12 µs"), Some(12e-6));
        assert_eq!(time.find("nothing here"), None);
        let plain = Measurement::new(r"rps=(\d+)").unwrap();
        assert_eq!(plain.find("load rps=5877 p99"), Some(5877.0));
        assert!(Measurement::new(r"rps=\d+").is_err());
        assert!(Measurement::new(r"(").is_err());
        let odd_unit = Measurement::new(r"(\d+) (\w+)").unwrap();
        assert_eq!(odd_unit.find("3 apples"), None);
    }
}
