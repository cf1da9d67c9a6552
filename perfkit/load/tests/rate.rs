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

#[test]
fn sends_leave_within_a_millisecond_of_their_intended_time() {
    let _serial = common::serial();
    // Pacing with tokio's 1 ms timer puts the median send lateness near 0.5 ms in every run; the engine's
    // timer is precise to tens of microseconds (p99 0.08-0.3 ms on a quiet machine). On this kind of virtual
    // machine a run's tail is the host's scheduling (p99 1.6-36 ms seen under a loaded test run), so the
    // median judges the engine and the tail gets a generous bound; three tries, since a hiccup can spoil one.
    // When even the server's answers are slow the machine is overloaded and the run says nothing.
    let server = http_server(HttpOpts::default());
    let mut tails = Vec::new();
    for _ in 0..3 {
        let cfg = http_config(&server.url("http", "/"), Some(5000.0), 1, 16, 3.0);
        let r = perfkit_load::run(&cfg).expect("run").result;
        let l = &r.send_lateness.as_ref().expect("scheduled run").percentiles_us;
        let u50 = r.latency.uncorrected.percentiles_us.p50;
        eprintln!("send lateness p50 {} p99 {} max {} us; uncorrected p50 {u50} us", l.p50, l.p99, l.max);
        if l.p50 < 300 && l.p99 < 20_000 {
            return;
        }
        tails.push((l.p50, l.p99, u50));
    }
    if tails.iter().all(|(_, _, u50)| *u50 > 500) {
        eprintln!("inconclusive: the machine is overloaded {tails:?}");
        return;
    }
    panic!("send lateness p50 over 300 us or p99 over 20 ms in every run (p50, p99, uncorrected p50 in us): {tails:?}");
}

#[test]
fn the_engine_reports_its_own_cpu_and_when_it_was_the_bottleneck() {
    let _serial = common::serial();
    let server = http_server(HttpOpts::default());
    let light = perfkit_load::run(&http_config(&server.url("http", "/"), Some(200.0), 1, 2, 1.0)).expect("run").result;
    assert_eq!(light.engine.threads, 1);
    assert!(light.engine.cpu_s > 0.0 && light.engine.busiest_thread < 0.5, "{:?}", light.engine);
    // (a machine's hiccup may still cost this short run its schedule: only the saturation warning is checked)
    assert!(!light.engine.saturated && !light.warnings.iter().any(|w| w.contains("bottleneck")), "{:?}", light.warnings);
    // Closed loop over 64 connections on one thread: the engine works as fast as the server answers.
    let busy = perfkit_load::run(&http_config(&server.url("http", "/"), None, 1, 64, 1.0)).expect("run").result;
    eprintln!("closed loop: {:?}", busy.engine);
    assert!(busy.engine.busiest_thread > 4.0 * light.engine.busiest_thread, "{:?} vs {:?}", busy.engine, light.engine);
    let us_per_request = busy.engine.cpu_s * 1e6 / busy.intended as f64;
    assert!(us_per_request > 0.1 && us_per_request < 100.0, "{us_per_request} us of engine CPU per request");
    assert_eq!(busy.engine.saturated, busy.engine.busiest_thread > 0.9);
    assert_eq!(busy.engine.saturated, busy.warnings.iter().any(|w| w.contains("bottleneck")), "{:?}", busy.warnings);
}
