//! perfkit metrics for Rust: the kit's uniform Prometheus instrumentation (`../SPEC.md` is the contract the
//! Python package and the D library keep too).
//!
//! - [`LATENCY_BUCKETS`]: the one bucket layout of every latency histogram (25 µs … 10 s).
//! - [`labels`]: the `method`, `status_class` and `host` label values, normalised so that a hostile client cannot
//!   create series.
//! - [`Registry`]: families by name, created on first use; generic [`Counter`], [`Gauge`] and [`Histogram`]
//!   families with any label names; any other `prometheus` collector with [`Registry::register`].
//! - [`standard`]: the standard families as typed wrappers, with the hot-path children resolved once:
//!   [`HttpServerMetrics`] (and its per-route [`RouteMetrics`]), [`HotPaths`] (sampled, [`Sampler`]),
//!   [`HttpClientMetrics`].
//! - [`encode`]: Prometheus text 0.0.4 and OpenMetrics 1.0.0, written by this crate (the `le` values and numbers
//!   exactly as prometheus-client writes them, so series of every language aggregate), and [`Format::from_accept`].
//! - [`server`]: a small blocking `GET /metrics` server on its own thread ([`MetricsServer`]).
//! - [`conformance`]: the observation-script interpreter behind the `perfkit-metrics-conformance` driver.
//!
//! Storage is the `prometheus` crate's (atomics; re-exported as [`prometheus`]); this crate only decides names,
//! labels, buckets and the bytes of the exposition.
//!
//! ```
//! use perfkit_metrics::{Registry, HttpServerMetrics, Format};
//! let registry = Registry::new();
//! let http = HttpServerMetrics::new(&registry, "my_service").unwrap();
//! let items = http.route("/items/{id}"); // resolve once, record per request
//! items.observe("GET", 200, 0.0004);
//! let text = registry.render(Format::Text);
//! assert!(text.contains(r#"http_server_request_duration_seconds_bucket{method="GET",route="/items/{id}",service="my_service",status_class="2xx",le="0.0005"} 1.0"#));
//! ```

pub mod conformance;
pub mod encode;
pub mod labels;
pub mod registry;
pub mod sampler;
pub mod server;
pub mod standard;

pub use prometheus;

pub use encode::{encode, encode_openmetrics, encode_text, Format};
pub use labels::{host_label, host_port_label, method_label, status_class, UNMATCHED_ROUTE};
pub use registry::{default_registry, Counter, Gather, Gauge, Histogram, Kind, Registry};
pub use sampler::Sampler;
pub use server::MetricsServer;
pub use standard::{HotPath, HotPaths, HttpClientMetrics, HttpServerMetrics, RouteMetrics, Stage, DEFAULT_SAMPLE_EVERY};

/// The kit's latency bucket layout in seconds (18 bounds; `+Inf` is implicit). `le` is inclusive.
pub const LATENCY_BUCKETS: [f64; 18] = [
    0.000_025, 0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
    2.5, 5.0, 10.0,
];

/// Standard family names and HELP texts (SPEC.md).
pub mod names {
    pub const HTTP_SERVER: &str = "http_server_request_duration_seconds";
    pub const HTTP_SERVER_HELP: &str = "HTTP server request duration in seconds";
    pub const HTTP_SERVER_LABELS: [&str; 4] = ["service", "route", "method", "status_class"];
    pub const HOTPATH: &str = "perfkit_hotpath_duration_seconds";
    pub const HOTPATH_HELP: &str = "Duration of sampled hot paths in seconds";
    pub const HOTPATH_LABELS: [&str; 2] = ["service", "hotpath"];
    pub const HTTP_CLIENT: &str = "http_client_request_duration_seconds";
    pub const HTTP_CLIENT_HELP: &str = "HTTP client request duration in seconds";
    pub const HTTP_CLIENT_LABELS: [&str; 4] = ["service", "method", "host", "status_class"];
    pub const HTTP_CLIENT_STAGE: &str = "http_client_stage_duration_seconds";
    pub const HTTP_CLIENT_STAGE_HELP: &str = "HTTP client request stage duration in seconds";
    pub const HTTP_CLIENT_STAGE_LABELS: [&str; 2] = ["service", "stage"];
}

/// What can go wrong when creating families: a bad name, a name taken by a different family, a bad bucket
/// layout or sample rate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error(pub String);

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

impl From<prometheus::Error> for Error {
    fn from(e: prometheus::Error) -> Error {
        Error(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_the_spec_layout() {
        let spec = "0.000025 0.00005 0.0001 0.00025 0.0005 0.001 0.0025 0.005 0.01 0.025 0.05 0.1 0.25 0.5 1 2.5 5 10";
        let parsed: Vec<f64> = spec.split(' ').map(|s| s.parse().unwrap()).collect();
        assert_eq!(parsed, LATENCY_BUCKETS.to_vec());
        assert!(LATENCY_BUCKETS.windows(2).all(|w| w[0] < w[1]));
    }
}
