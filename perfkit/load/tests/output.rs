//! Output: the --json result validates against result.schema.json, the text report looks like
//! wrk2's, and the live Prometheus endpoint serves the perfkit_load_* metrics during the run.

mod common;

use std::io::{Read, Write};
use std::time::Duration;

use common::{http_server, temp_path, HttpOpts};

const SCHEMA: &str = include_str!("../result.schema.json");

fn validator() -> jsonschema::Validator {
    let schema: serde_json::Value = serde_json::from_str(SCHEMA).expect("schema is JSON");
    jsonschema::validator_for(&schema).expect("schema is a valid JSON schema")
}

#[test]
fn json_output_matches_the_schema() {
    let _serial = common::serial();
    let server = http_server(HttpOpts::default());
    let json = temp_path("result.json");
    let body = temp_path("body.txt");
    std::fs::write(&body, b"{\"a\":1}").unwrap();
    let mut out = Vec::new();
    let mut err = Vec::new();
    let code = perfkit_load::cli::main_with(
        [
            "perfkit-load", "-t1", "-c2", "-d1s", "-R", "400", "--latency", "--u_latency", "--warmup", "300ms",
            "--method", "POST", "-H", "X-Test: yes", "--scenario", "smoke",
            "--body", &format!("@{}", body.display()),
            "--json", json.to_str().unwrap(),
            &server.url("http", "/echo?x=1"),
        ],
        &mut out,
        &mut err,
    );
    let text = String::from_utf8(out).unwrap();
    assert_eq!(code, 0, "stderr: {}", String::from_utf8_lossy(&err));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let errors: Vec<String> = validator().iter_errors(&v).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "schema errors: {errors:?}");
    // Content, not just shape.
    assert_eq!(v["scenario"], "smoke");
    assert_eq!(v["method"], "POST");
    assert_eq!(v["warmup_s"], 0.3);
    assert_eq!(v["target_rate"], 400.0);
    let requests = v["requests"].as_u64().unwrap();
    assert!((396..=404).contains(&requests), "warm-up excluded: {requests} requests in the 1 s window");
    assert_eq!(v["outcomes"]["2xx"].as_u64().unwrap(), requests);
    assert_eq!(v["latency"]["corrected"]["count"], v["intended"], "unfinished ones at their lower bound");
    assert_eq!(v["intended"].as_u64().unwrap(), 400, "exactly the schedule's 400 requests in the window");
    // The server got the body from the file with every request (warm-up included).
    let bodies = server.stats.bodies.lock().unwrap();
    assert!(bodies.len() as u64 >= requests + 100);
    assert!(bodies.iter().all(|b| b == b"{\"a\":1}"));
    // wrk2-style text.
    for needle in [
        "Running 1s test @ http://",
        "1 threads and 2 connections",
        "Latency Distribution (HdrHistogram - Recorded Latency",
        "Latency Distribution (HdrHistogram - Uncorrected Latency",
        "Detailed Percentile spectrum:",
        " 99.900%",
        "Requests/sec:",
        "Transfer/sec:",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
}

#[test]
fn closed_loop_and_ws_results_match_the_schema() {
    let _serial = common::serial();
    let server = http_server(HttpOpts::default());
    let cfg = common::http_config(&server.url("http", "/"), None, 1, 1, 0.5);
    let out = perfkit_load::run(&cfg).unwrap();
    let v = serde_json::to_value(&out.result).unwrap();
    assert!(validator().is_valid(&v), "{v}");
    assert_eq!(v["target_rate"], serde_json::Value::Null);

    let ws = common::ws_server(Default::default());
    let mut cfg = perfkit_load::Config::new(&ws.server.url("ws", "/"), Some(100.0)).unwrap();
    cfg.duration = Duration::from_millis(500);
    let out = perfkit_load::run(&cfg).unwrap();
    let v = serde_json::to_value(&out.result).unwrap();
    assert!(validator().is_valid(&v), "{v}");
    assert_eq!(v["mode"], "ws");
    // The schema rejects a broken result.
    let mut bad = v.clone();
    bad["outcomes"].as_object_mut().unwrap().remove("timeout");
    assert!(!validator().is_valid(&bad));
}

fn scrape(addr: std::net::SocketAddr) -> String {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    text
}

fn sample(text: &str, prefix: &str) -> f64 {
    text.lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no {prefix} in\n{text}"))
        .rsplit(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn live_metrics_during_the_run() {
    let _serial = common::serial();
    let server = http_server(HttpOpts::default());
    let port = common::closed_port();
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let mut cfg = common::http_config(&server.url("http", "/"), Some(500.0), 1, 2, 2.0);
    cfg.metrics_addr = Some(addr);
    cfg.scenario = "live".into();
    let h = std::thread::spawn(move || perfkit_load::run(&cfg));
    std::thread::sleep(Duration::from_millis(1200));
    let text = scrape(addr);
    let out = h.join().unwrap().unwrap();
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    let target = server.url("http", "/");
    let labels = format!("scenario=\"live\",target=\"{target}\"");
    let ok = sample(&text, &format!("perfkit_load_requests_total{{outcome=\"2xx\",{labels}}}"));
    assert!(ok > 300.0 && ok < 800.0, "2xx so far: {ok}");
    assert_eq!(sample(&text, &format!("perfkit_load_target_rate{{{labels}}}")), 500.0);
    let achieved = sample(&text, &format!("perfkit_load_achieved_rate{{{labels}}}"));
    assert!((achieved - 500.0).abs() < 50.0, "achieved {achieved}");
    for h in ["corrected", "uncorrected"] {
        // `le` as the kit's metrics library writes it in every language (2.5e-05 … 10.0).
        let first = format!("perfkit_load_{h}_latency_seconds_bucket{{{labels},le=\"2.5e-05\"}}");
        sample(&text, &first);
        let last = sample(&text, &format!("perfkit_load_{h}_latency_seconds_bucket{{{labels},le=\"10.0\"}}"));
        let count = sample(&text, &format!("perfkit_load_{h}_latency_seconds_count{{{labels}}}"));
        assert_eq!(last, count);
        assert_eq!(count, ok);
    }
    assert!(out.result.requests >= ok as u64);
    // The endpoint is gone after the run.
    assert!(std::net::TcpStream::connect(addr).is_err());
}
