//! Bad flags, malformed URLs and unreachable targets: a clear message, a non-zero exit, no load.

mod common;

use common::{closed_port, http_server, HttpOpts};



#[test]
fn bad_flags_exit_non_zero_with_a_message_and_send_nothing() {
    let _serial = common::serial();
    let server = http_server(HttpOpts::default());
    let url = server.url("http", "/");
    let ws_url = server.url("ws", "/");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec![&url], "a rate is required"),
        (vec!["-R", "10", "--max", &url], "not both"),
        (vec!["-R", "0", &url], "positive"),
        (vec!["-R", "-5", &url], "positive"),
        (vec!["-R", "abc", &url], "invalid value 'abc'"),
        (vec!["-R", "10", "-t", "4", "-c", "2", &url], "must be >= threads"),
        (vec!["-R", "10", "-t", "0", &url], "at least 1"),
        (vec!["-R", "10", "-d", "ten", &url], "invalid duration"),
        (vec!["-R", "10", "-d", "0s", &url], "must be > 0"),
        (vec!["-R", "10", "-d", "5x", &url], "invalid duration unit"),
        (vec!["-R", "10", "--timeout", "0", &url], "timeout must be > 0"),
        (vec!["-R", "10", "-H", "NoColon", &url], "invalid header"),
        (vec!["-R", "10", "-H", "Bad Name: x", &url], "invalid header"),
        (vec!["-R", "10", "--method", "GE T", &url], "invalid HTTP method"),
        (vec!["-R", "10", "--body", "@/nonexistent/file", &url], "cannot read the body file"),
        (vec!["-R", "10", "--metrics-addr", "nope", &url], "invalid --metrics-addr"),
        (vec!["-R", "10", "not a url"], "invalid URL"),
        (vec!["-R", "10", "http://"], "invalid URL"),
        (vec!["-R", "10", "ftp://x/"], "unsupported URL scheme"),
        (vec!["-R", "10", "--insecure", &url], "need an https:// or wss:// URL"),
        (vec!["-R", "10", "--cacert", "/nonexistent/ca.pem", "https://localhost/"], "cannot read certificates"),
        (vec!["-R", "10", "--cert", "/nonexistent/c.pem", "https://localhost/"], "--key"),
        (vec!["-R", "10", &ws_url], "needs --ws"),
        (vec!["-R", "10", "--ws", &url], "--ws needs a ws:// or wss:// URL"),
        (vec!["-R", "10", "--ws", "--body", "[1]", &ws_url], "template must be a JSON object"),
        (vec!["-R", "10", "--json", "/nonexistent/dir/x.json", &url], "cannot write"),
        (vec!["-R", "10", "--bogus", &url], "unexpected argument '--bogus'"),
        (vec!["--stages", "100", &url], "no @DURATION"),
        (vec!["--stages", "100@1s", "-R", "10", &url], "--stages replaces"),
        (vec!["--stages", "0@1s", &url], "at least one request"),
        (vec!["-R", "10", "--segment", "2/2", &url], "invalid --segment"),
        (vec!["-R", "10", "-c", "2", "-t", "1", "--segment", "0/3", &url], "segment count"),
        (vec!["-R", "10", "-c", "3", "-t", "2", "--segment", "1/2", &url], "in each segment"),
        (vec!["-R", "10", "--start-at", "1", &url], "in the past"),
        (vec!["--max", "--arrivals", "poisson", &url], "needs a rate"),
        (vec!["-R", "10", "--arrivals", "burst", &url], "invalid value 'burst'"),
        (vec!["-R", "10", "--interval", "0", &url], "at least 1ms"),
        (vec!["-R", "10", "--drain", "soon", &url], "invalid duration"),
        (vec!["-R", "10", "--threshold", "p99", &url], "invalid --threshold"),
        (vec!["-R", "10", "--threshold", "p99<5", &url], "needs a unit"),
        (vec!["-R", "10", "--hdr-log", "/nonexistent/dir/x.hlog", &url], "cannot write"),
        (vec![], "required"),
    ];
    for (args, needle) in cases {
        let (code, _out, err) = common::cli(&args);
        assert_eq!(code, 2, "{args:?} should exit 2, stderr: {err}");
        assert!(err.contains(needle), "{args:?}: expected {needle:?} in stderr: {err}");
    }
    assert_eq!(server.accepted(), 0, "no connection was opened for bad flags");
}

#[test]
fn unreachable_and_unresolvable_targets_fail_before_load() {
    let _serial = common::serial();
    let port = closed_port();
    let url = format!("http://127.0.0.1:{port}/");
    let (code, _out, err) = common::cli(&["-R", "100", "-d", "1s", &url]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("cannot connect to") && err.contains("refused"), "{err}");

    let (code, _out, err) = common::cli(&["-R", "100", "-d", "1s", "http://no-such-host.invalid/"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("cannot resolve no-such-host.invalid"), "{err}");

    // A host that accepts TCP but does not speak WebSocket.
    let server = http_server(HttpOpts::default());
    let (code, _out, err) = common::cli(&["-R", "100", "-d", "1s", "-t1", "-c3", "--ws", &server.url("ws", "/")]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("cannot connect to"), "{err}");
    assert_eq!(server.requests(), 3, "only the 3 handshake requests, no load");
}

#[test]
fn help_and_version_exit_zero() {
    let _serial = common::serial();
    let (code, out, _) = common::cli(&["--help"]);
    assert_eq!(code, 0);
    for flag in ["--rate", "--latency", "--u_latency", "--timeout", "--warmup", "--max", "--json", "--metrics-addr", "--ws"] {
        assert!(out.contains(flag), "help lists {flag}");
    }
    let (code, out, _) = common::cli(&["--version"]);
    assert_eq!(code, 0);
    assert!(out.starts_with("perfkit-load "));
}

#[test]
fn thresholds_decide_the_exit_status() {
    let _serial = common::serial();
    let server = http_server(HttpOpts::default());
    let url = server.url("http", "/");
    let base = ["-t1", "-c2", "-d1s", "-R", "200"];
    let with = |extra: &[&str]| {
        let mut a: Vec<&str> = base.to_vec();
        a.extend_from_slice(extra);
        a.push(&url);
        common::cli(&a)
    };
    let (code, out, err) = with(&["--threshold", "p99<5s", "--threshold", "errors<0.1%", "--threshold", "rate_held"]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(out.matches(" pass").count(), 3, "{out}");
    let (code, out, err) = with(&["--threshold", "p99<1us", "--threshold", "rate>=100"]);
    assert_eq!(code, 3, "{out}{err}");
    assert!(out.contains("p99<1us") && out.contains("FAIL") && err.contains("thresholds failed: p99<1us"), "{out}{err}");
    let (code, out, _) = with(&["--threshold", "rate>=1000"]);
    assert_eq!(code, 3, "200 req/s is not 1000: {out}");

    let failing = http_server(HttpOpts { status: Some(503), ..Default::default() });
    let bad_url = failing.url("http", "/");
    let (code, out, _) = common::cli(&["-t1", "-c2", "-d1s", "-R", "200", "--threshold", "failed<1%", &bad_url]);
    assert_eq!(code, 3, "every answer is a 503: {out}");
    let (code, _, _) = common::cli(&["-t1", "-c2", "-d1s", "-R", "200", "--threshold", "errors<1%", &bad_url]);
    assert_eq!(code, 0, "a 503 is an answer, not a transport error");

    let stalled = http_server(HttpOpts { stall: Some((std::time::Duration::ZERO, std::time::Duration::from_secs(3))), ..Default::default() });
    let (code, out, err) = common::cli(&["-t1", "-c2", "-d1s", "-R", "200", "--threshold", "rate_held", &stalled.url("http", "/")]);
    assert_eq!(code, 3, "{out}");
    assert!(err.contains("warning: rate not held"), "{err}");
}
