//! Why the engine refuses a request. The engine's own type, not a gRPC
//! status: it decides on requests, not on their transport; the NDSP
//! service maps each kind to its status code. A refused request changes
//! nothing.

use ndsp::types as nt;
use ndsp::ValidationError;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// A field is wrong given what the controller knows (registered jobs,
    /// whole servers, the time of receipt, flow counts); names the field.
    Invalid(ValidationError),
    /// The id is live with different contents.
    AlreadyExists(String),
    /// Nothing live by that id of the tenant.
    NotFound(String),
    /// The engine could not use its own records (a fault of the
    /// controller, not of the request).
    Internal(String),
}

impl Refusal {
    /// The refusal as the client reads it: for a field, `field: reason`.
    pub fn message(&self) -> String {
        match self {
            Refusal::Invalid(e) => e.to_string(),
            Refusal::AlreadyExists(m) | Refusal::NotFound(m) | Refusal::Internal(m) => m.clone(),
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message())
    }
}

impl std::error::Error for Refusal {}

impl From<ValidationError> for Refusal {
    fn from(e: ValidationError) -> Refusal {
        Refusal::Invalid(e)
    }
}

/// `field` is wrong: `reason`.
pub(super) fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Refusal {
    Refusal::Invalid(ValidationError::new(field, reason))
}

/// Refuse an announcement whose every occurrence has already ended when
/// the controller receives it (a stale forecast: a retry long after the
/// fact, an iteration announced after it ran); reserving it would hold
/// capacity for traffic that is over. `end_of_first` is the first
/// occurrence's end (its latest possible end where only rates are known).
pub(super) fn refuse_stale(
    field: &str,
    end_of_first: u64,
    recurrence: Option<nt::Recurrence>,
    now: u64,
) -> Result<(), Refusal> {
    let last_end = recurrence.map_or(end_of_first, |r| {
        end_of_first.saturating_add(r.period_ns.saturating_mul(u64::from(r.occurrences) - 1))
    });
    if last_end < now {
        return Err(invalid(
            field,
            format!(
                "the announced traffic ended {:.3} ms before the controller received it (a stale announcement); nothing was reserved",
                (now - last_end) as f64 / 1e6
            ),
        ));
    }
    Ok(())
}
