//! Families by name, created on first use, and gathered in the order they were created.
//!
//! Unlike `prometheus::Registry`, a family with no series yet is still gathered (and so announced with HELP and
//! TYPE), as SPEC.md asks; asking again for a family that exists with the same type and label names returns it
//! (the first HELP stays), asking with another type or other label names is an error.

use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use prometheus::core::Collector;
use prometheus::proto::MetricFamily;
use prometheus::{CounterVec, GaugeVec, HistogramOpts, HistogramVec, Opts};

use crate::encode::{encode, Format};
use crate::{Error, LATENCY_BUCKETS};

/// The type of a family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
    /// A collector registered with [`Registry::register`].
    Collector,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
            Kind::Collector => "collector",
        }
    }
}

/// Something that yields metric families to expose: a [`Registry`], or a wrapper that refreshes a gauge or two
/// before gathering (see perfkit-load's live metrics).
pub trait Gather: Send + Sync {
    fn gather(&self) -> Vec<MetricFamily>;

    /// The exposition in `format`.
    fn render(&self, format: Format) -> String {
        let mut out = String::with_capacity(4096);
        encode(&self.gather(), format, &mut out);
        out
    }
}

#[derive(Clone)]
enum Collected {
    Counter(CounterVec),
    Gauge(GaugeVec),
    Histogram(HistogramVec),
    Other(Arc<dyn Collector>),
}

struct Entry {
    family: String,
    kind: Kind,
    labels: Vec<String>,
    buckets: Vec<f64>,
    /// Every sample name the family writes (to refuse a family that would write the same names).
    samples: Vec<String>,
    collected: Collected,
}

/// A set of metric families. Cloning shares it.
#[derive(Clone, Default)]
pub struct Registry {
    entries: Arc<Mutex<Vec<Entry>>>,
}

/// The process-wide registry, for services that need only one.
pub fn default_registry() -> &'static Registry {
    static DEFAULT: OnceLock<Registry> = OnceLock::new();
    DEFAULT.get_or_init(Registry::new)
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let entries = self.lock();
        f.debug_list().entries(entries.iter().map(|e| (&e.family, e.kind))).finish()
    }
}

impl Registry {
    pub fn new() -> Registry {
        Registry::default()
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Entry>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A counter family (float amounts). `name` may end in `_total` or not: both mean the family `x` exposed as
    /// `x_total`. Without label names its one series exists (at 0) from now on.
    pub fn counter(&self, name: &str, help: &str, label_names: &[&str]) -> Result<Counter, Error> {
        let family = name.strip_suffix("_total").unwrap_or(name);
        let total = format!("{family}_total");
        let c = self.get_or_create(family, Kind::Counter, label_names, &[], vec![total.clone()], || {
            let vec = CounterVec::new(Opts::new(total.as_str(), help), label_names)?;
            if label_names.is_empty() {
                vec.with_label_values::<&str>(&[]);
            }
            Ok(Collected::Counter(vec))
        })?;
        match c {
            Collected::Counter(vec) => Ok(Counter { vec, labels: label_names.len() }),
            _ => unreachable!(),
        }
    }

    /// A gauge family.
    pub fn gauge(&self, name: &str, help: &str, label_names: &[&str]) -> Result<Gauge, Error> {
        let g = self.get_or_create(name, Kind::Gauge, label_names, &[], vec![name.to_string()], || {
            let vec = GaugeVec::new(Opts::new(name, help), label_names)?;
            if label_names.is_empty() {
                vec.with_label_values::<&str>(&[]);
            }
            Ok(Collected::Gauge(vec))
        })?;
        match g {
            Collected::Gauge(vec) => Ok(Gauge { vec, labels: label_names.len() }),
            _ => unreachable!(),
        }
    }

    /// A histogram family with the kit's latency buckets ([`LATENCY_BUCKETS`]).
    pub fn histogram(&self, name: &str, help: &str, label_names: &[&str]) -> Result<Histogram, Error> {
        self.histogram_with_buckets(name, help, label_names, &LATENCY_BUCKETS)
    }

    /// A histogram family with buckets of its own (increasing upper bounds; `+Inf` is implicit).
    pub fn histogram_with_buckets(
        &self,
        name: &str,
        help: &str,
        label_names: &[&str],
        buckets: &[f64],
    ) -> Result<Histogram, Error> {
        if buckets.is_empty() || !buckets.windows(2).all(|w| w[0] < w[1]) || buckets.iter().any(|b| b.is_nan()) {
            return Err(Error(format!("histogram {name}: buckets must be increasing upper bounds, not {buckets:?}")));
        }
        if label_names.contains(&"le") {
            return Err(Error(format!("histogram {name}: `le` is the bucket label, not a label name of its own")));
        }
        let samples = ["_bucket", "_count", "_sum"].iter().map(|s| format!("{name}{s}")).collect();
        let h = self.get_or_create(name, Kind::Histogram, label_names, buckets, samples, || {
            let vec = HistogramVec::new(HistogramOpts::new(name, help).buckets(buckets.to_vec()), label_names)?;
            if label_names.is_empty() {
                vec.with_label_values::<&str>(&[]);
            }
            Ok(Collected::Histogram(vec))
        })?;
        match h {
            Collected::Histogram(vec) => Ok(Histogram { vec, labels: label_names.len() }),
            _ => unreachable!(),
        }
    }

    /// Any other `prometheus` collector (const labels, a custom collector, …); exposed by this crate's encoder
    /// like the rest. Its names must not be taken.
    pub fn register(&self, collector: Box<dyn Collector>) -> Result<(), Error> {
        let names: Vec<String> = collector.desc().iter().map(|d| d.fq_name.clone()).collect();
        let Some(first) = names.first().cloned() else {
            return Err(Error("register: the collector describes no metric".into()));
        };
        let collector: Arc<dyn Collector> = Arc::from(collector);
        let mut entries = self.lock();
        for name in &names {
            if let Some(e) = entries.iter().find(|e| e.family == *name || e.samples.contains(name)) {
                return Err(Error(format!("metric {name} is already registered (as a {})", e.kind.name())));
            }
        }
        entries.push(Entry {
            family: first,
            kind: Kind::Collector,
            labels: Vec::new(),
            buckets: Vec::new(),
            samples: names,
            collected: Collected::Other(collector),
        });
        Ok(())
    }

    fn get_or_create(
        &self,
        family: &str,
        kind: Kind,
        label_names: &[&str],
        buckets: &[f64],
        samples: Vec<String>,
        make: impl FnOnce() -> Result<Collected, Error>,
    ) -> Result<Collected, Error> {
        if let Some(l) = label_names.iter().find(|l| l.starts_with("__")) {
            return Err(Error(format!("metric family {family}: label names starting with __ are reserved ({l})")));
        }
        let mut entries = self.lock();
        if let Some(e) = entries.iter().find(|e| e.family == family) {
            if e.kind == kind && e.labels.iter().map(String::as_str).eq(label_names.iter().copied()) && e.buckets == buckets
            {
                return Ok(e.collected.clone());
            }
            return Err(Error(format!(
                "metric family {family} already exists as a {} with labels {:?}{}; asked for a {} with labels {:?}{}",
                e.kind.name(),
                e.labels,
                if e.buckets.is_empty() { String::new() } else { format!(" and buckets {:?}", e.buckets) },
                kind.name(),
                label_names,
                if buckets.is_empty() { String::new() } else { format!(" and buckets {buckets:?}") },
            )));
        }
        for s in samples.iter().chain(std::iter::once(&family.to_string())) {
            if let Some(e) = entries.iter().find(|e| e.samples.contains(s) || e.family == *s) {
                return Err(Error(format!(
                    "metric family {family} would write {s}, which the {} {} writes already",
                    e.kind.name(),
                    e.family
                )));
            }
        }
        let collected = make()?;
        entries.push(Entry {
            family: family.to_string(),
            kind,
            labels: label_names.iter().map(|s| s.to_string()).collect(),
            buckets: buckets.to_vec(),
            samples,
            collected: collected.clone(),
        });
        Ok(collected)
    }

    /// The families in creation order, each one's series sorted by label values. A family without series yet is
    /// included (with no metrics).
    pub fn gather(&self) -> Vec<MetricFamily> {
        let collected: Vec<Collected> = self.lock().iter().map(|e| e.collected.clone()).collect();
        let mut out = Vec::with_capacity(collected.len());
        for c in collected {
            let fams = match &c {
                Collected::Counter(v) => v.collect(),
                Collected::Gauge(v) => v.collect(),
                Collected::Histogram(v) => v.collect(),
                Collected::Other(v) => v.collect(),
            };
            for mut mf in fams {
                mf.mut_metric().sort_by(|a, b| {
                    let (a, b) = (a.get_label(), b.get_label());
                    a.iter().map(|l| l.value()).cmp(b.iter().map(|l| l.value())).then(a.len().cmp(&b.len()))
                });
                out.push(mf);
            }
        }
        out
    }

    /// The exposition in `format`.
    pub fn render(&self, format: Format) -> String {
        Gather::render(self, format)
    }
}

impl Gather for Registry {
    fn gather(&self) -> Vec<MetricFamily> {
        Registry::gather(self)
    }
}

macro_rules! debug_family {
    ($t:ident) => {
        impl std::fmt::Debug for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                let name = self.vec.desc().first().map(|d| d.fq_name.clone()).unwrap_or_default();
                f.debug_struct(stringify!($t)).field("name", &name).field("labels", &self.labels).finish()
            }
        }
    };
}
debug_family!(Counter);
debug_family!(Gauge);
debug_family!(Histogram);

fn check_values(family: &str, want: usize, values: &[&str]) -> Result<(), Error> {
    if values.len() != want {
        return Err(Error(format!("{family}: {} label values for {want} label names", values.len())));
    }
    Ok(())
}

/// A counter family. Resolve a series once with [`Counter::with_label_values`] where it is on a hot path.
#[derive(Clone)]
pub struct Counter {
    vec: CounterVec,
    labels: usize,
}

impl Counter {
    /// The series of these label values (in the order of the family's label names).
    pub fn with_label_values(&self, values: &[&str]) -> Result<prometheus::Counter, Error> {
        check_values("counter", self.labels, values)?;
        Ok(self.vec.get_metric_with_label_values(values)?)
    }

    /// Adds `amount` (not negative) to the series of `values`.
    pub fn inc_by(&self, values: &[&str], amount: f64) -> Result<(), Error> {
        if amount < 0.0 || amount.is_nan() {
            return Err(Error(format!("a counter only goes up: cannot add {amount}")));
        }
        self.with_label_values(values)?.inc_by(amount);
        Ok(())
    }

    pub fn inc(&self, values: &[&str]) -> Result<(), Error> {
        self.inc_by(values, 1.0)
    }

    /// The `prometheus` vector underneath.
    pub fn vec(&self) -> &CounterVec {
        &self.vec
    }
}

/// A gauge family.
#[derive(Clone)]
pub struct Gauge {
    vec: GaugeVec,
    labels: usize,
}

impl Gauge {
    pub fn with_label_values(&self, values: &[&str]) -> Result<prometheus::Gauge, Error> {
        check_values("gauge", self.labels, values)?;
        Ok(self.vec.get_metric_with_label_values(values)?)
    }

    pub fn set(&self, values: &[&str], value: f64) -> Result<(), Error> {
        self.with_label_values(values)?.set(value);
        Ok(())
    }

    pub fn add(&self, values: &[&str], delta: f64) -> Result<(), Error> {
        self.with_label_values(values)?.add(delta);
        Ok(())
    }

    pub fn vec(&self) -> &GaugeVec {
        &self.vec
    }
}

/// A histogram family.
#[derive(Clone)]
pub struct Histogram {
    vec: HistogramVec,
    labels: usize,
}

impl Histogram {
    pub fn with_label_values(&self, values: &[&str]) -> Result<prometheus::Histogram, Error> {
        check_values("histogram", self.labels, values)?;
        Ok(self.vec.get_metric_with_label_values(values)?)
    }

    /// Records `value` (seconds, for a latency histogram) in the series of `values`.
    pub fn observe(&self, values: &[&str], value: f64) -> Result<(), Error> {
        self.with_label_values(values)?.observe(value);
        Ok(())
    }

    pub fn vec(&self) -> &HistogramVec {
        &self.vec
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_are_created_once_and_announced_empty() {
        let r = Registry::new();
        let a = r.counter("events_total", "Events", &["kind"]).unwrap();
        let b = r.counter("events", "Other help is ignored", &["kind"]).unwrap();
        a.inc_by(&["x"], 2.0).unwrap();
        b.inc(&["x"]).unwrap();
        r.gauge("level", "Level", &["zone"]).unwrap();
        let text = r.render(Format::Text);
        assert_eq!(
            text,
            "# HELP events_total Events\n# TYPE events_total counter\nevents_total{kind=\"x\"} 3.0\n\
             # HELP level Level\n# TYPE level gauge\n"
        );
    }

    #[test]
    fn unlabelled_families_have_their_series_at_once() {
        let r = Registry::new();
        r.counter("plain", "Plain", &[]).unwrap();
        r.gauge("g", "G", &[]).unwrap();
        r.histogram("h_seconds", "H", &[]).unwrap();
        let text = r.render(Format::Text);
        assert!(text.contains("\nplain_total 0.0\n"), "{text}");
        assert!(text.contains("\ng 0.0\n"), "{text}");
        assert!(text.contains("\nh_seconds_bucket{le=\"2.5e-05\"} 0.0\n"), "{text}");
        assert!(text.contains("\nh_seconds_count 0.0\nh_seconds_sum 0.0\n"), "{text}");
    }

    #[test]
    fn conflicts_are_errors() {
        let r = Registry::new();
        r.counter("x", "X", &["a"]).unwrap();
        assert!(r.counter("x_total", "X", &["b"]).unwrap_err().0.contains("already exists as a counter"));
        assert!(r.gauge("x", "X", &["a"]).unwrap_err().0.contains("already exists"));
        assert!(r.gauge("x_total", "X", &["a"]).unwrap_err().0.contains("writes already"));
        r.histogram("h", "H", &[]).unwrap();
        assert!(r.gauge("h_count", "H", &[]).unwrap_err().0.contains("writes already"));
        assert!(r.histogram_with_buckets("h", "H", &[], &[1.0]).unwrap_err().0.contains("buckets"));
        assert!(r.histogram_with_buckets("h2", "H", &[], &[2.0, 1.0]).unwrap_err().0.contains("increasing"));
        assert!(r.histogram("h3", "H", &["le"]).is_err());
        assert!(r.gauge("bad name", "B", &[]).is_err());
        assert!(r.gauge("g", "G", &["bad-label"]).is_err());
        assert!(r.gauge("g", "G", &["__x"]).unwrap_err().0.contains("reserved"));
        // A failed creation leaves nothing behind.
        assert!(r.gauge("g", "G", &["ok"]).is_ok());
    }

    #[test]
    fn label_values_are_checked_and_counters_only_go_up() {
        let r = Registry::new();
        let c = r.counter("c", "C", &["a", "b"]).unwrap();
        assert!(c.inc(&["1"]).unwrap_err().0.contains("1 label values for 2"));
        assert!(c.inc_by(&["1", "2"], -1.0).unwrap_err().0.contains("only goes up"));
        let g = r.gauge("g", "G", &["a"]).unwrap();
        g.set(&["x"], -2.5).unwrap();
        g.add(&["x"], 1.0).unwrap();
        assert_eq!(g.with_label_values(&["x"]).unwrap().get(), -1.5);
        let h = r.histogram_with_buckets("h", "H", &["a"], &[1.0, 2.0]).unwrap();
        h.observe(&["x"], 1.5).unwrap();
        assert!(h.observe(&[], 1.5).is_err());
        assert!(r.render(Format::Text).contains("h_bucket{a=\"x\",le=\"2.0\"} 1.0\n"));
    }

    #[test]
    fn foreign_collectors() {
        let r = Registry::new();
        let c = prometheus::IntCounter::with_opts(Opts::new("ext_total", "Ext").const_label("t", "u")).unwrap();
        r.register(Box::new(c.clone())).unwrap();
        assert!(r.register(Box::new(c.clone())).unwrap_err().0.contains("already registered"));
        assert!(r.counter("ext", "E", &[]).is_err());
        c.inc();
        assert!(r.render(Format::Text).contains("ext_total{t=\"u\"} 1.0\n"));
    }

    #[test]
    fn series_sorted_by_label_values_and_families_in_creation_order() {
        let r = Registry::new();
        let g = r.gauge("zz", "Z", &["k"]).unwrap();
        r.gauge("aa", "A", &[]).unwrap();
        for k in ["c", "a", "b"] {
            g.set(&[k], 1.0).unwrap();
        }
        let text = r.render(Format::Text);
        assert!(text.starts_with("# HELP zz Z\n# TYPE zz gauge\nzz{k=\"a\"} 1.0\nzz{k=\"b\"} 1.0\nzz{k=\"c\"} 1.0\n# HELP aa"), "{text}");
    }

    #[test]
    fn shared_between_clones_and_threads() {
        let r = Registry::new();
        let r2 = r.clone();
        std::thread::spawn(move || r2.counter("t", "T", &[]).unwrap().inc(&[]).unwrap()).join().unwrap();
        assert!(r.render(Format::OpenMetrics).contains("t_total 1.0\n"));
        assert!(std::ptr::eq(default_registry(), default_registry()));
    }
}
