//! The floor of the aurora_app bench: the least a single-threaded Rust HTTP/1.1 server (hyper on a
//! tokio current-thread runtime) spends per request for the same two answers aurora_app gives.
//!
//! `GET /plaintext` -> `Hello, World!` (text/plain), `GET /json` -> `{"message":"Hello, World!"}`
//! (application/json), `GET /users/<i64>` and `GET /query?id=<i64>&name=<text>` -> the user object
//! aurora_app writes for them (typed parameter, decoded query, escaped JSON), anything else -> 404.
//! Connections are kept alive; pipelined responses are written in one flush.
//!
//! With `--metrics` ([`FloorMetrics`], off by default so that the floor stays a floor) every request is
//! recorded in the kit's `http_server_request_duration_seconds{service="hyper_floor",route,method,status_class}`
//! (perfkit-metrics) and `GET /metrics` answers the exposition: the floor with the Rust recording cost added.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Instant;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, ACCEPT, CONTENT_TYPE, SERVER, VARY};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use perfkit_metrics::{Format, HttpServerMetrics, Registry, RouteMetrics};
use tokio::net::{TcpListener, TcpStream};

pub const PLAINTEXT: &[u8] = b"Hello, World!";
pub const JSON: &[u8] = br#"{"message":"Hello, World!"}"#;

/// The response for one request: routing on method, path and (for `/query`) the query string.
pub fn respond(method: &Method, path: &str, query: Option<&str>) -> Response<Full<Bytes>> {
    let get = method == Method::GET || method == Method::HEAD;
    let (status, ctype, body): (StatusCode, &'static str, Bytes) = match (get, path) {
        (true, "/plaintext") => (StatusCode::OK, "text/plain", Bytes::from_static(PLAINTEXT)),
        (true, "/json") => (StatusCode::OK, "application/json", Bytes::from_static(JSON)),
        (true, "/query") => match query_user(query.unwrap_or("")) {
            Some(body) => (StatusCode::OK, "application/json", Bytes::from(body)),
            None => (StatusCode::BAD_REQUEST, "text/plain", Bytes::from_static(b"id must be an integer\n")),
        },
        (true, p) if p.starts_with("/users/") => match p["/users/".len()..].parse::<i64>() {
            Ok(id) => (StatusCode::OK, "application/json", Bytes::from(user_json(id, "user", id % 2 == 0, [id, id.wrapping_mul(2), id.wrapping_mul(3)]))),
            Err(_) => (StatusCode::NOT_FOUND, "text/plain", Bytes::from_static(b"Not Found")),
        },
        _ => (StatusCode::NOT_FOUND, "text/plain", Bytes::from_static(b"Not Found")),
    };
    let mut resp = Response::new(Full::new(body));
    *resp.status_mut() = status;
    let headers = resp.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(ctype));
    headers.insert(SERVER, HeaderValue::from_static("hyper-floor"));
    resp
}

async fn handle(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    Ok(respond(req.method(), req.uri().path(), req.uri().query()))
}

/// `{"id":..,"name":"..","active":..,"scores":[..]}`, the name escaped as JSON requires.
pub fn user_json(id: i64, name: &str, active: bool, scores: [i64; 3]) -> Vec<u8> {
    use std::fmt::Write;
    let mut s = String::with_capacity(80 + name.len());
    let _ = write!(s, r#"{{"id":{id},"name":""#);
    for c in name.chars() {
        match c {
            '"' => s.push_str("\\\""),
            '\\' => s.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(s, "\\u{:04x}", c as u32);
            }
            c => s.push(c),
        }
    }
    let _ = write!(s, r#"","active":{active},"scores":[{},{},{}]}}"#, scores[0], scores[1], scores[2]);
    s.into_bytes()
}

/// `/query`'s answer: the first `id` (an i64) and `name` (form-decoded; "anonymous" when absent).
fn query_user(query: &str) -> Option<Vec<u8>> {
    let mut id = None;
    let mut name = None;
    for pair in query.split('&') {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        if k == "id" && id.is_none() {
            id = Some(form_decode(v)?.parse::<i64>().ok()?);
        } else if k == "name" && name.is_none() {
            name = Some(form_decode(v)?);
        }
    }
    let id = id?;
    Some(user_json(id, name.as_deref().unwrap_or("anonymous"), true, [id, 0, 0]))
}

/// `+` -> space, `%XX` -> byte; None for a malformed escape or bytes that are not UTF-8.
/// (By hand: the floor depends on hyper alone; `form_urlencoded` would do the same.)
fn form_decode(v: &str) -> Option<String> {
    let b = v.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
                if !hex.bytes().all(|c| c.is_ascii_hexdigit()) {
                    return None;
                }
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 2;
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8(out).ok()
}

/// Binds `host:port` (port 0 = ephemeral).
pub async fn bind(host: &str, port: u16) -> io::Result<TcpListener> {
    TcpListener::bind((host, port)).await
}

/// The `service` label of the floor's metrics.
pub const METRICS_SERVICE: &str = "hyper_floor";

/// `--metrics`: the request histogram with each route's series resolved once, and the `/metrics` route.
pub struct FloorMetrics {
    registry: Registry,
    plaintext: RouteMetrics,
    json: RouteMetrics,
    users: RouteMetrics,
    query: RouteMetrics,
    metrics: RouteMetrics,
    unmatched: RouteMetrics,
}

impl FloorMetrics {
    pub fn new() -> FloorMetrics {
        let registry = Registry::new();
        let http = HttpServerMetrics::new(&registry, METRICS_SERVICE).expect("a new registry has no conflicting family");
        FloorMetrics {
            plaintext: http.route("/plaintext"),
            json: http.route("/json"),
            users: http.route("/users/:id"),
            query: http.route("/query"),
            metrics: http.route("/metrics"),
            unmatched: http.unmatched(),
            registry,
        }
    }

    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Answers one request as [`respond`] does, plus `GET /metrics`, and records it: from the call of the service
    /// (hyper has parsed the request) to the response built (not yet written). A 404 is recorded as the route
    /// `<unmatched>`.
    pub fn handle<B>(&self, req: &Request<B>) -> Response<Full<Bytes>> {
        let start = Instant::now();
        let method = req.method();
        let path = req.uri().path();
        let get = method == Method::GET || method == Method::HEAD;
        let (resp, route) = if get && path == "/metrics" {
            let accept = req.headers().get(ACCEPT).and_then(|v| v.to_str().ok());
            (self.exposition(accept), &self.metrics)
        } else {
            let resp = respond(method, path, req.uri().query());
            let route = match path {
                _ if resp.status() == StatusCode::NOT_FOUND => &self.unmatched,
                "/plaintext" => &self.plaintext,
                "/json" => &self.json,
                "/query" => &self.query,
                _ => &self.users,
            };
            (resp, route)
        };
        route.observe_since(method.as_str(), u32::from(resp.status().as_u16()), start);
        resp
    }

    /// The `/metrics` response: OpenMetrics when `accept` asks for it, else the text format.
    pub fn exposition(&self, accept: Option<&str>) -> Response<Full<Bytes>> {
        let format = Format::from_accept(accept);
        let mut resp = Response::new(Full::new(Bytes::from(self.registry.render(format))));
        let headers = resp.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static(format.content_type()));
        headers.insert(VARY, HeaderValue::from_static("Accept"));
        headers.insert(SERVER, HeaderValue::from_static("hyper-floor"));
        resp
    }
}

impl Default for FloorMetrics {
    fn default() -> FloorMetrics {
        FloorMetrics::new()
    }
}

fn serve_connection(stream: TcpStream, metrics: Option<&Rc<FloorMetrics>>) {
    let _ = stream.set_nodelay(true);
    let io = TokioIo::new(stream);
    match metrics {
        None => {
            tokio::task::spawn_local(async move {
                // Errors of one connection (a peer that resets, a malformed request answered by hyper
                // with 400) end that connection only.
                let _ = http1::Builder::new()
                    .keep_alive(true)
                    .pipeline_flush(true)
                    .serve_connection(io, service_fn(handle))
                    .await;
            });
        }
        Some(m) => {
            let m = m.clone();
            tokio::task::spawn_local(async move {
                let svc = service_fn(|req: Request<Incoming>| std::future::ready(Ok::<_, Infallible>(m.handle(&req))));
                let _ = http1::Builder::new().keep_alive(true).pipeline_flush(true).serve_connection(io, svc).await;
            });
        }
    }
}

/// Accepts connections until `shutdown` completes. Must run inside a `tokio::task::LocalSet`
/// (connections are spawned with `spawn_local`: one thread, no work stealing).
pub async fn serve<F>(listener: TcpListener, shutdown: F) -> io::Result<()>
where
    F: Future<Output = ()>,
{
    serve_with(listener, shutdown, None).await
}

/// [`serve`], recording every request in `metrics` and answering `GET /metrics` when there are metrics.
pub async fn serve_with<F>(listener: TcpListener, shutdown: F, metrics: Option<Rc<FloorMetrics>>) -> io::Result<()>
where
    F: Future<Output = ()>,
{
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => return Ok(()),
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => serve_connection(stream, metrics.as_ref()),
                // Too many open files and the like: keep serving the connections we have.
                Err(e) if is_transient(&e) => {
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
                Err(e) => return Err(e),
            },
        }
    }
}

fn is_transient(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::Interrupted
            | io::ErrorKind::WouldBlock
    ) || matches!(e.raw_os_error(), Some(23) | Some(24) | Some(105) | Some(12))
}

/// Installs the SIGTERM and SIGINT handlers now; the future resolves on the first of them.
pub fn termination() -> io::Result<impl Future<Output = ()>> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    })
}

/// Command-line options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    pub host: String,
    pub port: u16,
    /// `--metrics`: record every request and serve `GET /metrics`.
    pub metrics: bool,
}

pub const USAGE: &str = concat!(
    "usage: hyper-floor [--host ADDR] [--port PORT] [--metrics]\n",
    "  --host ADDR   address to bind (default 127.0.0.1)\n",
    "  --port PORT   port to bind, 0 = ephemeral (default 0)\n",
    "  --metrics     record http_server_request_duration_seconds per request and serve GET /metrics (default off)\n",
);

/// Parses `--host X --port N --metrics` (also `--host=X`); `Err` carries a message for stderr.
pub fn parse_args<I: IntoIterator<Item = String>>(args: I) -> Result<Option<Options>, String> {
    let mut opts = Options { host: "127.0.0.1".into(), port: 0, metrics: false };
    let mut it = args.into_iter();
    while let Some(arg) = it.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (arg.clone(), None),
        };
        match flag.as_str() {
            "-h" | "--help" => return Ok(None),
            "--metrics" if inline.is_none() => opts.metrics = true,
            "--metrics" => return Err("--metrics takes no value".into()),
            "--host" | "--port" => {
                let value = match inline.or_else(|| it.next()) {
                    Some(v) => v,
                    None => return Err(format!("{flag} needs a value")),
                };
                if flag == "--host" {
                    if value.is_empty() {
                        return Err("--host must not be empty".into());
                    }
                    opts.host = value;
                } else {
                    opts.port = value
                        .parse()
                        .map_err(|_| format!("--port: {value:?} is not a port number (0-65535)"))?;
                }
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(Some(opts))
}

/// The port the listener is bound to (for tests and the "listening on" line).
pub fn local_addr(listener: &TcpListener) -> io::Result<SocketAddr> {
    listener.local_addr()
}
