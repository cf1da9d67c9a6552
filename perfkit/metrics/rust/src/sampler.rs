//! One call in N (a power of two): the decision costs a relaxed load, an add, a relaxed store and a mask.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::Error;

/// Says yes to one call in `every` (a power of two), starting with the first call.
///
/// The tick is a plain relaxed load and store, not an atomic read-modify-write: no locked instruction and no
/// cache-line ping-pong on the hot path. Threads calling one sampler at the same moment may lose a tick, so under
/// contention the rate is about one in `every` rather than exactly; on one thread it is exact.
#[derive(Debug)]
pub struct Sampler {
    mask: u64,
    tick: AtomicU64,
}

impl Sampler {
    /// `every` must be a power of two (1 = every call).
    pub fn new(every: u64) -> Result<Sampler, Error> {
        if !every.is_power_of_two() {
            return Err(Error(format!("sample_every must be a power of two (1, 2, 4, … 64, …), not {every}")));
        }
        Ok(Sampler { mask: every - 1, tick: AtomicU64::new(0) })
    }

    /// Whether this call is sampled.
    #[inline]
    pub fn sample(&self) -> bool {
        let n = self.tick.load(Ordering::Relaxed);
        self.tick.store(n.wrapping_add(1), Ordering::Relaxed);
        n & self.mask == 0
    }

    /// The `N` of "one call in N".
    pub fn every(&self) -> u64 {
        self.mask + 1
    }
}

impl Clone for Sampler {
    /// A sampler with the same rate and its own tick.
    fn clone(&self) -> Sampler {
        Sampler { mask: self.mask, tick: AtomicU64::new(0) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_in_n_starting_with_the_first() {
        for every in [1u64, 2, 8, 64, 1024] {
            let s = Sampler::new(every).unwrap();
            assert_eq!(s.every(), every);
            let picks: Vec<usize> = (0..4096).filter(|_| s.sample()).collect();
            assert_eq!(picks.len() as u64, 4096 / every, "every {every}");
            assert_eq!(picks[0], 0);
            assert!(picks.windows(2).all(|w| (w[1] - w[0]) as u64 == every));
        }
    }

    #[test]
    fn not_a_power_of_two() {
        for every in [0u64, 3, 6, 100] {
            let e = Sampler::new(every).unwrap_err();
            assert!(e.0.contains("power of two"), "{e}");
        }
    }

    #[test]
    fn about_one_in_n_across_threads() {
        let s = std::sync::Arc::new(Sampler::new(16).unwrap());
        let total: usize = (0..4)
            .map(|_| {
                let s = s.clone();
                std::thread::spawn(move || (0..100_000).filter(|_| s.sample()).count())
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|h| h.join().unwrap())
            .sum();
        // 400,000 calls: 25,000 on one thread; racing threads lose or repeat ticks, which moves this a little.
        assert!((10_000..=100_000).contains(&total), "{total}");
    }
}
