//! What one tenant may ask of the controller, so that no client exhausts
//! the fabric's reservations, the switches' tables or the controller:
//! live reservations per tenant, new reservations per request, and
//! requests per second (a token bucket per tenant). A request over a limit
//! is `RESOURCE_EXHAUSTED`, naming the limit and the flag that sets it, and
//! changes nothing. The request size is bounded by the gRPC server
//! (`--max-request-bytes`).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use tonic::Status;

/// The limits (0 turns one off).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// Live (scheduled or installed) reservations one tenant may hold.
    pub live_per_tenant: usize,
    /// Reservations one request may create (demands of a batch).
    pub new_per_request: usize,
    /// Sustained requests per second per tenant.
    pub requests_per_s: f64,
    /// Requests a tenant may send at once above the sustained rate.
    pub burst: f64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            live_per_tenant: 10_000,
            new_per_request: 4096,
            requests_per_s: 1000.0,
            burst: 2000.0,
        }
    }
}

/// Tenants tracked by the rate limiter at most; the idlest is forgotten
/// beyond it (a full bucket is the same as no bucket).
const MAX_TRACKED_TENANTS: usize = 10_000;

struct Bucket {
    tokens: f64,
    at: Instant,
}

/// The limits applied, with each tenant's token bucket.
pub struct TenantLimits {
    pub limits: Limits,
    buckets: Mutex<HashMap<String, Bucket>>,
}

fn exhausted(what: String) -> Status {
    Status::resource_exhausted(what)
}

impl TenantLimits {
    pub fn new(limits: Limits) -> TenantLimits {
        TenantLimits {
            limits,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Take one request of `tenant` at `now`, or refuse it.
    pub fn request(&self, tenant: &str, now: Instant) -> Result<(), Status> {
        let l = self.limits;
        if l.requests_per_s <= 0.0 {
            return Ok(());
        }
        let capacity = l.burst.max(1.0);
        let mut buckets = self.buckets.lock().expect("limits lock");
        if buckets.len() >= MAX_TRACKED_TENANTS && !buckets.contains_key(tenant) {
            if let Some(idlest) = buckets
                .iter()
                .min_by_key(|(_, b)| b.at)
                .map(|(k, _)| k.clone())
            {
                buckets.remove(&idlest);
            }
        }
        let b = buckets.entry(tenant.to_string()).or_insert(Bucket {
            tokens: capacity,
            at: now,
        });
        let elapsed = now.saturating_duration_since(b.at).as_secs_f64();
        b.tokens = (b.tokens + elapsed * l.requests_per_s).min(capacity);
        b.at = now;
        if b.tokens < 1.0 {
            return Err(exhausted(format!(
                "tenant {tenant:?} is over {} requests/s (burst {}); retry later (--max-requests-per-s, --request-burst)",
                l.requests_per_s, l.burst
            )));
        }
        b.tokens -= 1.0;
        Ok(())
    }

    /// May `tenant`, holding `live` reservations, create `new` more?
    pub fn reservations(&self, tenant: &str, live: usize, new: usize) -> Result<(), Status> {
        let l = self.limits;
        if l.new_per_request > 0 && new > l.new_per_request {
            return Err(exhausted(format!(
                "the request would create {new} reservations; at most {} per request (--max-new-reservations-per-request)",
                l.new_per_request
            )));
        }
        if l.live_per_tenant > 0 && live + new > l.live_per_tenant {
            return Err(exhausted(format!(
                "tenant {tenant:?} holds {live} live reservations and asks for {new} more; at most {} (--max-live-reservations)",
                l.live_per_tenant
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_tenant_over_its_rate_is_refused_and_others_are_not() {
        let a = TenantLimits::new(Limits {
            requests_per_s: 10.0,
            burst: 5.0,
            ..Limits::default()
        });
        let t0 = Instant::now();
        for _ in 0..5 {
            a.request("t", t0).unwrap();
        }
        let e = a.request("t", t0).unwrap_err();
        assert_eq!(e.code(), tonic::Code::ResourceExhausted);
        assert!(
            e.message().contains("--max-requests-per-s"),
            "{}",
            e.message()
        );
        a.request("other", t0).unwrap();
        // 100 ms later one token is back.
        let later = t0 + Duration::from_millis(100);
        a.request("t", later).unwrap();
        assert!(a.request("t", later).is_err());
    }

    #[test]
    fn live_and_per_request_limits_name_their_flags() {
        let a = TenantLimits::new(Limits {
            live_per_tenant: 10,
            new_per_request: 4,
            ..Limits::default()
        });
        a.reservations("t", 6, 4).unwrap();
        let e = a.reservations("t", 7, 4).unwrap_err();
        assert!(
            e.message().contains("holds 7 live reservations"),
            "{}",
            e.message()
        );
        let e = a.reservations("t", 0, 5).unwrap_err();
        assert!(e.message().contains("--max-new-reservations-per-request"));
        let off = TenantLimits::new(Limits {
            live_per_tenant: 0,
            new_per_request: 0,
            requests_per_s: 0.0,
            burst: 0.0,
        });
        off.reservations("t", 1 << 30, 1 << 20).unwrap();
        off.request("t", Instant::now()).unwrap();
    }
}
