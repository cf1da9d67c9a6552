//! TLS: https:// against a real rustls server with a certificate made at test time — verified
//! with --cacert, refused without it unless --insecure, SNI, client certificates, session
//! resumption on reconnect, handshake time apart from latency, and the stall test over TLS.

mod common;

use std::time::{Duration, Instant};

use common::{self_signed, tls_http_server, HttpOpts, TlsOpts};



fn https(s: &common::TlsServer, host: &str) -> String {
    format!("https://{host}:{}/", s.server.addr.port())
}

#[test]
fn verified_with_cacert_refused_without_it_unless_insecure() {
    let _serial = common::serial();
    let s = tls_http_server(HttpOpts::default(), TlsOpts::default());
    let url = https(&s, "localhost");
    let json = common::temp_path("tls.json");
    let ca = s.ca.to_str().unwrap().to_string();
    let (code, out, err) = common::cli(&["-t1", "-c2", "-d1s", "-R", "200", "--cacert", &ca, "--json", json.to_str().unwrap(), &url]);
    assert_eq!(code, 0, "{out}{err}");
    let r: perfkit_load::report::RunResult = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(r.intended, 200);
    assert!(r.outcomes["2xx"] >= 198, "{:?}", r.outcomes);
    let c = &r.connections_opened;
    assert_eq!(c.opened, 2);
    let hs = c.tls_handshake.as_ref().expect("TLS handshakes are timed");
    assert_eq!(hs.count, 2);
    assert!(hs.min_us > 0 && out.contains("TLS handshake p50"), "{out}");
    // The handshake is not request latency: the server answers in microseconds.
    assert!(r.latency.uncorrected.percentiles_us.p50 < 20_000);

    let (code, _, err) = common::cli(&["-t1", "-c1", "-d1s", "-R", "10", &url]);
    assert_eq!(code, 1, "an unknown issuer fails before any load: {err}");
    assert!(err.contains("certificate") && err.contains("--insecure"), "{err}");
    let (code, out, err) = common::cli(&["-t1", "-c1", "-d1s", "-R", "50", "--insecure", &url]);
    assert_eq!(code, 0, "{out}{err}");
    // A name the certificate does not have.
    let (code, _, err) = common::cli(&["-t1", "-c1", "-d1s", "-R", "10", "--cacert", &ca, &https(&s, "127.0.0.1")]);
    assert_eq!(code, 1);
    assert!(err.contains("certificate"), "{err}");
}

#[test]
fn sni_comes_from_the_url_or_server_name() {
    let _serial = common::serial();
    let s = tls_http_server(HttpOpts::default(), TlsOpts { names: vec!["perfkit.test".into()], ..Default::default() });
    let ca = s.ca.to_str().unwrap().to_string();
    let (code, out, err) =
        common::cli(&["-t1", "-c1", "-d500ms", "-R", "20", "--cacert", &ca, "--server-name", "perfkit.test", &https(&s, "127.0.0.1")]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(s.sni.lock().unwrap().as_slice(), ["perfkit.test"]);
}

#[test]
fn client_certificates_are_presented() {
    let _serial = common::serial();
    let (client_cert, client_key) = self_signed(&["perfkit-client"], "client");
    let s = tls_http_server(HttpOpts::default(), TlsOpts { client_ca: Some(client_cert.clone()), ..Default::default() });
    let ca = s.ca.to_str().unwrap().to_string();
    let url = https(&s, "localhost");
    let (code, out, err) = common::cli(&[
        "-t1", "-c1", "-d500ms", "-R", "40", "--cacert", &ca, "--cert", client_cert.to_str().unwrap(), "--key",
        client_key.to_str().unwrap(), &url,
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("20 requests in"), "{out}");
    // Without one the server refuses: at setup or on the first request, never an answer.
    let (code, out, _) = common::cli(&["-t1", "-c1", "-d500ms", "-R", "40", "--cacert", &ca, &url]);
    assert!(code == 1 || out.contains("0 requests in"), "{code} {out}");
}

#[test]
fn reconnects_resume_the_tls_session() {
    let _serial = common::serial();
    // The server closes after each answer: one connection, and one handshake, per request.
    let s = tls_http_server(HttpOpts { until_close: true, ..Default::default() }, TlsOpts::default());
    let mut cfg = perfkit_load::Config::new(&https(&s, "localhost"), Some(50.0)).unwrap();
    cfg.duration = Duration::from_secs(1);
    cfg.tls.as_mut().unwrap().cacert = Some(s.ca.clone());
    let r = perfkit_load::run(&cfg).expect("run").result;
    let c = &r.connections_opened;
    assert!(c.opened >= 45, "{}", c.opened);
    assert!(c.tls_resumed * 10 >= c.opened * 8, "resumed {} of {} handshakes", c.tls_resumed, c.opened);
}

#[test]
fn the_stall_shows_in_corrected_latency_over_tls() {
    let _serial = common::serial();
    let s = tls_http_server(
        HttpOpts { stall: Some((Duration::from_millis(1500), Duration::from_secs(1))), ..Default::default() },
        TlsOpts::default(),
    );
    let mut cfg = perfkit_load::Config::new(&https(&s, "localhost"), Some(1000.0)).unwrap();
    cfg.connections = 8;
    cfg.duration = Duration::from_secs(4);
    cfg.tls.as_mut().unwrap().cacert = Some(s.ca.clone());
    let t0 = Instant::now();
    let r = perfkit_load::run(&cfg).expect("run").result;
    assert!(t0.elapsed() < Duration::from_millis(4_700));
    let (c, u) = (&r.latency.corrected.percentiles_us, &r.latency.uncorrected.percentiles_us);
    eprintln!("corrected p99 {} uncorrected p99 {}", c.p99, u.p99);
    assert_eq!(s.server.accepted(), 8, "no connection added under backlog");
    assert!(c.p99 >= 850_000, "a quarter of the requests waited up to 1 s: corrected p99 {}", c.p99);
    assert!(u.p99 < 50_000, "uncorrected p99 {}", u.p99);
    assert_eq!(r.intended, r.outcomes.values().sum::<u64>());
}
