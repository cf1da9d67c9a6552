//! Request variation (`--requests FILE`): weights, round-robin, template fields, every kind of bad
//! file (refused before any load with a message naming the line), and runs against the test server
//! whose per-label results add up to the totals, in JSON Lines and in vegeta's format.

mod common;

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::{http_server, temp_path, HttpOpts};
use perfkit_load::metrics::LiveMetrics;
use perfkit_load::recording::{Observer, Outcome};
use perfkit_load::report::RunResult;
use perfkit_load::requests::{Chooser, Defaults, PickMode, Renderer, RequestSet};

const TARGET: &str = "http://127.0.0.1:8080/";

fn write(name: &str, text: &str) -> PathBuf {
    let p = temp_path(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn load(path: &Path, pick: Option<PickMode>, seed: u64) -> Result<RequestSet, String> {
    let url = url::Url::parse(TARGET).unwrap();
    let d = Defaults { url: &url, method: "GET", headers: &[], body: b"" };
    RequestSet::load(path, &d, pick, seed)
}

fn load_text(text: &str) -> Result<RequestSet, String> {
    load(&write("reqs", text), None, 1)
}

#[test]
fn weights_are_honoured_within_2_percent_and_repeat_with_the_seed() {
    let p = write(
        "weighted.jsonl",
        "{\"path\":\"/a\",\"weight\":5}\n{\"path\":\"/b\",\"weight\":3}\n\n{\"path\":\"/c\",\"weight\":1.5}\n{\"path\":\"/d\",\"weight\":0.5}\n",
    );
    let picks = |seed: u64| {
        let set = Arc::new(load(&p, None, seed).unwrap());
        assert_eq!(set.mode(), PickMode::Weighted, "different weights: weighted by default");
        // 4 connections, each picking for its own requests.
        let mut conns: Vec<Chooser> = (0..4).map(|i| Chooser::new(set.clone(), i, 4)).collect();
        (0..2500).flat_map(|_| conns.iter_mut().map(|c| c.next_pick().entry).collect::<Vec<_>>()).collect::<Vec<_>>()
    };
    let got = picks(7);
    assert_eq!(got.len(), 10_000);
    for (i, w) in [5.0, 3.0, 1.5, 0.5].into_iter().enumerate() {
        let share = got.iter().filter(|e| **e == i).count() as f64 / 10_000.0;
        let want = w / 10.0;
        assert!((share - want).abs() <= 0.02, "entry {i}: {share} of the picks, weight share {want}");
    }
    assert_eq!(got, picks(7), "same seed, same picks");
    assert_ne!(got, picks(8), "another seed, other picks");
    // Explicitly weighted with equal weights: uniform.
    let p = write("even.jsonl", "{\"path\":\"/a\"}\n{\"path\":\"/b\"}\n");
    let set = load(&p, Some(PickMode::Weighted), 3).unwrap();
    let a = (0..10_000).filter(|q| set.pick(*q).entry == 0).count() as f64 / 10_000.0;
    assert!((a - 0.5).abs() <= 0.02, "{a}");
}

#[test]
fn round_robin_takes_the_entries_in_order() {
    let set = Arc::new(load_text("{\"path\":\"/0\"}\n{\"path\":\"/1\"}\n{\"path\":\"/2\"}\n").unwrap());
    assert_eq!(set.mode(), PickMode::RoundRobin, "equal weights: round-robin by default");
    // 2 connections interleaved: the aggregate goes 0, 1, 2, 0, 1, 2, ...
    let (mut c0, mut c1) = (Chooser::new(set.clone(), 0, 2), Chooser::new(set.clone(), 1, 2));
    let order: Vec<usize> = (0..6).flat_map(|_| [c0.next_pick().entry, c1.next_pick().entry]).collect();
    assert_eq!(order, vec![0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2]);
    // Weighted entries can't be picked round-robin.
    let e = load(&write("w.jsonl", "{\"path\":\"/a\"}\n{\"path\":\"/b\",\"weight\":2}\n"), Some(PickMode::RoundRobin), 1)
        .unwrap_err();
    assert!(e.contains("line 2") && e.contains("--pick round-robin ignores weights"), "{e}");
}

fn check_uuid(id: &str) {
    let hex: Vec<&str> = id.split('-').collect();
    assert_eq!(hex.iter().map(|h| h.len()).collect::<Vec<_>>(), vec![8, 4, 4, 4, 12], "{id}");
    assert!(id.chars().all(|c| c == '-' || c.is_ascii_digit() || ('a'..='f').contains(&c)), "{id}");
    assert!(hex[2].starts_with('4'), "version 4: {id}");
    assert!(hex[3].starts_with(['8', '9', 'a', 'b']), "RFC variant: {id}");
}

#[test]
fn template_fields_render_per_request() {
    let dir = temp_path("tpl-dir");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("body.json"), "{\"id\":\"{{uuid}}\",\"n\":{{seq}},\"k\":\"{{pick a|b|c}}\",\"r\":{{rand_int 10 12}}}")
        .unwrap();
    std::fs::write(
        dir.join("reqs.jsonl"),
        "{\"method\":\"POST\",\"path\":\"/items/{{seq}}?shard={{rand_int 0 3}}\",\"headers\":{\"X-Request-Id\":\"{{uuid}}\"},\"body_file\":\"body.json\"}\n",
    )
    .unwrap();
    let set = Arc::new(load(&dir.join("reqs.jsonl"), None, 5).unwrap());
    let mut seqs = HashSet::new();
    let mut ids = HashSet::new();
    let (mut shards, mut ks, mut rs) = (BTreeMap::new(), BTreeMap::new(), BTreeMap::new());
    let mut renderer = Renderer::default();
    // 3 connections: {{seq}} is unique across them.
    for c in 0..3 {
        let mut chooser = Chooser::new(set.clone(), c, 3);
        for _ in 0..1000 {
            let pick = chooser.next_pick();
            let req = String::from_utf8(renderer.http1(&set, pick).to_vec()).unwrap();
            let (head, body) = req.split_once("\r\n\r\n").unwrap();
            let line = head.lines().next().unwrap();
            let target = line.strip_prefix("POST /items/").unwrap().strip_suffix(" HTTP/1.1").unwrap();
            let (seq, shard) = target.split_once("?shard=").unwrap();
            assert_eq!(seq.parse::<u64>().unwrap(), pick.seq);
            assert!(seqs.insert(pick.seq), "seq {} twice", pick.seq);
            *shards.entry(shard.parse::<i64>().unwrap()).or_insert(0) += 1;
            let id = head.lines().find_map(|l| l.strip_prefix("X-Request-Id: ")).unwrap();
            check_uuid(id);
            let len: usize = head.lines().find_map(|l| l.strip_prefix("Content-Length: ")).unwrap().parse().unwrap();
            assert_eq!(len, body.len());
            let v: serde_json::Value = serde_json::from_str(body).unwrap();
            check_uuid(v["id"].as_str().unwrap());
            assert!(ids.insert(v["id"].as_str().unwrap().to_string()) && ids.insert(id.to_string()), "uuids are unique");
            assert_eq!(v["n"].as_u64().unwrap(), pick.seq);
            *ks.entry(v["k"].as_str().unwrap().to_string()).or_insert(0) += 1;
            *rs.entry(v["r"].as_i64().unwrap()).or_insert(0) += 1;
        }
    }
    assert_eq!(seqs.len(), 3000);
    assert_eq!(seqs.iter().max(), Some(&2999), "the global request numbers 0..3000");
    assert_eq!(shards.keys().copied().collect::<Vec<_>>(), vec![0, 1, 2, 3], "rand_int is inclusive: {shards:?}");
    assert_eq!(rs.keys().copied().collect::<Vec<_>>(), vec![10, 11, 12], "{rs:?}");
    assert_eq!(ks.keys().cloned().collect::<Vec<_>>(), vec!["a", "b", "c"], "{ks:?}");
    for n in ks.values().chain(rs.values()) {
        assert!(*n > 800, "roughly uniform: {ks:?} {rs:?}");
    }
    // The parts (for HTTP/2) render the same values.
    let pick = set.pick(42);
    let whole = String::from_utf8(renderer.http1(&set, pick).to_vec()).unwrap();
    let parts = renderer.parts(&set, pick);
    assert!(whole.starts_with(&format!("POST {} HTTP/1.1\r\n", String::from_utf8_lossy(parts.path()))));
    assert!(whole.ends_with(std::str::from_utf8(parts.body()).unwrap()));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn every_kind_of_bad_file_is_refused_naming_the_line() {
    let other_port = "http://127.0.0.1:9/x";
    let big_body = format!("{{\"path\":\"/\",\"body\":\"{}\"}}\n", "x".repeat(16 * 1024 * 1024 + 1));
    let too_many = "{\"path\":\"/\"}\n".repeat(100_001);
    let cases: Vec<(String, &str, &str)> = vec![
        ("{\"path\":\"/a\"}\n{\"path\":\"/b\",}\n".into(), "line 2", "invalid request"),
        ("{\"path\":\"/a\"}\n\n{\"path\":\"/b\",\"colour\":\"red\"}\n".into(), "line 3", "unknown field `colour`"),
        ("{\"method\":\"GET\"}\n".into(), "line 1", "missing \"url\" or \"path\""),
        ("{\"url\":\"http://127.0.0.1:8080/\",\"path\":\"/\"}\n".into(), "line 1", "not both"),
        ("{\"path\":\"/\"}\n{\"url\":\"http://example.com/\"}\n".into(), "line 2", "is not on the target http://127.0.0.1:8080"),
        (format!("{{\"url\":\"{other_port}\"}}\n"), "line 1", "one target"),
        ("{\"url\":\"https://127.0.0.1:8080/\"}\n".into(), "line 1", "not on the target"),
        ("{\"url\":\"/relative\"}\n".into(), "line 1", "not absolute"),
        ("{\"path\":\"relative\"}\n".into(), "line 1", "must start with /"),
        ("{\"path\":\"/a b\"}\n".into(), "line 1", "space or a control character"),
        ("{\"path\":\"/\",\"weight\":0}\n".into(), "line 1", "weight must be a positive number"),
        ("{\"path\":\"/\",\"weight\":-2}\n".into(), "line 1", "weight must be a positive number"),
        ("{\"path\":\"/\",\"weight\":\"heavy\"}\n".into(), "line 1", "invalid type: string"),
        ("{\"path\":\"/\",\"body_file\":\"no-such-body.json\"}\n".into(), "line 1", "cannot read the body file"),
        ("{\"path\":\"/\",\"body\":\"a\",\"body_file\":\"b\"}\n".into(), "line 1", "not both"),
        ("{\"path\":\"/{{nope}}\"}\n".into(), "line 1", "unknown field \"nope\""),
        ("{\"path\":\"/\"}\n{\"path\":\"/\",\"body\":\"{{rand_int 9 1}}\"}\n".into(), "line 2", "A <= B"),
        ("{\"path\":\"/\",\"headers\":{\"X-A\":\"{{seq\"}}\n".into(), "line 1", "unclosed"),
        ("{\"path\":\"/\",\"headers\":{\"X-A\":1}}\n".into(), "line 1", "must be a string"),
        ("{\"path\":\"/\",\"headers\":{\"Bad Name\":\"1\"}}\n".into(), "line 1", "invalid header name"),
        ("{\"method\":\"G T\",\"path\":\"/\"}\n".into(), "line 1", "invalid HTTP method"),
        ("{\"path\":\"/\",\"label\":\"\"}\n".into(), "line 1", "label must not be empty"),
        ("{\"path\":\"/\",\"headers\":{\"Content-Length\":\"3\"},\"body\":\"{{seq}}\"}\n".into(), "line 1", "Content-Length"),
        ("{\"path\":\"/\"}\n[1, 2]\n".into(), "line 2", "expected a JSON object"),
        (big_body, "line 1", "more than the limit"),
        (too_many, "line 100001", "more than 100000 requests"),
        // vegeta's format
        ("GET http://127.0.0.1:8080/\nnot a header\n".into(), "line 2", "expected a header"),
        ("# targets\nget http://127.0.0.1:8080/\n".into(), "line 2", "expected a target line"),
        ("GET\n".into(), "line 1", "expected a target line"),
        ("GET http://127.0.0.1:8080/ HTTP/1.1\n".into(), "line 1", "expected a target line"),
        ("GET http://127.0.0.1:8080/\n\nX-A: 1\n".into(), "line 3", "expected a target line"),
        ("POST http://127.0.0.1:8080/\n@missing.bin\n".into(), "line 2", "cannot read the body file"),
        ("POST http://127.0.0.1:8080/\n@<<EOF\nx\nEOF\n".into(), "line 2", "inline bodies"),
        ("GET http://other.example/\n".into(), "line 1", "not on the target"),
    ];
    for (text, line, needle) in &cases {
        let p = write("bad", text);
        let e = load(&p, None, 1).map(|_| ()).unwrap_err();
        let shown = &text[..text.len().min(60)];
        assert!(e.starts_with(&format!("{} {line}: ", p.display())), "{shown:?}: the error names the file and {line}: {e}");
        assert!(e.contains(needle), "{shown:?}: expected {needle:?} in {e}");
        let _ = std::fs::remove_file(p);
    }
    for empty in ["", "\n\n  \n", "# only a comment\n"] {
        let e = load_text(empty).map(|_| ()).unwrap_err();
        assert!(e.contains("no requests"), "{e}");
    }
    let e = load(Path::new("/nonexistent/reqs.jsonl"), None, 1).map(|_| ()).unwrap_err();
    assert!(e.contains("cannot read the requests file"), "{e}");
}

fn run_cli(args: &[&str]) -> (i32, String, String) {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = perfkit_load::cli::main_with(std::iter::once("perfkit-load").chain(args.iter().copied()), &mut out, &mut err);
    (code, String::from_utf8(out).unwrap(), String::from_utf8(err).unwrap())
}

#[test]
fn bad_request_files_exit_2_before_any_connection() {
    let _serial = common::serial();
    let server = http_server(HttpOpts::default());
    let url = server.url("http", "/");
    let other = write("other.jsonl", "{\"path\":\"/\"}\n{\"url\":\"http://10.0.0.1/\"}\n");
    let bad = write("bad.jsonl", "{\"path\":\"/\"}\n{\"path\":\"/\",\"wieght\":2}\n");
    let vegeta = write("bad.targets", "GET /\nX-A 1\n");
    let good = write("good.jsonl", "{\"path\":\"/\"}\n");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--requests", other.to_str().unwrap()], "line 2: url \"http://10.0.0.1/\" is not on the target"),
        (vec!["--requests", bad.to_str().unwrap()], "line 2: invalid request: unknown field `wieght`"),
        (vec!["--requests", vegeta.to_str().unwrap()], "line 2: expected a header"),
        (vec!["--requests", "/nonexistent/reqs.jsonl"], "cannot read the requests file"),
        (vec!["--pick", "weighted"], "--pick needs --requests"),
        (vec!["--requests", good.to_str().unwrap(), "--pick", "random"], "invalid value 'random'"),
    ];
    for (extra, needle) in cases {
        let mut args = vec!["-t1", "-c1", "-d1s", "-R", "10"];
        args.extend(extra.iter().copied());
        args.push(&url);
        let (code, _out, err) = run_cli(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: expected {needle:?} in {err}");
    }
    let ws = server.url("ws", "/");
    let (code, _, err) = run_cli(&["-t1", "-c1", "-d1s", "-R", "10", "--ws", "--requests", good.to_str().unwrap(), &ws]);
    assert_eq!(code, 2);
    assert!(err.contains("--requests is for HTTP, not --ws"), "{err}");
    assert_eq!(server.accepted(), 0, "no connection was opened");
}

/// Every label's intended requests and outcomes add up to the run's.
fn assert_labels_add_up(r: &RunResult) {
    let intended: u64 = r.labels.iter().map(|l| l.tally.intended).sum();
    assert_eq!(intended, r.intended, "labels' intended add up");
    for (k, v) in &r.outcomes {
        let sum: u64 = r.labels.iter().map(|l| l.tally.outcomes[k]).sum();
        assert_eq!(sum, *v, "outcome {k}");
    }
    for l in &r.labels {
        assert_eq!(l.tally.intended, l.tally.outcomes.values().sum::<u64>(), "{}", l.label);
        let with_latency = l.tally.requests + l.tally.outcomes["timeout"] + l.tally.outcomes["unfinished"];
        assert_eq!(l.tally.latency.corrected.count, with_latency, "{}", l.label);
    }
    let answered: u64 = r.labels.iter().map(|l| l.tally.requests).sum();
    assert_eq!(answered, r.requests);
}

fn label_validator() -> jsonschema::Validator {
    let schema: serde_json::Value = serde_json::from_str(include_str!("../result.schema.json")).unwrap();
    let sub = serde_json::json!({ "$defs": schema["$defs"], "$ref": "#/$defs/label_result" });
    jsonschema::validator_for(&sub).expect("label_result schema")
}

#[test]
fn a_run_sends_both_entries_and_files_results_per_label() {
    let _serial = common::serial();
    let server = http_server(HttpOpts::default());
    let dir = temp_path("e2e");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("beta.txt"), "beta body").unwrap();
    std::fs::write(
        dir.join("reqs.jsonl"),
        format!(
            "{{\"method\":\"POST\",\"url\":\"{}\",\"body\":\"alpha {{{{seq}}}}\",\"label\":\"alpha\"}}\n\
             {{\"method\":\"PUT\",\"path\":\"/beta?x=1\",\"headers\":{{\"Content-Type\":\"text/plain\"}},\"body_file\":\"beta.txt\",\"label\":\"beta\"}}\n",
            server.url("http", "/alpha")
        ),
    )
    .unwrap();
    let mut cfg = common::http_config(&server.url("http", "/"), Some(400.0), 1, 2, 1.0);
    let url = cfg.url.clone();
    let d = Defaults { url: &url, method: "GET", headers: &[], body: b"" };
    cfg.requests = Some(Arc::new(RequestSet::load(&dir.join("reqs.jsonl"), &d, None, 1).unwrap()));
    let out = perfkit_load::run(&cfg).expect("run");
    let r = &out.result;
    assert_eq!(r.intended, 400);
    assert_eq!(r.labels.iter().map(|l| (l.label.as_str(), l.tally.intended)).collect::<Vec<_>>(), vec![("alpha", 200), ("beta", 200)]);
    assert_labels_add_up(r);
    assert!(r.labels.iter().all(|l| l.tally.requests >= 195), "{:?}", r.labels.iter().map(|l| l.tally.requests).collect::<Vec<_>>());
    assert_eq!(r.info.method, "POST,PUT");
    assert_eq!(r.info.seed, Some(1));
    // The server got both bodies; alpha's carry distinct even request numbers.
    let bodies = server.stats.bodies.lock().unwrap().clone();
    let beta = bodies.iter().filter(|b| b.as_slice() == b"beta body").count();
    let alphas: Vec<u64> = bodies
        .iter()
        .filter_map(|b| std::str::from_utf8(b).ok()?.strip_prefix("alpha ")?.parse().ok())
        .collect();
    assert_eq!(beta + alphas.len(), bodies.len(), "no other body");
    assert!(beta >= 195 && alphas.len() >= 195, "beta {beta}, alpha {}", alphas.len());
    assert_eq!(alphas.iter().collect::<HashSet<_>>().len(), alphas.len(), "{{seq}} is unique");
    assert!(alphas.iter().all(|n| n % 2 == 0), "round-robin: alpha is the even requests");
    // The JSON carries the labels (valid against the schema) and a merge restores them.
    let v = serde_json::to_value(r).unwrap();
    let validator = label_validator();
    for l in v["labels"].as_array().unwrap() {
        let errors: Vec<String> = validator.iter_errors(l).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{errors:?}");
    }
    let back: RunResult = serde_json::from_value(v).unwrap();
    let (merged, _) = perfkit_load::merge::merge_results(&[back]).unwrap();
    assert_eq!(serde_json::to_value(&merged.labels).unwrap(), serde_json::to_value(&r.labels).unwrap());
    let text = perfkit_load::report::render_text(r, &out.merged, false, false);
    assert!(text.contains("Label") && text.contains("alpha") && text.contains("beta"), "{text}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn vegeta_targets_work_end_to_end() {
    let _serial = common::serial();
    let server = http_server(HttpOpts::default());
    let dir = temp_path("vegeta");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("order.json"), "{\"order\":{{seq}}}").unwrap();
    let targets = format!(
        "# vegeta http format\nGET {base}/health\nX-Probe: 1\n\nPOST {base}/orders\nContent-Type: application/json\n@order.json\n",
        base = server.url("http", "")
    );
    std::fs::write(dir.join("targets.txt"), targets).unwrap();
    let json = dir.join("result.json");
    let url = server.url("http", "/");
    let (code, out, err) = run_cli(&[
        "-t1", "-c2", "-d1s", "-R", "200", "--seed", "9",
        "--requests", dir.join("targets.txt").to_str().unwrap(),
        "--json", json.to_str().unwrap(),
        &url,
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let r: RunResult = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(r.labels.iter().map(|l| l.label.as_str()).collect::<Vec<_>>(), vec!["GET /health", "POST /orders"]);
    assert_eq!(r.labels.iter().map(|l| l.tally.intended).collect::<Vec<_>>(), vec![100, 100]);
    assert_labels_add_up(&r);
    assert!(out.contains("GET /health") && out.contains("POST /orders"), "per-label table: {out}");
    let bodies = server.stats.bodies.lock().unwrap().clone();
    assert!(bodies.len() >= 95, "the POSTs carry a body: {}", bodies.len());
    for b in &bodies {
        let v: serde_json::Value = serde_json::from_slice(b).unwrap();
        assert_eq!(v["order"].as_u64().unwrap() % 2, 1, "round-robin: the POSTs are the odd requests");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn live_metrics_get_a_label_label_only_with_requests() {
    let labels = vec!["alpha".to_string(), "beta".to_string()];
    let m = LiveMetrics::with_labels("http://t/", "s", Some(10.0), &labels);
    m.observe_labeled(Some(1), Outcome::Status2xx, Some(0.002), Some(0.001));
    m.observe_labeled(Some(0), Outcome::Timeout, Some(2.0), Some(2.0));
    let text = m.render();
    assert!(text.contains("perfkit_load_requests_total{label=\"beta\",outcome=\"2xx\",scenario=\"s\",target=\"http://t/\"} 1"), "{text}");
    assert!(text.contains("perfkit_load_requests_total{label=\"alpha\",outcome=\"timeout\",scenario=\"s\",target=\"http://t/\"} 1"), "{text}");
    assert!(text.contains("perfkit_load_corrected_latency_seconds_count{label=\"beta\",scenario=\"s\",target=\"http://t/\"} 1"), "{text}");
    assert!(!text.contains("perfkit_load_requests_total{outcome="), "no unlabeled series beside: {text}");
    let plain = LiveMetrics::new("http://t/", "s", Some(10.0));
    plain.observe_labeled(None, Outcome::Status2xx, Some(0.002), Some(0.001));
    let text = plain.render();
    assert!(text.contains("perfkit_load_requests_total{outcome=\"2xx\",scenario=\"s\",target=\"http://t/\"} 1"), "{text}");
    assert!(!text.contains("label="), "{text}");
}
