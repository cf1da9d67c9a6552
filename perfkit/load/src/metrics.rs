//! Live Prometheus metrics (`--metrics-addr HOST:PORT`), names from the kit's conventions:
//!
//! - `perfkit_load_requests_total{target,scenario,outcome}` counter
//! - `perfkit_load_corrected_latency_seconds{target,scenario}` histogram (from the intended send time)
//! - `perfkit_load_uncorrected_latency_seconds{target,scenario}` histogram (from the actual send time)
//! - `perfkit_load_target_rate{target,scenario}` gauge, requests/s (0 in closed-loop mode)
//! - `perfkit_load_achieved_rate{target,scenario}` gauge, responses/s since the measurement started
//!
//! With `--requests` the requests counter and the two latency histograms also have a `label` label
//! (the request's label; summing over it gives the run's figures); without, they are as above.
//!
//! Latency buckets follow the kit's single layout, 25 µs … 10 s.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use prometheus::{Encoder, Gauge, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, Opts, Registry, TextEncoder};

use crate::recording::{Observer, Outcome};

/// The kit's latency bucket layout in seconds (25 µs … 10 s).
pub const LATENCY_BUCKETS: [f64; 18] = [
    0.000_025, 0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1,
    0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

pub struct LiveMetrics {
    registry: Registry,
    requests: IntCounterVec,
    corrected: Histogram,
    uncorrected: Histogram,
    achieved_rate: Gauge,
    responses: AtomicU64,
    measure_start: Mutex<Option<Instant>>,
    /// `--requests`: the series of each label, by label id.
    labeled: Vec<LabelSeries>,
}

/// The series of one request label (children resolved once: no label lookup per request).
struct LabelSeries {
    requests: Vec<IntCounter>,
    corrected: Histogram,
    uncorrected: Histogram,
}

impl LiveMetrics {
    pub fn new(target: &str, scenario: &str, target_rate: Option<f64>) -> LiveMetrics {
        LiveMetrics::with_labels(target, scenario, target_rate, &[])
    }

    /// With request labels (`--requests`, by label id): the requests counter and the latency
    /// histograms get a `label` label. Without labels, the same as [`LiveMetrics::new`].
    pub fn with_labels(target: &str, scenario: &str, target_rate: Option<f64>, label_names: &[String]) -> LiveMetrics {
        let registry = Registry::new();
        let labels = |o: Opts| o.const_label("target", target).const_label("scenario", scenario);
        let requests = IntCounterVec::new(
            labels(Opts::new("perfkit_load_requests_total", "Intended requests by outcome (answers, errors, timeouts, unfinished)")),
            &["outcome"],
        )
        .unwrap();
        let hist = |name: &str, help: &str| {
            Histogram::with_opts(
                HistogramOpts::new(name, help)
                    .const_label("target", target)
                    .const_label("scenario", scenario)
                    .buckets(LATENCY_BUCKETS.to_vec()),
            )
            .unwrap()
        };
        let corrected = hist(
            "perfkit_load_corrected_latency_seconds",
            "Latency from the intended send time (coordinated-omission corrected)",
        );
        let uncorrected =
            hist("perfkit_load_uncorrected_latency_seconds", "Latency from the actual send time");
        let target_g = Gauge::with_opts(labels(Opts::new(
            "perfkit_load_target_rate",
            "Target request rate in requests per second (0 = closed loop)",
        )))
        .unwrap();
        target_g.set(target_rate.unwrap_or(0.0));
        let achieved_rate = Gauge::with_opts(labels(Opts::new(
            "perfkit_load_achieved_rate",
            "Achieved response rate in responses per second since the measurement started",
        )))
        .unwrap();
        for o in Outcome::ALL {
            requests.with_label_values(&[o.name()]);
        }
        let mut labeled = Vec::new();
        if label_names.is_empty() {
            registry.register(Box::new(requests.clone())).unwrap();
            registry.register(Box::new(corrected.clone())).unwrap();
            registry.register(Box::new(uncorrected.clone())).unwrap();
        } else {
            let requests_l = IntCounterVec::new(
                labels(Opts::new("perfkit_load_requests_total", "Intended requests by label and outcome (answers, errors, timeouts, unfinished)")),
                &["label", "outcome"],
            )
            .unwrap();
            let hist_l = |name: &str, help: &str| {
                HistogramVec::new(
                    HistogramOpts::new(name, help)
                        .const_label("target", target)
                        .const_label("scenario", scenario)
                        .buckets(LATENCY_BUCKETS.to_vec()),
                    &["label"],
                )
                .unwrap()
            };
            let corrected_l = hist_l(
                "perfkit_load_corrected_latency_seconds",
                "Latency from the intended send time (coordinated-omission corrected), by request label",
            );
            let uncorrected_l =
                hist_l("perfkit_load_uncorrected_latency_seconds", "Latency from the actual send time, by request label");
            for name in label_names {
                labeled.push(LabelSeries {
                    requests: Outcome::ALL.iter().map(|o| requests_l.with_label_values(&[name.as_str(), o.name()])).collect(),
                    corrected: corrected_l.with_label_values(&[name.as_str()]),
                    uncorrected: uncorrected_l.with_label_values(&[name.as_str()]),
                });
            }
            registry.register(Box::new(requests_l)).unwrap();
            registry.register(Box::new(corrected_l)).unwrap();
            registry.register(Box::new(uncorrected_l)).unwrap();
        }
        registry.register(Box::new(target_g)).unwrap();
        registry.register(Box::new(achieved_rate.clone())).unwrap();
        LiveMetrics {
            registry,
            requests,
            corrected,
            uncorrected,
            achieved_rate,
            responses: AtomicU64::new(0),
            measure_start: Mutex::new(None),
            labeled,
        }
    }

    /// Mark the start of the measurement window (for the achieved-rate gauge).
    pub fn start_measurement(&self, at: Instant) {
        *self.measure_start.lock().unwrap() = Some(at);
    }

    /// The exposition text (Prometheus text format 0.0.4).
    pub fn render(&self) -> String {
        let start = *self.measure_start.lock().unwrap();
        if let Some(start) = start {
            let now = Instant::now();
            if now > start {
                let secs = (now - start).as_secs_f64();
                self.achieved_rate.set(self.responses.load(Ordering::Relaxed) as f64 / secs);
            }
        }
        let mut out = Vec::new();
        TextEncoder::new().encode(&self.registry.gather(), &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }
}

impl Observer for LiveMetrics {
    fn observe(&self, outcome: Outcome, corrected_s: Option<f64>, uncorrected_s: Option<f64>) {
        self.requests.with_label_values(&[outcome.name()]).inc();
        if let Some(c) = corrected_s {
            self.corrected.observe(c);
        }
        if let Some(u) = uncorrected_s {
            self.uncorrected.observe(u);
        }
        if outcome.is_response() {
            self.responses.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn observe_labeled(&self, label: Option<usize>, outcome: Outcome, corrected_s: Option<f64>, uncorrected_s: Option<f64>) {
        let Some(series) = label.and_then(|l| self.labeled.get(l)) else {
            return self.observe(outcome, corrected_s, uncorrected_s);
        };
        series.requests[outcome.index()].inc();
        if let Some(c) = corrected_s {
            series.corrected.observe(c);
        }
        if let Some(u) = uncorrected_s {
            series.uncorrected.observe(u);
        }
        if outcome.is_response() {
            self.responses.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// A tiny HTTP/1.1 server for `GET /metrics`, running on its own thread.
pub struct MetricsServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl MetricsServer {
    /// Bind now (so a bad address fails before any load) and serve in the background.
    pub fn start(addr: SocketAddr, metrics: Arc<LiveMetrics>) -> std::io::Result<MetricsServer> {
        let listener = TcpListener::bind(addr)?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let thread = std::thread::Builder::new()
            .name("perfkit-metrics".into())
            .spawn(move || {
                for conn in listener.incoming() {
                    if stop2.load(Ordering::SeqCst) {
                        break;
                    }
                    if let Ok(conn) = conn {
                        let _ = serve_one(conn, &metrics);
                    }
                }
            })?;
        Ok(MetricsServer { addr, stop, thread: Some(thread) })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the blocking accept.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve_one(mut conn: TcpStream, metrics: &LiveMetrics) -> std::io::Result<()> {
    conn.set_read_timeout(Some(Duration::from_secs(2)))?;
    conn.set_write_timeout(Some(Duration::from_secs(2)))?;
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = conn.read(&mut chunk)?;
        if n == 0 || buf.len() > 16 * 1024 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut req = httparse::Request::new(&mut headers);
    let ok = matches!(req.parse(&buf), Ok(httparse::Status::Complete(_)));
    let path = req.path.unwrap_or("").split('?').next().unwrap_or("");
    let (status, ctype, body) = if !ok {
        ("400 Bad Request", "text/plain", "bad request\n".to_string())
    } else if req.method != Some("GET") {
        ("405 Method Not Allowed", "text/plain", "method not allowed\n".to_string())
    } else if path == "/metrics" || path == "/" {
        ("200 OK", "text/plain; version=0.0.4; charset=utf-8", metrics.render())
    } else {
        ("404 Not Found", "text/plain", "not found\n".to_string())
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    conn.write_all(head.as_bytes())?;
    conn.write_all(body.as_bytes())?;
    Ok(())
}
