//! One test per validation rule: each starts from a valid message, breaks
//! one thing, and expects the error to name that field. Removing the rule
//! makes the mutated message validate, which fails the test.

use super::*;

// ---------------------------------------------------------------------------
// Checks against registered topologies
// ---------------------------------------------------------------------------

#[test]
fn demand_ranks_must_be_registered() {
    let topo = accepts(&topology());
    let lookup = |job: &str| (job == "llm-train").then_some(&topo);
    accepts(&demands()).check_ranks(lookup).unwrap();

    let mut r = demands();
    r.demands[1].destination = rank(3);
    r.demands[0].job_id = "other".into();
    let e = accepts(&r).check_ranks(lookup).unwrap_err();
    assert_eq!(e.field, "demands[0].job_id");
    assert!(e.reason.contains("no registered topology"), "{e}");

    let mut r = demands();
    r.demands[1].source = rank(3);
    r.demands[1].destination = rank(9);
    let e = accepts(&r).check_ranks(lookup).unwrap_err();
    assert_eq!(
        e.to_string(),
        "demands[1].destination.rank: rank 9 is not registered in job \"llm-train\""
    );
}

#[test]
fn demand_ends_on_one_host_are_rejected() {
    let topo = accepts(&topology());
    let mut r = demands();
    r.demands[0].destination = rank(1); // same host as rank 0
    let e = accepts(&r).check_ranks(|_| Some(&topo)).unwrap_err();
    assert_eq!(e.field, "demands[0].destination");
    assert!(e.reason.contains("does not cross the fabric"), "{e}");
    let mut r = demands();
    r.demands[0].destination = host("10.0.1.1"); // rank 0's address
    let e = accepts(&r).check_ranks(|_| Some(&topo)).unwrap_err();
    assert_eq!(e.field, "demands[0].destination");
}

#[test]
fn collective_ranks_must_be_registered() {
    let topo = accepts(&topology());
    accepts(&ring()).check_ranks(&topo).unwrap();
    accepts(&kv()).check_ranks(&topo).unwrap();

    let mut r = kv();
    r.collective.as_mut().unwrap().peer_ranks = vec![2, 8];
    let e = accepts(&r).check_ranks(&topo).unwrap_err();
    assert_eq!(e.field, "collective.peer_ranks[1]");

    let mut r = ring();
    r.collective.as_mut().unwrap().job_id = "other".into();
    let e = accepts(&r).check_ranks(&topo).unwrap_err();
    assert_eq!(e.field, "collective.job_id");
}
