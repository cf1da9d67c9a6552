//! Connect and read timeouts per request on a shared reqwest client.
//!
//! Why: reqwest sets both on the client, and a client owns its connection pool; a caller whose
//! timeouts change on every call (`timeout=deadline - now()`) would need a new pool every time. Here
//! the connect timeout travels with the request as a task-local that a connector layer reads when it
//! starts a connection (and captures, so the limit holds even if hyper finishes the connection in
//! another task), and the read timeout bounds the wait for the head and for each body chunk, as
//! reqwest's own read timeout does.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

tokio::task_local! {
    static CONNECT_TIMEOUT: Option<Duration>;
}

/// Run `fut` with `connect` as the connect timeout of the connections it opens.
pub fn with_connect_timeout<F: Future>(connect: Option<Duration>, fut: F) -> impl Future<Output = F::Output> {
    CONNECT_TIMEOUT.scope(connect, fut)
}

/// `fut` bounded by `read` (None: unbounded); `Err(())` when the time ran out.
pub async fn within<F: Future>(read: Option<Duration>, fut: F) -> Result<F::Output, ()> {
    match read {
        None => Ok(fut.await),
        Some(d) => tokio::time::timeout(d, fut).await.map_err(|_| ()),
    }
}

#[derive(Clone, Copy, Default)]
pub struct ConnectTimeoutLayer;

impl<S> tower_layer::Layer<S> for ConnectTimeoutLayer {
    type Service = ConnectTimeout<S>;

    fn layer(&self, inner: S) -> ConnectTimeout<S> {
        ConnectTimeout { inner }
    }
}

#[derive(Clone)]
pub struct ConnectTimeout<S> {
    inner: S,
}

impl<S, R> tower_service::Service<R> for ConnectTimeout<S>
where
    S: tower_service::Service<R, Error = BoxError>,
    S::Future: Send + 'static,
    S::Response: 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = BoxFuture<Result<S::Response, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: R) -> Self::Future {
        let limit = CONNECT_TIMEOUT.try_with(|d| *d).ok().flatten();
        let fut = self.inner.call(req);
        Box::pin(async move {
            match limit {
                None => fut.await,
                Some(d) => match tokio::time::timeout(d, fut).await {
                    Ok(r) => r,
                    // an io TimedOut inside a connect error: reqwest reports is_connect() and is_timeout()
                    Err(_) => Err(Box::new(std::io::Error::new(std::io::ErrorKind::TimedOut, "connect timed out"))
                        as BoxError),
                },
            }
        })
    }
}
