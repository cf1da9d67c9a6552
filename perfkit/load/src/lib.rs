//! perfkit-load: a constant-rate (wrk2-model) load engine for HTTP/1.1 and WebSocket JSON-RPC.
//!
//! Modules, one concern each:
//! - [`schedule`]: pacing, when each request of each connection is meant to go out (rate profile,
//!   stages, constant or Poisson arrivals, segments);
//! - [`driver`]: what every connection loop shares (schedule, reconnects, end-of-run accounting);
//! - [`timer`]: waking at an intended send time to within microseconds (timerfd);
//! - [`usage`]: the engine's own CPU use and descriptor limit;
//! - [`transport`]: TCP and TLS (rustls) connections, connect and handshake times;
//! - [`http`]: HTTP/1.1 keep-alive connection (request rendering, response parsing, the per-connection loop);
//! - [`h2conn`]: HTTP/2 connections (`--h2`), `--streams` schedule lanes per connection;
//! - [`ws`]: WebSocket JSON-RPC connection (ids, matching, many calls in flight);
//! - [`requests`]: request variation (`--requests FILE`): entries, picking, templates;
//! - [`recording`]: per-thread HdrHistograms and outcome counts (total, per stage, per interval);
//! - [`report`]: JSON result, HdrHistogram interval log and wrk2-style text;
//! - [`thresholds`]: `--threshold` pass/fail checks;
//! - [`merge`]: adding the results of the segments of one run;
//! - [`metrics`]: live Prometheus endpoint;
//! - [`cli`]: flags, validation and the program's `main`.
//!
//! [`run`] is the engine: it opens every connection first (an unreachable target fails before any
//! load), then starts all threads on one common start time and stops them all at the end of the
//! duration (plus `--drain`).

pub mod cli;
pub mod deadline;
pub mod driver;
pub mod h2conn;
pub mod http;
pub mod merge;
pub mod metrics;
pub mod recording;
pub mod report;
pub mod requests;
pub mod schedule;
pub mod thresholds;
pub mod timer;
pub mod transport;
pub mod usage;
pub mod ws;

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::driver::Driver;
use crate::http::{HttpConn, HttpTarget};
use crate::metrics::{LiveMetrics, MetricsServer};
use crate::recording::{Observer, Recorder, Window};
use crate::report::{RunInfo, RunResult, Segment};
use crate::schedule::{Arrivals, Pacer, Profile, Schedule, Stage};
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
    /// Measured duration (with `stages`: their total).
    pub duration: Duration,
    pub warmup: Duration,
    /// Total requests per second; `None` = closed loop (`--max`), unless `stages` is set.
    pub rate: Option<f64>,
    /// A rate profile instead of one constant rate (`--stages`).
    pub stages: Option<Vec<Stage>>,
    pub arrivals: Arrivals,
    pub headers: Vec<(String, String)>,
    pub method: String,
    /// HTTP request body, or the JSON-RPC call template in WebSocket mode.
    pub body: Vec<u8>,
    pub timeout: Duration,
    /// How long to wait for answers still in flight after the end (`--drain`).
    pub drain: Duration,
    /// Record unfinished requests in the corrected histogram at their lower bound.
    pub record_unfinished: bool,
    /// Width of a time-series interval (`--interval`).
    pub interval: Duration,
    /// Send lateness p99 above this means the schedule was not held.
    pub lateness_limit: Duration,
    /// This process's share of the run: `(index, count)` (`--segment I/N`).
    pub segment: (usize, usize),
    /// Wall-clock time (Unix seconds) at which the schedule starts (`--start-at`).
    pub start_at: Option<f64>,
    /// TLS settings (`https://`, `wss://`); `None` for plain connections.
    pub tls: Option<transport::TlsOptions>,
    pub scenario: String,
    pub metrics_addr: Option<SocketAddr>,
    /// Vary the requests (`--requests FILE`, HTTP only): they replace `method`, `headers` and
    /// `body`, which served as their defaults when the file was read.
    pub requests: Option<Arc<requests::RequestSet>>,
    /// HTTP/2 (`--h2`): prior knowledge over `http://`, ALPN `h2` over `https://`.
    pub h2: bool,
    /// Concurrent streams per HTTP/2 connection (`--streams`), each with its own schedule lane.
    pub streams: usize,
    /// HTTP/2 initial stream and connection flow-control windows in bytes (`--h2-window`,
    /// `--h2-conn-window`); `None`: h2's default, 65,535.
    pub h2_window: Option<u32>,
    pub h2_conn_window: Option<u32>,
}

impl Config {
    /// A constant-rate HTTP GET configuration with the defaults of the CLI.
    pub fn new(url: &str, rate: Option<f64>) -> Result<Config, String> {
        let url = url::Url::parse(url).map_err(|e| format!("invalid URL {url:?}: {e}"))?;
        let mode = if matches!(url.scheme(), "ws" | "wss") { Mode::Ws } else { Mode::Http };
        let tls = matches!(url.scheme(), "https" | "wss").then(transport::TlsOptions::default);
        Ok(Config {
            url,
            mode,
            threads: 1,
            connections: 1,
            duration: Duration::from_secs(10),
            warmup: Duration::ZERO,
            rate,
            stages: None,
            arrivals: Arrivals::Constant,
            headers: Vec::new(),
            method: "GET".into(),
            body: Vec::new(),
            timeout: Duration::from_secs(2),
            drain: Duration::ZERO,
            record_unfinished: true,
            interval: Duration::from_secs(1),
            lateness_limit: Duration::from_millis(10),
            segment: (0, 1),
            start_at: None,
            tls,
            scenario: "default".into(),
            metrics_addr: None,
            requests: None,
            h2: false,
            streams: 1,
            h2_window: None,
            h2_conn_window: None,
        })
    }

    /// The measured stages; `None` in closed-loop mode.
    pub fn measured_stages(&self) -> Option<Vec<Stage>> {
        match (&self.stages, self.rate) {
            (Some(s), _) => Some(s.clone()),
            (None, Some(r)) => Some(vec![Stage { from: r, to: r, duration: self.duration.as_secs_f64() }]),
            (None, None) => None,
        }
    }

    /// The whole schedule's profile: the warm-up at the first stage's starting rate, then the stages.
    fn profile(&self) -> Option<Profile> {
        let mut stages = self.measured_stages()?;
        if !self.warmup.is_zero() {
            let r = stages[0].from;
            stages.insert(0, Stage { from: r, to: r, duration: self.warmup.as_secs_f64() });
        }
        Some(Profile::new(stages))
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
    H2(Arc<h2conn::H2Target>),
}

enum Conn {
    Http(HttpConn),
    Ws(Box<ws::WsStream>),
    H2(h2conn::H2Conn),
}

/// Resolve the URL's host and port to one socket address.
pub fn resolve(url: &url::Url) -> Result<SocketAddr, LoadError> {
    let addrs = url
        .socket_addrs(|| match url.scheme() {
            "http" | "ws" => Some(80),
            "https" | "wss" => Some(443),
            _ => None,
        })
        .map_err(|e| LoadError::Setup(format!("cannot resolve {}: {e}", url.host_str().unwrap_or(""))))?;
    addrs
        .into_iter()
        .next()
        .ok_or_else(|| LoadError::Setup(format!("{} resolves to no address", url.host_str().unwrap_or(""))))
}

fn build_target(cfg: &Config, addr: SocketAddr) -> Result<Target, LoadError> {
    let host = cfg.url.host_str().unwrap_or("");
    let mut tls = cfg.tls.clone();
    if let (Some(t), Mode::Http) = (&mut tls, cfg.mode) {
        if t.alpn.is_empty() {
            t.alpn = vec![if cfg.h2 { b"h2".to_vec() } else { b"http/1.1".to_vec() }];
        }
    }
    let connector = transport::Connector::new(addr, host, tls.as_ref()).map_err(LoadError::Usage)?;
    match cfg.mode {
        Mode::Http if cfg.h2 => Ok(Target::H2(Arc::new(h2conn::H2Target::new(cfg, connector).map_err(LoadError::Usage)?))),
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
            let mut target = HttpTarget::new(connector, &cfg.method, &host_header, &path, &cfg.headers, &cfg.body);
            target.requests = cfg.requests.clone();
            Ok(Target::Http(Arc::new(target)))
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
                connector,
                url: cfg.url.to_string(),
                headers: cfg.headers.clone(),
                template,
            })))
        }
    }
}

async fn open(target: &Target) -> Result<(Conn, transport::ConnectTimes), String> {
    match target {
        Target::Http(t) => HttpConn::connect(&t.connector).await.map(|(c, t)| (Conn::Http(c), t)).map_err(|e| e.to_string()),
        Target::Ws(t) => ws::connect(t).await.map(|(s, t)| (Conn::Ws(Box::new(s)), t)),
        Target::H2(t) => h2conn::connect(t).await.map(|(c, t)| (Conn::H2(c), t)),
    }
}

/// When the schedule starts, and the measured window relative to it.
#[derive(Clone)]
struct Timing {
    start: Instant,
    window: Window,
}

struct WorkerPlan {
    conns: Vec<usize>,
    connections: usize,
    profile: Option<Arc<Profile>>,
    arrivals: Arrivals,
    timeout: Duration,
    observer: Option<Arc<dyn Observer>>,
    requests: Option<Arc<requests::RequestSet>>,
}

fn worker(
    plan: WorkerPlan,
    target: Target,
    ready: mpsc::Sender<Result<(), String>>,
    start_rx: tokio::sync::oneshot::Receiver<Option<Timing>>,
) -> Recorder {
    timer::precise_thread_timers();
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
        let Ok(Some(timing)) = start_rx.await else {
            return Recorder::default();
        };
        let scheduled = plan.profile.is_some();
        let rec = Rc::new(RefCell::new(Recorder::new(timing.window.clone(), scheduled, plan.observer.clone())));
        let mut tasks = Vec::new();
        // Schedule lanes: one per connection, or `--streams` per HTTP/2 connection (lane
        // `index · streams + stream` of `connections · streams`: a segment still has whole connections).
        let streams = match &target {
            Target::H2(t) => t.streams,
            _ => 1,
        };
        let lane_driver = |lane: usize| {
            let pacer = match &plan.profile {
                Some(p) => Pacer::Scheduled(Schedule::new(timing.start, p.clone(), plan.arrivals, lane, plan.connections * streams)),
                None => Pacer::Max,
            };
            let mut d = Driver::new(pacer, rec.clone(), plan.timeout);
            d.set_requests(plan.requests.clone().map(|r| requests::Chooser::new(r, lane, plan.connections * streams)));
            d
        };
        for ((conn, times), &index) in conns.into_iter().zip(plan.conns.iter()) {
            rec.borrow_mut().connected(times);
            let d = lane_driver(index * streams);
            let handle = match (conn, &target) {
                (Conn::Http(c), Target::Http(t)) => {
                    tokio::task::spawn_local(http::run_connection(c, t.clone(), d, plan.timeout))
                }
                (Conn::Ws(s), Target::Ws(t)) => tokio::task::spawn_local(ws::run_connection(
                    *s,
                    t.clone(),
                    d,
                    index,
                    plan.connections,
                    plan.timeout,
                )),
                (Conn::H2(c), Target::H2(t)) => {
                    let lanes = std::iter::once(d).chain((1..streams).map(|s| lane_driver(index * streams + s))).collect();
                    tokio::task::spawn_local(h2conn::run_connection(c, t.clone(), lanes, plan.timeout))
                }
                _ => unreachable!(),
            };
            tasks.push(handle);
        }
        // The engine's CPU over the run: from the start (the thread idles before it) to the last task.
        let (cpu0, wall0) = (usage::thread_cpu(), Instant::now().max(timing.start));
        for t in tasks {
            let _ = t.await;
        }
        let usage = usage::EngineUsage::of_thread(usage::thread_cpu() - cpu0, wall0.elapsed());
        let mut rec = Rc::try_unwrap(rec).map(|c| c.into_inner()).unwrap_or_default();
        rec.engine = usage;
        rec
    })
}

fn unix_now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_secs_f64()
}

/// Check what [`cli::validate`] also checks, for configurations built in code.
fn check(cfg: &Config) -> Result<(), LoadError> {
    let (index, count) = cfg.segment;
    if cfg.threads == 0 || count == 0 || index >= count {
        return Err(LoadError::Usage("threads must be >= 1 and the segment I/N must have I < N".into()));
    }
    let mine = cfg.connections / count + usize::from(index < cfg.connections % count);
    if mine < cfg.threads {
        return Err(LoadError::Usage(format!(
            "connections must be >= threads >= 1 (this process runs {mine} of {} connections on {} threads)",
            cfg.connections, cfg.threads
        )));
    }
    if let Some(r) = cfg.rate {
        if !(r.is_finite() && r > 0.0) {
            return Err(LoadError::Usage(format!("rate must be a positive number, got {r}")));
        }
    }
    if cfg.duration.is_zero() || cfg.interval.is_zero() {
        return Err(LoadError::Usage("duration and interval must be > 0".into()));
    }
    if let Some(t) = cfg.start_at {
        if t < unix_now() - 1.0 {
            return Err(LoadError::Usage(format!("--start-at {t} is in the past")));
        }
    }
    h2conn::check(cfg.h2, cfg.mode == Mode::Ws, cfg.streams, [cfg.h2_window, cfg.h2_conn_window]).map_err(LoadError::Usage)?;
    if cfg.requests.is_some() && cfg.mode == Mode::Ws {
        return Err(LoadError::Usage("--requests is for HTTP, not --ws (each JSON-RPC call already gets its own id)".into()));
    }
    Ok(())
}

/// The settings that make results parts of one logical run. A stable FNV-1a hash, written here
/// because std's hasher may change between Rust versions and segments may run different builds.
fn run_id(cfg: &Config, wall_start: f64) -> String {
    let mut key = format!(
        "{}|{:?}|{}|{:?}|{:?}|{}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{}|{}",
        cfg.url,
        cfg.mode,
        cfg.method,
        cfg.headers,
        cfg.body,
        cfg.connections,
        cfg.measured_stages(),
        cfg.arrivals,
        cfg.warmup,
        cfg.timeout,
        cfg.drain,
        cfg.interval,
        cfg.record_unfinished,
        cfg.segment.1,
        // Segments of one run share --start-at; runs without it are never parts of another.
        cfg.start_at.map_or(format!("{wall_start}/{}", std::process::id()), |t| t.to_string()),
    );
    if cfg.h2 {
        key.push_str(&format!("|h2/{}/{:?}/{:?}", cfg.streams, cfg.h2_window, cfg.h2_conn_window));
    }
    if let Some(r) = &cfg.requests {
        key.push_str(&format!("|requests/{:016x}", r.fingerprint()));
    }
    let hash = key.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3));
    format!("{hash:016x}")
}

fn run_info(cfg: &Config, wall_start: f64) -> RunInfo {
    let stages = cfg.measured_stages().unwrap_or_default();
    RunInfo {
        target: cfg.url.to_string(),
        scenario: cfg.scenario.clone(),
        mode: match cfg.mode {
            Mode::Http => "http",
            Mode::Ws => "ws",
        }
        .into(),
        protocol: match (cfg.mode, cfg.h2) {
            (Mode::Ws, _) => "websocket",
            (Mode::Http, true) => "h2",
            (Mode::Http, false) => "http/1.1",
        }
        .into(),
        streams: cfg.streams,
        method: match (&cfg.requests, cfg.mode) {
            (_, Mode::Ws) => "JSON-RPC".into(),
            (Some(r), _) => r.methods(),
            (None, _) => cfg.method.clone(),
        },
        threads: cfg.threads,
        connections: cfg.connections,
        duration_s: if stages.is_empty() { cfg.duration.as_secs_f64() } else { stages.iter().map(|s| s.duration).sum() },
        warmup_s: cfg.warmup.as_secs_f64(),
        timeout_s: cfg.timeout.as_secs_f64(),
        drain_s: cfg.drain.as_secs_f64(),
        arrivals: match cfg.arrivals {
            Arrivals::Constant => "constant".into(),
            Arrivals::Poisson { .. } => "poisson".into(),
        },
        seed: match cfg.arrivals {
            Arrivals::Constant => cfg.requests.as_ref().map(|r| r.seed()),
            Arrivals::Poisson { seed } => Some(seed),
        },
        profile: stages,
        interval_s: cfg.interval.as_secs_f64(),
        lateness_limit_us: cfg.lateness_limit.as_micros() as u64,
        start_unix_s: wall_start + cfg.warmup.as_secs_f64(),
        run_id: run_id(cfg, wall_start),
        segment: Segment { index: vec![cfg.segment.0], count: cfg.segment.1 },
    }
}

/// The common start: now (+2 ms for the threads to get the news), or `--start-at`.
fn start_time(cfg: &Config) -> (Instant, f64) {
    let now = unix_now();
    let wall = cfg.start_at.unwrap_or(now + 0.002).max(now);
    (Instant::now() + Duration::from_secs_f64(wall - now), wall)
}

fn timing(cfg: &Config, start: Instant) -> Timing {
    let measure_start = start + cfg.warmup;
    let mut stage_ends = Vec::new();
    let mut t = measure_start;
    for s in cfg.measured_stages().unwrap_or_default() {
        t += Duration::from_secs_f64(s.duration);
        stage_ends.push(t);
    }
    let end = if stage_ends.is_empty() { measure_start + cfg.duration } else { t };
    let window = Window {
        measure_start,
        end,
        stop: end + cfg.drain,
        stage_ends,
        interval: cfg.interval,
        record_unfinished: cfg.record_unfinished,
    };
    Timing { start, window }
}

/// Run the load described by `cfg` and return the merged result.
///
/// Every connection is opened before the load starts; if any can't be opened the run fails with
/// [`LoadError::Setup`] and no request is sent. The run always ends at `warmup + duration` after
/// the common start time; answers are awaited until `--drain` after that.
pub fn run(cfg: &Config) -> Result<RunOutput, LoadError> {
    check(cfg)?;
    usage::raise_fd_limit();
    let addr = resolve(&cfg.url)?;
    let target_label = cfg.url.to_string();
    let target_rate = cfg.measured_stages().map(|s| schedule::mean_rate(&s));
    let labels = cfg.requests.as_ref().map(|r| r.labels().to_vec()).unwrap_or_default();
    let live = cfg.metrics_addr.map(|_| Arc::new(LiveMetrics::with_labels(&target_label, &cfg.scenario, target_rate, &labels)));
    let _server = match (cfg.metrics_addr, &live) {
        (Some(a), Some(l)) => Some(
            MetricsServer::start(a, l.clone())
                .map_err(|e| LoadError::Setup(format!("cannot serve metrics on {a}: {e}")))?,
        ),
        _ => None,
    };
    let profile = cfg.profile().map(Arc::new);
    let mine = schedule::connections_of_segment(cfg.segment.0, cfg.segment.1, cfg.connections);
    let (ready_tx, ready_rx) = mpsc::channel();
    let mut starts = Vec::new();
    let mut handles = Vec::new();
    for t in 0..cfg.threads {
        let plan = WorkerPlan {
            conns: schedule::connections_of_thread(t, cfg.threads, &mine),
            connections: cfg.connections,
            profile: profile.clone(),
            arrivals: cfg.arrivals,
            timeout: cfg.timeout,
            observer: live.clone().map(|l| l as Arc<dyn Observer>),
            requests: cfg.requests.clone(),
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
    let (start, wall) = start_time(cfg);
    let timing = timing(cfg, start);
    for s in starts {
        let _ = s.send(if failure.is_none() { Some(timing.clone()) } else { None });
    }
    if let Some(l) = &live {
        l.start_measurement(timing.window.measure_start);
    }
    let per_thread: Vec<Recorder> = handles.into_iter().map(|h| h.join().unwrap_or_default()).collect();
    if let Some(e) = failure {
        return Err(LoadError::Setup(format!("cannot connect to {} ({addr}): {e}", cfg.url)));
    }
    let mut merged = recording::merge_all(per_thread.iter());
    merged.label_names = labels;
    let result = report::build_result(&run_info(cfg, wall), &merged);
    Ok(RunOutput { result, merged, per_thread })
}
