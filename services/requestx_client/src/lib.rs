//! Native core of `requestx_client`: one shared tokio runtime, TLS configurations built once,
//! connection pools shared by every clone of a client, response bodies kept as `bytes::Bytes`.
//!
//! The Python layer (`requestx_client/*.py`) does the requests-compatible API work (params,
//! auth, cookies, redirects); this module only sends one HTTP exchange at a time.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

mod body;
mod decode;
mod direct;
mod json;
mod timeouts;
mod timing;
mod tls;

// ---------------------------------------------------------------------------------------------
// Shared runtime

static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();

/// How the blocking API does its I/O, from `REQUESTX_CLIENT_SYNC_IO` (fixed at the first use):
/// `direct` (the default): plain-http requests on the calling thread over pooled blocking sockets
/// (`src/direct.rs`), everything else on the background worker; `worker`: every request on the
/// background runtime's worker (hyper through reqwest), kept to measure the direct path against.
#[derive(Clone, Copy, PartialEq)]
enum SyncIo {
    Direct,
    Worker,
}

fn sync_io() -> SyncIo {
    static MODE: OnceLock<SyncIo> = OnceLock::new();
    *MODE.get_or_init(|| match std::env::var("REQUESTX_CLIENT_SYNC_IO").as_deref() {
        Ok("worker") => SyncIo::Worker,
        _ => SyncIo::Direct,
    })
}

/// The runtime of `AsyncClient` and of the blocking API's requests off the direct path: background
/// worker thread(s) drive the connections.
fn runtime() -> &'static tokio::runtime::Runtime {
    RUNTIME.get_or_init(|| {
        let workers = std::env::var("REQUESTX_CLIENT_WORKERS")
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
            .filter(|n| *n > 0)
            .unwrap_or(1);
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .thread_name("requestx-io")
            .enable_all()
            .build()
            .expect("tokio runtime")
    })
}

// ---------------------------------------------------------------------------------------------
// Exceptions: the classes live in requestx_client.exceptions (requests' hierarchy).

#[derive(Debug, Clone, Copy)]
enum ErrKind {
    Connection,
    ConnectTimeout,
    ReadTimeout,
    Timeout,
    Ssl,
    InvalidUrl,
    InvalidSchema,
    MissingSchema,
    InvalidHeader,
    ChunkedEncoding,
    ContentDecoding,
    Proxy,
    Request,
}

impl ErrKind {
    fn class_name(self) -> &'static str {
        match self {
            ErrKind::Connection => "ConnectionError",
            ErrKind::ConnectTimeout => "ConnectTimeout",
            ErrKind::ReadTimeout => "ReadTimeout",
            ErrKind::Timeout => "Timeout",
            ErrKind::Ssl => "SSLError",
            ErrKind::InvalidUrl => "InvalidURL",
            ErrKind::InvalidSchema => "InvalidSchema",
            ErrKind::MissingSchema => "MissingSchema",
            ErrKind::InvalidHeader => "InvalidHeader",
            ErrKind::ChunkedEncoding => "ChunkedEncodingError",
            ErrKind::ContentDecoding => "ContentDecodingError",
            ErrKind::Proxy => "ProxyError",
            ErrKind::Request => "RequestException",
        }
    }
}

#[derive(Debug)]
struct Failure {
    kind: ErrKind,
    msg: String,
    /// the stages seen before the failure, when the request asked for timings
    timings: Option<Box<timing::Timings>>,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.msg)
    }
}

/// So that a failure can travel inside an `io::Error` (a streamed body's reader).
impl std::error::Error for Failure {}

impl Failure {
    fn new(kind: ErrKind, msg: impl Into<String>) -> Self {
        Failure { kind, msg: msg.into(), timings: None }
    }

    fn with_timings(mut self, t: Option<timing::Timings>) -> Self {
        self.timings = t.map(Box::new);
        self
    }

    fn into_pyerr(self, py: Python<'_>) -> PyErr {
        static MODULE: PyOnceLock<Py<PyModule>> = PyOnceLock::new();
        let module = MODULE.get_or_try_init(py, || {
            py.import("requestx_client.exceptions").map(|m| m.unbind())
        });
        match module.and_then(|m| m.bind(py).getattr(self.kind.class_name())) {
            Ok(cls) => match cls.call1((self.msg.clone(),)) {
                Ok(exc) => {
                    if let Some(t) = &self.timings {
                        // the stages seen before the failure, for the client metrics
                        if let Ok(tuple) = t.py_tuple(py) {
                            let _ = exc.setattr("_timings", tuple);
                        }
                    }
                    PyErr::from_value(exc)
                }
                Err(e) => e,
            },
            Err(_) => PyRuntimeError::new_err(self.msg),
        }
    }
}

fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![err.to_string()];
    let mut src = err.source();
    while let Some(e) = src {
        let s = e.to_string();
        if !parts.iter().any(|p| p.contains(&s)) {
            parts.push(s);
        }
        src = e.source();
    }
    parts.join(": ")
}

fn is_tls_error(err: &(dyn std::error::Error + 'static)) -> bool {
    const TLS_MARKERS: [&str; 6] = [
        "invalid peer certificate",
        "peer is incompatible",
        "received corrupt message",
        "received fatal alert",
        "peer sent no certificates",
        "handshake",
    ];
    let mut src: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = src {
        if e.is::<rustls::Error>() {
            return true;
        }
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            if let Some(inner) = io.get_ref() {
                if inner.is::<rustls::Error>() {
                    return true;
                }
            }
        }
        let msg = e.to_string();
        if msg.contains("SOCKS") {
            return false; // "SOCKS handshake": the proxy's protocol, not TLS
        }
        if TLS_MARKERS.iter().any(|m| msg.contains(m)) {
            return true;
        }
        src = e.source();
    }
    false
}

/// A body error caused by the connection (reset, early EOF), not by the content encoding.
fn is_transport_error(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut src: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = src {
        if e.is::<hyper::Error>() {
            return true;
        }
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind::*;
            if matches!(io.kind(), ConnectionReset | ConnectionAborted | UnexpectedEof | BrokenPipe) {
                return true;
            }
            if let Some(inner) = io.get_ref() {
                if inner.is::<hyper::Error>() {
                    return true;
                }
            }
        }
        src = e.source();
    }
    false
}

#[derive(Clone, Copy, PartialEq)]
enum Phase {
    Send,
    Body,
}

fn classify(err: reqwest::Error, phase: Phase, via_proxy: bool) -> Failure {
    let msg = error_chain(&err);
    let kind = if err.is_timeout() {
        if err.is_connect() {
            ErrKind::ConnectTimeout
        } else {
            ErrKind::ReadTimeout
        }
    } else if is_tls_error(&err) {
        ErrKind::Ssl
    } else if (phase == Phase::Body || err.is_body() || err.is_decode()) && is_transport_error(&err) {
        ErrKind::ChunkedEncoding
    } else if err.is_decode() {
        ErrKind::ContentDecoding
    } else if err.is_builder() {
        ErrKind::InvalidUrl
    } else if phase == Phase::Body || err.is_body() {
        ErrKind::ChunkedEncoding
    } else if err.is_connect() && via_proxy {
        ErrKind::Proxy
    } else {
        ErrKind::Connection
    };
    Failure::new(kind, msg)
}

// ---------------------------------------------------------------------------------------------
// Client configuration: one reqwest::Client (and pool) per distinct setting, shared by clones.

#[derive(Clone, PartialEq, Eq, Hash)]
enum Verify {
    Yes,
    No,
    CaBundle(String),
}

#[derive(Clone, PartialEq, Eq, Hash)]
struct Key {
    verify: Verify,
    proxies: Option<Vec<(String, String)>>,
    /// client certificate (PEM file) and key (PEM file; None: in the certificate's file)
    cert: Option<(String, Option<String>)>,
}

/// reqwest clients (each with its pool) kept at once; the least recently used is dropped past this, so a
/// caller whose timeouts differ on every call (`timeout=deadline - now()`) cannot pile up pools and sockets.
const MAX_CLIENTS: usize = 8;

struct Inner {
    /// one client per setting, with the tick of its last use
    clients: Mutex<HashMap<Key, (reqwest::Client, u64)>>,
    ticks: std::sync::atomic::AtomicU64,
    trust_env: bool,
    /// offer HTTP/2 to https servers (ALPN); off: HTTP/1.1 only
    http2: bool,
    pool_max_idle_per_host: usize,
    pool_idle_timeout: Option<Duration>,
    /// blocking connections of the direct path (plain http, no proxy)
    direct: direct::Pool,
    /// the direct path has made plain-http connections (they count in `pool_count`)
    direct_used: std::sync::atomic::AtomicBool,
    /// an HTTP_PROXY/ALL_PROXY variable applies to plain-http requests: no direct path for them
    env_proxy_http: bool,
    /// an HTTPS_PROXY/ALL_PROXY variable applies to https requests: no direct path for them
    env_proxy_https: bool,
    /// the direct path's TLS settings, one per (verify, cert) used
    direct_tls: Mutex<HashMap<(Verify, Option<(String, Option<String>)>), direct::TlsSetting>>,
    /// the last URL of the direct path, parsed: a session usually calls the same URL again
    last_url: Mutex<Option<(String, reqwest::Url, direct::Target)>>,
}

impl Inner {
    fn client_for(&self, key: &Key) -> Result<reqwest::Client, Failure> {
        let tick = self.ticks.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut map = self.clients.lock().unwrap();
        if let Some((c, used)) = map.get_mut(key) {
            *used = tick;
            return Ok(c.clone());
        }
        let client = self.build(key)?;
        if map.len() >= MAX_CLIENTS {
            // dropping the client closes its idle connections (requests in flight keep theirs)
            if let Some(oldest) = map.iter().min_by_key(|(_, (_, used))| *used).map(|(k, _)| k.clone()) {
                map.remove(&oldest);
            }
        }
        map.insert(key.clone(), (client.clone(), tick));
        Ok(client)
    }

    /// The TLS settings of the direct path for (verify, cert), built once per client and setting.
    fn direct_tls(&self, verify: Verify, cert: Option<(String, Option<String>)>) -> Result<direct::TlsSetting, Failure> {
        let mut map = self.direct_tls.lock().unwrap();
        let key = (verify, cert);
        if let Some(s) = map.get(&key) {
            return Ok(s.clone());
        }
        let config = Arc::new(tls_config(&key.0, &key.1)?);
        let setting = direct::TlsSetting { id: map.len() as u64 + 1, config };
        map.insert(key, setting.clone());
        Ok(setting)
    }

    fn build(&self, key: &Key) -> Result<reqwest::Client, Failure> {
        let mut tls_config = tls_config(&key.verify, &key.cert)?;
        if self.http2 {
            // offered in the TLS handshake (ALPN): the server picks; plain http stays HTTP/1.1
            tls_config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        }
        let mut b = reqwest::Client::builder()
            .tls_backend_preconfigured(tls_config)
            .redirect(reqwest::redirect::Policy::none())
            .referer(false)
            .tcp_nodelay(true)
            .http1_title_case_headers()
            .pool_max_idle_per_host(self.pool_max_idle_per_host)
            .pool_idle_timeout(self.pool_idle_timeout)
            // marks new connections for the stage timings of requests that ask for them
            .connector_layer(timing::ConnectTimingLayer)
            // connect timeouts per request (timeouts.rs): one pool serves every timeout
            .connector_layer(timeouts::ConnectTimeoutLayer)
            .user_agent(concat!("requestx-client/", env!("CARGO_PKG_VERSION")));
        if !self.http2 {
            b = b.http1_only();
        }
        match &key.proxies {
            Some(list) => {
                b = b.no_proxy();
                for (scheme, url) in list {
                    let p = match scheme.as_str() {
                        "http" => reqwest::Proxy::http(url),
                        "https" => reqwest::Proxy::https(url),
                        _ => reqwest::Proxy::all(url),
                    }
                    .map_err(|e| Failure::new(ErrKind::InvalidUrl, format!("invalid proxy URL {url:?}: {e}")))?;
                    b = b.proxy(p);
                }
            }
            None if !self.trust_env => b = b.no_proxy(),
            None => {}
        }
        b.build()
            .map_err(|e| Failure::new(ErrKind::Request, format!("cannot build the HTTP client: {}", error_chain(&e))))
    }
}

/// The rustls configuration (HTTP/1.1 ALPN) for a `verify` setting and an optional client certificate.
fn tls_config(verify: &Verify, cert: &Option<(String, Option<String>)>) -> Result<rustls::ClientConfig, Failure> {
    let base = match verify {
        Verify::Yes => tls::verifying().clone(),
        Verify::No => tls::not_verifying().clone(),
        Verify::CaBundle(path) => tls::with_bundle(path)?,
    };
    match cert {
        None => Ok(base),
        Some((cert, pkey)) => tls::with_client_cert(base, cert, pkey.as_deref()),
    }
}

fn any_env(names: &[&str]) -> bool {
    names.iter().any(|v| std::env::var_os(v).is_some_and(|x| !x.is_empty()))
}

fn secs_to_ms(v: Option<f64>, what: &str) -> PyResult<Option<u64>> {
    match v {
        None => Ok(None),
        Some(s) if s.is_finite() && s > 0.0 => Ok(Some(((s * 1000.0).ceil() as u64).max(1))),
        Some(s) => Err(PyValueError::new_err(format!(
            "{what} timeout must be a positive number of seconds or None, got {s}"
        ))),
    }
}

/// Python `bytes` owned by a `Bytes` without copying: the object is kept alive and immutable.
struct PyBytesOwner {
    _obj: Py<PyBytes>,
    ptr: *const u8,
    len: usize,
}
// SAFETY: a bytes object is immutable and the reference keeps it alive; its buffer never moves.
unsafe impl Send for PyBytesOwner {}
unsafe impl Sync for PyBytesOwner {}
impl AsRef<[u8]> for PyBytesOwner {
    fn as_ref(&self) -> &[u8] {
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

fn bytes_from_py(b: &Bound<'_, PyBytes>) -> Bytes {
    let slice = b.as_bytes();
    if slice.len() < 4096 {
        // small bodies: a copy is cheaper than the owner allocation + refcount dance on drop
        return Bytes::copy_from_slice(slice);
    }
    Bytes::from_owner(PyBytesOwner { ptr: slice.as_ptr(), len: slice.len(), _obj: b.clone().unbind() })
}

struct Prepared {
    /// measure the stages of this request (client metrics on)
    timing: bool,
    client: reqwest::Client,
    request: reqwest::Request,
    total: Option<Duration>,
    stream: bool,
    via_proxy: bool,
    /// the client's body limits (the direct path's `Limits`), checked on the decoded body here
    limits: direct::Limits,
    /// this request's timeouts (timeouts.rs)
    connect: Option<Duration>,
    read: Option<Duration>,
}

fn parse_url(url: &str) -> Result<reqwest::Url, Failure> {
    let parsed = match reqwest::Url::parse(url) {
        Ok(u) => u,
        Err(url::ParseError::RelativeUrlWithoutBase) => {
            return Err(Failure::new(
                ErrKind::MissingSchema,
                format!("Invalid URL {url:?}: No scheme supplied. Perhaps you meant https://{url}?"),
            ))
        }
        Err(e) => return Err(Failure::new(ErrKind::InvalidUrl, format!("Invalid URL {url:?}: {e}"))),
    };
    match parsed.scheme() {
        "http" | "https" => {}
        other => {
            return Err(Failure::new(
                ErrKind::InvalidSchema,
                format!("No connection adapters were found for {url:?} (scheme {other:?})"),
            ))
        }
    }
    match parsed.host_str() {
        Some(h) if !h.is_empty() => {}
        _ => return Err(Failure::new(ErrKind::InvalidUrl, format!("Invalid URL {url:?}: No host supplied"))),
    }
    Ok(parsed)
}

// ---------------------------------------------------------------------------------------------
// Responses

enum BodyState {
    Full(Bytes),
    /// read as the caller asks: the wire's bytes (`ChunkSource`), decoded when the body is encoded
    Streaming(Box<dyn std::io::Read + Send>, Option<decode::Coding>),
    Done,
}

/// A streamed body's bytes as reqwest delivers them, read from the calling thread (never from the
/// runtime's), each wait at most `read`. Its failures travel inside `io::Error` (see `read_failure`).
struct ChunkSource {
    resp: reqwest::Response,
    pending: Bytes,
    read: Option<Duration>,
    via_proxy: bool,
}

impl std::io::Read for ChunkSource {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        while self.pending.is_empty() {
            match runtime().block_on(next_chunk(&mut self.resp, self.read, self.via_proxy)) {
                Ok(Some(c)) => self.pending = c,
                Ok(None) => return Ok(0),
                Err(f) => return Err(std::io::Error::other(f)),
            }
        }
        let n = out.len().min(self.pending.len());
        out[..n].copy_from_slice(&self.pending.split_to(n));
        Ok(n)
    }
}

/// The failure behind a streamed body's read error: the source's own (carried in the `io::Error`),
/// else the decoder's.
fn read_failure(e: std::io::Error, coding: Option<decode::Coding>) -> Failure {
    if let Some(f) = e.get_ref().and_then(|inner| inner.downcast_ref::<Failure>()) {
        return Failure::new(f.kind, f.msg.clone());
    }
    match coding {
        Some(c) => c.failure(&e),
        None => Failure::new(ErrKind::ChunkedEncoding, format!("error reading a body from connection: {e}")),
    }
}

#[pyclass(frozen, module = "requestx_client._native")]
struct NativeResponse {
    #[pyo3(get)]
    status: u16,
    #[pyo3(get)]
    url: String,
    #[pyo3(get)]
    http_version: &'static str,
    headers: HeaderMap,
    body: Mutex<BodyState>,
    content: PyOnceLock<Py<PyBytes>>,
    timings: Option<timing::Timings>,
}

fn version_str(v: reqwest::Version) -> &'static str {
    match v {
        reqwest::Version::HTTP_09 => "HTTP/0.9",
        reqwest::Version::HTTP_10 => "HTTP/1.0",
        reqwest::Version::HTTP_2 => "HTTP/2",
        reqwest::Version::HTTP_3 => "HTTP/3",
        _ => "HTTP/1.1",
    }
}

fn header_str(v: &HeaderValue) -> String {
    match v.to_str() {
        Ok(s) => s.to_owned(),
        // requests decodes header bytes as latin-1
        Err(_) => v.as_bytes().iter().map(|&b| b as char).collect(),
    }
}

struct Done {
    status: u16,
    url: String,
    version: &'static str,
    headers: HeaderMap,
    body: BodyState,
    timings: Option<timing::Timings>,
}

impl Done {
    fn into_response(self) -> NativeResponse {
        NativeResponse {
            status: self.status,
            url: self.url,
            http_version: self.version,
            headers: self.headers,
            body: Mutex::new(self.body),
            content: PyOnceLock::new(),
            timings: self.timings,
        }
    }
}

/// A whole response body from reqwest, as sent (before decoding, which `decode::decode` does after):
/// with `max_body`, refused as soon as it passes it (an announced Content-Length past it, at once).
async fn collect_body(
    mut resp: reqwest::Response,
    max_body: Option<usize>,
    read: Option<Duration>,
    via_proxy: bool,
) -> Result<Bytes, Failure> {
    if max_body.is_none() && read.is_none() {
        return resp.bytes().await.map_err(|e| classify(e, Phase::Body, via_proxy));
    }
    let max = max_body.unwrap_or(usize::MAX);
    let over = || Failure::new(ErrKind::Request, format!("response body larger than the limit of {max} bytes"));
    if resp.content_length().is_some_and(|n| n > max as u64) {
        return Err(over());
    }
    let mut body = Vec::new();
    while let Some(chunk) = next_chunk(&mut resp, read, via_proxy).await? {
        if body.len() + chunk.len() > max {
            return Err(over());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Bytes::from(body))
}

/// The next chunk of a body, waiting at most `read` for it.
async fn next_chunk(resp: &mut reqwest::Response, read: Option<Duration>, via_proxy: bool) -> Result<Option<Bytes>, Failure> {
    timeouts::within(read, resp.chunk())
        .await
        .map_err(|()| direct::read_timeout_failure())?
        .map_err(|e| classify(e, Phase::Body, via_proxy))
}

async fn execute(p: Prepared) -> Result<Done, Failure> {
    if !p.timing {
        return execute_inner(p, None).await;
    }
    // the probe is visible (a task-local) to the connector layer and the TLS hook while the
    // request runs; the stages are read from its marks at the end, whatever the outcome
    let probe = timing::Probe::new();
    let result = probe.scope(execute_inner(p, Some(probe.clone()))).await;
    let t = probe.timings();
    match result {
        Ok(mut done) => {
            done.timings = Some(t);
            Ok(done)
        }
        Err(f) => Err(f.with_timings(Some(t))),
    }
}

async fn execute_inner(p: Prepared, probe: Option<Arc<timing::Probe>>) -> Result<Done, Failure> {
    let Prepared { client, request, total, stream, via_proxy, timing: _, limits, connect, read } = p;
    let work = async move {
        let sent = timeouts::with_connect_timeout(connect, client.execute(request));
        let mut resp = timeouts::within(read, sent)
            .await
            .map_err(|()| direct::read_timeout_failure())?
            .map_err(|e| classify(e, Phase::Send, via_proxy))?;
        if let Some(p) = &probe {
            p.head();
        }
        let status = resp.status().as_u16();
        let url = resp.url().as_str().to_owned();
        let version = version_str(resp.version());
        let mut headers = std::mem::take(resp.headers_mut());
        let body = if stream {
            let source = ChunkSource { resp, pending: Bytes::new(), read, via_proxy };
            match decode::coding(&headers) {
                Some(c) => {
                    decode::strip_headers(&mut headers);
                    BodyState::Streaming(Box::new(decode::Decoding::new(c, source)), Some(c))
                }
                None => BodyState::Streaming(Box::new(source), None),
            }
        } else {
            let raw = collect_body(resp, limits.max_body, read, via_proxy).await?;
            if let Some(p) = &probe {
                p.body();
            }
            BodyState::Full(decode::decode(&mut headers, raw, limits.max_decoded, None)?)
        };
        Ok(Done { status, url, version, headers, body, timings: None })
    };
    match total {
        None => work.await,
        Some(d) => match tokio::time::timeout(d, work).await {
            Ok(r) => r,
            Err(_) => Err(Failure::new(
                ErrKind::Timeout,
                format!("request did not complete within the total timeout of {:.3} s", d.as_secs_f64()),
            )),
        },
    }
}

#[pymethods]
impl NativeResponse {
    /// Response headers as a list of (name, value) pairs, in wire order.
    fn headers<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        for (k, v) in self.headers.iter() {
            list.append((PyString::new(py, k.as_str()), header_str(v)))?;
        }
        Ok(list)
    }

    /// Values of one header (case-insensitive), joined by ", " as requests does; None if absent.
    fn header(&self, name: &str) -> Option<String> {
        let mut it = self.headers.get_all(name).iter();
        let first = it.next()?;
        let mut s = header_str(first);
        for v in it {
            s.push_str(", ");
            s.push_str(&header_str(v));
        }
        Some(s)
    }

    /// Whether the response sets cookies (a cheap check before `header_all("set-cookie")`).
    #[getter]
    fn has_set_cookie(&self) -> bool {
        self.headers.contains_key(reqwest::header::SET_COOKIE)
    }

    /// All values of one header, not joined (Set-Cookie).
    fn header_all(&self, name: &str) -> Vec<String> {
        self.headers.get_all(name).iter().map(header_str).collect()
    }

    /// The stages of this request in seconds, `(pool_wait, connect, tls, ttfb, transfer, decode)`
    /// with None for a stage not seen; None if the request did not ask for timings.
    #[getter]
    fn timings<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        self.timings.as_ref().map(|t| t.py_tuple(py)).transpose()
    }

    /// Whether the whole body has been read into memory.
    fn is_consumed(&self) -> bool {
        !matches!(*self.body.lock().unwrap(), BodyState::Streaming(..))
    }

    /// Read the rest of the body (GIL released) and return it as bytes; cached.
    fn content<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        if let Some(b) = self.content.get(py) {
            return Ok(b.bind(py).clone());
        }
        let data = self.read_all(py)?;
        let obj = PyBytes::new(py, &data);
        let _ = self.content.set(py, obj.clone().unbind());
        Ok(obj)
    }

    /// Length of the body read so far (reads the whole body).
    fn body_len(&self, py: Python<'_>) -> PyResult<usize> {
        Ok(self.read_all(py)?.len())
    }

    /// Parse the body as JSON straight from the response bytes (GIL released for large bodies).
    fn json<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let data = self.read_all(py)?;
        let body = strip_bom(&data);
        let parsed = if body.len() >= JSON_DETACH_MIN { py.detach(|| json::parse(body)) } else { json::parse(body) };
        match parsed {
            Ok(tree) => {
                let obj = {
                    // paused only while converting: the GIL is released again below
                    let _pause = (body.len() >= JSON_DETACH_MIN).then(|| json::GcPause::new(py));
                    json::ToPy::new(py).convert(&tree)
                };
                if body.len() >= JSON_DETACH_MIN {
                    py.detach(move || drop(tree));
                }
                obj
            }
            Err(e) => {
                let exc = py.import("requestx_client.exceptions")?.getattr("JSONDecodeError")?;
                let pos = byte_pos(&data, e.line(), e.column());
                let doc = String::from_utf8_lossy(&data[..data.len().min(4096)]).into_owned();
                Err(PyErr::from_value(exc.call1((e.to_string(), doc, pos))?))
            }
        }
    }

    /// Nanoseconds spent (parsing with the lock released, converting to Python objects): for tuning.
    fn _json_phases(&self, py: Python<'_>) -> PyResult<(u128, u128)> {
        let data = self.read_all(py)?;
        let t0 = std::time::Instant::now();
        let tree = py.detach(|| json::parse(strip_bom(&data))).map_err(|e| PyValueError::new_err(e.to_string()))?;
        let t1 = std::time::Instant::now();
        let _pause = json::GcPause::new(py);
        let _obj = json::ToPy::new(py).convert(&tree)?;
        let t2 = std::time::Instant::now();
        Ok(((t1 - t0).as_nanos(), (t2 - t1).as_nanos()))
    }

    /// Next piece of a streamed body: at most `size` bytes (any size if None); None at the end.
    #[pyo3(signature = (size=None))]
    fn read_chunk<'py>(&self, py: Python<'py>, size: Option<usize>) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let size = size.filter(|s| *s > 0);
        let res: Result<Option<Bytes>, Failure> = py.detach(|| {
            let mut state = self.body.lock().unwrap();
            match &mut *state {
                BodyState::Done => Ok(None),
                BodyState::Full(b) => {
                    if b.is_empty() {
                        *state = BodyState::Done;
                        return Ok(None);
                    }
                    let n = size.unwrap_or(b.len()).min(b.len());
                    Ok(Some(b.split_to(n)))
                }
                BodyState::Streaming(reader, coding) => {
                    // what one read gives: at most `size` bytes, as they arrive
                    let mut piece = vec![0u8; size.unwrap_or(STREAM_PIECE)];
                    let got = loop {
                        match reader.read(&mut piece) {
                            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                            res => break res,
                        }
                    };
                    match got {
                        Ok(0) => {
                            *state = BodyState::Done;
                            Ok(None)
                        }
                        Ok(n) => {
                            piece.truncate(n);
                            Ok(Some(Bytes::from(piece)))
                        }
                        Err(e) => {
                            let f = read_failure(e, *coding);
                            *state = BodyState::Done;
                            Err(f)
                        }
                    }
                }
            }
        });
        match res {
            Ok(Some(b)) => Ok(Some(PyBytes::new(py, &b))),
            Ok(None) => Ok(None),
            Err(f) => Err(f.into_pyerr(py)),
        }
    }

    /// Drop a streamed body without reading it (the connection is not reused).
    fn close(&self) {
        let mut state = self.body.lock().unwrap();
        if matches!(*state, BodyState::Streaming(..)) {
            *state = BodyState::Done;
        }
    }
}

impl NativeResponse {
    fn read_all(&self, py: Python<'_>) -> PyResult<Bytes> {
        let res: Result<Bytes, Failure> = py.detach(|| {
            let mut state = self.body.lock().unwrap();
            match std::mem::replace(&mut *state, BodyState::Done) {
                BodyState::Full(b) => {
                    *state = BodyState::Full(b.clone());
                    Ok(b)
                }
                BodyState::Done => Err(Failure::new(
                    ErrKind::Request,
                    "the response body was already consumed by iter_content()/close()",
                )),
                BodyState::Streaming(mut reader, coding) => {
                    let mut all = Vec::new();
                    reader.read_to_end(&mut all).map_err(|e| read_failure(e, coding))?;
                    let all = Bytes::from(all);
                    *state = BodyState::Full(all.clone());
                    Ok(all)
                }
            }
        });
        res.map_err(|f| f.into_pyerr(py))
    }
}

/// Bytes a streamed body's read gives at most when the caller names no size.
const STREAM_PIECE: usize = 64 * 1024;

/// Bodies at least this large are parsed with the interpreter lock released.
const JSON_DETACH_MIN: usize = 32 * 1024;

fn strip_bom(d: &[u8]) -> &[u8] {
    d.strip_prefix(b"\xef\xbb\xbf").unwrap_or(d)
}

fn byte_pos(data: &[u8], line: usize, column: usize) -> usize {
    if line == 0 {
        return 0;
    }
    let mut cur = 1;
    let mut start = 0;
    for (i, &b) in data.iter().enumerate() {
        if cur == line {
            break;
        }
        if b == b'\n' {
            cur += 1;
            start = i + 1;
        }
    }
    (start + column.saturating_sub(1)).min(data.len())
}

// ---------------------------------------------------------------------------------------------
// The client

#[pyclass(frozen, module = "requestx_client._native")]
struct Client {
    inner: Arc<Inner>,
}

/// Handle of an in-flight async request; cancel() aborts it.
#[pyclass(frozen, module = "requestx_client._native")]
struct Pending {
    handle: tokio::task::AbortHandle,
}

#[pymethods]
impl Pending {
    fn cancel(&self) {
        self.handle.abort();
    }
}

#[pymethods]
impl Client {
    #[new]
    #[pyo3(signature = (trust_env=true, pool_maxsize=32, pool_idle_timeout=90.0, max_body_size=None,
                        max_decoded_size=None, http2=false))]
    fn new(
        trust_env: bool,
        pool_maxsize: usize,
        pool_idle_timeout: Option<f64>,
        max_body_size: Option<usize>,
        max_decoded_size: Option<usize>,
        http2: bool,
    ) -> PyResult<Self> {
        let idle = secs_to_ms(pool_idle_timeout, "pool idle")?.map(Duration::from_millis);
        let limits = direct::Limits { max_body: max_body_size, max_decoded: max_decoded_size };
        // build the shared TLS configuration and runtime now, not on the first request
        tls::verifying();
        runtime();
        Ok(Client {
            inner: Arc::new(Inner {
                clients: Mutex::new(HashMap::new()),
                ticks: std::sync::atomic::AtomicU64::new(0),
                trust_env,
                http2,
                pool_max_idle_per_host: pool_maxsize,
                pool_idle_timeout: idle,
                direct: direct::Pool::new(pool_maxsize, idle, limits),
                direct_used: std::sync::atomic::AtomicBool::new(false),
                last_url: Mutex::new(None),
                env_proxy_http: trust_env && any_env(&["HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"]),
                env_proxy_https: trust_env && any_env(&["HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"]),
                direct_tls: Mutex::new(HashMap::new()),
            }),
        })
    }

    /// A handle sharing this client's connection pools and TLS configuration.
    fn clone_handle(&self) -> Client {
        Client { inner: self.inner.clone() }
    }

    /// Connection settings in use: one per kept reqwest client (at most MAX_CLIENTS), one per TLS
    /// setting of the direct path, and one for its plain-http connections once it has made any.
    fn pool_count(&self) -> usize {
        let clients = self.inner.clients.lock().unwrap().len();
        let direct_tls = self.inner.direct_tls.lock().unwrap().len();
        clients + direct_tls + usize::from(self.inner.direct_used.load(std::sync::atomic::Ordering::Relaxed))
    }

    /// Idle connections kept by the direct (plain-http, blocking) path: for tests.
    fn direct_idle_count(&self) -> usize {
        self.inner.direct.idle_count()
    }

    /// Send one request and wait for it (GIL released). The body is read unless `stream`.
    #[pyo3(signature = (method, url, headers=None, body=None, connect_timeout=None, read_timeout=None,
                        total_timeout=None, verify=None, proxies=None, stream=false, timing=false, cert=None))]
    #[allow(clippy::too_many_arguments)]
    fn request(
        &self,
        py: Python<'_>,
        method: &str,
        url: &str,
        headers: Option<&Bound<'_, PyAny>>,
        body: Option<&Bound<'_, PyAny>>,
        connect_timeout: Option<f64>,
        read_timeout: Option<f64>,
        total_timeout: Option<f64>,
        verify: Option<&Bound<'_, PyAny>>,
        proxies: Option<Vec<(String, String)>>,
        stream: bool,
        timing: bool,
        cert: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<NativeResponse> {
        let cert = parse_cert(cert)?;
        if !stream && total_timeout.is_none() && proxies.is_none() && sync_io() == SyncIo::Direct {
            let direct = if url.starts_with("http://") {
                !self.inner.env_proxy_http
            } else {
                // HTTP/2 is reqwest's
                url.starts_with("https://") && !self.inner.env_proxy_https && !self.inner.http2
            };
            if direct {
                return self.request_direct(
                    py, method, url, headers, body, connect_timeout, read_timeout, verify, cert, timing,
                );
            }
        }
        // a streamed body goes through a channel this thread fills while the request runs
        let (req_body, source) = match body::py_body(body)? {
            None => (None, None),
            Some(body::PyBody::Bytes(b)) => (Some(reqwest::Body::from(b)), None),
            Some(body::PyBody::Stream(f)) => {
                let (b, tx) = body::channel();
                (Some(b), Some((f, tx)))
            }
        };
        let prepared = self.prepare(
            py, method, url, headers, req_body, connect_timeout, read_timeout, total_timeout, verify, proxies, stream,
            timing, cert,
        )?;
        let result = match source {
            None => py.detach(|| runtime().block_on(execute(prepared))),
            Some((f, tx)) => {
                let task = runtime().spawn(execute(prepared));
                let fed = body::feed(py, &f, tx);
                let result = py.detach(|| runtime().block_on(task));
                fed?; // the body's own exception, raised as it is
                result.unwrap_or_else(|e| Err(Failure::new(ErrKind::Request, format!("the request task failed: {e}"))))
            }
        };
        match result {
            Ok(done) => Ok(done.into_response()),
            Err(f) => Err(f.into_pyerr(py)),
        }
    }

    /// Start a request on the shared runtime. When it completes, its result is queued on
    /// `completions` under `id` and the event loop is woken through `completions.fileno()`; the I/O
    /// thread never takes the interpreter lock.
    #[pyo3(signature = (completions, id, method, url, headers=None, body=None, connect_timeout=None,
                        read_timeout=None, total_timeout=None, verify=None, proxies=None, timing=false, cert=None))]
    #[allow(clippy::too_many_arguments)]
    fn start(
        &self,
        py: Python<'_>,
        completions: &Completions,
        id: u64,
        method: &str,
        url: &str,
        headers: Option<&Bound<'_, PyAny>>,
        body: Option<&Bound<'_, PyAny>>,
        connect_timeout: Option<f64>,
        read_timeout: Option<f64>,
        total_timeout: Option<f64>,
        verify: Option<&Bound<'_, PyAny>>,
        proxies: Option<Vec<(String, String)>>,
        timing: bool,
        cert: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Pending> {
        let cert = parse_cert(cert)?;
        // the caller is the event loop, which must not wait on the connection: a streamed body is read first
        let req_body = match body::py_body(body)? {
            None => None,
            Some(body::PyBody::Bytes(b)) => Some(reqwest::Body::from(b)),
            Some(body::PyBody::Stream(f)) => Some(reqwest::Body::from(body::drain_pieces(py, &f)?)),
        };
        let prepared = self.prepare(
            py, method, url, headers, req_body, connect_timeout, read_timeout, total_timeout, verify, proxies, false,
            timing, cert,
        )?;
        let queue = completions.queue.clone();
        let handle = runtime().spawn(async move {
            let result = execute(prepared).await;
            queue.push(id, result);
        });
        Ok(Pending { handle: handle.abort_handle() })
    }
}

/// Finished async requests waiting for the event loop thread.
struct CompletionQueue {
    items: Mutex<Vec<(u64, Result<Done, Failure>)>>,
    wake_tx: std::os::unix::net::UnixStream,
}

impl CompletionQueue {
    fn push(&self, id: u64, result: Result<Done, Failure>) {
        let was_empty = {
            let mut items = self.items.lock().unwrap();
            let was_empty = items.is_empty();
            items.push((id, result));
            was_empty
        };
        if was_empty {
            use std::io::Write;
            // a full socket buffer means a wake-up is already pending: nothing to do
            let _ = (&self.wake_tx).write(&[1]);
        }
    }
}

/// The meeting point of the runtime and one event loop: `loop.add_reader(c.fileno(), ...)`, then
/// `c.drain()` gives the finished requests as (id, response, exception) triples.
#[pyclass(frozen, module = "requestx_client._native")]
struct Completions {
    queue: Arc<CompletionQueue>,
    wake_rx: std::os::unix::net::UnixStream,
}

#[pymethods]
impl Completions {
    #[new]
    fn new() -> PyResult<Self> {
        let (tx, rx) = std::os::unix::net::UnixStream::pair()?;
        tx.set_nonblocking(true)?;
        rx.set_nonblocking(true)?;
        Ok(Completions {
            queue: Arc::new(CompletionQueue { items: Mutex::new(Vec::new()), wake_tx: tx }),
            wake_rx: rx,
        })
    }

    fn fileno(&self) -> i32 {
        use std::os::fd::AsRawFd;
        self.wake_rx.as_raw_fd()
    }

    fn drain(&self, py: Python<'_>) -> PyResult<Vec<(u64, Py<PyAny>, Py<PyAny>)>> {
        use std::io::Read;
        let mut buf = [0u8; 256];
        while let Ok(n) = (&self.wake_rx).read(&mut buf) {
            if n < buf.len() {
                break;
            }
        }
        let items = std::mem::take(&mut *self.queue.items.lock().unwrap());
        let mut out = Vec::with_capacity(items.len());
        for (id, result) in items {
            let (resp, exc): (Py<PyAny>, Py<PyAny>) = match result {
                Ok(done) => match Py::new(py, done.into_response()) {
                    Ok(r) => (r.into_any(), py.None()),
                    Err(e) => (py.None(), e.into_value(py).into_any()),
                },
                Err(f) => (py.None(), f.into_pyerr(py).into_value(py).into_any()),
            };
            out.push((id, resp, exc));
        }
        Ok(out)
    }
}

impl Client {
    #[allow(clippy::too_many_arguments)]
    fn prepare(
        &self,
        py: Python<'_>,
        method: &str,
        url: &str,
        headers: Option<&Bound<'_, PyAny>>,
        body: Option<reqwest::Body>,
        connect_timeout: Option<f64>,
        read_timeout: Option<f64>,
        total_timeout: Option<f64>,
        verify: Option<&Bound<'_, PyAny>>,
        proxies: Option<Vec<(String, String)>>,
        stream: bool,
        timing: bool,
        cert: Option<(String, Option<String>)>,
    ) -> PyResult<Prepared> {
        let method = reqwest::Method::from_bytes(method.as_bytes())
            .map_err(|_| PyValueError::new_err(format!("invalid HTTP method {method:?}")))?;
        let parsed = parse_url(url).map_err(|f| f.into_pyerr(py))?;
        let verify = parse_verify(verify)?;
        let total = secs_to_ms(total_timeout, "total")?.map(Duration::from_millis);
        let connect = secs_to_ms(connect_timeout, "connect")?.map(Duration::from_millis);
        let read = secs_to_ms(read_timeout, "read")?.map(Duration::from_millis);
        let key = Key { verify, proxies, cert };
        let via_proxy = key.proxies.is_some();
        let client = self.inner.client_for(&key).map_err(|f| f.into_pyerr(py))?;

        let mut request = reqwest::Request::new(method, parsed);
        if let Some(h) = headers {
            let map = request.headers_mut();
            each_header(py, h, |name, value| {
                match (HeaderName::from_bytes(name.as_bytes()), HeaderValue::from_bytes(value)) {
                    (Ok(n), Ok(v)) => {
                        map.append(n, v);
                        Ok(())
                    }
                    _ => Err(invalid_header(py, &format!("invalid header {name:?}"))),
                }
            })?;
        }
        // reqwest's own decompression is off (src/decode.rs decodes): the codings are offered here
        if !request.headers().contains_key(reqwest::header::ACCEPT_ENCODING) {
            request
                .headers_mut()
                .insert(reqwest::header::ACCEPT_ENCODING, HeaderValue::from_static(decode::ACCEPT_ENCODING));
        }
        *request.body_mut() = body;
        let limits = self.inner.direct.limits;
        Ok(Prepared { client, request, total, stream, via_proxy, timing, limits, connect, read })
    }
}

/// requests' `cert=`: a path to a PEM file holding the certificate and its key, or a (cert, key) pair.
fn parse_cert(cert: Option<&Bound<'_, PyAny>>) -> PyResult<Option<(String, Option<String>)>> {
    let Some(c) = cert.filter(|c| !c.is_none()) else { return Ok(None) };
    if let Ok(path) = c.extract::<String>() {
        return Ok(Some((path, None)));
    }
    if let Ok((path, key)) = c.extract::<(String, String)>() {
        return Ok(Some((path, Some(key))));
    }
    Err(PyValueError::new_err("cert must be a path to a PEM file or a (certificate, key) pair of paths"))
}

fn parse_verify(verify: Option<&Bound<'_, PyAny>>) -> PyResult<Verify> {
    Ok(match verify {
        None => Verify::Yes,
        Some(v) if v.is_none() => Verify::Yes,
        Some(v) => {
            if let Ok(b) = v.extract::<bool>() {
                if b {
                    Verify::Yes
                } else {
                    Verify::No
                }
            } else if let Ok(s) = v.extract::<String>() {
                Verify::CaBundle(s)
            } else {
                return Err(PyValueError::new_err("verify must be a bool or a path to a CA bundle"));
            }
        }
    })
}

impl Client {
    /// The direct path: see `src/direct.rs`. Same argument checks and exception types as `prepare`.
    #[allow(clippy::too_many_arguments)]
    fn request_direct(
        &self,
        py: Python<'_>,
        method: &str,
        url: &str,
        headers: Option<&Bound<'_, PyAny>>,
        body: Option<&Bound<'_, PyAny>>,
        connect_timeout: Option<f64>,
        read_timeout: Option<f64>,
        verify: Option<&Bound<'_, PyAny>>,
        cert: Option<(String, Option<String>)>,
        timing: bool,
    ) -> PyResult<NativeResponse> {
        let m = reqwest::Method::from_bytes(method.as_bytes())
            .map_err(|_| PyValueError::new_err(format!("invalid HTTP method {method:?}")))?;
        let connect_ms = secs_to_ms(connect_timeout, "connect")?;
        let read_ms = secs_to_ms(read_timeout, "read")?;
        let verify = parse_verify(verify)?; // checked as on every path (plain http does not use it)
        let cached = match &*self.inner.last_url.lock().unwrap() {
            Some((s, u, t)) if s == url => Some((u.clone(), t.clone())),
            _ => None,
        };
        let (parsed, mut target) = match cached {
            Some(c) => c,
            None => {
                let parsed = parse_url(url).map_err(|f| f.into_pyerr(py))?;
                let (host, ip) = match parsed.host() {
                    Some(url::Host::Domain(d)) => (d.to_owned(), None),
                    Some(url::Host::Ipv4(a)) => (a.to_string(), Some(std::net::IpAddr::V4(a))),
                    Some(url::Host::Ipv6(a)) => (a.to_string(), Some(std::net::IpAddr::V6(a))),
                    None => {
                        return Err(Failure::new(ErrKind::InvalidUrl, format!("Invalid URL {url:?}: No host supplied"))
                            .into_pyerr(py))
                    }
                };
                let port = parsed.port_or_known_default().unwrap_or(80);
                let target = direct::Target { host, port, ip, tls: None };
                *self.inner.last_url.lock().unwrap() = Some((url.to_owned(), parsed.clone(), target.clone()));
                (parsed, target)
            }
        };
        if parsed.scheme() == "https" {
            target.tls = Some(self.inner.direct_tls(verify, cert).map_err(|f| f.into_pyerr(py))?);
        } else if !self.inner.direct_used.load(std::sync::atomic::Ordering::Relaxed) {
            self.inner.direct_used.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        let body = body::py_body(body)?;
        let inline_len = match &body {
            Some(body::PyBody::Bytes(b)) => b.len(),
            _ => 0,
        };
        let mut wire = direct::WireRequest::new(m.as_str(), &parsed, inline_len);
        let mut seen = direct::Seen::default();
        let mut declared: Option<u64> = None;
        if let Some(h) = headers {
            each_header(py, h, |name, value| {
                if name.eq_ignore_ascii_case("content-length") {
                    declared = std::str::from_utf8(value).ok().and_then(|v| v.trim().parse().ok());
                }
                wire.header(name.as_bytes(), value);
                seen.note(name.as_bytes());
                Ok(())
            })?;
        }
        // the exception a streamed body's reader raised, to be raised as it is
        let body_error: Arc<Mutex<Option<PyErr>>> = Arc::default();
        match body {
            None => wire.finish(&parsed, seen, None),
            Some(body::PyBody::Bytes(b)) => wire.finish(&parsed, seen, Some(b)),
            Some(body::PyBody::Stream(f)) => {
                let slot = body_error.clone();
                let next = Box::new(move || {
                    Python::attach(|py| body::next_piece(py, &f)).map_err(|e| {
                        let msg = format!("reading the request body failed: {e}");
                        *slot.lock().unwrap() = Some(e);
                        Failure::new(ErrKind::Request, msg)
                    })
                });
                wire.finish_streamed(&parsed, seen, direct::BodyStream { next, length: declared });
            }
        }
        let connect = connect_ms.map(Duration::from_millis);
        let read = read_ms.map(Duration::from_millis);
        let pool = &self.inner.direct;
        let mut timings = timing.then(timing::Timings::default);
        match py.detach(|| direct::send(pool, &target, &mut wire, connect, read, timings.as_mut())) {
            Ok(a) => Ok(NativeResponse {
                status: a.status,
                url: parsed.into(),
                http_version: a.version,
                headers: a.headers,
                body: Mutex::new(BodyState::Full(a.body)),
                content: PyOnceLock::new(),
                timings,
            }),
            Err(f) => match body_error.lock().unwrap().take() {
                Some(e) => Err(e),
                None => Err(f.with_timings(timings).into_pyerr(py)),
            },
        }
    }
}

/// Each pair of the caller's header list, checked once for both paths (a str name that is an HTTP
/// token, a str or bytes value without control characters other than tab), given to `f`.
fn each_header(
    py: Python<'_>,
    headers: &Bound<'_, PyAny>,
    mut f: impl FnMut(&str, &[u8]) -> PyResult<()>,
) -> PyResult<()> {
    let list = headers.cast::<PyList>().map_err(|_| PyValueError::new_err("headers must be a list of pairs"))?;
    for item in list.iter() {
        let pair = item.cast::<PyTuple>().map_err(|_| PyValueError::new_err("header must be a pair"))?;
        let (k, v) = (pair.get_item(0)?, pair.get_item(1)?);
        let k = k.cast::<PyString>().map_err(|_| invalid_header(py, "header names must be str"))?;
        let name = k.to_str()?;
        if !direct::valid_header_name(name.as_bytes()) {
            return Err(invalid_header(py, &format!("invalid header name {name:?}")));
        }
        if let Ok(s) = v.cast::<PyString>() {
            let s = s.to_str()?;
            if !direct::valid_header_value(s.as_bytes()) {
                return Err(invalid_header(py, &format!("invalid value for header {name:?}: {s:?}")));
            }
            f(name, s.as_bytes())?;
        } else if let Ok(b) = v.cast::<PyBytes>() {
            if !direct::valid_header_value(b.as_bytes()) {
                return Err(invalid_header(py, &format!("invalid value for header {name:?}")));
            }
            f(name, b.as_bytes())?;
        } else {
            return Err(invalid_header(py, &format!("header {name:?} value must be str or bytes")));
        }
    }
    Ok(())
}

fn invalid_header(py: Python<'_>, msg: &str) -> PyErr {
    Failure::new(ErrKind::InvalidHeader, msg).into_pyerr(py)
}

/// "direct" if plain-http requests of the blocking API take the direct path, "worker" if every one
/// goes to the runtime's worker (fixed at the first use, from `REQUESTX_CLIENT_SYNC_IO`).
#[pyfunction]
fn sync_io_mode() -> &'static str {
    match sync_io() {
        SyncIo::Direct => "direct",
        SyncIo::Worker => "worker",
    }
}

/// Microseconds the direct path polls for an answer before sleeping (`REQUESTX_CLIENT_SPIN_US`).
#[pyfunction]
fn spin_us() -> u64 {
    direct::spin_budget().as_micros() as u64
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    direct::spin_setting().map_err(pyo3::exceptions::PyValueError::new_err)?;
    let _ = rustls::crypto::ring::default_provider().install_default();
    // the package's one version: Cargo.toml's (pyproject.toml takes it from there too, through maturin)
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<Client>()?;
    m.add_class::<NativeResponse>()?;
    m.add_class::<Pending>()?;
    m.add_class::<Completions>()?;
    m.add_function(wrap_pyfunction!(sync_io_mode, m)?)?;
    m.add_function(wrap_pyfunction!(spin_us, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
