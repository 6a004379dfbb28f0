//! Ledger operations: insert, peak query and remove on links that already
//! hold many reservations, and changes near now beside many held far
//! ahead.

use criterion::{criterion_group, criterion_main, Criterion};
use planner::rng::Rng;
use planner::{Ledger, Window};

fn windows(n: usize, seed: u64) -> Vec<(u32, Window, u64)> {
    let mut r = Rng::new(seed);
    (0..n)
        .map(|_| {
            let s = r.below(1_000_000_000);
            (
                r.below(64) as u32,
                Window::new(s, s + 1 + r.below(50_000_000)),
                1 + r.below(100_000_000_000),
            )
        })
        .collect()
}

/// Reserves every operation's bandwidth, then releases it all: the
/// ledger ends as it began.
fn churn(l: &mut Ledger, ops: &[(u32, Window, u64)]) {
    for &(e, w, x) in ops {
        l.reserve(e, w, x);
    }
    for &(e, w, x) in ops {
        l.release(e, w, x).unwrap();
    }
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("ledger");
    for per_link in [16usize, 256] {
        let base = windows(64 * per_link, 1);
        let mut l = Ledger::new(64);
        for &(e, w, b) in &base {
            l.reserve(e, w, b);
        }
        let ops = windows(1000, 2);
        g.bench_function(
            format!("reserve+release/{per_link}_per_link/1000_ops"),
            |b| b.iter(|| churn(&mut l, &ops)),
        );
        g.bench_function(format!("peak/{per_link}_per_link/1000_queries"), |b| {
            b.iter(|| ops.iter().map(|&(e, w, _)| l.peak(e, w)).max())
        });
    }
    // Reservations held far ahead (from an hour on), then changes near
    // now: what the held ones cost a change that does not touch them.
    let hour = 3_600_000_000_000u64;
    for held in [1_000u64, 50_000] {
        let mut l = Ledger::new(1);
        for i in 0..held {
            let s = hour + i * 1_000;
            l.reserve(0, Window::new(s, s + 60_000_000_000), 1_000_000);
        }
        let ops: Vec<(u32, Window, u64)> = windows(1000, 3)
            .into_iter()
            .map(|(_, w, b)| (0, w, b))
            .collect();
        g.bench_function(
            format!("reserve+release/near_now_beside_{held}_held/1000_ops"),
            |b| b.iter(|| churn(&mut l, &ops)),
        );
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
