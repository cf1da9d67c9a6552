//! Blocking fast path of the sync API for plain `http://` requests without a proxy.
//!
//! Why: for a small request on a reused connection, the tokio/hyper path costs a thread hand-off
//! (or an epoll registration and wait) per request plus hyper's per-request machinery. Here the
//! calling thread (interpreter lock released) writes the whole request with one `write` on a pooled
//! blocking `TcpStream` and reads the answer with blocking `read`s: no epoll, no runtime, no other
//! thread. Timeouts are socket options (`SO_RCVTIMEO`, connect with a deadline). Anything this
//! module does not handle (https, proxies, streamed bodies, a total timeout) uses reqwest.

use std::io::{self, Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::Bytes;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use crate::timing::Timings;
use crate::{ErrKind, Failure};

/// The request line and headers (already validated) plus the body, as one buffer ready to send.
pub struct WireRequest {
    pub buf: Vec<u8>,
    /// a body too large to copy into `buf` is sent with a second write
    pub body: Option<Bytes>,
    pub idempotent: bool,
    pub head: bool,
}

#[derive(Clone)]
pub struct Target {
    pub host: String,
    pub port: u16,
    pub ip: Option<IpAddr>,
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
    /// Start a request: `METHOD target HTTP/1.1` and `Host`.
    pub fn new(method: &str, url: &reqwest::Url, body_len: usize) -> WireRequest {
        let mut buf = Vec::with_capacity(256 + body_len.min(INLINE_BODY_MAX));
        buf.extend_from_slice(method.as_bytes());
        buf.push(b' ');
        buf.extend_from_slice(url.path().as_bytes());
        if let Some(q) = url.query() {
            buf.push(b'?');
            buf.extend_from_slice(q.as_bytes());
        }
        buf.extend_from_slice(b" HTTP/1.1\r\nHost: ");
        // url's host_str keeps IPv6 brackets; the port is written only when not the default
        buf.extend_from_slice(url.host_str().unwrap_or("").as_bytes());
        if let Some(p) = url.port() {
            buf.push(b':');
            buf.extend_from_slice(p.to_string().as_bytes());
        }
        buf.extend_from_slice(b"\r\n");
        let idempotent = matches!(method, "GET" | "HEAD" | "OPTIONS" | "PUT" | "DELETE" | "TRACE");
        WireRequest { buf, body: None, idempotent, head: method == "HEAD" }
    }

    pub fn header(&mut self, name: &[u8], value: &[u8]) {
        self.buf.extend_from_slice(name);
        self.buf.extend_from_slice(b": ");
        self.buf.extend_from_slice(value);
        self.buf.extend_from_slice(b"\r\n");
    }

    /// End the head (adding the headers reqwest would add when absent) and attach the body.
    pub fn finish(&mut self, seen: Seen, body: Option<Bytes>) {
        if !seen.user_agent {
            self.header(b"User-Agent", concat!("requestx-client/", env!("CARGO_PKG_VERSION")).as_bytes());
        }
        if !seen.accept {
            self.header(b"Accept", b"*/*");
        }
        if !seen.accept_encoding {
            self.header(b"Accept-Encoding", b"gzip, deflate, br, zstd");
        }
        if let Some(b) = &body {
            if !seen.content_length {
                self.header(b"Content-Length", b.len().to_string().as_bytes());
            }
        }
        self.buf.extend_from_slice(b"\r\n");
        match body {
            Some(b) if b.len() <= INLINE_BODY_MAX => self.buf.extend_from_slice(&b),
            Some(b) if !b.is_empty() => self.body = Some(b),
            _ => {}
        }
    }
}

/// Which of the headers reqwest adds by default the caller already set.
#[derive(Default, Clone, Copy)]
pub struct Seen {
    pub user_agent: bool,
    pub accept: bool,
    pub accept_encoding: bool,
    pub content_length: bool,
}

impl Seen {
    pub fn note(&mut self, name: &[u8]) {
        if name.eq_ignore_ascii_case(b"user-agent") {
            self.user_agent = true;
        } else if name.eq_ignore_ascii_case(b"accept") {
            self.accept = true;
        } else if name.eq_ignore_ascii_case(b"accept-encoding") {
            self.accept_encoding = true;
        } else if name.eq_ignore_ascii_case(b"content-length") {
            self.content_length = true;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Connections and the pool

struct Conn {
    stream: TcpStream,
    read_timeout: Option<Duration>,
    /// bytes read past the end of the previous response (none for a well-behaved server)
    buf: Vec<u8>,
    idle_since: Instant,
}

impl Conn {
    fn set_read_timeout(&mut self, t: Option<Duration>) -> io::Result<()> {
        if self.read_timeout != t {
            self.stream.set_read_timeout(t)?;
            self.read_timeout = t;
        }
        Ok(())
    }

    /// A pooled connection the server has already closed (or sent unexpected bytes on) is useless.
    fn looks_closed(&self) -> bool {
        use std::os::fd::AsRawFd;
        let mut b = [0u8; 1];
        // SAFETY: recv into a 1-byte stack buffer on a socket we own
        let n = unsafe { libc_recv(self.stream.as_raw_fd(), b.as_mut_ptr(), 1, MSG_PEEK | MSG_DONTWAIT) };
        // 0: orderly shutdown; > 0: stray bytes; -1 with EAGAIN: alive and quiet
        n >= 0 || io::Error::last_os_error().kind() != io::ErrorKind::WouldBlock
    }
}

const MSG_PEEK: i32 = 0x2;
const MSG_DONTWAIT: i32 = 0x40;
extern "C" {
    #[link_name = "recv"]
    fn libc_recv(fd: i32, buf: *mut u8, len: usize, flags: i32) -> isize;
}

pub struct Pool {
    /// idle connections per (host, port); a short list searched in order (a session talks to few
    /// hosts), so a lookup allocates nothing
    idle: Mutex<Vec<(String, u16, Vec<Conn>)>>,
    max_idle_per_host: usize,
    idle_timeout: Option<Duration>,
}

impl Pool {
    pub fn new(max_idle_per_host: usize, idle_timeout: Option<Duration>) -> Pool {
        Pool { idle: Mutex::new(Vec::new()), max_idle_per_host, idle_timeout }
    }

    fn checkout(&self, t: &Target) -> Option<Conn> {
        let mut hosts = self.idle.lock().unwrap();
        let list = &mut hosts.iter_mut().find(|(h, p, _)| *p == t.port && *h == t.host)?.2;
        while let Some(c) = list.pop() {
            if let Some(max) = self.idle_timeout {
                if c.idle_since.elapsed() > max {
                    continue;
                }
            }
            return Some(c);
        }
        None
    }

    fn checkin(&self, t: &Target, mut c: Conn) {
        if self.max_idle_per_host == 0 {
            return;
        }
        c.idle_since = Instant::now();
        let mut hosts = self.idle.lock().unwrap();
        let i = match hosts.iter().position(|(h, p, _)| *p == t.port && *h == t.host) {
            Some(i) => i,
            None => {
                if hosts.len() >= 64 {
                    hosts.retain(|(_, _, l)| !l.is_empty());
                }
                hosts.push((t.host.clone(), t.port, Vec::new()));
                hosts.len() - 1
            }
        };
        let list = &mut hosts[i].2;
        if list.len() < self.max_idle_per_host {
            list.push(c);
        }
    }

    pub fn idle_count(&self) -> usize {
        self.idle.lock().unwrap().iter().map(|(_, _, l)| l.len()).sum()
    }
}

fn connect(t: &Target, timeout: Option<Duration>) -> Result<Conn, Failure> {
    let addrs: Vec<SocketAddr> = match t.ip {
        Some(ip) => vec![SocketAddr::new(ip, t.port)],
        None => (t.host.as_str(), t.port)
            .to_socket_addrs()
            .map(|a| a.collect())
            .map_err(|e| Failure::new(ErrKind::Connection, format!("failed to resolve {:?}: {e}", t.host)))?,
    };
    let mut last: Option<io::Error> = None;
    let deadline = timeout.map(|d| Instant::now() + d);
    for addr in addrs {
        let res = match deadline {
            None => TcpStream::connect(addr),
            Some(dl) => {
                let left = dl.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    Err(io::Error::new(io::ErrorKind::TimedOut, "connect timed out"))
                } else {
                    TcpStream::connect_timeout(&addr, left)
                }
            }
        };
        match res {
            Ok(stream) => {
                let _ = stream.set_nodelay(true);
                return Ok(Conn { stream, read_timeout: None, buf: Vec::new(), idle_since: Instant::now() });
            }
            Err(e) => last = Some(e),
        }
    }
    let e = last.unwrap_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no address"));
    let url = format!("http://{}:{}/", t.host, t.port);
    if matches!(e.kind(), io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock) {
        Err(Failure::new(ErrKind::ConnectTimeout, format!("error sending request for url ({url}): connect timed out")))
    } else {
        Err(Failure::new(
            ErrKind::Connection,
            format!("error sending request for url ({url}): client error (Connect): {e}"),
        ))
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

fn read_timeout_failure() -> Failure {
    Failure::new(ErrKind::ReadTimeout, "error reading from the connection: operation timed out (read timeout)")
}

/// Send `req` to `t` and read the whole answer, on a pooled connection when there is one.
/// With `timings` (client metrics on), the stages are recorded there as they end: pool_wait,
/// connect (new connections), ttfb, transfer, decode; without, no clock is read.
pub fn send(
    pool: &Pool,
    t: &Target,
    req: &WireRequest,
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
        match exchange(&mut conn, req, read_timeout, timings.as_deref_mut()) {
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
                            "connection closed before a response arrived (request not retried: not idempotent): {e}"
                        ),
                    ));
                }
            }
            Err(ExchangeError::Fail(f)) => return Err(f),
        }
    }
    let connect_start = timings.is_some().then(Instant::now);
    let mut conn = connect(t, connect_timeout)?;
    if let (Some(tm), Some(c0)) = (timings.as_deref_mut(), connect_start) {
        tm.connect = Some(c0.elapsed());
    }
    match exchange(&mut conn, req, read_timeout, timings) {
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

fn write_request(conn: &mut Conn, req: &WireRequest) -> io::Result<()> {
    conn.stream.write_all(&req.buf)?;
    if let Some(b) = &req.body {
        conn.stream.write_all(b)?;
    }
    Ok(())
}

/// At least 4 KiB of spare capacity for the next read (growing geometrically).
fn reserve_read_room(buf: &mut Vec<u8>) {
    if buf.capacity() - buf.len() < 4096 {
        buf.reserve(READ_CHUNK.max(buf.len()));
    }
}

/// Read more bytes into `buf`; Ok(0) at EOF.
fn fill(stream: &mut TcpStream, buf: &mut Vec<u8>) -> io::Result<usize> {
    reserve_read_room(buf);
    let len = buf.len();
    // SAFETY: the spare capacity is only exposed as initialised after `read` wrote `n` bytes
    let spare = unsafe { std::slice::from_raw_parts_mut(buf.as_mut_ptr().add(len), buf.capacity() - len) };
    loop {
        match stream.read(spare) {
            Ok(n) => {
                unsafe { buf.set_len(len + n) };
                return Ok(n);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
}

/// Microseconds to poll for the first bytes of an answer before sleeping in `read`
/// (`REQUESTX_CLIENT_SPIN_US`, 0..=10000, default 50; 0 turns polling off).
///
/// Why: a thread that sleeps in `read` is woken by the kernel when the answer arrives; on a VM,
/// waking an idle vCPU costs tens of microseconds, often more than a local server takes to answer.
/// A short poll with `MSG_DONTWAIT` keeps the core awake for a quick answer and costs at most the
/// budget in CPU when the answer is slow. Polling happens only while this is the one request in
/// flight on the direct path: with several, the other threads have work for the core.
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
fn spin_fill(stream: &TcpStream, buf: &mut Vec<u8>) -> Option<io::Result<usize>> {
    use std::os::fd::AsRawFd;
    let budget = spin_budget();
    if budget.is_zero() || IN_FLIGHT.load(Ordering::Relaxed) > 1 {
        return None;
    }
    reserve_read_room(buf);
    let len = buf.len();
    let fd = stream.as_raw_fd();
    let start = Instant::now();
    loop {
        // SAFETY: recv writes at most the spare capacity; the length is set to what it wrote
        let n = unsafe { libc_recv(fd, buf.as_mut_ptr().add(len), buf.capacity() - len, MSG_DONTWAIT) };
        if n >= 0 {
            unsafe { buf.set_len(len + n as usize) };
            return Some(Ok(n as usize));
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::WouldBlock => {}
            io::ErrorKind::Interrupted => continue,
            _ => return Some(Err(e)),
        }
        if start.elapsed() >= budget {
            return None;
        }
        std::hint::spin_loop();
    }
}

fn exchange(
    conn: &mut Conn,
    req: &WireRequest,
    read_timeout: Option<Duration>,
    mut timings: Option<&mut Timings>,
) -> Result<(Answer, bool), ExchangeError> {
    let transport =
        |e: io::Error| ExchangeError::Fail(Failure::new(ErrKind::Connection, format!("connection error: {e}")));
    conn.set_read_timeout(read_timeout).map_err(transport)?;
    if let Err(e) = write_request(conn, req) {
        return Err(if is_timeout(&e) {
            ExchangeError::Fail(read_timeout_failure())
        } else {
            ExchangeError::NoResponse(e)
        });
    }
    // written → first byte (ttfb), first byte → body complete (transfer): marks only when timed
    let written = timings.is_some().then(Instant::now);
    let mut first_byte: Option<Instant> = None;
    let mut buf = std::mem::take(&mut conn.buf);
    buf.clear();
    // --- head (skipping 1xx interim responses) ---
    let (status, version, headers, head_len, mut keep_alive, framing) = loop {
        let parsed = {
            let mut hdrs = [httparse::EMPTY_HEADER; MAX_HEADERS];
            let mut resp = httparse::Response::new(&mut hdrs);
            match resp.parse(&buf) {
                Ok(httparse::Status::Complete(n)) => {
                    let code = resp.code.unwrap_or(0);
                    let v11 = resp.version == Some(1);
                    let mut map = HeaderMap::with_capacity(resp.headers.len());
                    let mut conn_close = !v11;
                    let mut content_length: Option<u64> = None;
                    let mut chunked = false;
                    let mut bad = None;
                    for h in resp.headers.iter() {
                        let name = match HeaderName::from_bytes(h.name.as_bytes()) {
                            Ok(n) => n,
                            Err(_) => {
                                bad = Some(format!("invalid response header name {:?}", h.name));
                                break;
                            }
                        };
                        let value = match HeaderValue::from_bytes(h.value) {
                            Ok(v) => v,
                            Err(_) => {
                                bad = Some(format!("invalid value of response header {:?}", h.name));
                                break;
                            }
                        };
                        if name == reqwest::header::CONNECTION {
                            let v = h.value;
                            if contains_token(v, b"close") {
                                conn_close = true;
                            } else if contains_token(v, b"keep-alive") {
                                conn_close = false;
                            }
                        } else if name == reqwest::header::CONTENT_LENGTH {
                            match std::str::from_utf8(h.value).ok().and_then(|s| s.trim().parse::<u64>().ok()) {
                                Some(n) if content_length.is_none_or(|c| c == n) => content_length = Some(n),
                                _ => {
                                    bad = Some("invalid Content-Length in the response".to_owned());
                                    break;
                                }
                            }
                        } else if name == reqwest::header::TRANSFER_ENCODING {
                            chunked = last_token_is(h.value, b"chunked");
                        }
                        map.append(name, value);
                    }
                    if let Some(msg) = bad {
                        return Err(ExchangeError::Fail(Failure::new(ErrKind::Connection, msg)));
                    }
                    Some((code, v11, map, n, !conn_close, content_length, chunked))
                }
                Ok(httparse::Status::Partial) => None,
                Err(e) => {
                    return Err(ExchangeError::Fail(Failure::new(
                        ErrKind::Connection,
                        format!("invalid HTTP response: {e}"),
                    )))
                }
            }
        };
        match parsed {
            Some((code, _, _, n, _, _, _)) if (100..200).contains(&code) && code != 101 => {
                buf.drain(..n);
                if !buf.is_empty() {
                    continue;
                }
            }
            Some((code, v11, map, n, keep, cl, chunked)) => {
                let version = if v11 { "HTTP/1.1" } else { "HTTP/1.0" };
                let framing = if req.head || code == 204 || code == 304 || code == 101 {
                    Framing::Empty
                } else if chunked {
                    Framing::Chunked
                } else if let Some(len) = cl {
                    Framing::Length(len)
                } else {
                    Framing::UntilClose
                };
                break (code, version, map, n, keep, framing);
            }
            None => {}
        }
        if buf.len() > 1 << 20 {
            return Err(ExchangeError::Fail(Failure::new(ErrKind::Connection, "response head larger than 1 MiB")));
        }
        let polled = if buf.is_empty() { spin_fill(&conn.stream, &mut buf) } else { None };
        let read = match polled {
            Some(r) => r,
            None => fill(&mut conn.stream, &mut buf),
        };
        match read {
            Ok(0) if buf.is_empty() => {
                return Err(ExchangeError::NoResponse(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "connection closed",
                )))
            }
            Ok(0) => {
                return Err(ExchangeError::Fail(Failure::new(
                    ErrKind::Connection,
                    "connection closed in the middle of the response head",
                )))
            }
            Ok(_) => {
                if first_byte.is_none() {
                    if let Some(w) = written {
                        let now = Instant::now();
                        first_byte = Some(now);
                        if let Some(tm) = timings.as_deref_mut() {
                            tm.ttfb = Some(now - w);
                        }
                    }
                }
            }
            Err(e) if is_timeout(&e) => return Err(ExchangeError::Fail(read_timeout_failure())),
            Err(e) if buf.is_empty() => return Err(ExchangeError::NoResponse(e)),
            Err(e) => {
                return Err(ExchangeError::Fail(Failure::new(ErrKind::Connection, format!("connection error: {e}"))))
            }
        }
    };
    // --- body ---
    let body_err = |e: io::Error| -> ExchangeError {
        if is_timeout(&e) {
            ExchangeError::Fail(read_timeout_failure())
        } else {
            ExchangeError::Fail(Failure::new(
                ErrKind::ChunkedEncoding,
                format!("error reading a body from connection: {e}"),
            ))
        }
    };
    let eof = || io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed before the end of the body");
    let raw: Bytes = match framing {
        Framing::Empty => {
            buf.drain(..head_len);
            Bytes::new()
        }
        Framing::Length(len) => {
            let len = usize::try_from(len).map_err(|_| body_err(io::Error::other("body too large")))?;
            let want = head_len + len;
            if len > INLINE_BODY_MAX && buf.len() < want {
                // a large body is read straight into its own buffer: no second copy of it
                let mut body = Vec::with_capacity(len);
                body.extend_from_slice(&buf[head_len..]);
                buf.clear();
                while body.len() < len {
                    let room = len - body.len();
                    let at = body.len();
                    // SAFETY: reading into the spare capacity; only `n` bytes are then marked initialised
                    let spare = unsafe { std::slice::from_raw_parts_mut(body.as_mut_ptr().add(at), room) };
                    match conn.stream.read(spare) {
                        Ok(0) => return Err(body_err(eof())),
                        Ok(n) => unsafe { body.set_len(at + n) },
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(body_err(e)),
                    }
                }
                Bytes::from(body)
            } else {
                if buf.capacity() < want {
                    buf.reserve(want - buf.len());
                }
                while buf.len() < want {
                    match fill(&mut conn.stream, &mut buf) {
                        Ok(0) => return Err(body_err(eof())),
                        Ok(_) => {}
                        Err(e) => return Err(body_err(e)),
                    }
                }
                let body = Bytes::copy_from_slice(&buf[head_len..want]);
                buf.drain(..want);
                body
            }
        }
        Framing::Chunked => {
            let mut out: Vec<u8> = Vec::new();
            let mut pos = head_len;
            loop {
                // chunk size line
                let (size, used) = loop {
                    match httparse::parse_chunk_size(&buf[pos..]) {
                        Ok(httparse::Status::Complete((used, size))) => break (size, used),
                        Ok(httparse::Status::Partial) => {}
                        Err(_) => {
                            return Err(ExchangeError::Fail(Failure::new(
                                ErrKind::ChunkedEncoding,
                                "invalid chunk size in a chunked body",
                            )))
                        }
                    }
                    match fill(&mut conn.stream, &mut buf) {
                        Ok(0) => return Err(body_err(eof())),
                        Ok(_) => {}
                        Err(e) => return Err(body_err(e)),
                    }
                };
                pos += used;
                if size == 0 {
                    // trailers (ignored) up to the empty line
                    loop {
                        if let Some(i) = find_crlf(&buf[pos..]) {
                            let line_empty = i == 0;
                            pos += i + 2;
                            if line_empty {
                                break;
                            }
                            continue;
                        }
                        match fill(&mut conn.stream, &mut buf) {
                            Ok(0) => return Err(body_err(eof())),
                            Ok(_) => {}
                            Err(e) => return Err(body_err(e)),
                        }
                    }
                    break;
                }
                let size = usize::try_from(size).map_err(|_| body_err(io::Error::other("chunk too large")))?;
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
                    buf.truncate(pos.min(buf.len()));
                    buf.drain(..pos);
                    pos = 0;
                    match fill(&mut conn.stream, &mut buf) {
                        Ok(0) => return Err(body_err(eof())),
                        Ok(_) => {}
                        Err(e) => return Err(body_err(e)),
                    }
                }
                // CRLF after the chunk data
                while buf.len() < pos + 2 {
                    match fill(&mut conn.stream, &mut buf) {
                        Ok(0) => return Err(body_err(eof())),
                        Ok(_) => {}
                        Err(e) => return Err(body_err(e)),
                    }
                }
                if &buf[pos..pos + 2] != b"\r\n" {
                    return Err(ExchangeError::Fail(Failure::new(
                        ErrKind::ChunkedEncoding,
                        "missing CRLF after a chunk",
                    )));
                }
                pos += 2;
                if pos > 64 * 1024 {
                    buf.drain(..pos);
                    pos = 0;
                }
            }
            buf.drain(..pos);
            Bytes::from(out)
        }
        Framing::UntilClose => {
            keep_alive = false;
            loop {
                match fill(&mut conn.stream, &mut buf) {
                    Ok(0) => break,
                    Ok(_) => {}
                    Err(e) => return Err(body_err(e)),
                }
            }
            let body = Bytes::copy_from_slice(&buf[head_len..]);
            buf.clear();
            body
        }
    };
    // a server that sent more than one response's worth of bytes is not to be trusted with another request
    let keep = keep_alive && buf.is_empty();
    if buf.capacity() <= 64 * 1024 {
        conn.buf = buf;
    }
    if !keep {
        let _ = conn.stream.shutdown(Shutdown::Both);
    }
    if let (Some(tm), Some(f)) = (timings.as_deref_mut(), first_byte) {
        tm.transfer = Some(f.elapsed());
    }
    let mut headers = headers;
    let body = decode(&mut headers, raw, timings).map_err(ExchangeError::Fail)?;
    Ok((Answer { status, version, headers, body }, keep))
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

/// Decode a gzip/deflate/br/zstd body as reqwest does (the Content-Encoding and Content-Length
/// headers are then dropped, since they describe the bytes on the wire). The decoding is timed
/// into `timings.decode` when there is one and something was decoded.
fn decode(headers: &mut HeaderMap, raw: Bytes, timings: Option<&mut Timings>) -> Result<Bytes, Failure> {
    let enc = match headers.get(reqwest::header::CONTENT_ENCODING) {
        None => return Ok(raw),
        Some(v) => v.as_bytes().trim_ascii().to_ascii_lowercase(),
    };
    if headers.get_all(reqwest::header::CONTENT_ENCODING).iter().count() > 1 || raw.is_empty() {
        return Ok(raw);
    }
    let start = timings.as_ref().map(|_| Instant::now());
    let mut out = Vec::with_capacity(raw.len() * 4);
    let res = match enc.as_slice() {
        b"gzip" | b"x-gzip" => flate2::read::MultiGzDecoder::new(&raw[..]).read_to_end(&mut out),
        b"deflate" => flate2::read::ZlibDecoder::new(&raw[..]).read_to_end(&mut out),
        b"br" => brotli::Decompressor::new(&raw[..], 8192).read_to_end(&mut out),
        b"zstd" => zstd::stream::read::Decoder::new(&raw[..]).and_then(|mut d| d.read_to_end(&mut out)),
        _ => return Ok(raw),
    };
    if let Err(e) = res {
        return Err(Failure::new(
            ErrKind::ContentDecoding,
            format!("error decoding response body: {} decoding failed: {e}", String::from_utf8_lossy(&enc)),
        ));
    }
    if let (Some(tm), Some(start)) = (timings, start) {
        tm.decode = Some(start.elapsed());
    }
    headers.remove(reqwest::header::CONTENT_ENCODING);
    headers.remove(reqwest::header::CONTENT_LENGTH);
    Ok(Bytes::from(out))
}
