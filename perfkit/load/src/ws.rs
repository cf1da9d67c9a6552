//! WebSocket JSON-RPC 2.0 connection: calls go out on the connection's constant-rate schedule
//! with a fresh `id` each, many may be in flight, responses are matched by `id`.

use std::cell::RefCell;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde::Deserialize;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

use crate::http::Backoff;
use crate::recording::{Outcome, Recorder};
use crate::schedule::{request_number, Pacer};

pub type WsStream = WebSocketStream<TcpStream>;

/// The call template: a JSON-RPC request object whose `id` is replaced per call.
#[derive(Debug, Clone)]
pub struct RpcTemplate {
    /// The template serialized without `id`, minus its leading `{`.
    rest: String,
}

impl RpcTemplate {
    /// Parse a template; it must be a JSON object (a `jsonrpc` member is added if missing).
    pub fn parse(text: &str) -> Result<RpcTemplate, String> {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| format!("the JSON-RPC template is not valid JSON: {e}"))?;
        let serde_json::Value::Object(mut obj) = value else {
            return Err("the JSON-RPC template must be a JSON object".into());
        };
        if !obj.get("method").is_some_and(|m| m.is_string()) {
            return Err("the JSON-RPC template needs a string \"method\" member".into());
        }
        obj.remove("id");
        obj.entry("jsonrpc").or_insert_with(|| serde_json::Value::String("2.0".into()));
        let s = serde_json::to_string(&serde_json::Value::Object(obj)).unwrap();
        Ok(RpcTemplate { rest: s[1..].to_string() })
    }

    /// The call with the given id.
    pub fn render(&self, id: u64) -> String {
        if self.rest == "}" {
            format!("{{\"id\":{id}}}")
        } else {
            format!("{{\"id\":{id},{}", self.rest)
        }
    }
}

/// What every WebSocket connection of a run uses.
#[derive(Debug)]
pub struct WsTarget {
    pub addr: SocketAddr,
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub template: RpcTemplate,
}

/// Open the TCP connection and do the WebSocket handshake.
pub async fn connect(target: &WsTarget) -> Result<WsStream, String> {
    let tcp = TcpStream::connect(target.addr).await.map_err(|e| e.to_string())?;
    tcp.set_nodelay(true).map_err(|e| e.to_string())?;
    let mut req = target.url.as_str().into_client_request().map_err(|e| e.to_string())?;
    for (k, v) in &target.headers {
        let name: tokio_tungstenite::tungstenite::http::HeaderName =
            k.parse().map_err(|_| format!("invalid header name {k:?}"))?;
        let value = HeaderValue::from_str(v).map_err(|_| format!("invalid header value for {k}"))?;
        req.headers_mut().insert(name, value);
    }
    let (ws, _resp) = tokio_tungstenite::client_async(req, tcp).await.map_err(|e| e.to_string())?;
    Ok(ws)
}

#[derive(Deserialize)]
struct RpcResponse {
    #[serde(default)]
    id: Option<serde_json::Value>,
    #[serde(default)]
    error: Option<serde::de::IgnoredAny>,
}

/// Classify one text message: `Some((id, outcome))` for a response with a numeric id.
fn classify(text: &str) -> Option<(u64, Outcome)> {
    let resp: RpcResponse = serde_json::from_str(text).ok()?;
    let id = resp.id?.as_u64()?;
    Some((id, if resp.error.is_some() { Outcome::RpcError } else { Outcome::RpcOk }))
}

/// The connection is lost: every call in flight is a read error (at least one error is counted).
fn fail_pending(pending: &mut HashMap<u64, (Instant, Instant)>, rec: &Rc<RefCell<Recorder>>) {
    let now = Instant::now();
    let mut r = rec.borrow_mut();
    let n = pending.len().max(1);
    pending.clear();
    for _ in 0..n {
        r.error(Outcome::ReadError, now);
    }
}

/// Drive one WebSocket connection for the whole run.
#[allow(clippy::too_many_arguments)]
pub async fn run_connection(
    initial: WsStream,
    target: Arc<WsTarget>,
    pacer: Pacer,
    index: usize,
    connections: usize,
    timeout: Duration,
    end: Instant,
    rec: Rc<RefCell<Recorder>>,
) {
    let end_t = tokio::time::Instant::from_std(end);
    let check_every = (timeout / 4).clamp(Duration::from_millis(5), Duration::from_millis(100));
    let mut ws = Some(initial);
    let mut backoff = Backoff::new();
    let mut pending: HashMap<u64, (Instant, Instant)> = HashMap::new();
    let mut k: u64 = 0;
    let mut next_check = Instant::now() + check_every;
    loop {
        if Instant::now() >= end {
            break;
        }
        if ws.is_none() {
            match tokio::time::timeout_at(end_t, connect(&target)).await {
                Err(_) => break,
                Ok(Ok(s)) => ws = Some(s),
                Ok(Err(_)) => {
                    let now = Instant::now();
                    rec.borrow_mut().error(Outcome::ConnectError, now);
                    let wake = (now + backoff.next()).min(end);
                    tokio::time::sleep_until(tokio::time::Instant::from_std(wake)).await;
                    continue;
                }
            }
        }
        let s = ws.as_mut().unwrap();
        let closed_loop = matches!(pacer, Pacer::Max);
        let can_send = !closed_loop || pending.is_empty();
        let send_at = pacer.intended(k).unwrap_or_else(Instant::now);
        let send_at_t = tokio::time::Instant::from_std(send_at.min(end));
        let check_t = tokio::time::Instant::from_std(next_check.min(end));
        enum Step {
            Msg(Option<Result<Message, tokio_tungstenite::tungstenite::Error>>),
            Send,
            Check,
            End,
        }
        let step = tokio::select! {
            biased;
            m = s.next() => Step::Msg(m),
            _ = tokio::time::sleep_until(send_at_t), if can_send => Step::Send,
            _ = tokio::time::sleep_until(check_t) => Step::Check,
            _ = tokio::time::sleep_until(end_t) => Step::End,
        };
        match step {
            Step::End => break,
            Step::Send => {
                if send_at >= end {
                    // The schedule is done; wait for the responses still in flight until the end.
                    if pending.is_empty() {
                        break;
                    }
                    tokio::time::sleep_until(end_t.min(check_t)).await;
                    continue;
                }
                let id = request_number(index, connections, k);
                let msg = Message::text(target.template.render(id));
                let sent = Instant::now();
                k += 1;
                let r = tokio::time::timeout_at(end_t, s.send(msg)).await;
                match r {
                    Err(_) => break,
                    Ok(Ok(())) => {
                        pending.insert(id, (send_at.min(sent), sent));
                    }
                    Ok(Err(_)) => {
                        let now = Instant::now();
                        rec.borrow_mut().error(Outcome::WriteError, now);
                        let n = pending.len();
                        pending.clear();
                        for _ in 0..n {
                            rec.borrow_mut().error(Outcome::ReadError, now);
                        }
                        ws = None;
                        let wake = (now + backoff.next()).min(end);
                        tokio::time::sleep_until(tokio::time::Instant::from_std(wake)).await;
                    }
                }
            }
            Step::Check => {
                let now = Instant::now();
                next_check = now + check_every;
                let expired: Vec<u64> =
                    pending.iter().filter(|(_, (_, sent))| *sent + timeout <= now).map(|(id, _)| *id).collect();
                for id in expired {
                    pending.remove(&id);
                    rec.borrow_mut().error(Outcome::Timeout, now);
                }
            }
            Step::Msg(m) => {
                let done = Instant::now();
                match m {
                    Some(Ok(Message::Text(t))) => match classify(t.as_str()) {
                        Some((id, outcome)) => match pending.remove(&id) {
                            Some((intended, sent)) => {
                                rec.borrow_mut().response(outcome, intended, sent, done, t.len() as u64);
                                backoff.reset();
                            }
                            None => rec.borrow_mut().error(Outcome::Unmatched, done),
                        },
                        None => rec.borrow_mut().error(Outcome::Unmatched, done),
                    },
                    Some(Ok(Message::Binary(b))) => match std::str::from_utf8(&b).ok().and_then(classify) {
                        Some((id, outcome)) => match pending.remove(&id) {
                            Some((intended, sent)) => {
                                rec.borrow_mut().response(outcome, intended, sent, done, b.len() as u64);
                                backoff.reset();
                            }
                            None => rec.borrow_mut().error(Outcome::Unmatched, done),
                        },
                        None => rec.borrow_mut().error(Outcome::Unmatched, done),
                    },
                    Some(Ok(_)) => {} // ping/pong/frame: tungstenite answers pings itself
                    Some(Err(_)) | None => {
                        fail_pending(&mut pending, &rec);
                        ws = None;
                        let wake = (done + backoff.next()).min(end);
                        tokio::time::sleep_until(tokio::time::Instant::from_std(wake)).await;
                    }
                }
            }
        }
    }
}
