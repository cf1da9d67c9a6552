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
//! The buckets, the exposition (text, or OpenMetrics when the scraper asks for it) and the `/metrics` server
//! are the kit's metrics library's (`perfkit-metrics`): latency buckets 25 µs … 10 s, `le` written as every
//! language of the kit writes it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use perfkit_metrics::prometheus::proto::MetricFamily;
use perfkit_metrics::prometheus::{Gauge, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, Opts};
use perfkit_metrics::{Format, Gather, Registry, LATENCY_BUCKETS};

use crate::recording::{Observer, Outcome};

pub use perfkit_metrics::MetricsServer;

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
        Gather::render(self, Format::Text)
    }
}

impl Gather for LiveMetrics {
    /// The families, with the achieved rate brought up to date first.
    fn gather(&self) -> Vec<MetricFamily> {
        let start = *self.measure_start.lock().unwrap();
        if let Some(start) = start {
            let now = Instant::now();
            if now > start {
                let secs = (now - start).as_secs_f64();
                self.achieved_rate.set(self.responses.load(Ordering::Relaxed) as f64 / secs);
            }
        }
        self.registry.gather()
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
