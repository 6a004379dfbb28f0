//! Who reads the admin port, and what each reader may see. With mutual TLS
//! the client certificate decides: an operator's (`--operators`), or any
//! certificate with the operator's bearer token, sees everything; the
//! scrape role's (`--scrapers`) reads `/metrics` only; any other
//! certificate is a tenant's and sees its own reservations in
//! `/v1/status`, nothing else of other tenants. Without TLS there is no
//! caller identity and reads stay open, as on a loopback deployment (the
//! write still needs the token when one is configured: `operator_only`).

use crate::daemon::northbound::admin_token::AdminToken;
use crate::daemon::northbound::identity::Caller;

/// Who is reading.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Viewer {
    /// An operator's certificate, or the operator's bearer token.
    Operator,
    /// No caller identity: a connection without TLS.
    Anonymous,
    /// A certificate of the scrape role.
    Scraper(String),
    /// Any other certificate: a tenant.
    Tenant(String),
}

/// The admin port's reads.
#[derive(Clone, Copy, Debug)]
pub enum Read {
    Metrics,
    Status,
    Entries,
    /// The web page and what it reads (`/ui`, `/v1/fabric`,
    /// `/v1/timeline`, `/v1/events`): scoped as the status is.
    View,
}

impl Read {
    fn path(self) -> &'static str {
        match self {
            Read::Metrics => "/metrics",
            Read::Status => "/v1/status",
            Read::Entries => "/v1/entries",
            Read::View => "/ui",
        }
    }
}

impl Viewer {
    /// The viewer of a request: from its connection's certificate and the
    /// `Authorization` header it offers. A bearer token that is not the
    /// operator's is refused rather than ignored (the caller meant to be
    /// an operator and should learn it is not).
    pub fn of(
        caller: Option<&Caller>,
        token: Option<&AdminToken>,
        authorization: Option<&[u8]>,
    ) -> Result<Viewer, String> {
        if let (Some(token), Some(offered)) = (token, authorization) {
            if token.admits(offered) {
                return Ok(Viewer::Operator);
            }
            return Err("the bearer token is not the operator's".into());
        }
        Ok(match caller {
            None => Viewer::Anonymous,
            Some(c) if c.operator => Viewer::Operator,
            Some(c) if c.scraper => Viewer::Scraper(c.identity.clone()),
            Some(c) => Viewer::Tenant(c.identity.clone()),
        })
    }

    /// Whether this viewer may make `read`, and if so whose reservations
    /// it sees: `None` for everyone's, `Some(tenant)` for one tenant's.
    /// The refusal names the viewer and what would be let through.
    pub fn scope(&self, read: Read) -> Result<Option<String>, String> {
        let path = read.path();
        match (self, read) {
            (Viewer::Operator | Viewer::Anonymous, _) => Ok(None),
            (Viewer::Scraper(_), Read::Metrics) => Ok(None),
            (Viewer::Tenant(t), Read::Status | Read::View) => Ok(Some(t.clone())),
            (Viewer::Scraper(who), _) => Err(format!(
                "{path} is not for the scrape role ({who:?} reads /metrics only)"
            )),
            (Viewer::Tenant(who), Read::Metrics) => Err(format!(
                "{path} needs an operator's or the scrape role's client certificate; {who:?} is a tenant (--operators, --scrapers)"
            )),
            (Viewer::Tenant(who), Read::Entries) => Err(format!(
                "{path} needs an operator's client certificate; {who:?} is a tenant (--operators)"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caller(identity: &str, operator: bool, scraper: bool) -> Caller {
        Caller {
            identity: identity.into(),
            operator,
            scraper,
        }
    }

    #[test]
    fn the_certificate_decides_the_viewer_and_a_valid_token_makes_an_operator() {
        let token = AdminToken::parse("0123456789abcdef-operator").unwrap();
        let bearer = token.bearer();
        let acme = caller("acme", false, false);
        let of = |c: Option<&Caller>, t: Option<&AdminToken>, a: Option<&str>| {
            Viewer::of(c, t, a.map(str::as_bytes))
        };
        assert_eq!(of(None, None, None).unwrap(), Viewer::Anonymous);
        assert_eq!(of(None, Some(&token), None).unwrap(), Viewer::Anonymous);
        assert_eq!(
            of(Some(&acme), None, None).unwrap(),
            Viewer::Tenant("acme".into())
        );
        // Without a configured token, a header proves nothing.
        assert_eq!(
            of(Some(&acme), None, Some(&bearer)).unwrap(),
            Viewer::Tenant("acme".into())
        );
        assert_eq!(
            of(Some(&acme), Some(&token), Some(&bearer)).unwrap(),
            Viewer::Operator
        );
        assert_eq!(
            of(None, Some(&token), Some(&bearer)).unwrap(),
            Viewer::Operator
        );
        let wrong = of(
            Some(&acme),
            Some(&token),
            Some("Bearer nope-nope-nope-nope"),
        );
        assert!(wrong.unwrap_err().contains("not the operator's"));
        assert_eq!(
            of(Some(&caller("ops", true, false)), None, None).unwrap(),
            Viewer::Operator
        );
        assert_eq!(
            of(Some(&caller("prometheus", false, true)), None, None).unwrap(),
            Viewer::Scraper("prometheus".into())
        );
    }

    #[test]
    fn tenants_see_their_own_status_only_and_the_scrape_role_only_metrics() {
        for open in [Viewer::Operator, Viewer::Anonymous] {
            for read in [Read::Metrics, Read::Status, Read::Entries, Read::View] {
                assert_eq!(open.scope(read), Ok(None), "{open:?} {read:?}");
            }
        }
        let acme = Viewer::Tenant("acme".into());
        assert_eq!(acme.scope(Read::Status), Ok(Some("acme".into())));
        assert_eq!(acme.scope(Read::View), Ok(Some("acme".into())));
        let no = acme.scope(Read::Entries).unwrap_err();
        assert!(
            no.contains("/v1/entries") && no.contains("\"acme\""),
            "{no}"
        );
        let no = acme.scope(Read::Metrics).unwrap_err();
        assert!(no.contains("--scrapers"), "{no}");
        let prometheus = Viewer::Scraper("prometheus".into());
        assert_eq!(prometheus.scope(Read::Metrics), Ok(None));
        for read in [Read::Status, Read::Entries, Read::View] {
            let no = prometheus.scope(read).unwrap_err();
            assert!(no.contains("/metrics only"), "{no}");
        }
    }
}
