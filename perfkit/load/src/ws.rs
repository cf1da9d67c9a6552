//! WebSocket JSON-RPC 2.0 connection: calls go out on the connection's constant-rate schedule
//! with a fresh `id` each, many may be in flight, responses are matched by `id`.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde::Deserialize;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

use crate::driver::Driver;
use crate::transport::{ConnectTimes, Connector, Stream};
use crate::recording::Outcome;
use crate::schedule::request_number;

pub type WsStream = WebSocketStream<Stream>;

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
    pub connector: Connector,
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub template: RpcTemplate,
}

/// Open the connection (TCP, TLS) and do the WebSocket handshake.
pub async fn connect(target: &WsTarget) -> Result<(WsStream, ConnectTimes), String> {
    let (stream, times) = target.connector.connect().await.map_err(|e| e.to_string())?;
    let mut req = target.url.as_str().into_client_request().map_err(|e| e.to_string())?;
    for (k, v) in &target.headers {
        let name: tokio_tungstenite::tungstenite::http::HeaderName =
            k.parse().map_err(|_| format!("invalid header name {k:?}"))?;
        let value = HeaderValue::from_str(v).map_err(|_| format!("invalid header value for {k}"))?;
        req.headers_mut().insert(name, value);
    }
    let (ws, _resp) = tokio_tungstenite::client_async(req, stream).await.map_err(|e| e.to_string())?;
    Ok((ws, times))
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

/// Calls sent and not yet answered: id → (intended, sent).
type Pending = HashMap<u64, (Instant, Instant)>;

/// The connection is lost: every call in flight failed with `outcome`.
fn fail_pending(pending: &mut Pending, d: &Driver, outcome: Outcome) {
    let mut rec = d.rec();
    for (_, (intended, _)) in pending.drain() {
        rec.failed(outcome, intended);
    }
}

/// File one answer: matched to its call, a late answer to a call that timed out, or unmatched.
fn answer(text: Option<&str>, done: Instant, pending: &mut Pending, expired: &mut HashSet<u64>, d: &mut Driver) {
    let Some((id, outcome)) = text.and_then(classify) else {
        d.rec().unmatched += 1;
        return;
    };
    if let Some((intended, sent)) = pending.remove(&id) {
        d.rec().completed(outcome, intended, sent, done, text.map_or(0, |t| t.len() as u64));
        d.connected_ok();
    } else if expired.remove(&id) {
        d.rec().late_answers += 1;
    } else {
        d.rec().unmatched += 1;
    }
}

/// Drive one WebSocket connection for the whole run: calls go out on the driver's schedule, many
/// may be in flight, answers are matched by id.
pub async fn run_connection(
    initial: WsStream,
    target: Arc<WsTarget>,
    mut d: Driver,
    index: usize,
    connections: usize,
    timeout: Duration,
) {
    let check_every = (timeout / 4).clamp(Duration::from_millis(5), Duration::from_millis(100));
    let stop_t = tokio::time::Instant::from_std(d.stop);
    let mut ws = Some(initial);
    let mut pending = Pending::new();
    let mut expired = HashSet::new();
    let mut k: u64 = 0;
    let mut next_check = Instant::now() + check_every;
    loop {
        let send_at = d.peek();
        if send_at.is_none() && (pending.is_empty() || Instant::now() >= d.stop) {
            break;
        }
        if ws.is_none() {
            if send_at.is_none() {
                break;
            }
            ws = d.reconnect(connect(&target)).await;
            continue;
        }
        let s = ws.as_mut().unwrap();
        let can_send = send_at.is_some() && (!d.closed_loop() || pending.is_empty());
        let check_t = tokio::time::Instant::from_std(next_check.min(d.stop));
        enum Step {
            Msg(Option<Result<Message, tokio_tungstenite::tungstenite::Error>>),
            Send,
            Check,
            Stop,
        }
        let step = tokio::select! {
            biased;
            m = s.next() => Step::Msg(m),
            _ = d.wait_until(send_at.unwrap_or(d.stop)), if can_send => Step::Send,
            _ = tokio::time::sleep_until(check_t) => Step::Check,
            _ = tokio::time::sleep_until(stop_t) => Step::Stop,
        };
        match step {
            Step::Stop => break,
            Step::Send => {
                let intended = d.take();
                let id = request_number(index, connections, k);
                k += 1;
                let msg = Message::text(target.template.render(id));
                let sent = Instant::now();
                d.rec().sent(intended, sent);
                match tokio::time::timeout_at(stop_t, s.send(msg)).await {
                    Err(_) => {
                        d.finish(pending.values().copied().chain([(intended, sent)]));
                        return;
                    }
                    Ok(Ok(())) => {
                        pending.insert(id, (intended, sent));
                    }
                    Ok(Err(_)) => {
                        d.rec().failed(Outcome::WriteError, intended);
                        fail_pending(&mut pending, &d, Outcome::ReadError);
                        ws = None;
                        d.back_off().await;
                    }
                }
            }
            Step::Check => {
                let now = Instant::now();
                next_check = now + check_every;
                pending.retain(|id, (intended, sent)| {
                    let keep = *sent + timeout > now;
                    if !keep {
                        d.rec().timed_out(*intended, *sent, *sent + timeout);
                        expired.insert(*id);
                    }
                    keep
                });
            }
            Step::Msg(m) => {
                let done = Instant::now();
                match m {
                    Some(Ok(Message::Text(t))) => answer(Some(t.as_str()), done, &mut pending, &mut expired, &mut d),
                    Some(Ok(Message::Binary(b))) => {
                        answer(std::str::from_utf8(&b).ok(), done, &mut pending, &mut expired, &mut d)
                    }
                    Some(Ok(_)) => {} // ping/pong/frame: tungstenite answers pings itself
                    Some(Err(_)) | None => {
                        fail_pending(&mut pending, &d, Outcome::ReadError);
                        ws = None;
                        d.back_off().await;
                    }
                }
            }
        }
    }
    d.finish(pending.values().copied());
}
