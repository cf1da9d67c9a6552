//! HTTP/2 (`--h2`) with the `h2` crate: cleartext with prior knowledge (`http://`) or TLS with ALPN
//! `h2` (`https://`).
//!
//! The wrk2 model per *lane*: a connection carries `--streams S` lanes, each with its own schedule
//! (lane `index · S + stream` of `connections · S`, so `--segment`, which splits by connection,
//! still gives each segment whole connections and the union of the segments is the full
//! schedule). A lane behaves like an HTTP/1.1 connection: one request in flight, the next at its
//! intended time or when the previous answer is in, whichever is later. Each lane is a task with
//! its own [`Driver`]; the lanes of a connection share its `SendRequest` handle, and one task per
//! connection drives the `h2::client::Connection`.
//!
//! Faults: a reset stream (`RST_STREAM` from the server, including `REFUSED_STREAM`) is that
//! request's outcome (`h2_reset`) and the connection stays. A request the server refused with
//! `GOAWAY` (stream id above its last one) is `h2_goaway`, and the lanes move to a new connection
//! (at once after a graceful `NO_ERROR`, after the back-off otherwise). A request about to go out
//! on a connection that has just received `GOAWAY` is sent on a new connection instead (once per
//! request; a second refusal is its outcome). A lost connection fails every lane's request in
//! flight (`read_error`); one lane at a time reopens it (its failed attempts are `connect_error`
//! for its own next request, with back-off) while the others wait, and the new connection is
//! shared by all lanes. A timeout cancels only its stream (`RST_STREAM(CANCEL)`), the connection
//! stays. Every request ends in one outcome: the drivers file the unfinished ones at the end.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use h2::client::SendRequest;
use http::header::{HeaderMap, HeaderName, HeaderValue};
use tokio::task::JoinHandle;

use crate::deadline::Deadline;
use crate::driver::Driver;
use crate::recording::Outcome;
use crate::requests::{Parts, Renderer};
use crate::transport::{ConnectTimes, Connector};

/// The largest flow-control window HTTP/2 allows (2^31 − 1).
pub const MAX_WINDOW: u32 = (1 << 31) - 1;

/// Headers that are specific to an HTTP/1.x connection and not allowed in HTTP/2 (RFC 9113 §8.2.2).
const CONNECTION_HEADERS: [&str; 6] = ["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "host"];

/// Check the HTTP/2 settings of a run (`--h2`, `--streams`, `--ws`, the windows).
pub fn check(h2: bool, ws: bool, streams: usize, windows: [Option<u32>; 2]) -> Result<(), String> {
    if streams == 0 {
        return Err("--streams must be at least 1".into());
    }
    if h2 && ws {
        return Err("--h2 and --ws can't be combined (WebSocket runs over HTTP/1.1)".into());
    }
    if !h2 && streams > 1 {
        return Err("--streams > 1 needs --h2 (HTTP/1.1 has one request in flight per connection)".into());
    }
    if !h2 && windows.iter().any(Option::is_some) {
        return Err("--h2-window and --h2-conn-window need --h2".into());
    }
    if windows.iter().flatten().any(|w| *w == 0 || *w > MAX_WINDOW) {
        return Err(format!("HTTP/2 windows must be 1 ..= {MAX_WINDOW} bytes"));
    }
    Ok(())
}

/// Parse a window size in bytes: a number with an optional `k` (KiB) or `m` (MiB) suffix.
pub fn parse_window(flag: &str, text: &str) -> Result<u32, String> {
    let t = text.trim().to_ascii_lowercase();
    let (num, scale) = match t.strip_suffix('k').or_else(|| t.strip_suffix("kib")) {
        Some(n) => (n, 1024u64),
        None => match t.strip_suffix('m').or_else(|| t.strip_suffix("mib")) {
            Some(n) => (n, 1024 * 1024),
            None => (t.as_str(), 1),
        },
    };
    let bad = || format!("invalid {flag} {text:?}: a size in bytes from 1 to {MAX_WINDOW} (k and m suffixes: KiB, MiB)");
    let v = num.trim().parse::<u64>().map_err(|_| bad())?.checked_mul(scale).ok_or_else(bad)?;
    if v == 0 || v > MAX_WINDOW as u64 {
        return Err(bad());
    }
    Ok(v as u32)
}

/// What every HTTP/2 connection of a run sends, and how it opens connections.
#[derive(Debug)]
pub struct H2Target {
    pub connector: Connector,
    /// Concurrent streams (schedule lanes) per connection.
    pub streams: usize,
    method: http::Method,
    /// Absolute: its scheme and authority become `:scheme` and `:authority`.
    uri: http::Uri,
    headers: HeaderMap,
    body: Bytes,
    window: Option<u32>,
    conn_window: Option<u32>,
}

/// The headers of an HTTP/2 request: HTTP/1-only ones dropped (connection-specific headers,
/// `content-length`, which is set from the body, `te` other than `trailers`); a `Host` header
/// becomes the `:authority` (returned apart).
fn h2_headers<'a>(pairs: impl Iterator<Item = (&'a str, &'a [u8])>) -> Result<(HeaderMap, Option<String>), String> {
    let mut headers = HeaderMap::new();
    let mut host = None;
    for (k, v) in pairs {
        let name = HeaderName::from_bytes(k.as_bytes()).map_err(|e| format!("invalid header name {k:?}: {e}"))?;
        if name == http::header::HOST {
            host = Some(String::from_utf8_lossy(v).into_owned());
            continue;
        }
        let dropped = CONNECTION_HEADERS.contains(&name.as_str())
            || name == http::header::CONTENT_LENGTH
            || (name == http::header::TE && !v.eq_ignore_ascii_case(b"trailers"));
        if !dropped {
            let value = HeaderValue::from_bytes(v).map_err(|e| format!("invalid value of header {k:?}: {e}"))?;
            headers.append(name, value);
        }
    }
    Ok((headers, host))
}

impl H2Target {
    /// The request of `cfg`: method, path and query, `:authority` from the URL (or a `Host`
    /// header), the headers minus HTTP/1-only ones, the body with its `content-length`.
    pub fn new(cfg: &crate::Config, connector: Connector) -> Result<H2Target, String> {
        let url = &cfg.url;
        let host = url.host_str().unwrap_or("");
        let host = if host.contains(':') { format!("[{host}]") } else { host.to_string() };
        let mut authority = match url.port() {
            Some(p) => format!("{host}:{p}"),
            None => host,
        };
        let pairs = cfg.headers.iter().map(|(k, v)| (k.as_str(), v.as_bytes()));
        let (mut headers, host) = h2_headers(pairs)?;
        if let Some(h) = host {
            authority = h;
        }
        let method = http::Method::from_bytes(cfg.method.as_bytes()).map_err(|e| format!("invalid method {:?}: {e}", cfg.method))?;
        if !cfg.body.is_empty() || matches!(cfg.method.as_str(), "POST" | "PUT" | "PATCH") {
            headers.insert(http::header::CONTENT_LENGTH, HeaderValue::from(cfg.body.len()));
        }
        let mut path = url.path().to_string();
        if let Some(q) = url.query() {
            path.push('?');
            path.push_str(q);
        }
        let scheme = if connector.is_tls() { "https" } else { "http" };
        let uri = http::Uri::builder()
            .scheme(scheme)
            .authority(authority.as_str())
            .path_and_query(path.as_str())
            .build()
            .map_err(|e| format!("cannot make an HTTP/2 request of {url} (authority {authority:?}): {e}"))?;
        Ok(H2Target {
            connector,
            streams: cfg.streams,
            method,
            uri,
            headers,
            body: Bytes::from(cfg.body.clone()),
            window: cfg.h2_window,
            conn_window: cfg.h2_conn_window,
        })
    }

    /// The run's one request and its body.
    fn request(&self) -> (http::Request<()>, Bytes) {
        let mut req = http::Request::new(());
        *req.method_mut() = self.method.clone();
        *req.uri_mut() = self.uri.clone();
        *req.headers_mut() = self.headers.clone();
        (req, self.body.clone())
    }

    /// A request of `--requests` (h2 takes owned parts: one allocation per request here).
    fn varied(&self, parts: &Parts) -> Result<(http::Request<()>, Bytes), String> {
        let (mut headers, host) = h2_headers(parts.headers())?;
        let body = Bytes::copy_from_slice(parts.body());
        if !body.is_empty() || matches!(parts.method(), "POST" | "PUT" | "PATCH") {
            headers.insert(http::header::CONTENT_LENGTH, HeaderValue::from(body.len()));
        }
        let authority = host.as_deref().unwrap_or(parts.authority());
        let path = std::str::from_utf8(parts.path()).map_err(|_| "the path is not UTF-8".to_string())?;
        let uri = http::Uri::builder()
            .scheme(self.uri.scheme_str().unwrap_or("http"))
            .authority(authority)
            .path_and_query(path)
            .build()
            .map_err(|e| format!("invalid request target {path:?}: {e}"))?;
        let mut req = http::Request::new(());
        *req.method_mut() = http::Method::from_bytes(parts.method().as_bytes()).map_err(|e| e.to_string())?;
        *req.uri_mut() = uri;
        *req.headers_mut() = headers;
        Ok((req, body))
    }
}

/// An open HTTP/2 connection: the handle lanes send on, and the task driving the connection.
pub struct H2Conn {
    send: SendRequest<Bytes>,
    /// Set when the connection task has ended (the connection is closed or failed).
    closed: Rc<Cell<bool>>,
    task: JoinHandle<()>,
}

/// Open a connection and check that the server speaks HTTP/2: ALPN `h2` over TLS, and a PING
/// answered (with prior knowledge over cleartext, an HTTP/1-only server fails here).
pub async fn connect(target: &H2Target) -> Result<(H2Conn, ConnectTimes), String> {
    let (stream, times) = target.connector.connect().await.map_err(|e| {
        let e = e.to_string();
        if e.contains("NoApplicationProtocol") {
            // rustls's alert when the server has ALPN protocols and h2 is not one of them.
            format!("the server did not agree to HTTP/2: --h2 offered ALPN \"h2\" and the server refused it ({e})")
        } else {
            e
        }
    })?;
    if target.connector.is_tls() && stream.alpn() != Some(b"h2".as_slice()) {
        let chose = match stream.alpn() {
            Some(p) => format!("selected {:?}", String::from_utf8_lossy(p)),
            None => "selected no protocol".into(),
        };
        return Err(format!("the server did not agree to HTTP/2: --h2 offered ALPN \"h2\" and the server {chose}"));
    }
    let mut builder = h2::client::Builder::new();
    if let Some(w) = target.window {
        builder.initial_window_size(w);
    }
    if let Some(w) = target.conn_window {
        builder.initial_connection_window_size(w);
    }
    let (send, mut conn) =
        builder.handshake::<_, Bytes>(stream).await.map_err(|e| format!("HTTP/2 handshake: {e}"))?;
    let ping = conn.ping_pong();
    let closed = Rc::new(Cell::new(false));
    let flag = closed.clone();
    let task = tokio::task::spawn_local(async move {
        let _ = conn.await;
        flag.set(true);
    });
    if let Some(mut ping) = ping {
        if let Err(e) = ping.ping(h2::Ping::opaque()).await {
            task.abort();
            let how = if target.connector.is_tls() { "" } else { " with prior knowledge (cleartext)" };
            return Err(format!("the server does not speak HTTP/2{how}: {e}"));
        }
    }
    Ok((H2Conn { send, closed, task }, times))
}

/// The connection the lanes of one connection index share.
struct Shared {
    /// The current connection: its generation, send handle and closed flag.
    current: Option<(u64, SendRequest<Bytes>, Rc<Cell<bool>>)>,
    generation: u64,
    /// A lane is opening a new connection; the others wait for it.
    reconnecting: bool,
    /// Connection tasks, old ones included (they finish their streams): aborted at the end.
    tasks: Vec<JoinHandle<()>>,
}

struct Lanes {
    shared: RefCell<Shared>,
    /// Woken when a reconnect attempt is over (new connection or not).
    changed: tokio::sync::Notify,
}

/// A lane's handle on the shared connection: its generation and a clone of the send handle.
type Handle = Option<(u64, SendRequest<Bytes>)>;

impl Lanes {
    fn install(&self, c: H2Conn) {
        let mut s = self.shared.borrow_mut();
        s.generation += 1;
        s.current = Some((s.generation, c.send, c.closed));
        s.tasks.retain(|t| !t.is_finished());
        s.tasks.push(c.task);
    }

    /// Bring `mine` up to date with the current connection; false when there is none usable.
    fn usable(&self, mine: &mut Handle) -> bool {
        let s = self.shared.borrow();
        match &s.current {
            Some((g, send, closed)) if !closed.get() => {
                if mine.as_ref().map(|m| m.0) != Some(*g) {
                    *mine = Some((*g, send.clone()));
                }
                true
            }
            _ => {
                *mine = None;
                false
            }
        }
    }

    /// Connection `generation` can't take more requests.
    fn invalidate(&self, generation: u64) {
        let mut s = self.shared.borrow_mut();
        if s.current.as_ref().is_some_and(|c| c.0 == generation) {
            s.current = None;
        }
    }
}

/// How a request failed.
struct Failure {
    outcome: Outcome,
    /// The connection can take no more requests.
    conn_lost: bool,
    back_off: bool,
}

impl Failure {
    fn of(e: h2::Error, otherwise: Outcome) -> Failure {
        if e.is_reset() {
            // Only this stream: the server reset or refused it (or h2 found it malformed).
            let outcome = if e.is_remote() { Outcome::H2Reset } else { Outcome::ReadError };
            Failure { outcome, conn_lost: false, back_off: false }
        } else if e.is_go_away() && e.is_remote() {
            Failure { outcome: Outcome::H2GoAway, conn_lost: true, back_off: e.reason() != Some(h2::Reason::NO_ERROR) }
        } else {
            Failure { outcome: otherwise, conn_lost: true, back_off: true }
        }
    }
}

/// Rough size of a header block as HTTP/1.1 would write it (name, `: `, value, CRLF). The bytes
/// on the wire are HPACK-compressed and h2 does not expose their count; `bytes_read` is the
/// response bodies plus this estimate of the heads.
fn head_size(headers: &HeaderMap) -> u64 {
    headers.iter().map(|(k, v)| (k.as_str().len() + v.len() + 4) as u64).sum()
}

/// Send the request on `send` and read the whole response (releasing flow-control capacity as
/// the body comes in): the status and the bytes read.
async fn exchange(send: &mut SendRequest<Bytes>, (req, body): (http::Request<()>, Bytes)) -> Result<(u16, u64), Failure> {
    let (response, mut body_tx) =
        send.send_request(req, body.is_empty()).map_err(|e| Failure::of(e, Outcome::WriteError))?;
    if !body.is_empty() {
        // Buffered by h2 and sent as the stream's window allows.
        body_tx.send_data(body, true).map_err(|e| Failure::of(e, Outcome::WriteError))?;
    }
    let response = response.await.map_err(|e| Failure::of(e, Outcome::ReadError))?;
    let status = response.status().as_u16();
    // ":status: NNN" and the headers.
    let mut bytes = 13 + head_size(response.headers());
    let mut body = response.into_body();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.map_err(|e| Failure::of(e, Outcome::ReadError))?;
        bytes += chunk.len() as u64;
        let _ = body.flow_control().release_capacity(chunk.len());
    }
    if let Some(trailers) = body.trailers().await.map_err(|e| Failure::of(e, Outcome::ReadError))? {
        bytes += head_size(&trailers);
    }
    drop(body_tx);
    Ok((status, bytes))
}

/// One lane for the whole run: one request in flight, on the driver's schedule.
async fn run_lane(lanes: Rc<Lanes>, target: Arc<H2Target>, mut d: Driver, timeout: Duration) {
    let mut mine: Handle = None;
    // The next request was already moved off a connection that could not take it.
    let mut moved = false;
    let mut renderer = Renderer::default();
    let mut watchdog = Deadline::new();
    while let Some(intended) = d.peek() {
        if !lanes.usable(&mut mine) {
            if lanes.shared.borrow().reconnecting {
                let changed = lanes.changed.notified();
                tokio::select! {
                    _ = changed => {}
                    _ = tokio::time::sleep_until(tokio::time::Instant::from_std(d.end)) => {}
                }
                continue;
            }
            lanes.shared.borrow_mut().reconnecting = true;
            let opened = d.reconnect(connect(&target)).await;
            if let Some(c) = opened {
                lanes.install(c);
            }
            lanes.shared.borrow_mut().reconnecting = false;
            lanes.changed.notify_waiters();
            continue;
        }
        d.wait_until(intended).await;
        // The connection may have closed while this lane waited.
        if !lanes.usable(&mut mine) {
            continue;
        }
        let (generation, send) = mine.as_mut().expect("usable");
        let generation = *generation;
        // Nothing is sent yet: a connection that received GOAWAY (or failed) fails here.
        if let Err(e) = std::future::poll_fn(|cx| send.poll_ready(cx)).await {
            lanes.invalidate(generation);
            mine = None;
            if !moved {
                moved = true;
                continue;
            }
            moved = false;
            let f = Failure::of(e, Outcome::WriteError);
            let intended = d.take();
            d.rec().failed(f.outcome, intended);
            if f.back_off {
                d.back_off().await;
            }
            continue;
        }
        moved = false;
        let intended = d.take();
        let sent = Instant::now();
        d.rec().sent(intended, sent);
        let deadline = (sent + timeout).min(d.stop);
        let request = match (d.pick(), d.request_set()) {
            (Some(pick), Some(set)) => match target.varied(&renderer.parts(set, pick)) {
                Ok(r) => r,
                Err(_) => {
                    d.rec().failed(Outcome::WriteError, intended);
                    continue;
                }
            },
            _ => target.request(),
        };
        let result = watchdog.run(deadline, exchange(send, request)).await;
        let done = Instant::now();
        match result {
            Some(Ok((status, bytes))) => {
                d.rec().completed(Outcome::of_status(status), intended, sent, done, bytes);
                d.connected_ok();
            }
            Some(Err(f)) => {
                d.rec().failed(f.outcome, intended);
                if f.conn_lost {
                    lanes.invalidate(generation);
                    mine = None;
                }
                if f.back_off {
                    d.back_off().await;
                }
            }
            None if deadline < sent + timeout => {
                // The run stopped with this request in flight.
                d.finish([(intended, sent)]);
                return;
            }
            None => {
                // Dropping the stream cancels it (RST_STREAM); the connection stays.
                d.rec().timed_out(intended, sent, sent + timeout);
            }
        }
    }
    d.finish([]);
}

/// Drive one HTTP/2 connection for the whole run: one task per lane (`drivers`, one per stream),
/// all sharing the connection (and its successors after a reconnect).
pub async fn run_connection(initial: H2Conn, target: Arc<H2Target>, drivers: Vec<Driver>, timeout: Duration) {
    let lanes = Rc::new(Lanes {
        shared: RefCell::new(Shared { current: None, generation: 0, reconnecting: false, tasks: Vec::new() }),
        changed: tokio::sync::Notify::new(),
    });
    lanes.install(initial);
    let tasks: Vec<_> = drivers
        .into_iter()
        .map(|d| tokio::task::spawn_local(run_lane(lanes.clone(), target.clone(), d, timeout)))
        .collect();
    for t in tasks {
        let _ = t.await;
    }
    let mut s = lanes.shared.borrow_mut();
    s.current = None;
    for t in s.tasks.drain(..) {
        t.abort();
    }
}
