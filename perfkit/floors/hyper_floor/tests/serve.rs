//! The server in-process on an ephemeral port, spoken to over raw TCP.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

struct Server {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<thread::JoinHandle<std::io::Result<()>>>,
}

impl Server {
    fn start() -> Server {
        Server::start_with(false)
    }

    /// With `metrics`: as `hyper-floor --metrics`.
    fn start_with(metrics: bool) -> Server {
        let (tx, rx) = mpsc::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let thread = thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            let local = tokio::task::LocalSet::new();
            local.block_on(&rt, async move {
                let listener = hyper_floor::bind("127.0.0.1", 0).await?;
                tx.send(hyper_floor::local_addr(&listener)?).unwrap();
                let metrics = metrics.then(|| std::rc::Rc::new(hyper_floor::FloorMetrics::new()));
                hyper_floor::serve_with(
                    listener,
                    async {
                        let _ = stop_rx.await;
                    },
                    metrics,
                )
                .await
            })
        });
        let addr = rx.recv_timeout(Duration::from_secs(10)).expect("server bound");
        Server { addr, stop: Some(stop_tx), thread: Some(thread) }
    }

    fn connect(&self) -> TcpStream {
        let s = TcpStream::connect(self.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.set_nodelay(true).unwrap();
        s
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let res = t.join().expect("server thread panicked");
            if !thread::panicking() {
                res.expect("serve returned an error");
            }
        }
    }
}

#[derive(Debug)]
struct Resp {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Resp {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// Reads exactly one Content-Length-framed response from `buf` + the stream; leaves the rest in `buf`.
fn read_response(s: &mut TcpStream, buf: &mut Vec<u8>) -> Resp {
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let mut chunk = [0u8; 4096];
        let n = s.read(&mut chunk).expect("read response head");
        assert!(n > 0, "connection closed before a full response head: {:?}", String::from_utf8_lossy(buf));
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8(buf[..head_end].to_vec()).unwrap();
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap();
    assert!(status_line.starts_with("HTTP/1.1 "), "status line {status_line:?}");
    let status: u16 = status_line[9..12].parse().unwrap();
    let headers: Vec<(String, String)> = lines
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (k, v) = l.split_once(':').unwrap();
            (k.trim().to_string(), v.trim().to_string())
        })
        .collect();
    let len: usize = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .map(|(_, v)| v.parse().unwrap())
        .expect("content-length");
    while buf.len() < head_end + len {
        let mut chunk = [0u8; 4096];
        let n = s.read(&mut chunk).expect("read body");
        assert!(n > 0, "connection closed mid-body");
        buf.extend_from_slice(&chunk[..n]);
    }
    let body = buf[head_end..head_end + len].to_vec();
    buf.drain(..head_end + len);
    Resp { status, headers, body }
}

fn get(s: &mut TcpStream, path: &str) -> Resp {
    // one write per request (write! would send the pieces separately)
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: test\r\n\r\n").as_bytes()).unwrap();
    let mut buf = Vec::new();
    let r = read_response(s, &mut buf);
    assert!(buf.is_empty(), "extra bytes after the response");
    r
}

#[test]
fn plaintext() {
    let srv = Server::start();
    let r = get(&mut srv.connect(), "/plaintext");
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"Hello, World!");
    assert_eq!(r.header("content-type"), Some("text/plain"));
    assert!(r.header("date").is_some());
}

#[test]
fn json() {
    let srv = Server::start();
    let r = get(&mut srv.connect(), "/json");
    assert_eq!(r.status, 200);
    assert_eq!(r.body, br#"{"message":"Hello, World!"}"#);
    assert_eq!(r.header("content-type"), Some("application/json"));
}

#[test]
fn users_and_query_answer_what_aurora_app_does() {
    let srv = Server::start();
    let mut s = srv.connect();
    let r = get(&mut s, "/users/42");
    assert_eq!((r.status, r.header("content-type")), (200, Some("application/json")));
    assert_eq!(r.body, br#"{"id":42,"name":"user","active":true,"scores":[42,84,126]}"#);
    assert_eq!(get(&mut s, "/users/abc").status, 404);
    assert_eq!(get(&mut s, "/users/99999999999999999999").status, 404);
    let r = get(&mut s, "/query?name=a+%22b%22&id=5&id=6");
    assert_eq!(r.body, br#"{"id":5,"name":"a \"b\"","active":true,"scores":[5,0,0]}"#);
    assert_eq!(get(&mut s, "/query?id=1").body, br#"{"id":1,"name":"anonymous","active":true,"scores":[1,0,0]}"#);
    for bad in ["/query", "/query?id=x", "/query?id=%zz", "/query?id=%+1"] {
        assert_eq!(get(&mut s, bad).status, 400, "{bad}");
    }
}

#[test]
fn unknown_path_and_method_are_404() {
    let srv = Server::start();
    let mut s = srv.connect();
    assert_eq!(get(&mut s, "/nope").status, 404);
    assert_eq!(get(&mut s, "/plaintext/extra").status, 404);
    s.write_all(b"POST /plaintext HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\nhi").unwrap();
    let mut buf = Vec::new();
    assert_eq!(read_response(&mut s, &mut buf).status, 404);
    // the connection survives all of them
    assert_eq!(get(&mut s, "/plaintext").status, 200);
}

#[test]
fn keep_alive_many_requests_one_connection() {
    let srv = Server::start();
    let mut s = srv.connect();
    for i in 0..200 {
        let path = if i % 2 == 0 { "/plaintext" } else { "/json" };
        let r = get(&mut s, path);
        assert_eq!(r.status, 200, "request {i}");
        assert_ne!(r.header("connection"), Some("close"));
    }
}

#[test]
fn pipelined_requests_answered_in_order() {
    let srv = Server::start();
    let mut s = srv.connect();
    let mut batch = String::new();
    for i in 0..16 {
        let path = ["/plaintext", "/json", "/missing"][i % 3];
        batch.push_str(&format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n"));
    }
    s.write_all(batch.as_bytes()).unwrap();
    let mut buf = Vec::new();
    for i in 0..16 {
        let r = read_response(&mut s, &mut buf);
        match i % 3 {
            0 => assert_eq!((r.status, r.body.as_slice()), (200, &b"Hello, World!"[..])),
            1 => assert_eq!(r.status, 200),
            _ => assert_eq!(r.status, 404),
        }
    }
}

#[test]
fn connection_close_is_honoured() {
    let srv = Server::start();
    let mut s = srv.connect();
    s.write_all(b"GET /plaintext HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").unwrap();
    let mut buf = Vec::new();
    assert_eq!(read_response(&mut s, &mut buf).status, 200);
    let mut rest = Vec::new();
    s.read_to_end(&mut rest).expect("server closes");
    assert!(rest.is_empty());
}

#[test]
fn http10_without_keep_alive_is_closed_after_the_response() {
    let srv = Server::start();
    let mut s = srv.connect();
    s.write_all(b"GET /json HTTP/1.0\r\n\r\n").unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).expect("server closes");
    let text = String::from_utf8(out).unwrap();
    assert!(text.starts_with("HTTP/1.0 200 OK\r\n"), "got {text:?}");
    assert!(text.ends_with("\r\n\r\n{\"message\":\"Hello, World!\"}"), "got {text:?}");
}

#[test]
fn malformed_request_gets_400_and_server_keeps_serving() {
    let srv = Server::start();
    let mut bad = srv.connect();
    bad.write_all(b"THIS IS NOT HTTP\r\n\r\n").unwrap();
    let mut out = Vec::new();
    let _ = bad.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out);
    assert!(text.is_empty() || text.starts_with("HTTP/1.1 400"), "got {text:?}");
    // a client that connects and leaves mid-request does no harm either
    let mut half = srv.connect();
    half.write_all(b"GET /plain").unwrap();
    drop(half);
    assert_eq!(get(&mut srv.connect(), "/plaintext").status, 200);
}

#[test]
fn many_concurrent_connections() {
    let srv = Server::start();
    let mut conns: Vec<TcpStream> = (0..64).map(|_| srv.connect()).collect();
    for s in conns.iter_mut() {
        s.write_all(b"GET /json HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    }
    for s in conns.iter_mut() {
        let mut buf = Vec::new();
        assert_eq!(read_response(s, &mut buf).status, 200);
    }
}

fn get_with(s: &mut TcpStream, path: &str, headers: &str) -> Resp {
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: test\r\n{headers}\r\n").as_bytes()).unwrap();
    let mut buf = Vec::new();
    read_response(s, &mut buf)
}

fn value(text: &str, series: &str) -> f64 {
    let line = text.lines().find(|l| l.starts_with(series)).unwrap_or_else(|| panic!("no {series} in\n{text}"));
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

#[test]
fn no_metrics_route_without_metrics() {
    let srv = Server::start();
    assert_eq!(get(&mut srv.connect(), "/metrics").status, 404);
}

#[test]
fn metrics_record_every_request_by_route_template() {
    let srv = Server::start_with(true);
    let mut s = srv.connect();
    for _ in 0..3 {
        assert_eq!(get(&mut s, "/plaintext").status, 200);
    }
    assert_eq!(get(&mut s, "/json").status, 200);
    assert_eq!(get(&mut s, "/nothing/12345").status, 404);
    s.write_all(b"POST /plaintext HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\nhi").unwrap();
    let mut buf = Vec::new();
    assert_eq!(read_response(&mut s, &mut buf).status, 404);
    s.write_all(b"PROPFIND /json HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    assert_eq!(read_response(&mut s, &mut buf).status, 404);

    let r = get(&mut s, "/metrics");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/plain; version=0.0.4; charset=utf-8"));
    let text = String::from_utf8(r.body).unwrap();
    let h = "http_server_request_duration_seconds";
    let series = |route: &str, method: &str, class: &str| {
        format!(r#"method="{method}",route="{route}",service="hyper_floor",status_class="{class}""#)
    };
    assert!(text.contains(&format!("# TYPE {h} histogram\n")), "{text}");
    assert_eq!(value(&text, &format!("{h}_count{{{}}}", series("/plaintext", "GET", "2xx"))), 3.0);
    assert_eq!(value(&text, &format!("{h}_bucket{{{},le=\"+Inf\"}}", series("/plaintext", "GET", "2xx"))), 3.0);
    assert_eq!(value(&text, &format!("{h}_count{{{}}}", series("/json", "GET", "2xx"))), 1.0);
    // 404s are <unmatched>, never the raw path; unknown methods are OTHER.
    assert_eq!(value(&text, &format!("{h}_count{{{}}}", series("<unmatched>", "GET", "4xx"))), 1.0);
    assert_eq!(value(&text, &format!("{h}_count{{{}}}", series("<unmatched>", "POST", "4xx"))), 1.0);
    assert_eq!(value(&text, &format!("{h}_count{{{}}}", series("<unmatched>", "OTHER", "4xx"))), 1.0);
    assert!(!text.contains("12345") && !text.contains("PROPFIND"), "{text}");
    assert!(value(&text, &format!("{h}_sum{{{}}}", series("/plaintext", "GET", "2xx"))) > 0.0);
    // le as every language of the kit writes it
    assert!(text.contains(&format!("{h}_bucket{{{},le=\"2.5e-05\"}}", series("/json", "GET", "2xx"))), "{text}");

    // The scrape itself is a request of the /metrics route; OpenMetrics when asked for.
    let r = get_with(&mut s, "/metrics", "Accept: application/openmetrics-text; version=1.0.0\r\n");
    assert_eq!(r.header("content-type"), Some("application/openmetrics-text; version=1.0.0; charset=utf-8"));
    let om = String::from_utf8(r.body).unwrap();
    assert!(om.ends_with("# EOF\n"), "{om}");
    assert_eq!(value(&om, &format!("{h}_count{{{}}}", series("/metrics", "GET", "2xx"))), 1.0);
    // the connection stays usable
    assert_eq!(get(&mut s, "/plaintext").status, 200);
}

#[test]
fn metrics_with_pipelining_and_many_connections() {
    let srv = Server::start_with(true);
    let mut conns: Vec<TcpStream> = (0..8).map(|_| srv.connect()).collect();
    for s in conns.iter_mut() {
        s.write_all("GET /json HTTP/1.1\r\nHost: t\r\n\r\n".repeat(10).as_bytes()).unwrap();
    }
    for s in conns.iter_mut() {
        let mut buf = Vec::new();
        for _ in 0..10 {
            assert_eq!(read_response(s, &mut buf).status, 200);
        }
    }
    let text = String::from_utf8(get(&mut srv.connect(), "/metrics").body).unwrap();
    let series = r#"http_server_request_duration_seconds_count{method="GET",route="/json",service="hyper_floor",status_class="2xx"}"#;
    assert_eq!(value(&text, series), 80.0);
}

#[test]
fn args() {
    use hyper_floor::{parse_args, Options};
    let a = |v: &[&str]| parse_args(v.iter().map(|s| s.to_string()));
    assert_eq!(a(&[]), Ok(Some(Options { host: "127.0.0.1".into(), port: 0, metrics: false })));
    assert_eq!(
        a(&["--host", "0.0.0.0", "--port=8080"]),
        Ok(Some(Options { host: "0.0.0.0".into(), port: 8080, metrics: false }))
    );
    assert_eq!(a(&["--metrics"]), Ok(Some(Options { host: "127.0.0.1".into(), port: 0, metrics: true })));
    assert!(a(&["--metrics=yes"]).unwrap_err().contains("takes no value"));
    assert_eq!(a(&["--help"]), Ok(None));
    assert!(a(&["--port", "70000"]).unwrap_err().contains("not a port number"));
    assert!(a(&["--port"]).unwrap_err().contains("needs a value"));
    assert!(a(&["--bogus"]).unwrap_err().contains("unknown argument"));
    assert!(a(&["--host", ""]).unwrap_err().contains("empty"));
}
