//! Blocking fast path of the sync API for `http://` and HTTP/1.1 `https://` requests without a proxy.
//!
//! Why: for a small request on a reused connection, the tokio/hyper path costs a thread hand-off
//! (or an epoll registration and wait) per request plus hyper's per-request machinery. Here the
//! calling thread (interpreter lock released) writes the whole request with one `write` on a pooled
//! blocking `TcpStream` (through rustls for https: `conn.rs`) and reads the answer with blocking
//! `read`s: no epoll, no runtime, no other thread. Timeouts are socket options (`SO_RCVTIMEO`,
//! connect with a deadline). Anything this module does not handle (proxies, streamed bodies, a
//! total timeout, HTTP/2) uses reqwest.

mod conn;

use std::collections::HashMap;
use std::io;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::Bytes;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use crate::timing::Timings;
use crate::{ErrKind, Failure};
use conn::{connect, Conn};
pub use conn::TlsSetting;

/// The request line and headers (already validated) plus the body, as one buffer ready to send.
pub struct WireRequest {
    pub buf: Vec<u8>,
    /// a body too large to copy into `buf` is sent with a second write
    pub body: Option<Bytes>,
    /// a body read piece by piece while it is sent (then the request is never sent twice)
    stream: Option<BodyStream>,
    pub idempotent: bool,
    pub head: bool,
    /// a method whose request says its (possibly empty) body's length, as requests does
    needs_length: bool,
}

#[derive(Clone)]
pub struct Target {
    pub host: String,
    pub port: u16,
    pub ip: Option<IpAddr>,
    /// https: TLS with these settings; None: plain http
    pub tls: Option<TlsSetting>,
}

impl Target {
    /// Which connections of a host and port may carry a request for this target: the TLS setting's
    /// number (0 for plain http), so that no connection is shared across schemes or TLS settings.
    fn flavor(&self) -> u64 {
        self.tls.as_ref().map_or(0, |s| s.id)
    }

    fn url(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        match self.ip {
            Some(IpAddr::V6(_)) => format!("{scheme}://[{}]:{}/", self.host, self.port),
            _ => format!("{scheme}://{}:{}/", self.host, self.port),
        }
    }
}

/// Bodies up to this size are copied behind the head so the request leaves in one write.
const INLINE_BODY_MAX: usize = 64 * 1024;
const MAX_HEADERS: usize = 128;
const READ_CHUNK: usize = 16 * 1024;

pub fn valid_header_name(name: &[u8]) -> bool {
    !name.is_empty()
        && name.iter().all(|&b| {
            b.is_ascii_alphanumeric()
                || matches!(
                    b,
                    b'!' | b'#'
                        | b'$'
                        | b'%'
                        | b'&'
                        | b'\''
                        | b'*'
                        | b'+'
                        | b'-'
                        | b'.'
                        | b'^'
                        | b'_'
                        | b'`'
                        | b'|'
                        | b'~'
                )
        })
}

pub fn valid_header_value(v: &[u8]) -> bool {
    v.iter().all(|&b| b == b'\t' || (b >= 0x20 && b != 0x7f))
}

impl WireRequest {
    /// Start a request: `METHOD target HTTP/1.1`.
    pub fn new(method: &str, url: &reqwest::Url, body_len: usize) -> WireRequest {
        let mut buf = Vec::with_capacity(256 + body_len.min(INLINE_BODY_MAX));
        buf.extend_from_slice(method.as_bytes());
        buf.push(b' ');
        buf.extend_from_slice(url.path().as_bytes());
        if let Some(q) = url.query() {
            buf.push(b'?');
            buf.extend_from_slice(q.as_bytes());
        }
        buf.extend_from_slice(b" HTTP/1.1\r\n");
        let idempotent = matches!(method, "GET" | "HEAD" | "OPTIONS" | "PUT" | "DELETE" | "TRACE");
        let needs_length = !matches!(method, "GET" | "HEAD" | "OPTIONS" | "DELETE" | "TRACE" | "CONNECT");
        WireRequest { buf, body: None, stream: None, idempotent, head: method == "HEAD", needs_length }
    }

    /// A caller's header. Content-Length is the client's to write (from the body it sends): a
    /// caller's value that differs from it would desynchronise the connection, so it is dropped.
    pub fn header(&mut self, name: &[u8], value: &[u8]) {
        if name.eq_ignore_ascii_case(b"content-length") {
            return;
        }
        self.put(name, value);
    }

    fn put(&mut self, name: &[u8], value: &[u8]) {
        self.buf.extend_from_slice(name);
        self.buf.extend_from_slice(b": ");
        self.buf.extend_from_slice(value);
        self.buf.extend_from_slice(b"\r\n");
    }

    /// End the head (adding `Host` and the headers reqwest would add, when the caller did not set
    /// them, and the body's Content-Length) and attach the body.
    pub fn finish(&mut self, url: &reqwest::Url, seen: Seen, body: Option<Bytes>) {
        self.default_headers(url, seen);
        // a caller's Transfer-Encoding (requests sets `chunked` for a body of unknown length) frames the
        // body: it goes as one chunk and the terminating one, with no Content-Length
        let body = if seen.transfer_encoding { Some(one_chunk(body.as_deref().unwrap_or_default())) } else { body };
        match &body {
            Some(_) if seen.transfer_encoding => {}
            Some(b) => self.put(b"Content-Length", b.len().to_string().as_bytes()),
            None if self.needs_length => self.put(b"Content-Length", b"0"),
            None => {}
        }
        self.buf.extend_from_slice(b"\r\n");
        match body {
            Some(b) if b.len() <= INLINE_BODY_MAX => self.buf.extend_from_slice(&b),
            Some(b) if !b.is_empty() => self.body = Some(b),
            _ => {}
        }
    }

    /// End the head for a body read while it is sent: with its declared length as Content-Length, or
    /// in chunked framing (the caller's Transfer-Encoding, else one added) when it has none.
    pub fn finish_streamed(&mut self, url: &reqwest::Url, seen: Seen, mut stream: BodyStream) {
        self.default_headers(url, seen);
        if seen.transfer_encoding {
            stream.length = None;
        }
        match stream.length {
            Some(n) => self.put(b"Content-Length", n.to_string().as_bytes()),
            None if !seen.transfer_encoding => self.put(b"Transfer-Encoding", b"chunked"),
            None => {}
        }
        self.buf.extend_from_slice(b"\r\n");
        self.idempotent = false; // a stream cannot be read twice
        self.stream = Some(stream);
    }

    fn default_headers(&mut self, url: &reqwest::Url, seen: Seen) {
        if !seen.host {
            // url's host_str keeps IPv6 brackets; the port is written only when not the default
            self.buf.extend_from_slice(b"Host: ");
            self.buf.extend_from_slice(url.host_str().unwrap_or("").as_bytes());
            if let Some(p) = url.port() {
                self.buf.push(b':');
                self.buf.extend_from_slice(p.to_string().as_bytes());
            }
            self.buf.extend_from_slice(b"\r\n");
        }
        if !seen.user_agent {
            self.put(b"User-Agent", concat!("requestx-client/", env!("CARGO_PKG_VERSION")).as_bytes());
        }
        if !seen.accept {
            self.put(b"Accept", b"*/*");
        }
        if !seen.accept_encoding {
            self.put(b"Accept-Encoding", crate::decode::ACCEPT_ENCODING.as_bytes());
        }
    }
}

/// A request body read piece by piece while it is sent (a file or an iterable on the Python side).
pub struct BodyStream {
    /// the next piece; None at the end
    pub next: Box<dyn FnMut() -> Result<Option<Bytes>, Failure> + Send>,
    /// the declared length (Content-Length): the pieces must add up to it; None: chunked framing
    pub length: Option<u64>,
}

/// `body` in chunked framing: one chunk (none when empty) and the last, empty one.
fn one_chunk(body: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(body.len() + 24);
    put_chunk(&mut out, body);
    out.extend_from_slice(LAST_CHUNK);
    Bytes::from(out)
}

/// The chunk that ends a chunked body (no trailers).
const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

/// `piece` as one chunk of a chunked body, appended to `out` (nothing for an empty piece, which would
/// read as the last chunk).
fn put_chunk(out: &mut Vec<u8>, piece: &[u8]) {
    if !piece.is_empty() {
        out.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
        out.extend_from_slice(piece);
        out.extend_from_slice(b"\r\n");
    }
}

/// Which of the headers reqwest adds by default the caller already set, and whether the caller framed
/// the body with Transfer-Encoding.
#[derive(Default, Clone, Copy)]
pub struct Seen {
    pub host: bool,
    pub user_agent: bool,
    pub accept: bool,
    pub accept_encoding: bool,
    pub transfer_encoding: bool,
}

impl Seen {
    pub fn note(&mut self, name: &[u8]) {
        if name.eq_ignore_ascii_case(b"host") {
            self.host = true;
        } else if name.eq_ignore_ascii_case(b"user-agent") {
            self.user_agent = true;
        } else if name.eq_ignore_ascii_case(b"accept") {
            self.accept = true;
        } else if name.eq_ignore_ascii_case(b"accept-encoding") {
            self.accept_encoding = true;
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            self.transfer_encoding = true;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Connections and the pool

/// What the direct path accepts from a server; `None` is no limit (requests has none).
#[derive(Clone, Copy, Default)]
pub struct Limits {
    /// bytes of a response body as sent (before decoding)
    pub max_body: Option<usize>,
    /// bytes of a body after gzip/deflate/br/zstd decoding (a decompression bomb stops here)
    pub max_decoded: Option<usize>,
}

/// Hosts whose idle connections are kept, least recently used dropped first (urllib3 keeps 10 pools).
const MAX_HOSTS: usize = 64;
/// How often idle connections past the idle timeout are closed, at most.
const REAP_EVERY: Duration = Duration::from_secs(1);

struct HostIdle {
    port: u16,
    flavor: u64,
    conns: Vec<Conn>,
    last_used: Instant,
}

impl HostIdle {
    fn serves(&self, t: &Target) -> bool {
        self.port == t.port && self.flavor == t.flavor()
    }
}

struct Idle {
    /// the fork generation these connections belong to: a forked child must not share its parent's sockets
    generation: u64,
    hosts: HashMap<String, Vec<HostIdle>>,
    count_hosts: usize,
    last_reap: Instant,
}

/// How many forks separate this process from the one that first used the direct path (a
/// `pthread_atfork` handler adds one in each child). Compared on every checkout and checkin instead of
/// the process id: `getpid` is a system call each time.
static FORK_GENERATION: AtomicU64 = AtomicU64::new(0);

extern "C" fn note_fork_in_child() {
    FORK_GENERATION.fetch_add(1, Ordering::Relaxed);
}

fn fork_generation() -> u64 {
    static HANDLER: std::sync::Once = std::sync::Once::new();
    HANDLER.call_once(|| {
        // SAFETY: registers a handler that only increments an atomic, which is async-signal-safe
        unsafe { libc::pthread_atfork(None, None, Some(note_fork_in_child)) };
    });
    FORK_GENERATION.load(Ordering::Relaxed)
}

pub struct Pool {
    idle: Mutex<Idle>,
    max_idle_per_host: usize,
    idle_timeout: Option<Duration>,
    pub limits: Limits,
}

impl Pool {
    pub fn new(max_idle_per_host: usize, idle_timeout: Option<Duration>, limits: Limits) -> Pool {
        let generation = fork_generation();
        let idle = Idle { generation, hosts: HashMap::new(), count_hosts: 0, last_reap: Instant::now() };
        Pool { idle: Mutex::new(idle), max_idle_per_host, idle_timeout, limits }
    }

    /// The idle connections, after forgetting those inherited through `fork()` (closing our copy of
    /// a descriptor leaves the parent's socket open; it is never shut down from here).
    fn lock(&self) -> std::sync::MutexGuard<'_, Idle> {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        let generation = fork_generation();
        if idle.generation != generation {
            idle.generation = generation;
            idle.hosts.clear();
            idle.count_hosts = 0;
        }
        idle
    }

    fn checkout(&self, t: &Target) -> Option<Conn> {
        let mut idle = self.lock();
        let entry = idle.hosts.get_mut(&t.host)?.iter_mut().find(|h| h.serves(t))?;
        entry.last_used = Instant::now();
        while let Some(c) = entry.conns.pop() {
            if self.idle_timeout.is_some_and(|max| c.idle_since.elapsed() > max) {
                continue;
            }
            return Some(c);
        }
        None
    }

    fn checkin(&self, t: &Target, mut c: Conn) {
        if self.max_idle_per_host == 0 {
            return;
        }
        let now = Instant::now();
        c.idle_since = now;
        let mut idle = self.lock();
        if now.duration_since(idle.last_reap) >= REAP_EVERY {
            self.reap(&mut idle, now);
        }
        let known = idle.hosts.get(&t.host).is_some_and(|l| l.iter().any(|h| h.serves(t)));
        if !known {
            if idle.count_hosts >= MAX_HOSTS {
                evict_least_recent(&mut idle);
            }
            idle.count_hosts += 1;
            idle.hosts.entry(t.host.clone()).or_default().push(HostIdle { port: t.port, flavor: t.flavor(), conns: Vec::new(), last_used: now });
        }
        let entry = idle.hosts.get_mut(&t.host).and_then(|l| l.iter_mut().find(|h| h.serves(t))).unwrap();
        entry.last_used = now;
        if entry.conns.len() < self.max_idle_per_host {
            entry.conns.push(c);
        }
    }

    /// Close the connections idle for longer than the idle timeout, and forget hosts left with none.
    fn reap(&self, idle: &mut Idle, now: Instant) {
        idle.last_reap = now;
        if let Some(max) = self.idle_timeout {
            for list in idle.hosts.values_mut() {
                for h in list.iter_mut() {
                    h.conns.retain(|c| now.duration_since(c.idle_since) <= max);
                }
            }
        }
        for list in idle.hosts.values_mut() {
            list.retain(|h| !h.conns.is_empty());
        }
        idle.hosts.retain(|_, list| !list.is_empty());
        idle.count_hosts = idle.hosts.values().map(Vec::len).sum();
    }

    pub fn idle_count(&self) -> usize {
        self.lock().hosts.values().flatten().map(|h| h.conns.len()).sum()
    }
}

fn evict_least_recent(idle: &mut Idle) {
    let oldest = idle
        .hosts
        .iter()
        .flat_map(|(host, list)| list.iter().map(move |h| (h.last_used, host.clone(), (h.port, h.flavor))))
        .min_by_key(|(used, _, _)| *used);
    if let Some((_, host, key)) = oldest {
        if let Some(list) = idle.hosts.get_mut(&host) {
            list.retain(|h| (h.port, h.flavor) != key);
            if list.is_empty() {
                idle.hosts.remove(&host);
            }
        }
        idle.count_hosts -= 1;
    }
}

// ---------------------------------------------------------------------------------------------
// One exchange

pub struct Answer {
    pub status: u16,
    pub version: &'static str,
    pub headers: HeaderMap,
    pub body: Bytes,
}

/// Why an exchange failed, and whether the request may not have reached the server's application.
enum ExchangeError {
    /// the connection was closed or reset before any byte of a response arrived
    NoResponse(io::Error),
    Fail(Failure),
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut)
}

pub(crate) fn read_timeout_failure() -> Failure {
    Failure::new(ErrKind::ReadTimeout, "error reading from the connection: operation timed out (read timeout)")
}

/// Send `req` to `t` and read the whole answer, on a pooled connection when there is one.
/// With `timings` (client metrics on), the stages are recorded there as they end: pool_wait,
/// connect (new connections), ttfb, transfer, decode; without, no clock is read.
pub fn send(
    pool: &Pool,
    t: &Target,
    req: &mut WireRequest,
    connect_timeout: Option<Duration>,
    read_timeout: Option<Duration>,
    mut timings: Option<&mut Timings>,
) -> Result<Answer, Failure> {
    // A reused connection may turn out to be closed by the server while idle; an idempotent request
    // is then sent again once on a new connection (as browsers and urllib3 do). A non-idempotent one
    // is sent on a pooled connection only if that connection is not already known to be closed.
    let _in_flight = InFlight::enter();
    let start = timings.is_some().then(Instant::now);
    let mut reused = pool.checkout(t);
    if let Some(c) = &reused {
        if !req.idempotent && c.looks_closed() {
            reused = None;
        }
    }
    if let (Some(tm), Some(start)) = (timings.as_deref_mut(), start) {
        tm.pool_wait = Some(start.elapsed());
    }
    if let Some(mut conn) = reused {
        match exchange(&mut conn, req, read_timeout, &pool.limits, timings.as_deref_mut()) {
            Ok((answer, keep)) => {
                if keep {
                    pool.checkin(t, conn);
                }
                return Ok(answer);
            }
            Err(ExchangeError::NoResponse(e)) => {
                if !req.idempotent {
                    return Err(Failure::new(
                        ErrKind::Connection,
                        format!(
                            "connection closed before a response arrived (request not retried: not idempotent, or its body a stream): {e}"
                        ),
                    ));
                }
            }
            Err(ExchangeError::Fail(f)) => return Err(f),
        }
    }
    let mut conn = connect(t, connect_timeout, timings.as_deref_mut())?;
    match exchange(&mut conn, req, read_timeout, &pool.limits, timings) {
        Ok((answer, keep)) => {
            if keep {
                pool.checkin(t, conn);
            }
            Ok(answer)
        }
        Err(ExchangeError::NoResponse(e)) => {
            Err(Failure::new(ErrKind::Connection, format!("connection closed before a response arrived: {e}")))
        }
        Err(ExchangeError::Fail(f)) => Err(f),
    }
}

fn write_request(conn: &mut Conn, req: &mut WireRequest) -> Result<(), ExchangeError> {
    conn.write_all(&req.buf).map_err(write_error)?;
    if let Some(b) = &req.body {
        conn.write_all(b).map_err(write_error)?;
    }
    if let Some(stream) = req.stream.as_mut() {
        write_stream(conn, stream)?;
    }
    Ok(())
}

fn write_error(e: io::Error) -> ExchangeError {
    if is_timeout(&e) {
        ExchangeError::Fail(read_timeout_failure())
    } else {
        ExchangeError::NoResponse(e)
    }
}

/// Send a streamed body as its pieces come: as they are when it has a declared length (which they
/// must match exactly: more or fewer bytes would leave the server reading the wrong request), else each
/// as one chunk, then the last chunk.
fn write_stream(conn: &mut Conn, stream: &mut BodyStream) -> Result<(), ExchangeError> {
    let mut sent: u64 = 0;
    let mut framed = Vec::new();
    while let Some(piece) = (stream.next)().map_err(ExchangeError::Fail)? {
        if piece.is_empty() {
            continue;
        }
        sent += piece.len() as u64;
        match stream.length {
            Some(n) if sent > n => {
                return Err(fail(ErrKind::Request, format!("the request body is longer than its Content-Length ({n} bytes)")))
            }
            Some(_) => conn.write_all(&piece).map_err(write_error)?,
            None => {
                framed.clear();
                put_chunk(&mut framed, &piece);
                conn.write_all(&framed).map_err(write_error)?;
            }
        }
    }
    match stream.length {
        Some(n) if sent != n => Err(fail(
            ErrKind::Request,
            format!("the request body ended after {sent} of the {n} bytes its Content-Length announced"),
        )),
        Some(_) => Ok(()),
        None => conn.write_all(LAST_CHUNK).map_err(write_error),
    }
}

/// At least 4 KiB of spare capacity for the next read (growing geometrically).
fn reserve_read_room(buf: &mut Vec<u8>) {
    if buf.capacity() - buf.len() < 4096 {
        buf.reserve(READ_CHUNK.max(buf.len()));
    }
}

/// Read more bytes into `buf`; Ok(0) at EOF.
fn fill(conn: &mut Conn, buf: &mut Vec<u8>) -> io::Result<usize> {
    reserve_read_room(buf);
    conn.recv(buf, usize::MAX, 0)
}

/// Microseconds to poll for the first bytes of an answer before sleeping in `read`
/// (`REQUESTX_CLIENT_SPIN_US`, 0..=10000, default 50; 0 turns polling off).
///
/// Why: a thread that sleeps in `read` is woken by the kernel when the answer arrives; on a VM,
/// waking an idle vCPU costs tens of microseconds, often more than a local server takes to answer.
/// A short poll with `MSG_DONTWAIT` keeps the core awake for a quick answer and costs at most the
/// budget in CPU when the answer is slow. Polling happens only while this is the one request in
/// flight on the direct path (with several, the other threads have work for the core), and only on a
/// connection whose last answer came within QUICK_FACTOR budgets (a remote server's answers take
/// longer, and polling for them would only burn the budget), except one answer in REPROBE_EVERY.
pub const SPIN_ENV: &str = "REQUESTX_CLIENT_SPIN_US";
const SPIN_DEFAULT_US: u64 = 50;
const SPIN_MAX_US: u64 = 10_000;

/// The polling budget from the environment, or why the setting is unusable.
pub fn spin_setting() -> Result<Duration, String> {
    match std::env::var(SPIN_ENV) {
        Err(_) => Ok(Duration::from_micros(SPIN_DEFAULT_US)),
        Ok(v) => match v.trim().parse::<u64>() {
            Ok(us) if us <= SPIN_MAX_US => Ok(Duration::from_micros(us)),
            _ => Err(format!("{SPIN_ENV} must be a whole number of microseconds from 0 to {SPIN_MAX_US}, got {v:?}")),
        },
    }
}

/// The budget in use (fixed at first use; the module refuses to import with an invalid setting).
pub fn spin_budget() -> Duration {
    static BUDGET: std::sync::OnceLock<Duration> = std::sync::OnceLock::new();
    *BUDGET.get_or_init(|| spin_setting().unwrap_or(Duration::from_micros(SPIN_DEFAULT_US)))
}

/// A connection is polled while its last answer came within this many polling budgets (50 us x 8 =
/// 400 us: a server on this machine or next to it, not one a millisecond away).
const QUICK_FACTOR: u32 = 8;
/// A connection whose answers come late is still polled for one answer in this many: unpolled, each
/// answer also waits for the thread's wake-up, which on a busy VM alone can pass the threshold and
/// would keep a quick server's connection unpolled for good. Against a slow server this costs at
/// most one budget per REPROBE_EVERY requests (under 1 us a request at the defaults).
const REPROBE_EVERY: u32 = 64;

static IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);

/// Counts a request on the direct path for as long as it lives.
struct InFlight;

impl InFlight {
    fn enter() -> InFlight {
        IN_FLIGHT.fetch_add(1, Ordering::Relaxed);
        InFlight
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        IN_FLIGHT.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Poll for the first bytes of the answer for up to `spin_budget()`; None: nothing yet (or
/// polling is off), read blocking. Some(Ok(0)) is EOF, as from `read`.
fn spin_fill(conn: &mut Conn, buf: &mut Vec<u8>) -> Option<io::Result<usize>> {
    let budget = spin_budget();
    if budget.is_zero() || IN_FLIGHT.load(Ordering::Relaxed) > 1 {
        return None;
    }
    reserve_read_room(buf);
    let start = Instant::now();
    loop {
        match conn.recv(buf, usize::MAX, libc::MSG_DONTWAIT) {
            Ok(n) => return Some(Ok(n)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Some(Err(e)),
        }
        if start.elapsed() >= budget {
            return None;
        }
        std::hint::spin_loop();
    }
}

/// Interim (1xx) answers skipped before the final one, at most: an endless stream of them is an error.
const MAX_INTERIM: usize = 32;
/// Bytes of a response head (status line and headers), at most.
const MAX_HEAD: usize = 256 * 1024;
/// Bytes of a chunk-size line with its extensions, at most (extensions are ignored, not kept).
const MAX_CHUNK_LINE: usize = 4096;
/// Bytes of the trailer section of a chunked body, at most (trailers are ignored).
const MAX_TRAILERS: usize = 64 * 1024;
/// A body buffer starts at most this large, however long the Content-Length: it grows with what arrives.
const PREALLOC_MAX: usize = 1 << 20;

/// A parsed response head.
struct Head {
    status: u16,
    version: &'static str,
    headers: HeaderMap,
    len: usize,
    keep_alive: bool,
    framing: Framing,
}

fn fail(kind: ErrKind, msg: impl Into<String>) -> ExchangeError {
    ExchangeError::Fail(Failure::new(kind, msg))
}

fn body_err(e: io::Error) -> ExchangeError {
    if is_timeout(&e) {
        ExchangeError::Fail(read_timeout_failure())
    } else {
        fail(ErrKind::ChunkedEncoding, format!("error reading a body from connection: {e}"))
    }
}

fn over_limit(what: &str, limit: usize) -> ExchangeError {
    fail(ErrKind::Request, format!("{what} larger than the limit of {limit} bytes"))
}

/// Read more of the body into `buf`: the end of the connection here is an error.
fn more(conn: &mut Conn, buf: &mut Vec<u8>) -> Result<(), ExchangeError> {
    match fill(conn, buf) {
        Ok(0) => Err(body_err(io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed before the end of the body"))),
        Ok(_) => Ok(()),
        Err(e) => Err(body_err(e)),
    }
}

fn exchange(
    conn: &mut Conn,
    req: &mut WireRequest,
    read_timeout: Option<Duration>,
    limits: &Limits,
    mut timings: Option<&mut Timings>,
) -> Result<(Answer, bool), ExchangeError> {
    conn.set_read_timeout(read_timeout)
        .map_err(|e| fail(ErrKind::Connection, format!("connection error: {e}")))?;
    write_request(conn, req)?;
    let written = Instant::now();
    let mut buf = std::mem::take(&mut conn.buf);
    buf.clear();
    let (head, first_byte) = read_head(conn, req, &mut buf, written)?;
    if let Some(tm) = timings.as_deref_mut() {
        tm.ttfb = Some(first_byte - written);
    }
    let raw = match head.framing {
        Framing::Empty => {
            buf.drain(..head.len);
            Bytes::new()
        }
        Framing::Length(len) => read_length(conn, &mut buf, head.len, len, limits)?,
        Framing::Chunked => read_chunked(conn, &mut buf, head.len, limits)?,
        Framing::UntilClose => read_until_close(conn, &mut buf, head.len, limits)?,
    };
    // a server that sent more than one response's worth of bytes is not to be trusted with another request
    let keep = head.keep_alive
        && !matches!(head.framing, Framing::UntilClose)
        && buf.is_empty()
        && conn.tls_reusable();
    if buf.capacity() <= 64 * 1024 {
        conn.buf = buf;
    }
    if !keep {
        conn.close();
    }
    if let Some(tm) = timings.as_deref_mut() {
        tm.transfer = Some(first_byte.elapsed());
    }
    let mut headers = head.headers;
    let body = crate::decode::decode(&mut headers, raw, limits.max_decoded, timings).map_err(ExchangeError::Fail)?;
    Ok((Answer { status: head.status, version: head.version, headers, body }, keep))
}

/// Read up to the final response's head, skipping interim (1xx) answers. Also returns when its first
/// byte arrived, and notes on the connection whether that was within the polling budget.
fn read_head(conn: &mut Conn, req: &WireRequest, buf: &mut Vec<u8>, written: Instant) -> Result<(Head, Instant), ExchangeError> {
    let mut interim = 0;
    let mut first_byte: Option<Instant> = None;
    loop {
        let parsed = parse_head(buf, req)?;
        if parsed.as_ref().map_or(buf.len(), |h| h.len) > MAX_HEAD {
            return Err(fail(ErrKind::Connection, format!("response head larger than {MAX_HEAD} bytes")));
        }
        if let Some(head) = parsed {
            if !(100..200).contains(&head.status) || head.status == 101 {
                return Ok((head, first_byte.unwrap_or(written)));
            }
            interim += 1;
            if interim > MAX_INTERIM {
                return Err(fail(ErrKind::Connection, format!("more than {MAX_INTERIM} interim (1xx) responses")));
            }
            buf.drain(..head.len);
            if !buf.is_empty() {
                continue;
            }
        }
        let poll = conn.slow_answers % REPROBE_EVERY == 0;
        let polled = if buf.is_empty() && poll { spin_fill(conn, buf) } else { None };
        match polled.unwrap_or_else(|| fill(conn, buf)) {
            Ok(0) if buf.is_empty() && interim == 0 => {
                return Err(ExchangeError::NoResponse(io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed")))
            }
            Ok(0) => return Err(fail(ErrKind::Connection, "connection closed in the middle of the response head")),
            Ok(_) => {
                if first_byte.is_none() {
                    let now = Instant::now();
                    first_byte = Some(now);
                    // a sleeping thread's wake-up adds tens of microseconds on a VM: an answer counts
                    // as quick well past the budget itself, so that not polling does not keep it slow
                    conn.slow_answers = if now - written <= spin_budget() * QUICK_FACTOR {
                        0
                    } else {
                        conn.slow_answers.wrapping_add(1).max(1)
                    };
                }
            }
            Err(e) if is_timeout(&e) => return Err(ExchangeError::Fail(read_timeout_failure())),
            Err(e) if buf.is_empty() && interim == 0 => return Err(ExchangeError::NoResponse(e)),
            Err(e) => return Err(fail(ErrKind::Connection, format!("connection error: {e}"))),
        }
    }
}

/// The head at the start of `buf`, None while it is incomplete. Framing as RFC 9112 §6.3 has it:
/// Transfer-Encoding wins over Content-Length (and such a connection is not reused), a
/// Transfer-Encoding whose last coding is not chunked is read until the connection closes, and
/// Content-Length values that disagree or are not plain digits are refused.
fn parse_head(buf: &[u8], req: &WireRequest) -> Result<Option<Head>, ExchangeError> {
    let mut hdrs = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut hdrs);
    let len = match resp.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(fail(ErrKind::Connection, format!("invalid HTTP response: {e}"))),
    };
    let status = resp.code.unwrap_or(0);
    let v11 = resp.version == Some(1);
    let mut headers = HeaderMap::with_capacity(resp.headers.len());
    let mut conn_close = !v11;
    let mut content_length: Option<u64> = None;
    let mut transfer_encoding = false;
    let mut chunked = false;
    for h in resp.headers.iter() {
        let name = HeaderName::from_bytes(h.name.as_bytes())
            .map_err(|_| fail(ErrKind::Connection, format!("invalid response header name {:?}", h.name)))?;
        let value = HeaderValue::from_bytes(h.value)
            .map_err(|_| fail(ErrKind::Connection, format!("invalid value of response header {:?}", h.name)))?;
        if name == reqwest::header::CONNECTION {
            if contains_token(h.value, b"close") {
                conn_close = true;
            } else if contains_token(h.value, b"keep-alive") {
                conn_close = false;
            }
        } else if name == reqwest::header::CONTENT_LENGTH {
            match parse_length(h.value) {
                Some(n) if content_length.is_none_or(|c| c == n) => content_length = Some(n),
                // urllib3 (so requests) calls this an invalid header, not a broken connection
                _ => return Err(fail(ErrKind::InvalidHeader, "invalid Content-Length in the response")),
            }
        } else if name == reqwest::header::TRANSFER_ENCODING {
            transfer_encoding = true;
            chunked = last_token_is(h.value, b"chunked");
        }
        headers.append(name, value);
    }
    let framing = if req.head || matches!(status, 100..=199 | 204 | 304) {
        Framing::Empty
    } else if transfer_encoding {
        if chunked { Framing::Chunked } else { Framing::UntilClose }
    } else if let Some(n) = content_length {
        Framing::Length(n)
    } else {
        Framing::UntilClose
    };
    let keep_alive = !conn_close && !(transfer_encoding && content_length.is_some());
    let version = if v11 { "HTTP/1.1" } else { "HTTP/1.0" };
    Ok(Some(Head { status, version, headers, len, keep_alive, framing }))
}

/// A Content-Length value: ASCII digits only (no sign, no list), within u64.
fn parse_length(v: &[u8]) -> Option<u64> {
    let v = v.trim_ascii();
    if v.is_empty() || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(v).ok()?.parse().ok()
}

fn read_length(conn: &mut Conn, buf: &mut Vec<u8>, head_len: usize, len: u64, limits: &Limits) -> Result<Bytes, ExchangeError> {
    let len = usize::try_from(len)
        .ok()
        .filter(|l| head_len.checked_add(*l).is_some())
        .ok_or_else(|| over_limit("response body", usize::MAX))?;
    if let Some(max) = limits.max_body.filter(|m| len > *m) {
        return Err(over_limit("response body", max));
    }
    let want = head_len + len;
    if len <= INLINE_BODY_MAX || buf.len() >= want {
        while buf.len() < want {
            more(conn, buf)?;
        }
        let body = Bytes::copy_from_slice(&buf[head_len..want]);
        buf.drain(..want);
        return Ok(body);
    }
    // a large body is read straight into its own buffer (no second copy), grown as bytes arrive:
    // the announced length alone never sizes an allocation
    let mut body = Vec::with_capacity(len.min(PREALLOC_MAX));
    body.extend_from_slice(&buf[head_len..]);
    buf.clear();
    while body.len() < len {
        if body.len() == body.capacity() {
            body.reserve((len - body.len()).min(body.len().max(READ_CHUNK)));
        }
        let left = len - body.len();
        match conn.recv(&mut body, left, 0) {
            Ok(0) => return Err(body_err(io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed before the end of the body"))),
            Ok(_) => {}
            Err(e) => return Err(body_err(e)),
        }
    }
    Ok(Bytes::from(body))
}

fn read_chunked(conn: &mut Conn, buf: &mut Vec<u8>, head_len: usize, limits: &Limits) -> Result<Bytes, ExchangeError> {
    let mut out: Vec<u8> = Vec::new();
    let mut pos = head_len;
    loop {
        let (size, used) = loop {
            match httparse::parse_chunk_size(&buf[pos..]) {
                Ok(httparse::Status::Complete((used, size))) if used <= MAX_CHUNK_LINE => break (size, used),
                Ok(httparse::Status::Partial) if buf.len() - pos <= MAX_CHUNK_LINE => more(conn, buf)?,
                Ok(_) => return Err(fail(ErrKind::ChunkedEncoding, format!("chunk size line longer than {MAX_CHUNK_LINE} bytes"))),
                Err(_) => return Err(fail(ErrKind::ChunkedEncoding, "invalid chunk size in a chunked body")),
            }
        };
        pos += used;
        if size == 0 {
            skip_trailers(conn, buf, &mut pos)?;
            break;
        }
        let size = usize::try_from(size).ok().filter(|s| out.len().checked_add(*s).is_some());
        let size = size.ok_or_else(|| over_limit("response body", usize::MAX))?;
        if let Some(max) = limits.max_body.filter(|m| out.len() + size > *m) {
            return Err(over_limit("response body", max));
        }
        // move what is buffered to the output, then read the rest of the chunk
        let mut left = size;
        loop {
            let avail = (buf.len() - pos).min(left);
            out.extend_from_slice(&buf[pos..pos + avail]);
            pos += avail;
            left -= avail;
            if left == 0 {
                break;
            }
            buf.drain(..pos);
            pos = 0;
            more(conn, buf)?;
        }
        while buf.len() < pos + 2 {
            more(conn, buf)?;
        }
        if &buf[pos..pos + 2] != b"\r\n" {
            return Err(fail(ErrKind::ChunkedEncoding, "missing CRLF after a chunk"));
        }
        pos += 2;
        if pos > 64 * 1024 {
            buf.drain(..pos);
            pos = 0;
        }
    }
    buf.drain(..pos);
    Ok(Bytes::from(out))
}

/// Skip the trailer section up to its empty line (at most MAX_TRAILERS bytes).
fn skip_trailers(conn: &mut Conn, buf: &mut Vec<u8>, pos: &mut usize) -> Result<(), ExchangeError> {
    let start = *pos;
    loop {
        if let Some(i) = find_crlf(&buf[*pos..]) {
            *pos += i + 2;
            if i == 0 {
                return Ok(());
            }
            continue;
        }
        if buf.len() - start > MAX_TRAILERS {
            return Err(fail(ErrKind::ChunkedEncoding, format!("trailers longer than {MAX_TRAILERS} bytes")));
        }
        more(conn, buf)?;
    }
}

fn read_until_close(conn: &mut Conn, buf: &mut Vec<u8>, head_len: usize, limits: &Limits) -> Result<Bytes, ExchangeError> {
    loop {
        if let Some(max) = limits.max_body.filter(|m| buf.len() - head_len > *m) {
            return Err(over_limit("response body", max));
        }
        match fill(conn, buf) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => return Err(body_err(e)),
        }
    }
    let body = Bytes::copy_from_slice(&buf[head_len..]);
    buf.clear();
    Ok(body)
}

enum Framing {
    Empty,
    Length(u64),
    Chunked,
    UntilClose,
}

fn find_crlf(b: &[u8]) -> Option<usize> {
    b.windows(2).position(|w| w == b"\r\n")
}

fn tokens(v: &[u8]) -> impl Iterator<Item = &[u8]> {
    v.split(|&c| c == b',').map(|t| t.trim_ascii())
}

fn contains_token(v: &[u8], tok: &[u8]) -> bool {
    tokens(v).any(|t| t.eq_ignore_ascii_case(tok))
}

fn last_token_is(v: &[u8], tok: &[u8]) -> bool {
    tokens(v).filter(|t| !t.is_empty()).last().is_some_and(|t| t.eq_ignore_ascii_case(tok))
}

