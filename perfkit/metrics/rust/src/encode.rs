//! The exposition, written by this crate: Prometheus text format 0.0.4 and OpenMetrics 1.0.0 (SPEC.md).
//!
//! Numbers and `le` values are written as prometheus-client (Python) writes them — Python's `repr` of the float,
//! with Go's switch to an exponent above 1e6 — so that `le="2.5e-05"` and `le="1.0"` of every language fall in
//! one series (the `prometheus` crate's own TextEncoder writes `0.000025` and `1`). Labels are sorted by name, `le`
//! comes last; histograms write their buckets, `+Inf`, `_count`, `_sum`; counters are exposed as `x_total`. No
//! `_created` series, no timestamps.

use std::fmt::Write;

use prometheus::proto::{LabelPair, Metric, MetricFamily, MetricType};

/// An exposition format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Prometheus text format 0.0.4.
    Text,
    /// OpenMetrics 1.0.0 (ends with `# EOF`).
    OpenMetrics,
}

impl Format {
    pub const TEXT_CONTENT_TYPE: &'static str = "text/plain; version=0.0.4; charset=utf-8";
    pub const OPENMETRICS_CONTENT_TYPE: &'static str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

    /// The `Content-Type` of a response in this format.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Text => Format::TEXT_CONTENT_TYPE,
            Format::OpenMetrics => Format::OPENMETRICS_CONTENT_TYPE,
        }
    }

    /// Content negotiation: OpenMetrics when the `Accept` header names `application/openmetrics-text` (without a
    /// version, or version 1.x or 0.0.1, and not with `q=0`), else the text format.
    pub fn from_accept(accept: Option<&str>) -> Format {
        let Some(accept) = accept else { return Format::Text };
        for range in accept.split(',') {
            let mut params = range.split(';');
            let media = params.next().unwrap_or("").trim();
            if !media.eq_ignore_ascii_case("application/openmetrics-text") {
                continue;
            }
            let acceptable = params.all(|p| {
                let (k, v) = p.split_once('=').unwrap_or((p, ""));
                let v = v.trim().trim_matches('"');
                match k.trim().to_ascii_lowercase().as_str() {
                    "version" => v == "1" || v.starts_with("1.") || v == "0.0.1",
                    "q" => v.parse::<f64>().map_or(true, |q| q > 0.0),
                    _ => true,
                }
            });
            if acceptable {
                return Format::OpenMetrics;
            }
        }
        Format::Text
    }
}

/// Encodes gathered families in `format`, appending to `out`.
pub fn encode(families: &[MetricFamily], format: Format, out: &mut String) {
    match format {
        Format::Text => encode_text(families, out),
        Format::OpenMetrics => encode_openmetrics(families, out),
    }
}

/// Prometheus text format 0.0.4. A family with no series is still announced (HELP and TYPE).
pub fn encode_text(families: &[MetricFamily], out: &mut String) {
    let mut scratch = Scratch::default();
    for mf in families {
        encode_family(mf, false, out, &mut scratch);
    }
}

/// OpenMetrics 1.0.0, ending with `# EOF`.
pub fn encode_openmetrics(families: &[MetricFamily], out: &mut String) {
    let mut scratch = Scratch::default();
    for mf in families {
        encode_family(mf, true, out, &mut scratch);
    }
    out.push_str("# EOF\n");
}

#[derive(Default)]
struct Scratch {
    labels: String,
}

fn encode_family(mf: &MetricFamily, om: bool, out: &mut String, scratch: &mut Scratch) {
    let name = mf.name();
    let kind = mf.get_field_type();
    // Counters: the family is `x`, its sample `x_total`; the text format announces the sample name.
    let family = if kind == MetricType::COUNTER { name.strip_suffix("_total").unwrap_or(name) } else { name };
    let announced = if kind == MetricType::COUNTER && !om { "_total" } else { "" };
    let type_name = match (kind, om) {
        (MetricType::COUNTER, _) => "counter",
        (MetricType::GAUGE, _) => "gauge",
        (MetricType::HISTOGRAM, _) => "histogram",
        (MetricType::SUMMARY, _) => "summary",
        (MetricType::UNTYPED, false) => "untyped",
        (MetricType::UNTYPED, true) => "unknown",
    };
    out.push_str("# HELP ");
    out.push_str(family);
    out.push_str(announced);
    out.push(' ');
    escape_help(out, mf.help(), om);
    out.push_str("\n# TYPE ");
    out.push_str(family);
    out.push_str(announced);
    out.push(' ');
    out.push_str(type_name);
    out.push('\n');
    for m in mf.get_metric() {
        labels_of(m, scratch);
        let labels = scratch.labels.as_str();
        match kind {
            MetricType::COUNTER => sample(out, family, "_total", labels, None, m.get_counter().get_value()),
            MetricType::GAUGE => sample(out, family, "", labels, None, m.get_gauge().get_value()),
            #[allow(deprecated)] // "protobuf specific" in the crate's plain model, but the value of an untyped series
            MetricType::UNTYPED => sample(out, family, "", labels, None, m.get_untyped().get_value()),
            MetricType::HISTOGRAM => {
                let h = m.get_histogram();
                let mut inf_written = false;
                for b in h.get_bucket() {
                    let bound = b.upper_bound();
                    inf_written |= bound == f64::INFINITY;
                    sample(out, family, "_bucket", labels, Some(("le", bound)), b.cumulative_count() as f64);
                }
                let count = h.get_sample_count() as f64;
                if !inf_written {
                    sample(out, family, "_bucket", labels, Some(("le", f64::INFINITY)), count);
                }
                sample(out, family, "_count", labels, None, count);
                sample(out, family, "_sum", labels, None, h.get_sample_sum());
            }
            MetricType::SUMMARY => {
                let s = m.get_summary();
                for q in s.get_quantile() {
                    sample(out, family, "", labels, Some(("quantile", q.quantile())), q.value());
                }
                sample(out, family, "_count", labels, None, s.sample_count() as f64);
                sample(out, family, "_sum", labels, None, s.sample_sum());
            }
        }
    }
}

/// The metric's labels, sorted by name, as `a="x",b="y"` in `scratch.labels`.
fn labels_of(m: &Metric, scratch: &mut Scratch) {
    scratch.labels.clear();
    let pairs = m.get_label();
    let write = |out: &mut String, lp: &LabelPair| {
        if !out.is_empty() {
            out.push(',');
        }
        out.push_str(lp.name());
        out.push_str("=\"");
        escape_label_value(out, lp.value());
        out.push('"');
    };
    if pairs.windows(2).all(|w| w[0].name() <= w[1].name()) {
        for lp in pairs {
            write(&mut scratch.labels, lp);
        }
    } else {
        // Not from this crate's storage (a collector of the user's own): sort.
        let mut sorted: Vec<&LabelPair> = pairs.iter().collect();
        sorted.sort_by(|a, b| a.name().cmp(b.name()));
        for lp in sorted {
            write(&mut scratch.labels, lp);
        }
    }
}

fn sample(out: &mut String, family: &str, suffix: &str, labels: &str, extra: Option<(&str, f64)>, value: f64) {
    out.push_str(family);
    out.push_str(suffix);
    if !labels.is_empty() || extra.is_some() {
        out.push('{');
        out.push_str(labels);
        if let Some((k, v)) = extra {
            if !labels.is_empty() {
                out.push(',');
            }
            out.push_str(k);
            out.push_str("=\"");
            push_float(out, v);
            out.push('"');
        }
        out.push('}');
    }
    out.push(' ');
    push_float(out, value);
    out.push('\n');
}

/// Label values: `\` `"` and newline as `\\` `\"` `\n`.
fn escape_label_value(out: &mut String, v: &str) {
    if !v.contains(['\\', '"', '\n']) {
        out.push_str(v);
        return;
    }
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// HELP: `\` and newline escaped; in OpenMetrics also `"` (as prometheus-client does).
fn escape_help(out: &mut String, v: &str, om: bool) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '"' if om => out.push_str("\\\""),
            c => out.push(c),
        }
    }
}

/// Appends `v` as prometheus-client writes a float (its `floatToGoString`): `+Inf`, `-Inf`, `NaN`; otherwise
/// Python's `repr` (shortest round-trip digits; an exponent below 1e-4 and from 1e16 on; `.0` on integers), except
/// that a positive number of 7 or more integer digits is written with an exponent, as Go does (`1e+06`).
pub fn push_float(out: &mut String, v: f64) {
    if v.is_nan() {
        out.push_str("NaN");
        return;
    }
    if v.is_infinite() {
        out.push_str(if v > 0.0 { "+Inf" } else { "-Inf" });
        return;
    }
    if v == 0.0 {
        out.push_str(if v.is_sign_negative() { "-0.0" } else { "0.0" });
        return;
    }
    // Shortest round-trip digits and the decimal exponent, from Rust's `{:e}` ("2.5e-5"). Where two strings of
    // that many digits are equally close to the value, `{:e}` may take the upper one and Python the even one:
    // the exact formatting at that many digits rounds half to even, as Python does (kept if it round-trips).
    let mut sci = String::with_capacity(32);
    let _ = write!(sci, "{:e}", v.abs());
    let nd = sci.find('e').unwrap_or(sci.len()) - usize::from(sci.contains('.'));
    if nd > 1 {
        let mut exact = String::with_capacity(32);
        let _ = write!(exact, "{:.*e}", nd - 1, v.abs());
        if exact != sci && exact.parse::<f64>() == Ok(v.abs()) {
            sci = exact;
        }
    }
    let (mantissa, exp) = sci.split_once('e').expect("{:e} has an exponent");
    let exp: i32 = exp.parse().expect("{:e} exponent");
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let nd = digits.len() as i32;
    let decpt = exp + 1; // the point's position relative to the digits
    let start = out.len();
    if v < 0.0 {
        out.push('-');
    }
    if !(-4 < decpt && decpt <= 16) {
        out.push_str(&digits[..1]);
        if nd > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let _ = write!(out, "e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs());
        return;
    }
    if decpt <= 0 {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', (-decpt) as usize));
        out.push_str(&digits);
    } else if decpt >= nd {
        out.push_str(&digits);
        out.extend(std::iter::repeat_n('0', (decpt - nd) as usize));
        out.push_str(".0");
    } else {
        out.push_str(&digits[..decpt as usize]);
        out.push('.');
        out.push_str(&digits[decpt as usize..]);
    }
    // Go switches to an exponent sooner than Python: 7+ integer digits of a positive number.
    let dot = decpt.max(1) as usize;
    if v > 0.0 && dot > 6 {
        let s = out[start..].to_string();
        let mut m = String::with_capacity(s.len() + 1);
        m.push_str(&s[..1]);
        m.push('.');
        m.push_str(&s[1..dot]);
        m.push_str(&s[dot + 1..]);
        let m = m.trim_end_matches(['0', '.']);
        out.truncate(start);
        let _ = write!(out, "{m}e+{:02}", dot - 1);
    }
}

/// `v` as [`push_float`] writes it.
pub fn format_float(v: f64) -> String {
    let mut s = String::new();
    push_float(&mut s, v);
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::LATENCY_BUCKETS;

    #[test]
    fn le_values_are_prometheus_clients() {
        let want = "2.5e-05 5e-05 0.0001 0.00025 0.0005 0.001 0.0025 0.005 0.01 0.025 0.05 0.1 0.25 0.5 1.0 2.5 5.0 10.0";
        let got: Vec<String> = LATENCY_BUCKETS.iter().map(|b| format_float(*b)).collect();
        assert_eq!(got.join(" "), want);
        assert_eq!(format_float(f64::INFINITY), "+Inf");
    }

    #[test]
    fn floats_like_python_repr_and_go() {
        // Expected strings are prometheus_client.utils.floatToGoString's (checked against prometheus-client 0.26).
        let cases: &[(f64, &str)] = &[
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (1.0, "1.0"),
            (3.0, "3.0"),
            (-1.25, "-1.25"),
            (0.1, "0.1"),
            (0.0001, "0.0001"),
            (0.00009, "9e-05"),
            (0.0000001, "1e-07"),
            (0.0000251, "2.51e-05"),
            (1e-300, "1e-300"),
            (5e-324, "5e-324"),
            (123456.0, "123456.0"),
            (999999.5, "999999.5"),
            (1000000.0, "1e+06"),
            (1234567.0, "1.234567e+06"),
            (1234567.125, "1.234567125e+06"),
            (10000000.0, "1e+07"),
            (123456789012.0, "1.23456789012e+11"),
            (1e15, "1e+15"),
            (1e16, "1e+16"),
            (1.5e17, "1.5e+17"),
            (-1234567.0, "-1234567.0"),
            (-1e16, "-1e+16"),
            (-0.00002, "-2e-05"),
            (3600.0, "3600.0"),
            (10.000001, "10.000001"),
            (0.30000000000000004, "0.30000000000000004"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (f64::NEG_INFINITY, "-Inf"),
            // Two 17-digit strings equally close: Python takes the even one.
            (2007261778798384.2, "2.0072617787983842e+15"),
            (-126430982921026.62, "-126430982921026.62"),
            (f64::NAN, "NaN"),
        ];
        for (v, want) in cases {
            assert_eq!(format_float(*v), *want, "{v:e}");
        }
    }

    #[test]
    fn negotiation() {
        let om = [
            "application/openmetrics-text",
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            "application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.1",
            "text/plain;version=0.0.4;q=0.9, Application/OpenMetrics-Text; version=\"1.0.0\"",
            "application/openmetrics-text;version=0.0.1",
            "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6",
        ];
        for a in om {
            assert_eq!(Format::from_accept(Some(a)), Format::OpenMetrics, "{a}");
        }
        let text = [
            "",
            "*/*",
            "text/plain",
            "text/plain;version=0.0.4",
            "application/json",
            "application/openmetrics-text;version=2.0.0",
            "application/openmetrics-text;q=0",
            "application/openmetrics-textual",
        ];
        for a in text {
            assert_eq!(Format::from_accept(Some(a)), Format::Text, "{a}");
        }
        assert_eq!(Format::from_accept(None), Format::Text);
        assert_eq!(Format::Text.content_type(), "text/plain; version=0.0.4; charset=utf-8");
        assert_eq!(Format::OpenMetrics.content_type(), "application/openmetrics-text; version=1.0.0; charset=utf-8");
    }

    #[test]
    fn families_of_each_kind() {
        use prometheus::core::Collector;
        use prometheus::{CounterVec, GaugeVec, HistogramOpts, HistogramVec, Opts};
        let c = CounterVec::new(Opts::new("req_total", "Requests \"all\"\\ of\nthem"), &["zone", "kind"]).unwrap();
        c.with_label_values(&["eu", "a\"b\\c\nd"]).inc_by(3.0);
        let g = GaugeVec::new(Opts::new("level", "A level"), &["zone"]).unwrap();
        let h = HistogramVec::new(HistogramOpts::new("wait_seconds", "Wait").buckets(vec![0.5, 1.0]), &["q"]).unwrap();
        h.with_label_values(&["x"]).observe(0.75);
        h.with_label_values(&["x"]).observe(7.0);
        let fams: Vec<MetricFamily> = [c.collect(), g.collect(), h.collect()].concat();
        let mut text = String::new();
        encode_text(&fams, &mut text);
        assert_eq!(
            text,
            concat!(
                "# HELP req_total Requests \"all\"\\\\ of\\nthem\n",
                "# TYPE req_total counter\n",
                "req_total{kind=\"a\\\"b\\\\c\\nd\",zone=\"eu\"} 3.0\n",
                "# HELP level A level\n",
                "# TYPE level gauge\n",
                "# HELP wait_seconds Wait\n",
                "# TYPE wait_seconds histogram\n",
                "wait_seconds_bucket{q=\"x\",le=\"0.5\"} 0.0\n",
                "wait_seconds_bucket{q=\"x\",le=\"1.0\"} 1.0\n",
                "wait_seconds_bucket{q=\"x\",le=\"+Inf\"} 2.0\n",
                "wait_seconds_count{q=\"x\"} 2.0\n",
                "wait_seconds_sum{q=\"x\"} 7.75\n",
            )
        );
        let mut om = String::new();
        encode_openmetrics(&fams, &mut om);
        assert!(om.starts_with(concat!(
            "# HELP req Requests \\\"all\\\"\\\\ of\\nthem\n",
            "# TYPE req counter\n",
            "req_total{kind=\"a\\\"b\\\\c\\nd\",zone=\"eu\"} 3.0\n",
            "# HELP level A level\n",
        )), "{om}");
        assert!(om.ends_with("wait_seconds_sum{q=\"x\"} 7.75\n# EOF\n"), "{om}");
        assert!(!om.contains("_created"));
    }

    #[test]
    fn unlabelled_series_and_foreign_collectors() {
        use prometheus::core::Collector;
        use prometheus::{Histogram, HistogramOpts, IntCounter, Opts};
        let c = IntCounter::with_opts(Opts::new("plain_total", "Plain").const_label("b", "2").const_label("a", "1")).unwrap();
        c.inc();
        let h = Histogram::with_opts(HistogramOpts::new("h", "H").buckets(vec![1.0])).unwrap();
        let mut fams = c.collect();
        fams.extend(h.collect());
        // A collector that hands out unsorted labels and an untyped family.
        let mut m = Metric::default();
        let lp = |n: &str, v: &str| {
            let mut p = LabelPair::default();
            p.set_name(n.into());
            p.set_value(v.into());
            p
        };
        m.set_label(vec![lp("z", "1"), lp("a", "2")]);
        let mut u = prometheus::proto::Untyped::default();
        #[allow(deprecated)]
        u.set_value(4.5);
        #[allow(deprecated)]
        m.set_untyped(u);
        let mut mf = MetricFamily::default();
        mf.set_name("odd".into());
        mf.set_help("Odd".into());
        mf.set_field_type(MetricType::UNTYPED);
        mf.set_metric(vec![m]);
        fams.push(mf);
        let mut text = String::new();
        encode_text(&fams, &mut text);
        assert!(text.contains("plain_total{a=\"1\",b=\"2\"} 1.0\n"), "{text}");
        assert!(text.contains("h_bucket{le=\"1.0\"} 0.0\nh_bucket{le=\"+Inf\"} 0.0\nh_count 0.0\nh_sum 0.0\n"), "{text}");
        assert!(text.contains("# TYPE odd untyped\nodd{a=\"2\",z=\"1\"} 4.5\n"), "{text}");
        let mut om = String::new();
        encode_openmetrics(&fams, &mut om);
        assert!(om.contains("# TYPE plain counter\nplain_total{a=\"1\",b=\"2\"} 1.0\n"), "{om}");
        assert!(om.contains("# TYPE odd unknown\n"), "{om}");
    }
}
