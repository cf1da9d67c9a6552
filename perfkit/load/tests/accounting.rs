//! Accounting: every request intended in the measured window ends in exactly one outcome, and the
//! ones that hurt most (a stall at the end, timeouts, a dead server) are in the histogram.

mod common;

use std::time::{Duration, Instant};

use common::{http_config, http_server, ws_server, HttpOpts, WsOpts};
use perfkit_load::report::RunResult;

/// intended == sum of outcomes, and the corrected histogram holds every answer, timeout and
/// (by default) unfinished request.
fn assert_invariant(r: &RunResult) {
    let sum: u64 = r.outcomes.values().sum();
    assert_eq!(r.intended, sum, "intended vs outcomes {:?}", r.outcomes);
    let with_latency = r.requests + r.outcomes["timeout"] + r.outcomes["unfinished"];
    assert_eq!(r.latency.corrected.count, with_latency, "{:?}", r.outcomes);
    let stages: u64 = r.stages.iter().map(|s| s.tally.intended).sum();
    assert_eq!(stages, r.intended, "stages add up");
    let intervals: u64 = r.intervals.iter().map(|i| i.intended).sum();
    assert_eq!(intervals, r.intended, "intervals add up");
}

#[test]
fn a_normal_run_accounts_for_exactly_the_schedule() {
    let _serial = common::serial();
    let server = http_server(HttpOpts::default());
    // One engine thread: with the server's thread that is one per core, so the schedule is held.
    let mut cfg = http_config(&server.url("http", "/"), Some(1000.0), 1, 8, 2.0);
    // The verdict, not the machine's wake-up tail: a lateness limit no healthy run comes near.
    cfg.lateness_limit = Duration::from_millis(50);
    let r = perfkit_load::run(&cfg).expect("run").result;
    assert_invariant(&r);
    assert_eq!(r.intended, 2000);
    assert!(r.outcomes["unfinished"] <= 8, "{:?}", r.outcomes);
    assert_eq!(r.errors, 0);
    assert_eq!(r.rate_held, Some(true), "{:?}", r.warnings);
    assert_eq!(r.intervals.len(), 2);
    assert_eq!(r.intervals[0].intended, 1000);
    let lateness = r.send_lateness.as_ref().expect("scheduled runs measure their lateness");
    assert!(lateness.count <= r.intended && lateness.count + 8 >= r.intended, "one lateness per request sent");
}

#[test]
fn a_stall_at_the_end_shows_as_unfinished_and_in_the_corrected_p99() {
    let _serial = common::serial();
    // The server stops answering for the last 2 s of a 10 s run.
    let server = http_server(HttpOpts { stall: Some((Duration::from_secs(8), Duration::from_secs(5))), ..Default::default() });
    let cfg = http_config(&server.url("http", "/"), Some(1000.0), 2, 16, 10.0);
    let t0 = Instant::now();
    let r = perfkit_load::run(&cfg).expect("run").result;
    assert!(t0.elapsed() < Duration::from_millis(10_500), "stops at the end: {:?}", t0.elapsed());
    assert_invariant(&r);
    assert_eq!(r.intended, 10_000);
    let unfinished = r.outcomes["unfinished"];
    assert!((1_900..=2_100).contains(&unfinished), "unfinished {unfinished}: {:?}", r.outcomes);
    // 20 % of the requests waited 0..2 s: the top 1 % waited at least ~1.8 s.
    let p99 = r.latency.corrected.percentiles_us.p99;
    assert!(p99 >= 1_700_000, "corrected p99 {p99} us must show the stall");
    assert_eq!(r.rate_held, Some(false));
    assert!(r.warnings.iter().any(|w| w.contains("rate not held")), "{:?}", r.warnings);
    assert!(r.intervals[9].failed >= 990 && r.intervals[2].failed == 0, "the stall is in the last intervals");
}

#[test]
fn unfinished_latency_can_be_left_out_but_is_still_counted() {
    let _serial = common::serial();
    let server = http_server(HttpOpts { stall: Some((Duration::from_secs(1), Duration::from_secs(5))), ..Default::default() });
    let mut cfg = http_config(&server.url("http", "/"), Some(500.0), 1, 4, 2.0);
    cfg.record_unfinished = false;
    let r = perfkit_load::run(&cfg).expect("run").result;
    assert_eq!(r.intended, r.outcomes.values().sum::<u64>());
    assert!(r.outcomes["unfinished"] >= 450, "{:?}", r.outcomes);
    assert_eq!(r.latency.corrected.count, r.requests + r.outcomes["timeout"]);
    assert!(r.latency.corrected.percentiles_us.max < 500_000);
}

#[test]
fn drain_collects_late_answers() {
    let _serial = common::serial();
    // Answers to requests from 1.5 s on wait until 2.3 s: after the end of a 2 s run.
    let server = http_server(HttpOpts {
        stall: Some((Duration::from_millis(1500), Duration::from_millis(800))),
        ..Default::default()
    });
    let mut cfg = http_config(&server.url("http", "/"), Some(400.0), 1, 4, 2.0);
    cfg.drain = Duration::from_secs(2);
    let t0 = Instant::now();
    let r = perfkit_load::run(&cfg).expect("run").result;
    assert!(t0.elapsed() < Duration::from_millis(3_500), "the drain ends when the answers are in: {:?}", t0.elapsed());
    assert_invariant(&r);
    // One request per connection was in flight when the stall began; the rest were never sent,
    // so only those drain; the never-sent ones stay unfinished.
    assert!(r.requests >= 600, "{:?}", r.outcomes);
    assert!(r.latency.corrected.percentiles_us.max >= 700_000);
    let mut no_drain = cfg.clone();
    no_drain.drain = Duration::ZERO;
    let server2 = http_server(HttpOpts {
        stall: Some((Duration::from_millis(1500), Duration::from_millis(800))),
        ..Default::default()
    });
    no_drain.url = url::Url::parse(&server2.url("http", "/")).unwrap();
    let r2 = perfkit_load::run(&no_drain).expect("run").result;
    assert!(r2.outcomes["unfinished"] > r.outcomes["unfinished"], "{:?} vs {:?}", r2.outcomes, r.outcomes);
}

#[test]
fn timeouts_are_recorded_at_their_timeout_latency() {
    let _serial = common::serial();
    let server = http_server(HttpOpts {
        stall: Some((Duration::from_millis(500), Duration::from_millis(1500))),
        ..Default::default()
    });
    let mut cfg = http_config(&server.url("http", "/"), Some(200.0), 1, 2, 2.5);
    cfg.timeout = Duration::from_millis(200);
    let r = perfkit_load::run(&cfg).expect("run").result;
    assert_invariant(&r);
    assert!(r.outcomes["timeout"] >= 4, "{:?}", r.outcomes);
    assert!(r.latency.uncorrected.percentiles_us.max >= 199_000, "a timeout waited its 200 ms");
}

#[test]
fn a_server_dying_mid_run_keeps_the_invariant() {
    let _serial = common::serial();
    let mut server = http_server(HttpOpts::default());
    let cfg = http_config(&server.url("http", "/"), Some(500.0), 2, 4, 2.0);
    let handle = std::thread::spawn(move || perfkit_load::run(&cfg));
    std::thread::sleep(Duration::from_millis(1000));
    server.stop();
    let r = handle.join().unwrap().expect("run").result;
    assert_invariant(&r);
    assert_eq!(r.intended, 1000);
    assert!(r.outcomes["connect_error"] >= 4, "{:?}", r.outcomes);
    assert!(r.outcomes["unfinished"] >= 300, "the requests after the death: {:?}", r.outcomes);
    assert_eq!(r.rate_held, Some(false));
}

#[test]
fn ws_late_answers_to_timed_out_calls_are_not_unmatched() {
    let _serial = common::serial();
    let s = ws_server(WsOpts { delay_even: Some(Duration::from_millis(300)), ..Default::default() });
    let mut cfg = perfkit_load::Config::new(&s.server.url("ws", "/"), Some(200.0)).unwrap();
    cfg.mode = perfkit_load::Mode::Ws;
    cfg.connections = 2;
    cfg.duration = Duration::from_secs(2);
    cfg.timeout = Duration::from_millis(100);
    cfg.drain = Duration::from_millis(500);
    let r = perfkit_load::run(&cfg).expect("run").result;
    assert_invariant(&r);
    assert_eq!(r.intended, 400);
    let timeouts = r.outcomes["timeout"];
    assert!((190..=210).contains(&timeouts), "every even id times out: {:?}", r.outcomes);
    assert_eq!(r.unmatched, 0, "late answers are not stray answers");
    // The answers to the last calls may come after the engine stopped waiting.
    assert!(r.late_answers + 40 >= timeouts, "late answers {} of {timeouts}", r.late_answers);
}

#[test]
fn stages_file_requests_by_intended_time() {
    let _serial = common::serial();
    let server = http_server(HttpOpts::default());
    let mut cfg = http_config(&server.url("http", "/"), None, 1, 4, 1.0);
    cfg.stages = Some(perfkit_load::schedule::parse_stages("200@1s,600@1s,0..400@1s").unwrap());
    cfg.duration = Duration::from_secs(3);
    let r = perfkit_load::run(&cfg).expect("run").result;
    assert_invariant(&r);
    let per_stage: Vec<u64> = r.stages.iter().map(|s| s.tally.intended).collect();
    assert_eq!(per_stage, vec![200, 600, 200]);
    assert_eq!(r.target_rate, Some(1000.0 / 3.0));
    assert_eq!(r.intervals.iter().map(|i| i.intended).collect::<Vec<_>>(), vec![200, 600, 200]);
    assert!(r.stages.iter().all(|s| s.tally.latency.corrected.count == s.tally.requests + s.tally.outcomes["unfinished"]));
}

#[test]
fn poisson_arrivals_send_the_rate_on_average() {
    let _serial = common::serial();
    let server = http_server(HttpOpts::default());
    let mut cfg = http_config(&server.url("http", "/"), Some(2000.0), 1, 8, 2.0);
    cfg.arrivals = perfkit_load::schedule::Arrivals::Poisson { seed: 3 };
    let r = perfkit_load::run(&cfg).expect("run").result;
    assert_invariant(&r);
    // Poisson count over 2 s at 2000/s: 4000 ± 63 (1 sd).
    assert!((3_750..=4_250).contains(&r.intended), "{}", r.intended);
    let again = perfkit_load::run(&cfg).expect("run").result;
    assert_eq!(again.intended, r.intended, "same seed, same schedule");
}
