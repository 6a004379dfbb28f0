//! The CLI against a controller with mutual TLS (its switches are down:
//! no BMv2 needed). The admin commands (`status`, `entries`, `link`) and
//! the NDSP ones take the same `--tls-*` flags or `FORESIGHT_TLS_*`
//! variables; a TLS failure is reported at once, naming its cause, and is
//! neither retried as a leader search nor resent.

mod common;

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::certs::{ca, expired_leaf, leaf};
use common::Controller;

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

/// A client's TLS files: (ca, cert, key), any of them absent.
#[derive(Clone, Default)]
struct Tls {
    ca: Option<String>,
    cert: Option<String>,
    key: Option<String>,
}

/// How the test hands the CLI its TLS files.
#[derive(Clone, Copy)]
enum Via {
    Flags,
    Environment,
}

/// `foresight args...` with `tls`; its output and how long it took.
fn cli(args: &[&str], tls: &Tls, via: Via) -> (Output, Duration) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_foresight"));
    c.args(args);
    for var in [
        "FORESIGHT_TLS_CA",
        "FORESIGHT_TLS_CERT",
        "FORESIGHT_TLS_KEY",
    ] {
        c.env_remove(var);
    }
    for (flag, var, value) in [
        ("--tls-ca", "FORESIGHT_TLS_CA", &tls.ca),
        ("--tls-cert", "FORESIGHT_TLS_CERT", &tls.cert),
        ("--tls-key", "FORESIGHT_TLS_KEY", &tls.key),
    ] {
        if let Some(v) = value {
            match via {
                Via::Flags => c.args([flag, v]),
                Via::Environment => c.env(var, v),
            };
        }
    }
    let started = Instant::now();
    let out = c.output().unwrap();
    (out, started.elapsed())
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).to_string()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

/// The command fails within `FAST`, its error holding `cause`, and
/// without the words of a leader search or a resend.
fn fails_at_once(what: &str, (out, took): (Output, Duration), cause: &str) {
    const FAST: Duration = Duration::from_secs(5);
    let err = stderr(&out);
    assert!(!out.status.success(), "{what}: succeeded: {}", stdout(&out));
    assert!(took < FAST, "{what}: took {took:?}: {err}");
    assert!(err.contains(cause), "{what}: want {cause:?} in: {err}");
    for wrong in [
        "leader",
        "resent",
        "may have done it",
        "invalid HTTP version",
    ] {
        assert!(!err.contains(wrong), "{what}: {wrong:?} in: {err}");
    }
}

fn reserve(ndsp: &str, tenant: &str) -> Vec<String> {
    [
        "reserve",
        "demand",
        "--src",
        "10.0.1.2",
        "--dst",
        "10.0.2.2",
        "--bytes",
        "1MB",
        "--rate-gbps",
        "1",
        "--start-in-ms",
        "60000",
        "--controller",
        ndsp,
        "--tenant",
        tenant,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

#[test]
fn the_cli_speaks_tls_to_both_ports_and_names_tls_failures() {
    let dir = tempfile::tempdir().unwrap();
    let root = ca("foresight test CA");
    let other = ca("another CA");
    // The controller's certificate names 127.0.0.1 only: dialling
    // "localhost" is the wrong name.
    let (server_cert, server_key) = leaf(&root, "controller", &["127.0.0.1"]);
    let file = |name: &str, text: &str| write(dir.path(), name, text);
    let pair = |name: &str, (cert, key): (String, String)| Tls {
        ca: Some(file("ca.pem", &root.pem)),
        cert: Some(file(&format!("{name}.pem"), &cert)),
        key: Some(file(&format!("{name}.key"), &key)),
    };
    let ops = pair("ops", leaf(&root, "ops", &[]));
    let acme = pair("acme", leaf(&root, "acme", &[]));
    let rogue = pair("rogue", leaf(&other, "ops", &[]));
    let expired = pair("expired", expired_leaf(&root, "acme"));
    let no_cert = Tls {
        ca: ops.ca.clone(),
        ..Tls::default()
    };
    let wrong_ca = Tls {
        ca: Some(file("other-ca.pem", &other.pem)),
        ..ops.clone()
    };
    let switches = common::unreachable_switches(dir.path());
    let tls_dir = dir.path().join("tls");
    std::fs::create_dir(&tls_dir).unwrap();
    let controller = Controller::spawn(
        &tls_dir,
        &switches,
        50,
        &[
            "--switch-wait-s",
            "0",
            "--tls-cert",
            &file("server.pem", &server_cert),
            "--tls-key",
            &file("server.key", &server_key),
            "--tls-client-ca",
            ops.ca.as_deref().unwrap(),
            "--operators",
            "ops",
        ],
    );
    let (http, ndsp) = (controller.http.clone(), controller.ndsp.clone());

    // The operator, through the environment: status, entries, link.
    let (out, _) = cli(&["status", "--http", &http], &ops, Via::Environment);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("switches:"), "{}", stdout(&out));
    assert!(
        !stdout(&out).contains("the view of tenant"),
        "{}",
        stdout(&out)
    );
    let (out, _) = cli(
        &["entries", "leaf1", "--http", &http],
        &ops,
        Via::Environment,
    );
    // Through to the switch, which is down.
    assert!(!stderr(&out).contains("operator"), "{}", stderr(&out));
    let (out, _) = cli(
        &["link", "down", "leaf1:3", "--http", &http],
        &ops,
        Via::Environment,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("is down"), "{}", stdout(&out));
    let (out, _) = cli(
        &["link", "up", "leaf1:3", "--http", &http],
        &ops,
        Via::Flags,
    );
    assert!(out.status.success(), "{}", stderr(&out));

    // A tenant, through flags: its own status, reservations in its name,
    // and the operator's commands refused with the reason.
    let args = reserve(&ndsp, "acme");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (out, _) = cli(&args, &acme, Via::Flags);
    assert!(out.status.success(), "{}", stderr(&out));
    let (out, _) = cli(&args, &acme, Via::Environment);
    assert!(out.status.success(), "{}", stderr(&out));
    let (out, _) = cli(&["status", "--http", &http], &acme, Via::Flags);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("the view of tenant acme"),
        "{}",
        stdout(&out)
    );
    let (out, _) = cli(&["entries", "leaf1", "--http", &http], &acme, Via::Flags);
    assert!(
        stderr(&out).contains("needs an operator's client certificate"),
        "{}",
        stderr(&out)
    );
    let (out, _) = cli(
        &["link", "down", "leaf1:3", "--http", &http],
        &acme,
        Via::Flags,
    );
    assert!(stderr(&out).contains("operator"), "{}", stderr(&out));

    // TLS failures, on both ports, each named and at once.
    let status = ["status", "--http", http.as_str()];
    let args = reserve(&ndsp, "ops");
    let submit: Vec<&str> = args.iter().map(String::as_str).collect();
    for (what, command) in [("status", &status[..]), ("reserve", &submit[..])] {
        fails_at_once(
            &format!("{what}, plain text"),
            cli(command, &Tls::default(), Via::Flags),
            "speaks TLS on this port and this client did not",
        );
        fails_at_once(
            &format!("{what}, no certificate"),
            cli(command, &no_cert, Via::Flags),
            "requires a client certificate",
        );
        fails_at_once(
            &format!("{what}, another CA's certificate"),
            cli(command, &rogue, Via::Flags),
            "refused this client's certificate",
        );
        fails_at_once(
            &format!("{what}, expired certificate"),
            cli(command, &expired, Via::Environment),
            "expired",
        );
        fails_at_once(
            &format!("{what}, the controller's CA unknown"),
            cli(command, &wrong_ca, Via::Flags),
            "not signed by the CA of --tls-ca",
        );
    }
    let by_name = |addr: &str| addr.replace("127.0.0.1", "localhost");
    fails_at_once(
        "status, wrong name",
        cli(&["status", "--http", &by_name(&http)], &ops, Via::Flags),
        "does not name the address",
    );
    let args = reserve(&by_name(&ndsp), "ops");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    fails_at_once(
        "reserve, wrong name",
        cli(&args, &ops, Via::Flags),
        "does not name the address",
    );
    // A key without its certificate is refused before anything is sent.
    let half = Tls {
        cert: None,
        ..ops.clone()
    };
    fails_at_once(
        "status, key only",
        cli(&status, &half, Via::Flags),
        "--tls-key needs --tls-cert",
    );
    drop(controller);

    // TLS to a controller that speaks plain text.
    let plain_dir = dir.path().join("plain");
    std::fs::create_dir(&plain_dir).unwrap();
    let plain = Controller::spawn(&plain_dir, &switches, 50, &["--switch-wait-s", "0"]);
    fails_at_once(
        "status, TLS to plain text",
        cli(&["status", "--http", &plain.http], &ops, Via::Flags),
        "did not answer in TLS",
    );
    let args = reserve(&plain.ndsp, "ops");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    fails_at_once(
        "reserve, TLS to plain text",
        cli(&args, &ops, Via::Flags),
        "did not answer in TLS",
    );
    // And plain text still works there, as before.
    let (out, _) = cli(
        &["status", "--http", &plain.http],
        &Tls::default(),
        Via::Flags,
    );
    assert!(out.status.success(), "{}", stderr(&out));
}
