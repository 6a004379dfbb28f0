//! The admin endpoint for Prometheus and operators, routed by axum:
//! `GET /metrics` (OpenMetrics text), `GET /v1/status` and
//! `GET /v1/entries/<switch>` (JSON, see `api.rs`), the operator's web page
//! `GET /ui` with what it reads (`ui.rs`), `GET /healthz`, and
//! the one write: `POST /v1/links/<switch>:<port>/down` (or `/up`), the
//! operator's link state (`foresight link`). With an admin token
//! (`--admin-token-file`) the write needs `Authorization: Bearer <token>`
//! (401 without it, 403 with another). Without TLS reads stay open, for
//! Prometheus; with mutual TLS the client certificate's role scopes them
//! (`access.rs`): a tenant sees its own reservations only.
//!
//! A replica that follows (replicas on etcd) answers `GET /healthz` with
//! "following" and everything else with 503 naming the leader (and its
//! address in the `foresight-leader` header); a starting controller answers
//! 503 to all. Once it leads, the same port serves the routes above, on
//! open connections too.
//!
//! Connections are served by hyper with a deadline for the request head
//! and a cap on its size, so a slow or oversized client cannot hold a
//! task; handlers get a deadline and requests a body limit (no endpoint
//! takes a body).

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, Request, State};
use axum::http::{header, Method, StatusCode, Uri};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Router};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use serde::Serialize;
use tokio::net::TcpListener;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::timeout::TimeoutLayer;

mod access;
mod ui;

use access::{Read, Viewer};

use super::admin_token::AdminToken;
use super::identity::{Caller, Mtls};
use crate::daemon::control::controller::Controller;
use crate::daemon::monitoring::metrics;

/// Time a client has to send the request line and headers.
const HEAD_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest request head read (hyper answers 431 beyond it).
const MAX_HEAD_BYTES: usize = 16 * 1024;
/// Largest request body accepted (answered 413 beyond it).
const MAX_BODY_BYTES: usize = 1024;
/// Time a handler has; a link change waits for the switches' acks.
const HANDLER_TIMEOUT: Duration = Duration::from_secs(30);

type Shared = Arc<Controller>;

/// Serve the admin endpoint on `listener` until the process exits; over
/// mutual TLS when `mtls` is given. Each request goes to the routes `apps`
/// holds at that moment (a follower's, then the leader's).
pub async fn serve(
    listener: TcpListener,
    apps: tokio::sync::watch::Receiver<Router>,
    mtls: Option<Mtls>,
) {
    let app = Router::new().fallback_service(tower::service_fn(move |request: Request| {
        let current = apps.borrow().clone();
        tower::ServiceExt::oneshot(current, request)
    }));
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let app = app.clone();
        let mtls = mtls.clone();
        tokio::spawn(async move {
            let mut http = hyper::server::conn::http1::Builder::new();
            http.timer(TokioTimer::new())
                .header_read_timeout(HEAD_TIMEOUT)
                .max_buf_size(MAX_HEAD_BYTES);
            let outcome = match mtls {
                None => {
                    let service = TowerToHyperService::new(app);
                    http.serve_connection(TokioIo::new(stream), service).await
                }
                Some(mtls) => {
                    // The handshake gets the same deadline as a request head.
                    let accepted =
                        tokio::time::timeout(HEAD_TIMEOUT, mtls.http.accept(stream)).await;
                    let Ok(Ok(tls)) = accepted else {
                        tracing::debug!("admin TLS handshake failed or timed out");
                        return;
                    };
                    let caller = tls
                        .get_ref()
                        .1
                        .peer_certificates()
                        .and_then(|c| c.first())
                        .and_then(|c| mtls.caller(c.as_ref()).ok());
                    let Some(caller) = caller else {
                        return;
                    };
                    let service = TowerToHyperService::new(app.layer(Extension(caller)));
                    http.serve_connection(TokioIo::new(tls), service).await
                }
            };
            if let Err(e) = outcome {
                tracing::debug!(%e, "http connection");
            }
        });
    }
}

/// Before the controller runs (reading its state, reaching the switches):
/// every request is 503.
pub fn starting() -> Router {
    Router::new().fallback(|| async { error(503, "the controller is starting") })
}

/// A follower's routes: alive, and not the one to ask.
pub fn following(replica: Arc<crate::daemon::persistence::ha::Replica>) -> Router {
    let healthz =
        || async { ([(header::CONTENT_TYPE, "text/plain")], "following\n").into_response() };
    let elsewhere = move || {
        let replica = replica.clone();
        async move {
            let leader = replica.leader().await;
            let message = match &leader {
                Some(l) => format!(
                    "this replica follows; the leader is {} at http://{}",
                    l.replica, l.http
                ),
                None => "this replica follows; no leader is elected right now".to_string(),
            };
            let mut answer = error(503, &message);
            if let Some(value) = leader.and_then(|l| header::HeaderValue::from_str(&l.http).ok()) {
                answer.headers_mut().insert("foresight-leader", value);
            }
            answer
        }
    };
    Router::new()
        .route("/healthz", get(healthz))
        .fallback(elsewhere)
}

/// The routes, with the body limit and the handler deadline.
pub fn router(controller: Shared, token: Option<AdminToken>, mtls: bool) -> Router {
    let gate = Gate {
        token: token.map(Arc::new),
        mtls,
    };
    let reads = Router::new()
        .route("/metrics", get(scrape))
        .route("/v1/status", get(status))
        .route("/v1/entries/{switch}", get(entries))
        .route("/ui", get(ui::page))
        .route("/ui/{asset}", get(ui::asset))
        .route("/v1/fabric", get(ui::fabric))
        .route("/v1/timeline", get(ui::timeline))
        .route("/v1/events", get(ui::events))
        .route_layer(middleware::from_fn_with_state(gate.clone(), identify));
    let writes = Router::new()
        .route("/v1/links/{link}/{verb}", post(change_link))
        .route_layer(middleware::from_fn_with_state(gate, operator_only));
    Router::new()
        .route("/healthz", get(healthz))
        .merge(reads)
        .merge(writes)
        .fallback(unrouted)
        .method_not_allowed_fallback(unrouted)
        .layer(RequestBodyLimitLayer::new(MAX_BODY_BYTES))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::SERVICE_UNAVAILABLE,
            HANDLER_TIMEOUT,
        ))
        .with_state(controller)
}

/// What lets the write through.
#[derive(Clone)]
struct Gate {
    token: Option<Arc<AdminToken>>,
    /// Connections are mutual TLS: an operator's certificate lets it through.
    mtls: bool,
}

/// Lets a write through from an operator's certificate (mutual TLS), with
/// the token when one is configured, or from anyone when neither is.
async fn operator_only(State(gate): State<Gate>, request: Request, next: Next) -> Response {
    let caller = request.extensions().get::<Caller>().cloned();
    if caller.as_ref().is_some_and(|c| c.operator) {
        return next.run(request).await;
    }
    let Some(token) = gate.token else {
        if gate.mtls {
            let who = caller.map_or_else(String::new, |c| format!(" ({})", c.identity));
            return error(
                403,
                &format!("this write needs an operator's client certificate{who} is not one (--operators)"),
            );
        }
        return next.run(request).await;
    };
    match request.headers().get(header::AUTHORIZATION) {
        None => {
            let mut answer = error(
                401,
                "this write needs the operator's token: Authorization: Bearer <token> (foresight link --admin-token-file)",
            );
            answer
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, "Bearer".parse().unwrap());
            answer
        }
        Some(offered) if token.admits(offered.as_bytes()) => next.run(request).await,
        Some(_) => error(403, "the bearer token is not the operator's"),
    }
}

/// Who reads (`access.rs`), attached to the request for its handler; a
/// bearer token that is not the operator's is refused here.
async fn identify(State(gate): State<Gate>, mut request: Request, next: Next) -> Response {
    let viewer = Viewer::of(
        request.extensions().get::<Caller>(),
        gate.token.as_deref(),
        request
            .headers()
            .get(header::AUTHORIZATION)
            .map(|v| v.as_bytes()),
    );
    match viewer {
        Ok(viewer) => {
            request.extensions_mut().insert(viewer);
            next.run(request).await
        }
        Err(why) => error(403, &why),
    }
}

async fn scrape(
    State(controller): State<Shared>,
    Extension(viewer): Extension<Viewer>,
) -> Response {
    if let Err(why) = viewer.scope(Read::Metrics) {
        return error(403, &why);
    }
    let status = controller.status().await;
    let body = controller.metrics.render(&status);
    ([(header::CONTENT_TYPE, metrics::CONTENT_TYPE)], body).into_response()
}

async fn healthz() -> Response {
    ([(header::CONTENT_TYPE, "text/plain")], "ok\n").into_response()
}

async fn status(
    State(controller): State<Shared>,
    Extension(viewer): Extension<Viewer>,
) -> Response {
    match viewer.scope(Read::Status) {
        Ok(tenant) => pretty_json(&controller.status_for(tenant.as_deref()).await),
        Err(why) => error(403, &why),
    }
}

async fn entries(
    State(controller): State<Shared>,
    Extension(viewer): Extension<Viewer>,
    Path(switch): Path<String>,
) -> Response {
    if let Err(why) = viewer.scope(Read::Entries) {
        return error(403, &why);
    }
    match controller.entries(&switch).await {
        Ok(view) => pretty_json(&view),
        Err((code, message)) => error(code, &message),
    }
}

/// `POST /v1/links/<node>:<port>/<down|up>`.
async fn change_link(
    State(controller): State<Shared>,
    Path((link, verb)): Path<(String, String)>,
    uri: Uri,
) -> Response {
    let down = match verb.as_str() {
        "down" => true,
        "up" => false,
        _ => return no_such_command(&uri),
    };
    let Some((node, port)) = link.rsplit_once(':') else {
        return no_such_command(&uri);
    };
    let Ok(port) = port.parse::<u32>() else {
        return error(400, &format!("{node}:{port}: the port must be a number"));
    };
    // The change runs in its own task: hyper drops this handler when the
    // client goes away, and the deadline drops it when it is due, but a
    // link change once begun must finish (events, switch writes).
    let node = node.to_string();
    let change = tokio::spawn(async move { controller.set_link(&node, port, down).await });
    match change.await {
        Ok(Ok(view)) => pretty_json(&view),
        Ok(Err((code, message))) => error(code, &message),
        Err(e) => error(500, &format!("the link change failed: {e}")),
    }
}

/// Anything no route takes: a 404 that names what exists for GET and
/// POST, 405 for other methods.
async fn unrouted(method: Method, uri: Uri) -> Response {
    match method {
        Method::POST => no_such_command(&uri),
        Method::GET => error(
            404,
            &format!(
                "no such path {}; try /ui, /metrics, /v1/status, /v1/entries/<switch>",
                uri.path()
            ),
        ),
        _ => (
            StatusCode::METHOD_NOT_ALLOWED,
            [
                (header::CONTENT_TYPE, "text/plain"),
                (header::ALLOW, "GET, POST"),
            ],
            "only GET and POST\n",
        )
            .into_response(),
    }
}

fn no_such_command(uri: &Uri) -> Response {
    error(
        404,
        &format!(
            "no such command {}; POST /v1/links/<switch>:<port>/down or /up",
            uri.path()
        ),
    )
}

/// A view as indented JSON (operators read it with curl).
fn pretty_json(view: &impl Serialize) -> Response {
    match serde_json::to_vec_pretty(view) {
        Ok(body) => ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
        Err(e) => error(500, &format!("cannot encode the answer: {e}")),
    }
}

/// `{"error": message}` with status `code`.
fn error(code: u16, message: &str) -> Response {
    let code = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = serde_json::json!({ "error": message }).to_string();
    (code, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}
