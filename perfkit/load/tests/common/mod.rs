//! In-process test servers (real sockets on port 0) shared by the integration tests.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// How the HTTP test server behaves.
#[derive(Clone, Default)]
pub struct HttpOpts {
    /// Stall: responses to requests received in `[first request + at, + len)` wait until the end of
    /// that window.
    pub stall: Option<(Duration, Duration)>,
    /// Use chunked transfer encoding for the body.
    pub chunked: bool,
    /// Reset (close without answering) every n-th request.
    pub drop_every: Option<u64>,
    /// Status code to answer with (default 200).
    pub status: Option<u16>,
    /// Answer without Content-Length and close the connection (body delimited by the close).
    pub until_close: bool,
}

#[derive(Default)]
pub struct Stats {
    pub accepted: AtomicUsize,
    pub requests: AtomicU64,
    pub first_request: OnceLock<Instant>,
    pub bodies: Mutex<Vec<Vec<u8>>>,
}

/// A running test server on its own thread; stops (and closes every connection) on drop.
pub struct Server {
    pub addr: SocketAddr,
    pub stats: Arc<Stats>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    pub fn url(&self, scheme: &str, path: &str) -> String {
        format!("{scheme}://{}{path}", self.addr)
    }
    pub fn accepted(&self) -> usize {
        self.stats.accepted.load(Ordering::SeqCst)
    }
    pub fn requests(&self) -> u64 {
        self.stats.requests.load(Ordering::SeqCst)
    }
    /// Stop now: the listener and every open connection are closed.
    pub fn stop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

fn spawn_server<F, Fut>(handler: F) -> Server
where
    F: Fn(TcpStream, Arc<Stats>) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + 'static,
{
    let stats = Arc::new(Stats::default());
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let st = stats.clone();
    let thread = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let local = tokio::task::LocalSet::new();
        local.block_on(&rt, async move {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            addr_tx.send(listener.local_addr().unwrap()).unwrap();
            let accept = async {
                loop {
                    let (sock, _) = listener.accept().await.unwrap();
                    sock.set_nodelay(true).unwrap();
                    st.accepted.fetch_add(1, Ordering::SeqCst);
                    tokio::task::spawn_local(handler(sock, st.clone()));
                }
            };
            tokio::select! {
                _ = accept => {}
                _ = stop_rx => {}
            }
        });
        // Dropping the LocalSet and runtime closes every connection.
    });
    let addr = addr_rx.recv().unwrap();
    Server { addr, stats, stop: Some(stop_tx), thread: Some(thread) }
}

/// A TLS server's certificate (self-signed, made at test time) and what clients told it.
pub struct TlsServer {
    pub server: Server,
    /// The server's certificate (PEM), for `--cacert`.
    pub ca: PathBuf,
    /// The SNI name each handshake carried ("" when none).
    pub sni: Arc<Mutex<Vec<String>>>,
}

/// How the TLS test server is set up.
#[derive(Clone, Default)]
pub struct TlsOpts {
    /// Names in the server certificate (default "localhost").
    pub names: Vec<String>,
    /// Require a client certificate issued by this self-signed certificate (PEM).
    pub client_ca: Option<PathBuf>,
}

/// A self-signed certificate and key for `names`, written as PEM files; (cert path, key path).
pub fn self_signed(names: &[&str], tag: &str) -> (PathBuf, PathBuf) {
    let ck = rcgen::generate_simple_self_signed(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).unwrap();
    let (cert, key) = (temp_path(&format!("{tag}-cert.pem")), temp_path(&format!("{tag}-key.pem")));
    std::fs::write(&cert, ck.cert.pem()).unwrap();
    std::fs::write(&key, ck.signing_key.serialize_pem()).unwrap();
    (cert, key)
}

/// The HTTP/1.1 test server behind TLS (rustls).
pub fn tls_http_server(opts: HttpOpts, tls: TlsOpts) -> TlsServer {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let names: Vec<&str> = if tls.names.is_empty() { vec!["localhost"] } else { tls.names.iter().map(|s| s.as_str()).collect() };
    let (cert_path, key_path) = self_signed(&names, "server");
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&cert_path).unwrap().map(|c| c.unwrap()).collect();
    let key = PrivateKeyDer::from_pem_file(&key_path).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone()).with_safe_default_protocol_versions().unwrap();
    let builder = match &tls.client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            for c in CertificateDer::pem_file_iter(ca).unwrap() {
                roots.add(c.unwrap()).unwrap();
            }
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider).build().unwrap();
            builder.with_client_cert_verifier(verifier)
        }
    };
    let config = Arc::new(builder.with_single_cert(certs, key).unwrap());
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    let sni: Arc<Mutex<Vec<String>>> = Arc::default();
    let seen = sni.clone();
    let server = spawn_server(move |sock, stats| {
        let (acceptor, opts, seen) = (acceptor.clone(), opts.clone(), seen.clone());
        async move {
            let Ok(tls) = acceptor.accept(sock).await else { return };
            seen.lock().unwrap().push(tls.get_ref().1.server_name().unwrap_or("").to_string());
            serve_http(tls, stats, opts).await
        }
    });
    TlsServer { server, ca: cert_path, sni }
}

/// An HTTP/1.1 keep-alive server answering every request with a small body.
pub fn http_server(opts: HttpOpts) -> Server {
    spawn_server(move |sock, stats| serve_http(sock, stats, opts.clone()))
}

async fn serve_http<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(mut sock: S, stats: Arc<Stats>, opts: HttpOpts) {
    let mut buf: Vec<u8> = Vec::with_capacity(8192);
    let mut out: Vec<u8> = Vec::with_capacity(512);
    loop {
        // Parse one request head (and skip its body).
        let (head_len, body_len) = loop {
            let mut headers = [httparse::EMPTY_HEADER; 64];
            let mut req = httparse::Request::new(&mut headers);
            match req.parse(&buf) {
                Ok(httparse::Status::Complete(n)) => {
                    let len = req
                        .headers
                        .iter()
                        .find(|h| h.name.eq_ignore_ascii_case("content-length"))
                        .and_then(|h| std::str::from_utf8(h.value).ok()?.trim().parse::<usize>().ok())
                        .unwrap_or(0);
                    break (n, len);
                }
                Ok(httparse::Status::Partial) => match sock.read_buf(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                },
                Err(_) => return,
            }
        };
        while buf.len() < head_len + body_len {
            match sock.read_buf(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
        if body_len > 0 {
            stats.bodies.lock().unwrap().push(buf[head_len..head_len + body_len].to_vec());
        }
        buf.drain(..head_len + body_len);
        let n = stats.requests.fetch_add(1, Ordering::SeqCst) + 1;
        let now = Instant::now();
        let first = *stats.first_request.get_or_init(|| now);
        if let Some(every) = opts.drop_every {
            if n % every == 0 {
                return; // close without answering
            }
        }
        if let Some((at, len)) = opts.stall {
            let (s, e) = (first + at, first + at + len);
            if now >= s && now < e {
                tokio::time::sleep_until(tokio::time::Instant::from_std(e)).await;
            }
        }
        let status = opts.status.unwrap_or(200);
        out.clear();
        if opts.until_close {
            let _ = sock.write_all(format!("HTTP/1.1 {status} X\r\nConnection: close\r\n\r\nhello, world").as_bytes()).await;
            let _ = sock.shutdown().await; // TLS: close_notify, so the body's end is not a truncation
            return;
        }
        if opts.chunked {
            out.extend_from_slice(
                format!("HTTP/1.1 {status} X\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\nX-Trailer: 1\r\n\r\n")
                    .as_bytes(),
            );
        } else {
            out.extend_from_slice(format!("HTTP/1.1 {status} X\r\nContent-Length: 12\r\n\r\nhello, world").as_bytes());
        }
        if sock.write_all(&out).await.is_err() {
            return;
        }
    }
}

/// How the WebSocket JSON-RPC test server answers a call with id `id`.
#[derive(Clone, Copy, Default)]
pub struct WsOpts {
    /// Answer ids divisible by this with a JSON-RPC error object.
    pub error_every: Option<u64>,
    /// Delay the answer to even ids by this much (answers come back out of order).
    pub delay_even: Option<Duration>,
    /// Also send a response with an id nobody asked for, every n-th call.
    pub stray_every: Option<u64>,
}

#[derive(Default)]
pub struct WsLog {
    pub ids: Mutex<Vec<u64>>,
    pub bad_calls: AtomicU64,
    pub methods: Mutex<std::collections::BTreeSet<String>>,
}

pub struct WsServer {
    pub server: Server,
    pub log: Arc<WsLog>,
}

pub fn ws_server(opts: WsOpts) -> WsServer {
    let log = Arc::new(WsLog::default());
    let l2 = log.clone();
    let server = spawn_server(move |sock, _stats| serve_ws(sock, l2.clone(), opts));
    WsServer { server, log }
}

async fn serve_ws(sock: TcpStream, log: Arc<WsLog>, opts: WsOpts) {
    let Ok(ws) = tokio_tungstenite::accept_async(sock).await else { return };
    let (mut sink, mut stream) = ws.split();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let writer = tokio::task::spawn_local(async move {
        while let Some(m) = rx.recv().await {
            if sink.send(tokio_tungstenite::tungstenite::Message::text(m)).await.is_err() {
                return;
            }
        }
    });
    let mut n = 0u64;
    while let Some(Ok(msg)) = stream.next().await {
        let tokio_tungstenite::tungstenite::Message::Text(text) = msg else { continue };
        let v: serde_json::Value = match serde_json::from_str(text.as_str()) {
            Ok(v) => v,
            Err(_) => {
                log.bad_calls.fetch_add(1, Ordering::SeqCst);
                continue;
            }
        };
        let (Some(id), Some("2.0"), Some(method)) =
            (v["id"].as_u64(), v["jsonrpc"].as_str(), v["method"].as_str())
        else {
            log.bad_calls.fetch_add(1, Ordering::SeqCst);
            continue;
        };
        n += 1;
        log.ids.lock().unwrap().push(id);
        log.methods.lock().unwrap().insert(method.to_string());
        let reply = if opts.error_every.is_some_and(|e| id % e == 0) {
            serde_json::json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32000, "message": "boom"}})
        } else {
            serde_json::json!({"jsonrpc": "2.0", "id": id, "result": {"echo": v["params"].clone()}})
        }
        .to_string();
        if opts.stray_every.is_some_and(|e| n % e == 0) {
            let _ = tx.send(serde_json::json!({"jsonrpc": "2.0", "id": 1u64 << 50, "result": 0}).to_string());
        }
        match opts.delay_even {
            Some(d) if id % 2 == 0 => {
                let tx = tx.clone();
                tokio::task::spawn_local(async move {
                    tokio::time::sleep(d).await;
                    let _ = tx.send(reply);
                });
            }
            _ => {
                let _ = tx.send(reply);
            }
        }
    }
    drop(tx);
    let _ = writer.await;
}

/// A fresh path in the test temp dir.
pub fn temp_path(name: &str) -> PathBuf {
    let dir = std::env::var_os("TEST_TMPDIR").map(PathBuf::from).unwrap_or_else(std::env::temp_dir);
    static N: AtomicUsize = AtomicUsize::new(0);
    dir.join(format!("perfkit-load-{}-{}-{name}", std::process::id(), N.fetch_add(1, Ordering::SeqCst)))
}

/// A port that nothing listens on (bound, then released).
pub fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// A config for a constant-rate HTTP run.
pub fn http_config(url: &str, rate: Option<f64>, threads: usize, connections: usize, secs: f64) -> perfkit_load::Config {
    let mut c = perfkit_load::Config::new(url, rate).unwrap();
    c.threads = threads;
    c.connections = connections;
    c.duration = Duration::from_secs_f64(secs);
    c
}


/// Run the command line in-process: (exit status, stdout, stderr).
pub fn cli<S: AsRef<str>>(args: &[S]) -> (i32, String, String) {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let argv = std::iter::once("perfkit-load").chain(args.iter().map(|a| a.as_ref()));
    let code = perfkit_load::cli::main_with(argv, &mut out, &mut err);
    (code, String::from_utf8(out).unwrap(), String::from_utf8(err).unwrap())
}

/// Load tests in one executable run one at a time (they measure rates on a shared machine).
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}
