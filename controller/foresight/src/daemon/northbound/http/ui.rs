//! The operator's web page on the admin port: `/ui` (the page and its
//! script and style, embedded in the binary: nothing is fetched from
//! anywhere else), and what it reads beside `/v1/status`: `/v1/fabric`,
//! `/v1/timeline?past_s=&ahead_s=` and `/v1/events`, the daemon's events
//! as server-sent events (a tenant's certificate sees its own). All are
//! reads under the same rules as `/v1/status` (`access.rs`).

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::{Path, RawQuery, State};
use axum::http::header;
use axum::response::sse::{Event as SseEvent, Sse};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::watch;

use super::access::{Read, Viewer};
use super::{error, pretty_json, Shared};
use crate::daemon::control::events::Event;
use crate::daemon::northbound::live_view::MAX_WINDOW_S;

/// A comment on an idle event stream this often, so that proxies and the
/// browser keep it open and a dead client is noticed.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

const INDEX_HTML: &str = include_str!("../../../../ui/index.html");
const APP_JS: &str = include_str!("../../../../ui/app.js");
const APP_CSS: &str = include_str!("../../../../ui/app.css");

/// `GET /ui`.
pub async fn page(Extension(viewer): Extension<Viewer>) -> Response {
    serve_asset(&viewer, "index.html")
}

/// `GET /ui/<asset>`.
pub async fn asset(Extension(viewer): Extension<Viewer>, Path(name): Path<String>) -> Response {
    serve_asset(&viewer, &name)
}

fn serve_asset(viewer: &Viewer, name: &str) -> Response {
    if let Err(why) = viewer.scope(Read::View) {
        return error(403, &why);
    }
    let (kind, body) = match name {
        "" | "index.html" => ("text/html; charset=utf-8", INDEX_HTML),
        "app.js" => ("text/javascript; charset=utf-8", APP_JS),
        "app.css" => ("text/css; charset=utf-8", APP_CSS),
        other => return error(404, &format!("no such page asset {other}; the page is /ui")),
    };
    (
        [
            (header::CONTENT_TYPE, kind),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

/// `GET /v1/fabric`.
pub async fn fabric(
    State(controller): State<Shared>,
    Extension(viewer): Extension<Viewer>,
) -> Response {
    match viewer.scope(Read::View) {
        Ok(_) => pretty_json(&controller.fabric_view()),
        Err(why) => error(403, &why),
    }
}

/// `GET /v1/timeline?past_s=30&ahead_s=60`.
pub async fn timeline(
    State(controller): State<Shared>,
    Extension(viewer): Extension<Viewer>,
    RawQuery(query): RawQuery,
) -> Response {
    let tenant = match viewer.scope(Read::View) {
        Ok(t) => t,
        Err(why) => return error(403, &why),
    };
    let (past_s, ahead_s) = match window(query.as_deref().unwrap_or("")) {
        Ok(w) => w,
        Err(why) => return error(400, &why),
    };
    pretty_json(
        &controller
            .timeline(tenant.as_deref(), past_s, ahead_s)
            .await,
    )
}

/// The window a timeline query asks for: `past_s` and `ahead_s`, seconds
/// (default 30 and 60), each 0 to [`MAX_WINDOW_S`].
fn window(query: &str) -> Result<(f64, f64), String> {
    let (mut past, mut ahead) = (30.0, 60.0);
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let slot = match key {
            "past_s" => &mut past,
            "ahead_s" => &mut ahead,
            _ => {
                return Err(format!(
                    "unknown query parameter {key:?}; want past_s, ahead_s"
                ))
            }
        };
        *slot = value
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && (0.0..=MAX_WINDOW_S).contains(v))
            .ok_or_else(|| format!("{key}={value:?}: want seconds from 0 to {MAX_WINDOW_S}"))?;
    }
    Ok((past, ahead))
}

/// `GET /v1/events`: one server-sent event per daemon event the viewer
/// may see (`reservation`, `link`, `prediction_withdrawn`, `mismatch`, and
/// `resync` when this stream fell behind and missed some), with a JSON
/// body naming what changed; the page then reads the views again. A viewer
/// of the whole fabric also gets `state` whenever a commit the switches
/// acknowledged changed anything (admissions, installs, expiries: the
/// counter of such commits, coalesced); a tenant's stream does not, as it
/// would tell when other tenants' reservations change.
pub async fn events(
    State(controller): State<Shared>,
    Extension(viewer): Extension<Viewer>,
) -> Response {
    let tenant = match viewer.scope(Read::View) {
        Ok(t) => t,
        Err(why) => return error(403, &why),
    };
    let rx = controller.events.subscribe();
    let settled = tenant.is_none().then(|| controller.settled.subscribe());
    let stream = futures::stream::unfold(
        (rx, settled, tenant),
        |(mut rx, mut settled, tenant)| async move {
            let event = loop {
                tokio::select! {
                    got = rx.recv() => match got {
                        Ok(e) => {
                            if let Some(sse) = relayed(&e, tenant.as_deref()) {
                                break sse;
                            }
                        }
                        Err(RecvError::Lagged(missed)) => {
                            break SseEvent::default().event("resync").data(missed.to_string());
                        }
                        Err(RecvError::Closed) => return None,
                    },
                    Some(commits) = next_commit(&mut settled) => {
                        break SseEvent::default().event("state").data(commits.to_string());
                    }
                    () = tokio::time::sleep(KEEP_ALIVE) => break SseEvent::default().comment("alive"),
                }
            };
            Some((Ok::<_, Infallible>(event), (rx, settled, tenant)))
        },
    );
    Sse::new(stream).into_response()
}

/// The count of settled commits once it moves; never, for a stream that
/// does not follow it (or once the controller is gone).
async fn next_commit(settled: &mut Option<watch::Receiver<u64>>) -> Option<u64> {
    if let Some(rx) = settled {
        if rx.changed().await.is_ok() {
            return Some(*rx.borrow_and_update());
        }
    }
    std::future::pending().await
}

/// The event as the page gets it, if `tenant` (None: everyone's) may see
/// it. Link changes are fabric-wide, as link loads are in the status.
fn relayed(e: &Event, tenant: Option<&str>) -> Option<SseEvent> {
    let mine = |t: &str| tenant.is_none_or(|me| me == t);
    let (kind, body) = match e {
        Event::Reservation(c) if mine(&c.tenant) => (
            "reservation",
            serde_json::json!({
                "id": c.reservation.id,
                "revision": c.reservation.revision,
                "status": c.reservation.status.name(),
                "advisory": c.reservation.advisory,
            }),
        ),
        Event::Link {
            down,
            link,
            observed_unix_ns,
            ..
        } => (
            "link",
            serde_json::json!({
                "link": format!("{}:{} -> {}:{}", link.from_node, link.from_port, link.to_node, link.to_port),
                "down": down,
                "observed_unix_ns": observed_unix_ns,
            }),
        ),
        Event::PredictionWithdrawn {
            tenant: t,
            job_id,
            reason,
            reservation_ids,
        } if mine(t) => (
            "prediction_withdrawn",
            serde_json::json!({"job_id": job_id, "reason": reason, "ids": reservation_ids}),
        ),
        Event::Mismatch {
            tenant: t,
            mismatch,
            ..
        } if mine(t) => (
            "mismatch",
            serde_json::json!({"id": mismatch.reservation_id, "flow_id": mismatch.flow_id}),
        ),
        _ => return None,
    };
    Some(SseEvent::default().event(kind).data(body.to_string()))
}

#[cfg(test)]
mod tests {
    use super::{relayed, window};
    use crate::daemon::control::events::{Affected, Event};
    use crate::daemon::persistence::state_keys::tests::reservation;

    #[test]
    fn a_tenants_stream_relays_its_own_reservations_and_every_link_change() {
        let mut bobs = reservation(1);
        bobs.tenant = "bob".into();
        let bobs = Event::reservation(bobs);
        assert!(relayed(&bobs, Some("alice")).is_none());
        assert!(relayed(&bobs, Some("bob")).is_some());
        assert!(relayed(&bobs, None).is_some());
        let withdrawn = Event::PredictionWithdrawn {
            tenant: "bob".into(),
            job_id: "j".into(),
            reason: "r".into(),
            reservation_ids: vec!["r1".into()],
        };
        assert!(relayed(&withdrawn, Some("alice")).is_none());
        let link = Event::Link {
            down: true,
            link: ndsp::types::LinkId {
                from_node: "leaf1".into(),
                from_port: 3,
                to_node: "spine1".into(),
                to_port: 1,
            },
            observed_unix_ns: 1,
            affected: vec![Affected {
                tenant: "bob".into(),
                job_id: None,
                reservation_id: "r1".into(),
            }],
        };
        assert!(relayed(&link, Some("alice")).is_some());
    }

    #[test]
    fn a_window_is_two_bounded_numbers_or_an_error_that_names_the_parameter() {
        assert_eq!(window(""), Ok((30.0, 60.0)));
        assert_eq!(window("past_s=5&ahead_s=120.5"), Ok((5.0, 120.5)));
        for (bad, says) in [
            ("past_s=-1", "past_s"),
            ("ahead_s=NaN", "ahead_s"),
            ("ahead_s=99999", "0 to 3600"),
            ("since=3", "unknown query parameter \"since\""),
        ] {
            let e = window(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
