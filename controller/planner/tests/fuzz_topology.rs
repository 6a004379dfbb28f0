//! Fuzzing the topology YAML loader: the lab's fabrics, mutated line by
//! line (seeded: `testkit::mutate`), are parsed and validated. No input
//! may panic, and every rejection must say where: a line and column for a
//! YAML or schema error (or that it concerns the document as a whole), a
//! location (switch, host, link) for every problem of a fabric that
//! parsed.
//!
//! `FORESIGHT_FUZZ_INPUTS` (default 5,000) and `FORESIGHT_FUZZ_SEED`
//! (default 1) set the run, e.g. `FORESIGHT_FUZZ_INPUTS=200000 cargo test
//! --release -p planner --test fuzz_topology -- --nocapture`.

use std::panic::{catch_unwind, AssertUnwindSafe};

use planner::topology::{yaml, TopologyError};
use testkit::mutate::Mutator;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn mutated_topologies_never_panic_and_every_rejection_says_where() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../bmv2-lab/topologies");
    let mut corpus: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    corpus.sort();
    assert!(corpus.len() >= 3);
    for text in &corpus {
        yaml::load_str(text).expect("the corpus is valid");
    }
    let inputs = env("FORESIGHT_FUZZ_INPUTS", 5_000);
    let seed = env("FORESIGHT_FUZZ_SEED", 1);
    let mut m = Mutator::new(seed);
    let (mut valid, mut parse, mut invalid, mut issues) = (0u64, 0u64, 0u64, 0u64);
    let started = std::time::Instant::now();
    for _ in 0..inputs {
        let base = &corpus[m.below(corpus.len())];
        let other = &corpus[m.below(corpus.len())];
        let input = m.text(base, other);
        let result = catch_unwind(AssertUnwindSafe(|| yaml::load_str(&input)))
            .unwrap_or_else(|_| panic!("the loader panicked on:\n{input}"));
        match result {
            Ok(_) => valid += 1,
            Err(TopologyError::Parse(msg)) => {
                parse += 1;
                assert!(
                    (msg.contains("line ") && msg.contains("column "))
                        || msg.contains("the document as a whole"),
                    "a parse error without its place: {msg}\n--- input ---\n{input}"
                );
            }
            Err(TopologyError::Invalid { issues: found, .. }) => {
                invalid += 1;
                issues += found.len() as u64;
                assert!(!found.is_empty(), "invalid without a problem:\n{input}");
                for i in &found {
                    assert!(
                        !i.location.is_empty() && !i.message.is_empty(),
                        "a problem without its place: {i}\n--- input ---\n{input}"
                    );
                }
            }
            Err(e) => panic!("unexpected error kind: {e}"),
        }
    }
    println!(
        "{inputs} mutated topologies (seed {seed}) in {:.1} s; no panic: {valid} valid, {parse} rejected by the YAML schema (line and column), {invalid} invalid fabrics ({issues} located problems)",
        started.elapsed().as_secs_f64()
    );
    assert!(
        parse > 0 && invalid > 0,
        "the mutator misses a kind of error"
    );
}
