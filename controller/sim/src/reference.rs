//! The straightforward simulation the fast engine must agree with (tests
//! only): at every event, water-filling from scratch over every active flow
//! with its parts expanded, every flow's remaining bits stepped, and the
//! goodput factors of every reordering flow whose rate moved re-evaluated
//! from the links' loads summed from scratch.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::engine::{
    rate_moved, tolerance, Factors, Failure, Job, Links, Outcome, Router, SimFlow,
};
use crate::parts::{Parts, Route, Use};

#[derive(Clone, Copy, PartialEq)]
struct Key(f64, u32);
impl Eq for Key {}
impl PartialOrd for Key {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Key {
    fn cmp(&self, o: &Self) -> Ordering {
        o.0.total_cmp(&self.0).then(o.1.cmp(&self.1))
    }
}

/// Max-min fair rates of flows (lists of uses) on links of capacity `cap`.
pub fn water_fill(routes: &[Vec<Use>], cap: &[f64]) -> Vec<f64> {
    let n = routes.len();
    let mut rates = vec![f64::INFINITY; n];
    let mut done = vec![false; n];
    let mut weight = vec![0.0; cap.len()];
    let mut count = vec![0u32; cap.len()];
    let mut frozen = vec![0.0; cap.len()];
    let mut on_edge: Vec<Vec<usize>> = vec![Vec::new(); cap.len()];
    for (i, r) in routes.iter().enumerate() {
        for &(e, a) in r {
            weight[e as usize] += a;
            count[e as usize] += 1;
            on_edge[e as usize].push(i);
        }
    }
    let mut heap: BinaryHeap<Key> = (0..cap.len())
        .filter(|&e| count[e] > 0)
        .map(|e| Key(cap[e].max(0.0) / weight[e].max(1e-300), e as u32))
        .collect();
    let mut level = 0.0f64;
    while let Some(Key(k, e)) = heap.pop() {
        let e = e as usize;
        if count[e] == 0 {
            continue;
        }
        let l = ((cap[e] - frozen[e]).max(0.0) / weight[e].max(1e-300)).max(level);
        if l > k * (1.0 + 1e-12) + 1e-15 {
            heap.push(Key(l, e as u32));
            continue;
        }
        level = l;
        for &f in &on_edge[e] {
            if done[f] {
                continue;
            }
            done[f] = true;
            rates[f] = level;
            for &(e2, a2) in &routes[f] {
                let e2 = e2 as usize;
                frozen[e2] += a2 * level;
                weight[e2] -= a2;
                count[e2] -= 1;
            }
        }
    }
    rates
}

struct Active {
    flow: usize,
    sub: u32,
    remaining: f64,
    rate: f64,
    uses: Vec<Use>,
    /// Wire bits sent since the current route was taken.
    sent: f64,
    /// Goodput and wire bits per bit of share.
    factors: Factors,
}

/// [`crate::engine::simulate`], done the slow and obvious way.
pub fn simulate(
    flows: &[SimFlow],
    jobs: &[Job],
    cap: &[f64],
    router: &mut dyn Router,
    failures: &[Failure],
    coalesce_ns: f64,
) -> Outcome {
    let cap0 = cap;
    let mut cap = cap.to_vec();
    let ne = cap.len();
    let mut epoch = 0u64;
    let mut out = Outcome {
        iteration_ns: jobs
            .iter()
            .map(|j| vec![f64::INFINITY; j.iterations as usize])
            .collect(),
        finish_ns: vec![f64::INFINITY; flows.len()],
        edge_bits: vec![0.0; ne],
        ..Default::default()
    };
    // (start, flow) not yet started; gated flows join when released.
    let mut pending: Vec<(f64, usize)> = flows
        .iter()
        .enumerate()
        .filter(|(_, f)| f.gate.is_none())
        .map(|(i, f)| (f.start_ns, i))
        .collect();
    let mut current = vec![0u32; jobs.len()];
    let mut begin = vec![0.0f64; jobs.len()];
    let subflows: Vec<u32> = (0..flows.len()).map(|i| router.subflows(i)).collect();
    let mut subs_left = subflows.clone();
    let left_of = |j: usize, n: u32| {
        flows
            .iter()
            .zip(&subflows)
            .filter(|(f, _)| {
                f.gate
                    .is_some_and(|g| g.job as usize == j && g.iteration == n)
            })
            .map(|(_, &k)| k as usize)
            .sum::<usize>()
    };
    let mut left: Vec<usize> = vec![0; jobs.len()];
    let release = |j: usize,
                   mut t: f64,
                   current: &mut [u32],
                   begin: &mut [f64],
                   left: &mut [usize],
                   pending: &mut Vec<(f64, usize)>,
                   out: &mut Outcome| {
        while (current[j] as usize) < jobs[j].iterations as usize {
            begin[j] = t;
            left[j] = left_of(j, current[j]);
            if left[j] > 0 {
                for (i, f) in flows.iter().enumerate() {
                    if f.gate
                        .is_some_and(|g| g.job as usize == j && g.iteration == current[j])
                    {
                        pending.push((t + f.start_ns, i));
                    }
                }
                return;
            }
            out.iteration_ns[j][current[j] as usize] = 0.0;
            current[j] += 1;
            t += jobs[j].gap_ns;
        }
    };
    for j in 0..jobs.len() {
        release(
            j,
            0.0,
            &mut current,
            &mut begin,
            &mut left,
            &mut pending,
            &mut out,
        );
    }
    let gated = flows.iter().any(|f| f.gate.is_some());
    let done = |current: &[u32]| (0..jobs.len()).all(|j| current[j] >= jobs[j].iterations);
    let mut parts = Parts::new();
    let mut route = Route::default();
    let mut active: Vec<Active> = Vec::new();
    let mut load = vec![0.0f64; ne];
    let mut stuck = 0usize;
    let mut fail_ix = 0usize;
    let mut failed = vec![false; ne];
    let mut t = 0.0f64;
    let mut routed = |i: usize,
                      sub: u32,
                      load: &[f64],
                      router: &mut dyn Router,
                      cap: &mut Vec<f64>|
     -> Option<Vec<Use>> {
        route.clear();
        if !router.route(i, sub, &load[..ne], &mut parts, &mut route) {
            return None;
        }
        let mut uses = Vec::new();
        route.uses(&parts, &mut uses);
        if flows[i].max_gbps.is_finite() {
            cap.push(flows[i].max_gbps as f64);
            uses.push(((cap.len() - 1) as u32, 1.0));
        }
        Some(uses)
    };
    loop {
        if gated && done(&current) {
            break;
        }
        out.events += 1;
        while let Some(f) = failures.get(fail_ix) {
            if f.at_ns > t + tolerance(t) {
                break;
            }
            fail_ix += 1;
            router.fail(&f.edges);
            for &e in &f.edges {
                cap[e as usize] = 0.0;
            }
            for &e in &f.edges {
                failed[e as usize] = true;
            }
            active.sort_by_key(|a| (a.flow, a.sub));
            let mut k = 0;
            while k < active.len() {
                let a = &active[k];
                let hit = a
                    .uses
                    .iter()
                    .any(|u| failed.get(u.0 as usize) == Some(&true));
                if !hit && !router.rehash_on_failure(a.flow) {
                    k += 1;
                    continue;
                }
                let a = active.remove(k);
                for &(e, c) in &a.uses {
                    if (e as usize) < ne {
                        out.edge_bits[e as usize] += c * a.sent;
                    }
                    load[e as usize] -= c;
                }
                match routed(a.flow, a.sub, &load, router, &mut cap) {
                    Some(uses) => {
                        load.resize(cap.len(), 0.0);
                        for &(e, c) in &uses {
                            load[e as usize] += c;
                        }
                        active.insert(
                            k,
                            Active {
                                flow: a.flow,
                                sub: a.sub,
                                remaining: a.remaining,
                                rate: 0.0,
                                uses,
                                sent: 0.0,
                                factors: Factors::WHOLE,
                            },
                        );
                        k += 1;
                    }
                    None => stuck += usize::from(flows[a.flow].gate.is_none()),
                }
            }
        }
        pending.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.cmp(&a.1)));
        while let Some(&(ts, i)) = pending.last() {
            if ts > t + tolerance(t) {
                break;
            }
            pending.pop();
            for sub in 0..subflows[i] {
                load.resize(cap.len(), 0.0);
                match routed(i, sub, &load, router, &mut cap) {
                    Some(uses) => {
                        load.resize(cap.len(), 0.0);
                        for &(e, a) in &uses {
                            load[e as usize] += a;
                        }
                        active.push(Active {
                            flow: i,
                            sub,
                            remaining: flows[i].bits / subflows[i] as f64,
                            rate: 0.0,
                            uses,
                            sent: 0.0,
                            factors: Factors::WHOLE,
                        });
                    }
                    None => stuck += usize::from(flows[i].gate.is_none()),
                }
            }
        }
        let routes: Vec<Vec<Use>> = active.iter().map(|a| a.uses.clone()).collect();
        let rates = water_fill(&routes, &cap);
        let mut rate_load = vec![0.0f64; ne];
        for (a, &r) in active.iter().zip(&rates) {
            for &(e, c) in &a.uses {
                if (e as usize) < ne {
                    rate_load[e as usize] += c * r;
                }
            }
        }
        epoch += 1;
        for (a, r) in active.iter_mut().zip(rates) {
            if router.reorders(a.flow) && rate_moved(a.rate, r) {
                let links = Links {
                    load: &rate_load,
                    cap: cap0,
                    epoch,
                };
                a.factors = router.factors(a.flow, r, &links);
            }
            a.rate = r;
        }
        let mut t_next = f64::INFINITY;
        for a in &active {
            if a.rate > 0.0 {
                t_next = t_next.min(t + a.remaining / (a.rate * a.factors.goodput));
            }
        }
        if let Some(&(ts, _)) = pending.last() {
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
            a.remaining -= a.rate * dt * a.factors.goodput;
            a.sent += a.rate * dt * a.factors.wire;
        }
        t = t_next;
        let mut k = 0;
        while k < active.len() {
            let a = &active[k];
            let f = &flows[a.flow];
            if f.bits.is_finite()
                && a.rate > 0.0
                && a.remaining / (a.rate * a.factors.goodput) <= tolerance(t).max(coalesce_ns)
            {
                let a = active.swap_remove(k);
                let wire = a.sent + a.remaining / a.factors.goodput * a.factors.wire;
                for &(e, c) in &a.uses {
                    if (e as usize) < ne {
                        out.edge_bits[e as usize] += c * wire;
                    }
                    load[e as usize] -= c;
                }
                subs_left[a.flow] -= 1;
                if subs_left[a.flow] == 0 {
                    out.finish_ns[a.flow] = t;
                }
                if let Some(g) = f.gate {
                    let j = g.job as usize;
                    left[j] -= 1;
                    if left[j] == 0 {
                        out.iteration_ns[j][current[j] as usize] = t - begin[j];
                        out.end_ns = out.end_ns.max(t);
                        current[j] += 1;
                        release(
                            j,
                            t + jobs[j].gap_ns,
                            &mut current,
                            &mut begin,
                            &mut left,
                            &mut pending,
                            &mut out,
                        );
                    }
                }
            } else {
                k += 1;
            }
        }
        if gated && done(&current) {
            break;
        }
    }
    for a in &active {
        for &(e, c) in &a.uses {
            if (e as usize) < ne {
                out.edge_bits[e as usize] += c * a.sent;
            }
        }
    }
    out.end_ns = if gated { out.end_ns } else { t };
    out.unfinished = stuck
        + (0..jobs.len())
            .filter(|&j| current[j] < jobs[j].iterations)
            .map(|j| {
                left[j]
                    + (current[j] + 1..jobs[j].iterations)
                        .map(|n| left_of(j, n))
                        .sum::<usize>()
            })
            .sum::<usize>();
    out.edge_bits.truncate(ne);
    out
}
