//! The floor of the aurora_app bench: the least a single-threaded Rust HTTP/1.1 server (hyper on a
//! tokio current-thread runtime) spends per request for the same two answers aurora_app gives.
//!
//! `GET /plaintext` -> `Hello, World!` (text/plain), `GET /json` -> `{"message":"Hello, World!"}`
//! (application/json), anything else -> 404. Connections are kept alive; pipelined responses are
//! written in one flush.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE, SERVER};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};

pub const PLAINTEXT: &[u8] = b"Hello, World!";
pub const JSON: &[u8] = br#"{"message":"Hello, World!"}"#;

/// The response for one request: routing on method and path only, bodies are static.
pub fn respond(method: &Method, path: &str) -> Response<Full<Bytes>> {
    let (status, ctype, body): (StatusCode, &'static str, &'static [u8]) =
        match (method == Method::GET || method == Method::HEAD, path) {
            (true, "/plaintext") => (StatusCode::OK, "text/plain", PLAINTEXT),
            (true, "/json") => (StatusCode::OK, "application/json", JSON),
            _ => (StatusCode::NOT_FOUND, "text/plain", b"Not Found"),
        };
    let mut resp = Response::new(Full::new(Bytes::from_static(body)));
    *resp.status_mut() = status;
    let headers = resp.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(ctype));
    headers.insert(SERVER, HeaderValue::from_static("hyper-floor"));
    resp
}

async fn handle(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    Ok(respond(req.method(), req.uri().path()))
}

/// Binds `host:port` (port 0 = ephemeral).
pub async fn bind(host: &str, port: u16) -> io::Result<TcpListener> {
    TcpListener::bind((host, port)).await
}

fn serve_connection(stream: TcpStream) {
    let _ = stream.set_nodelay(true);
    let io = TokioIo::new(stream);
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

/// Accepts connections until `shutdown` completes. Must run inside a `tokio::task::LocalSet`
/// (connections are spawned with `spawn_local`: one thread, no work stealing).
pub async fn serve<F>(listener: TcpListener, shutdown: F) -> io::Result<()>
where
    F: Future<Output = ()>,
{
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => return Ok(()),
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => serve_connection(stream),
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
}

pub const USAGE: &str = concat!(
    "usage: hyper-floor [--host ADDR] [--port PORT]\n",
    "  --host ADDR   address to bind (default 127.0.0.1)\n",
    "  --port PORT   port to bind, 0 = ephemeral (default 0)\n",
);

/// Parses `--host X --port N` (also `--host=X`); `Err` carries a message for stderr.
pub fn parse_args<I: IntoIterator<Item = String>>(args: I) -> Result<Option<Options>, String> {
    let mut opts = Options { host: "127.0.0.1".into(), port: 0 };
    let mut it = args.into_iter();
    while let Some(arg) = it.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (arg.clone(), None),
        };
        match flag.as_str() {
            "-h" | "--help" => return Ok(None),
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
