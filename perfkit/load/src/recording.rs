//! Recording: per-thread HdrHistograms of corrected and uncorrected latency plus outcome counts.
//!
//! Every worker thread owns one [`Recorder`]; they are merged at the end of the run. Values are
//! microseconds, the histograms track 1 µs … 1 h with 3 significant digits.

use std::sync::Arc;
use std::time::Instant;

use hdrhistogram::Histogram;

use crate::metrics::LiveMetrics;

/// Lowest and highest trackable latency in microseconds, and the precision.
pub const HIST_LOW_US: u64 = 1;
pub const HIST_HIGH_US: u64 = 3_600_000_000;
pub const HIST_SIGFIG: u8 = 3;

/// A new empty latency histogram with the kit's layout (1 µs … 1 h, 3 significant digits).
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(HIST_LOW_US, HIST_HIGH_US, HIST_SIGFIG).expect("valid bounds")
}

/// What happened to one request (or connection attempt).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    Status2xx,
    Status3xx,
    Status4xx,
    Status5xx,
    /// A final status outside 200..=599.
    OtherStatus,
    /// WebSocket JSON-RPC: a response with `result`.
    RpcOk,
    /// WebSocket JSON-RPC: a response with `error`.
    RpcError,
    ConnectError,
    ReadError,
    WriteError,
    Timeout,
    /// WebSocket JSON-RPC: a message whose id matches no call in flight (or no id at all).
    Unmatched,
}

impl Outcome {
    pub const ALL: [Outcome; 12] = [
        Outcome::Status2xx,
        Outcome::Status3xx,
        Outcome::Status4xx,
        Outcome::Status5xx,
        Outcome::OtherStatus,
        Outcome::RpcOk,
        Outcome::RpcError,
        Outcome::ConnectError,
        Outcome::ReadError,
        Outcome::WriteError,
        Outcome::Timeout,
        Outcome::Unmatched,
    ];

    /// The name used in JSON output and as the `outcome` metric label.
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Status2xx => "2xx",
            Outcome::Status3xx => "3xx",
            Outcome::Status4xx => "4xx",
            Outcome::Status5xx => "5xx",
            Outcome::OtherStatus => "other_status",
            Outcome::RpcOk => "rpc_ok",
            Outcome::RpcError => "rpc_error",
            Outcome::ConnectError => "connect_error",
            Outcome::ReadError => "read_error",
            Outcome::WriteError => "write_error",
            Outcome::Timeout => "timeout",
            Outcome::Unmatched => "unmatched",
        }
    }

    pub fn index(self) -> usize {
        Outcome::ALL.iter().position(|o| *o == self).unwrap()
    }

    /// True for outcomes that are a response from the server (latency is recorded).
    pub fn is_response(self) -> bool {
        matches!(
            self,
            Outcome::Status2xx
                | Outcome::Status3xx
                | Outcome::Status4xx
                | Outcome::Status5xx
                | Outcome::OtherStatus
                | Outcome::RpcOk
                | Outcome::RpcError
        )
    }

    /// Outcome of an HTTP status code.
    pub fn of_status(status: u16) -> Outcome {
        match status {
            200..=299 => Outcome::Status2xx,
            300..=399 => Outcome::Status3xx,
            400..=499 => Outcome::Status4xx,
            500..=599 => Outcome::Status5xx,
            _ => Outcome::OtherStatus,
        }
    }
}

/// Measurement window: only requests intended at or after `measure_start` and completed before
/// `end` are recorded (the warm-up is excluded).
#[derive(Clone, Copy, Debug)]
pub struct Window {
    pub measure_start: Instant,
    pub end: Instant,
}

/// Histograms and counters of one worker thread.
pub struct Recorder {
    pub corrected: Histogram<u64>,
    pub uncorrected: Histogram<u64>,
    pub counts: [u64; Outcome::ALL.len()],
    pub bytes_read: u64,
    window: Option<Window>,
    live: Option<Arc<LiveMetrics>>,
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder::new(None, None)
    }
}

impl Recorder {
    /// A recorder; with `window = None` everything is recorded (used when merging).
    pub fn new(window: Option<Window>, live: Option<Arc<LiveMetrics>>) -> Recorder {
        Recorder {
            corrected: new_histogram(),
            uncorrected: new_histogram(),
            counts: [0; Outcome::ALL.len()],
            bytes_read: 0,
            window,
            live,
        }
    }

    /// Record a response to a request intended at `intended`, sent at `sent`, complete at `done`.
    pub fn response(&mut self, outcome: Outcome, intended: Instant, sent: Instant, done: Instant, bytes: u64) {
        if let Some(w) = self.window {
            if intended < w.measure_start || done > w.end {
                return;
            }
        }
        let corrected = done.saturating_duration_since(intended);
        let uncorrected = done.saturating_duration_since(sent);
        self.record_latency_us(
            outcome,
            corrected.as_micros().min(u64::MAX as u128) as u64,
            uncorrected.as_micros().min(u64::MAX as u128) as u64,
        );
        self.bytes_read += bytes;
        if let Some(live) = &self.live {
            live.observe(outcome, corrected.as_secs_f64(), uncorrected.as_secs_f64());
        }
    }

    /// Record raw latencies (microseconds) without any window check.
    pub fn record_latency_us(&mut self, outcome: Outcome, corrected_us: u64, uncorrected_us: u64) {
        self.corrected.saturating_record(corrected_us);
        self.uncorrected.saturating_record(uncorrected_us);
        self.counts[outcome.index()] += 1;
    }

    /// Count an error (no latency) that happened at `at`.
    pub fn error(&mut self, outcome: Outcome, at: Instant) {
        if let Some(w) = self.window {
            if at < w.measure_start || at > w.end {
                return;
            }
        }
        self.counts[outcome.index()] += 1;
        if let Some(live) = &self.live {
            live.count(outcome);
        }
    }

    pub fn count(&self, outcome: Outcome) -> u64 {
        self.counts[outcome.index()]
    }

    /// Number of responses (any status, any JSON-RPC result).
    pub fn responses(&self) -> u64 {
        Outcome::ALL.iter().filter(|o| o.is_response()).map(|o| self.count(*o)).sum()
    }

    /// Number of failed requests and connection attempts.
    pub fn errors(&self) -> u64 {
        Outcome::ALL.iter().filter(|o| !o.is_response()).map(|o| self.count(*o)).sum()
    }

    /// Add another recorder's histograms and counts to this one (lossless).
    pub fn merge(&mut self, other: &Recorder) {
        self.corrected.add(&other.corrected).expect("same layout");
        self.uncorrected.add(&other.uncorrected).expect("same layout");
        for (a, b) in self.counts.iter_mut().zip(other.counts.iter()) {
            *a += *b;
        }
        self.bytes_read += other.bytes_read;
    }
}

/// Merge the per-thread recorders into one.
pub fn merge_all<'a>(recorders: impl IntoIterator<Item = &'a Recorder>) -> Recorder {
    let mut total = Recorder::default();
    for r in recorders {
        total.merge(r);
    }
    total
}
