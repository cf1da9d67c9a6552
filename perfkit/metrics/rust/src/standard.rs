//! The standard families (SPEC.md) as typed wrappers.
//!
//! On a hot path nothing is looked up by label values: a [`RouteMetrics`] holds one slot per method × status
//! class, resolved on first use (so no empty series appear), a [`HotPath`] holds its series and its [`Sampler`],
//! and [`HttpClientMetrics`] holds one slot per [`Stage`].

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use prometheus::{Histogram, HistogramVec};

use crate::labels::{class_index, method_index, method_label, status_class, METHODS, STATUS_CLASSES, UNMATCHED_ROUTE};
use crate::names;
use crate::registry::Registry;
use crate::sampler::Sampler;
use crate::Error;

/// Hot paths are timed on one call in this many unless told otherwise.
pub const DEFAULT_SAMPLE_EVERY: u64 = 64;

fn family(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> Result<HistogramVec, Error> {
    Ok(registry.histogram(name, help, labels)?.vec().clone())
}

/// `http_server_request_duration_seconds{service,route,method,status_class}` for one service.
#[derive(Clone)]
pub struct HttpServerMetrics {
    vec: HistogramVec,
    service: String,
}

impl HttpServerMetrics {
    /// The family in `registry` (created if needed), for `service`.
    pub fn new(registry: &Registry, service: &str) -> Result<HttpServerMetrics, Error> {
        let vec = family(registry, names::HTTP_SERVER, names::HTTP_SERVER_HELP, &names::HTTP_SERVER_LABELS)?;
        Ok(HttpServerMetrics { vec, service: service.to_string() })
    }

    /// The series of one route template (resolve once at start-up, record per request).
    pub fn route(&self, route: &str) -> RouteMetrics {
        RouteMetrics {
            vec: self.vec.clone(),
            service: self.service.clone(),
            route: route.to_string(),
            slots: Box::new(std::array::from_fn(|_| OnceLock::new())),
        }
    }

    /// The series of requests that matched no route (`<unmatched>`).
    pub fn unmatched(&self) -> RouteMetrics {
        self.route(UNMATCHED_ROUTE)
    }

    /// Records one request, looking its series up by label values (use [`HttpServerMetrics::route`] on a hot
    /// path). `method` is normalised ([`method_label`]), `status` becomes its class ([`status_class`]).
    pub fn observe(&self, route: &str, method: &str, status: u32, seconds: f64) {
        self.vec
            .with_label_values(&[self.service.as_str(), route, method_label(method), status_class(status)])
            .observe(seconds);
    }

    pub fn service(&self) -> &str {
        &self.service
    }
}

const SLOTS: usize = METHODS.len() * STATUS_CLASSES.len();

/// The server series of one route: one slot per method × status class, each resolved on its first request.
pub struct RouteMetrics {
    vec: HistogramVec,
    service: String,
    route: String,
    slots: Box<[OnceLock<Histogram>; SLOTS]>,
}

impl RouteMetrics {
    /// Records one request of this route: `seconds` from its start to its response.
    #[inline]
    pub fn observe(&self, method: &str, status: u32, seconds: f64) {
        self.series(method, status).observe(seconds);
    }

    /// [`RouteMetrics::observe`] with a `Duration`.
    #[inline]
    pub fn observe_duration(&self, method: &str, status: u32, elapsed: Duration) {
        self.observe(method, status, elapsed.as_secs_f64());
    }

    /// Records one request that started at `start`, ending now.
    #[inline]
    pub fn observe_since(&self, method: &str, status: u32, start: Instant) {
        self.observe_duration(method, status, start.elapsed());
    }

    /// The series of a method and status (resolved on first use, then a slot read).
    #[inline]
    pub fn series(&self, method: &str, status: u32) -> &Histogram {
        let (m, c) = (method_index(method), class_index(status));
        self.slots[m * STATUS_CLASSES.len() + c].get_or_init(|| {
            self.vec.with_label_values(&[self.service.as_str(), self.route.as_str(), METHODS[m], STATUS_CLASSES[c]])
        })
    }

    pub fn route(&self) -> &str {
        &self.route
    }
}

/// `perfkit_hotpath_duration_seconds{service,hotpath}` for one service, sampled.
#[derive(Clone)]
pub struct HotPaths {
    vec: HistogramVec,
    service: String,
    sample_every: u64,
}

impl HotPaths {
    /// The family in `registry` for `service`; hot paths made from it time one call in [`DEFAULT_SAMPLE_EVERY`].
    pub fn new(registry: &Registry, service: &str) -> Result<HotPaths, Error> {
        HotPaths::with_sample_every(registry, service, DEFAULT_SAMPLE_EVERY)
    }

    /// As [`HotPaths::new`], timing one call in `sample_every` (a power of two; 1 = every call).
    pub fn with_sample_every(registry: &Registry, service: &str, sample_every: u64) -> Result<HotPaths, Error> {
        Sampler::new(sample_every)?;
        let vec = family(registry, names::HOTPATH, names::HOTPATH_HELP, &names::HOTPATH_LABELS)?;
        Ok(HotPaths { vec, service: service.to_string(), sample_every })
    }

    /// One hot path (`parse`, `route_match`, `serialize`, …), with its own sampler.
    pub fn path(&self, hotpath: &str) -> HotPath {
        HotPath {
            series: self.vec.with_label_values(&[self.service.as_str(), hotpath]),
            sampler: Sampler::new(self.sample_every).expect("checked in new"),
        }
    }

    pub fn sample_every(&self) -> u64 {
        self.sample_every
    }
}

/// One hot path's series and sampler.
///
/// ```
/// # let registry = perfkit_metrics::Registry::new();
/// let hot = perfkit_metrics::HotPaths::new(&registry, "svc").unwrap();
/// let parse = hot.path("parse");
/// let t = parse.start();          // Some(now) on one call in 64, else None
/// // ... the work ...
/// parse.stop(t);
/// let n = parse.time(|| 6 * 7);   // the same around a closure
/// # assert_eq!(n, 42);
/// ```
pub struct HotPath {
    series: Histogram,
    sampler: Sampler,
}

impl HotPath {
    /// `Some(now)` when this call is sampled.
    #[inline]
    pub fn start(&self) -> Option<Instant> {
        if self.sampler.sample() {
            Some(Instant::now())
        } else {
            None
        }
    }

    /// Records the time since `start` if there is one.
    #[inline]
    pub fn stop(&self, start: Option<Instant>) {
        if let Some(t) = start {
            self.series.observe(t.elapsed().as_secs_f64());
        }
    }

    /// Runs `f`, timing it if this call is sampled.
    #[inline]
    pub fn time<R>(&self, f: impl FnOnce() -> R) -> R {
        let t = self.start();
        let r = f();
        self.stop(t);
        r
    }

    /// Records a duration measured elsewhere, unsampled.
    pub fn record(&self, seconds: f64) {
        self.series.observe(seconds);
    }

    pub fn sampler(&self) -> &Sampler {
        &self.sampler
    }
}

/// A stage of a client request (`http_client_stage_duration_seconds{stage}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    PoolWait,
    Connect,
    Tls,
    Ttfb,
    Transfer,
    Decode,
}

impl Stage {
    pub const ALL: [Stage; 6] = [Stage::PoolWait, Stage::Connect, Stage::Tls, Stage::Ttfb, Stage::Transfer, Stage::Decode];

    /// The `stage` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::PoolWait => "pool_wait",
            Stage::Connect => "connect",
            Stage::Tls => "tls",
            Stage::Ttfb => "ttfb",
            Stage::Transfer => "transfer",
            Stage::Decode => "decode",
        }
    }

    /// The stage of a label value.
    pub fn from_name(name: &str) -> Option<Stage> {
        Stage::ALL.into_iter().find(|s| s.as_str() == name)
    }
}

/// `http_client_request_duration_seconds{service,method,host,status_class}` and
/// `http_client_stage_duration_seconds{service,stage}` for one service.
pub struct HttpClientMetrics {
    requests: HistogramVec,
    stages: HistogramVec,
    service: String,
    stage_slots: [OnceLock<Histogram>; 6],
}

impl HttpClientMetrics {
    pub fn new(registry: &Registry, service: &str) -> Result<HttpClientMetrics, Error> {
        let requests = family(registry, names::HTTP_CLIENT, names::HTTP_CLIENT_HELP, &names::HTTP_CLIENT_LABELS)?;
        let stages =
            family(registry, names::HTTP_CLIENT_STAGE, names::HTTP_CLIENT_STAGE_HELP, &names::HTTP_CLIENT_STAGE_LABELS)?;
        Ok(HttpClientMetrics { requests, stages, service: service.to_string(), stage_slots: Default::default() })
    }

    /// Records one request: `host` as [`crate::host_label`] or [`crate::host_port_label`] makes it, `status` 0
    /// when there was no response (refused, reset, timed out).
    pub fn observe(&self, method: &str, host: &str, status: u32, seconds: f64) {
        self.requests
            .with_label_values(&[self.service.as_str(), method_label(method), host, status_class(status)])
            .observe(seconds);
    }

    /// Records one stage of a request.
    #[inline]
    pub fn stage(&self, stage: Stage, seconds: f64) {
        self.stage_slots[stage as usize]
            .get_or_init(|| self.stages.with_label_values(&[self.service.as_str(), stage.as_str()]))
            .observe(seconds);
    }

    pub fn service(&self) -> &str {
        &self.service
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Format;

    #[test]
    fn server_routes_resolve_on_first_use_only() {
        let r = Registry::new();
        let http = HttpServerMetrics::new(&r, "svc").unwrap();
        let items = http.route("/items/{id}");
        let text = r.render(Format::Text);
        assert!(text.contains("# TYPE http_server_request_duration_seconds histogram\n"), "{text}");
        assert!(!text.contains("_bucket"), "no series before a request: {text}");
        items.observe("GET", 200, 0.0003);
        items.observe("GET", 204, 0.0004);
        items.observe("BREW", 700, 1.0);
        http.unmatched().observe("get", 404, 0.00001);
        http.observe("/items/{id}", "GET", 299, 0.5);
        let text = r.render(Format::Text);
        let l = r#"method="GET",route="/items/{id}",service="svc",status_class="2xx""#;
        assert!(text.contains(&format!("http_server_request_duration_seconds_bucket{{{l},le=\"0.00025\"}} 0.0\n")), "{text}");
        assert!(text.contains(&format!("http_server_request_duration_seconds_bucket{{{l},le=\"0.0005\"}} 2.0\n")), "{text}");
        assert!(text.contains(&format!("http_server_request_duration_seconds_count{{{l}}} 3.0\n")), "{text}");
        assert!(text.contains(r#"{method="OTHER",route="/items/{id}",service="svc",status_class="other",le="+Inf"} 1.0"#));
        assert!(text.contains(r#"{method="OTHER",route="<unmatched>",service="svc",status_class="4xx",le="2.5e-05"} 1.0"#));
        assert_eq!(text.matches("_count{").count(), 3, "{text}");
        // A second wrapper of the family (another service) shares it.
        HttpServerMetrics::new(&r, "other").unwrap().observe("/", "GET", 200, 0.1);
        assert!(r.render(Format::Text).contains(r#"service="other""#));
    }

    #[test]
    fn hot_paths_are_sampled() {
        let r = Registry::new();
        let hot = HotPaths::with_sample_every(&r, "svc", 4).unwrap();
        let p = hot.path("parse");
        for _ in 0..16 {
            p.time(|| ());
        }
        p.record(0.5);
        let text = r.render(Format::Text);
        assert!(text.contains("perfkit_hotpath_duration_seconds_count{hotpath=\"parse\",service=\"svc\"} 5.0\n"), "{text}");
        assert!(HotPaths::with_sample_every(&r, "svc", 3).is_err());
        assert_eq!(HotPaths::new(&r, "svc").unwrap().sample_every(), 64);
        let p = HotPaths::new(&r, "svc").unwrap().path("write");
        assert!(p.start().is_some());
        assert!((0..63).all(|_| p.start().is_none()));
    }

    #[test]
    fn client_requests_and_stages() {
        let r = Registry::new();
        let c = HttpClientMetrics::new(&r, "cli").unwrap();
        c.observe("GET", "example.org:443", 200, 0.01);
        c.observe("GET", "example.org:443", 0, 5.0);
        c.stage(Stage::Connect, 0.0002);
        c.stage(Stage::Connect, 0.0003);
        c.stage(Stage::Tls, 0.004);
        let text = r.render(Format::Text);
        assert!(text.contains(r#"http_client_request_duration_seconds_count{host="example.org:443",method="GET",service="cli",status_class="error"} 1.0"#), "{text}");
        assert!(text.contains(r#"http_client_stage_duration_seconds_count{service="cli",stage="connect"} 2.0"#), "{text}");
        assert!(!text.contains(r#"stage="ttfb""#));
        assert_eq!(Stage::from_name("pool_wait"), Some(Stage::PoolWait));
        assert_eq!(Stage::from_name("nope"), None);
        assert!(Stage::ALL.iter().enumerate().all(|(i, s)| *s as usize == i));
    }

    #[test]
    fn standard_names_conflict_with_other_shapes() {
        let r = Registry::new();
        r.histogram(names::HTTP_SERVER, "x", &["service"]).unwrap();
        assert!(HttpServerMetrics::new(&r, "svc").is_err());
    }
}
