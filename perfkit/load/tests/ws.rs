//! WebSocket JSON-RPC mode: a fresh id per call, answers matched by id (out of order, many in
//! flight), JSON-RPC errors counted as their own outcome, unmatched answers and late answers to
//! timed-out calls counted apart from the calls.

mod common;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use common::{ws_server, WsOpts};

fn ws_config(url: &str, rate: f64, secs: f64, template: &str) -> perfkit_load::Config {
    let mut c = perfkit_load::Config::new(url, Some(rate)).unwrap();
    c.mode = perfkit_load::Mode::Ws;
    c.threads = 2;
    c.connections = 4;
    c.duration = Duration::from_secs_f64(secs);
    c.body = template.as_bytes().to_vec();
    c
}

#[test]
fn calls_matched_by_id_and_errors_counted() {
    let _serial = common::serial();
    let s = ws_server(WsOpts {
        error_every: Some(10),
        delay_even: Some(Duration::from_millis(30)),
        ..Default::default()
    });
    let cfg = ws_config(&s.server.url("ws", "/rpc"), 1000.0, 2.0, r#"{"jsonrpc":"2.0","method":"sum","params":[1,2],"id":"x"}"#);
    let t0 = Instant::now();
    let out = perfkit_load::run(&cfg).expect("run");
    assert!(t0.elapsed() < Duration::from_secs(4));
    let r = &out.result;
    let ok = r.outcomes["rpc_ok"];
    let err = r.outcomes["rpc_error"];
    eprintln!("{:?} p50 {} us", r.outcomes, r.latency.corrected.percentiles_us.p50);
    assert_eq!(r.info.mode, "ws");
    assert_eq!(s.server.accepted(), 4);
    // Every call got a fresh id and a well-formed body.
    let ids = s.log.ids.lock().unwrap().clone();
    let unique: HashSet<u64> = ids.iter().copied().collect();
    assert_eq!(unique.len(), ids.len(), "ids are unique");
    assert_eq!(s.log.bad_calls.load(std::sync::atomic::Ordering::SeqCst), 0);
    assert_eq!(s.log.methods.lock().unwrap().iter().cloned().collect::<Vec<_>>(), vec!["sum".to_string()]);
    // Answers for even ids came back 30 ms late (out of order) and were still matched.
    assert_eq!(r.unmatched, 0);
    assert_eq!(r.errors, 0, "{:?}", r.outcomes);
    assert!((r.achieved_rate - 1000.0).abs() <= 20.0, "achieved {}", r.achieved_rate);
    // Ids divisible by 10 are JSON-RPC errors: 10% of the calls.
    let frac = err as f64 / (ok + err) as f64;
    assert!((frac - 0.1).abs() < 0.01, "error fraction {frac}");
    // Half the calls waited 30 ms: the median is around there, the minimum well below.
    let c = &r.latency.corrected;
    assert!(c.percentiles_us.p75 >= 30_000, "p75 {}", c.percentiles_us.p75);
    assert!(c.min_us < 10_000, "min {}", c.min_us);
}

#[test]
fn stray_answers_are_unmatched() {
    let _serial = common::serial();
    let s = ws_server(WsOpts { stray_every: Some(5), ..Default::default() });
    let cfg = ws_config(&s.server.url("ws", "/"), 200.0, 1.0, r#"{"method":"ping"}"#);
    let out = perfkit_load::run(&cfg).expect("run");
    let r = &out.result;
    assert_eq!(r.outcomes["rpc_ok"], r.requests);
    let stray = r.unmatched;
    assert!((35..=45).contains(&stray), "unmatched {stray} of {} calls", r.requests);
}

#[test]
fn bad_template_is_rejected_before_load() {
    let _serial = common::serial();
    let s = ws_server(WsOpts::default());
    for bad in ["[1,2]", "{\"params\":[]}", "not json"] {
        let cfg = ws_config(&s.server.url("ws", "/"), 10.0, 1.0, bad);
        match perfkit_load::run(&cfg) {
            Err(perfkit_load::LoadError::Usage(m)) => assert!(m.contains("template"), "{m}"),
            other => panic!("expected a usage error for {bad}, got {:?}", other.map(|o| o.result.requests)),
        }
    }
    assert_eq!(s.server.accepted(), 0);
}
