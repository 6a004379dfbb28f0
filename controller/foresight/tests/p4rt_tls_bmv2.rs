//! P4Runtime over TLS: the four BMv2 switches serve gRPC with TLS and
//! require a client certificate (`--grpc-server-ssl ...
//! --grpc-server-with-client-auth`); the controller (`--p4rt-tls-ca`,
//! `--p4rt-tls-cert`, `--p4rt-tls-key`) reconciles them and installs a
//! reservation. A plain-text client and a TLS client without a certificate
//! get no session. Certificates are made at test time.

mod common;

use common::certs::{ca, leaf};
use common::{demand, header, Fabric};
use ndsp::proto;
use p4rt::{Switch, SwitchOptions};
use tonic::transport::{Certificate, ClientTlsConfig};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_drives_tls_switches() {
    let certs = tempfile::tempdir().unwrap();
    let root = ca("switch CA");
    let (switch_cert, switch_key) = leaf(&root, "switch", &["127.0.0.1", "localhost"]);
    let (ctl_cert, ctl_key) = leaf(&root, "foresight-controller", &[]);
    let file = |name: &str, text: &str| {
        let p = certs.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    };
    let ca_pem = file("ca.pem", &root.pem);
    let args = [
        "--grpc-server-ssl".to_string(),
        "--grpc-server-cacert".into(),
        ca_pem.clone(),
        "--grpc-server-cert".into(),
        file("switch.pem", &switch_cert),
        "--grpc-server-key".into(),
        file("switch.key", &switch_key),
        "--grpc-server-with-client-auth".into(),
    ];
    let Some(fabric) = Fabric::start_with_args("the_controller_drives_tls_switches", &args) else {
        return;
    };
    let (cert, key) = (file("ctl.pem", &ctl_cert), file("ctl.key", &ctl_key));
    let controller = fabric.controller_with(
        50,
        &[
            "--p4rt-tls-ca",
            &ca_pem,
            "--p4rt-tls-cert",
            &cert,
            "--p4rt-tls-key",
            &key,
        ],
    );
    assert!(
        controller.ready["reconcile_ms"].is_number(),
        "every switch reconciled over TLS: {}",
        controller.ready
    );
    let mut client = controller.client().await;
    client
        .submit_demand(proto::SubmitDemandRequest {
            header: header(),
            reference_unix_ns: 0,
            demands: vec![demand(
                "tls-1",
                "10.0.1.1",
                "10.0.2.1",
                0,
                60_000_000_000,
                1_000_000_000,
                Some(77),
            )],
        })
        .await
        .unwrap();
    let view = controller.get_json("/v1/entries/leaf1");
    let reservations = view["entities"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["entry"]["table"] == "FsIngress.sr.reservation")
        .count();
    assert_eq!(reservations, 1, "{view}");
    for kind in ["missing", "unexpected", "different"] {
        assert_eq!(view["drift"][kind].as_array().unwrap().len(), 0, "{view}");
    }

    // Without TLS, or without a client certificate: no session.
    let sw = &fabric.switches["leaf1"];
    let plain = SwitchOptions::new(sw.grpc_addr(), sw.device_id()).election_id(2);
    assert!(Switch::connect(plain).await.is_err());
    let anonymous = SwitchOptions::new(sw.grpc_addr(), sw.device_id())
        .election_id(2)
        .tls(Some(
            ClientTlsConfig::new().ca_certificate(Certificate::from_pem(&root.pem)),
        ));
    assert!(Switch::connect(anonymous).await.is_err());
}
