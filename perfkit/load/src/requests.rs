//! Request variation (`--requests FILE`): a set of HTTP requests to send instead of one, each with
//! a label its results are filed under.
//!
//! - The file is JSON Lines (its first non-blank line starts with `{`) or vegeta's `http` targets
//!   format. Everything is read, checked and compiled before any connection is opened; an error
//!   names the file and the line.
//! - Which entry a request sends is a function of its global request number `seq` (unique across
//!   connections and segments, see [`crate::schedule::request_number`]): round-robin is `seq mod
//!   n`; weighted draws from a Walker alias table with a generator seeded by `(--seed, seq)`. No
//!   state is shared between connections, and the same seed picks the same entries whatever the
//!   threads, connections' timing or segments.
//! - Paths, header values and bodies may hold template fields (`{{seq}}`, `{{uuid}}`,
//!   `{{rand_int A B}}`, `{{pick A|B|C}}`), parsed once into segments and rendered into a
//!   per-connection [`Renderer`] buffer: no allocation per request once the buffers are big
//!   enough. Random fields draw from a generator seeded by `(--seed, seq)` too. An entry without a
//!   field is rendered once, at load.
//!
//! HTTP/1.1 uses [`Renderer::http1`] (the whole request's bytes); other protocols use
//! [`Renderer::parts`] (method, path, headers and body).

use std::collections::HashMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rand_pcg::rand_core::Rng as _;
use rand_pcg::Pcg64Mcg;
use serde::Deserialize;

/// At most this many entries in a file.
pub const MAX_ENTRIES: usize = 100_000;
/// At most this many distinct labels (each has its own histograms and metric series).
pub const MAX_LABELS: usize = 100;
/// Largest body of one entry.
pub const MAX_BODY_BYTES: usize = 16 << 20;
/// Largest requests file, and largest sum of all bodies.
pub const MAX_TOTAL_BYTES: usize = 256 << 20;

/// How entries are picked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PickMode {
    /// Request `seq` sends entry `seq mod n`.
    RoundRobin,
    /// Random, in proportion to the weights, seeded by `(--seed, seq)`.
    Weighted,
}

impl PickMode {
    pub fn parse(text: &str) -> Result<PickMode, String> {
        match text {
            "round-robin" => Ok(PickMode::RoundRobin),
            "weighted" => Ok(PickMode::Weighted),
            _ => Err(format!("invalid --pick {text:?}: use round-robin or weighted")),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            PickMode::RoundRobin => "round-robin",
            PickMode::Weighted => "weighted",
        }
    }
}

/// What the command line gives every entry: the target (scheme, host, port), and the defaults for
/// the method, headers and body.
pub struct Defaults<'a> {
    pub url: &'a url::Url,
    /// For entries without a method.
    pub method: &'a str,
    /// Sent with every entry, unless the entry has a header of the same name.
    pub headers: &'a [(String, String)],
    /// For entries without a body (sent as is, not a template).
    pub body: &'a [u8],
}

/// Which entry one request sends: the entry, its label and the request's global number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pick {
    pub entry: usize,
    pub label: usize,
    pub seq: u64,
}

// ---------------------------------------------------------------------------------------------
// Templates

#[derive(Debug, Clone, PartialEq)]
enum Seg {
    Lit(Vec<u8>),
    Seq,
    Uuid,
    RandInt(i64, i64),
    Pick(Vec<Vec<u8>>),
}

/// Text with template fields, parsed once.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Template {
    segs: Vec<Seg>,
}

const FIELDS_HELP: &str = "use {{seq}}, {{uuid}}, {{rand_int A B}}, {{pick A|B|C}}, or {{\"{{\"}} for literal braces";

impl Template {
    /// Text without fields.
    pub fn literal(bytes: &[u8]) -> Template {
        let mut t = Template::default();
        t.push_lit(bytes);
        t
    }

    /// Parse `{{field}}`s out of `text`; anything else is literal.
    pub fn parse(text: &[u8]) -> Result<Template, String> {
        let mut t = Template::default();
        let mut rest = text;
        while let Some(open) = find(rest, b"{{") {
            t.push_lit(&rest[..open]);
            let after = &rest[open + 2..];
            let Some(close) = find(after, b"}}") else {
                let shown = String::from_utf8_lossy(&after[..after.len().min(30)]);
                return Err(format!("unclosed template field {{{{{shown}… ({FIELDS_HELP})"));
            };
            let inner = &after[..close];
            t.segs.push(Template::field(inner)?);
            if let Some(Seg::Lit(_)) = t.segs.last() {
                // A quoted literal: merge it with its neighbours.
                let Some(Seg::Lit(l)) = t.segs.pop() else { unreachable!() };
                t.push_lit(&l);
            }
            rest = &after[close + 2..];
        }
        t.push_lit(rest);
        Ok(t)
    }

    fn field(inner: &[u8]) -> Result<Seg, String> {
        let text = std::str::from_utf8(inner).map_err(|_| "a template field is not UTF-8".to_string())?;
        let content = text.trim();
        let bad = |why: &str| format!("bad template field {{{{{text}}}}}: {why} ({FIELDS_HELP})");
        if content.len() >= 2 && content.starts_with('"') && content.ends_with('"') {
            return Ok(Seg::Lit(content[1..content.len() - 1].as_bytes().to_vec()));
        }
        let (name, args) = match content.split_once(|c: char| c.is_ascii_whitespace()) {
            Some((n, a)) => (n, a.trim()),
            None => (content, ""),
        };
        match name {
            "seq" | "uuid" if !args.is_empty() => Err(bad(&format!("{name} takes no arguments"))),
            "seq" => Ok(Seg::Seq),
            "uuid" => Ok(Seg::Uuid),
            "rand_int" => {
                let nums: Vec<&str> = args.split_ascii_whitespace().collect();
                let [a, b] = nums.as_slice() else {
                    return Err(bad("rand_int needs two integers, A and B"));
                };
                let a: i64 = a.parse().map_err(|_| bad(&format!("{a:?} is not an integer")))?;
                let b: i64 = b.parse().map_err(|_| bad(&format!("{b:?} is not an integer")))?;
                if a > b {
                    return Err(bad("rand_int needs A <= B"));
                }
                Ok(Seg::RandInt(a, b))
            }
            "pick" => {
                if args.is_empty() {
                    return Err(bad("pick needs choices separated by |"));
                }
                Ok(Seg::Pick(args.split('|').map(|c| c.trim().as_bytes().to_vec()).collect()))
            }
            "" => Err(bad("empty field")),
            _ => Err(bad(&format!("unknown field {name:?}"))),
        }
    }

    fn push_lit(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        match self.segs.last_mut() {
            Some(Seg::Lit(l)) => l.extend_from_slice(bytes),
            _ => self.segs.push(Seg::Lit(bytes.to_vec())),
        }
    }

    fn append(&mut self, other: &Template) {
        for s in &other.segs {
            match s {
                Seg::Lit(l) => self.push_lit(l),
                s => self.segs.push(s.clone()),
            }
        }
    }

    /// True when the template has no field (it renders to the same bytes every time).
    pub fn is_static(&self) -> bool {
        self.segs.iter().all(|s| matches!(s, Seg::Lit(_)))
    }

    pub fn is_empty(&self) -> bool {
        self.segs.is_empty()
    }

    /// The bytes of a static template.
    fn static_bytes(&self) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        for s in &self.segs {
            match s {
                Seg::Lit(l) => out.extend_from_slice(l),
                _ => return None,
            }
        }
        Some(out)
    }

    /// Does every byte it can render pass `ok`? (Literal text and `pick` choices; the other
    /// fields render digits, `-` and hex.)
    fn all_bytes(&self, ok: impl Fn(u8) -> bool) -> bool {
        self.segs.iter().all(|s| match s {
            Seg::Lit(l) => l.iter().all(|b| ok(*b)),
            Seg::Pick(choices) => choices.iter().all(|c| c.iter().all(|b| ok(*b))),
            _ => true,
        })
    }

    /// Append the rendering to `out` (allocates only when `out` must grow).
    pub fn render(&self, out: &mut Vec<u8>, seq: u64, rng: &mut Pcg64Mcg) {
        for s in &self.segs {
            match s {
                Seg::Lit(l) => out.extend_from_slice(l),
                Seg::Seq => push_u64(out, seq),
                Seg::Uuid => push_uuid(out, rng.next_u64(), rng.next_u64()),
                Seg::RandInt(a, b) => {
                    let span = (*b as i128 - *a as i128 + 1) as u128; // 1 ..= 2^64
                    let off = ((rng.next_u64() as u128 * span) >> 64) as i128;
                    push_i64(out, (*a as i128 + off) as i64);
                }
                Seg::Pick(choices) => {
                    let i = ((rng.next_u64() as u128 * choices.len() as u128) >> 64) as usize;
                    out.extend_from_slice(&choices[i]);
                }
            }
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn push_u64(out: &mut Vec<u8>, mut v: u64) {
    let mut b = [0u8; 20];
    let mut i = b.len();
    loop {
        i -= 1;
        b[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&b[i..]);
}

fn push_i64(out: &mut Vec<u8>, v: i64) {
    if v < 0 {
        out.push(b'-');
    }
    push_u64(out, v.unsigned_abs());
}

/// A random (version 4, RFC 9562 variant) UUID in its 36-character text form.
fn push_uuid(out: &mut Vec<u8>, hi: u64, lo: u64) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&hi.to_be_bytes());
    bytes[8..].copy_from_slice(&lo.to_be_bytes());
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let mut text = [0u8; 36];
    let mut j = 0;
    for (i, b) in bytes.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            text[j] = b'-';
            j += 1;
        }
        text[j] = HEX[(b >> 4) as usize];
        text[j + 1] = HEX[(b & 15) as usize];
        j += 2;
    }
    out.extend_from_slice(&text);
}

// ---------------------------------------------------------------------------------------------
// Seeded per-request generators

fn mix(mut z: u64) -> u64 {
    // SplitMix64's finalizer.
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

const PICK_STREAM: u64 = 0x7069_636b; // "pick"
const TEMPLATE_STREAM: u64 = 0x7465_6d70; // "temp"

/// The generator of request `seq` for one purpose: a function of `(seed, stream, seq)` only.
fn request_rng(seed: u64, stream: u64, seq: u64) -> Pcg64Mcg {
    let a = mix(seed ^ mix(stream));
    let hi = mix(a ^ seq);
    let lo = mix(hi ^ a);
    Pcg64Mcg::new(((hi as u128) << 64) | lo as u128)
}

/// Walker's alias method (Vose's construction): one draw in O(1) for any number of weights.
#[derive(Debug)]
struct Alias {
    prob: Vec<f64>,
    alias: Vec<u32>,
}

impl Alias {
    fn new(weights: &[f64]) -> Alias {
        let n = weights.len();
        let sum: f64 = weights.iter().sum();
        let mut p: Vec<f64> = weights.iter().map(|w| w * n as f64 / sum).collect();
        let (mut small, mut large): (Vec<usize>, Vec<usize>) = (0..n).partition(|&i| p[i] < 1.0);
        let mut prob = vec![1.0; n];
        let mut alias: Vec<u32> = (0..n as u32).collect();
        while let (Some(s), Some(&l)) = (small.pop(), large.last()) {
            prob[s] = p[s];
            alias[s] = l as u32;
            p[l] -= 1.0 - p[s];
            if p[l] < 1.0 {
                large.pop();
                small.push(l);
            }
        }
        // What is left is 1 up to rounding.
        Alias { prob, alias }
    }

    fn sample(&self, rng: &mut Pcg64Mcg) -> usize {
        let i = ((rng.next_u64() as u128 * self.prob.len() as u128) >> 64) as usize;
        let u = (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
        if u < self.prob[i] {
            i
        } else {
            self.alias[i] as usize
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The set

#[derive(Debug)]
struct Entry {
    method: String,
    path: Template,
    /// The entry's headers, then the command line's (`-H`) that it does not override.
    headers: Vec<(String, Template)>,
    body: Template,
    label: usize,
    head_request: bool,
    /// HTTP/1.1: request line, `Host` and headers, each line with its CRLF (not the blank line).
    h1_head: Template,
    /// HTTP/1.1 with a static body: `Content-Length` (when sent), the blank line and the body.
    h1_tail: Option<Vec<u8>>,
    /// HTTP/1.1, nothing templated: the whole request.
    h1_whole: Option<Vec<u8>>,
}

/// The requests of a run, compiled (see the module docs).
#[derive(Debug)]
pub struct RequestSet {
    entries: Vec<Entry>,
    labels: Vec<String>,
    mode: PickMode,
    alias: Option<Alias>,
    seed: u64,
    authority: String,
    fingerprint: u64,
}

/// One entry as read from the file, before it is compiled.
struct Raw {
    line: usize,
    method: String,
    /// The path (and query) template text.
    path: String,
    headers: Vec<(String, String)>,
    /// The body and whether it came from a file (`Some(name)`).
    body: Option<(Vec<u8>, Option<String>)>,
    weight: f64,
    label: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonEntry {
    method: Option<String>,
    url: Option<String>,
    path: Option<String>,
    headers: Option<serde_json::Map<String, serde_json::Value>>,
    body: Option<String>,
    body_file: Option<String>,
    weight: Option<f64>,
    label: Option<String>,
}

fn is_token(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// The `Host` header value of a URL (`host[:port]`, IPv6 in brackets).
pub fn host_header(url: &url::Url) -> String {
    let host = url.host_str().unwrap_or("");
    let host = if host.contains(':') && !host.starts_with('[') { format!("[{host}]") } else { host.to_string() };
    match url.port() {
        Some(p) => format!("{host}:{p}"),
        None => host,
    }
}

fn fnv(mut h: u64, bytes: &[u8]) -> u64 {
    for b in bytes {
        h = (h ^ *b as u64).wrapping_mul(0x100_0000_01b3);
    }
    h
}

/// Reads files and keeps the accounting of sizes while a requests file is read.
struct Loader<'a> {
    name: String,
    dir: PathBuf,
    defaults: &'a Defaults<'a>,
    total: usize,
    files: HashMap<PathBuf, Vec<u8>>,
    hash: u64,
}

impl Loader<'_> {
    fn err(&self, line: usize, msg: impl std::fmt::Display) -> String {
        format!("{} line {line}: {msg}", self.name)
    }

    fn body_file(&mut self, line: usize, file: &str) -> Result<Vec<u8>, String> {
        if file.is_empty() {
            return Err(self.err(line, "empty body file name"));
        }
        let path = self.dir.join(file);
        let bytes = match self.files.get(&path) {
            Some(b) => b.clone(),
            None => {
                let len = std::fs::metadata(&path)
                    .map_err(|e| self.err(line, format!("cannot read the body file {}: {e}", path.display())))?
                    .len();
                if len > MAX_BODY_BYTES as u64 {
                    return Err(self.err(line, format!("the body file {} has {len} bytes, more than the limit of {MAX_BODY_BYTES}", path.display())));
                }
                let b = std::fs::read(&path)
                    .map_err(|e| self.err(line, format!("cannot read the body file {}: {e}", path.display())))?;
                self.files.insert(path.clone(), b.clone());
                b
            }
        };
        self.hash = fnv(fnv(self.hash, file.as_bytes()), &bytes);
        Ok(bytes)
    }

    fn count_body(&mut self, line: usize, len: usize) -> Result<(), String> {
        if len > MAX_BODY_BYTES {
            return Err(self.err(line, format!("the body has {len} bytes, more than the limit of {MAX_BODY_BYTES}")));
        }
        self.total += len;
        if self.total > MAX_TOTAL_BYTES {
            return Err(self.err(line, format!("the bodies add up to more than the limit of {MAX_TOTAL_BYTES} bytes")));
        }
        Ok(())
    }

    /// `url` (absolute, on the run's target) or a path: the path-and-query template text.
    fn path_of_url(&self, line: usize, raw: &str) -> Result<String, String> {
        let base = self.defaults.url;
        let Some((scheme, rest)) = raw.split_once("://") else {
            return Err(self.err(line, format!("url {raw:?} is not absolute (scheme://host[:port]/path); give a \"path\" for a path")));
        };
        let auth_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let (auth, tail) = rest.split_at(auth_end);
        let origin = url::Url::parse(&format!("{scheme}://{auth}/"))
            .map_err(|e| self.err(line, format!("invalid url {raw:?}: {e}")))?;
        if origin.scheme() != base.scheme()
            || origin.host_str() != base.host_str()
            || origin.port_or_known_default() != base.port_or_known_default()
        {
            return Err(self.err(
                line,
                format!(
                    "url {raw:?} is not on the target {}://{}: a run has one target (the command line URL's scheme, \
                     host and port); give the other target its own run, or use a path",
                    base.scheme(),
                    host_header(base)
                ),
            ));
        }
        let tail = tail.split('#').next().unwrap_or("");
        Ok(match tail {
            "" => "/".to_string(),
            t if t.starts_with('?') => format!("/{t}"),
            t => t.to_string(),
        })
    }

    fn parse_jsonl(&mut self, text: &str, out: &mut Vec<Raw>) -> Result<(), String> {
        for (n, line) in text.lines().enumerate() {
            let n = n + 1;
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            if !line.starts_with('{') {
                return Err(self.err(n, "expected a JSON object (one request per line)"));
            }
            let e: JsonEntry = serde_json::from_str(line).map_err(|e| {
                let msg = e.to_string();
                let msg = match msg.rfind(" at line ") {
                    Some(i) => format!("{} (column {})", &msg[..i], e.column()),
                    None => msg,
                };
                self.err(n, format!("invalid request: {msg}"))
            })?;
            if out.len() == MAX_ENTRIES {
                return Err(self.err(n, format!("more than {MAX_ENTRIES} requests")));
            }
            let path = match (&e.url, &e.path) {
                (Some(_), Some(_)) => return Err(self.err(n, "give either \"url\" or \"path\", not both")),
                (None, None) => return Err(self.err(n, "missing \"url\" or \"path\"")),
                (Some(u), None) => self.path_of_url(n, u)?,
                (None, Some(p)) => {
                    if !p.starts_with('/') {
                        return Err(self.err(n, format!("path {p:?} must start with /")));
                    }
                    p.clone()
                }
            };
            let mut headers = Vec::new();
            for (k, v) in e.headers.into_iter().flatten() {
                let serde_json::Value::String(v) = v else {
                    return Err(self.err(n, format!("header {k:?}: the value must be a string")));
                };
                headers.push((k, v));
            }
            let body = match (e.body, e.body_file) {
                (Some(_), Some(_)) => return Err(self.err(n, "give either \"body\" or \"body_file\", not both")),
                (Some(b), None) => Some((b.into_bytes(), None)),
                (None, Some(f)) => Some((self.body_file(n, &f)?, Some(f))),
                (None, None) => None,
            };
            let weight = e.weight.unwrap_or(1.0);
            if !(weight.is_finite() && weight > 0.0) {
                return Err(self.err(n, format!("weight must be a positive number, got {weight}")));
            }
            if e.label.as_deref() == Some("") {
                return Err(self.err(n, "label must not be empty"));
            }
            out.push(Raw {
                line: n,
                method: e.method.unwrap_or_else(|| self.defaults.method.to_string()),
                path,
                headers,
                body,
                weight,
                label: e.label,
            });
        }
        Ok(())
    }

    /// vegeta's `http` format: `METHOD URL`, then `Name: value` header lines and an optional
    /// `@path/to/body` line; targets are separated by blank lines (or start at the next `METHOD URL`
    /// line); lines starting with `#` are comments.
    fn parse_vegeta(&mut self, text: &str, out: &mut Vec<Raw>) -> Result<(), String> {
        let starts_target = |t: &str| {
            t.split_once(|c: char| c.is_ascii_whitespace())
                .is_some_and(|(m, _)| !m.is_empty() && m.bytes().all(|b| b.is_ascii_uppercase()))
        };
        let mut cur: Option<Raw> = None;
        for (n, line) in text.lines().enumerate() {
            let n = n + 1;
            let t = line.trim();
            if t.is_empty() {
                out.extend(cur.take());
                continue;
            }
            if t.starts_with('#') {
                continue;
            }
            if cur.is_none() || starts_target(t) {
                out.extend(cur.take());
                let Some((method, url)) = t.split_once(|c: char| c.is_ascii_whitespace()).filter(|_| starts_target(t)) else {
                    return Err(self.err(n, format!("expected a target line \"METHOD URL\", got {t:?}")));
                };
                let url = url.trim();
                if url.contains(|c: char| c.is_ascii_whitespace()) {
                    return Err(self.err(n, format!("expected a target line \"METHOD URL\", got {t:?}")));
                }
                if out.len() == MAX_ENTRIES {
                    return Err(self.err(n, format!("more than {MAX_ENTRIES} requests")));
                }
                let path = if url.starts_with('/') { url.to_string() } else { self.path_of_url(n, url)? };
                cur = Some(Raw {
                    line: n,
                    method: method.to_string(),
                    path,
                    headers: Vec::new(),
                    body: None,
                    weight: 1.0,
                    label: None,
                });
                continue;
            }
            let Some(raw) = cur.as_mut() else { unreachable!() };
            if raw.body.is_some() {
                return Err(self.err(n, "expected a blank line or the next target after the @body line"));
            }
            if let Some(file) = t.strip_prefix('@') {
                if file.starts_with("<<") {
                    return Err(self.err(n, "inline bodies (@<<) are not supported: put the body in a file"));
                }
                raw.body = Some((self.body_file(n, file.trim())?, Some(file.trim().to_string())));
                continue;
            }
            match t.split_once(':') {
                Some((k, v)) if !k.trim().is_empty() && !v.trim().is_empty() => {
                    raw.headers.push((k.trim().to_string(), v.trim().to_string()))
                }
                _ => return Err(self.err(n, format!("expected a header \"Name: value\" or @body, got {t:?}"))),
            }
        }
        out.extend(cur);
        Ok(())
    }
}

impl RequestSet {
    /// Read and compile a requests file. Body files are relative to the file's directory.
    pub fn load(path: &Path, defaults: &Defaults, pick: Option<PickMode>, seed: u64) -> Result<RequestSet, String> {
        let shown = path.display().to_string();
        let len = std::fs::metadata(path).map_err(|e| format!("cannot read the requests file {shown}: {e}"))?.len();
        if len > MAX_TOTAL_BYTES as u64 {
            return Err(format!("the requests file {shown} has {len} bytes, more than the limit of {MAX_TOTAL_BYTES}"));
        }
        let bytes = std::fs::read(path).map_err(|e| format!("cannot read the requests file {shown}: {e}"))?;
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        RequestSet::parse(&bytes, &shown, &dir, defaults, pick, seed)
    }

    /// Compile the requests in `text` (named `name` in errors; body files relative to `dir`).
    pub fn parse(
        text: &[u8],
        name: &str,
        dir: &Path,
        defaults: &Defaults,
        pick: Option<PickMode>,
        seed: u64,
    ) -> Result<RequestSet, String> {
        let mut ld = Loader {
            name: name.to_string(),
            dir: dir.to_path_buf(),
            defaults,
            total: text.len(),
            files: HashMap::new(),
            hash: fnv(0xcbf2_9ce4_8422_2325, text),
        };
        let text = match std::str::from_utf8(text) {
            Ok(t) => t,
            Err(e) => {
                let line = 1 + text[..e.valid_up_to()].iter().filter(|b| **b == b'\n').count();
                return Err(ld.err(line, "not UTF-8 text"));
            }
        };
        let first = text.lines().map(str::trim).find(|l| !l.is_empty() && !l.starts_with('#'));
        let Some(first) = first else {
            return Err(format!("{name}: no requests in the file (it is empty)"));
        };
        let mut raws = Vec::new();
        if first.starts_with('{') {
            ld.parse_jsonl(text, &mut raws)?;
        } else {
            ld.parse_vegeta(text, &mut raws)?;
        }
        if raws.is_empty() {
            return Err(format!("{name}: no requests in the file"));
        }
        RequestSet::compile(&mut ld, raws, pick, seed)
    }

    fn compile(ld: &mut Loader, raws: Vec<Raw>, pick: Option<PickMode>, seed: u64) -> Result<RequestSet, String> {
        let d = ld.defaults;
        let authority = host_header(d.url);
        // Labels: explicit ones, else METHOD + path template; when the defaults make too many,
        // entries without a label are filed under their method only.
        let mut default_by_method = false;
        let label_of = |r: &Raw, by_method: bool| match &r.label {
            Some(l) => l.clone(),
            None if by_method => r.method.to_ascii_uppercase(),
            None => format!("{} {}", r.method.to_ascii_uppercase(), r.path),
        };
        let distinct = |by_method: bool| {
            let mut seen = std::collections::HashSet::new();
            raws.iter().filter(|r| seen.insert(label_of(r, by_method))).count()
        };
        if distinct(false) > MAX_LABELS {
            default_by_method = true;
        }
        let mut labels: Vec<String> = Vec::new();
        let mut label_ids: HashMap<String, usize> = HashMap::new();
        let mut entries = Vec::with_capacity(raws.len());
        for r in &raws {
            let n = r.line;
            let name = label_of(r, default_by_method);
            let label = match label_ids.get(&name) {
                Some(&id) => id,
                None => {
                    if labels.len() == MAX_LABELS {
                        return Err(ld.err(n, format!("more than {MAX_LABELS} distinct labels: give entries fewer labels")));
                    }
                    labels.push(name.clone());
                    label_ids.insert(name, labels.len() - 1);
                    labels.len() - 1
                }
            };
            entries.push(RequestSet::entry(ld, r, label, &authority)?);
        }
        let weights: Vec<f64> = raws.iter().map(|r| r.weight).collect();
        let uneven = raws.iter().find(|r| r.weight != raws[0].weight);
        let mode = match (pick, uneven) {
            (Some(PickMode::RoundRobin), Some(r)) => {
                return Err(ld.err(
                    r.line,
                    format!(
                        "--pick round-robin ignores weights, but this request has weight {} and line {} has {}: \
                         drop the weights or use --pick weighted",
                        r.weight, raws[0].line, raws[0].weight
                    ),
                ))
            }
            (Some(m), _) => m,
            (None, Some(_)) => PickMode::Weighted,
            (None, None) => PickMode::RoundRobin,
        };
        let alias = (mode == PickMode::Weighted).then(|| Alias::new(&weights));
        let mut fingerprint = fnv(ld.hash, mode.name().as_bytes());
        fingerprint = fnv(fingerprint, &seed.to_le_bytes());
        Ok(RequestSet { entries, labels, mode, alias, seed, authority, fingerprint })
    }

    fn entry(ld: &mut Loader, r: &Raw, label: usize, authority: &str) -> Result<Entry, String> {
        let n = r.line;
        let d = ld.defaults;
        let method = r.method.to_ascii_uppercase();
        if !is_token(&method) {
            return Err(ld.err(n, format!("invalid HTTP method {:?}", r.method)));
        }
        let path = Template::parse(r.path.as_bytes()).map_err(|e| ld.err(n, format!("in the path: {e}")))?;
        if !path.all_bytes(|b| b > b' ' && b != 0x7f) {
            return Err(ld.err(n, format!("the path {:?} has a space or a control character: percent-encode it", r.path)));
        }
        let mut headers = Vec::new();
        for (k, v) in &r.headers {
            if !is_token(k) {
                return Err(ld.err(n, format!("invalid header name {k:?}")));
            }
            let t = Template::parse(v.as_bytes()).map_err(|e| ld.err(n, format!("in header {k}: {e}")))?;
            if !t.all_bytes(|b| b != b'\r' && b != b'\n' && b != 0) {
                return Err(ld.err(n, format!("header {k}: the value has a line break")));
            }
            headers.push((k.clone(), t));
        }
        for (k, v) in d.headers {
            if !r.headers.iter().any(|(h, _)| h.eq_ignore_ascii_case(k)) {
                headers.push((k.clone(), Template::literal(v.as_bytes())));
            }
        }
        let body = match &r.body {
            None => Template::literal(d.body),
            // A body that is not text is sent as is.
            Some((b, _)) if std::str::from_utf8(b).is_err() => Template::literal(b),
            Some((b, file)) => Template::parse(b).map_err(|e| match file {
                Some(f) => ld.err(n, format!("in the body file {f}: {e}")),
                None => ld.err(n, format!("in the body: {e}")),
            })?,
        };
        let body_len = r.body.as_ref().map_or(d.body.len(), |(b, _)| b.len());
        ld.count_body(n, body_len)?;
        let has = |name: &str| headers.iter().any(|(k, _)| k.eq_ignore_ascii_case(name));
        if !body.is_static() && has("content-length") {
            return Err(ld.err(n, "the body has template fields, so Content-Length is computed per request: remove the header"));
        }
        // HTTP/1.1 rendering, as in `HttpTarget::new`.
        let mut h1_head = Template::default();
        h1_head.push_lit(method.as_bytes());
        h1_head.push_lit(b" ");
        h1_head.append(&path);
        h1_head.push_lit(b" HTTP/1.1\r\n");
        if !has("host") {
            h1_head.push_lit(format!("Host: {authority}\r\n").as_bytes());
        }
        for (k, v) in &headers {
            h1_head.push_lit(k.as_bytes());
            h1_head.push_lit(b": ");
            h1_head.append(v);
            h1_head.push_lit(b"\r\n");
        }
        let h1_tail = body.static_bytes().map(|b| {
            let mut tail = Vec::with_capacity(b.len() + 32);
            if (!b.is_empty() || matches!(method.as_str(), "POST" | "PUT" | "PATCH")) && !has("content-length") {
                tail.extend_from_slice(b"Content-Length: ");
                push_u64(&mut tail, b.len() as u64);
                tail.extend_from_slice(b"\r\n");
            }
            tail.extend_from_slice(b"\r\n");
            tail.extend_from_slice(&b);
            tail
        });
        let h1_whole = match (h1_head.static_bytes(), &h1_tail) {
            (Some(mut h), Some(t)) => {
                h.extend_from_slice(t);
                Some(h)
            }
            _ => None,
        };
        Ok(Entry {
            head_request: method == "HEAD",
            method,
            path,
            headers,
            body,
            label,
            h1_head,
            h1_tail,
            h1_whole,
        })
    }

    /// The entry request `seq` sends.
    pub fn pick(&self, seq: u64) -> Pick {
        let entry = match &self.alias {
            Some(a) => a.sample(&mut request_rng(self.seed, PICK_STREAM, seq)),
            None => (seq % self.entries.len() as u64) as usize,
        };
        Pick { entry, label: self.entries[entry].label, seq }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Label names, indexed by label id.
    pub fn labels(&self) -> &[String] {
        &self.labels
    }

    /// The label of an entry.
    pub fn label_of(&self, entry: usize) -> usize {
        self.entries[entry].label
    }

    pub fn mode(&self) -> PickMode {
        self.mode
    }

    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// `host[:port]`, the `Host` header and HTTP/2 `:authority`.
    pub fn authority(&self) -> &str {
        &self.authority
    }

    /// A hash of the file, its bodies, the pick mode and the seed (for the run id).
    pub fn fingerprint(&self) -> u64 {
        self.fingerprint
    }

    /// The methods of the entries, distinct, in file order, comma-separated.
    pub fn methods(&self) -> String {
        let mut seen: Vec<&str> = Vec::new();
        for e in &self.entries {
            if !seen.contains(&e.method.as_str()) {
                seen.push(&e.method);
            }
        }
        seen.join(",")
    }

    /// Does the request get a response without a body (HEAD)?
    pub fn is_head(&self, pick: Pick) -> bool {
        self.entries[pick.entry].head_request
    }

    /// Does any entry have template fields?
    pub fn templated(&self) -> bool {
        self.entries.iter().any(|e| e.h1_whole.is_none())
    }
}

/// A connection's picks: the global request numbers of its requests, in order.
#[derive(Debug)]
pub struct Chooser {
    set: Arc<RequestSet>,
    index: usize,
    count: usize,
    k: u64,
}

impl Chooser {
    /// Schedule lane (connection) `index` of `count`: its `k`-th request is number
    /// [`crate::schedule::request_number`]`(index, count, k)`.
    pub fn new(set: Arc<RequestSet>, index: usize, count: usize) -> Chooser {
        Chooser { set, index, count, k: 0 }
    }

    /// The entry of the connection's next request.
    pub fn next_pick(&mut self) -> Pick {
        let seq = crate::schedule::request_number(self.index, self.count, self.k);
        self.k += 1;
        self.set.pick(seq)
    }

    pub fn set(&self) -> &Arc<RequestSet> {
        &self.set
    }
}

/// A connection's render buffers (reused: no allocation per request once they are big enough).
#[derive(Debug, Default)]
pub struct Renderer {
    buf: Vec<u8>,
    body: Vec<u8>,
    ranges: Vec<Range<usize>>,
}

impl Renderer {
    /// The whole HTTP/1.1 request of `pick`.
    pub fn http1<'a>(&'a mut self, set: &'a RequestSet, pick: Pick) -> &'a [u8] {
        let e = &set.entries[pick.entry];
        if let Some(whole) = &e.h1_whole {
            return whole;
        }
        let mut rng = request_rng(set.seed, TEMPLATE_STREAM, pick.seq);
        self.buf.clear();
        e.h1_head.render(&mut self.buf, pick.seq, &mut rng);
        match &e.h1_tail {
            Some(tail) => self.buf.extend_from_slice(tail),
            None => {
                self.body.clear();
                e.body.render(&mut self.body, pick.seq, &mut rng);
                self.buf.extend_from_slice(b"Content-Length: ");
                push_u64(&mut self.buf, self.body.len() as u64);
                self.buf.extend_from_slice(b"\r\n\r\n");
                self.buf.extend_from_slice(&self.body);
            }
        }
        &self.buf
    }

    /// The parts of `pick`'s request, for protocols that frame them themselves (HTTP/2). The
    /// template fields render to the same values as in [`Renderer::http1`].
    pub fn parts<'a>(&'a mut self, set: &'a RequestSet, pick: Pick) -> Parts<'a> {
        let e = &set.entries[pick.entry];
        let mut rng = request_rng(set.seed, TEMPLATE_STREAM, pick.seq);
        self.buf.clear();
        self.ranges.clear();
        let mut part = |t: &Template, buf: &mut Vec<u8>, ranges: &mut Vec<Range<usize>>| {
            let start = buf.len();
            t.render(buf, pick.seq, &mut rng);
            ranges.push(start..buf.len());
        };
        part(&e.path, &mut self.buf, &mut self.ranges);
        for (_, v) in &e.headers {
            part(v, &mut self.buf, &mut self.ranges);
        }
        part(&e.body, &mut self.buf, &mut self.ranges);
        Parts { set, entry: e, buf: &self.buf, ranges: &self.ranges }
    }
}

/// One request's method, path, headers and body (see [`Renderer::parts`]).
pub struct Parts<'a> {
    set: &'a RequestSet,
    entry: &'a Entry,
    buf: &'a [u8],
    /// Path, each header value, body.
    ranges: &'a [Range<usize>],
}

impl<'a> Parts<'a> {
    pub fn method(&self) -> &'a str {
        &self.entry.method
    }

    /// `host[:port]` of the run's target.
    pub fn authority(&self) -> &'a str {
        &self.set.authority
    }

    /// Path and query.
    pub fn path(&self) -> &'a [u8] {
        &self.buf[self.ranges[0].clone()]
    }

    /// The entry's headers and the command line's (`-H`); no `Host` unless one of them gives it.
    pub fn headers(&self) -> impl Iterator<Item = (&'a str, &'a [u8])> + 'a {
        let (buf, ranges) = (self.buf, self.ranges);
        self.entry.headers.iter().zip(&ranges[1..]).map(move |((k, _), r)| (k.as_str(), &buf[r.clone()]))
    }

    pub fn body(&self) -> &'a [u8] {
        &self.buf[self.ranges[self.ranges.len() - 1].clone()]
    }

    pub fn head_request(&self) -> bool {
        self.entry.head_request
    }

    pub fn label(&self) -> &'a str {
        &self.set.labels[self.entry.label]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url() -> url::Url {
        url::Url::parse("http://127.0.0.1:8080/base").unwrap()
    }

    fn set_with(text: &str, pick: Option<PickMode>, seed: u64, headers: &[(String, String)]) -> Result<RequestSet, String> {
        let u = url();
        let d = Defaults { url: &u, method: "GET", headers, body: b"" };
        RequestSet::parse(text.as_bytes(), "reqs", Path::new("."), &d, pick, seed)
    }

    fn set(text: &str) -> RequestSet {
        set_with(text, None, 1, &[]).unwrap()
    }

    fn render(set: &RequestSet, seq: u64) -> String {
        let mut r = Renderer::default();
        String::from_utf8(r.http1(set, set.pick(seq)).to_vec()).unwrap()
    }

    fn body_of(req: &str) -> &str {
        req.split_once("\r\n\r\n").unwrap().1
    }

    #[test]
    fn weighted_picks_follow_the_weights_and_repeat_with_the_seed() {
        let text = r#"{"path":"/a","weight":1}
{"path":"/b","weight":2}
{"path":"/c","weight":7}
{"path":"/d","weight":0.5}"#;
        let s = set_with(text, None, 42, &[]).unwrap();
        assert_eq!(s.mode(), PickMode::Weighted);
        let picks: Vec<usize> = (0..10_000).map(|q| s.pick(q).entry).collect();
        let total = 10.5;
        for (i, w) in [1.0, 2.0, 7.0, 0.5].iter().enumerate() {
            let share = picks.iter().filter(|p| **p == i).count() as f64 / 10_000.0;
            assert!((share - w / total).abs() < 0.02, "entry {i}: share {share} vs {}", w / total);
        }
        let again = set_with(text, None, 42, &[]).unwrap();
        assert_eq!(picks, (0..10_000).map(|q| again.pick(q).entry).collect::<Vec<_>>());
        let other = set_with(text, None, 43, &[]).unwrap();
        assert_ne!(picks, (0..10_000).map(|q| other.pick(q).entry).collect::<Vec<_>>());
    }

    #[test]
    fn round_robin_by_request_number() {
        let s = set("{\"path\":\"/a\"}\n{\"path\":\"/b\"}\n{\"path\":\"/c\"}\n");
        assert_eq!(s.mode(), PickMode::RoundRobin);
        assert_eq!((0..7).map(|q| s.pick(q).entry).collect::<Vec<_>>(), vec![0, 1, 2, 0, 1, 2, 0]);
        // Two connections: their requests together are the round-robin order.
        let s = Arc::new(s);
        let (mut c0, mut c1) = (Chooser::new(s.clone(), 0, 2), Chooser::new(s.clone(), 1, 2));
        let got: Vec<(u64, usize)> = (0..3).flat_map(|_| [c0.next_pick(), c1.next_pick()]).map(|p| (p.seq, p.entry)).collect();
        assert_eq!(got, vec![(0, 0), (1, 1), (2, 2), (3, 0), (4, 1), (5, 2)]);
    }

    #[test]
    fn static_entries_render_once_like_http_target() {
        let s = set_with(
            r#"{"method":"POST","path":"/x?a=1","headers":{"X-A":"1"},"body":"hello","label":"post"}"#,
            None,
            1,
            &[("X-Default".into(), "d".into()), ("x-a".into(), "overridden".into())],
        )
        .unwrap();
        assert_eq!(
            render(&s, 0),
            "POST /x?a=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nX-A: 1\r\nX-Default: d\r\nContent-Length: 5\r\n\r\nhello"
        );
        assert!(!s.templated());
        assert_eq!(s.labels(), ["post"]);
    }

    #[test]
    fn template_fields_render() {
        let s = set(r#"{"method":"PUT","path":"/u/{{seq}}?v={{rand_int -3 3}}","headers":{"X-Id":"{{uuid}}"},"body":"{\"c\":\"{{pick red|green| blue }}\",\"lit\":\"{{\"{{\"}}\"}"}"#);
        assert!(s.templated());
        let mut seen_ints = std::collections::BTreeSet::new();
        let mut seen_picks = std::collections::BTreeSet::new();
        for q in 0..2000 {
            let req = render(&s, q);
            let line = req.lines().next().unwrap();
            let rest = line.strip_prefix(&format!("PUT /u/{q}?v=")).unwrap_or_else(|| panic!("{line}"));
            let v: i64 = rest.strip_suffix(" HTTP/1.1").unwrap().parse().unwrap();
            assert!((-3..=3).contains(&v));
            seen_ints.insert(v);
            let id = req.lines().find_map(|l| l.strip_prefix("X-Id: ")).unwrap();
            check_uuid(id);
            let body = body_of(&req);
            let len: usize = req.lines().find_map(|l| l.strip_prefix("Content-Length: ")).unwrap().parse().unwrap();
            assert_eq!(len, body.len(), "Content-Length per request");
            let v: serde_json::Value = serde_json::from_str(body).unwrap();
            seen_picks.insert(v["c"].as_str().unwrap().to_string());
            assert_eq!(v["lit"], "{{");
        }
        assert_eq!(seen_ints.len(), 7, "both ends of rand_int are reached: {seen_ints:?}");
        assert_eq!(seen_picks.into_iter().collect::<Vec<_>>(), vec!["blue", "green", "red"]);
        // Same request number, same rendering.
        assert_eq!(render(&s, 17), render(&s, 17));
        assert_ne!(render(&s, 17), render(&s, 18));
    }

    fn check_uuid(id: &str) {
        assert_eq!(id.len(), 36, "{id}");
        for (i, c) in id.char_indices() {
            if matches!(i, 8 | 13 | 18 | 23) {
                assert_eq!(c, '-', "{id}");
            } else {
                assert!(c.is_ascii_hexdigit() && !c.is_ascii_uppercase(), "{id}");
            }
        }
        assert_eq!(&id[14..15], "4", "version 4: {id}");
        assert!(matches!(&id[19..20], "8" | "9" | "a" | "b"), "variant: {id}");
    }

    #[test]
    fn uuids_differ_and_parts_match_http1() {
        let s = set(r#"{"method":"POST","path":"/p/{{seq}}","headers":{"X-R":"{{rand_int 0 1000000}}"},"body":"{{uuid}}"}"#);
        let mut ids = std::collections::HashSet::new();
        for q in 0..1000 {
            let req = render(&s, q);
            let id = body_of(&req).to_string();
            check_uuid(&id);
            assert!(ids.insert(id));
            let mut r = Renderer::default();
            let p = r.parts(&s, s.pick(q));
            assert_eq!(p.method(), "POST");
            assert_eq!(p.authority(), "127.0.0.1:8080");
            assert_eq!(p.path(), format!("/p/{q}").as_bytes());
            assert_eq!(p.body(), body_of(&req).as_bytes());
            let hdrs: Vec<(&str, &[u8])> = p.headers().collect();
            assert_eq!(hdrs.len(), 1);
            assert!(req.contains(&format!("X-R: {}\r\n", std::str::from_utf8(hdrs[0].1).unwrap())));
        }
    }

    #[test]
    fn rendering_reuses_the_buffers() {
        let s = set(r#"{"method":"POST","path":"/{{seq}}","body":"{{uuid}} {{pick a|bb|ccc}}"}"#);
        let mut r = Renderer::default();
        let _ = r.http1(&s, s.pick(u64::MAX / 2));
        let (cap, ptr) = (r.buf.capacity(), r.buf.as_ptr());
        for q in 0..10_000 {
            let _ = r.http1(&s, s.pick(q));
        }
        assert_eq!((r.buf.capacity(), r.buf.as_ptr()), (cap, ptr), "no reallocation");
    }

    #[test]
    fn labels_default_to_method_and_path() {
        let s = set("{\"path\":\"/a/{{seq}}\"}\n{\"method\":\"post\",\"path\":\"/a/{{seq}}\"}\n{\"path\":\"/a/{{seq}}\"}\n");
        assert_eq!(s.labels(), ["GET /a/{{seq}}", "POST /a/{{seq}}"]);
        assert_eq!((0..3).map(|q| s.pick(q).label).collect::<Vec<_>>(), vec![0, 1, 0]);
        assert_eq!(s.methods(), "GET,POST");
        // Too many distinct paths: entries without a label are filed under their method.
        let many: String = (0..150).map(|i| format!("{{\"path\":\"/p{i}\"}}\n")).collect::<String>() + "{\"path\":\"/x\",\"label\":\"x\"}\n";
        let s = set(&many);
        assert_eq!(s.labels(), ["GET", "x"]);
        let too_many: String = (0..150).map(|i| format!("{{\"path\":\"/\",\"label\":\"l{i}\"}}\n")).collect();
        let e = set_with(&too_many, None, 1, &[]).unwrap_err();
        assert!(e.contains("line 101") && e.contains("distinct labels"), "{e}");
    }

    #[test]
    fn vegeta_targets() {
        let dir = std::env::temp_dir().join(format!("perfkit-requests-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("b.json"), "{\"n\":{{seq}}}").unwrap();
        let text = "# a comment\nGET http://127.0.0.1:8080/one\nX-A: 1\n\nPOST http://127.0.0.1:8080/two?q=1\nContent-Type: application/json\n@b.json\nHEAD /three\n";
        let u = url();
        let d = Defaults { url: &u, method: "GET", headers: &[], body: b"" };
        let s = RequestSet::parse(text.as_bytes(), "t", &dir, &d, None, 1).unwrap();
        assert_eq!(s.len(), 3);
        assert_eq!(s.labels(), ["GET /one", "POST /two?q=1", "HEAD /three"]);
        assert_eq!(render(&s, 0), "GET /one HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nX-A: 1\r\n\r\n");
        assert_eq!(
            render(&s, 1),
            "POST /two?q=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n{\"n\":1}"
        );
        assert!(s.is_head(s.pick(2)));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn bad_templates() {
        for (t, needle) in [
            ("{{nope}}", "unknown field \"nope\""),
            ("{{seq", "unclosed"),
            ("{{}}", "empty field"),
            ("{{seq 1}}", "takes no arguments"),
            ("{{rand_int 1}}", "two integers"),
            ("{{rand_int a 2}}", "not an integer"),
            ("{{rand_int 5 1}}", "A <= B"),
            ("{{pick}}", "needs choices"),
        ] {
            let e = Template::parse(t.as_bytes()).unwrap_err();
            assert!(e.contains(needle), "{t}: {e}");
        }
        let t = Template::parse(b"{{ rand_int -9223372036854775808 9223372036854775807 }}").unwrap();
        let mut out = Vec::new();
        t.render(&mut out, 0, &mut request_rng(1, 2, 3));
        assert!(std::str::from_utf8(&out).unwrap().parse::<i64>().is_ok());
    }

    #[test]
    fn alias_table_is_exact() {
        // Every column's probability mass adds up to the weights.
        let w = [3.0, 1.0, 0.25, 5.0, 0.75];
        let a = Alias::new(&w);
        let n = w.len() as f64;
        let mut mass = [0.0; 5];
        for i in 0..w.len() {
            mass[i] += a.prob[i] / n;
            mass[a.alias[i] as usize] += (1.0 - a.prob[i]) / n;
        }
        let sum: f64 = w.iter().sum();
        for i in 0..w.len() {
            assert!((mass[i] - w[i] / sum).abs() < 1e-12, "{i}: {mass:?}");
        }
    }
}
