//! One test per validation rule: each starts from a valid message, breaks
//! one thing, and expects the error to name that field. Removing the rule
//! makes the mutated message validate, which fails the test.

use super::*;

// ---------------------------------------------------------------------------
// Header and version
// ---------------------------------------------------------------------------

#[test]
fn header_is_required() {
    rejects(&demands(), |r| r.header = None, "header", "is required");
}

#[test]
fn protocol_version_is_required() {
    rejects(
        &demands(),
        |r| r.header.as_mut().unwrap().protocol_version = None,
        "header.protocol_version",
        "is required",
    );
}

#[test]
fn other_major_version_is_rejected() {
    rejects(
        &demands(),
        |r| {
            r.header.as_mut().unwrap().protocol_version =
                Some(proto::ProtocolVersion { major: 2, minor: 0 })
        },
        "header.protocol_version.major",
        "unsupported protocol version 2.0",
    );
    rejects(
        &topology(),
        |r| r.header.as_mut().unwrap().protocol_version = Some(proto::ProtocolVersion::default()),
        "header.protocol_version.major",
        "unsupported protocol version 0.0",
    );
}

#[test]
fn newer_minor_version_is_accepted() {
    let mut r = demands();
    r.header.as_mut().unwrap().protocol_version =
        Some(proto::ProtocolVersion { major: 1, minor: 7 });
    let v = accepts(&r);
    assert_eq!(v.ctx.client_version, Version { major: 1, minor: 7 });
}

#[test]
fn version_is_checked_before_other_fields() {
    // A request from another major is reported as such, not as whatever
    // else that major may lay out differently.
    rejects(
        &demands(),
        |r| {
            r.header.as_mut().unwrap().protocol_version =
                Some(proto::ProtocolVersion { major: 3, minor: 0 });
            r.demands.clear();
        },
        "header.protocol_version.major",
        "major versions must match",
    );
}

#[test]
fn tenant_is_required_and_has_identifier_syntax() {
    rejects(
        &demands(),
        |r| r.header.as_mut().unwrap().tenant.clear(),
        "header.tenant",
        "is required",
    );
    rejects(
        &demands(),
        |r| r.header.as_mut().unwrap().tenant = "acme corp".into(),
        "header.tenant",
        "contains ' '",
    );
    rejects(
        &demands(),
        |r| r.header.as_mut().unwrap().tenant = "a/b".into(),
        "header.tenant",
        "contains '/'",
    );
    rejects(
        &demands(),
        |r| r.header.as_mut().unwrap().tenant = "t".repeat(MAX_ID_LEN + 1),
        "header.tenant",
        "at most 128",
    );
}
