//! HTTP/2 (`--h2`): streams as schedule lanes, rate and accounting, the stall test over h2,
//! RST_STREAM and GOAWAY outcomes, TLS with ALPN `h2`, and setup failures. In-process servers on
//! port 0: hyper's HTTP/2 server, the `h2` crate's server, and a minimal hand-written one that
//! refuses a stream with GOAWAY.

mod common;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;

const SCHEMA: &str = include_str!("../result.schema.json");

/// Load tests in this executable run one at a time (they measure rates on a shared machine).
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn temp_path(name: &str) -> PathBuf {
    let dir = std::env::var_os("TEST_TMPDIR").map(PathBuf::from).unwrap_or_else(std::env::temp_dir);
    static N: AtomicUsize = AtomicUsize::new(0);
    dir.join(format!("perfkit-load-h2-{}-{}-{name}", std::process::id(), N.fetch_add(1, Ordering::SeqCst)))
}

trait Io: AsyncRead + AsyncWrite + Unpin {}
impl<T: AsyncRead + AsyncWrite + Unpin> Io for T {}

#[derive(Default)]
struct Stats {
    accepted: AtomicUsize,
    requests: AtomicU64,
    resets: AtomicU64,
    goaways: AtomicU64,
    first_request: OnceLock<Instant>,
}

/// A server on its own thread; stops (closing every connection) on drop.
struct Server {
    addr: SocketAddr,
    stats: Arc<Stats>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    fn url(&self) -> String {
        format!("http://{}/h2?x=1", self.addr)
    }
    fn accepted(&self) -> usize {
        self.stats.accepted.load(Ordering::SeqCst)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Serve every accepted connection (after a TLS handshake with `tls`) with `handler`.
fn spawn_server<F, Fut>(tls: Option<Arc<rustls::ServerConfig>>, handler: F) -> Server
where
    F: Fn(Box<dyn Io>, Arc<Stats>) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + 'static,
{
    let stats = Arc::new(Stats::default());
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let st = stats.clone();
    let thread = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let local = tokio::task::LocalSet::new();
        local.block_on(&rt, async move {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            addr_tx.send(listener.local_addr().unwrap()).unwrap();
            let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
            let handler = Arc::new(handler);
            let accept = async {
                loop {
                    let (sock, _) = listener.accept().await.unwrap();
                    sock.set_nodelay(true).unwrap();
                    st.accepted.fetch_add(1, Ordering::SeqCst);
                    let (handler, st, acceptor) = (handler.clone(), st.clone(), acceptor.clone());
                    tokio::task::spawn_local(async move {
                        let io: Box<dyn Io> = match acceptor {
                            None => Box::new(sock),
                            Some(a) => match a.accept(sock).await {
                                Ok(s) => Box::new(s),
                                Err(_) => return,
                            },
                        };
                        handler(io, st).await;
                    });
                }
            };
            tokio::select! {
                _ = accept => {}
                _ = stop_rx => {}
            }
        });
    });
    let addr = addr_rx.recv().unwrap();
    Server { addr, stats, stop: Some(stop_tx), thread: Some(thread) }
}

/// hyper's HTTP/2 server (cleartext, prior knowledge); with `stall`, answers to requests received
/// in `[first request + at, + len)` wait until the end of that window.
fn hyper_server(stall: Option<(Duration, Duration)>) -> Server {
    spawn_server(None, move |io, stats| async move {
        let svc = hyper::service::service_fn(move |_req: hyper::Request<hyper::body::Incoming>| {
            let stats = stats.clone();
            async move {
                stats.requests.fetch_add(1, Ordering::SeqCst);
                let now = Instant::now();
                let first = *stats.first_request.get_or_init(|| now);
                if let Some((at, len)) = stall {
                    let (s, e) = (first + at, first + at + len);
                    if now >= s && now < e {
                        tokio::time::sleep_until(tokio::time::Instant::from_std(e)).await;
                    }
                }
                Ok::<_, Infallible>(hyper::Response::new(http_body_util::Full::new(Bytes::from_static(b"hello, world"))))
            }
        });
        let _ = hyper::server::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
            .serve_connection(hyper_util::rt::TokioIo::new(io), svc)
            .await;
    })
}

#[derive(Clone, Copy, Default)]
struct H2Opts {
    /// Reset every n-th stream (counted over all connections) with RST_STREAM.
    reset_every: Option<u64>,
    /// Leave requests received this long after the first one unanswered (streams kept open).
    hang_after: Option<Duration>,
}

/// The `h2` crate's server: answers `hello, world`, unless `opts` says otherwise.
fn h2_server(tls: Option<Arc<rustls::ServerConfig>>, opts: H2Opts) -> Server {
    spawn_server(tls, move |io, stats| async move {
        let Ok(mut conn) = h2::server::handshake(io).await else { return };
        let mut held = Vec::new();
        while let Some(Ok((_req, mut respond))) = conn.accept().await {
            let n = stats.requests.fetch_add(1, Ordering::SeqCst) + 1;
            let now = Instant::now();
            let first = *stats.first_request.get_or_init(|| now);
            if opts.hang_after.is_some_and(|h| now >= first + h) {
                held.push(respond);
                continue;
            }
            if opts.reset_every.is_some_and(|e| n % e == 0) {
                stats.resets.fetch_add(1, Ordering::SeqCst);
                respond.send_reset(h2::Reason::INTERNAL_ERROR);
                continue;
            }
            if let Ok(mut body) = respond.send_response(http::Response::new(()), false) {
                let _ = body.send_data(Bytes::from_static(b"hello, world"), true);
            }
        }
    })
}

async fn write_frame(io: &mut Box<dyn Io>, ty: u8, flags: u8, stream: u32, payload: &[u8]) -> std::io::Result<()> {
    let len = payload.len() as u32;
    let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, ty, flags];
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    io.write_all(&f).await
}

/// A minimal hand-written HTTP/2 server: answers every request with a bare `200`, and on each
/// connection's `after`-th request sends GOAWAY (NO_ERROR) whose last stream id is below that
/// request's stream, so the client must count that request (and any later one) as refused.
fn goaway_server(after: u64) -> Server {
    spawn_server(None, move |mut io, stats| async move {
        let mut preface = [0u8; 24];
        if io.read_exact(&mut preface).await.is_err() || write_frame(&mut io, 4, 0, 0, &[]).await.is_err() {
            return;
        }
        let (mut n, mut gone) = (0u64, false);
        loop {
            let mut h = [0u8; 9];
            if io.read_exact(&mut h).await.is_err() {
                return;
            }
            let len = u32::from_be_bytes([0, h[0], h[1], h[2]]) as usize;
            let (ty, flags) = (h[3], h[4]);
            let id = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff;
            let mut payload = vec![0u8; len];
            if io.read_exact(&mut payload).await.is_err() {
                return;
            }
            let r = match ty {
                // SETTINGS: acknowledge; PING: answer.
                4 if flags & 1 == 0 => write_frame(&mut io, 4, 1, 0, &[]).await,
                6 if flags & 1 == 0 => write_frame(&mut io, 6, 1, 0, &payload).await,
                1 if !gone => {
                    n += 1;
                    stats.requests.fetch_add(1, Ordering::SeqCst);
                    if n == after {
                        gone = true;
                        stats.goaways.fetch_add(1, Ordering::SeqCst);
                        let mut p = (id - 2).to_be_bytes().to_vec();
                        p.extend_from_slice(&0u32.to_be_bytes());
                        write_frame(&mut io, 7, 0, 0, &p).await
                    } else {
                        // HEADERS, END_STREAM | END_HEADERS, `:status: 200` (HPACK static index 8).
                        write_frame(&mut io, 1, 0x5, id, &[0x88]).await
                    }
                }
                _ => Ok(()),
            };
            if r.is_err() {
                return;
            }
        }
    })
}

/// An HTTP/1.1-only server: answers anything with 400 and closes.
fn http1_server() -> Server {
    spawn_server(None, |mut io, _| async move {
        let mut buf = [0u8; 1024];
        let _ = io.read(&mut buf).await;
        let _ = io.write_all(b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n").await;
    })
}

/// A self-signed certificate for `localhost`: the PEM file (for --cacert) and the server config
/// offering `alpn`.
fn tls_config(alpn: &[&[u8]]) -> (PathBuf, Arc<rustls::ServerConfig>) {
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let pem = temp_path("ca.pem");
    std::fs::write(&pem, ck.cert.pem()).unwrap();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(ck.signing_key.serialize_der().into());
    let mut cfg = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![ck.cert.der().clone()], key)
        .unwrap();
    cfg.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    (pem, Arc::new(cfg))
}

fn h2_config(url: &str, rate: f64, threads: usize, connections: usize, streams: usize, secs: f64) -> perfkit_load::Config {
    let mut c = perfkit_load::Config::new(url, Some(rate)).unwrap();
    c.threads = threads;
    c.connections = connections;
    c.duration = Duration::from_secs_f64(secs);
    c.h2 = true;
    c.streams = streams;
    c
}

fn sum_of_outcomes(r: &perfkit_load::report::RunResult) -> u64 {
    r.outcomes.values().sum()
}



#[test]
fn rate_and_accounting_over_streams() {
    let _serial = serial();
    let server = hyper_server(None);
    let mut cfg = h2_config(&server.url(), 2000.0, 2, 2, 8, 2.0);
    cfg.h2_window = Some(1 << 20);
    cfg.h2_conn_window = Some(4 << 20);
    let out = perfkit_load::run(&cfg).expect("run");
    let r = &out.result;
    eprintln!(
        "intended {} outcomes {:?} rate {:.1} corrected p99 {} us uncorrected p99 {} us",
        r.intended, r.outcomes, r.achieved_rate, r.latency.corrected.percentiles_us.p99, r.latency.uncorrected.percentiles_us.p99
    );
    assert_eq!(r.intended, 4000, "2 s at 2,000 req/s over 16 lanes");
    assert_eq!(sum_of_outcomes(r), r.intended, "{:?}", r.outcomes);
    assert_eq!(r.errors, 0, "{:?}", r.outcomes);
    assert_eq!(r.outcomes["2xx"] + r.outcomes["unfinished"], r.intended);
    assert!(r.outcomes["unfinished"] <= 16, "at most one in flight per lane: {:?}", r.outcomes);
    assert!((r.achieved_rate - 2000.0).abs() / 2000.0 <= 0.01, "achieved {}", r.achieved_rate);
    assert_eq!(server.accepted(), 2, "2 connections carry the 16 streams");
    assert_eq!(r.info.protocol, "h2");
    assert_eq!(r.info.streams, 8);
    assert_eq!(r.latency.corrected.count, r.intended);
    // Body bytes (12 per answer) and an estimate of the head.
    assert!(r.bytes_read >= 12 * r.outcomes["2xx"], "{}", r.bytes_read);
    let schema: serde_json::Value = serde_json::from_str(SCHEMA).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let json = serde_json::to_value(r).unwrap();
    let errors: Vec<String> = validator.iter_errors(&json).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{errors:?}");
}

#[test]
fn one_second_stall_over_h2_shows_in_corrected_latency_only() {
    let _serial = serial();
    let server = hyper_server(Some((Duration::from_millis(2500), Duration::from_secs(1))));
    let cfg = h2_config(&server.url(), 1000.0, 1, 2, 4, 6.0);
    let t0 = Instant::now();
    let out = perfkit_load::run(&cfg).expect("run");
    let elapsed = t0.elapsed();
    let r = &out.result;
    let (c, u) = (&r.latency.corrected.percentiles_us, &r.latency.uncorrected.percentiles_us);
    eprintln!(
        "requests {} rate {:.1} corrected p50 {} p99 {} max {}; uncorrected p50 {} p99 {} max {}",
        r.requests, r.achieved_rate, c.p50, c.p99, c.max, u.p50, u.p99, u.max
    );
    assert!(elapsed < Duration::from_secs(8), "the run must stop on time: {elapsed:?}");
    assert_eq!(server.accepted(), 2, "no connection added under backlog");
    assert_eq!(r.intended, 6000);
    assert_eq!(sum_of_outcomes(r), r.intended);
    assert_eq!(r.errors, 0, "{:?}", r.outcomes);
    assert!((r.achieved_rate - 1000.0).abs() / 1000.0 < 0.01, "achieved {}", r.achieved_rate);
    // A 1 s stall in 6 s holds 1/6 of the requests with latencies spread over 0..1 s: the top 6 %
    // of those (the run's top 1 %) waited at least ~0.94 s.
    assert!(c.p99 >= 900_000, "corrected p99 {} us", c.p99);
    assert!(c.max >= 950_000 && c.max < 1_500_000, "corrected max {} us", c.max);
    assert!(u.p99 < 50_000, "uncorrected p99 {} us", u.p99);
}

#[test]
fn rst_stream_is_counted_as_h2_reset() {
    let _serial = serial();
    let server = h2_server(None, H2Opts { reset_every: Some(10), ..Default::default() });
    let cfg = h2_config(&server.url(), 1000.0, 1, 2, 4, 2.0);
    let out = perfkit_load::run(&cfg).expect("run");
    let r = &out.result;
    let resets = server.stats.resets.load(Ordering::SeqCst);
    eprintln!("outcomes {:?}, server resets {resets}", r.outcomes);
    assert_eq!(r.intended, 2000);
    assert_eq!(sum_of_outcomes(r), r.intended);
    let h2_reset = r.outcomes["h2_reset"];
    assert!((h2_reset as i64 - 200).abs() <= 10, "about every 10th request: {:?}", r.outcomes);
    assert!(resets.abs_diff(h2_reset) <= 8, "every reset the server sent, {resets}, is one outcome: {h2_reset}");
    assert_eq!(r.outcomes["2xx"] + h2_reset + r.outcomes["unfinished"], r.intended, "{:?}", r.outcomes);
    assert_eq!(r.errors, h2_reset, "resets are errors");
    assert_eq!(server.accepted(), 2, "a reset stream does not cost the connection");
}

#[test]
fn goaway_refusals_are_counted_and_the_lanes_reconnect() {
    let _serial = serial();
    let server = goaway_server(50);
    let cfg = h2_config(&server.url(), 800.0, 1, 2, 4, 2.0);
    let t0 = Instant::now();
    let out = perfkit_load::run(&cfg).expect("run");
    let elapsed = t0.elapsed();
    let r = &out.result;
    let goaways = server.stats.goaways.load(Ordering::SeqCst);
    eprintln!("outcomes {:?}, GOAWAYs {goaways}, connections {}", r.outcomes, server.accepted());
    assert!(elapsed < Duration::from_millis(3500), "the run ends on time: {elapsed:?}");
    assert_eq!(r.intended, 1600);
    assert_eq!(sum_of_outcomes(r), r.intended, "{:?}", r.outcomes);
    // Every 50th request of a connection is refused, and the lanes move to a new connection.
    assert!(goaways >= 25, "{goaways}");
    let refused = r.outcomes["h2_goaway"];
    assert!(refused >= goaways - 2 && refused <= goaways * 4, "{refused} refused, {goaways} GOAWAYs");
    let accepted = server.accepted() as u64;
    assert!(accepted >= goaways && accepted <= 2 + goaways, "one new connection after each GOAWAY: {accepted}");
    assert_eq!(r.outcomes["2xx"] + refused + r.outcomes["unfinished"], r.intended, "{:?}", r.outcomes);
    assert!(r.outcomes["2xx"] >= 1500, "{:?}", r.outcomes);
}

#[test]
fn server_dying_mid_run_fails_the_lanes_and_one_lane_reconnects() {
    let _serial = serial();
    // Requests after 0.9 s are left unanswered, and the server dies at 1 s: each lane has one in flight.
    let server = h2_server(None, H2Opts { hang_after: Some(Duration::from_millis(900)), ..Default::default() });
    let cfg = h2_config(&server.url(), 400.0, 1, 1, 4, 2.0);
    let killer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(1));
        drop(server);
    });
    let t0 = Instant::now();
    let out = perfkit_load::run(&cfg).expect("run");
    let elapsed = t0.elapsed();
    killer.join().unwrap();
    let r = &out.result;
    eprintln!("outcomes {:?}, connections opened {}", r.outcomes, r.connections_opened.opened);
    assert!(elapsed < Duration::from_millis(2600), "the run ends on time: {elapsed:?}");
    assert_eq!(r.intended, 800);
    assert_eq!(sum_of_outcomes(r), r.intended, "{:?}", r.outcomes);
    assert!((350..=370).contains(&r.outcomes["2xx"]), "answers until 0.9 s: {:?}", r.outcomes);
    // The request in flight on every lane is lost with the connection.
    assert_eq!(r.outcomes["read_error"], 4, "{:?}", r.outcomes);
    assert_eq!(r.outcomes["write_error"] + r.outcomes["timeout"], 0, "{:?}", r.outcomes);
    // The lanes take turns reopening it, with back-off: a few attempts, each the outcome of one request.
    let attempts = r.outcomes["connect_error"];
    assert!((1..=40).contains(&attempts), "{:?}", r.outcomes);
    assert_eq!(r.connections_opened.opened, 1);
}

#[test]
fn tls_with_alpn_h2_and_servers_without_it() {
    let _serial = serial();
    let (ca, tls) = tls_config(&[b"h2"]);
    let server = h2_server(Some(tls), H2Opts::default());
    let url = format!("https://localhost:{}/", server.addr.port());
    let with_ca = |cfg: &mut perfkit_load::Config| {
        cfg.tls = Some(perfkit_load::transport::TlsOptions { cacert: Some(ca.clone()), ..Default::default() });
    };
    let mut cfg = h2_config(&url, 200.0, 1, 1, 4, 1.0);
    // localhost may resolve to ::1 first; connect to 127.0.0.1 and verify the name localhost.
    cfg.url = url::Url::parse(&format!("https://127.0.0.1:{}/", server.addr.port())).unwrap();
    with_ca(&mut cfg);
    cfg.tls.as_mut().unwrap().server_name = Some("localhost".into());
    let out = perfkit_load::run(&cfg).expect("run over TLS");
    let r = &out.result;
    assert_eq!(r.intended, 200);
    assert_eq!(sum_of_outcomes(r), 200);
    assert!(r.outcomes["2xx"] >= 196, "{:?}", r.outcomes);
    assert_eq!(server.accepted(), 1);
    assert_eq!(r.connections_opened.opened, 1);

    // A server that only speaks http/1.1 by ALPN, and one without ALPN: refused at setup.
    for alpn in [&[b"http/1.1".as_slice()][..], &[]] {
        let (ca2, tls) = tls_config(alpn);
        let server = h2_server(Some(tls), H2Opts::default());
        let mut cfg = h2_config(&format!("https://127.0.0.1:{}/", server.addr.port()), 100.0, 1, 1, 2, 1.0);
        cfg.tls = Some(perfkit_load::transport::TlsOptions {
            cacert: Some(ca2),
            server_name: Some("localhost".into()),
            ..Default::default()
        });
        let t0 = Instant::now();
        let err = perfkit_load::run(&cfg).err().expect("setup must fail");
        let msg = err.to_string();
        eprintln!("{msg}");
        assert!(matches!(err, perfkit_load::LoadError::Setup(_)), "{msg}");
        assert!(msg.contains("HTTP/2") && msg.contains("ALPN"), "{msg}");
        assert!(t0.elapsed() < Duration::from_secs(1), "before any load");
        assert_eq!(server.stats.requests.load(Ordering::SeqCst), 0);
    }
}

#[test]
fn flags_and_setup_failures() {
    let _serial = serial();
    let server = h2_server(None, H2Opts::default());
    let url = server.url();
    for (args, want) in [
        (vec!["-t1", "-c1", "-d1s", "-R10", "--streams", "4", url.as_str()], "--streams"),
        (vec!["-t1", "-c1", "-d1s", "-R10", "--h2", "--streams", "0", url.as_str()], "--streams"),
        (vec!["-t1", "-c1", "-d1s", "-R10", "--h2", "--ws", "ws://127.0.0.1:1/"], "--h2"),
        (vec!["-t1", "-c1", "-d1s", "-R10", "--h2", "--h2-window", "0", url.as_str()], "--h2-window"),
        (vec!["-t1", "-c1", "-d1s", "-R10", "--h2", "--h2-conn-window", "3g", url.as_str()], "--h2-conn-window"),
        (vec!["-t1", "-c1", "-d1s", "-R10", "--h2-window", "64k", url.as_str()], "--h2"),
    ] {
        let (code, _, err) = common::cli(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
    assert_eq!(server.stats.accepted.load(Ordering::SeqCst), 0, "bad flags open no connection");
    let json = temp_path("h2.json");
    let (code, out, err) = common::cli(&[
        "-t1", "-c1", "-d500ms", "-R40", "--h2", "--streams", "2", "--h2-window", "256k", "--json",
        json.to_str().unwrap(), &url,
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("HTTP/2, 2 streams per connection"), "{out}");
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(r["protocol"], "h2");
    assert_eq!(r["streams"], 2);
    assert_eq!(r["outcomes"]["2xx"], 20);
    // Closed loop: every lane sends its next request when the previous answer is in.
    let (code, out, err) = common::cli(&["-t1", "-c1", "-d300ms", "--max", "--h2", "--streams", "4", "--json", json.to_str().unwrap(), &url]);
    assert_eq!(code, 0, "{out}{err}");
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert!(r["outcomes"]["2xx"].as_u64().unwrap() >= 100, "{}", r["outcomes"]);
    assert_eq!(r["errors"], 0);
    // Prior knowledge against an HTTP/1.1-only server fails at setup (exit 1).
    let h1 = http1_server();
    let (code, _, err) = common::cli(&["-t1", "-c1", "-d1s", "-R10", "--h2", &h1.url()]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("does not speak HTTP/2"), "{err}");
}

#[test]
fn varied_requests_over_streams() {
    let _serial = serial();
    let server = hyper_server(None);
    let dir = common::temp_path("h2-requests");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("reqs.jsonl");
    std::fs::write(
        &file,
        "{\"method\":\"POST\",\"path\":\"/a?n={{seq}}\",\"body\":\"{{uuid}}\",\"label\":\"a\",\"weight\":3}\n\
         {\"path\":\"/b\",\"headers\":{\"X-Id\":\"{{rand_int 1 9}}\"},\"label\":\"b\"}\n",
    )
    .unwrap();
    let mut cfg = h2_config(&server.url(), 1000.0, 1, 2, 4, 2.0);
    let url = cfg.url.clone();
    let d = perfkit_load::requests::Defaults { url: &url, method: "GET", headers: &[], body: b"" };
    cfg.requests = Some(Arc::new(perfkit_load::requests::RequestSet::load(&file, &d, None, 5).unwrap()));
    let r = perfkit_load::run(&cfg).expect("run").result;
    assert_eq!(r.intended, 2000);
    assert_eq!(r.intended, sum_of_outcomes(&r));
    let per_label: Vec<(String, u64)> = r.labels.iter().map(|l| (l.label.clone(), l.tally.intended)).collect();
    let a = per_label.iter().find(|(l, _)| l == "a").unwrap().1 as f64;
    assert!((a / 2000.0 - 0.75).abs() < 0.05, "weights 3:1 over HTTP/2: {per_label:?}");
    assert!(r.outcomes["2xx"] >= 1990, "{:?}", r.outcomes);
    assert_eq!(server.stats.requests.load(Ordering::SeqCst) as u64, r.outcomes["2xx"] + r.outcomes["unfinished"]);
}
