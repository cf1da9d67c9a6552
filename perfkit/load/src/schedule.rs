//! Pacing: when each request of a connection is meant to go out.
//!
//! The wrk2 model: a total rate `R` is spread evenly over `C` connections. Connection `i`
//! sends its `k`-th request at `start + (i + k * C) / R` seconds, i.e. every connection runs
//! at `R / C` requests per second and the connections are interleaved so that the aggregate
//! stream is evenly spaced at `1 / R`. All arithmetic is in `f64` seconds, so any positive
//! rate works with any number of connections (no integer division to 0 or to infinity).

use std::time::{Duration, Instant};

/// The send schedule of one connection.
#[derive(Clone, Copy, Debug)]
pub enum Pacer {
    /// Constant rate: request `k` is intended at `start + offset + k * interval`.
    Rate {
        start: Instant,
        /// Seconds from `start` to the first request of this connection.
        offset: f64,
        /// Seconds between two requests of this connection.
        interval: f64,
    },
    /// Closed loop (`--max`): the next request goes out as soon as the previous one is done.
    Max,
}

impl Pacer {
    /// Schedule of connection `index` (0-based) of `connections` sharing `total_rate` req/s.
    pub fn rate(start: Instant, total_rate: f64, index: usize, connections: usize) -> Pacer {
        assert!(total_rate > 0.0 && total_rate.is_finite(), "rate must be positive");
        assert!(connections > 0 && index < connections);
        Pacer::Rate {
            start,
            offset: index as f64 / total_rate,
            interval: connections as f64 / total_rate,
        }
    }

    /// Rate of this connection in requests per second (`None` in closed-loop mode).
    pub fn per_connection_rate(&self) -> Option<f64> {
        match self {
            Pacer::Rate { interval, .. } => Some(1.0 / interval),
            Pacer::Max => None,
        }
    }

    /// Intended send time of request `k` (`None` in closed-loop mode: "now").
    pub fn intended(&self, k: u64) -> Option<Instant> {
        match *self {
            Pacer::Rate { start, offset, interval } => {
                Some(start + Duration::from_secs_f64(offset + k as f64 * interval))
            }
            Pacer::Max => None,
        }
    }
}

/// Global request number of request `k` of connection `index` (unique across connections,
/// used as the JSON-RPC id in WebSocket mode).
pub fn request_number(index: usize, connections: usize, k: u64) -> u64 {
    index as u64 + k * connections as u64
}

/// Which connections (global indices) thread `thread` of `threads` runs.
pub fn connections_of_thread(thread: usize, threads: usize, connections: usize) -> Vec<usize> {
    (0..connections).filter(|i| i % threads == thread).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_rate_many_connections() {
        let t0 = Instant::now();
        let p = Pacer::rate(t0, 1.0, 3, 7);
        assert_eq!(p.intended(0).unwrap() - t0, Duration::from_secs(3));
        assert_eq!(p.intended(1).unwrap() - t0, Duration::from_secs(10));
        assert!((p.per_connection_rate().unwrap() - 1.0 / 7.0).abs() < 1e-12);
    }

    #[test]
    fn aggregate_is_evenly_spaced() {
        let t0 = Instant::now();
        let c = 4;
        let mut times: Vec<Duration> = (0..c)
            .flat_map(|i| {
                let p = Pacer::rate(t0, 1000.0, i, c);
                (0..10).map(move |k| p.intended(k).unwrap() - t0)
            })
            .collect();
        times.sort();
        for (n, t) in times.iter().enumerate() {
            let want = n as f64 / 1000.0;
            assert!((t.as_secs_f64() - want).abs() < 1e-9, "{n}: {t:?}");
        }
    }

    #[test]
    fn split_over_threads() {
        assert_eq!(connections_of_thread(1, 3, 7), vec![1, 4]);
        let all: usize = (0..3).map(|t| connections_of_thread(t, 3, 7).len()).sum();
        assert_eq!(all, 7);
    }
}
