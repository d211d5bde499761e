//! The page's HTTP server, on loopback only. Every request passes [`guard`] first: a `Host` of
//! this server's own (a DNS-rebound name is refused); then, for everything but the page's own
//! static files (which hold nothing of the session), the session's secret in an `X-New-Token`
//! header, and for what changes anything or streams events an `Origin` of this server's own
//! (CSRF). The secret never travels in a cookie (a browser sends the cookies of 127.0.0.1 to
//! every port of it, so to any other local server a page makes it visit) nor in an address a
//! server sees: the page gets it from the address's fragment (`/#t=…`, never sent) and keeps it
//! in its tab's sessionStorage (of this origin, port included). Every answer carries a
//! Content-Security-Policy that allows nothing from elsewhere and no inline script.

use std::convert::Infallible;
use std::net::TcpListener;
use std::sync::Arc;
use std::thread;

use axum::extract::{Request, State};
use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, HOST, ORIGIN, REFERRER_POLICY,
    X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS,
};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures_util::stream::{self, Stream};
use serde_json::{Value, json};
use tokio::net::TcpListener as AsyncListener;
use tokio::runtime::Builder;
use tokio::sync::broadcast::error::RecvError;
use tokio::task;

use super::view::{PAGE_CSS, PAGE_HTML, PAGE_JS};
use super::{Job, Shared};
use new_core::tools::Mode;
use std::io;

/// The header that carries the secret on every request of the page's script.
pub const TOKEN_HEADER: &str = "x-new-token";

/// Nothing from elsewhere, no inline script or style, no framing.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; \
frame-ancestors 'none'";

/// Serves the page on `listener` (bound to loopback by the caller) from a thread of its own.
pub fn start(listener: TcpListener, shared: Arc<Shared>) -> io::Result<()> {
    listener.set_nonblocking(true)?;
    let runtime = Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("new-web")
        .enable_all()
        .build()?;
    let listener = runtime.block_on(async { AsyncListener::from_std(listener) })?;
    let app = Router::new()
        .route("/", get(page))
        .route("/app.js", get(script))
        .route("/app.css", get(style))
        .route("/api/state", get(state))
        .route("/events", get(events))
        .route("/api/send", post(send))
        .route("/api/goto", post(goto))
        .route("/api/answer", post(answer))
        .route("/api/stop", post(stop))
        .route("/api/mode", post(mode))
        .route("/api/exit", post(exit))
        .route("/api/files", post(files))
        .layer(middleware::from_fn_with_state(shared.clone(), guard))
        .with_state(shared);
    thread::Builder::new()
        .name("new-web".into())
        .spawn(move || {
            runtime.block_on(async move {
                if let Err(e) = axum::serve(listener, app).await {
                    tracing::error!(error = %e, "the page's server stopped");
                }
            })
        })?;
    Ok(())
}

/// The names this server answers to: its own address, by number or as `localhost`.
fn own_host(host: &str, port: u16) -> bool {
    host == format!("127.0.0.1:{port}") || host == format!("localhost:{port}")
}

fn own_origin(origin: &str, port: u16) -> bool {
    origin
        .strip_prefix("http://")
        .is_some_and(|host| own_host(host, port))
}

/// Equal secrets, compared in a time that does not tell how much of them matched.
fn same_secret(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

fn header_token(headers: &HeaderMap) -> Option<&str> {
    headers.get(TOKEN_HEADER).and_then(|v| v.to_str().ok())
}

/// The page's own files: the same for everyone, nothing of the session in them (a browser's
/// address bar cannot send a header, so these are served without the secret).
fn is_static(method: &Method, path: &str) -> bool {
    (method == Method::GET || method == Method::HEAD)
        && matches!(path, "/" | "/app.js" | "/app.css")
}

fn refuse(status: StatusCode, why: &'static str) -> Response {
    (status, why).into_response()
}

/// Every request's checks, then the answer's safety headers.
async fn guard(State(shared): State<Arc<Shared>>, request: Request, next: Next) -> Response {
    let mut response = check(&shared, request, next).await;
    let headers = response.headers_mut();
    headers.insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

async fn check(shared: &Shared, request: Request, next: Next) -> Response {
    let headers = request.headers();
    // DNS rebinding: a page of another name resolved to 127.0.0.1 sends its own name.
    let host = headers
        .get(HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    if !own_host(host, shared.port) {
        return refuse(
            StatusCode::FORBIDDEN,
            "this server answers to 127.0.0.1 only\n",
        );
    }
    // CSRF: what changes anything, and the event stream, only from this page. Browsers send an
    // Origin with every POST; a stream asked for by another site would carry its own.
    let changes = request.method() != Method::GET && request.method() != Method::HEAD;
    let streams = request.uri().path() == "/events";
    let origin = headers.get(ORIGIN).map(|o| o.to_str().unwrap_or("?"));
    if (changes || streams) && origin.is_some_and(|o| !own_origin(o, shared.port)) {
        return refuse(StatusCode::FORBIDDEN, "another site's request\n");
    }
    if changes && origin.is_none() {
        return refuse(StatusCode::FORBIDDEN, "a request without its origin\n");
    }
    if let Some(site) = headers.get("sec-fetch-site").and_then(|s| s.to_str().ok())
        && (changes || streams)
        && site != "same-origin"
    {
        return refuse(StatusCode::FORBIDDEN, "another site's request\n");
    }
    let path = request.uri().path();
    if is_static(request.method(), path) {
        return next.run(request).await;
    }
    if header_token(headers).is_some_and(|t| same_secret(t, &shared.token)) {
        // The page has its secret: the launcher file that gave it is no longer needed.
        shared.launched();
        return next.run(request).await;
    }
    refuse(
        StatusCode::UNAUTHORIZED,
        "open the address `new web` printed (its secret goes in an X-New-Token header)\n",
    )
}

fn typed(kind: &'static str, body: &'static str) -> Response {
    ([(CONTENT_TYPE, kind)], body).into_response()
}

async fn page() -> Response {
    typed("text/html; charset=utf-8", PAGE_HTML)
}

async fn script() -> Response {
    typed("text/javascript; charset=utf-8", PAGE_JS)
}

async fn style() -> Response {
    typed("text/css; charset=utf-8", PAGE_CSS)
}

/// The page's state, with the question waiting for an answer if one does (a page loaded again
/// shows it).
async fn state(State(shared): State<Arc<Shared>>) -> Response {
    let state = shared.state.lock().expect("state").clone();
    let pending = shared
        .pending
        .lock()
        .expect("pending")
        .as_ref()
        .map_or(Value::Null, |q| q.1.clone());
    let body = match state.strip_prefix('{') {
        Some(rest) => format!("{{\"pending\":{pending},{rest}"),
        None => state,
    };
    ([(CONTENT_TYPE, "application/json")], body).into_response()
}

/// The events as server-sent events, from now on.
async fn events(
    State(shared): State<Arc<Shared>>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let receiver = shared.events.subscribe();
    let stream = stream::unfold(receiver, |mut receiver| async move {
        match receiver.recv().await {
            Ok(text) => Some((Ok(Event::default().data(text)), receiver)),
            // A page too slow for the stream is told to read the state again.
            Err(RecvError::Lagged(_)) => {
                Some((Ok(Event::default().data(r#"{"type":"state"}"#)), receiver))
            }
            Err(RecvError::Closed) => None,
        }
    });
    Sse::new(stream).keep_alive(KeepAlive::default())
}

fn field(value: &Value, name: &str) -> Option<String> {
    value[name].as_str().map(str::to_string)
}

fn missing() -> Response {
    refuse(StatusCode::BAD_REQUEST, "a field is missing\n")
}

fn queue(shared: &Shared, job: Job) -> Response {
    match shared.jobs.lock().expect("jobs").send(job) {
        Ok(()) => StatusCode::ACCEPTED.into_response(),
        Err(_) => refuse(StatusCode::SERVICE_UNAVAILABLE, "the session has ended\n"),
    }
}

async fn send(State(shared): State<Arc<Shared>>, Json(body): Json<Value>) -> Response {
    match field(&body, "text") {
        Some(text) => queue(&shared, Job::Line(text)),
        None => missing(),
    }
}

async fn goto(State(shared): State<Arc<Shared>>, Json(body): Json<Value>) -> Response {
    match field(&body, "id") {
        Some(id) => queue(&shared, Job::Goto(id)),
        None => missing(),
    }
}

async fn mode(State(shared): State<Arc<Shared>>, Json(body): Json<Value>) -> Response {
    match field(&body, "mode").as_deref().and_then(Mode::parse) {
        Some(m) => queue(&shared, Job::Mode(m)),
        None => refuse(StatusCode::BAD_REQUEST, "strict, default or permissive\n"),
    }
}

async fn answer(State(shared): State<Arc<Shared>>, Json(body): Json<Value>) -> Response {
    let (Some(id), Some(action)) = (body["id"].as_u64(), field(&body, "action")) else {
        return refuse(StatusCode::BAD_REQUEST, "an id and an action\n");
    };
    if !matches!(
        action.as_str(),
        "approve" | "approve-session" | "approve-always" | "deny" | "yes" | "no"
    ) {
        return refuse(
            StatusCode::BAD_REQUEST,
            "approve, approve-session, approve-always, deny, yes or no\n",
        );
    }
    if shared
        .pending
        .lock()
        .expect("pending")
        .as_ref()
        .map(|q| q.0)
        != Some(id)
    {
        return refuse(StatusCode::CONFLICT, "no such question waits\n");
    }
    let _ = shared.answers.lock().expect("answers").send((id, action));
    StatusCode::ACCEPTED.into_response()
}

/// The file panel: a folder's entries or a file's text, read-only, inside WORKDIR (refused: 403,
/// with the reason).
async fn files(State(shared): State<Arc<Shared>>, Json(body): Json<Value>) -> Response {
    let path = field(&body, "path").unwrap_or_default();
    let panel = shared.files.clone();
    let opened = task::spawn_blocking(move || panel.open(&path)).await;
    match opened {
        Ok(Ok(value)) => Json(value).into_response(),
        Ok(Err(why)) => (StatusCode::FORBIDDEN, Json(json!({"error": why}))).into_response(),
        Err(e) => refuse_owned(StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")),
    }
}

fn refuse_owned(status: StatusCode, why: String) -> Response {
    (status, why).into_response()
}

async fn stop(State(shared): State<Arc<Shared>>) -> Response {
    shared.stop();
    StatusCode::ACCEPTED.into_response()
}

async fn exit(State(shared): State<Arc<Shared>>) -> Response {
    shared.stop();
    queue(&shared, Job::Exit)
}
