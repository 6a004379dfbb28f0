//! The controller's admin endpoint as a client sees it on the wire, without
//! any switch (the switches file points at a closed port): routes, status
//! codes and media types, and the limits that keep a bad client from
//! holding the server (head size, body size, head deadline).

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::http::{error_of, exchange, request};
use common::Controller;

fn controller(dir: &tempfile::TempDir) -> Controller {
    let switches = common::unreachable_switches(dir.path());
    Controller::spawn(dir.path(), &switches, 50, &["--switch-wait-s", "0"])
}

#[test]
fn routes_answers_and_limits() {
    let dir = tempfile::tempdir().unwrap();
    let controller = controller(&dir);
    let addr = controller.http.as_str();

    let health = request(addr, "GET", "/healthz");
    assert_eq!((health.code, health.body.as_str()), (200, "ok\n"));

    let metrics = request(addr, "GET", "/metrics?ignored=1");
    assert_eq!(metrics.code, 200);
    assert!(
        metrics
            .header("content-type")
            .unwrap()
            .starts_with("application/openmetrics-text"),
        "{:?}",
        metrics.headers
    );
    assert!(
        metrics
            .body
            .contains("foresight_switch_up{switch=\"leaf1\"} 0"),
        "{}",
        metrics.body
    );
    assert!(metrics.body.ends_with("# EOF\n"), "{}", metrics.body);

    let status = request(addr, "GET", "/v1/status");
    assert_eq!(status.code, 200);
    assert_eq!(status.header("content-type"), Some("application/json"));
    let v: serde_json::Value = serde_json::from_str(&status.body).unwrap();
    assert_eq!(v["switches"].as_array().unwrap().len(), 4, "{v}");

    let unknown = request(addr, "GET", "/v1/nothing");
    assert_eq!(unknown.code, 404);
    assert!(error_of(&unknown).contains("no such path /v1/nothing"));

    let switch = request(addr, "GET", "/v1/entries/leaf9");
    assert_eq!(switch.code, 404, "{}", switch.body);
    assert!(error_of(&switch).contains("leaf9"), "{}", switch.body);

    // The write: names checked before anything changes.
    let port = request(addr, "POST", "/v1/links/leaf1:x/down");
    assert_eq!(port.code, 400);
    assert!(error_of(&port).contains("leaf1:x: the port must be a number"));
    let verb = request(addr, "POST", "/v1/links/leaf1:3/sideways");
    assert_eq!(verb.code, 404);
    assert!(error_of(&verb).contains("no such command /v1/links/leaf1:3/sideways"));
    let post_elsewhere = request(addr, "POST", "/metrics");
    assert_eq!(post_elsewhere.code, 404);
    assert!(error_of(&post_elsewhere).contains("no such command /metrics"));
    let other_method = request(addr, "DELETE", "/v1/status");
    assert_eq!(other_method.code, 405);
    assert_eq!(other_method.body, "only GET and POST\n");

    // Limits: no endpoint takes a body, a head is at most 16 KiB.
    let big_body = exchange(
        addr,
        format!(
            "POST /v1/links/leaf1:3/down HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\nConnection: close\r\n\r\n{}",
            "x".repeat(100_000)
        )
        .as_bytes(),
    );
    assert_eq!(big_body.code, 413, "{}", big_body.body);
    let big_head = exchange(
        addr,
        format!(
            "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Padding: {}\r\nConnection: close\r\n\r\n",
            "p".repeat(32 * 1024)
        )
        .as_bytes(),
    );
    assert_eq!(big_head.code, 431);

    // A client that never finishes its head is dropped after the deadline.
    let mut slow = TcpStream::connect(addr).unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    slow.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    let started = Instant::now();
    let mut rest = Vec::new();
    let _ = slow.read_to_end(&mut rest);
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(4) && waited < Duration::from_secs(15),
        "the half-sent request was held {waited:?}"
    );
    assert!(
        !String::from_utf8_lossy(&rest).contains("ok\n"),
        "a request without its end of head was served"
    );

    // The server still answers after all that.
    assert_eq!(request(addr, "GET", "/healthz").code, 200);
}

/// With `--admin-token-file` the write needs the operator's bearer token
/// (401 without, 403 with another), checked before the request is looked
/// at; reads stay open. `foresight link` sends the token from its own
/// `--admin-token-file`. Without a token the controller will not listen
/// on a non-loopback address.
#[test]
fn the_write_needs_the_operators_token() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("admin-token");
    std::fs::write(&token_file, "op-0123456789abcdef-token\n").unwrap();
    std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let switches = common::unreachable_switches(dir.path());
    let token_arg = token_file.display().to_string();
    let controller = Controller::spawn(
        dir.path(),
        &switches,
        50,
        &["--switch-wait-s", "0", "--admin-token-file", &token_arg],
    );
    let addr = controller.http.as_str();
    let post = |authorization: Option<&str>| {
        let auth = authorization.map_or(String::new(), |a| format!("Authorization: {a}\r\n"));
        exchange(
            addr,
            format!("POST /v1/links/leaf1:x/down HTTP/1.1\r\nHost: x\r\n{auth}Content-Length: 0\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
    };
    let none = post(None);
    assert_eq!(none.code, 401, "{}", none.body);
    assert_eq!(none.header("www-authenticate"), Some("Bearer"));
    assert!(
        error_of(&none).contains("operator's token"),
        "{}",
        none.body
    );
    let wrong = post(Some("Bearer op-0123456789abcdef-tokeN"));
    assert_eq!(wrong.code, 403, "{}", wrong.body);
    let basic = post(Some("Basic b3A6MDEyMzQ1Njc4OWFiY2RlZg=="));
    assert_eq!(basic.code, 403, "{}", basic.body);
    // The right token reaches the handler, which checks the link name.
    let right = post(Some("Bearer op-0123456789abcdef-token"));
    assert_eq!(right.code, 400, "{}", right.body);
    assert!(error_of(&right).contains("the port must be a number"));
    assert_eq!(request(addr, "GET", "/v1/status").code, 200);
    assert_eq!(request(addr, "GET", "/metrics").code, 200);

    // The CLI: without the token it says what is missing; with it, the
    // controller's own answer (an unknown switch) comes back.
    let link = |with_token: bool| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_foresight"));
        cmd.args(["link", "down", "leaf9:3", "--http", addr])
            .env_remove("FORESIGHT_ADMIN_TOKEN_FILE");
        if with_token {
            cmd.env("FORESIGHT_ADMIN_TOKEN_FILE", &token_file);
        }
        let out = cmd.output().unwrap();
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    let without = link(false);
    assert!(without.contains("operator's token"), "{without}");
    let with = link(true);
    assert!(!with.contains("token"), "{with}");
    assert!(with.contains("leaf9"), "{with}");
    controller.kill();

    // No token, not loopback: refused at start, naming the flag.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_foresight"))
        .args(["controller", "--topology", common::TOPOLOGY, "--switches"])
        .arg(&switches)
        .args([
            "--state-file",
            "none",
            "--ndsp",
            "127.0.0.1:0",
            "--http",
            "0.0.0.0:0",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--admin-token-file"), "{err}");
}
