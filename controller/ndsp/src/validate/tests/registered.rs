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

#[test]
fn endpoints_of_sparse_ranks_are_found_by_rank_not_index() {
    let mut t = topology();
    let topo = t.topology.as_mut().unwrap();
    topo.world_size = 8;
    topo.ranks[2].rank = 5;
    topo.ranks[3].rank = 7;
    let topo = accepts(&t);
    // Index 2 holds rank 5: rank 2 is not registered, rank 5 is.
    assert!(topo.endpoint(2).is_none());
    assert_eq!(topo.endpoint(5).map(|e| e.rank), Some(5));
    assert_eq!(topo.endpoint(7).map(|e| e.rank), Some(7));
    assert_eq!(topo.endpoint(1).map(|e| e.rank), Some(1));
    assert!(topo.endpoint(8).is_none());
}
