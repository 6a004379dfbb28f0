//! What the controller tells `WatchEvents` streams: reservation changes,
//! link state, withdrawn predictions and forecast mismatches, sent on one
//! broadcast channel after the switches acknowledged the change; each
//! stream filters by tenant and job.

use std::sync::Arc;

use crate::daemon::persistence::state_records::Reservation;

/// A reservation changed (cancelled, re-planned): for `WatchEvents`.
#[derive(Clone, Debug)]
pub struct Changed {
    pub tenant: String,
    /// Shared with the state: every watcher's copy of the event is a pointer.
    pub reservation: Arc<Reservation>,
}

/// A reservation a network event affects: who may see it.
#[derive(Clone, Debug)]
pub struct Affected {
    pub tenant: String,
    pub job_id: Option<String>,
    pub reservation_id: String,
}

/// What `WatchEvents` streams relay (each stream filters by tenant and job).
#[derive(Clone, Debug)]
pub enum Event {
    /// A reservation changed.
    Reservation(Changed),
    /// A fabric link went down or came up; sent before the
    /// `Reservation` events of the reservations it re-planned.
    Link {
        down: bool,
        /// The link in the direction the operator named it.
        link: ndsp::types::LinkId,
        observed_unix_ns: u64,
        affected: Vec<Affected>,
    },
    /// A job's predicted reservations were withdrawn (T+5).
    PredictionWithdrawn {
        tenant: String,
        job_id: String,
        reason: String,
        reservation_ids: Vec<String>,
    },
    /// Observed traffic of a reserved flow differs from its forecast.
    Mismatch {
        tenant: String,
        job_id: Option<String>,
        mismatch: ndsp::types::ForecastMismatch,
    },
}

impl Event {
    /// `r` changed; this is it now.
    pub fn reservation(r: impl Into<Arc<Reservation>>) -> Event {
        let r = r.into();
        Event::Reservation(Changed {
            tenant: r.tenant.clone(),
            reservation: r,
        })
    }
}
