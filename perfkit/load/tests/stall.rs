//! Coordinated omission: a server that stalls for 1 s once, mid-run, must show up in the
//! corrected latency (from the intended send time) and hardly in the uncorrected one, with no
//! extra connections opened.

mod common;

use std::time::{Duration, Instant};

use common::{http_config, http_server, HttpOpts};

#[test]
fn one_second_stall_shows_in_corrected_latency_only() {
    let _serial = common::serial();
    let server = http_server(HttpOpts {
        stall: Some((Duration::from_secs(5), Duration::from_secs(1))),
        ..Default::default()
    });
    let cfg = http_config(&server.url("http", "/"), Some(2000.0), 2, 16, 10.0);
    let t0 = Instant::now();
    let out = perfkit_load::run(&cfg).expect("run");
    let elapsed = t0.elapsed();
    let r = &out.result;
    let c = &r.latency.corrected.percentiles_us;
    let u = &r.latency.uncorrected.percentiles_us;
    eprintln!(
        "requests {} rate {:.1} corrected p50 {} p99 {} p99.9 {} max {}; uncorrected p50 {} p99 {} max {}",
        r.requests, r.achieved_rate, c.p50, c.p99, c.p99_9, c.max, u.p50, u.p99, u.max
    );
    assert!(elapsed < Duration::from_secs(12), "the run must stop on time: {elapsed:?}");
    assert_eq!(server.accepted(), 16, "exactly the 16 connections, none added under backlog");
    assert_eq!(r.errors, 0, "{:?}", r.outcomes);
    // No request dropped: the backlog is sent after the stall.
    assert!((r.achieved_rate - 2000.0).abs() / 2000.0 < 0.01, "achieved {}", r.achieved_rate);
    assert!(c.p99 >= 850_000, "corrected p99 {} us", c.p99);
    assert!(c.p99_9 >= 950_000, "corrected p99.9 {} us", c.p99_9);
    assert!(u.p99 < 50_000, "uncorrected p99 {} us", u.p99);
    assert!(c.max >= 950_000 && c.max < 1_500_000, "corrected max {} us", c.max);
}
