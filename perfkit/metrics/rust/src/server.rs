//! A small blocking HTTP/1.1 server for `GET /metrics`, on a thread of its own: for programs that have no HTTP
//! server to add the route to (a load generator, a batch job). One connection at a time, `Connection: close`.
//!
//! `GET /metrics` (and `GET /`) answers the exposition in the format the `Accept` header asks for
//! ([`Format::from_accept`]); `HEAD` the same without a body; other methods 405, other paths 404, a malformed
//! request 400.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::encode::Format;
use crate::registry::Gather;

/// The server; dropping it stops it (and frees the port).
pub struct MetricsServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl MetricsServer {
    /// Binds now (so a bad address fails before anything else starts) and serves in the background.
    pub fn start(addr: SocketAddr, source: Arc<dyn Gather>) -> std::io::Result<MetricsServer> {
        let listener = TcpListener::bind(addr)?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let thread = std::thread::Builder::new().name("perfkit-metrics".into()).spawn(move || {
            for conn in listener.incoming() {
                if stop2.load(Ordering::SeqCst) {
                    break;
                }
                if let Ok(conn) = conn {
                    let _ = serve_one(conn, &*source);
                }
            }
        })?;
        Ok(MetricsServer { addr, stop, thread: Some(thread) })
    }

    /// The bound address (the port, when started on port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the blocking accept.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The answer to a request for `path` (status, content type, body); `HEAD` gets the `GET` answer's headers.
pub fn respond(method: &str, path: &str, accept: Option<&str>, source: &dyn Gather) -> (&'static str, &'static str, String) {
    let path = path.split('?').next().unwrap_or("");
    if path != "/metrics" && path != "/" {
        return ("404 Not Found", "text/plain; charset=utf-8", "not found\n".into());
    }
    if method != "GET" && method != "HEAD" {
        return ("405 Method Not Allowed", "text/plain; charset=utf-8", "method not allowed\n".into());
    }
    let format = Format::from_accept(accept);
    ("200 OK", format.content_type(), source.render(format))
}

fn serve_one(mut conn: TcpStream, source: &dyn Gather) -> std::io::Result<()> {
    conn.set_read_timeout(Some(Duration::from_secs(2)))?;
    conn.set_write_timeout(Some(Duration::from_secs(2)))?;
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = conn.read(&mut chunk)?;
        if n == 0 || buf.len() > 16 * 1024 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut req = httparse::Request::new(&mut headers);
    let ok = matches!(req.parse(&buf), Ok(httparse::Status::Complete(_)));
    let method = req.method.unwrap_or("");
    let (status, ctype, body) = if !ok {
        ("400 Bad Request", "text/plain; charset=utf-8", "bad request\n".to_string())
    } else {
        let accept: Vec<&str> = req
            .headers
            .iter()
            .filter(|h| h.name.eq_ignore_ascii_case("accept"))
            .filter_map(|h| std::str::from_utf8(h.value).ok())
            .collect();
        let accept = if accept.is_empty() { None } else { Some(accept.join(",")) };
        respond(method, req.path.unwrap_or(""), accept.as_deref(), source)
    };
    let allow = if status.starts_with("405") { "Allow: GET, HEAD\r\n" } else { "" };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nVary: Accept\r\n{allow}Connection: close\r\n\r\n",
        body.len()
    );
    conn.write_all(head.as_bytes())?;
    if method != "HEAD" {
        conn.write_all(body.as_bytes())?;
    }
    Ok(())
}
