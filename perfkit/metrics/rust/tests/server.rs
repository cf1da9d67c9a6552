//! The blocking /metrics server on an ephemeral port, spoken to over raw TCP.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use perfkit_metrics::{HttpServerMetrics, MetricsServer, Registry};

fn request(addr: SocketAddr, raw: &str) -> (String, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(raw.as_bytes()).unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    let (head, body) = resp.split_once("\r\n\r\n").unwrap();
    (head.to_string(), body.to_string())
}

fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

fn server() -> (Registry, MetricsServer) {
    let registry = Registry::new();
    HttpServerMetrics::new(&registry, "svc").unwrap().route("/a").observe("GET", 200, 0.001);
    registry.counter("hits", "Hits", &[]).unwrap().inc(&[]).unwrap();
    let srv = MetricsServer::start("127.0.0.1:0".parse().unwrap(), Arc::new(registry.clone())).unwrap();
    (registry, srv)
}

#[test]
fn text_by_default_and_openmetrics_when_asked() {
    let (_registry, srv) = server();
    let (head, body) = request(srv.local_addr(), "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
    assert_eq!(header(&head, "content-type"), Some("text/plain; version=0.0.4; charset=utf-8"));
    assert_eq!(header(&head, "content-length"), Some(body.len().to_string().as_str()));
    assert_eq!(header(&head, "vary"), Some("Accept"));
    assert!(body.contains("# TYPE hits_total counter\nhits_total 1.0\n"), "{body}");
    assert!(body.contains(r#"status_class="2xx",le="0.001"} 1.0"#), "{body}");
    assert!(!body.contains("# EOF"));

    let prometheus_accept = "application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.1";
    let (head, body) =
        request(srv.local_addr(), &format!("GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: {prometheus_accept}\r\n\r\n"));
    assert_eq!(header(&head, "content-type"), Some("application/openmetrics-text; version=1.0.0; charset=utf-8"));
    assert!(body.contains("# TYPE hits counter\nhits_total 1.0\n"), "{body}");
    assert!(body.ends_with("# EOF\n"), "{body}");

    let (head, body) = request(srv.local_addr(), "GET /?x=1 HTTP/1.1\r\nAccept: text/plain\r\n\r\n");
    assert_eq!(header(&head, "content-type"), Some("text/plain; version=0.0.4; charset=utf-8"));
    assert!(body.contains("hits_total"));
}

#[test]
fn head_other_methods_paths_and_garbage() {
    let (registry, srv) = server();
    let (head, body) = request(srv.local_addr(), "HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
    assert_eq!(body, "");
    let len: usize = header(&head, "content-length").unwrap().parse().unwrap();
    assert_eq!(len, registry.render(perfkit_metrics::Format::Text).len());
    let (head, _) = request(srv.local_addr(), "POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
    assert!(head.starts_with("HTTP/1.1 405"), "{head}");
    assert_eq!(header(&head, "allow"), Some("GET, HEAD"));
    let (head, body) = request(srv.local_addr(), "GET /nope HTTP/1.1\r\n\r\n");
    assert!(head.starts_with("HTTP/1.1 404"), "{head}");
    assert_eq!(body, "not found\n");
    let (head, _) = request(srv.local_addr(), "GARBAGE\x01 / HTTP/9\r\n\r\n");
    assert!(head.starts_with("HTTP/1.1 400"), "{head}");
    // A client that connects and says nothing does not stop the server for long (2 s read timeout).
    let idle = TcpStream::connect(srv.local_addr()).unwrap();
    let (head, _) = request(srv.local_addr(), "GET /metrics HTTP/1.1\r\n\r\n");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    drop(idle);
}

#[test]
fn dropping_the_server_frees_the_port() {
    let (_registry, srv) = server();
    let addr = srv.local_addr();
    drop(srv);
    assert!(TcpStream::connect(addr).is_err());
}

#[test]
fn a_taken_address_fails_at_start() {
    let (_registry, srv) = server();
    let again = MetricsServer::start(srv.local_addr(), Arc::new(Registry::new()));
    assert!(again.is_err());
}
