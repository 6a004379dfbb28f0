//! The event-driven fluid simulation: flows start (at a fixed time, or
//! when the previous iteration's last flow finishes), get max-min fair
//! rates over their links, and finish; rates are recomputed at every start,
//! finish and link failure.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use indicatif::ProgressBar;

use crate::maxmin::{Use, WaterFill};

/// When a flow starts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Start {
    /// `offset_ns` after iteration `n` begins (iteration 0 begins at 0,
    /// iteration n+1 when the last flow of iteration n finishes).
    Iteration(u32, f64),
    /// At an absolute time (background traffic; never gates an iteration).
    At(f64),
}

/// A flow to simulate.
#[derive(Clone, Debug)]
pub struct SimFlow {
    /// Size in bits.
    pub bits: f64,
    /// Start.
    pub start: Start,
}

/// Chooses links for flows (a load-balancing policy on a fabric).
pub trait Router {
    /// The links flow `i` uses when it starts (or is re-routed), given the
    /// current per-edge load (sum of coefficients of active flows). False
    /// if the flow cannot be routed (it then never finishes).
    fn route(&mut self, i: usize, load: &[f64], out: &mut Vec<Use>) -> bool;
    /// Takes these directed edges down.
    fn fail(&mut self, edges: &[u32]);
    /// Whether flow `i` is re-routed after a failure even if its links
    /// survived (hash-based routing: the group sizes changed).
    fn rehash_on_failure(&self, i: usize) -> bool;
}

/// Links going down at a time.
#[derive(Clone, Debug)]
pub struct Failure {
    /// When, ns.
    pub at_ns: f64,
    /// Directed edges.
    pub edges: Vec<u32>,
}

/// What a simulation produced.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// Per iteration: duration, ns (infinite if it never finished).
    pub iteration_ns: Vec<f64>,
    /// Per flow: finish time, ns (infinite if never).
    pub finish_ns: Vec<f64>,
    /// Per edge: bits carried.
    pub edge_bits: Vec<f64>,
    /// End of the last iteration, ns.
    pub end_ns: f64,
    /// Rate recomputations.
    pub events: usize,
    /// Flows that never finished.
    pub unfinished: usize,
}

#[derive(Clone, Copy, PartialEq)]
struct At(f64, u32);
impl Eq for At {}
impl PartialOrd for At {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for At {
    fn cmp(&self, o: &Self) -> Ordering {
        o.0.total_cmp(&self.0).then(o.1.cmp(&self.1))
    }
}

struct Active {
    flow: u32,
    remaining: f64,
    rate: f64,
    /// Route range in the arena.
    r0: u32,
    r1: u32,
    /// Bits sent when the current route was taken.
    sent_at_route: f64,
}

/// Simulates `flows` (rates in bits/ns = Gbit/s, capacities `cap` per edge)
/// until every flow has finished or nothing can progress.
pub fn simulate(
    flows: &[SimFlow],
    iterations: u32,
    cap: &[f64],
    router: &mut dyn Router,
    failures: &[Failure],
    progress: Option<&ProgressBar>,
) -> Outcome {
    let ne = cap.len();
    let mut cap = cap.to_vec();
    let mut by_iter: Vec<Vec<u32>> = vec![Vec::new(); iterations as usize];
    let mut pending = BinaryHeap::new();
    for (i, f) in flows.iter().enumerate() {
        match f.start {
            Start::Iteration(n, _) => by_iter[n as usize].push(i as u32),
            Start::At(t) => pending.push(At(t, i as u32)),
        }
    }
    let mut left: Vec<usize> = by_iter.iter().map(Vec::len).collect();
    let mut begin = vec![f64::INFINITY; iterations as usize];
    let mut out = Outcome {
        iteration_ns: vec![f64::INFINITY; iterations as usize],
        finish_ns: vec![f64::INFINITY; flows.len()],
        edge_bits: vec![0.0; ne],
        ..Default::default()
    };
    let release = |n: usize, t: f64, begin: &mut Vec<f64>, pending: &mut BinaryHeap<At>| {
        begin[n] = t;
        for &i in &by_iter[n] {
            if let Start::Iteration(_, off) = flows[i as usize].start {
                pending.push(At(t + off, i));
            }
        }
    };
    // Empty iterations finish at once.
    let mut next_iter = 0usize;
    let advance_iters = |t: f64,
                         left: &Vec<usize>,
                         begin: &mut Vec<f64>,
                         pending: &mut BinaryHeap<At>,
                         out: &mut Outcome,
                         next_iter: &mut usize| {
        while *next_iter < iterations as usize {
            let n = *next_iter;
            if begin[n].is_infinite() {
                release(n, t, begin, pending);
            }
            if left[n] > 0 {
                break;
            }
            out.iteration_ns[n] = t - begin[n];
            out.end_ns = t;
            *next_iter += 1;
        }
    };
    advance_iters(
        0.0,
        &left,
        &mut begin,
        &mut pending,
        &mut out,
        &mut next_iter,
    );

    let mut arena: Vec<Use> = Vec::new();
    let mut active: Vec<Active> = Vec::new();
    let mut load = vec![0.0f64; ne];
    let mut scratch: Vec<Use> = Vec::new();
    let mut wf = WaterFill::new(ne);
    let mut rates: Vec<f64> = Vec::new();
    let mut stuck = 0usize;
    let mut fail_ix = 0usize;
    let mut t = 0.0f64;
    let mut dirty = true;
    const EPS_T: f64 = 1e-6; // ns
    loop {
        // Starts.
        while let Some(&At(ts, i)) = pending.peek() {
            if ts > t + EPS_T {
                break;
            }
            pending.pop();
            if router.route(i as usize, &load, &mut scratch) {
                let r0 = arena.len() as u32;
                for &(e, a) in &scratch {
                    load[e as usize] += a;
                }
                arena.extend_from_slice(&scratch);
                active.push(Active {
                    flow: i,
                    remaining: flows[i as usize].bits,
                    rate: 0.0,
                    r0,
                    r1: arena.len() as u32,
                    sent_at_route: 0.0,
                });
                dirty = true;
            } else {
                stuck += 1;
            }
        }
        // Compaction of the route arena when mostly garbage.
        if arena.len() > 1 << 16
            && arena.len() > 4 * active.iter().map(|a| (a.r1 - a.r0) as usize).sum::<usize>()
        {
            let mut fresh = Vec::with_capacity(arena.len() / 2);
            for a in &mut active {
                let r0 = fresh.len() as u32;
                fresh.extend_from_slice(&arena[a.r0 as usize..a.r1 as usize]);
                a.r0 = r0;
                a.r1 = fresh.len() as u32;
            }
            arena = fresh;
        }
        if dirty {
            let (ar, ac) = (&arena, &active);
            wf.solve(
                active.len(),
                |k| &ar[ac[k].r0 as usize..ac[k].r1 as usize],
                &cap,
                &mut rates,
            );
            for (a, &r) in active.iter_mut().zip(&rates) {
                a.rate = r;
            }
            out.events += 1;
            dirty = false;
        }
        // Next event.
        let mut dt = f64::INFINITY;
        for a in &active {
            if a.rate > 0.0 {
                dt = dt.min(a.remaining / a.rate);
            }
        }
        let mut t_next = t + dt;
        if let Some(&At(ts, _)) = pending.peek() {
            t_next = t_next.min(ts);
        }
        if let Some(f) = failures.get(fail_ix) {
            t_next = t_next.min(f.at_ns.max(t));
        }
        if !t_next.is_finite() {
            break;
        }
        let dt = t_next - t;
        for a in &mut active {
            a.remaining -= a.rate * dt;
        }
        t = t_next;
        // Finishes.
        let mut finished_any = false;
        let mut k = 0;
        while k < active.len() {
            let a = &active[k];
            let f = &flows[a.flow as usize];
            if a.remaining <= 1e-9 * f.bits.max(1.0)
                || (a.rate > 0.0 && a.remaining / a.rate <= EPS_T)
            {
                let a = active.swap_remove(k);
                let sent = f.bits - a.sent_at_route;
                for &(e, c) in &arena[a.r0 as usize..a.r1 as usize] {
                    out.edge_bits[e as usize] += c * sent;
                    load[e as usize] -= c;
                }
                out.finish_ns[a.flow as usize] = t;
                if let Start::Iteration(n, _) = f.start {
                    left[n as usize] -= 1;
                    if let Some(p) = progress {
                        p.inc(1);
                    }
                }
                finished_any = true;
            } else {
                k += 1;
            }
        }
        if finished_any {
            dirty = true;
            advance_iters(t, &left, &mut begin, &mut pending, &mut out, &mut next_iter);
        }
        // Failures.
        while let Some(f) = failures.get(fail_ix) {
            if f.at_ns > t + EPS_T {
                break;
            }
            fail_ix += 1;
            router.fail(&f.edges);
            for &e in &f.edges {
                cap[e as usize] = 0.0;
            }
            let mut failed = vec![false; ne];
            for &e in &f.edges {
                failed[e as usize] = true;
            }
            let mut k = 0;
            while k < active.len() {
                let a = &active[k];
                let hit = arena[a.r0 as usize..a.r1 as usize]
                    .iter()
                    .any(|u| failed[u.0 as usize]);
                if !hit && !router.rehash_on_failure(a.flow as usize) {
                    k += 1;
                    continue;
                }
                let old: Vec<Use> = arena[a.r0 as usize..a.r1 as usize].to_vec();
                for &(e, c) in &old {
                    load[e as usize] -= c;
                }
                let ok = router.route(a.flow as usize, &load, &mut scratch);
                let a = &mut active[k];
                if ok && scratch == old {
                    for &(e, c) in &old {
                        load[e as usize] += c;
                    }
                    k += 1;
                    continue;
                }
                let sent = flows[a.flow as usize].bits - a.remaining - a.sent_at_route;
                for &(e, c) in &old {
                    out.edge_bits[e as usize] += c * sent;
                }
                if ok {
                    a.sent_at_route += sent;
                    a.r0 = arena.len() as u32;
                    for &(e, c) in &scratch {
                        load[e as usize] += c;
                    }
                    arena.extend_from_slice(&scratch);
                    a.r1 = arena.len() as u32;
                    k += 1;
                } else {
                    active.swap_remove(k);
                    stuck += 1;
                }
            }
            dirty = true;
        }
    }
    out.unfinished = stuck + active.len() + pending.len();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixed(Vec<Vec<Use>>);
    impl Router for Fixed {
        fn route(&mut self, i: usize, _: &[f64], out: &mut Vec<Use>) -> bool {
            out.clear();
            out.extend_from_slice(&self.0[i]);
            true
        }
        fn fail(&mut self, _: &[u32]) {}
        fn rehash_on_failure(&self, _: usize) -> bool {
            false
        }
    }

    fn flow(bits: f64) -> SimFlow {
        SimFlow {
            bits,
            start: Start::Iteration(0, 0.0),
        }
    }

    #[test]
    fn single_bottleneck_closed_form() {
        // 8e9 bits over a 400 Gbit/s NIC and a 100 Gbit/s link: 80 ms.
        let mut r = Fixed(vec![vec![(0, 1.0), (1, 1.0)]]);
        let o = simulate(&[flow(8e9)], 1, &[400.0, 100.0], &mut r, &[], None);
        assert!((o.iteration_ns[0] - 8e7).abs() < 1.0, "{o:?}");
    }

    #[test]
    fn shared_link_max_min_then_speed_up() {
        // B and 2B bits sharing capacity C: the small one at C/2 finishes at
        // 2B/C; the big one then runs alone and finishes at 3B/C.
        let (b, c) = (1e6, 10.0);
        let mut r = Fixed(vec![vec![(0, 1.0)], vec![(0, 1.0)]]);
        let o = simulate(&[flow(b), flow(2.0 * b)], 1, &[c], &mut r, &[], None);
        assert!((o.finish_ns[0] - 2.0 * b / c).abs() < 1e-3);
        assert!((o.finish_ns[1] - 3.0 * b / c).abs() < 1e-3);
        assert!((o.edge_bits[0] - 3.0 * b).abs() < 1e-3);
    }

    #[test]
    fn iterations_chain_and_background_does_not_gate() {
        let mut r = Fixed(vec![vec![(0, 1.0)], vec![(0, 1.0)], vec![(1, 1.0)]]);
        let flows = vec![
            SimFlow {
                bits: 100.0,
                start: Start::Iteration(0, 0.0),
            },
            SimFlow {
                bits: 100.0,
                start: Start::Iteration(1, 0.0),
            },
            SimFlow {
                bits: 1e9,
                start: Start::At(0.0),
            },
        ];
        let o = simulate(&flows, 2, &[10.0, 1.0], &mut r, &[], None);
        assert_eq!(o.iteration_ns, vec![10.0, 10.0]);
        assert!((o.finish_ns[1] - 20.0).abs() < 1e-9);
        assert!((o.finish_ns[2] - 1e9).abs() < 1e-3);
    }

    #[test]
    fn failed_link_stalls_unroutable_flow() {
        let mut r = Fixed(vec![vec![(0, 1.0)]]);
        let f = [Failure {
            at_ns: 5.0,
            edges: vec![0],
        }];
        let o = simulate(&[flow(100.0)], 1, &[1.0], &mut r, &f, None);
        assert_eq!(o.unfinished, 1);
        assert!(o.iteration_ns[0].is_infinite());
    }
}
