//! Reporting: the result of a run as JSON (`--json FILE`) and as wrk2-style text.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use base64::Engine as _;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::recording::{Outcome, Recorder, HIST_HIGH_US, HIST_LOW_US, HIST_SIGFIG};

/// Identifies the JSON layout (see `result.schema.json`).
pub const RESULT_SCHEMA: &str = "perfkit-load/result/v1";

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

/// Everything a run produced. Serialized as the `--json` output.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunResult {
    pub schema: String,
    pub tool: String,
    pub version: String,
    pub target: String,
    pub scenario: String,
    /// `http` or `ws` (WebSocket JSON-RPC).
    pub mode: String,
    pub method: String,
    pub threads: usize,
    pub connections: usize,
    pub duration_s: f64,
    pub warmup_s: f64,
    pub timeout_s: f64,
    pub closed_loop: bool,
    /// Requests per second; `null` in closed-loop mode.
    pub target_rate: Option<f64>,
    /// Responses per second over the measured duration.
    pub achieved_rate: f64,
    /// Responses received in the measured window (any status / JSON-RPC result or error).
    pub requests: u64,
    /// Failed requests and connection attempts (connect, read, write errors, timeouts, unmatched).
    pub errors: u64,
    pub bytes_read: u64,
    /// Counts by outcome; every outcome is present.
    pub outcomes: BTreeMap<String, u64>,
    pub latency: Latency,
    pub histogram: HistogramLayout,
    /// Wall-clock start of the measured window, seconds since the Unix epoch.
    pub start_unix_s: f64,
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

/// Static facts about a run, for the result.
pub struct RunInfo<'a> {
    pub target: &'a str,
    pub scenario: &'a str,
    pub mode: &'a str,
    pub method: &'a str,
    pub threads: usize,
    pub connections: usize,
    pub duration_s: f64,
    pub warmup_s: f64,
    pub timeout_s: f64,
    pub target_rate: Option<f64>,
    pub start_unix_s: f64,
}

pub fn build_result(info: &RunInfo, rec: &Recorder) -> RunResult {
    let outcomes = Outcome::ALL.iter().map(|o| (o.name().to_string(), rec.count(*o))).collect();
    let requests = rec.responses();
    RunResult {
        schema: RESULT_SCHEMA.into(),
        tool: "perfkit-load".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        target: info.target.into(),
        scenario: info.scenario.into(),
        mode: info.mode.into(),
        method: info.method.into(),
        threads: info.threads,
        connections: info.connections,
        duration_s: info.duration_s,
        warmup_s: info.warmup_s,
        timeout_s: info.timeout_s,
        closed_loop: info.target_rate.is_none(),
        target_rate: info.target_rate,
        achieved_rate: requests as f64 / info.duration_s,
        requests,
        errors: rec.errors(),
        bytes_read: rec.bytes_read,
        outcomes,
        latency: Latency { corrected: summarize(&rec.corrected), uncorrected: summarize(&rec.uncorrected) },
        histogram: HistogramLayout {
            unit: "us".into(),
            lowest: HIST_LOW_US,
            highest: HIST_HIGH_US,
            significant_digits: HIST_SIGFIG,
            encoding: "HdrHistogram V2 compressed (deflate), base64".into(),
        },
        start_unix_s: info.start_unix_s,
    }
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
/// `u_latency`: the same for uncorrected latency (`--u_latency`).
pub fn render_text(r: &RunResult, rec: &Recorder, latency: bool, u_latency: bool) -> String {
    let mut out = String::new();
    let h = &rec.corrected;
    let within = if h.is_empty() {
        0.0
    } else {
        let (lo, hi) = (h.mean() - h.stdev(), h.mean() + h.stdev());
        let n: u64 = h.iter_recorded().filter(|v| (v.value_iterated_to() as f64) >= lo && (v.value_iterated_to() as f64) <= hi).map(|v| v.count_at_value()).sum();
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
    let per_thread = r.achieved_rate / r.threads as f64;
    let _ = writeln!(out, "    Req/Sec   {:>8}  (mean per thread)", fmt_count(per_thread));
    if latency {
        distribution(&mut out, "Recorded Latency, corrected", &rec.corrected, true);
    }
    if u_latency {
        distribution(&mut out, "Uncorrected Latency (measured without taking delayed starts into account)", &rec.uncorrected, true);
    }
    let _ = writeln!(
        out,
        "  {} requests in {:.2}s, {} read",
        r.requests,
        r.duration_s,
        fmt_bytes(r.bytes_read as f64)
    );
    if r.errors > 0 {
        let parts: Vec<String> = r
            .outcomes
            .iter()
            .filter(|(k, v)| **v > 0 && !matches!(k.as_str(), "2xx" | "3xx" | "4xx" | "5xx" | "other_status" | "rpc_ok" | "rpc_error"))
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        let _ = writeln!(out, "  Errors: {}", parts.join(", "));
    }
    let non2xx = r.outcomes["3xx"] + r.outcomes["4xx"] + r.outcomes["5xx"] + r.outcomes["other_status"];
    if non2xx > 0 {
        let _ = writeln!(out, "  Non-2xx or 3xx responses: {non2xx}");
    }
    if r.outcomes["rpc_error"] > 0 {
        let _ = writeln!(out, "  JSON-RPC error responses: {}", r.outcomes["rpc_error"]);
    }
    let _ = writeln!(out, "Requests/sec: {:>10.2}", r.achieved_rate);
    let _ = writeln!(out, "Transfer/sec: {:>10}", fmt_bytes(r.bytes_read as f64 / r.duration_s));
    out
}
