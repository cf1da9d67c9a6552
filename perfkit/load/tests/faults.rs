//! Faults: connections reset mid-run, the server dying, a stalled server with a short timeout.
//! The engine reconnects with back-off, counts the errors and always stops on time.

mod common;

use std::time::{Duration, Instant};

use common::{http_config, http_server, HttpOpts};

#[test]
fn resets_are_counted_and_the_run_goes_on() {
    let _serial = common::serial();
    let server = http_server(HttpOpts { drop_every: Some(50), ..Default::default() });
    let cfg = http_config(&server.url("http", "/"), Some(1000.0), 1, 4, 2.0);
    let t0 = Instant::now();
    let out = perfkit_load::run(&cfg).expect("run");
    assert!(t0.elapsed() < Duration::from_secs(3));
    let r = &out.result;
    eprintln!("{:?}", r.outcomes);
    let resets = r.outcomes["read_error"];
    assert!((30..=45).contains(&resets), "read errors {resets}");
    assert!(r.outcomes["2xx"] > 1800, "{:?}", r.outcomes);
    // Each reset costs one reconnect, nothing more: 4 initial + at most one per reset.
    let accepted = server.accepted();
    assert!(accepted >= resets as usize && accepted <= 4 + resets as usize, "accepted {accepted}");
}

#[test]
fn server_death_mid_run_counts_errors_and_ends_on_time() {
    let _serial = common::serial();
    let mut server = http_server(HttpOpts::default());
    let cfg = http_config(&server.url("http", "/"), Some(500.0), 2, 4, 2.5);
    let t0 = Instant::now();
    let handle = std::thread::spawn(move || perfkit_load::run(&cfg));
    std::thread::sleep(Duration::from_millis(1000));
    server.stop();
    let out = handle.join().unwrap().expect("run");
    let elapsed = t0.elapsed();
    let r = &out.result;
    eprintln!("{:?} in {elapsed:?}", r.outcomes);
    assert!(elapsed < Duration::from_millis(3500), "ended on time: {elapsed:?}");
    assert!(r.outcomes["2xx"] >= 400 && r.outcomes["2xx"] <= 560, "{:?}", r.outcomes);
    assert!(r.outcomes["connect_error"] >= 4, "{:?}", r.outcomes);
    // Back-off: 4 connections over ~1.5 s dead time at 10 ms doubling to 1 s is a handful each,
    // not a spin of thousands.
    assert!(r.outcomes["connect_error"] < 100, "{:?}", r.outcomes);
}

#[test]
fn timeouts_are_counted() {
    let _serial = common::serial();
    // Every response stalls 1.5 s from 0.5 s on; with a 200 ms timeout those are timeouts.
    let server = http_server(HttpOpts {
        stall: Some((Duration::from_millis(500), Duration::from_millis(1500))),
        ..Default::default()
    });
    let mut cfg = http_config(&server.url("http", "/"), Some(200.0), 1, 2, 2.5);
    cfg.timeout = Duration::from_millis(200);
    let t0 = Instant::now();
    let out = perfkit_load::run(&cfg).expect("run");
    assert!(t0.elapsed() < Duration::from_millis(3500));
    let r = &out.result;
    eprintln!("{:?}", r.outcomes);
    assert!(r.outcomes["timeout"] >= 4, "{:?}", r.outcomes);
    assert!(r.outcomes["2xx"] > 100, "{:?}", r.outcomes);
}

#[test]
fn chunked_and_error_statuses() {
    let _serial = common::serial();
    let server = http_server(HttpOpts { chunked: true, status: Some(503), ..Default::default() });
    let cfg = http_config(&server.url("http", "/"), Some(500.0), 1, 2, 1.0);
    let out = perfkit_load::run(&cfg).expect("run");
    let r = &out.result;
    assert_eq!(r.errors, 0, "{:?}", r.outcomes);
    assert!((495..=505).contains(&r.outcomes["5xx"]), "{:?}", r.outcomes);
    assert_eq!(server.accepted(), 2, "chunked bodies keep the connection alive");
}

#[test]
fn body_until_close_reconnects_without_errors() {
    let _serial = common::serial();
    let server = http_server(HttpOpts { until_close: true, ..Default::default() });
    let cfg = http_config(&server.url("http", "/"), Some(200.0), 1, 2, 1.0);
    let out = perfkit_load::run(&cfg).expect("run");
    let r = &out.result;
    assert_eq!(r.errors, 0, "{:?}", r.outcomes);
    assert!((198..=202).contains(&r.outcomes["2xx"]), "{:?}", r.outcomes);
    assert_eq!(r.bytes_read, r.requests * 49, "head (37 bytes) + body (12) per response");
    // Each response closed its connection: one new connection per request.
    assert!(server.accepted() as u64 >= r.requests);
}

#[test]
fn closed_loop_keeps_one_request_in_flight_per_connection() {
    let _serial = common::serial();
    let server = http_server(HttpOpts::default());
    let cfg = http_config(&server.url("http", "/"), None, 1, 2, 1.0);
    let out = perfkit_load::run(&cfg).expect("run");
    let r = &out.result;
    assert!(r.closed_loop && r.target_rate.is_none());
    assert!(r.requests > 1000, "{}", r.requests);
    assert_eq!(server.accepted(), 2);
    assert_eq!(r.errors, 0);
}
