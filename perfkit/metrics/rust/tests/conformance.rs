//! The shared observation script (../conformance/observations.tsv) through this crate, checked against SPEC.md by
//! hand here (the cross-language comparison is //perfkit/metrics:conformance_test), and the driver binary.

use std::io::Write;
use std::process::{Command, Stdio};

use perfkit_metrics::{conformance, Format};

const SCRIPT: &str = include_str!("../../conformance/observations.tsv");

fn value(text: &str, series: &str) -> f64 {
    let line = text
        .lines()
        .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
        .unwrap_or_else(|| panic!("no {series} in\n{text}"));
    line[series.len() + 1..].parse().unwrap()
}

#[test]
fn bucket_bounds_are_inclusive_and_le_is_written_as_python_writes_it() {
    let text = conformance::run(SCRIPT).unwrap().render(Format::Text);
    let l = r#"method="GET",route="/items/{id}",service="svc_a",status_class="2xx""#;
    let les = [
        "2.5e-05", "5e-05", "0.0001", "0.00025", "0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025", "0.05", "0.1",
        "0.25", "0.5", "1.0", "2.5", "5.0", "10.0",
    ];
    // 0, 1e-7 and 2.5e-5 in the first bucket; then one observation exactly on each bound (and 2.51e-5 between).
    for (i, le) in les.iter().enumerate() {
        let want = if i == 0 { 3.0 } else { 3.0 + i as f64 + 1.0 };
        assert_eq!(value(&text, &format!("http_server_request_duration_seconds_bucket{{{l},le=\"{le}\"}}")), want, "le {le}");
    }
    assert_eq!(value(&text, &format!("http_server_request_duration_seconds_bucket{{{l},le=\"+Inf\"}}")), 23.0);
    assert_eq!(value(&text, &format!("http_server_request_duration_seconds_count{{{l}}}")), 23.0);
    assert!((value(&text, &format!("http_server_request_duration_seconds_sum{{{l}}}")) - 3629.4444512).abs() < 1e-9);
}

#[test]
fn labels_are_normalised_and_escaped() {
    let text = conformance::run(SCRIPT).unwrap().render(Format::Text);
    let count = |labels: &str| value(&text, &format!("http_server_request_duration_seconds_count{{{labels}}}"));
    assert_eq!(count(r#"method="OTHER",route="/x",service="svc_a",status_class="2xx""#), 2.0); // get, PROPFIND
    assert_eq!(count(r#"method="GET",route="/x",service="svc_a",status_class="other""#), 2.0); // 600, 99
    assert_eq!(count(r#"method="POST",route="/x",service="svc_a",status_class="error""#), 1.0);
    assert_eq!(count(r#"method="OPTIONS",route="/x",service="svc_a",status_class="1xx""#), 1.0);
    assert_eq!(count(r#"method="GET",route="route \"quoted\" \\back\\slash",service="svc_a",status_class="2xx""#), 1.0);
    assert_eq!(count(r#"method="GET",route="line\none",service="svc_a",status_class="2xx""#), 1.0);
    assert_eq!(count(r#"method="GET",route="<unmatched>",service="svc_a",status_class="4xx""#), 1.0);
    let client = r#"http_client_request_duration_seconds_count{host="[::1]:80",method="OTHER",service="cli",status_class="4xx"}"#;
    assert_eq!(value(&text, client), 1.0);
    assert_eq!(value(&text, r#"http_client_stage_duration_seconds_count{service="cli",stage="connect"}"#), 2.0);
    assert_eq!(value(&text, r#"perfkit_hotpath_duration_seconds_count{hotpath="parse",service="svc_a"}"#), 2.0);
}

#[test]
fn generic_families() {
    let text = conformance::run(SCRIPT).unwrap().render(Format::Text);
    assert!(text.contains("# HELP demo_events_total Demo events\n# TYPE demo_events_total counter\n"), "{text}");
    assert_eq!(value(&text, r#"demo_events_total{kind="a",zone="eu"}"#), 5.0);
    assert_eq!(value(&text, r#"demo_events_total{kind="b",zone="us"}"#), 1.0);
    assert_eq!(value(&text, "demo_plain_total"), 7.0);
    assert_eq!(value(&text, r#"demo_level{zone="eu"}"#), -1.25);
    assert_eq!(value(&text, r#"demo_level{zone="us"}"#), 0.0);
    assert_eq!(value(&text, r#"demo_wait_seconds_bucket{queue="q2",le="10.0"}"#), 0.0);
    assert_eq!(value(&text, r#"demo_wait_seconds_bucket{queue="q2",le="+Inf"}"#), 1.0);
    assert!(!text.contains("_created"));
    for (name, kind) in [
        ("http_server_request_duration_seconds", "histogram"),
        ("perfkit_hotpath_duration_seconds", "histogram"),
        ("http_client_request_duration_seconds", "histogram"),
        ("http_client_stage_duration_seconds", "histogram"),
        ("demo_events_total", "counter"),
        ("demo_plain_total", "counter"),
        ("demo_level", "gauge"),
        ("demo_wait_seconds", "histogram"),
    ] {
        assert_eq!(text.matches(&format!("# TYPE {name} {kind}\n")).count(), 1, "{name}");
    }
}

#[test]
fn openmetrics() {
    let om = conformance::run(SCRIPT).unwrap().render(Format::OpenMetrics);
    assert!(om.ends_with("# EOF\n"));
    assert_eq!(om.matches("# EOF").count(), 1);
    assert!(om.contains("# HELP demo_events Demo events\n# TYPE demo_events counter\ndemo_events_total{"), "{om}");
    assert!(om.contains("# TYPE demo_plain counter\ndemo_plain_total 7.0\n"), "{om}");
    assert!(!om.contains("_created"));
    let text = conformance::run(SCRIPT).unwrap().render(Format::Text);
    // The same samples, apart from the counters' announced names and the end marker.
    let samples = |t: &str| t.lines().filter(|l| !l.starts_with('#')).map(String::from).collect::<Vec<_>>();
    assert_eq!(samples(&om), samples(&text));
}

fn driver(args: &[&str], stdin: &str) -> (i32, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_perfkit-metrics-conformance"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap())
}

#[test]
fn the_driver_binary() {
    let registry = conformance::run(SCRIPT).unwrap();
    let (code, out, err) = driver(&[], SCRIPT);
    assert_eq!((code, err.as_str()), (0, ""));
    assert_eq!(out, registry.render(Format::Text));
    let (code, out, _) = driver(&["--openmetrics"], SCRIPT);
    assert_eq!(code, 0);
    assert_eq!(out, registry.render(Format::OpenMetrics));
    let (code, out, err) = driver(&[], "# ok\nserver\tsvc\t/\tGET\t200\t0.1\nserver\tsvc\t/\tGET\t200\n");
    assert_eq!(code, 1);
    assert_eq!(out, "", "nothing written for a bad script");
    assert!(err.contains("line 3: server takes 5 TAB-separated fields"), "{err}");
    let (code, _, err) = driver(&["--json"], "");
    assert_eq!(code, 2);
    assert!(err.contains("unknown argument \"--json\"") && err.contains("usage:"), "{err}");
    let (code, out, _) = driver(&[], "");
    assert_eq!((code, out.as_str()), (0, ""));
}
