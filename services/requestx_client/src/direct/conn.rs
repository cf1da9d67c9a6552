//! One blocking connection of the direct path: a `TcpStream`, with TLS (rustls) on top for https.
//!
//! Reads go through `Conn::recv`, which hands out plaintext either way, so the HTTP/1.1 code above
//! never knows which it has. TLS is driven by hand (`read_tls` / `process_new_packets` /
//! `write_tls`) rather than through `rustls::StreamOwned` so that the same calls work with
//! `MSG_DONTWAIT` while polling for an answer, and a read timeout stays the socket's `SO_RCVTIMEO`.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream, ToSocketAddrs};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection};

use super::{is_timeout, Target};
use crate::timing::Timings;
use crate::{ErrKind, Failure};

/// The TLS settings of an https target: the rustls configuration, and the number that tells its
/// connections apart from those made with other settings in the pool.
#[derive(Clone)]
pub struct TlsSetting {
    pub id: u64,
    pub config: Arc<ClientConfig>,
}

pub(super) struct Conn {
    stream: TcpStream,
    tls: Option<Box<ClientConnection>>,
    read_timeout: Option<Duration>,
    /// bytes read past the end of the previous response (none for a well-behaved server)
    pub buf: Vec<u8>,
    pub idle_since: Instant,
    /// answers in a row on this connection that came later than polling is for (0: the last was quick)
    pub slow_answers: u32,
}

/// Plaintext is taken from rustls in pieces of at most this size (one TLS record's worth).
const TLS_PIECE: usize = 16 * 1024;

impl Conn {
    pub fn set_read_timeout(&mut self, t: Option<Duration>) -> io::Result<()> {
        if self.read_timeout != t {
            self.stream.set_read_timeout(t)?;
            self.read_timeout = t;
        }
        Ok(())
    }

    pub fn fd(&self) -> RawFd {
        self.stream.as_raw_fd()
    }

    /// A pooled connection the server has already closed (or sent unexpected bytes on) is useless.
    /// Over TLS any byte counts too: after a complete answer it is almost always an alert
    /// (close_notify); anything else (a late session ticket) only costs a new connection.
    pub fn looks_closed(&self) -> bool {
        let mut b = [0u8; 1];
        // SAFETY: recv into a 1-byte stack buffer on a socket we own
        let n = unsafe { libc::recv(self.fd(), b.as_mut_ptr().cast(), 1, libc::MSG_PEEK | libc::MSG_DONTWAIT) };
        // 0: orderly shutdown; > 0: stray bytes; -1 with EAGAIN: alive and quiet
        n >= 0 || io::Error::last_os_error().kind() != io::ErrorKind::WouldBlock
    }

    /// Over TLS, whether the records read with the answer leave the connection fit for another
    /// request: no decrypted bytes nobody has read (a server that sent more than its answer) and no
    /// close_notify (often read together with the answer's last record, so no later peek would see it).
    pub fn tls_reusable(&mut self) -> bool {
        match &mut self.tls {
            None => true,
            Some(tls) => tls
                .process_new_packets()
                .is_ok_and(|s| s.plaintext_bytes_to_read() == 0 && !s.peer_has_closed()),
        }
    }

    pub fn write_all(&mut self, data: &[u8]) -> io::Result<()> {
        let Some(tls) = &mut self.tls else { return self.stream.write_all(data) };
        let mut sent = 0;
        while sent < data.len() {
            let n = tls.writer().write(&data[sent..])?;
            sent += n;
            if n == 0 && !tls.wants_write() {
                return Err(io::Error::new(io::ErrorKind::WriteZero, "TLS connection refused more data"));
            }
            while tls.wants_write() {
                tls.write_tls(&mut self.stream)?;
            }
        }
        Ok(())
    }

    /// Receive into `buf`'s spare capacity (at most `max` bytes; `flags` for the socket, e.g.
    /// `MSG_DONTWAIT`) and extend its length by what came. Ok(0) is the end of the stream.
    ///
    /// A blocking receive ends with a timeout only once the whole read timeout has passed: the kernel
    /// counts `SO_RCVTIMEO` in scheduler ticks and may give up up to one tick (4 ms at 250 Hz) early, so
    /// an early one waits again for what is left.
    pub fn recv(&mut self, buf: &mut Vec<u8>, max: usize, flags: libc::c_int) -> io::Result<usize> {
        let timeout = self.read_timeout.filter(|_| flags & libc::MSG_DONTWAIT == 0);
        let started = timeout.map(|_| Instant::now());
        loop {
            let res = match &mut self.tls {
                None => recv_into(self.stream.as_raw_fd(), buf, max, flags),
                Some(tls) => tls_recv(tls, &mut self.stream, buf, max, flags),
            };
            let (Some(t), Some(s)) = (timeout, started) else { return res };
            let left = t.saturating_sub(s.elapsed());
            if !matches!(&res, Err(e) if is_timeout(e)) || left.is_zero() {
                self.set_read_timeout(Some(t))?; // after a shortened wait, the next receive gets all of it
                return res;
            }
            // wait out the rest (at least a millisecond: a zero timeout would mean none)
            self.set_read_timeout(Some(left.max(Duration::from_millis(1))))?;
        }
    }

    /// Close: over TLS, say so first (best effort), so the server can tell the end from a truncation.
    pub fn close(&mut self) {
        if let Some(tls) = &mut self.tls {
            tls.send_close_notify();
            let _ = tls.write_tls(&mut self.stream);
        }
        let _ = self.stream.shutdown(Shutdown::Both);
    }
}

/// Receive into `buf`'s spare capacity with raw `recv` rather than `Read::read`: the spare capacity
/// is uninitialised memory, and handing it to `read` as a `&mut [u8]` would be unsound.
fn recv_into(fd: RawFd, buf: &mut Vec<u8>, max: usize, flags: libc::c_int) -> io::Result<usize> {
    let len = buf.len();
    let room = (buf.capacity() - len).min(max);
    loop {
        // SAFETY: the kernel writes at most `room` bytes into the spare capacity, and only the `n`
        // bytes it wrote are then marked initialised
        let n = unsafe { libc::recv(fd, buf.as_mut_ptr().add(len).cast(), room, flags) };
        if n >= 0 {
            unsafe { buf.set_len(len + n as usize) };
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// The socket as rustls reads it: `recv` with the caller's flags.
struct Recv {
    fd: RawFd,
    flags: libc::c_int,
}

impl Read for Recv {
    fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
        loop {
            // SAFETY: `b` is an initialised slice of `b.len()` bytes
            let n = unsafe { libc::recv(self.fd, b.as_mut_ptr().cast(), b.len(), self.flags) };
            if n >= 0 {
                return Ok(n as usize);
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
}

/// Plaintext from a TLS connection: what rustls has decrypted, else the next records from the socket.
/// A server closing without close_notify ends the stream as a plain close would (as Python's `ssl`
/// does for requests, whose `suppress_ragged_eofs` is on): framing decides whether that truncated anything.
fn tls_recv(
    tls: &mut ClientConnection,
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    max: usize,
    flags: libc::c_int,
) -> io::Result<usize> {
    let mut sock = Recv { fd: stream.as_raw_fd(), flags };
    let mut eof = false;
    loop {
        let state = tls.process_new_packets().map_err(|e| {
            let _ = tls.write_tls(stream); // the alert that tells the server why
            invalid_data(e)
        })?;
        let avail = state.plaintext_bytes_to_read();
        if avail > 0 {
            // only the bytes about to be written are zeroed (rustls' reader takes an initialised slice)
            let len = buf.len();
            let n = avail.min(max).min((buf.capacity() - len).max(1)).min(TLS_PIECE);
            buf.resize(len + n, 0);
            let got = tls.reader().read(&mut buf[len..]);
            buf.truncate(len + *got.as_ref().unwrap_or(&0));
            return got;
        }
        if eof || state.peer_has_closed() {
            return Ok(0);
        }
        while tls.wants_write() {
            tls.write_tls(stream)?; // e.g. the answer to a key update
        }
        eof = tls.read_tls(&mut sock)? == 0;
    }
}

fn invalid_data(e: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

/// A new connection to `t`: TCP (within `timeout`), then for https the whole TLS handshake within
/// what is left of it, as reqwest's connect timeout covers both. Stages go to `timings`.
pub(super) fn connect(t: &Target, timeout: Option<Duration>, timings: Option<&mut Timings>) -> Result<Conn, Failure> {
    let start = timings.is_some().then(Instant::now);
    let deadline = timeout.map(|d| Instant::now() + d);
    let stream = tcp_connect(t, deadline)?;
    let _ = stream.set_nodelay(true);
    let mut conn =
        Conn { stream, tls: None, read_timeout: None, buf: Vec::new(), idle_since: Instant::now(), slow_answers: 0 };
    let Some(setting) = &t.tls else {
        if let (Some(tm), Some(s)) = (timings, start) {
            tm.connect = Some(s.elapsed());
        }
        return Ok(conn);
    };
    // connect is recorded before the handshake, so that a failed one still shows it
    let mut timings = timings;
    let tcp_done = start.map(|s| (s, Instant::now()));
    if let (Some(tm), Some((s, c))) = (timings.as_deref_mut(), tcp_done) {
        tm.connect = Some(c - s);
    }
    handshake(&mut conn, t, setting, deadline)?;
    if let (Some(tm), Some((_, c))) = (timings, tcp_done) {
        tm.tls = Some(c.elapsed());
    }
    Ok(conn)
}

fn tcp_connect(t: &Target, deadline: Option<Instant>) -> Result<TcpStream, Failure> {
    let addrs: Vec<SocketAddr> = match t.ip {
        Some(ip) => vec![SocketAddr::new(ip, t.port)],
        None => (t.host.as_str(), t.port)
            .to_socket_addrs()
            .map(|a| a.collect())
            .map_err(|e| Failure::new(ErrKind::Connection, format!("failed to resolve {:?}: {e}", t.host)))?,
    };
    let mut last: Option<io::Error> = None;
    for addr in addrs {
        let res = match deadline {
            None => TcpStream::connect(addr),
            Some(dl) => match dl.saturating_duration_since(Instant::now()) {
                left if left.is_zero() => Err(io::Error::new(io::ErrorKind::TimedOut, "connect timed out")),
                left => TcpStream::connect_timeout(&addr, left),
            },
        };
        match res {
            Ok(stream) => return Ok(stream),
            Err(e) => last = Some(e),
        }
    }
    let e = last.unwrap_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no address"));
    if is_timeout(&e) {
        Err(Failure::new(ErrKind::ConnectTimeout, format!("error sending request for url ({}): connect timed out", t.url())))
    } else {
        Err(connect_failure(t, &e))
    }
}

/// A connection that could not be made (or broke while being set up), in reqwest's words.
fn connect_failure(t: &Target, e: &io::Error) -> Failure {
    Failure::new(ErrKind::Connection, format!("error sending request for url ({}): client error (Connect): {e}", t.url()))
}

/// The TLS handshake, under the connect deadline (the socket's timeouts, reset afterwards).
/// Certificate and protocol failures, and a server that hangs up mid-handshake, are SSL errors.
fn handshake(conn: &mut Conn, t: &Target, setting: &TlsSetting, deadline: Option<Instant>) -> Result<(), Failure> {
    let ssl = |msg: String| Failure::new(ErrKind::Ssl, format!("error sending request for url ({}): {msg}", t.url()));
    let name = ServerName::try_from(t.host.clone()).map_err(|e| ssl(format!("invalid TLS server name: {e}")))?;
    let mut tls = ClientConnection::new(setting.config.clone(), name).map_err(|e| ssl(e.to_string()))?;
    let stream = &mut conn.stream;
    while tls.is_handshaking() {
        let left = match deadline {
            None => None,
            Some(dl) => match dl.saturating_duration_since(Instant::now()) {
                d if d.is_zero() => return Err(handshake_timeout(t)),
                d => Some(d),
            },
        };
        let io_res = stream.set_read_timeout(left).and_then(|()| stream.set_write_timeout(left));
        match io_res.and_then(|()| tls.complete_io(stream)) {
            Ok((0, 0)) if tls.is_handshaking() => return Err(ssl("connection closed during the TLS handshake".into())),
            Ok(_) => {}
            Err(e) if is_timeout(&e) => return Err(handshake_timeout(t)),
            Err(e) if e.kind() == io::ErrorKind::InvalidData || e.kind() == io::ErrorKind::UnexpectedEof => {
                return Err(ssl(format!("client error (Connect): {e}")))
            }
            Err(e) => return Err(connect_failure(t, &e)),
        }
    }
    let reset = stream.set_read_timeout(None).and_then(|()| stream.set_write_timeout(None));
    reset.map_err(|e| Failure::new(ErrKind::Connection, format!("connection error: {e}")))?;
    conn.tls = Some(Box::new(tls));
    Ok(())
}

fn handshake_timeout(t: &Target) -> Failure {
    Failure::new(ErrKind::ConnectTimeout, format!("error sending request for url ({}): TLS handshake timed out", t.url()))
}
