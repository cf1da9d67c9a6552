//! Recording: per-thread HdrHistograms and outcome counts, with the accounting invariant.
//!
//! Every request intended inside the measured window `[measure_start, end)` ends in exactly one
//! [`Outcome`], so `intended == sum of outcomes`. Requests are filed by their intended time: into
//! the run's total, their stage, and their time-series interval. Latencies are microseconds; the
//! histograms track 1 µs … 1 h with 3 significant digits (interval histograms resize as needed).

use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::transport::ConnectTimes;
use crate::usage::EngineUsage;

/// Lowest and highest trackable latency in microseconds, and the precision.
pub const HIST_LOW_US: u64 = 1;
pub const HIST_HIGH_US: u64 = 3_600_000_000;
pub const HIST_SIGFIG: u8 = 3;

/// A new empty latency histogram with the kit's layout (1 µs … 1 h, 3 significant digits).
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(HIST_LOW_US, HIST_HIGH_US, HIST_SIGFIG).expect("valid bounds")
}

/// A small histogram that grows to the largest value recorded (for the many interval histograms).
pub fn new_growing_histogram() -> Histogram<u64> {
    let mut h = Histogram::new_with_bounds(HIST_LOW_US, 2, HIST_SIGFIG).expect("valid bounds");
    h.auto(true);
    h
}

/// How one intended request ended.
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
    /// The connection for this request could not be opened.
    ConnectError,
    ReadError,
    WriteError,
    /// No answer within `--timeout` (recorded at its timeout latency).
    Timeout,
    /// In flight or never sent when the run stopped (recorded at its lower bound, stop − intended).
    Unfinished,
    /// HTTP/2: the server reset the stream (`RST_STREAM`), or refused it.
    H2Reset,
    /// HTTP/2: the request was refused because the connection is going away (`GOAWAY`).
    H2GoAway,
}

impl Outcome {
    pub const ALL: [Outcome; 14] = [
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
        Outcome::Unfinished,
        Outcome::H2Reset,
        Outcome::H2GoAway,
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
            Outcome::Unfinished => "unfinished",
            Outcome::H2Reset => "h2_reset",
            Outcome::H2GoAway => "h2_goaway",
        }
    }

    pub fn from_name(name: &str) -> Option<Outcome> {
        Outcome::ALL.into_iter().find(|o| o.name() == name)
    }

    pub fn index(self) -> usize {
        self as usize
    }

    /// An answer from the server (any status, any JSON-RPC result or error).
    pub fn is_response(self) -> bool {
        self.index() <= Outcome::RpcError.index()
    }

    /// A transport failure, a timeout, or an HTTP/2 stream reset or `GOAWAY` refusal (the `errors` of the result).
    pub fn is_error(self) -> bool {
        matches!(
            self,
            Outcome::ConnectError
                | Outcome::ReadError
                | Outcome::WriteError
                | Outcome::Timeout
                | Outcome::H2Reset
                | Outcome::H2GoAway
        )
    }

    /// A successful answer: 2xx, 3xx or a JSON-RPC result.
    pub fn is_success(self) -> bool {
        matches!(self, Outcome::Status2xx | Outcome::Status3xx | Outcome::RpcOk)
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

/// Where outcomes go as they happen (the live metrics endpoint); recording does not know which.
pub trait Observer: Send + Sync {
    /// One request ended; latencies in seconds where it has them.
    fn observe(&self, outcome: Outcome, corrected_s: Option<f64>, uncorrected_s: Option<f64>);
    /// The same, with the request's label id when the run has `--requests` (default: ignore it).
    fn observe_labeled(&self, label: Option<usize>, outcome: Outcome, corrected_s: Option<f64>, uncorrected_s: Option<f64>) {
        let _ = label;
        self.observe(outcome, corrected_s, uncorrected_s);
    }
}

/// Histograms and counts of a set of requests (a run, a stage).
#[derive(Clone)]
pub struct Tally {
    pub corrected: Histogram<u64>,
    pub uncorrected: Histogram<u64>,
    pub counts: [u64; Outcome::ALL.len()],
    pub bytes_read: u64,
}

impl Default for Tally {
    fn default() -> Self {
        Tally { corrected: new_histogram(), uncorrected: new_histogram(), counts: [0; Outcome::ALL.len()], bytes_read: 0 }
    }
}

impl Tally {
    pub fn count(&self, outcome: Outcome) -> u64 {
        self.counts[outcome.index()]
    }
    fn sum(&self, pick: fn(Outcome) -> bool) -> u64 {
        Outcome::ALL.iter().filter(|o| pick(**o)).map(|o| self.count(*o)).sum()
    }
    /// Requests accounted for (= intended in the window).
    pub fn intended(&self) -> u64 {
        self.counts.iter().sum()
    }
    pub fn responses(&self) -> u64 {
        self.sum(Outcome::is_response)
    }
    pub fn errors(&self) -> u64 {
        self.sum(Outcome::is_error)
    }
    /// Requests without a successful answer (errors, timeouts, unfinished, 4xx/5xx, JSON-RPC errors).
    pub fn failed(&self) -> u64 {
        self.intended() - self.sum(Outcome::is_success)
    }
    /// A tally whose histograms start small and grow to the largest value recorded (per label).
    pub fn growing() -> Tally {
        Tally { corrected: new_growing_histogram(), uncorrected: new_growing_histogram(), ..Tally::default() }
    }

    pub fn merge(&mut self, other: &Tally) {
        self.corrected.add(&other.corrected).expect("same layout");
        self.uncorrected.add(&other.uncorrected).expect("same layout");
        for (a, b) in self.counts.iter_mut().zip(other.counts.iter()) {
            *a += *b;
        }
        self.bytes_read += other.bytes_read;
    }
    fn add(&mut self, outcome: Outcome, corrected_us: Option<u64>, uncorrected_us: Option<u64>, bytes: u64) {
        if let Some(v) = corrected_us {
            self.corrected.saturating_record(v);
        }
        if let Some(v) = uncorrected_us {
            self.uncorrected.saturating_record(v);
        }
        self.counts[outcome.index()] += 1;
        self.bytes_read += bytes;
    }
}

/// One time-series interval: outcome counts and corrected latency of the requests intended in it.
#[derive(Clone)]
pub struct Interval {
    pub corrected: Histogram<u64>,
    pub counts: [u64; Outcome::ALL.len()],
}

impl Default for Interval {
    fn default() -> Self {
        Interval { corrected: new_growing_histogram(), counts: [0; Outcome::ALL.len()] }
    }
}

impl Interval {
    pub fn merge(&mut self, other: &Interval) {
        self.corrected.add(&other.corrected).expect("growing histogram");
        for (a, b) in self.counts.iter_mut().zip(other.counts.iter()) {
            *a += *b;
        }
    }
}

/// Connection set-up over the run: TCP connect and TLS handshake times (µs).
#[derive(Clone)]
pub struct Connects {
    pub tcp: Histogram<u64>,
    pub tls: Histogram<u64>,
    /// TLS handshakes that resumed an earlier session.
    pub resumed: u64,
}

impl Default for Connects {
    fn default() -> Self {
        Connects { tcp: new_histogram(), tls: new_histogram(), resumed: 0 }
    }
}

impl Connects {
    pub fn merge(&mut self, other: &Connects) {
        self.tcp.add(&other.tcp).expect("same layout");
        self.tls.add(&other.tls).expect("same layout");
        self.resumed += other.resumed;
    }
}

/// The measured window and how requests in it are filed.
#[derive(Clone, Debug)]
pub struct Window {
    pub measure_start: Instant,
    /// No request intended at or after `end` is sent.
    pub end: Instant,
    /// When the engine stops waiting for answers (`end` + `--drain`).
    pub stop: Instant,
    /// End of each measured stage (the last one is `end`).
    pub stage_ends: Vec<Instant>,
    pub interval: Duration,
    /// Record unfinished requests in the corrected histogram at their lower bound.
    pub record_unfinished: bool,
}

/// Everything one worker thread recorded.
#[derive(Default)]
pub struct Recorder {
    pub total: Tally,
    /// One tally per stage when the run has more than one.
    pub stages: Vec<Tally>,
    /// One tally per request label (`--requests`), indexed by label id; `label_names` name them.
    pub labels: Vec<Tally>,
    pub label_names: Vec<String>,
    pub intervals: Vec<Interval>,
    /// Actual send − intended send, for scheduled runs (the engine's own lateness).
    pub send_lateness: Option<Histogram<u64>>,
    /// WebSocket messages that answer no call (no id, or an id never sent).
    pub unmatched: u64,
    /// WebSocket answers to calls already counted as timeouts.
    pub late_answers: u64,
    pub connects: Connects,
    /// CPU use of the engine's thread(s).
    pub engine: EngineUsage,
    window: Option<Window>,
    observer: Option<Arc<dyn Observer>>,
    /// The label of the request being filed (set by its connection's driver).
    label: Option<usize>,
}

fn micros(d: Duration) -> u64 {
    d.as_micros().min(u64::MAX as u128) as u64
}

impl Recorder {
    /// A recorder for one worker of a run.
    pub fn new(window: Window, scheduled: bool, observer: Option<Arc<dyn Observer>>) -> Recorder {
        let stages = if window.stage_ends.len() > 1 { vec![Tally::default(); window.stage_ends.len()] } else { vec![] };
        Recorder {
            stages,
            send_lateness: scheduled.then(new_histogram),
            window: Some(window),
            observer,
            ..Recorder::default()
        }
    }

    pub fn window(&self) -> Option<&Window> {
        self.window.as_ref()
    }

    /// Is a request intended at `intended` part of the measurement?
    pub fn counts_for(&self, intended: Instant) -> bool {
        self.window.as_ref().is_none_or(|w| intended >= w.measure_start && intended < w.end)
    }

    /// A request intended at `intended` went out at `sent`.
    pub fn sent(&mut self, intended: Instant, sent: Instant) {
        if self.counts_for(intended) {
            if let Some(h) = &mut self.send_lateness {
                h.saturating_record(micros(sent.saturating_duration_since(intended)));
            }
        }
    }

    /// An answer arrived at `done`.
    pub fn completed(&mut self, outcome: Outcome, intended: Instant, sent: Instant, done: Instant, bytes: u64) {
        self.file(outcome, intended, Some(done - intended), Some(done.saturating_duration_since(sent)), bytes);
    }

    /// The request failed without an answer (connect, read or write error).
    pub fn failed(&mut self, outcome: Outcome, intended: Instant) {
        self.file(outcome, intended, None, None, 0);
    }

    /// No answer by `at` = sent + timeout: recorded at that latency.
    pub fn timed_out(&mut self, intended: Instant, sent: Instant, at: Instant) {
        self.file(Outcome::Timeout, intended, Some(at - intended), Some(at.saturating_duration_since(sent)), 0);
    }

    /// Still in flight (`sent` is `Some`) or never sent when the run stopped.
    pub fn unfinished(&mut self, intended: Instant, sent: Option<Instant>) {
        let Some(w) = &self.window else { return };
        let (stop, record) = (w.stop, w.record_unfinished);
        let corrected = record.then(|| stop.saturating_duration_since(intended));
        let uncorrected = sent.filter(|_| record).map(|s| stop.saturating_duration_since(s));
        self.file(Outcome::Unfinished, intended, corrected, uncorrected, 0);
    }

    /// A connection was opened (at the start or on a reconnect): how long it took.
    pub fn connected(&mut self, t: ConnectTimes) {
        self.connects.tcp.saturating_record(micros(t.tcp));
        if let Some((tls, resumed)) = t.tls {
            self.connects.tls.saturating_record(micros(tls));
            self.connects.resumed += u64::from(resumed);
        }
    }

    /// Record raw latencies (microseconds) into the total, without any window.
    pub fn record_latency_us(&mut self, outcome: Outcome, corrected_us: u64, uncorrected_us: u64) {
        self.total.add(outcome, Some(corrected_us), Some(uncorrected_us), 0);
    }

    fn file(&mut self, outcome: Outcome, intended: Instant, c: Option<Duration>, u: Option<Duration>, bytes: u64) {
        if !self.counts_for(intended) {
            return;
        }
        let (cu, uu) = (c.map(micros), u.map(micros));
        self.total.add(outcome, cu, uu, bytes);
        if let Some(w) = &self.window {
            if !self.stages.is_empty() {
                let j = w.stage_ends.partition_point(|e| *e <= intended).min(self.stages.len() - 1);
                self.stages[j].add(outcome, cu, uu, bytes);
            }
            let i = ((intended - w.measure_start).as_secs_f64() / w.interval.as_secs_f64()) as usize;
            if self.intervals.len() <= i {
                self.intervals.resize_with(i + 1, Interval::default);
            }
            let slot = &mut self.intervals[i];
            if let Some(v) = cu {
                // record() grows the histogram; saturating_record() would clamp to its current top.
                if slot.corrected.record(v).is_err() {
                    slot.corrected.saturating_record(v);
                }
            }
            slot.counts[outcome.index()] += 1;
        }
        if let Some(l) = self.label {
            if self.labels.len() <= l {
                self.labels.resize_with(l + 1, Tally::growing);
            }
            let t = &mut self.labels[l];
            for (h, v) in [(&mut t.corrected, cu), (&mut t.uncorrected, uu)] {
                if let Some(v) = v {
                    if h.record(v).is_err() {
                        h.saturating_record(v);
                    }
                }
            }
            t.counts[outcome.index()] += 1;
            t.bytes_read += bytes;
        }
        if let Some(o) = &self.observer {
            o.observe_labeled(self.label, outcome, c.map(|d| d.as_secs_f64()), u.map(|d| d.as_secs_f64()));
        }
    }

    /// The label (id) of the requests filed next (`None`: no `--requests`).
    pub fn set_label(&mut self, label: Option<usize>) {
        self.label = label;
    }

    /// Add another recorder's histograms and counts to this one (lossless).
    pub fn merge(&mut self, other: &Recorder) {
        self.total.merge(&other.total);
        if self.stages.len() < other.stages.len() {
            self.stages.resize_with(other.stages.len(), Tally::default);
        }
        for (a, b) in self.stages.iter_mut().zip(&other.stages) {
            a.merge(b);
        }
        if self.labels.len() < other.labels.len() {
            self.labels.resize_with(other.labels.len(), Tally::growing);
        }
        for (a, b) in self.labels.iter_mut().zip(&other.labels) {
            a.merge(b);
        }
        if self.label_names.len() < other.label_names.len() {
            self.label_names = other.label_names.clone();
        }
        if self.intervals.len() < other.intervals.len() {
            self.intervals.resize_with(other.intervals.len(), Interval::default);
        }
        for (a, b) in self.intervals.iter_mut().zip(&other.intervals) {
            a.merge(b);
        }
        match (&mut self.send_lateness, &other.send_lateness) {
            (Some(a), Some(b)) => a.add(b).expect("same layout"),
            (None, Some(b)) => self.send_lateness = Some(b.clone()),
            _ => {}
        }
        self.unmatched += other.unmatched;
        self.late_answers += other.late_answers;
        self.connects.merge(&other.connects);
        self.engine.merge(&other.engine);
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
