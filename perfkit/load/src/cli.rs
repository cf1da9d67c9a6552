//! Command line: wrk2-style flags, validation into a [`Config`], and the program's main.

use std::io::Write;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;

use crate::{Config, LoadError, Mode};

/// Constant-rate (wrk2 model) HTTP/1.1 and WebSocket JSON-RPC load generator.
#[derive(Parser, Debug)]
#[command(name = "perfkit-load", version, about, long_about = None)]
pub struct Args {
    /// Number of threads to use
    #[arg(short = 't', long = "threads", default_value_t = 2)]
    pub threads: usize,
    /// Connections to keep open (total, spread over the threads)
    #[arg(short = 'c', long = "connections", default_value_t = 10)]
    pub connections: usize,
    /// Duration of the measured run, e.g. 10s, 2m, 500ms
    #[arg(short = 'd', long = "duration", default_value = "10s")]
    pub duration: String,
    /// Constant throughput in requests/s over all connections
    #[arg(short = 'R', long = "rate", allow_negative_numbers = true)]
    pub rate: Option<f64>,
    /// Closed loop: send as fast as possible (one request in flight per connection)
    #[arg(long = "max")]
    pub max: bool,
    /// Add a header to the request, "Name: value" (repeatable)
    #[arg(short = 'H', long = "header")]
    pub headers: Vec<String>,
    /// Print the corrected latency distribution and percentile spectrum
    #[arg(short = 'L', long = "latency")]
    pub latency: bool,
    /// Print the uncorrected latency distribution and percentile spectrum
    #[arg(short = 'U', long = "u_latency")]
    pub u_latency: bool,
    /// Socket/request timeout, e.g. 2s
    #[arg(long = "timeout", default_value = "2s")]
    pub timeout: String,
    /// HTTP method
    #[arg(long = "method", default_value = "GET")]
    pub method: String,
    /// Request body: @FILE reads a file, anything else is sent as is. With --ws: the JSON-RPC call template
    #[arg(long = "body")]
    pub body: Option<String>,
    /// Warm-up before the measured duration (load runs, nothing is recorded)
    #[arg(long = "warmup", default_value = "0s")]
    pub warmup: String,
    /// Write the result as JSON to FILE
    #[arg(long = "json", value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Serve live Prometheus metrics on HOST:PORT during the run
    #[arg(long = "metrics-addr", value_name = "HOST:PORT")]
    pub metrics_addr: Option<String>,
    /// WebSocket JSON-RPC 2.0 mode (ws:// URL)
    #[arg(long = "ws")]
    pub ws: bool,
    /// Scenario name, used as the `scenario` label of the live metrics and in the JSON
    #[arg(long = "scenario", default_value = "default")]
    pub scenario: String,
    /// Target URL (http://host[:port]/path, or ws://... with --ws)
    pub url: String,
}

/// Parse a duration: a number with an optional unit `us`, `ms`, `s`, `m`, `h` (default seconds).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num.parse().map_err(|_| format!("invalid duration {text:?} (use e.g. 10s, 500ms, 2m)"))?;
    let scale = match unit {
        "" | "s" => 1.0,
        "us" => 1e-6,
        "ms" => 1e-3,
        "m" => 60.0,
        "h" => 3600.0,
        _ => return Err(format!("invalid duration unit in {text:?} (use us, ms, s, m or h)")),
    };
    let secs = v * scale;
    if !secs.is_finite() || secs > 1e9 {
        return Err(format!("duration {text:?} is out of range"));
    }
    Ok(Duration::from_secs_f64(secs))
}

fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Turn parsed flags into a validated [`Config`].
pub fn validate(args: &Args) -> Result<Config, String> {
    let url = url::Url::parse(&args.url).map_err(|e| format!("invalid URL {:?}: {e}", args.url))?;
    match (url.scheme(), args.ws) {
        ("http", false) | ("ws", true) => {}
        ("https", _) | ("wss", _) => return Err(format!("TLS is not supported: use http:// or ws:// (got {})", args.url)),
        ("http", true) => return Err("--ws needs a ws:// URL".into()),
        ("ws", false) => return Err("a ws:// URL needs --ws".into()),
        (s, _) => return Err(format!("unsupported URL scheme {s:?}: use http:// (or ws:// with --ws)")),
    }
    if url.host_str().is_none_or(|h| h.is_empty()) {
        return Err(format!("the URL {:?} has no host", args.url));
    }
    if args.threads == 0 {
        return Err("threads (-t) must be at least 1".into());
    }
    if args.connections == 0 {
        return Err("connections (-c) must be at least 1".into());
    }
    if args.connections < args.threads {
        return Err(format!(
            "connections (-c {}) must be >= threads (-t {})",
            args.connections, args.threads
        ));
    }
    let rate = match (args.rate, args.max) {
        (Some(_), true) => return Err("give either a rate (-R) or --max, not both".into()),
        (None, false) => return Err("a rate is required: -R/--rate REQ_PER_SEC (or --max for closed loop)".into()),
        (None, true) => None,
        (Some(r), false) => {
            if !(r.is_finite() && r > 0.0) {
                return Err(format!("rate (-R) must be a positive number, got {r}"));
            }
            Some(r)
        }
    };
    let duration = parse_duration(&args.duration)?;
    if duration.is_zero() {
        return Err("duration (-d) must be > 0".into());
    }
    let warmup = parse_duration(&args.warmup)?;
    let timeout = parse_duration(&args.timeout)?;
    if timeout.is_zero() {
        return Err("timeout must be > 0".into());
    }
    let mut headers = Vec::new();
    for h in &args.headers {
        let Some((k, v)) = h.split_once(':') else {
            return Err(format!("invalid header {h:?}: use \"Name: value\""));
        };
        let (k, v) = (k.trim(), v.trim());
        if !is_token(k) || v.contains(['\r', '\n']) {
            return Err(format!("invalid header {h:?}"));
        }
        headers.push((k.to_string(), v.to_string()));
    }
    if !is_token(&args.method) {
        return Err(format!("invalid HTTP method {:?}", args.method));
    }
    let body = match &args.body {
        None => Vec::new(),
        Some(b) => match b.strip_prefix('@') {
            Some(path) => std::fs::read(path).map_err(|e| format!("cannot read the body file {path:?}: {e}"))?,
            None => b.clone().into_bytes(),
        },
    };
    let mode = if args.ws { Mode::Ws } else { Mode::Http };
    if mode == Mode::Ws && !body.is_empty() {
        let text = std::str::from_utf8(&body).map_err(|_| "the JSON-RPC template is not UTF-8".to_string())?;
        crate::ws::RpcTemplate::parse(text)?;
    }
    let metrics_addr = match &args.metrics_addr {
        None => None,
        Some(a) => Some(resolve_addr(a).map_err(|e| format!("invalid --metrics-addr {a:?}: {e}"))?),
    };
    Ok(Config {
        url,
        mode,
        threads: args.threads,
        connections: args.connections,
        duration,
        warmup,
        rate,
        headers,
        method: args.method.to_ascii_uppercase(),
        body,
        timeout,
        scenario: args.scenario.clone(),
        metrics_addr,
    })
}

fn resolve_addr(a: &str) -> Result<SocketAddr, String> {
    if let Ok(sa) = a.parse::<SocketAddr>() {
        return Ok(sa);
    }
    a.to_socket_addrs()
        .map_err(|e| format!("{e} (use HOST:PORT)"))?
        .next()
        .ok_or_else(|| "resolves to no address".to_string())
}

/// The whole program: parse `argv`, run, print. Returns the exit status
/// (0 ok, 1 setup/run failure, 2 bad flags).
pub fn main_with<I, T>(argv: I, out: &mut dyn Write, err: &mut dyn Write) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let args = match Args::try_parse_from(argv) {
        Ok(a) => a,
        Err(e) => {
            let text = e.render().to_string();
            return if e.use_stderr() {
                let _ = write!(err, "{text}");
                2
            } else {
                let _ = write!(out, "{text}");
                0
            };
        }
    };
    let cfg = match validate(&args) {
        Ok(c) => c,
        Err(m) => {
            let _ = writeln!(err, "perfkit-load: error: {m}");
            return 2;
        }
    };
    // Fail on an unwritable JSON path before any load.
    if let Some(p) = &args.json {
        if let Err(e) = std::fs::File::create(p) {
            let _ = writeln!(err, "perfkit-load: error: cannot write {}: {e}", p.display());
            return 2;
        }
    }
    let _ = writeln!(
        out,
        "Running {} test @ {}{}",
        humantime(cfg.duration),
        cfg.url,
        if cfg.warmup.is_zero() { String::new() } else { format!(" (after {} warm-up)", humantime(cfg.warmup)) }
    );
    let _ = writeln!(out, "  {} threads and {} connections", cfg.threads, cfg.connections);
    let _ = out.flush();
    let output = match crate::run(&cfg) {
        Ok(o) => o,
        Err(e) => {
            let _ = writeln!(err, "perfkit-load: error: {e}");
            return match e {
                LoadError::Usage(_) => 2,
                LoadError::Setup(_) => 1,
            };
        }
    };
    let text = crate::report::render_text(&output.result, &output.merged, args.latency, args.u_latency);
    let _ = write!(out, "{text}");
    if let Some(p) = &args.json {
        let json = serde_json::to_string_pretty(&output.result).expect("serializable");
        if let Err(e) = std::fs::write(p, json + "\n") {
            let _ = writeln!(err, "perfkit-load: error: cannot write {}: {e}", p.display());
            return 1;
        }
    }
    0
}

fn humantime(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s >= 60.0 && s.fract() == 0.0 && (s as u64) % 60 == 0 {
        format!("{}m", s as u64 / 60)
    } else if s.fract() == 0.0 {
        format!("{}s", s as u64)
    } else {
        format!("{}ms", d.as_millis())
    }
}
