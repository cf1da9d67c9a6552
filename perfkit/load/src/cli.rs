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
    /// Number of threads to use [default: the CPUs this process may use, at most one per connection]
    #[arg(short = 't', long = "threads")]
    pub threads: Option<usize>,
    /// Connections to keep open (total, spread over the threads)
    #[arg(short = 'c', long = "connections", default_value_t = 10)]
    pub connections: usize,
    /// Duration of the measured run, e.g. 10s, 2m, 500ms [default: 10s]
    #[arg(short = 'd', long = "duration")]
    pub duration: Option<String>,
    /// Constant throughput in requests/s over all connections
    #[arg(short = 'R', long = "rate", allow_negative_numbers = true)]
    pub rate: Option<f64>,
    /// Closed loop: send as fast as possible (one request in flight per connection)
    #[arg(long = "max")]
    pub max: bool,
    /// Rate profile instead of -R/-d: RATE@DURATION steps and FROM..TO@DURATION ramps, e.g. 1000@10s,1000..5000@30s
    #[arg(long = "stages")]
    pub stages: Option<String>,
    /// How requests arrive: constant (evenly spaced, wrk2) or poisson (seeded, see --seed)
    #[arg(long = "arrivals", default_value = "constant", value_parser = ["constant", "poisson"])]
    pub arrivals: String,
    /// Seed of the Poisson arrivals and of the --requests picks and template fields (same seed, same schedule and requests)
    #[arg(long = "seed", default_value_t = 1)]
    pub seed: u64,
    /// After the end, wait this long for answers still in flight, e.g. 2s
    #[arg(long = "drain", default_value = "0s")]
    pub drain: String,
    /// Do not record unfinished requests in the corrected histogram (they are still counted)
    #[arg(long = "no-unfinished-latency")]
    pub no_unfinished_latency: bool,
    /// Width of the time-series intervals in the JSON and the --hdr-log
    #[arg(long = "interval", default_value = "1s")]
    pub interval: String,
    /// Write the corrected latency per interval as an HdrHistogram interval log to FILE
    #[arg(long = "hdr-log", value_name = "FILE")]
    pub hdr_log: Option<PathBuf>,
    /// Pass/fail check, e.g. 'p99<5ms', 'errors<0.1%', 'rate>=990', rate_held (repeatable; exit 3 on failure)
    #[arg(long = "threshold", value_name = "EXPR")]
    pub thresholds: Vec<String>,
    /// Send lateness p99 above this marks the rate as not held
    #[arg(long = "lateness-limit", default_value = "10ms")]
    pub lateness_limit: String,
    /// Run share I of N of one logical run (connections j with j % N == I), e.g. 0/2
    #[arg(long = "segment", value_name = "I/N")]
    pub segment: Option<String>,
    /// Start the schedule at this wall-clock time (Unix seconds), to align segments on several hosts
    #[arg(long = "start-at", value_name = "UNIX_TIME")]
    pub start_at: Option<f64>,
    /// TLS: accept any server certificate (the connection is encrypted, not authenticated)
    #[arg(short = 'k', long = "insecure")]
    pub insecure: bool,
    /// TLS: trust the CA certificates in this PEM file instead of the built-in web roots
    #[arg(long = "cacert", value_name = "FILE")]
    pub cacert: Option<PathBuf>,
    /// TLS: client certificate chain (PEM), with --key
    #[arg(long = "cert", value_name = "FILE", requires = "key")]
    pub cert: Option<PathBuf>,
    /// TLS: client private key (PEM), with --cert
    #[arg(long = "key", value_name = "FILE", requires = "cert")]
    pub key: Option<PathBuf>,
    /// TLS: server name to send (SNI) and verify, instead of the URL's host
    #[arg(long = "server-name", value_name = "NAME")]
    pub server_name: Option<String>,
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
    /// Vary the requests: JSON Lines (method, url or path, headers, body or body_file, weight, label) or vegeta targets FILE
    #[arg(long = "requests", value_name = "FILE")]
    pub requests: Option<PathBuf>,
    /// How --requests entries are picked [default: round-robin when all weights are equal, else weighted]
    #[arg(long = "pick", value_parser = ["round-robin", "weighted"])]
    pub pick: Option<String>,
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
    /// HTTP/2: prior knowledge over http://, ALPN h2 over https://
    #[arg(long = "h2")]
    pub h2: bool,
    /// HTTP/2: concurrent streams per connection, each with its own schedule (one request in flight per stream)
    #[arg(long = "streams", value_name = "N", default_value_t = 1)]
    pub streams: usize,
    /// HTTP/2: initial stream flow-control window in bytes, k/m suffixes for KiB/MiB [default: 65535]
    #[arg(long = "h2-window", value_name = "BYTES")]
    pub h2_window: Option<String>,
    /// HTTP/2: connection flow-control window in bytes, k/m suffixes for KiB/MiB [default: 65535]
    #[arg(long = "h2-conn-window", value_name = "BYTES")]
    pub h2_conn_window: Option<String>,
    /// Scenario name, used as the `scenario` label of the live metrics and in the JSON
    #[arg(long = "scenario", default_value = "default")]
    pub scenario: String,
    /// Target URL (http:// or https://host[:port]/path, or ws://, wss://... with --ws)
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
        ("http" | "https", false) | ("ws" | "wss", true) => {}
        ("http" | "https", true) => return Err("--ws needs a ws:// or wss:// URL".into()),
        ("ws" | "wss", false) => return Err("a ws:// or wss:// URL needs --ws".into()),
        (s, _) => return Err(format!("unsupported URL scheme {s:?}: use http:// or https:// (or ws://, wss:// with --ws)")),
    }
    let tls = matches!(url.scheme(), "https" | "wss").then(|| crate::transport::TlsOptions {
        insecure: args.insecure,
        cacert: args.cacert.clone(),
        client_cert: args.cert.clone().zip(args.key.clone()),
        server_name: args.server_name.clone(),
        alpn: Vec::new(),
    });
    if tls.is_none() && (args.insecure || args.cacert.is_some() || args.cert.is_some() || args.server_name.is_some()) {
        return Err("TLS flags (--insecure, --cacert, --cert, --key, --server-name) need an https:// or wss:// URL".into());
    }
    if let Some(t) = &tls {
        // Bad files are reported now, before any connection.
        crate::transport::client_config(t)?;
    }
    if url.host_str().is_none_or(|h| h.is_empty()) {
        return Err(format!("the URL {:?} has no host", args.url));
    }
    let segment = args.segment.as_deref().map(crate::schedule::parse_segment).transpose()?.unwrap_or((0, 1));
    let mine = crate::schedule::connections_of_segment(segment.0, segment.1, args.connections).len();
    let threads = args.threads.unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, |n| n.get()).min(mine).max(1)
    });
    if threads == 0 {
        return Err("threads (-t) must be at least 1".into());
    }
    if args.connections == 0 {
        return Err("connections (-c) must be at least 1".into());
    }
    if args.connections < threads {
        return Err(format!(
            "connections (-c {}) must be >= threads (-t {})",
            args.connections, threads
        ));
    }
    let stages = args.stages.as_deref().map(crate::schedule::parse_stages).transpose()?;
    let rate = match (args.rate, args.max, &stages) {
        (_, _, Some(_)) if args.rate.is_some() || args.max || args.duration.is_some() => {
            return Err("--stages replaces -R, --max and -d: give one or the other".into())
        }
        (None, false, Some(_)) => None,
        (Some(_), true, _) => return Err("give either a rate (-R) or --max, not both".into()),
        (None, false, None) => {
            return Err("a rate is required: -R/--rate REQ_PER_SEC (or --max for closed loop, or --stages)".into())
        }
        (None, true, _) => None,
        (Some(r), false, _) => {
            if !(r.is_finite() && r > 0.0) {
                return Err(format!("rate (-R) must be a positive number, got {r}"));
            }
            Some(r)
        }
    };
    let duration = match &stages {
        Some(st) => Duration::from_secs_f64(st.iter().map(|s| s.duration).sum()),
        None => parse_duration(args.duration.as_deref().unwrap_or("10s"))?,
    };
    if duration.is_zero() {
        return Err("duration (-d) must be > 0".into());
    }
    if args.max && args.arrivals == "poisson" {
        return Err("--arrivals poisson needs a rate (-R or --stages), not --max".into());
    }
    if args.connections < segment.1 {
        return Err(format!("connections (-c {}) must be >= the segment count {}", args.connections, segment.1));
    }
    if mine < threads {
        return Err(format!(
            "connections (-c {}) must be >= threads (-t {}) in each segment (this one runs {mine})",
            args.connections, threads
        ));
    }
    if let Some(t) = args.start_at {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_secs_f64();
        if !t.is_finite() || t < now - 1.0 {
            return Err(format!("--start-at {t} is in the past (now is {now:.3})"));
        }
        if t > now + 86_400.0 {
            return Err(format!("--start-at {t} is more than a day away"));
        }
    }
    for t in &args.thresholds {
        crate::thresholds::parse(t)?;
    }
    let drain = parse_duration(&args.drain)?;
    let interval = parse_duration(&args.interval)?;
    if interval < Duration::from_millis(1) {
        return Err("--interval must be at least 1ms".into());
    }
    let lateness_limit = parse_duration(&args.lateness_limit)?;
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
    let requests = match &args.requests {
        None if args.pick.is_some() => return Err("--pick needs --requests".into()),
        None => None,
        Some(_) if args.ws => {
            return Err("--requests is for HTTP, not --ws (each JSON-RPC call already gets its own id)".into())
        }
        Some(path) => {
            let pick = args.pick.as_deref().map(crate::requests::PickMode::parse).transpose()?;
            let method = args.method.to_ascii_uppercase();
            let defaults = crate::requests::Defaults { url: &url, method: &method, headers: &headers, body: &body };
            Some(std::sync::Arc::new(crate::requests::RequestSet::load(path, &defaults, pick, args.seed)?))
        }
    };
    let h2_window = args.h2_window.as_deref().map(|w| crate::h2conn::parse_window("--h2-window", w)).transpose()?;
    let h2_conn_window =
        args.h2_conn_window.as_deref().map(|w| crate::h2conn::parse_window("--h2-conn-window", w)).transpose()?;
    crate::h2conn::check(args.h2, args.ws, args.streams, [h2_window, h2_conn_window])?;
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
        threads,
        connections: args.connections,
        duration,
        warmup,
        rate,
        stages,
        arrivals: match args.arrivals.as_str() {
            "poisson" => crate::schedule::Arrivals::Poisson { seed: args.seed },
            _ => crate::schedule::Arrivals::Constant,
        },
        headers,
        method: args.method.to_ascii_uppercase(),
        body,
        timeout,
        drain,
        record_unfinished: !args.no_unfinished_latency,
        interval,
        lateness_limit,
        segment,
        start_at: args.start_at,
        tls,
        scenario: args.scenario.clone(),
        metrics_addr,
        requests,
        h2: args.h2,
        streams: args.streams,
        h2_window,
        h2_conn_window,
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

/// `perfkit-load merge`: add the results of the segments of one run.
#[derive(Parser, Debug)]
#[command(name = "perfkit-load merge", about = "Add the --json results of the segments of one run (lossless)")]
pub struct MergeArgs {
    /// Result files written with --json by the segments of one run
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Write the merged result as JSON to FILE
    #[arg(long = "json", value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write the merged interval log to FILE
    #[arg(long = "hdr-log", value_name = "FILE")]
    pub hdr_log: Option<PathBuf>,
    /// Pass/fail check on the merged result (repeatable; exit 3 on failure)
    #[arg(long = "threshold", value_name = "EXPR")]
    pub thresholds: Vec<String>,
    /// Print the corrected latency distribution and percentile spectrum
    #[arg(short = 'L', long = "latency")]
    pub latency: bool,
    /// Print the uncorrected latency distribution and percentile spectrum
    #[arg(short = 'U', long = "u_latency")]
    pub u_latency: bool,
}

/// Where the result goes after a run or a merge.
struct Outputs<'a> {
    json: Option<&'a PathBuf>,
    hdr_log: Option<&'a PathBuf>,
    thresholds: &'a [String],
    latency: bool,
    u_latency: bool,
}

/// Parse flags with clap; `Err(code)` when it printed help, the version or an error.
fn parse_flags<P: Parser>(argv: Vec<std::ffi::OsString>, out: &mut dyn Write, err: &mut dyn Write) -> Result<P, i32> {
    P::try_parse_from(argv).map_err(|e| {
        let text = e.render().to_string();
        if e.use_stderr() {
            let _ = write!(err, "{text}");
            2
        } else {
            let _ = write!(out, "{text}");
            0
        }
    })
}

/// Fail on an output path that can't be written before any load.
fn check_writable(paths: &[Option<&PathBuf>]) -> Result<(), String> {
    for p in paths.iter().flatten() {
        std::fs::File::create(p).map_err(|e| format!("cannot write {}: {e}", p.display()))?;
    }
    Ok(())
}

/// Check the thresholds, print the report, write the files. Returns the exit status.
fn finish(mut result: crate::report::RunResult, rec: &crate::recording::Recorder, o: &Outputs, out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    let parsed: Vec<_> = o.thresholds.iter().map(|t| crate::thresholds::parse(t).expect("validated")).collect();
    result.thresholds = crate::thresholds::evaluate(&parsed, &result);
    let text = crate::report::render_text(&result, rec, o.latency, o.u_latency);
    let _ = write!(out, "{text}");
    if let Some(p) = o.json {
        let json = serde_json::to_string_pretty(&result).expect("serializable");
        if let Err(e) = std::fs::write(p, json + "\n") {
            let _ = writeln!(err, "perfkit-load: error: cannot write {}: {e}", p.display());
            return 1;
        }
    }
    if let Some(p) = o.hdr_log {
        let written = std::fs::File::create(p).and_then(|mut f| crate::report::write_hdr_log(&result, rec, &mut f));
        if let Err(e) = written {
            let _ = writeln!(err, "perfkit-load: error: cannot write {}: {e}", p.display());
            return 1;
        }
    }
    for w in &result.warnings {
        let _ = writeln!(err, "perfkit-load: warning: {w}");
    }
    if result.thresholds.iter().any(|t| !t.passed) {
        let failed: Vec<&str> = result.thresholds.iter().filter(|t| !t.passed).map(|t| t.expr.as_str()).collect();
        let _ = writeln!(err, "perfkit-load: thresholds failed: {}", failed.join(", "));
        return 3;
    }
    0
}

fn merge_main(argv: Vec<std::ffi::OsString>, out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    let args: MergeArgs = match parse_flags(argv, out, err) {
        Ok(a) => a,
        Err(code) => return code,
    };
    let merged = (|| {
        for t in &args.thresholds {
            crate::thresholds::parse(t)?;
        }
        check_writable(&[args.json.as_ref(), args.hdr_log.as_ref()])?;
        crate::merge::merge_results(&crate::merge::read_results(&args.files)?)
    })();
    let (result, rec) = match merged {
        Ok(m) => m,
        Err(m) => {
            let _ = writeln!(err, "perfkit-load merge: error: {m}");
            return 2;
        }
    };
    let _ = writeln!(
        out,
        "Merged {} results of run {} (segments {:?} of {})",
        args.files.len(),
        result.info.run_id,
        result.info.segment.index,
        result.info.segment.count
    );
    let o = Outputs {
        json: args.json.as_ref(),
        hdr_log: args.hdr_log.as_ref(),
        thresholds: &args.thresholds,
        latency: args.latency,
        u_latency: args.u_latency,
    };
    finish(result, &rec, &o, out, err)
}

/// The whole program: parse `argv`, run (or `merge`), print. Returns the exit status
/// (0 ok, 1 setup/run failure, 2 bad flags, 3 a threshold failed).
pub fn main_with<I, T>(argv: I, out: &mut dyn Write, err: &mut dyn Write) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let argv: Vec<std::ffi::OsString> = argv.into_iter().map(Into::into).collect();
    if argv.get(1).is_some_and(|a| a == "merge") {
        return merge_main(argv[1..].to_vec(), out, err);
    }
    let args: Args = match parse_flags(argv, out, err) {
        Ok(a) => a,
        Err(code) => return code,
    };
    let cfg = match validate(&args).and_then(|c| check_writable(&[args.json.as_ref(), args.hdr_log.as_ref()]).map(|_| c)) {
        Ok(c) => c,
        Err(m) => {
            let _ = writeln!(err, "perfkit-load: error: {m}");
            return 2;
        }
    };
    let _ = writeln!(
        out,
        "Running {} test @ {}{}",
        humantime(cfg.duration),
        cfg.url,
        if cfg.warmup.is_zero() { String::new() } else { format!(" (after {} warm-up)", humantime(cfg.warmup)) }
    );
    let segment = if cfg.segment.1 > 1 { format!(" (segment {}/{})", cfg.segment.0, cfg.segment.1) } else { String::new() };
    let _ = writeln!(out, "  {} threads and {} connections{segment}", cfg.threads, cfg.connections);
    if cfg.h2 {
        let _ = writeln!(out, "  HTTP/2, {} streams per connection", cfg.streams);
    }
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
    let o = Outputs {
        json: args.json.as_ref(),
        hdr_log: args.hdr_log.as_ref(),
        thresholds: &args.thresholds,
        latency: args.latency,
        u_latency: args.u_latency,
    };
    finish(output.result, &output.merged, &o, out, err)
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
