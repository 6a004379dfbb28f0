//! The access matrix: every identity against every NDSP RPC, every admin
//! read and every admin write of a controller on BMv2 with mutual TLS
//! (`--operators ops --scrapers prometheus` and an admin token). The
//! certificates are made by `openssl`: a CA, the controller's, tenants
//! `alice` (A) and `bob` (B), the operator `ops`, the scrape role's
//! `prometheus`, and a rogue CA's certificate that claims to be `alice`.
//!
//! `MATRIX` is what each identity must get; the BMv2 test checks every
//! cell against the running controller. docs/security.md shows the same
//! table, rendered from `MATRIX`: `the_documented_matrix_is_the_tested_one`
//! fails when the committed page differs (`FORESIGHT_BLESS=1` rewrites it).

mod common;

use std::collections::BTreeSet;
use std::path::Path;

use common::openssl::{self, Ca};
use common::tls::Pem;
use common::{demand, register, ring_allreduce, Fabric};
use ndsp::proto::{self, demand_signaling_client::DemandSignalingClient};
use tonic::transport::Channel;

/// The identities, in the matrix's column order: (column, what it is).
const IDENTITIES: [(&str, &str); 8] = [
    ("plain text", "no TLS at all"),
    ("no cert", "TLS without a client certificate"),
    (
        "rogue CA",
        "a certificate claiming CN alice, signed by another CA",
    ),
    ("tenant A", "alice's certificate"),
    ("tenant B", "bob's certificate"),
    ("operator", "ops's certificate (`--operators ops`)"),
    (
        "scraper",
        "prometheus's certificate (`--scrapers prometheus`)",
    ),
    (
        "B + token",
        "bob's certificate with the operator's bearer token",
    ),
];

/// What a request is, in the matrix's row order.
#[derive(Clone, Copy, Debug)]
enum Endpoint {
    /// An NDSP RPC whose header names tenant A, on A's objects.
    AsA(Rpc),
    /// An NDSP RPC in the caller's own name (its certificate's tenant),
    /// on A's objects.
    OwnName(Rpc),
    Get(&'static str),
    Post(&'static str),
}

#[derive(Clone, Copy, Debug)]
enum Rpc {
    Handshake,
    RegisterTopology,
    SubmitDemand,
    SubmitCollective,
    GetReservation,
    ListReservations,
    WatchEvents,
    ReportDeviation,
    Cancel,
}

use Endpoint::{AsA, Get, OwnName, Post};

const NO: &str = "no session";
const OK: &str = "OK";
const DENIED: &str = "PERMISSION_DENIED";
const NOT_FOUND: &str = "NOT_FOUND";
const AS_A_ANSWERS: [&str; 8] = [NO, NO, NO, OK, DENIED, OK, DENIED, DENIED];

/// Every row: the endpoint as the docs name it, and each identity's answer.
const MATRIX: &[(&str, Endpoint, [&str; 8])] = &[
    ("NDSP Handshake, as A", AsA(Rpc::Handshake), AS_A_ANSWERS),
    (
        "NDSP RegisterTopology, as A",
        AsA(Rpc::RegisterTopology),
        AS_A_ANSWERS,
    ),
    (
        "NDSP SubmitDemand, as A",
        AsA(Rpc::SubmitDemand),
        AS_A_ANSWERS,
    ),
    (
        "NDSP SubmitCollective, as A",
        AsA(Rpc::SubmitCollective),
        AS_A_ANSWERS,
    ),
    (
        "NDSP GetReservation, as A",
        AsA(Rpc::GetReservation),
        AS_A_ANSWERS,
    ),
    (
        "NDSP ListReservations, as A",
        AsA(Rpc::ListReservations),
        [NO, NO, NO, "OK: A's", DENIED, "OK: A's", DENIED, DENIED],
    ),
    (
        "NDSP WatchEvents, as A",
        AsA(Rpc::WatchEvents),
        AS_A_ANSWERS,
    ),
    (
        "NDSP ReportDeviation, as A",
        AsA(Rpc::ReportDeviation),
        AS_A_ANSWERS,
    ),
    ("NDSP Cancel, as A", AsA(Rpc::Cancel), AS_A_ANSWERS),
    (
        "NDSP GetReservation of A's, own name",
        OwnName(Rpc::GetReservation),
        [NO, NO, NO, OK, NOT_FOUND, NOT_FOUND, DENIED, NOT_FOUND],
    ),
    (
        "NDSP ListReservations, own name",
        OwnName(Rpc::ListReservations),
        [
            NO,
            NO,
            NO,
            "OK: A's",
            "OK: none of A's",
            "OK: none of A's",
            DENIED,
            "OK: none of A's",
        ],
    ),
    (
        "NDSP ReportDeviation on A's, own name",
        OwnName(Rpc::ReportDeviation),
        [NO, NO, NO, OK, NOT_FOUND, NOT_FOUND, DENIED, NOT_FOUND],
    ),
    (
        "NDSP Cancel of A's, own name",
        OwnName(Rpc::Cancel),
        [NO, NO, NO, OK, NOT_FOUND, NOT_FOUND, DENIED, NOT_FOUND],
    ),
    (
        "GET /healthz",
        Get("/healthz"),
        [NO, NO, NO, "200", "200", "200", "200", "200"],
    ),
    (
        "GET /metrics",
        Get("/metrics"),
        [NO, NO, NO, "403", "403", "200", "200", "200"],
    ),
    (
        "GET /v1/status",
        Get("/v1/status"),
        [
            NO,
            NO,
            NO,
            "200: own only",
            "200: own only",
            "200: every tenant's",
            "403",
            "200: every tenant's",
        ],
    ),
    (
        "GET /ui (the operator's page)",
        Get("/ui"),
        [NO, NO, NO, "200", "200", "200", "403", "200"],
    ),
    (
        "GET /v1/fabric",
        Get("/v1/fabric"),
        [NO, NO, NO, "200", "200", "200", "403", "200"],
    ),
    (
        "GET /v1/timeline",
        Get(TIMELINE),
        [
            NO,
            NO,
            NO,
            "200: own only",
            "200: own only",
            "200: every tenant's",
            "403",
            "200: every tenant's",
        ],
    ),
    (
        "GET /v1/entries/leaf1",
        Get("/v1/entries/leaf1"),
        [NO, NO, NO, "403", "403", "200", "403", "200"],
    ),
    (
        "POST /v1/links/leaf1:3/down",
        Post("/v1/links/leaf1:3/down"),
        [NO, NO, NO, "401", "401", "200", "401", "200"],
    ),
    (
        "POST /v1/links/leaf1:3/up",
        Post("/v1/links/leaf1:3/up"),
        [NO, NO, NO, "401", "401", "200", "401", "200"],
    ),
];

/// The page's timeline over a window wide enough for every test reservation.
const TIMELINE: &str = "/v1/timeline?past_s=3600&ahead_s=3600";

const DOC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/security.md");
const BEGIN: &str = "<!-- access-matrix: generated by controller/foresight/tests/access_matrix_bmv2.rs; do not edit -->";
const END: &str = "<!-- access-matrix: end -->";

/// The matrix as the docs show it: a markdown table and its legend.
fn render() -> String {
    let mut o = String::from("| Endpoint |");
    for (name, _) in IDENTITIES {
        o.push_str(&format!(" {name} |"));
    }
    o.push_str("\n| --- |");
    o.push_str(&" --- |".repeat(IDENTITIES.len()));
    o.push('\n');
    for (name, _, answers) in MATRIX {
        o.push_str(&format!("| {name} |"));
        for a in answers {
            o.push_str(&format!(" {a} |"));
        }
        o.push('\n');
    }
    o.push_str("\nIdentities:\n\n");
    for (name, what) in IDENTITIES {
        o.push_str(&format!("- **{name}**: {what}\n"));
    }
    o
}

#[test]
fn the_documented_matrix_is_the_tested_one() {
    let doc = std::fs::read_to_string(DOC).expect("docs/security.md");
    let (head, rest) = doc
        .split_once(BEGIN)
        .expect("docs/security.md holds the access matrix's begin marker");
    let (_, tail) = rest
        .split_once(END)
        .expect("docs/security.md holds the access matrix's end marker");
    let want = format!("{head}{BEGIN}\n{}{END}{tail}", render());
    if doc != want {
        if std::env::var_os("FORESIGHT_BLESS").is_some() {
            std::fs::write(DOC, &want).unwrap();
            return;
        }
        panic!(
            "docs/security.md's access matrix is not the tested one; run this test with FORESIGHT_BLESS=1 to rewrite it:\n{}",
            render()
        );
    }
}

/// Tenant A's objects for one identity's column.
struct Objects {
    job: String,
    demand: String,
    collective: String,
    /// The demand's and the collective's reservation ids.
    demand_reservation: String,
    collective_reservation: String,
    /// Where this column's requests start (columns do not overlap in time).
    start_ns: u64,
}

const A: &str = "alice";
const HOSTS: [&str; 2] = ["10.0.1.1", "10.0.2.1"];

fn head(tenant: &str) -> Option<proto::RequestHeader> {
    Some(proto::RequestHeader {
        protocol_version: Some(ndsp::PROTOCOL_VERSION.into()),
        tenant: tenant.into(),
    })
}

fn demand_request(tenant: &str, id: &str, start_ns: u64) -> proto::SubmitDemandRequest {
    proto::SubmitDemandRequest {
        header: head(tenant),
        reference_unix_ns: 0,
        demands: vec![demand(
            id,
            HOSTS[0],
            HOSTS[1],
            start_ns,
            200_000_000,
            100_000_000,
            None,
        )],
    }
}

fn collective_request(
    tenant: &str,
    id: &str,
    job: &str,
    start_ns: u64,
) -> proto::SubmitCollectiveRequest {
    let mut r = ring_allreduce(id, job, 16, 1, start_ns, 1_000_000_000);
    r.header = head(tenant);
    r
}

fn register_request(tenant: &str, job: &str) -> proto::RegisterTopologyRequest {
    let mut r = register(job, &HOSTS);
    r.header = head(tenant);
    r
}

/// A makes this column's objects, with its own certificate.
async fn objects_of_a(a: &mut DemandSignalingClient<Channel>, column: usize) -> Objects {
    let start_ns = 120_000_000_000 + column as u64 * 2_000_000_000;
    let job = format!("job-{column}");
    a.register_topology(register_request(A, &job))
        .await
        .unwrap();
    let demand = format!("d-{column}");
    let d = a
        .submit_demand(demand_request(A, &demand, start_ns))
        .await
        .unwrap()
        .into_inner();
    let collective = format!("c-{column}");
    let c = a
        .submit_collective(collective_request(A, &collective, &job, start_ns))
        .await
        .unwrap()
        .into_inner();
    Objects {
        job,
        demand,
        collective,
        demand_reservation: d.reservations[0].reservation_id.clone(),
        collective_reservation: c.reservation.unwrap().reservation_id,
        start_ns,
    }
}

/// A gRPC answer as the matrix writes it.
fn outcome<T>(answer: Result<tonic::Response<T>, tonic::Status>) -> String {
    use std::error::Error;
    match answer {
        Ok(_) => OK.into(),
        // No answer from the service: the connection or its TLS failed.
        Err(s) if s.source().is_some() => NO.into(),
        Err(s) => match s.code() {
            tonic::Code::PermissionDenied => DENIED.into(),
            tonic::Code::NotFound => NOT_FOUND.into(),
            tonic::Code::Unauthenticated => "UNAUTHENTICATED".into(),
            other => format!("{other:?}: {}", s.message()),
        },
    }
}

/// One NDSP cell: `rpc` on A's objects, in `tenant`'s name. A cancel in
/// A's name takes back the demand the SubmitDemand row made (as A), one
/// in the caller's own name A's collective (the list before it sees it).
async fn rpc_cell(
    client: &mut DemandSignalingClient<Channel>,
    rpc: Rpc,
    tenant: &str,
    own_name: bool,
    a: &Objects,
    column: usize,
) -> String {
    let cancelled = if own_name {
        proto::cancel_request::Target::CollectiveId(a.collective.clone())
    } else {
        proto::cancel_request::Target::DemandId(format!("x-{column}"))
    };
    use proto::workload_deviation::{Change, Target};
    match rpc {
        Rpc::Handshake => outcome(
            client
                .handshake(proto::HandshakeRequest {
                    header: head(tenant),
                    client_name: "access matrix".into(),
                })
                .await,
        ),
        Rpc::RegisterTopology => outcome(
            client
                .register_topology(register_request(tenant, &a.job))
                .await,
        ),
        Rpc::SubmitDemand => outcome(
            client
                .submit_demand(demand_request(tenant, &format!("x-{column}"), a.start_ns))
                .await,
        ),
        Rpc::SubmitCollective => outcome(
            client
                .submit_collective(collective_request(
                    tenant,
                    &format!("xc-{column}"),
                    &a.job,
                    a.start_ns,
                ))
                .await,
        ),
        Rpc::GetReservation => outcome(
            client
                .get_reservation(proto::GetReservationRequest {
                    header: head(tenant),
                    reservation_id: a.demand_reservation.clone(),
                })
                .await,
        ),
        Rpc::ListReservations => {
            let answer = client
                .list_reservations(proto::ListReservationsRequest {
                    header: head(tenant),
                    job_id: String::new(),
                    page_size: 1000,
                    page_token: String::new(),
                })
                .await;
            match answer {
                Ok(page) => {
                    let ids: BTreeSet<String> = page
                        .into_inner()
                        .reservations
                        .into_iter()
                        .map(|r| r.reservation_id)
                        .collect();
                    match (
                        ids.contains(&a.demand_reservation),
                        ids.contains(&a.collective_reservation),
                    ) {
                        (true, true) => "OK: A's".into(),
                        (false, false) => "OK: none of A's".into(),
                        _ => "OK: some of A's".into(),
                    }
                }
                Err(e) => outcome::<()>(Err(e)),
            }
        }
        Rpc::WatchEvents => outcome(
            client
                .watch_events(proto::WatchEventsRequest {
                    header: head(tenant),
                    job_ids: vec![a.job.clone()],
                    telemetry_interval_ns: 0,
                })
                .await,
        ),
        Rpc::ReportDeviation => outcome(
            client
                .report_deviation(proto::ReportDeviationRequest {
                    header: head(tenant),
                    reference_unix_ns: 0,
                    deviation: Some(proto::WorkloadDeviation {
                        target: Some(Target::DemandId(a.demand.clone())),
                        change: Some(Change::LateStart(proto::StartChange {
                            start: Some(proto::start_change::Start::StartOffsetNs(
                                a.start_ns + 100_000_000,
                            )),
                        })),
                        observed_unix_ns: 0,
                    }),
                })
                .await,
        ),
        Rpc::Cancel => outcome(
            client
                .cancel(proto::CancelRequest {
                    header: head(tenant),
                    target: Some(cancelled),
                })
                .await,
        ),
    }
}

/// An admin answer as the matrix writes it: the status code, and for a
/// status whose reservations they are.
fn admin_outcome(path: &str, answer: Result<(u16, String), String>) -> String {
    let Ok((code, text)) = answer else {
        return NO.into();
    };
    let list = match path {
        "/v1/status" => "/reservations/list",
        TIMELINE => "/reservations",
        _ => return code.to_string(),
    };
    if code != 200 {
        return code.to_string();
    }
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    let v: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
    let tenants: BTreeSet<&str> = v
        .pointer(list)
        .and_then(|l| l.as_array())
        .map(|l| l.iter().filter_map(|r| r["tenant"].as_str()).collect())
        .unwrap_or_default();
    match v["tenant"].as_str() {
        Some(me) if !tenants.is_empty() && tenants.iter().all(|t| *t == me) => {
            "200: own only".into()
        }
        None if tenants.contains(A) && tenants.contains("bob") => "200: every tenant's".into(),
        viewer => format!("200: viewer {viewer:?} sees {tenants:?}"),
    }
}

/// The certificates, one per identity, and the files the controller takes.
struct Pki {
    ca_pem: String,
    server: openssl::Issued,
    client_ca: String,
    ids: Vec<Option<Pem>>,
    own_names: Vec<&'static str>,
}

fn pki(dir: &Path) -> Pki {
    let root = Ca::new(dir, "fabric-ca");
    let rogue = Ca::new(dir, "rogue-ca");
    let id = |issued: openssl::Issued| Some(issued.pem);
    Pki {
        ca_pem: root.issued.pem.0.clone(),
        server: root.server("controller"),
        client_ca: root.issued.cert_arg(),
        ids: vec![
            None,
            None,
            id(rogue.client(A)),
            id(root.client(A)),
            id(root.client("bob")),
            id(root.client("ops")),
            id(root.client("prometheus")),
            id(root.client("bob")),
        ],
        own_names: vec![A, A, A, A, "bob", "ops", "prometheus", "bob"],
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_identity_gets_what_the_matrix_says() {
    if !openssl::available() {
        testkit::skip::skipped(
            "every_identity_gets_what_the_matrix_says",
            "the openssl command is not installed (ci/setup.sh installs it)",
        );
        return;
    }
    let Some(fabric) = Fabric::start("every_identity_gets_what_the_matrix_says") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let pki = pki(dir.path());
    let token = "matrix-operator-token-0123456789";
    let token_file = dir.path().join("admin-token");
    std::fs::write(&token_file, format!("{token}\n")).unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let controller = fabric.controller_with(
        50,
        &[
            "--tls-cert",
            &pki.server.cert_arg(),
            "--tls-key",
            &pki.server.key_arg(),
            "--tls-client-ca",
            &pki.client_ca,
            "--operators",
            "ops",
            "--scrapers",
            "prometheus",
            "--admin-token-file",
            token_file.to_str().unwrap(),
        ],
    );
    assert!(
        controller.ready["reconcile_ms"].is_number(),
        "every switch reconciled: {}",
        controller.ready
    );
    let (ndsp, http) = (controller.ndsp.clone(), controller.http.clone());
    let mut a = common::tls::ndsp(&ndsp, &pki.ca_pem, pki.ids[3].as_ref())
        .await
        .unwrap();
    // B holds a reservation of its own, so that "every tenant's" and
    // "own only" differ.
    let mut b = common::tls::ndsp(&ndsp, &pki.ca_pem, pki.ids[4].as_ref())
        .await
        .unwrap();
    b.submit_demand(demand_request("bob", "bob-1", 100_000_000_000))
        .await
        .unwrap();

    let mut failures = Vec::new();
    for column in 0..IDENTITIES.len() {
        let objects = objects_of_a(&mut a, column).await;
        let id = pki.ids[column].as_ref();
        let bearer = (column == 7).then(|| format!("Bearer {token}"));
        let mut client = match column {
            0 => DemandSignalingClient::connect(format!("http://{ndsp}"))
                .await
                .ok(),
            _ => common::tls::ndsp(&ndsp, &pki.ca_pem, id).await.ok(),
        };
        for (name, endpoint, answers) in MATRIX {
            let got = match (*endpoint, client.as_mut()) {
                (AsA(_) | OwnName(_), None) => NO.to_string(),
                (AsA(rpc), Some(c)) => rpc_cell(c, rpc, A, false, &objects, column).await,
                (OwnName(rpc), Some(c)) => {
                    rpc_cell(c, rpc, pki.own_names[column], true, &objects, column).await
                }
                (Get(path), _) | (Post(path), _) => {
                    let method = if matches!(endpoint, Get(_)) {
                        "GET"
                    } else {
                        "POST"
                    };
                    let answer = match column {
                        0 => common::tls::http(&http, method, path).await,
                        _ => {
                            common::tls::https(
                                &http,
                                &pki.ca_pem,
                                id,
                                method,
                                path,
                                bearer.as_deref(),
                            )
                            .await
                        }
                    };
                    admin_outcome(path, answer)
                }
            };
            let want = answers[column];
            if got != want {
                failures.push(format!(
                    "{name} by {}: got {got:?}, want {want:?}",
                    IDENTITIES[column].0
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "the controller does not answer as the matrix says:\n{}",
        failures.join("\n")
    );
}
