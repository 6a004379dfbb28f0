//! One test per validation rule: each starts from a valid message, breaks
//! one thing, and expects the error to name that field. Removing the rule
//! makes the mutated message validate, which fails the test.

use super::*;

#[test]
fn long_values_are_cut_short_in_errors() {
    let mut r = topology();
    r.topology.as_mut().unwrap().job_id = format!("{} x", "j".repeat(500));
    let e = r.validate().unwrap_err();
    assert!(e.reason.len() < 200, "{e}");
}
