//! Opt-in per-request stage timings (the `http_client_stage_duration_seconds` stages of the perfkit
//! metrics contract). Nothing here runs unless a request asks for timings (`timing=True`, which the
//! Python layer passes when a session has metrics): with metrics off no clock is read.
//!
//! - Direct path (`src/direct.rs`): `send` fills a `Timings` as it goes: pool_wait (the checkout),
//!   connect (name resolution + TCP, new connections only), ttfb (request written → first byte),
//!   transfer (first byte → body complete), decode (gzip/deflate/br/zstd, only when decoded).
//! - reqwest path: hyper's pool and reqwest's connector are closed boxes, so a `Probe` set as a
//!   task-local for the request collects marks from two hooks that run inside the request's task:
//!   `ConnectTimingLayer` (a connector layer: the start and end of a new connection) and the TLS
//!   session store of `src/tls.rs` (consulted by rustls when it starts a handshake, i.e. right after
//!   TCP connected). From them: pool_wait (request start → connector start, when a connect started),
//!   connect (connector start → TLS start, or → connected for plain http), tls (TLS start →
//!   connected), ttfb (connection ready, or the request start on a reused connection → response
//!   head; it includes writing the request), transfer (head → body complete; reqwest decodes while
//!   it reads, so decoding is inside transfer and decode is not recorded on this path).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use pyo3::prelude::*;
use pyo3::types::PyTuple;

/// The stages, in the order of the tuple handed to Python (`NativeResponse.timings`).
#[derive(Default, Clone, Copy, Debug)]
pub struct Timings {
    pub pool_wait: Option<Duration>,
    pub connect: Option<Duration>,
    pub tls: Option<Duration>,
    pub ttfb: Option<Duration>,
    pub transfer: Option<Duration>,
    pub decode: Option<Duration>,
}

impl Timings {
    /// `(pool_wait, connect, tls, ttfb, transfer, decode)` in seconds, None for a stage not seen.
    pub fn py_tuple<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let s = |d: Option<Duration>| d.map(|d| d.as_secs_f64());
        (s(self.pool_wait), s(self.connect), s(self.tls), s(self.ttfb), s(self.transfer), s(self.decode))
            .into_pyobject(py)
    }
}

// ---------------------------------------------------------------------------------------------
// reqwest path

#[derive(Default)]
struct Marks {
    start: Option<Instant>,
    connect_start: Option<Instant>,
    tls_start: Option<Instant>,
    connected: Option<Instant>,
    head: Option<Instant>,
    body: Option<Instant>,
}

/// The marks of one request on the reqwest path (shared with a connect that may outlive it).
#[derive(Default)]
pub struct Probe {
    marks: Mutex<Marks>,
}

tokio::task_local! {
    static PROBE: Arc<Probe>;
}

impl Probe {
    pub fn new() -> Arc<Probe> {
        let p = Probe::default();
        p.marks.lock().unwrap().start = Some(Instant::now());
        Arc::new(p)
    }

    /// Run `fut` with this probe visible to the connector and TLS hooks.
    pub fn scope<F: Future>(self: &Arc<Self>, fut: F) -> impl Future<Output = F::Output> {
        PROBE.scope(self.clone(), fut)
    }

    pub fn head(&self) {
        self.marks.lock().unwrap().head = Some(Instant::now());
    }

    pub fn body(&self) {
        self.marks.lock().unwrap().body = Some(Instant::now());
    }

    fn connect_start(&self) {
        let mut m = self.marks.lock().unwrap();
        if m.connect_start.is_none() {
            m.connect_start = Some(Instant::now());
        }
    }

    fn connected(&self) {
        let mut m = self.marks.lock().unwrap();
        if m.connected.is_none() {
            m.connected = Some(Instant::now());
        }
    }

    fn tls_start(&self) {
        let mut m = self.marks.lock().unwrap();
        if m.connect_start.is_some() && m.tls_start.is_none() && m.connected.is_none() {
            m.tls_start = Some(Instant::now());
        }
    }

    /// The stages seen so far (a failed request has only some).
    pub fn timings(&self) -> Timings {
        let m = self.marks.lock().unwrap();
        let span = |a: Option<Instant>, b: Option<Instant>| match (a, b) {
            (Some(a), Some(b)) if b >= a => Some(b - a),
            _ => None,
        };
        // a connection that finished after the head came was not the one this request used
        let connected = match (m.connected, m.head) {
            (Some(c), Some(h)) if c > h => None,
            (c, _) => c,
        };
        Timings {
            // the checkout found no idle connection and a connect started (it may have failed)
            pool_wait: span(m.start, m.connect_start),
            connect: span(m.connect_start, m.tls_start.or(connected)),
            tls: span(m.tls_start, connected),
            ttfb: span(connected.or(m.start), m.head),
            transfer: span(m.head, m.body),
            decode: None,
        }
    }
}

/// Called by the TLS session store when rustls starts a handshake (`src/tls.rs`).
pub fn note_tls_start() {
    let _ = PROBE.try_with(|p| p.tls_start());
}

/// A reqwest connector layer that marks when a new connection starts and when it is ready, for the
/// request whose task asked for it. Without a probe (metrics off) it passes the connect through.
#[derive(Clone, Copy, Default)]
pub struct ConnectTimingLayer;

impl<S> tower_layer::Layer<S> for ConnectTimingLayer {
    type Service = ConnectTiming<S>;

    fn layer(&self, inner: S) -> ConnectTiming<S> {
        ConnectTiming { inner }
    }
}

#[derive(Clone)]
pub struct ConnectTiming<S> {
    inner: S,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, R> tower_service::Service<R> for ConnectTiming<S>
where
    S: tower_service::Service<R>,
    S::Future: Send + 'static,
    S::Response: 'static,
    S::Error: 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: R) -> Self::Future {
        let probe = PROBE.try_with(|p| p.clone()).ok();
        if let Some(p) = &probe {
            p.connect_start();
        }
        let fut = self.inner.call(req);
        match probe {
            None => Box::pin(fut),
            Some(p) => Box::pin(async move {
                let res = fut.await;
                if res.is_ok() {
                    p.connected();
                }
                res
            }),
        }
    }
}
