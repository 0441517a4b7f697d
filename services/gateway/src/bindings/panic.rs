//! A panic in a request's handler is caught here, logged, counted
//! (`a2a_panics_total{where="request"}`) and answered with an internal error in the request's
//! own binding: a gRPC status (INTERNAL) for a gRPC request (either service), a JSON-RPC error
//! (-32603, `id` null: the request's id is not known here) on the JSON-RPC path, and a
//! `google.rpc.Status` body (HTTP 500) elsewhere. Without it a panic would drop the connection
//! (hyper's task ends), taking every other stream of an HTTP/2 connection with it.
//!
//! No allocation and no box per request: the handler's future is wrapped in place. A panic
//! while a response body streams (an SSE or gRPC stream) happens after the answer began; it
//! ends that stream only (the connection's task catches it in tokio).

use std::any::Any;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use a2a_types::A2aError;
use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use futures::FutureExt;
use futures::future::CatchUnwind;
use http::header;

/// The binding a request speaks, as far as its panic's answer needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Binding {
    Grpc,
    JsonRpc,
    Http,
}

impl Binding {
    fn of(req: &Request) -> Self {
        let grpc = req
            .headers()
            .get(header::CONTENT_TYPE)
            .is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"));
        if grpc {
            return Self::Grpc;
        }
        let path = req.uri().path();
        match path.strip_prefix(super::jsonrpc::PATH) {
            Some("" | "/") => Self::JsonRpc,
            _ => Self::Http,
        }
    }
}

/// The layer: `Router::layer(CatchPanicLayer)`.
#[derive(Debug, Clone, Copy, Default)]
pub struct CatchPanicLayer;

impl<S> tower::Layer<S> for CatchPanicLayer {
    type Service = CatchPanic<S>;

    fn layer(&self, inner: S) -> Self::Service {
        CatchPanic { inner }
    }
}

#[derive(Debug, Clone)]
pub struct CatchPanic<S> {
    inner: S,
}

impl<S> tower::Service<Request> for CatchPanic<S>
where
    S: tower::Service<Request, Response = Response>,
{
    type Response = Response;
    type Error = S::Error;
    type Future = Caught<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request) -> Self::Future {
        let binding = Binding::of(&req);
        // Kept for the log of a panic: a clone of the URI shares its bytes (no copy).
        let uri = req.uri().clone();
        // A panic in `call` itself (before a future exists) is caught too.
        match std::panic::catch_unwind(AssertUnwindSafe(|| self.inner.call(req))) {
            Ok(future) => Caught {
                inner: Some(AssertUnwindSafe(future).catch_unwind()),
                binding,
                uri,
            },
            Err(panic) => {
                answer_logged(binding, &uri, panic);
                Caught {
                    inner: None,
                    binding,
                    uri,
                }
            }
        }
    }
}

pin_project_lite::pin_project! {
    /// The handler's future, its panic turned into an answer.
    pub struct Caught<F> {
        #[pin]
        inner: Option<CatchUnwind<AssertUnwindSafe<F>>>,
        binding: Binding,
        uri: http::Uri,
    }
}

impl<F, E> Future for Caught<F>
where
    F: Future<Output = Result<Response, E>>,
{
    type Output = Result<Response, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let Some(inner) = this.inner.as_pin_mut() else {
            return Poll::Ready(Ok(answer(*this.binding)));
        };
        match ready!(inner.poll(cx)) {
            Ok(result) => Poll::Ready(result),
            Err(panic) => Poll::Ready(Ok(answer_logged(*this.binding, this.uri, panic))),
        }
    }
}

fn answer_logged(binding: Binding, uri: &http::Uri, panic: Box<dyn Any + Send>) -> Response {
    let path = uri.path();
    let what = panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(not a string)");
    tracing::error!(path, panic = what, "a request handler panicked");
    metrics::counter!("a2a_panics_total", "where" => "request").increment(1);
    answer(binding)
}

/// The internal error in `binding`'s format. The panic's text is logged, never answered.
fn answer(binding: Binding) -> Response {
    let err = A2aError::Internal("internal error".into());
    match binding {
        Binding::Grpc => tonic::Status::from(&err).into_http::<axum::body::Body>(),
        Binding::JsonRpc => (
            [(header::CONTENT_TYPE, "application/json")],
            super::jsonrpc::error_body(&serde_json::Value::Null, &err),
        )
            .into_response(),
        Binding::Http => super::rest::errors::response(&err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_binding_is_told_by_content_type_then_path() {
        let req = |path: &str, ct: &str| {
            let mut r = Request::new(axum::body::Body::empty());
            *r.uri_mut() = path.parse().unwrap();
            r.headers_mut()
                .insert(header::CONTENT_TYPE, ct.parse().unwrap());
            r
        };
        assert_eq!(
            Binding::of(&req(
                "/lf.a2a.v1.A2AService/SendMessage",
                "application/grpc+proto"
            )),
            Binding::Grpc
        );
        assert_eq!(
            Binding::of(&req("/a2a/jsonrpc", "application/json")),
            Binding::JsonRpc
        );
        assert_eq!(
            Binding::of(&req("/a2a/jsonrpc/", "application/json")),
            Binding::JsonRpc
        );
        assert_eq!(
            Binding::of(&req("/a2a/jsonrpcx", "application/json")),
            Binding::Http
        );
        assert_eq!(
            Binding::of(&req("/a2a/rest/tasks/x", "application/json")),
            Binding::Http
        );
        assert_eq!(answer(Binding::Http).status(), 500);
        let grpc = answer(Binding::Grpc);
        assert_eq!(grpc.status(), 200);
        assert_eq!(grpc.headers()["grpc-status"], "13");
    }
}
