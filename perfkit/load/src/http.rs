//! HTTP/1.1 keep-alive client connection: one request in flight per connection (wrk2 model),
//! responses parsed with `httparse` (Content-Length, chunked, read-until-close bodies).

use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::deadline::Deadline;
use crate::driver::Driver;
use crate::transport::{ConnectTimes, Connector, Stream};
use crate::recording::Outcome;
use crate::requests::{RequestSet, Renderer};

const MAX_HEADERS: usize = 100;
const MAX_HEAD_BYTES: usize = 64 * 1024;

/// What every connection of a run sends.
#[derive(Debug)]
pub struct HttpTarget {
    pub connector: Connector,
    /// The complete request, rendered once.
    pub request: Vec<u8>,
    /// HEAD requests get responses without a body.
    pub head: bool,
    /// `--requests`: the requests to send instead of `request` (each connection's driver picks).
    pub requests: Option<Arc<RequestSet>>,
}

impl HttpTarget {
    /// Render the request bytes. `path` includes the query; `headers` are sent as given; a
    /// `Host` header (unless given) and a `Content-Length` (when there is a body) are added.
    pub fn new(
        connector: Connector,
        method: &str,
        host_header: &str,
        path: &str,
        headers: &[(String, String)],
        body: &[u8],
    ) -> HttpTarget {
        let mut req = Vec::with_capacity(256 + body.len());
        req.extend_from_slice(format!("{method} {path} HTTP/1.1\r\n").as_bytes());
        let has = |name: &str| headers.iter().any(|(k, _)| k.eq_ignore_ascii_case(name));
        if !has("host") {
            req.extend_from_slice(format!("Host: {host_header}\r\n").as_bytes());
        }
        for (k, v) in headers {
            req.extend_from_slice(format!("{k}: {v}\r\n").as_bytes());
        }
        if (!body.is_empty() || method == "POST" || method == "PUT" || method == "PATCH")
            && !has("content-length")
        {
            req.extend_from_slice(format!("Content-Length: {}\r\n", body.len()).as_bytes());
        }
        req.extend_from_slice(b"\r\n");
        req.extend_from_slice(body);
        HttpTarget { connector, request: req, head: method.eq_ignore_ascii_case("HEAD"), requests: None }
    }
}

/// A parsed response: status, bytes read for it, and whether the server closes the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResponseInfo {
    pub status: u16,
    pub bytes: u64,
    pub close: bool,
}

#[derive(Debug)]
pub enum ReadError {
    Io(io::Error),
    /// The server closed the connection before a complete response.
    Closed,
    Malformed(String),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Io(e) => write!(f, "{e}"),
            ReadError::Closed => write!(f, "connection closed by the server"),
            ReadError::Malformed(m) => write!(f, "malformed response: {m}"),
        }
    }
}

/// One keep-alive connection with its read buffer.
pub struct HttpConn {
    stream: Stream,
    buf: Vec<u8>,
    start: usize,
}

enum Framing {
    None,
    Length(u64),
    Chunked,
    UntilClose,
}

impl HttpConn {
    pub async fn connect(connector: &Connector) -> io::Result<(HttpConn, ConnectTimes)> {
        let (stream, times) = connector.connect().await?;
        Ok((HttpConn { stream, buf: Vec::with_capacity(16 * 1024), start: 0 }, times))
    }

    pub async fn send(&mut self, request: &[u8]) -> io::Result<()> {
        self.stream.write_all(request).await
    }

    fn pending(&self) -> &[u8] {
        &self.buf[self.start..]
    }

    fn consume(&mut self, n: usize) {
        self.start += n;
        if self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
        }
    }

    /// Read more bytes; `Ok(0)` at EOF.
    async fn fill(&mut self) -> io::Result<usize> {
        if self.start > 0 && self.buf.capacity() - self.buf.len() < 4096 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        if self.buf.capacity() - self.buf.len() < 4096 {
            self.buf.reserve(16 * 1024);
        }
        self.stream.read_buf(&mut self.buf).await
    }

    /// Read one complete final response (skipping 1xx interim responses).
    pub async fn read_response(&mut self, head_request: bool) -> Result<ResponseInfo, ReadError> {
        let mut bytes = 0u64;
        loop {
            // Parse the head.
            let (status, head_len, framing, close) = loop {
                let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
                let mut resp = httparse::Response::new(&mut headers);
                match resp.parse(self.pending()) {
                    Ok(httparse::Status::Complete(n)) => {
                        let status = resp.code.unwrap_or(0);
                        let mut length = None;
                        let mut chunked = false;
                        let mut close = resp.version == Some(0);
                        for h in resp.headers.iter() {
                            if h.name.eq_ignore_ascii_case("content-length") {
                                let v = std::str::from_utf8(h.value)
                                    .ok()
                                    .and_then(|s| s.trim().parse::<u64>().ok())
                                    .ok_or_else(|| ReadError::Malformed("bad Content-Length".into()))?;
                                length = Some(v);
                            } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                                chunked = h
                                    .value
                                    .split(|b| *b == b',')
                                    .any(|t| t.trim_ascii().eq_ignore_ascii_case(b"chunked"));
                            } else if h.name.eq_ignore_ascii_case("connection") {
                                if h.value.trim_ascii().eq_ignore_ascii_case(b"close") {
                                    close = true;
                                } else if h.value.trim_ascii().eq_ignore_ascii_case(b"keep-alive") {
                                    close = false;
                                }
                            }
                        }
                        let framing = if head_request
                            || (100..200).contains(&status)
                            || status == 204
                            || status == 304
                        {
                            Framing::None
                        } else if chunked {
                            Framing::Chunked
                        } else if let Some(n) = length {
                            Framing::Length(n)
                        } else {
                            Framing::UntilClose
                        };
                        break (status, n, framing, close);
                    }
                    Ok(httparse::Status::Partial) => {
                        if self.pending().len() > MAX_HEAD_BYTES {
                            return Err(ReadError::Malformed("response head too large".into()));
                        }
                        let n = self.fill().await.map_err(ReadError::Io)?;
                        if n == 0 {
                            return Err(ReadError::Closed);
                        }
                    }
                    Err(e) => return Err(ReadError::Malformed(e.to_string())),
                }
            };
            self.consume(head_len);
            bytes += head_len as u64;
            let mut close = close;
            match framing {
                Framing::None => {}
                Framing::Length(n) => bytes += self.skip_exact(n).await?,
                Framing::Chunked => bytes += self.skip_chunked().await?,
                Framing::UntilClose => {
                    bytes += self.skip_until_close().await?;
                    close = true;
                }
            }
            if (100..200).contains(&status) && status != 101 {
                continue; // interim response; the final one follows
            }
            return Ok(ResponseInfo { status, bytes, close });
        }
    }

    async fn skip_exact(&mut self, mut n: u64) -> Result<u64, ReadError> {
        let total = n;
        loop {
            let have = self.pending().len() as u64;
            let take = have.min(n);
            self.consume(take as usize);
            n -= take;
            if n == 0 {
                return Ok(total);
            }
            if self.fill().await.map_err(ReadError::Io)? == 0 {
                return Err(ReadError::Closed);
            }
        }
    }

    async fn skip_line(&mut self) -> Result<(usize, u64), ReadError> {
        // Returns (line length without CRLF, bytes consumed).
        loop {
            if let Some(pos) = self.pending().windows(2).position(|w| w == b"\r\n") {
                self.consume(pos + 2);
                return Ok((pos, pos as u64 + 2));
            }
            if self.pending().len() > MAX_HEAD_BYTES {
                return Err(ReadError::Malformed("line too long".into()));
            }
            if self.fill().await.map_err(ReadError::Io)? == 0 {
                return Err(ReadError::Closed);
            }
        }
    }

    async fn skip_chunked(&mut self) -> Result<u64, ReadError> {
        let mut bytes = 0u64;
        loop {
            let size = loop {
                match httparse::parse_chunk_size(self.pending()) {
                    Ok(httparse::Status::Complete((n, size))) => {
                        self.consume(n);
                        bytes += n as u64;
                        break size;
                    }
                    Ok(httparse::Status::Partial) => {
                        if self.pending().len() > MAX_HEAD_BYTES {
                            return Err(ReadError::Malformed("chunk size line too long".into()));
                        }
                        if self.fill().await.map_err(ReadError::Io)? == 0 {
                            return Err(ReadError::Closed);
                        }
                    }
                    Err(_) => return Err(ReadError::Malformed("invalid chunk size".into())),
                }
            };
            if size == 0 {
                // Trailers, up to the empty line.
                loop {
                    let (len, n) = self.skip_line().await?;
                    bytes += n;
                    if len == 0 {
                        return Ok(bytes);
                    }
                }
            }
            bytes += self.skip_exact(size).await?;
            let (len, n) = self.skip_line().await?;
            bytes += n;
            if len != 0 {
                return Err(ReadError::Malformed("missing CRLF after chunk data".into()));
            }
        }
    }

    async fn skip_until_close(&mut self) -> Result<u64, ReadError> {
        let mut bytes = self.pending().len() as u64;
        self.buf.clear();
        self.start = 0;
        loop {
            let n = self.fill().await.map_err(ReadError::Io)?;
            if n == 0 {
                return Ok(bytes);
            }
            bytes += n as u64;
            self.buf.clear();
        }
    }
}

/// Drive one connection for the whole run: one request in flight at a time, on the driver's schedule.
pub async fn run_connection(initial: HttpConn, target: Arc<HttpTarget>, mut d: Driver, timeout: Duration) {
    let mut conn = Some(initial);
    let mut render = Renderer::default();
    let mut watchdog = Deadline::new();
    while let Some(intended) = d.peek() {
        if conn.is_none() {
            conn = d.reconnect(HttpConn::connect(&target.connector)).await;
            continue;
        }
        d.wait_until(intended).await;
        let intended = d.take();
        let (request, head) = match (&target.requests, d.pick()) {
            (Some(set), Some(p)) => (render.http1(set, p), set.is_head(p)),
            _ => (&target.request[..], target.head),
        };
        let c = conn.as_mut().unwrap();
        let sent = Instant::now();
        d.rec().sent(intended, sent);
        let deadline = (sent + timeout).min(d.stop);
        let exchange = async {
            c.send(request).await.map_err(|_| Outcome::WriteError)?;
            c.read_response(head).await.map_err(|_| Outcome::ReadError)
        };
        let result = watchdog.run(deadline, exchange).await;
        let done = Instant::now();
        match result {
            Some(Ok(info)) => {
                d.rec().completed(Outcome::of_status(info.status), intended, sent, done, info.bytes);
                d.connected_ok();
                if info.close {
                    conn = None;
                }
            }
            Some(Err(outcome)) => {
                d.rec().failed(outcome, intended);
                conn = None;
                // A server that resets connections: don't spin, back off before reconnecting.
                d.back_off().await;
            }
            None if deadline < sent + timeout => {
                // The run stopped with this request in flight.
                d.finish([(intended, sent)]);
                return;
            }
            None => {
                d.rec().timed_out(intended, sent, sent + timeout);
                conn = None;
            }
        }
    }
    d.finish([]);
}
