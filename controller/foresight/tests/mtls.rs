//! NDSP over mutual TLS on a running controller (its switches are down: no
//! BMv2 needed). Certificates are made at test time: a CA, the
//! controller's (127.0.0.1), tenants `acme` and `globex`, an operator `ops`,
//! and `acme` signed by another CA. The tenant is the certificate's, not
//! the header's; only operators act for others; no or a foreign
//! certificate gets no session. On the admin port a tenant reads its own
//! reservations only; entries are the operators', metrics theirs and the
//! scrape role's (`prometheus`), which gets no NDSP answer.

mod common;

use std::path::Path;

use common::certs::{ca, leaf};
use common::{demand, header, Controller};
use ndsp::proto::{self, demand_signaling_client::DemandSignalingClient};
use ndsp::Validate;
use tonic::transport::Channel;

fn as_tenant(tenant: &str) -> Option<proto::RequestHeader> {
    let mut h = header();
    h.as_mut().unwrap().tenant = tenant.into();
    h
}

async fn client(
    addr: &str,
    ca_pem: &str,
    id: Option<&(String, String)>,
) -> Result<DemandSignalingClient<Channel>, tonic::transport::Error> {
    common::tls::ndsp(addr, ca_pem, id).await
}

/// `method path` on the admin port over TLS: (status, body), or why not.
async fn https(
    addr: &str,
    ca_pem: &str,
    id: Option<&(String, String)>,
    method: &str,
    path: &str,
) -> Result<(u16, String), String> {
    common::tls::https(addr, ca_pem, id, method, path, None).await
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

fn submit(tenant: &str, id: &str) -> proto::SubmitDemandRequest {
    proto::SubmitDemandRequest {
        header: as_tenant(tenant),
        reference_unix_ns: 0,
        demands: vec![demand(
            id,
            "10.0.1.1",
            "10.0.2.1",
            60_000_000_000,
            60_000_000_000,
            1_000_000_000,
            None,
        )],
    }
}

async fn list(
    c: &mut DemandSignalingClient<Channel>,
    tenant: &str,
) -> Result<Vec<String>, tonic::Status> {
    let page = c
        .list_reservations(proto::ListReservationsRequest {
            header: as_tenant(tenant),
            job_id: String::new(),
            page_size: 100,
            page_token: String::new(),
        })
        .await?
        .into_inner()
        .validate()
        .unwrap();
    Ok(page
        .reservations
        .into_iter()
        .map(|r| r.reservation_id)
        .collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tenant_is_the_client_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let root = ca("foresight test CA");
    let other = ca("another CA");
    let (server_cert, server_key) = leaf(&root, "controller", &["127.0.0.1", "localhost"]);
    let acme = leaf(&root, "acme", &[]);
    let globex = leaf(&root, "globex", &[]);
    let ops = leaf(&root, "ops", &[]);
    let prometheus = leaf(&root, "prometheus", &[]);
    let foreign_acme = leaf(&other, "acme", &[]);
    let switches = common::unreachable_switches(dir.path());
    let (cert, key, client_ca) = (
        write(dir.path(), "server.pem", &server_cert),
        write(dir.path(), "server.key", &server_key),
        write(dir.path(), "ca.pem", &root.pem),
    );
    let controller = Controller::spawn(
        dir.path(),
        &switches,
        50,
        &[
            "--switch-wait-s",
            "0",
            "--tls-cert",
            &cert,
            "--tls-key",
            &key,
            "--tls-client-ca",
            &client_ca,
            "--operators",
            "ops",
            "--scrapers",
            "prometheus",
        ],
    );
    let addr = controller.ndsp.clone();

    // acme reserves as itself.
    let mut a = client(&addr, &root.pem, Some(&acme)).await.unwrap();
    let mine = a
        .submit_demand(submit("acme", "d-acme"))
        .await
        .unwrap()
        .into_inner();
    let mine = mine.validate().unwrap()[0].reservation_id.clone();
    // ... and cannot act as globex, nor see what globex would.
    let err = a
        .submit_demand(submit("globex", "d-forged"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::PermissionDenied, "{err:?}");
    assert!(err.message().contains("header.tenant"), "{err:?}");
    assert_eq!(
        list(&mut a, "globex").await.unwrap_err().code(),
        tonic::Code::PermissionDenied
    );

    // globex sees none of acme's, and cannot cancel acme's reservation.
    let mut g = client(&addr, &root.pem, Some(&globex)).await.unwrap();
    assert!(list(&mut g, "globex").await.unwrap().is_empty());
    let err = g
        .cancel(proto::CancelRequest {
            header: as_tenant("globex"),
            target: Some(proto::cancel_request::Target::ReservationId(mine.clone())),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::NotFound, "{err:?}");

    // The operator acts for acme and sees its reservation, unchanged.
    let mut o = client(&addr, &root.pem, Some(&ops)).await.unwrap();
    assert_eq!(list(&mut o, "acme").await.unwrap(), vec![mine.clone()]);
    assert_eq!(list(&mut a, "acme").await.unwrap(), vec![mine.clone()]);

    // The CLI, with acme's certificate: as acme yes, as globex no.
    let (acme_cert, acme_key) = (
        write(dir.path(), "acme.pem", &acme.0),
        write(dir.path(), "acme.key", &acme.1),
    );
    let cli = |tenant: &str, id: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_foresight"))
            .args([
                "reserve", "demand", "--id", id, "--src", "10.0.1.2", "--dst", "10.0.2.2",
            ])
            .args([
                "--bytes",
                "1MB",
                "--rate-gbps",
                "1",
                "--start-in-ms",
                "60000",
            ])
            .args([
                "--controller",
                &addr,
                "--tenant",
                tenant,
                "--tls-ca",
                &client_ca,
            ])
            .args(["--tls-cert", &acme_cert, "--tls-key", &acme_key])
            .output()
            .unwrap()
    };
    let out = cli("acme", "cli-acme");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = cli("globex", "cli-forged");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("header.tenant"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(list(&mut a, "acme").await.unwrap().len(), 2);
    assert!(list(&mut g, "globex").await.unwrap().is_empty());

    // The scrape role's certificate gets no NDSP answer, in any name.
    let mut p = client(&addr, &root.pem, Some(&prometheus)).await.unwrap();
    for tenant in ["prometheus", "acme"] {
        let err = list(&mut p, tenant).await.unwrap_err();
        assert_eq!(err.code(), tonic::Code::PermissionDenied, "{err:?}");
        assert!(err.message().contains("scrape role"), "{err:?}");
    }

    // The admin port takes the same certificates: a tenant reads its own
    // reservations; entries and metrics are not a tenant's; the write is
    // an operator's only.
    let http = controller.http.clone();
    let (code, body) = https(&http, &root.pem, Some(&acme), "GET", "/healthz")
        .await
        .unwrap();
    assert_eq!(code, 200, "{body}");
    let tenants_in_status = |body: &str| -> Vec<String> {
        let json = body.split_once("\r\n\r\n").unwrap().1;
        let v: serde_json::Value = serde_json::from_str(json).unwrap();
        let mut t: Vec<String> = v["reservations"]["list"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["tenant"].as_str().unwrap().to_string())
            .collect();
        t.sort();
        t.dedup();
        t
    };
    let status = |who| https(&http, &root.pem, Some(who), "GET", "/v1/status");
    let (code, body) = status(&acme).await.unwrap();
    assert_eq!(code, 200, "{body}");
    assert_eq!(tenants_in_status(&body), ["acme"], "{body}");
    assert!(body.contains("\"tenant\": \"acme\""), "{body}");
    assert!(!body.contains("127.0.0.1:1"), "switch addresses: {body}");
    let (code, body) = status(&globex).await.unwrap();
    assert_eq!(code, 200, "{body}");
    assert!(tenants_in_status(&body).is_empty(), "{body}");
    assert!(!body.contains("d-acme") && !body.contains(&mine), "{body}");
    let (code, body) = status(&ops).await.unwrap();
    assert_eq!(code, 200, "{body}");
    assert_eq!(tenants_in_status(&body), ["acme"], "{body}");
    assert!(body.contains("127.0.0.1:1"), "{body}");
    let (code, body) = status(&prometheus).await.unwrap();
    assert_eq!(code, 403, "{body}");
    for (name, who, path, want) in [
        ("acme", &acme, "/v1/entries/leaf1", 403),
        ("globex", &globex, "/v1/entries/leaf1", 403),
        ("prometheus", &prometheus, "/v1/entries/leaf1", 403),
        // The switches are unreachable: the operator is let through.
        ("ops", &ops, "/v1/entries/leaf1", 503),
        ("acme", &acme, "/metrics", 403),
        ("prometheus", &prometheus, "/metrics", 200),
        ("ops", &ops, "/metrics", 200),
    ] {
        let (code, body) = https(&http, &root.pem, Some(who), "GET", path)
            .await
            .unwrap();
        assert_eq!(code, want, "{name} {path}: {body}");
    }
    let (code, body) = https(
        &http,
        &root.pem,
        Some(&acme),
        "POST",
        "/v1/links/leaf1:3/down",
    )
    .await
    .unwrap();
    assert_eq!(code, 403, "{body}");
    assert!(body.contains("operator"), "{body}");
    let (code, body) = https(
        &http,
        &root.pem,
        Some(&ops),
        "POST",
        "/v1/links/leaf1:3/down",
    )
    .await
    .unwrap();
    assert_eq!(code, 200, "{body}");
    for id in [None, Some(&foreign_acme)] {
        assert!(https(&http, &root.pem, id, "GET", "/healthz")
            .await
            .is_err());
    }

    // No certificate, or one from another CA: no NDSP session.
    for id in [None, Some(&foreign_acme)] {
        let refused = match client(&addr, &root.pem, id).await {
            Err(_) => true,
            Ok(mut c) => list(&mut c, "acme").await.is_err(),
        };
        assert!(refused, "a client without a valid certificate was served");
    }
    // Plain text: no session either.
    let plain = DemandSignalingClient::connect(format!("http://{addr}")).await;
    let refused = match plain {
        Err(_) => true,
        Ok(mut c) => list(&mut c, "acme").await.is_err(),
    };
    assert!(refused);
}
