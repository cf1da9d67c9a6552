//! Rate accuracy: with a server that keeps up, the achieved rate is within 1% of the target.

mod common;

use common::{http_config, http_server, HttpOpts};

fn check(rate: f64, threads: usize, connections: usize, secs: f64) {
    let server = http_server(HttpOpts::default());
    let cfg = http_config(&server.url("http", "/r"), Some(rate), threads, connections, secs);
    let out = perfkit_load::run(&cfg).expect("run");
    let r = &out.result;
    eprintln!(
        "target {rate} achieved {:.2} requests {} p99 corrected {} us uncorrected {} us",
        r.achieved_rate, r.requests, r.latency.corrected.percentiles_us.p99, r.latency.uncorrected.percentiles_us.p99
    );
    assert_eq!(r.errors, 0, "{:?}", r.outcomes);
    assert_eq!(r.outcomes["2xx"], r.requests);
    let err = (r.achieved_rate - rate).abs() / rate;
    assert!(err <= 0.01, "target {rate} req/s, achieved {:.2} ({:.2}% off)", r.achieved_rate, err * 100.0);
    // The server saw every recorded request (and at most the few in flight at the end more).
    assert!(server.requests() >= r.requests);
    assert_eq!(server.accepted(), connections);
    // Every intended request is accounted for; the few in flight at the end are unfinished.
    assert_eq!(r.intended, r.requests + r.outcomes["unfinished"]);
    assert!(r.outcomes["unfinished"] * 100 <= r.intended, "{:?}", r.outcomes);
    assert_eq!(r.latency.corrected.count, r.intended);
    assert_eq!(r.rate_held, Some(true), "{:?}", r.warnings);
}

#[test]
fn rate_accuracy_100_1000_10000() {
    let _serial = common::serial();
    // One test so the three runs don't compete for the CPU.
    check(100.0, 1, 4, 3.0);
    check(1000.0, 2, 8, 3.0);
    check(10_000.0, 2, 16, 4.0);
}

#[test]
fn fractional_rate_with_more_connections_than_requests_per_second() {
    let _serial = common::serial();
    // 2 req/s over 8 connections: each connection runs at 0.25 req/s (no integer division to 0).
    let server = http_server(HttpOpts::default());
    let cfg = http_config(&server.url("http", "/"), Some(2.0), 2, 8, 2.0);
    let out = perfkit_load::run(&cfg).expect("run");
    assert_eq!(out.result.requests, 4, "{:?}", out.result.outcomes);
}
