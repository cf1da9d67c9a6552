//! Pacing: when each request of each connection is meant to go out.
//!
//! One logical run has a rate profile `r(t)` (a constant, or `--stages`: steps and linear ramps)
//! and `C` connections. Its arrivals are defined in "request units": `Λ(t) = ∫₀ᵗ r` is the number
//! of requests due by `t`, and an arrival at unit `u` is intended at `Λ⁻¹(u)`.
//!
//! - Constant arrivals (the wrk2 model): connection `i` takes units `i, i + C, i + 2C, …`, so the
//!   aggregate is evenly spaced and each connection runs at `r / C`.
//! - Poisson arrivals: connection `i` draws its own unit gaps from `C · Exp(1)` with a generator
//!   seeded by `(seed, i)`; the superposition of `C` such streams is a unit-rate Poisson process,
//!   and the time change `Λ⁻¹` turns it into a Poisson process of rate `r(t)`.
//!
//! Either way a connection's schedule depends only on `(profile, arrivals, seed, i, C)`, which is
//! what lets `--segment I/N` split one run over processes exactly: the union of the segments'
//! schedules is the full schedule.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rand_distr::{Distribution, Exp1};
use rand_pcg::Pcg64Mcg;
use serde::{Deserialize, Serialize};

/// One piece of the rate profile: `duration` seconds going linearly from `from` to `to` req/s.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Stage {
    #[serde(rename = "from_rate")]
    pub from: f64,
    #[serde(rename = "to_rate")]
    pub to: f64,
    #[serde(rename = "duration_s")]
    pub duration: f64,
}

impl Stage {
    fn requests(&self) -> f64 {
        (self.from + self.to) / 2.0 * self.duration
    }
}

/// Mean rate of a sequence of stages (requests due ÷ total duration).
pub fn mean_rate(stages: &[Stage]) -> f64 {
    stages.iter().map(Stage::requests).sum::<f64>() / stages.iter().map(|s| s.duration).sum::<f64>()
}

/// Parse `--stages`: comma-separated `RATE@DURATION` (a step) or `FROM..TO@DURATION` (a ramp).
pub fn parse_stages(text: &str) -> Result<Vec<Stage>, String> {
    let mut stages = Vec::new();
    for part in text.split(',').map(str::trim) {
        let bad = |why: &str| format!("invalid stage {part:?} in --stages: {why} (use e.g. 1000@10s or 1000..5000@30s)");
        let (rates, dur) = part.split_once('@').ok_or_else(|| bad("no @DURATION"))?;
        let duration = crate::cli::parse_duration(dur).map_err(|e| bad(&e))?.as_secs_f64();
        if duration <= 0.0 {
            return Err(bad("the duration must be > 0"));
        }
        let rate = |s: &str| -> Result<f64, String> {
            let v: f64 = s.trim().parse().map_err(|_| bad("the rate is not a number"))?;
            if v.is_finite() && v >= 0.0 {
                Ok(v)
            } else {
                Err(bad("rates must be >= 0"))
            }
        };
        let (from, to) = match rates.split_once("..") {
            Some((a, b)) => (rate(a)?, rate(b)?),
            None => (rate(rates)?, rate(rates)?),
        };
        stages.push(Stage { from, to, duration });
    }
    if stages.iter().all(|s| s.requests() <= 0.0) {
        return Err("--stages must send at least one request (every stage has rate 0)".into());
    }
    Ok(stages)
}

/// The rate profile of a whole run, warm-up included, as a cumulative-request function.
#[derive(Debug)]
pub struct Profile {
    stages: Vec<Stage>,
    /// `starts[j]`: seconds from the schedule start to stage `j`; `cum[j]`: requests due before it.
    starts: Vec<f64>,
    cum: Vec<f64>,
}

impl Profile {
    pub fn new(stages: Vec<Stage>) -> Profile {
        let (mut starts, mut cum) = (vec![0.0], vec![0.0]);
        for s in &stages {
            starts.push(starts.last().unwrap() + s.duration);
            cum.push(cum.last().unwrap() + s.requests());
        }
        Profile { stages, starts, cum }
    }

    pub fn constant(rate: f64, duration: f64) -> Profile {
        Profile::new(vec![Stage { from: rate, to: rate, duration }])
    }

    pub fn stages(&self) -> &[Stage] {
        &self.stages
    }

    /// Seconds from the schedule start to the end of the last stage.
    pub fn duration(&self) -> f64 {
        *self.starts.last().unwrap()
    }

    /// Requests due in `[0, t)` seconds (Λ).
    pub fn due_by(&self, t: f64) -> f64 {
        let j = self.starts.partition_point(|s| *s <= t).saturating_sub(1).min(self.stages.len() - 1);
        let s = &self.stages[j];
        let tau = (t - self.starts[j]).clamp(0.0, s.duration);
        self.cum[j] + s.from * tau + (s.to - s.from) / (2.0 * s.duration) * tau * tau
    }

    /// Seconds from the start at which unit `u` is due (Λ⁻¹); `None` past the last stage.
    pub fn time_of(&self, u: f64) -> Option<f64> {
        let j = self.cum.partition_point(|c| *c <= u);
        if j == 0 || j >= self.cum.len() {
            return None;
        }
        let j = j - 1;
        let s = &self.stages[j];
        let delta = u - self.cum[j];
        let a = (s.to - s.from) / (2.0 * s.duration);
        // a·τ² + from·τ = delta, in the form that stays exact when a → 0 or from = 0.
        let root = (s.from * s.from + 4.0 * a * delta).max(0.0).sqrt();
        let tau = if delta > 0.0 { 2.0 * delta / (s.from + root) } else { 0.0 };
        Some(self.starts[j] + tau.min(s.duration))
    }
}

/// How arrivals are spread over time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arrivals {
    Constant,
    Poisson { seed: u64 },
}

/// The send schedule of one connection.
#[derive(Debug)]
pub enum Pacer {
    Scheduled(Schedule),
    /// Closed loop (`--max`): the next request goes out as soon as the previous one is done.
    Max,
}

/// Intended send times of one connection of a scheduled run.
#[derive(Debug)]
pub struct Schedule {
    start: Instant,
    profile: Arc<Profile>,
    next_unit: f64,
    gaps: Gaps,
}

#[derive(Debug)]
enum Gaps {
    Even(f64),
    Poisson { mean: f64, rng: Pcg64Mcg },
}

impl Schedule {
    /// Connection `index` of `connections`, the run's schedule starting at `start`.
    pub fn new(start: Instant, profile: Arc<Profile>, arrivals: Arrivals, index: usize, connections: usize) -> Schedule {
        assert!(connections > 0 && index < connections);
        let c = connections as f64;
        let mut gaps = match arrivals {
            Arrivals::Constant => Gaps::Even(c),
            Arrivals::Poisson { seed } => {
                // One independent stream per connection: the state mixes the seed and the index.
                let state = ((seed as u128) << 64) | (index as u128).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                Gaps::Poisson { mean: c, rng: Pcg64Mcg::new(state | 1) }
            }
        };
        let next_unit = match &mut gaps {
            Gaps::Even(_) => index as f64,
            Gaps::Poisson { mean, rng } => {
                let e: f64 = Exp1.sample(rng);
                *mean * e
            }
        };
        Schedule { start, profile, next_unit, gaps }
    }

    /// The next intended send time, or `None` when the profile is over.
    pub fn next(&mut self) -> Option<Instant> {
        let t = self.profile.time_of(self.next_unit)?;
        self.next_unit += match &mut self.gaps {
            Gaps::Even(step) => *step,
            Gaps::Poisson { mean, rng } => {
                let e: f64 = Exp1.sample(rng);
                *mean * e
            }
        };
        Some(self.start + Duration::from_secs_f64(t))
    }
}

/// Global request number of request `k` of connection `index` (unique across connections,
/// used as the JSON-RPC id in WebSocket mode).
pub fn request_number(index: usize, connections: usize, k: u64) -> u64 {
    index as u64 + k * connections as u64
}

/// Parse `--segment I/N` (0 ≤ I < N).
pub fn parse_segment(text: &str) -> Result<(usize, usize), String> {
    let bad = || format!("invalid --segment {text:?}: use I/N with 0 <= I < N, e.g. 0/2");
    let (i, n) = text.split_once('/').ok_or_else(bad)?;
    let (i, n): (usize, usize) = (i.trim().parse().map_err(|_| bad())?, n.trim().parse().map_err(|_| bad())?);
    if n == 0 || i >= n {
        return Err(bad());
    }
    Ok((i, n))
}

/// The connections (global indices) segment `index` of `count` runs.
pub fn connections_of_segment(index: usize, count: usize, connections: usize) -> Vec<usize> {
    (0..connections).filter(|j| j % count == index).collect()
}

/// Split a process's connections over its threads, round-robin.
pub fn connections_of_thread(thread: usize, threads: usize, mine: &[usize]) -> Vec<usize> {
    mine.iter().enumerate().filter(|(n, _)| n % threads == thread).map(|(_, j)| *j).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn times(p: &Arc<Profile>, arrivals: Arrivals, t0: Instant, conns: &[usize], c: usize) -> Vec<Duration> {
        let mut all = Vec::new();
        for &i in conns {
            let mut s = Schedule::new(t0, p.clone(), arrivals, i, c);
            while let Some(t) = s.next() {
                all.push(t - t0);
            }
        }
        all.sort();
        all
    }

    #[test]
    fn small_rate_many_connections() {
        let t0 = Instant::now();
        let mut s = Schedule::new(t0, Arc::new(Profile::constant(1.0, 100.0)), Arrivals::Constant, 3, 7);
        assert_eq!(s.next().unwrap() - t0, Duration::from_secs(3));
        assert_eq!(s.next().unwrap() - t0, Duration::from_secs(10));
    }

    #[test]
    fn aggregate_is_evenly_spaced_and_ends_with_the_profile() {
        let t0 = Instant::now();
        let p = Arc::new(Profile::constant(1000.0, 0.01));
        let got = times(&p, Arrivals::Constant, t0, &[0, 1, 2, 3], 4);
        assert_eq!(got.len(), 10);
        for (n, t) in got.iter().enumerate() {
            assert!((t.as_secs_f64() - n as f64 / 1000.0).abs() < 1e-9, "{n}: {t:?}");
        }
    }

    #[test]
    fn segments_together_are_the_full_schedule() {
        let t0 = Instant::now();
        let p = Arc::new(Profile::new(parse_stages("300@1s,100..900@2s").unwrap()));
        for arrivals in [Arrivals::Constant, Arrivals::Poisson { seed: 42 }] {
            let c = 7;
            let full = times(&p, arrivals, t0, &(0..c).collect::<Vec<_>>(), c);
            for n in [2, 3, 7] {
                let mut union: Vec<Duration> = (0..n)
                    .flat_map(|i| times(&p, arrivals, t0, &connections_of_segment(i, n, c), c))
                    .collect();
                union.sort();
                assert_eq!(union, full, "{arrivals:?} split in {n}");
            }
        }
    }

    #[test]
    fn stages_follow_steps_and_ramps() {
        let p = Profile::new(parse_stages("1000@1s,0@1s,0..2000@2s").unwrap());
        assert_eq!(p.duration(), 4.0);
        assert!((p.due_by(1.0) - 1000.0).abs() < 1e-9);
        assert!((p.due_by(2.0) - 1000.0).abs() < 1e-9);
        assert!((p.due_by(4.0) - 3000.0).abs() < 1e-9);
        // The pause sends nothing: the 1001st request is due at the start of the ramp or later.
        assert!(p.time_of(1000.0).unwrap() >= 2.0);
        // In the ramp the rate at t is 1000·(t−2): the density of arrivals follows it.
        let t0 = Instant::now();
        let got = times(&Arc::new(p), Arrivals::Constant, t0, &[0], 1);
        assert_eq!(got.len(), 3000);
        let in_ramp_first_half = got.iter().filter(|t| (2.0..3.0).contains(&t.as_secs_f64())).count();
        assert!((in_ramp_first_half as i64 - 500).abs() <= 1, "{in_ramp_first_half}");
        for w in got.windows(2) {
            assert!(w[0] <= w[1]);
        }
    }

    #[test]
    fn poisson_gaps_have_exponential_mean_and_variance() {
        let t0 = Instant::now();
        let rate = 10_000.0;
        let p = Arc::new(Profile::constant(rate, 10.0));
        let got = times(&p, Arrivals::Poisson { seed: 7 }, t0, &[0, 1, 2, 3], 4);
        let gaps: Vec<f64> = got.windows(2).map(|w| (w[1] - w[0]).as_secs_f64()).collect();
        assert!(gaps.len() > 99_000, "{}", gaps.len());
        let n = gaps.len() as f64;
        let mean = gaps.iter().sum::<f64>() / n;
        let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / n;
        let want = 1.0 / rate;
        assert!((mean / want - 1.0).abs() < 0.05, "mean {mean}");
        assert!((var / (want * want) - 1.0).abs() < 0.05, "variance {var}");
        // Same seed, same schedule; another seed, another one.
        assert_eq!(got, times(&p, Arrivals::Poisson { seed: 7 }, t0, &[0, 1, 2, 3], 4));
        assert_ne!(got, times(&p, Arrivals::Poisson { seed: 8 }, t0, &[0, 1, 2, 3], 4));
    }

    #[test]
    fn bad_stages_and_segments_are_refused() {
        for bad in ["", "1000", "1000@", "x@1s", "-5@1s", "10..@1s", "0@5s", "100@0s"] {
            assert!(parse_stages(bad).is_err(), "{bad:?}");
        }
        for bad in ["", "1", "2/2", "0/0", "a/b", "-1/2"] {
            assert!(parse_segment(bad).is_err(), "{bad:?}");
        }
        assert_eq!(parse_segment("1/3").unwrap(), (1, 3));
    }

    #[test]
    fn split_over_threads() {
        let mine = connections_of_segment(1, 2, 10);
        assert_eq!(mine, vec![1, 3, 5, 7, 9]);
        assert_eq!(connections_of_thread(1, 2, &mine), vec![3, 7]);
    }
}
