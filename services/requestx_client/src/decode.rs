//! Content-Encoding (gzip, deflate, br, zstd) for every path: whole bodies (the direct path and the
//! reqwest path's read bodies, under `max_decoded_size`) and streamed ones (`stream=True`, decoded as
//! the caller reads). One set of decoders (flate2, brotli, zstd); reqwest's own decompression is off.
//! A body with several codings, or one not listed, is left as it came, as before.

use std::io::{self, Read};
use std::time::Instant;

use bytes::Bytes;
use reqwest::header::HeaderMap;

use crate::timing::Timings;
use crate::{ErrKind, Failure};

/// What a request offers when the caller did not say (the codings decoded here).
pub const ACCEPT_ENCODING: &str = "gzip, deflate, br, zstd";

/// A decoded body starts with at most this much room, whatever its compressed size suggests.
const PREALLOC_MAX: usize = 1 << 20;

#[derive(Clone, Copy)]
pub enum Coding {
    Gzip,
    Deflate,
    Brotli,
    Zstd,
}

impl Coding {
    fn name(self) -> &'static str {
        match self {
            Coding::Gzip => "gzip",
            Coding::Deflate => "deflate",
            Coding::Brotli => "br",
            Coding::Zstd => "zstd",
        }
    }

    /// A reader of `r`'s decoded bytes.
    fn reader<'a, R: Read + Send + 'a>(self, r: R) -> io::Result<Box<dyn Read + Send + 'a>> {
        Ok(match self {
            Coding::Gzip => Box::new(flate2::read::MultiGzDecoder::new(r)),
            Coding::Deflate => Box::new(flate2::read::ZlibDecoder::new(r)),
            Coding::Brotli => Box::new(brotli::Decompressor::new(r, 8192)),
            Coding::Zstd => Box::new(zstd::stream::read::Decoder::new(r)?),
        })
    }

    /// The failure for a decoder's error.
    pub fn failure(self, e: &io::Error) -> Failure {
        Failure::new(ErrKind::ContentDecoding, format!("error decoding response body: {} decoding failed: {e}", self.name()))
    }
}

/// The one coding the headers name that is decoded here; None for none, identity, several or others.
pub fn coding(headers: &HeaderMap) -> Option<Coding> {
    let mut all = headers.get_all(reqwest::header::CONTENT_ENCODING).iter();
    let (Some(v), None) = (all.next(), all.next()) else { return None };
    match v.as_bytes().trim_ascii().to_ascii_lowercase().as_slice() {
        b"gzip" | b"x-gzip" => Some(Coding::Gzip),
        b"deflate" => Some(Coding::Deflate),
        b"br" => Some(Coding::Brotli),
        b"zstd" => Some(Coding::Zstd),
        _ => None,
    }
}

/// Content-Encoding and Content-Length describe the bytes on the wire: gone once the body is decoded.
pub fn strip_headers(headers: &mut HeaderMap) {
    headers.remove(reqwest::header::CONTENT_ENCODING);
    headers.remove(reqwest::header::CONTENT_LENGTH);
}

/// A whole body decoded (and its coding headers dropped), at most `limit` bytes of output (a
/// decompression bomb stops there); timed into `timings.decode` when there is one and something was
/// decoded. An empty body, or one this module does not decode, is returned as it is.
pub fn decode(headers: &mut HeaderMap, raw: Bytes, limit: Option<usize>, timings: Option<&mut Timings>) -> Result<Bytes, Failure> {
    let Some(coding) = coding(headers).filter(|_| !raw.is_empty()) else { return Ok(raw) };
    let start = timings.as_ref().map(|_| Instant::now());
    let max = limit.unwrap_or(usize::MAX);
    let mut out = Vec::with_capacity(raw.len().saturating_mul(4).min(max).min(PREALLOC_MAX));
    // one byte past the limit is read, to tell "exactly the limit" from "more"
    let cap = (max as u64).saturating_add(1);
    let res = coding.reader(&raw[..]).and_then(|r| r.take(cap).read_to_end(&mut out));
    if out.len() > max {
        return Err(Failure::new(
            ErrKind::ContentDecoding,
            format!("decoded response body larger than the limit of {max} bytes (decompression bomb?)"),
        ));
    }
    res.map_err(|e| coding.failure(&e))?;
    if let (Some(tm), Some(start)) = (timings, start) {
        tm.decode = Some(start.elapsed());
    }
    strip_headers(headers);
    Ok(Bytes::from(out))
}

/// A streamed body's decoded bytes, read from `source` as the caller reads. The decoder starts with
/// the first byte, so that an empty body (HEAD, 204) is empty rather than a decoding error.
pub struct Decoding<R> {
    coding: Coding,
    state: State<R>,
}

enum State<R> {
    Start(R),
    Running(Box<dyn Read + Send>),
    Done,
}

impl<R: Read + Send + 'static> Decoding<R> {
    pub fn new(coding: Coding, source: R) -> Decoding<R> {
        Decoding { coding, state: State::Start(source) }
    }
}

impl<R: Read + Send + 'static> Read for Decoding<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        loop {
            match &mut self.state {
                State::Running(r) => return r.read(out),
                State::Done => return Ok(0),
                State::Start(_) => {
                    let State::Start(mut source) = std::mem::replace(&mut self.state, State::Done) else { unreachable!() };
                    let mut first = vec![0u8; 8192];
                    let n = read_some(&mut source, &mut first)?;
                    if n == 0 {
                        return Ok(0);
                    }
                    first.truncate(n);
                    self.state = State::Running(self.coding.reader(io::Cursor::new(first).chain(source))?);
                }
            }
        }
    }
}

fn read_some(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        match r.read(buf) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            res => return res,
        }
    }
}
