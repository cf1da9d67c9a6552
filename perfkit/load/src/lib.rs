//! perfkit-load: a constant-rate (wrk2-model) load engine for HTTP/1.1 and WebSocket JSON-RPC.
//!
//! Modules, one concern each:
//! - [`schedule`]: pacing, when each request of each connection is meant to go out;
//! - [`http`]: HTTP/1.1 keep-alive connection (request rendering, response parsing, the per-connection loop);
//! - [`ws`]: WebSocket JSON-RPC connection (ids, matching, many calls in flight);
//! - [`recording`]: per-thread HdrHistograms (corrected and uncorrected latency) and outcome counts;
//! - [`report`]: JSON result and wrk2-style text;
//! - [`metrics`]: live Prometheus endpoint;
//! - [`cli`]: flags, validation and the program's `main`.
//!
//! [`run`] is the engine: it opens every connection first (an unreachable target fails before any
//! load), then starts all threads on one common start time and stops them all at the end of the
//! duration.

pub mod cli;
pub mod http;
pub mod metrics;
pub mod recording;
pub mod report;
pub mod schedule;
pub mod ws;

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::http::{HttpConn, HttpTarget};
use crate::metrics::{LiveMetrics, MetricsServer};
use crate::recording::{Recorder, Window};
use crate::report::{RunInfo, RunResult};
use crate::schedule::Pacer;
use crate::ws::{RpcTemplate, WsTarget};

/// Which protocol the connections speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Http,
    Ws,
}

/// A validated run configuration (see [`cli`] for the flags that produce it).
#[derive(Debug, Clone)]
pub struct Config {
    pub url: url::Url,
    pub mode: Mode,
    pub threads: usize,
    pub connections: usize,
    pub duration: Duration,
    pub warmup: Duration,
    /// Total requests per second; `None` = closed loop (`--max`).
    pub rate: Option<f64>,
    pub headers: Vec<(String, String)>,
    pub method: String,
    /// HTTP request body, or the JSON-RPC call template in WebSocket mode.
    pub body: Vec<u8>,
    pub timeout: Duration,
    pub scenario: String,
    pub metrics_addr: Option<SocketAddr>,
}

impl Config {
    /// A constant-rate HTTP GET configuration with the defaults of the CLI.
    pub fn new(url: &str, rate: Option<f64>) -> Result<Config, String> {
        let url = url::Url::parse(url).map_err(|e| format!("invalid URL {url:?}: {e}"))?;
        let mode = if url.scheme() == "ws" { Mode::Ws } else { Mode::Http };
        Ok(Config {
            url,
            mode,
            threads: 1,
            connections: 1,
            duration: Duration::from_secs(10),
            warmup: Duration::ZERO,
            rate,
            headers: Vec::new(),
            method: "GET".into(),
            body: Vec::new(),
            timeout: Duration::from_secs(2),
            scenario: "default".into(),
            metrics_addr: None,
        })
    }
}

/// Why a run could not be done.
#[derive(Debug)]
pub enum LoadError {
    /// Bad flags or values (exit status 2).
    Usage(String),
    /// The target can't be resolved or reached, or another setup step failed (exit status 1).
    Setup(String),
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoadError::Usage(m) | LoadError::Setup(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for LoadError {}

/// The outcome of [`run`]: the result and the merged recorder (histograms and counts).
pub struct RunOutput {
    pub result: RunResult,
    pub merged: Recorder,
    /// The per-thread recorders, before merging.
    pub per_thread: Vec<Recorder>,
}

enum Target {
    Http(Arc<HttpTarget>),
    Ws(Arc<WsTarget>),
}

enum Conn {
    Http(HttpConn),
    Ws(Box<ws::WsStream>),
}

/// Resolve the URL's host and port to one socket address.
pub fn resolve(url: &url::Url) -> Result<SocketAddr, LoadError> {
    let addrs = url
        .socket_addrs(|| match url.scheme() {
            "http" | "ws" => Some(80),
            _ => None,
        })
        .map_err(|e| LoadError::Setup(format!("cannot resolve {}: {e}", url.host_str().unwrap_or(""))))?;
    addrs
        .into_iter()
        .next()
        .ok_or_else(|| LoadError::Setup(format!("{} resolves to no address", url.host_str().unwrap_or(""))))
}

fn build_target(cfg: &Config, addr: SocketAddr) -> Result<Target, LoadError> {
    match cfg.mode {
        Mode::Http => {
            let host = cfg.url.host_str().unwrap_or("");
            let host = if host.contains(':') { format!("[{host}]") } else { host.to_string() };
            let host_header = match cfg.url.port() {
                Some(p) => format!("{host}:{p}"),
                None => host,
            };
            let mut path = cfg.url.path().to_string();
            if let Some(q) = cfg.url.query() {
                path.push('?');
                path.push_str(q);
            }
            Ok(Target::Http(Arc::new(HttpTarget::new(
                addr,
                &cfg.method,
                &host_header,
                &path,
                &cfg.headers,
                &cfg.body,
            ))))
        }
        Mode::Ws => {
            let text = if cfg.body.is_empty() {
                r#"{"jsonrpc":"2.0","method":"ping","params":[]}"#.to_string()
            } else {
                String::from_utf8(cfg.body.clone())
                    .map_err(|_| LoadError::Usage("the JSON-RPC template is not UTF-8".into()))?
            };
            let template = RpcTemplate::parse(&text).map_err(LoadError::Usage)?;
            Ok(Target::Ws(Arc::new(WsTarget {
                addr,
                url: cfg.url.to_string(),
                headers: cfg.headers.clone(),
                template,
            })))
        }
    }
}

async fn open(target: &Target) -> Result<Conn, String> {
    match target {
        Target::Http(t) => HttpConn::connect(t.addr).await.map(Conn::Http).map_err(|e| e.to_string()),
        Target::Ws(t) => ws::connect(t).await.map(|s| Conn::Ws(Box::new(s))),
    }
}

struct WorkerPlan {
    conns: Vec<usize>,
    connections: usize,
    rate: Option<f64>,
    warmup: Duration,
    duration: Duration,
    timeout: Duration,
    live: Option<Arc<LiveMetrics>>,
}

fn worker(
    plan: WorkerPlan,
    target: Target,
    ready: mpsc::Sender<Result<(), String>>,
    start_rx: tokio::sync::oneshot::Receiver<Option<Instant>>,
) -> Recorder {
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            let _ = ready.send(Err(format!("cannot start a runtime: {e}")));
            return Recorder::default();
        }
    };
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async move {
        let connect_deadline = tokio::time::Instant::now() + plan.timeout;
        let opened = futures_util::future::join_all(
            plan.conns.iter().map(|_| tokio::time::timeout_at(connect_deadline, open(&target))),
        )
        .await;
        let mut conns = Vec::with_capacity(opened.len());
        for r in opened {
            match r {
                Ok(Ok(c)) => conns.push(c),
                Ok(Err(e)) => {
                    let _ = ready.send(Err(e));
                    return Recorder::default();
                }
                Err(_) => {
                    let _ = ready.send(Err(format!("connect timed out after {:?}", plan.timeout)));
                    return Recorder::default();
                }
            }
        }
        let _ = ready.send(Ok(()));
        let Ok(Some(start)) = start_rx.await else {
            return Recorder::default();
        };
        let measure_start = start + plan.warmup;
        let end = measure_start + plan.duration;
        let rec = Rc::new(RefCell::new(Recorder::new(Some(Window { measure_start, end }), plan.live.clone())));
        let mut tasks = Vec::new();
        for (conn, &index) in conns.into_iter().zip(plan.conns.iter()) {
            let pacer = match plan.rate {
                Some(r) => Pacer::rate(start, r, index, plan.connections),
                None => Pacer::Max,
            };
            let rec = rec.clone();
            let timeout = plan.timeout;
            let handle = match (conn, &target) {
                (Conn::Http(c), Target::Http(t)) => {
                    tokio::task::spawn_local(http::run_connection(c, t.clone(), pacer, timeout, end, rec))
                }
                (Conn::Ws(s), Target::Ws(t)) => tokio::task::spawn_local(ws::run_connection(
                    *s,
                    t.clone(),
                    pacer,
                    index,
                    plan.connections,
                    timeout,
                    end,
                    rec,
                )),
                _ => unreachable!(),
            };
            tasks.push(handle);
        }
        for t in tasks {
            let _ = t.await;
        }
        Rc::try_unwrap(rec).map(|c| c.into_inner()).unwrap_or_default()
    })
}

/// Run the load described by `cfg` and return the merged result.
///
/// Every connection is opened before the load starts; if any can't be opened the run fails with
/// [`LoadError::Setup`] and no request is sent. The run always ends at `warmup + duration` after
/// the common start time.
pub fn run(cfg: &Config) -> Result<RunOutput, LoadError> {
    if cfg.threads == 0 || cfg.connections < cfg.threads {
        return Err(LoadError::Usage("connections must be >= threads >= 1".into()));
    }
    if let Some(r) = cfg.rate {
        if !(r.is_finite() && r > 0.0) {
            return Err(LoadError::Usage(format!("rate must be a positive number, got {r}")));
        }
    }
    if cfg.duration.is_zero() {
        return Err(LoadError::Usage("duration must be > 0".into()));
    }
    let addr = resolve(&cfg.url)?;
    let target_label = cfg.url.to_string();
    let live = cfg.metrics_addr.map(|_| Arc::new(LiveMetrics::new(&target_label, &cfg.scenario, cfg.rate)));
    let _server = match (cfg.metrics_addr, &live) {
        (Some(a), Some(l)) => Some(
            MetricsServer::start(a, l.clone())
                .map_err(|e| LoadError::Setup(format!("cannot serve metrics on {a}: {e}")))?,
        ),
        _ => None,
    };

    let (ready_tx, ready_rx) = mpsc::channel();
    let mut starts = Vec::new();
    let mut handles = Vec::new();
    for t in 0..cfg.threads {
        let plan = WorkerPlan {
            conns: schedule::connections_of_thread(t, cfg.threads, cfg.connections),
            connections: cfg.connections,
            rate: cfg.rate,
            warmup: cfg.warmup,
            duration: cfg.duration,
            timeout: cfg.timeout,
            live: live.clone(),
        };
        let target = build_target(cfg, addr)?;
        let (start_tx, start_rx) = tokio::sync::oneshot::channel();
        starts.push(start_tx);
        let ready = ready_tx.clone();
        let h = std::thread::Builder::new()
            .name(format!("perfkit-load-{t}"))
            .spawn(move || worker(plan, target, ready, start_rx))
            .map_err(|e| LoadError::Setup(format!("cannot start a thread: {e}")))?;
        handles.push(h);
    }
    drop(ready_tx);
    let mut failure = None;
    for _ in 0..cfg.threads {
        match ready_rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                failure.get_or_insert(e);
            }
            Err(_) => {
                failure.get_or_insert("a worker thread died".into());
            }
        }
    }
    let start = Instant::now() + Duration::from_millis(2);
    let wall = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_secs_f64()
        + 0.002
        + cfg.warmup.as_secs_f64();
    for s in starts {
        let _ = s.send(if failure.is_none() { Some(start) } else { None });
    }
    if let Some(l) = &live {
        l.start_measurement(start + cfg.warmup);
    }
    let per_thread: Vec<Recorder> = handles.into_iter().map(|h| h.join().unwrap_or_default()).collect();
    if let Some(e) = failure {
        return Err(LoadError::Setup(format!("cannot connect to {} ({addr}): {e}", cfg.url)));
    }
    let merged = recording::merge_all(per_thread.iter());
    let info = RunInfo {
        target: &target_label,
        scenario: &cfg.scenario,
        mode: match cfg.mode {
            Mode::Http => "http",
            Mode::Ws => "ws",
        },
        method: if cfg.mode == Mode::Ws { "JSON-RPC" } else { &cfg.method },
        threads: cfg.threads,
        connections: cfg.connections,
        duration_s: cfg.duration.as_secs_f64(),
        warmup_s: cfg.warmup.as_secs_f64(),
        timeout_s: cfg.timeout.as_secs_f64(),
        target_rate: cfg.rate,
        start_unix_s: wall,
    };
    let result = report::build_result(&info, &merged);
    Ok(RunOutput { result, merged, per_thread })
}
