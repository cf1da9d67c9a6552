//! Reporting: the result of a run as JSON (`--json FILE`) and as wrk2-style text.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use base64::Engine as _;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::schedule::{mean_rate, Stage};
use crate::recording::{Interval, Outcome, Recorder, Tally, HIST_HIGH_US, HIST_LOW_US, HIST_SIGFIG};

/// Identifies the JSON layout (see `result.schema.json`).
pub const RESULT_SCHEMA: &str = "perfkit-load/result/v2";

/// Percentiles in microseconds.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Percentiles {
    pub p50: u64,
    pub p75: u64,
    pub p90: u64,
    pub p99: u64,
    pub p99_9: u64,
    pub p99_99: u64,
    pub max: u64,
}

/// Summary of one latency histogram, plus the histogram itself (lossless).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LatencySummary {
    pub count: u64,
    pub min_us: u64,
    pub mean_us: f64,
    pub stdev_us: f64,
    pub max_us: u64,
    pub percentiles_us: Percentiles,
    /// HdrHistogram V2 compressed (deflate) encoding, base64: the form `hdrh`'s
    /// `HdrHistogram.decode()` and other HdrHistogram libraries read.
    pub hdr: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Latency {
    /// From the intended send time (coordinated-omission corrected).
    pub corrected: LatencySummary,
    /// From the actual send time.
    pub uncorrected: LatencySummary,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HistogramLayout {
    pub unit: String,
    pub lowest: u64,
    pub highest: u64,
    pub significant_digits: u8,
    pub encoding: String,
}

/// Which part of a logical run a result covers (`--segment I/N`; a whole run is `[0]` of 1).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Segment {
    pub index: Vec<usize>,
    pub count: usize,
}

/// What was asked for: the settings that make two results parts of one run or not.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunInfo {
    pub target: String,
    pub scenario: String,
    /// `http` or `ws` (WebSocket JSON-RPC).
    pub mode: String,
    /// `http/1.1`, `h2` or `websocket`.
    pub protocol: String,
    /// Concurrent streams per connection (HTTP/2; 1 otherwise): `connections × streams` schedule lanes.
    pub streams: usize,
    pub method: String,
    pub threads: usize,
    pub connections: usize,
    pub duration_s: f64,
    pub warmup_s: f64,
    pub timeout_s: f64,
    pub drain_s: f64,
    /// `constant` or `poisson`.
    pub arrivals: String,
    pub seed: Option<u64>,
    /// The measured rate profile: its stages (a plain `-R` run has one); empty in closed loop.
    pub profile: Vec<Stage>,
    pub interval_s: f64,
    /// Send lateness p99 above this (µs) means the engine did not hold the schedule.
    pub lateness_limit_us: u64,
    /// Wall-clock start of the measured window, seconds since the Unix epoch.
    pub start_unix_s: f64,
    /// Same for every segment of one logical run, different for any other run.
    pub run_id: String,
    pub segment: Segment,
}

impl RunInfo {
    /// Mean offered rate over the measured stages; `None` in closed-loop mode.
    pub fn target_rate(&self) -> Option<f64> {
        (!self.profile.is_empty()).then(|| mean_rate(&self.profile))
    }
}

/// Outcome counts and latency of a stage.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StageResult {
    #[serde(flatten)]
    pub spec: Stage,
    pub start_s: f64,
    pub achieved_rate: f64,
    #[serde(flatten)]
    pub tally: TallyResult,
}

/// Counts and latency of a set of requests (a stage, a label).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TallyResult {
    pub intended: u64,
    pub requests: u64,
    pub errors: u64,
    pub failed: u64,
    pub bytes_read: u64,
    pub outcomes: BTreeMap<String, u64>,
    pub latency: Latency,
}

impl TallyResult {
    fn of(t: &Tally) -> TallyResult {
        TallyResult {
            intended: t.intended(),
            requests: t.responses(),
            errors: t.errors(),
            failed: t.failed(),
            bytes_read: t.bytes_read,
            outcomes: outcome_map(&t.counts),
            latency: Latency { corrected: summarize(&t.corrected), uncorrected: summarize(&t.uncorrected) },
        }
    }
}

/// Outcome counts and latency of the requests of one label (`--requests`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LabelResult {
    pub label: String,
    #[serde(flatten)]
    pub tally: TallyResult,
}

/// One time-series interval (requests filed by intended time).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IntervalResult {
    /// Seconds from the start of the measured window.
    pub start_s: f64,
    pub intended: u64,
    pub requests: u64,
    pub errors: u64,
    pub failed: u64,
    /// Answers per second to requests intended in this interval.
    pub rate: f64,
    pub outcomes: BTreeMap<String, u64>,
    /// Corrected latency of the interval.
    pub percentiles_us: Percentiles,
    pub hdr: String,
}

/// Connections opened during the run (at the start and on reconnects) and how long that took.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ConnectionsResult {
    pub opened: u64,
    /// TCP connect time.
    pub connect: LatencySummary,
    /// TLS handshake time; `null` without TLS.
    pub tls_handshake: Option<LatencySummary>,
    /// TLS handshakes that resumed an earlier session.
    pub tls_resumed: u64,
}

/// The engine's own CPU use: when a thread was busy most of the run, the engine may be the limit.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EngineResult {
    pub threads: u64,
    /// CPU seconds of all worker threads over the run.
    pub cpu_s: f64,
    /// CPU time ÷ wall time of the busiest thread.
    pub busiest_thread: f64,
    /// The busiest thread was busy more than 90 % of the run.
    pub saturated: bool,
}

/// Above this busy fraction the engine may be what limits the rate.
pub const ENGINE_SATURATED: f64 = 0.9;

/// A `--threshold` and its verdict.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ThresholdResult {
    pub expr: String,
    /// The measured value the threshold was checked against (µs, count, ratio, req/s; 0/1 for rate_held).
    pub value: f64,
    pub passed: bool,
}

/// Everything a run produced. Serialized as the `--json` output.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunResult {
    pub schema: String,
    pub tool: String,
    pub version: String,
    #[serde(flatten)]
    pub info: RunInfo,
    pub closed_loop: bool,
    /// Requests per second (mean over the stages); `null` in closed-loop mode.
    pub target_rate: Option<f64>,
    /// Requests the schedule intended in the measured window, per second.
    pub offered_rate: f64,
    /// Answers per second over the measured duration.
    pub achieved_rate: f64,
    /// Whether the run delivered its schedule (achieved ≥ 99 % of intended, send lateness p99 within
    /// the limit); `null` in closed-loop mode.
    pub rate_held: Option<bool>,
    /// Requests intended in the measured window: the sum of `outcomes`.
    pub intended: u64,
    /// Answers (any status, any JSON-RPC result or error).
    pub requests: u64,
    /// Connect, read and write errors, timeouts, HTTP/2 resets and `GOAWAY` refusals.
    pub errors: u64,
    /// Requests without a successful answer: errors, unfinished, 4xx/5xx/other status, JSON-RPC errors.
    pub failed: u64,
    pub bytes_read: u64,
    /// Counts by outcome; every outcome is present.
    pub outcomes: BTreeMap<String, u64>,
    /// WebSocket messages that answer no call.
    pub unmatched: u64,
    /// WebSocket answers to calls already counted as timeouts.
    pub late_answers: u64,
    pub latency: Latency,
    /// Actual send − intended send (the engine's own lateness); `null` in closed-loop mode.
    pub send_lateness: Option<LatencySummary>,
    pub histogram: HistogramLayout,
    pub connections_opened: ConnectionsResult,
    pub engine: EngineResult,
    pub stages: Vec<StageResult>,
    pub intervals: Vec<IntervalResult>,
    /// Per request label (`--requests`); empty without.
    #[serde(default)]
    pub labels: Vec<LabelResult>,
    pub thresholds: Vec<ThresholdResult>,
    pub warnings: Vec<String>,
}

/// Encode a histogram as HdrHistogram V2 compressed, base64.
pub fn encode_histogram(h: &Histogram<u64>) -> String {
    let mut bytes = Vec::new();
    V2DeflateSerializer::new().serialize(h, &mut bytes).expect("serialize histogram");
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Decode a histogram from [`encode_histogram`]'s form (also accepts uncompressed V2).
pub fn decode_histogram(text: &str) -> Result<Histogram<u64>, String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .map_err(|e| format!("invalid base64: {e}"))?;
    Deserializer::new()
        .deserialize(&mut bytes.as_slice())
        .map_err(|e| format!("invalid HdrHistogram encoding: {e:?}"))
}

pub fn percentiles(h: &Histogram<u64>) -> Percentiles {
    Percentiles {
        p50: h.value_at_quantile(0.50),
        p75: h.value_at_quantile(0.75),
        p90: h.value_at_quantile(0.90),
        p99: h.value_at_quantile(0.99),
        p99_9: h.value_at_quantile(0.999),
        p99_99: h.value_at_quantile(0.9999),
        max: h.max(),
    }
}

pub fn summarize(h: &Histogram<u64>) -> LatencySummary {
    LatencySummary {
        count: h.len(),
        min_us: if h.is_empty() { 0 } else { h.min() },
        mean_us: h.mean(),
        stdev_us: h.stdev(),
        max_us: h.max(),
        percentiles_us: percentiles(h),
        hdr: encode_histogram(h),
    }
}

fn outcome_map(counts: &[u64]) -> BTreeMap<String, u64> {
    Outcome::ALL.iter().map(|o| (o.name().to_string(), counts[o.index()])).collect()
}

fn stage_result(spec: &Stage, start_s: f64, t: &Tally) -> StageResult {
    StageResult { spec: *spec, start_s, achieved_rate: t.responses() as f64 / spec.duration, tally: TallyResult::of(t) }
}

fn interval_result(n: usize, width: f64, iv: &Interval) -> IntervalResult {
    let t = Tally { counts: iv.counts, ..Tally::default() };
    IntervalResult {
        start_s: n as f64 * width,
        intended: t.intended(),
        requests: t.responses(),
        errors: t.errors(),
        failed: t.failed(),
        rate: t.responses() as f64 / width,
        outcomes: outcome_map(&iv.counts),
        percentiles_us: percentiles(&iv.corrected),
        hdr: encode_histogram(&iv.corrected),
    }
}

/// Every label of the run (named by `rec.label_names`), with or without requests.
fn label_results(rec: &Recorder) -> Vec<LabelResult> {
    let n = rec.label_names.len().max(rec.labels.len());
    let empty = Tally::growing();
    (0..n)
        .map(|i| {
            let t = rec.labels.get(i).unwrap_or(&empty);
            LabelResult {
                label: rec.label_names.get(i).cloned().unwrap_or_else(|| format!("label {i}")),
                tally: TallyResult::of(t),
            }
        })
        .collect()
}

/// Did the run deliver its schedule? `None` in closed loop; otherwise the verdict and, when it
/// did not, why.
fn rate_verdict(info: &RunInfo, rec: &Recorder) -> (Option<bool>, Vec<String>) {
    let (Some(target), Some(lateness)) = (info.target_rate(), &rec.send_lateness) else {
        return (None, vec![]);
    };
    let mut warnings = Vec::new();
    let intended = rec.total.intended();
    let achieved = rec.total.responses() as f64 / info.duration_s;
    if (rec.total.responses() as f64) < 0.99 * intended as f64 {
        warnings.push(format!(
            "rate not held: {achieved:.2} req/s answered of {:.2} req/s intended (target {target:.2}): \
             {} of {intended} requests got no answer",
            intended as f64 / info.duration_s,
            intended - rec.total.responses()
        ));
    }
    let late = lateness.value_at_quantile(0.99);
    if late > info.lateness_limit_us {
        warnings.push(format!(
            "schedule not held: send lateness p99 {} is above the limit {} (the engine, or the server \
             holding each connection's previous request, delayed sends)",
            fmt_us(late as f64),
            fmt_us(info.lateness_limit_us as f64)
        ));
    }
    (Some(warnings.is_empty()), warnings)
}

pub fn build_result(info: &RunInfo, rec: &Recorder) -> RunResult {
    let t = &rec.total;
    let (rate_held, mut warnings) = rate_verdict(info, rec);
    let saturated = rec.engine.busiest > ENGINE_SATURATED;
    if saturated {
        warnings.push(format!(
            "the load engine's busiest thread was busy {:.0} % of the run: the engine may be the bottleneck \
             (add threads with -t, or load from more processes with --segment)",
            rec.engine.busiest * 100.0
        ));
    }
    let mut start = 0.0;
    let stages = if rec.stages.is_empty() {
        info.profile.first().map(|s| vec![stage_result(s, 0.0, t)]).unwrap_or_default()
    } else {
        info.profile
            .iter()
            .zip(&rec.stages)
            .map(|(s, tally)| {
                let r = stage_result(s, start, tally);
                start += s.duration;
                r
            })
            .collect()
    };
    RunResult {
        schema: RESULT_SCHEMA.into(),
        tool: "perfkit-load".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        info: info.clone(),
        closed_loop: info.profile.is_empty(),
        target_rate: info.target_rate(),
        offered_rate: t.intended() as f64 / info.duration_s,
        achieved_rate: t.responses() as f64 / info.duration_s,
        rate_held,
        intended: t.intended(),
        requests: t.responses(),
        errors: t.errors(),
        failed: t.failed(),
        bytes_read: t.bytes_read,
        outcomes: outcome_map(&t.counts),
        unmatched: rec.unmatched,
        late_answers: rec.late_answers,
        latency: Latency { corrected: summarize(&t.corrected), uncorrected: summarize(&t.uncorrected) },
        send_lateness: rec.send_lateness.as_ref().map(summarize),
        histogram: HistogramLayout {
            unit: "us".into(),
            lowest: HIST_LOW_US,
            highest: HIST_HIGH_US,
            significant_digits: HIST_SIGFIG,
            encoding: "HdrHistogram V2 compressed (deflate), base64".into(),
        },
        connections_opened: ConnectionsResult {
            opened: rec.connects.tcp.len(),
            connect: summarize(&rec.connects.tcp),
            tls_handshake: (!rec.connects.tls.is_empty()).then(|| summarize(&rec.connects.tls)),
            tls_resumed: rec.connects.resumed,
        },
        engine: EngineResult {
            threads: rec.engine.threads,
            cpu_s: rec.engine.cpu_s,
            busiest_thread: rec.engine.busiest,
            saturated,
        },
        stages,
        intervals: rec.intervals.iter().enumerate().map(|(n, iv)| interval_result(n, info.interval_s, iv)).collect(),
        labels: label_results(rec),
        thresholds: vec![],
        warnings,
    }
}

/// Rebuild the recorder a result was made from (lossless: every histogram is in the result).
pub fn recorder_of(r: &RunResult) -> Result<Recorder, String> {
    let counts = |m: &BTreeMap<String, u64>| -> [u64; Outcome::ALL.len()] {
        let mut c = [0; Outcome::ALL.len()];
        for o in Outcome::ALL {
            c[o.index()] = m.get(o.name()).copied().unwrap_or(0);
        }
        c
    };
    let tally = |counts: [u64; Outcome::ALL.len()], lat: &Latency, bytes_read: u64| -> Result<Tally, String> {
        Ok(Tally {
            corrected: decode_histogram(&lat.corrected.hdr)?,
            uncorrected: decode_histogram(&lat.uncorrected.hdr)?,
            counts,
            bytes_read,
        })
    };
    let mut rec = Recorder::default();
    rec.total = tally(counts(&r.outcomes), &r.latency, r.bytes_read)?;
    rec.send_lateness = r.send_lateness.as_ref().map(|s| decode_histogram(&s.hdr)).transpose()?;
    rec.unmatched = r.unmatched;
    rec.late_answers = r.late_answers;
    let c = &r.connections_opened;
    rec.connects.tcp = decode_histogram(&c.connect.hdr)?;
    if let Some(tls) = &c.tls_handshake {
        rec.connects.tls = decode_histogram(&tls.hdr)?;
    }
    rec.connects.resumed = c.tls_resumed;
    rec.engine = crate::usage::EngineUsage {
        threads: r.engine.threads,
        cpu_s: r.engine.cpu_s,
        busiest: r.engine.busiest_thread,
    };
    if r.stages.len() > 1 {
        for s in &r.stages {
            rec.stages.push(tally(counts(&s.tally.outcomes), &s.tally.latency, s.tally.bytes_read)?);
        }
    }
    for l in &r.labels {
        let mut t = Tally::growing();
        t.merge(&tally(counts(&l.tally.outcomes), &l.tally.latency, l.tally.bytes_read)?);
        rec.labels.push(t);
        rec.label_names.push(l.label.clone());
    }
    for iv in &r.intervals {
        let mut corrected = crate::recording::new_growing_histogram();
        corrected.add(decode_histogram(&iv.hdr)?).map_err(|e| format!("interval histogram: {e:?}"))?;
        rec.intervals.push(Interval { corrected, counts: counts(&iv.outcomes) });
    }
    Ok(rec)
}

/// Format microseconds the way wrk does (`812.00us`, `1.25ms`, `2.00s`).
pub fn fmt_us(us: f64) -> String {
    if us < 1000.0 {
        format!("{us:.2}us")
    } else if us < 1_000_000.0 {
        format!("{:.2}ms", us / 1000.0)
    } else if us < 60_000_000.0 {
        format!("{:.2}s", us / 1_000_000.0)
    } else {
        format!("{:.2}m", us / 60_000_000.0)
    }
}

fn fmt_bytes(b: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KB", "MB", "GB", "TB"];
    let mut v = b;
    let mut i = 0;
    while v >= 1024.0 && i < UNITS.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    format!("{v:.2}{}", UNITS[i])
}

fn fmt_count(n: f64) -> String {
    if n >= 1e6 {
        format!("{:.2}M", n / 1e6)
    } else if n >= 1e3 {
        format!("{:.2}k", n / 1e3)
    } else {
        format!("{n:.2}")
    }
}

fn distribution(out: &mut String, title: &str, h: &Histogram<u64>, spectrum: bool) {
    let _ = writeln!(out, "  Latency Distribution (HdrHistogram - {title})");
    for q in [50.0, 75.0, 90.0, 99.0, 99.9, 99.99, 99.999, 100.0] {
        let v = if q >= 100.0 { h.max() } else { h.value_at_quantile(q / 100.0) };
        let _ = writeln!(out, "{q:7.3}% {:>9}", fmt_us(v as f64));
    }
    if !spectrum || h.is_empty() {
        return;
    }
    let _ = writeln!(out, "\n  Detailed Percentile spectrum:");
    let _ = writeln!(out, "       Value   Percentile   TotalCount 1/(1-Percentile)\n");
    let mut total = 0u64;
    for v in h.iter_quantiles(5) {
        total += v.count_since_last_iteration();
        let q = v.quantile_iterated_to();
        let inv = if q < 1.0 { format!("{:12.2}", 1.0 / (1.0 - q)) } else { "         inf".into() };
        let _ = writeln!(
            out,
            "{:12.3} {:12.6} {:12} {}",
            v.value_iterated_to() as f64 / 1000.0,
            q,
            total,
            inv
        );
    }
    let _ = writeln!(
        out,
        "#[Mean    = {:12.3}, StdDeviation   = {:12.3}]",
        h.mean() / 1000.0,
        h.stdev() / 1000.0
    );
    let _ = writeln!(out, "#[Max     = {:12.3}, Total count    = {:12}]", h.max() as f64 / 1000.0, h.len());
    let _ = writeln!(out, "----------------------------------------------------------");
}

/// wrk2-style text report. `latency`: corrected distribution and spectrum (`--latency`);
/// `u_latency`: the same for uncorrected latency (`--u_latency`). Then the accounting, the rate
/// verdict, the stages and the thresholds (warnings go to stderr, see `cli`).
pub fn render_text(r: &RunResult, rec: &Recorder, latency: bool, u_latency: bool) -> String {
    let mut out = String::new();
    let h = &rec.total.corrected;
    let within = if h.is_empty() {
        0.0
    } else {
        let (lo, hi) = (h.mean() - h.stdev(), h.mean() + h.stdev());
        let n: u64 = h
            .iter_recorded()
            .filter(|v| (lo..=hi).contains(&(v.value_iterated_to() as f64)))
            .map(|v| v.count_at_value())
            .sum();
        100.0 * n as f64 / h.len() as f64
    };
    let _ = writeln!(out, "  Thread Stats   Avg      Stdev     Max   +/- Stdev");
    let _ = writeln!(
        out,
        "    Latency   {:>8}  {:>8}  {:>8}  {:>7.2}%",
        fmt_us(h.mean()),
        fmt_us(h.stdev()),
        fmt_us(h.max() as f64),
        within
    );
    let per_thread = r.achieved_rate / r.info.threads as f64;
    let _ = writeln!(out, "    Req/Sec   {:>8}  (mean per thread)", fmt_count(per_thread));
    if latency {
        distribution(&mut out, "Recorded Latency, corrected", &rec.total.corrected, true);
    }
    if u_latency {
        let title = "Uncorrected Latency (measured without taking delayed starts into account)";
        distribution(&mut out, title, &rec.total.uncorrected, true);
    }
    let _ = writeln!(out, "  {} requests in {:.2}s, {} read", r.requests, r.info.duration_s, fmt_bytes(r.bytes_read as f64));
    accounting(&mut out, r);
    let _ = writeln!(out, "Requests/sec: {:>10.2}", r.achieved_rate);
    let _ = writeln!(out, "Transfer/sec: {:>10}", fmt_bytes(r.bytes_read as f64 / r.info.duration_s));
    if r.stages.len() > 1 {
        stages(&mut out, r);
    }
    if !r.labels.is_empty() {
        labels(&mut out, r);
    }
    for t in &r.thresholds {
        let _ = writeln!(out, "  threshold {:<24} {:>12}  {}", t.expr, fmt_value(&t.expr, t.value), if t.passed { "pass" } else { "FAIL" });
    }
    out
}

/// Where every intended request went, the rate verdict and the engine's own lateness.
fn accounting(out: &mut String, r: &RunResult) {
    let parts: Vec<String> =
        r.outcomes.iter().filter(|(k, v)| **v > 0 && !Outcome::from_name(k).is_some_and(Outcome::is_response)).map(|(k, v)| format!("{k} {v}")).collect();
    if !parts.is_empty() {
        let _ = writeln!(out, "  Errors: {}", parts.join(", "));
    }
    let non2xx = r.outcomes["3xx"] + r.outcomes["4xx"] + r.outcomes["5xx"] + r.outcomes["other_status"];
    if non2xx > 0 {
        let _ = writeln!(out, "  Non-2xx or 3xx responses: {non2xx}");
    }
    if r.outcomes["rpc_error"] > 0 {
        let _ = writeln!(out, "  JSON-RPC error responses: {}", r.outcomes["rpc_error"]);
    }
    if r.unmatched + r.late_answers > 0 {
        let _ = writeln!(out, "  Unmatched messages: {}, late answers to timed-out calls: {}", r.unmatched, r.late_answers);
    }
    let _ = writeln!(
        out,
        "  Intended {}: answered {}, errors {}, timeouts {}, unfinished {}",
        r.intended, r.requests, r.errors - r.outcomes["timeout"], r.outcomes["timeout"], r.outcomes["unfinished"]
    );
    if let (Some(target), Some(held)) = (r.target_rate, r.rate_held) {
        let _ = writeln!(
            out,
            "  Rate: target {target:.2} req/s, achieved {:.2} req/s ({})",
            r.achieved_rate,
            if held { "held" } else { "NOT held" }
        );
    }
    let c = &r.connections_opened;
    let _ = write!(
        out,
        "  Connections: {} opened, connect p50 {}, max {}",
        c.opened,
        fmt_us(c.connect.percentiles_us.p50 as f64),
        fmt_us(c.connect.max_us as f64)
    );
    match &c.tls_handshake {
        Some(h) => {
            let p = &h.percentiles_us;
            let _ = writeln!(
                out,
                "; TLS handshake p50 {}, p99 {}, max {} ({} resumed)",
                fmt_us(p.p50 as f64),
                fmt_us(p.p99 as f64),
                fmt_us(p.max as f64),
                c.tls_resumed
            );
        }
        None => out.push('\n'),
    }
    let _ = writeln!(
        out,
        "  Engine: {} threads, {:.2} CPU s ({:.1} us/request), busiest thread {:.0} % busy",
        r.engine.threads,
        r.engine.cpu_s,
        if r.intended > 0 { r.engine.cpu_s * 1e6 / r.intended as f64 } else { 0.0 },
        r.engine.busiest_thread * 100.0
    );
    if let Some(l) = &r.send_lateness {
        let p = &l.percentiles_us;
        let _ = writeln!(
            out,
            "  Send lateness: p50 {}, p99 {}, max {}",
            fmt_us(p.p50 as f64),
            fmt_us(p.p99 as f64),
            fmt_us(p.max as f64)
        );
    }
}

fn stages(out: &mut String, r: &RunResult) {
    let _ = writeln!(out, "  Stages        target req/s   achieved    p50        p99        max     failed");
    for s in &r.stages {
        let rate = if s.spec.from == s.spec.to {
            format!("{:.0}", s.spec.from)
        } else {
            format!("{:.0}..{:.0}", s.spec.from, s.spec.to)
        };
        let p = &s.tally.latency.corrected.percentiles_us;
        let _ = writeln!(
            out,
            "  {:>6.1}s+{:<5.1} {:>13} {:>10.2} {:>9} {:>10} {:>10} {:>8}",
            s.start_s,
            s.spec.duration,
            rate,
            s.achieved_rate,
            fmt_us(p.p50 as f64),
            fmt_us(p.p99 as f64),
            fmt_us(p.max as f64),
            s.tally.failed
        );
    }
}

fn labels(out: &mut String, r: &RunResult) {
    let shown = |l: &str| if l.chars().count() > 40 { format!("{}…", l.chars().take(39).collect::<String>()) } else { l.to_string() };
    let width = r.labels.iter().map(|l| shown(&l.label).chars().count()).max().unwrap_or(0).max(5);
    let _ = writeln!(out, "  {:<width$} {:>10} {:>10} {:>9} {:>10} {:>10} {:>8}", "Label", "intended", "answered", "p50", "p99", "max", "failed");
    for l in &r.labels {
        let p = &l.tally.latency.corrected.percentiles_us;
        let _ = writeln!(
            out,
            "  {:<width$} {:>10} {:>10} {:>9} {:>10} {:>10} {:>8}",
            shown(&l.label),
            l.tally.intended,
            l.tally.requests,
            fmt_us(p.p50 as f64),
            fmt_us(p.p99 as f64),
            fmt_us(p.max as f64),
            l.tally.failed
        );
    }
}

/// A threshold's measured value in the unit its expression uses.
fn fmt_value(expr: &str, v: f64) -> String {
    match crate::thresholds::unit_of(expr) {
        crate::thresholds::Unit::Micros => fmt_us(v),
        crate::thresholds::Unit::Ratio => format!("{:.4}%", v * 100.0),
        crate::thresholds::Unit::Plain => format!("{v:.2}"),
    }
}

/// Write the corrected latency of every interval as an HdrHistogram interval log (the format of
/// Java's HistogramLogWriter, read by `hdrh.log.HistogramLogReader` and HistogramLogProcessor).
/// Values are microseconds; interval start times are relative to the run's measured start.
pub fn write_hdr_log<W: std::io::Write>(r: &RunResult, rec: &Recorder, out: &mut W) -> std::io::Result<()> {
    use hdrhistogram::serialization::interval_log::IntervalLogWriterBuilder;
    use std::time::{Duration, UNIX_EPOCH};
    let start = UNIX_EPOCH + Duration::from_secs_f64(r.info.start_unix_s);
    let mut serializer = V2DeflateSerializer::new();
    let mut log = IntervalLogWriterBuilder::new()
        .add_comment(&format!("perfkit-load {} {} corrected latency in microseconds", r.version, r.info.target))
        .with_start_time(start)
        .with_base_time(start)
        .with_max_value_divisor(1000.0)
        .begin_log_with(out, &mut serializer)?;
    log.write_comment("\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"")?;
    let width = Duration::from_secs_f64(r.info.interval_s);
    for (n, iv) in rec.intervals.iter().enumerate() {
        log.write_histogram(&iv.corrected, width * n as u32, width, None)
            .map_err(|e| std::io::Error::other(format!("{e}")))?;
    }
    Ok(())
}
