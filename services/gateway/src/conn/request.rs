//! The per-request service of a connection: each request gets its peer's `ConnectInfo`, a
//! read deadline on its body, and (HTTP/2) holds its connection's activity until its response
//! body is dropped.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use bytes::Bytes;
use hyper::body::{Frame, Incoming, SizeHint};
use tower::Service as _;

use super::Peer;
use super::activity::{Activity, InFlight};
use super::policy::{Policy, closed};

/// The per-request service of a connection: the peer's extensions, the body's read deadline,
/// and (HTTP/2) the count of requests in flight that the idle timeout watches.
#[derive(Clone)]
pub(super) struct ConnService {
    peer: Peer,
    router: Router,
    listener: &'static str,
    body_timeout: Duration,
    activity: Option<Arc<Activity>>,
}

pub(super) fn service(
    peer: Peer,
    router: Router,
    policy: &Policy,
    activity: Option<Arc<Activity>>,
) -> ConnService {
    ConnService {
        peer,
        router,
        listener: policy.inner.listener,
        body_timeout: policy.inner.limits.body_read_timeout(),
        activity,
    }
}

impl hyper::service::Service<hyper::Request<Incoming>> for ConnService {
    type Response = axum::response::Response;
    type Error = std::convert::Infallible;
    type Future = Answer;

    fn call(&self, req: hyper::Request<Incoming>) -> Answer {
        let mut req = req.map(|body| {
            if hyper::body::Body::is_end_stream(&body) {
                Body::new(body)
            } else {
                Body::new(TimedBody::new(body, self.body_timeout, self.listener))
            }
        });
        match &self.peer {
            Peer::Plain {
                remote,
                connect_info: true,
            } => {
                req.extensions_mut().insert(ConnectInfo(*remote));
            }
            Peer::Plain { .. } => {}
            Peer::Tls(tls) => {
                req.extensions_mut().insert(ConnectInfo(tls.remote));
                req.extensions_mut().insert(ConnectInfo(tls.clone()));
            }
        }
        let held = self.activity.as_ref().map(|a| a.start());
        Answer {
            response: self.router.clone().call(req),
            held,
        }
    }
}

/// The router's answer, its body holding the request's [`InFlight`] (HTTP/2).
pub(super) struct Answer {
    response: axum::routing::future::RouteFuture<std::convert::Infallible>,
    held: Option<InFlight>,
}

impl Future for Answer {
    type Output = Result<axum::response::Response, std::convert::Infallible>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let response = match Pin::new(&mut this.response).poll(cx) {
            Poll::Ready(Ok(response)) => response,
            Poll::Ready(Err(never)) => match never {},
            Poll::Pending => return Poll::Pending,
        };
        Poll::Ready(Ok(match this.held.take() {
            Some(held) => response.map(|body| Body::new(Held { body, _held: held })),
            None => response,
        }))
    }
}

/// A response body that holds its request's [`InFlight`] until it is dropped.
struct Held {
    body: Body,
    _held: InFlight,
}

impl hyper::body::Body for Held {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        hyper::body::Body::poll_frame(Pin::new(&mut self.body), cx)
    }

    fn is_end_stream(&self) -> bool {
        hyper::body::Body::is_end_stream(&self.body)
    }

    fn size_hint(&self) -> SizeHint {
        hyper::body::Body::size_hint(&self.body)
    }
}

/// A request body that must arrive in full by a deadline (`body_read_timeout_ms`); past it,
/// reading fails, the body is dropped unread and the connection closes once answered.
struct TimedBody {
    body: Incoming,
    deadline: tokio::time::Instant,
    /// Armed the first time the body is not ready (a body that came with its head never
    /// touches the timer).
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
    listener: &'static str,
}

impl TimedBody {
    fn new(body: Incoming, timeout: Duration, listener: &'static str) -> Self {
        Self {
            body,
            deadline: tokio::time::Instant::now() + timeout,
            sleep: None,
            listener,
        }
    }
}

/// The error a [`TimedBody`] ends with.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within the body read timeout")]
struct BodyTimedOut;

impl hyper::body::Body for TimedBody {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        if let Poll::Ready(frame) = hyper::body::Body::poll_frame(Pin::new(&mut this.body), cx) {
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        let deadline = this.deadline;
        let sleep = this
            .sleep
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        if sleep.as_mut().poll(cx).is_ready() {
            closed(this.listener, "body_timeout");
            return Poll::Ready(Some(Err(Box::new(BodyTimedOut))));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        hyper::body::Body::is_end_stream(&self.body)
    }

    fn size_hint(&self) -> SizeHint {
        hyper::body::Body::size_hint(&self.body)
    }
}
