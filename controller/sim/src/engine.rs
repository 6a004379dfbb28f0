//! The event-driven fluid simulation: flows start (at a fixed time, or at
//! an offset into an iteration of a job), get max-min fair rates over their
//! links, and finish. A job's iteration ends when its slowest flow ends;
//! the next one starts after the job's compute gap. Rates are brought up to
//! date at every start, finish and link failure ([`MaxMin`] re-solves only
//! what an event can change).
//!
//! A flow's remaining bits are only touched when its rate changes: finish
//! times wait in a heap, so an event costs in proportion to what it
//! changes, not to the number of active flows.
//!
//! **Goodput.** A flow's max-min rate is what it puts on the wire. A flow
//! that loses packets to reordering ([`Router::reorders`]) delivers less:
//! its [`Factors`] are set whenever its rate changes (by more than a
//! billionth), from its new rate and the links' loads of that solution,
//! and kept until the next change. Its remaining bits are goodput bits;
//! the links are credited with the wire bits.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use indicatif::ProgressBar;

use crate::maxmin::{FlowId, MaxMin};
use crate::parts::{Parts, Route};
use crate::radix::RadixHeap;

/// A repeating job: iteration `n + 1` starts `gap_ns` after the last flow
/// of iteration `n` finishes (the compute between two communication phases).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Job {
    /// Iterations to run.
    pub iterations: u32,
    /// Idle time between an iteration's end and the next one's start, ns.
    pub gap_ns: f64,
}

/// The iteration of a job a flow belongs to (and delays until it ends).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gate {
    /// Index into the job list.
    pub job: u32,
    /// Iteration.
    pub iteration: u32,
}

/// A flow to simulate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SimFlow {
    /// Size in bits; infinite for a stream that lasts the whole run.
    pub bits: f64,
    /// Start: offset into its iteration when gated, otherwise absolute, ns.
    pub start_ns: f64,
    /// Its iteration, or `None` for traffic that gates nothing (background).
    pub gate: Option<Gate>,
    /// Highest rate it may send at, Gbit/s (infinite: line rate).
    pub max_gbps: f32,
}

impl SimFlow {
    /// A flow of iteration `iteration` of job `job`, starting `offset_ns` in.
    pub fn gated(bits: f64, job: u32, iteration: u32, offset_ns: f64) -> SimFlow {
        SimFlow {
            bits,
            start_ns: offset_ns,
            gate: Some(Gate { job, iteration }),
            max_gbps: f32::INFINITY,
        }
    }

    /// A flow starting at `at_ns`, gating nothing.
    pub fn at(bits: f64, at_ns: f64) -> SimFlow {
        SimFlow {
            bits,
            start_ns: at_ns,
            gate: None,
            max_gbps: f32::INFINITY,
        }
    }
}

/// What a flow makes of its max-min share: goodput bits and wire bits per
/// bit of share.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Factors {
    /// Delivered (new) bits per bit of share.
    pub goodput: f64,
    /// Bits put on the links per bit of share (below 1: the sender uses
    /// less than its share).
    pub wire: f64,
}

impl Factors {
    /// Everything sent is delivered.
    pub const WHOLE: Factors = Factors {
        goodput: 1.0,
        wire: 1.0,
    };
}

/// The links as a solution left them, for [`Router::factors`].
pub struct Links<'a> {
    /// Per edge: summed rate of the flows on it (bits/ns).
    pub load: &'a [f64],
    /// Per edge: capacity (bits/ns).
    pub cap: &'a [f64],
    /// Changes whenever the loads may have changed (a cache key).
    pub epoch: u64,
}

/// Whether a rate moved enough to re-evaluate a flow's [`Factors`].
pub fn rate_moved(old: f64, new: f64) -> bool {
    old == 0.0 || (new - old).abs() > 1e-9 * old
}

/// Chooses links for flows (a load-balancing policy on a fabric).
pub trait Router {
    /// Over how many equal sub-flows flow `i` is spread, each routed on its
    /// own (a connection's QPs).
    fn subflows(&self, i: usize) -> u32 {
        let _ = i;
        1
    }
    /// The route of sub-flow `sub` of flow `i` when it starts (or is
    /// re-routed), given the current per-edge load (summed coefficients of
    /// active flows; the sprayed flows started at the same instant are not
    /// in it yet). Shared fractional pieces go into `parts`. False if it
    /// cannot be routed (it then never finishes).
    fn route(
        &mut self,
        i: usize,
        sub: u32,
        load: &[f64],
        parts: &mut Parts,
        out: &mut Route,
    ) -> bool;
    /// Takes these directed edges down.
    fn fail(&mut self, edges: &[u32]);
    /// Whether flow `i` is re-routed after a failure even if its links
    /// survived (hash-based routing: the group sizes changed).
    fn rehash_on_failure(&self, i: usize) -> bool;
    /// Whether flow `i` can lose goodput to reordering; only then is
    /// [`Router::factors`] asked.
    fn reorders(&self, i: usize) -> bool {
        let _ = i;
        false
    }
    /// Goodput and wire use of flow `i` at max-min `rate`, given the links.
    fn factors(&mut self, i: usize, rate: f64, links: &Links<'_>) -> Factors {
        let _ = (i, rate, links);
        Factors::WHOLE
    }
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
    /// Per job, per iteration: duration, ns (infinite if it never finished).
    pub iteration_ns: Vec<Vec<f64>>,
    /// Per flow: when its last sub-flow finished, ns (infinite if never);
    /// empty unless [`Options::finish_times`].
    pub finish_ns: Vec<f64>,
    /// Per edge: bits carried.
    pub edge_bits: Vec<f64>,
    /// When the last iteration ended (or the last flow, without jobs), ns.
    pub end_ns: f64,
    /// Instants at which flows started or finished or links failed.
    pub events: usize,
    /// Rate changes over all events (newcomers included).
    pub resolved: usize,
    /// Gated flows that never finished plus flows that could not be routed.
    pub unfinished: usize,
}

/// Below this, two instants are the same (ns).
const EPS_T: f64 = 1e-6;

/// Flows due within this of `t` finish at `t`: rounding in long runs must
/// not split one instant into several.
pub fn tolerance(t: f64) -> f64 {
    EPS_T.max(t * 1e-12)
}

/// `(time, index)`, ordered so that a max-heap pops the earliest.
#[derive(Clone, Copy, PartialEq)]
struct Soonest(f64, u32, u32);
impl Eq for Soonest {}
impl PartialOrd for Soonest {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Soonest {
    fn cmp(&self, o: &Self) -> Ordering {
        o.0.total_cmp(&self.0)
            .then(o.1.cmp(&self.1))
            .then(o.2.cmp(&self.2))
    }
}

/// Engine-side state of an active flow (kept in the solver's slot).
#[derive(Clone, Copy, Default)]
struct Track {
    flow: u32,
    sub: u32,
    /// `first[job] + iteration` of its gate, or [`NO_GATE`].
    gate: u32,
    /// Stamp of its current finish entry (run-wide, so a reused slot
    /// cannot match a former occupant's stale entries).
    version: u32,
    /// Remaining (goodput) bits at `t_ref`.
    rem: f64,
    t_ref: f64,
    /// Wire bits sent on the current route up to `t_ref`.
    sent: f64,
}

/// The factors of active flow `id` (kept apart from [`Track`], which
/// fills a cache line with its slot; only reordering flows have any).
fn factors_of(factors: &[Factors], id: FlowId) -> Factors {
    factors.get(id as usize).copied().unwrap_or(Factors::WHOLE)
}

/// Forgets the factors of a flow that leaves (its slot is reused).
fn forget(factors: &mut [Factors], id: FlowId) {
    if let Some(f) = factors.get_mut(id as usize) {
        *f = Factors::WHOLE;
    }
}

const NO_GATE: u32 = u32::MAX;

/// Flows waiting to start, by source: the ungated flows, or one released
/// iteration. Each list is sorted by start offset; `base` is added.
struct Source {
    base: f64,
    list: Vec<u32>,
    next: usize,
}

struct Jobs {
    /// Flows of each (job, iteration), at `first[job] + iteration`.
    by_gate: Vec<Vec<u32>>,
    job_of: Vec<u32>,
    first: Vec<usize>,
    left: Vec<usize>,
    begin: Vec<f64>,
    /// Next iteration to end, per job.
    current: Vec<u32>,
    /// Jobs with iterations still to end.
    running: usize,
}

/// How to run a simulation.
#[derive(Clone, Copy, Default)]
pub struct Options<'a> {
    /// Advanced once per gated flow that finishes.
    pub progress: Option<&'a ProgressBar>,
    /// Record every flow's finish time in [`Outcome::finish_ns`] (8 bytes
    /// per flow; otherwise it is left empty).
    pub finish_times: bool,
    /// Flows due within this of a finish finish with it, ns (0: exact).
    /// With uneven sizes every finish is an instant of its own and moves
    /// the rates of most flows; merging close finishes bounds the events.
    pub coalesce_ns: f64,
}

/// Credits `bits` carried by active flow `id` to the links of its route
/// (parts per part, expanded at the end).
fn credit(
    id: FlowId,
    bits: f64,
    mm: &MaxMin<Track>,
    edge_bits: &mut [f64],
    part_bits: &mut Vec<f64>,
) {
    if bits == 0.0 {
        return;
    }
    let (edges, parts) = mm.route_of(id);
    for &e in edges {
        edge_bits[e as usize] += bits;
    }
    for &p in parts {
        if part_bits.len() <= p as usize {
            part_bits.resize(p as usize + 1, 0.0);
        }
        part_bits[p as usize] += bits;
    }
}

/// Simulates `flows` (rates in bits/ns = Gbit/s, capacities `cap` per edge)
/// until every job has run all its iterations (then background still
/// running stops), or, without gated flows, until every flow has finished.
pub fn simulate(
    flows: &[SimFlow],
    jobs: &[Job],
    cap: &[f64],
    router: &mut dyn Router,
    failures: &[Failure],
    opts: Options<'_>,
) -> Outcome {
    let mut first = Vec::with_capacity(jobs.len());
    let mut total = 0usize;
    for j in jobs {
        first.push(total);
        total += j.iterations as usize;
    }
    let mut js = Jobs {
        by_gate: vec![Vec::new(); total],
        job_of: (0..jobs.len() as u32)
            .flat_map(|j| std::iter::repeat_n(j, jobs[j as usize].iterations as usize))
            .collect(),
        first: first.clone(),
        left: vec![0; total],
        begin: vec![f64::INFINITY; total],
        current: vec![0; jobs.len()],
        running: jobs.iter().filter(|j| j.iterations > 0).count(),
    };
    let mut ungated = Vec::new();
    for (i, f) in flows.iter().enumerate() {
        match f.gate {
            Some(g) => {
                assert!(
                    (g.job as usize) < jobs.len() && g.iteration < jobs[g.job as usize].iterations,
                    "flow {i}: gate {g:?} outside the jobs"
                );
                js.by_gate[js.first[g.job as usize] + g.iteration as usize].push(i as u32);
            }
            None => ungated.push(i as u32),
        }
    }
    let by_start = |a: &u32, b: &u32| {
        flows[*a as usize]
            .start_ns
            .total_cmp(&flows[*b as usize].start_ns)
            .then(a.cmp(b))
    };
    for l in js.by_gate.iter_mut().chain([&mut ungated]) {
        if !l.is_sorted_by(|a, b| by_start(a, b).is_le()) {
            l.sort_by(by_start);
        }
    }
    for (k, l) in js.by_gate.iter().enumerate() {
        js.left[k] = l
            .iter()
            .map(|&i| router.subflows(i as usize) as usize)
            .sum();
    }
    let gated_flows: usize = js.left.iter().sum();

    let mut out = Outcome {
        iteration_ns: jobs
            .iter()
            .map(|j| vec![f64::INFINITY; j.iterations as usize])
            .collect(),
        finish_ns: if opts.finish_times {
            vec![f64::INFINITY; flows.len()]
        } else {
            Vec::new()
        },
        edge_bits: vec![0.0; cap.len()],
        ..Default::default()
    };
    let mut sources: Vec<Source> = vec![Source {
        base: 0.0,
        list: ungated,
        next: 0,
    }];
    let mut waiting: BinaryHeap<Soonest> = BinaryHeap::new();
    let push_source = |s: usize, sources: &[Source], waiting: &mut BinaryHeap<Soonest>| {
        let src = &sources[s];
        if let Some(&i) = src.list.get(src.next) {
            // Simultaneous starts go in flow order (least-loaded routing sees them so).
            waiting.push(Soonest(src.base + flows[i as usize].start_ns, i, s as u32));
        }
    };
    push_source(0, &sources, &mut waiting);
    // Releases iteration `n` of job `j` at `t`; empty iterations end at once.
    let release = |j: usize,
                   t: f64,
                   js: &mut Jobs,
                   sources: &mut Vec<Source>,
                   waiting: &mut BinaryHeap<Soonest>,
                   out: &mut Outcome| {
        let mut t = t;
        while (js.current[j] as usize) < out.iteration_ns[j].len() {
            let k = js.first[j] + js.current[j] as usize;
            js.begin[k] = t;
            if js.left[k] > 0 {
                sources.push(Source {
                    base: t,
                    list: std::mem::take(&mut js.by_gate[k]),
                    next: 0,
                });
                push_source(sources.len() - 1, sources, waiting);
                return;
            }
            out.iteration_ns[j][js.current[j] as usize] = 0.0;
            js.current[j] += 1;
            t += jobs[j].gap_ns;
        }
        js.running -= 1;
    };
    for (j, job) in jobs.iter().enumerate() {
        if job.iterations > 0 {
            release(j, 0.0, &mut js, &mut sources, &mut waiting, &mut out);
        }
    }

    let mut mm: MaxMin<Track> = MaxMin::new(cap);
    let mut due: RadixHeap<(FlowId, u32)> = RadixHeap::default();
    let mut route = Route::default();
    let mut part_bits: Vec<f64> = Vec::new();
    let mut stuck = 0usize;
    let mut fail_ix = 0usize;
    let mut failed = vec![false; cap.len()];
    let mut t = 0.0f64;
    let mut stamp = 0u32;
    // Re-rated flows whose factors are due, and the solution count.
    let mut refactor: Vec<FlowId> = Vec::new();
    let mut epoch = 0u64;
    // Per solver slot: the factors of a reordering flow (empty otherwise).
    let mut factors: Vec<Factors> = Vec::new();
    // Sub-flows still running per flow, when finish times are recorded.
    let mut subs_left: Vec<u32> = if opts.finish_times {
        (0..flows.len()).map(|i| router.subflows(i)).collect()
    } else {
        Vec::new()
    };
    // Routes sub-flow `sub` of flow `i` and makes it active with `rem` bits to go.
    let start_flow = |i: u32,
                      sub: u32,
                      t: f64,
                      router: &mut dyn Router,
                      mm: &mut MaxMin<Track>,
                      route: &mut Route,
                      rem: f64|
     -> bool {
        let (load, parts) = mm.load_and_parts();
        route.clear();
        if !router.route(i as usize, sub, load, parts, route) {
            return false;
        }
        let track = Track {
            flow: i,
            sub,
            gate: flows[i as usize].gate.map_or(NO_GATE, |g| {
                (first[g.job as usize] + g.iteration as usize) as u32
            }),
            version: 0,
            rem,
            t_ref: t,
            sent: 0.0,
        };
        mm.add(route, flows[i as usize].max_gbps as f64, track);
        true
    };
    // The last instant at which something happened (the run's end).
    let mut t_end = f64::NEG_INFINITY;
    let happens = |t: f64, t_end: &mut f64, out: &mut Outcome| {
        if *t_end != t {
            out.events += 1;
            *t_end = t;
        }
    };
    loop {
        // Failures (before starts: a link down at 0 is down for every flow).
        while let Some(f) = failures.get(fail_ix) {
            if f.at_ns > t + tolerance(t) {
                break;
            }
            fail_ix += 1;
            happens(t, &mut t_end, &mut out);
            router.fail(&f.edges);
            for &e in &f.edges {
                mm.fail_edge(e);
                failed[e as usize] = true;
            }
            // In flow order, so least-loaded re-picks are reproducible.
            let mut live: Vec<(u32, u32, FlowId)> = mm
                .live()
                .map(|id| (mm.data(id).flow, mm.data(id).sub, id))
                .collect();
            live.sort_unstable();
            for (i, sub, id) in live {
                let (edges, parts) = mm.route_of(id);
                let hit = edges.iter().any(|&e| failed[e as usize])
                    || parts
                        .iter()
                        .any(|&p| mm.parts().get(p).iter().any(|u| failed[u.0 as usize]));
                if !hit && !router.rehash_on_failure(i as usize) {
                    continue;
                }
                let tr = *mm.data(id);
                let f = factors_of(&factors, id);
                let d = mm.rate(id) * (t - tr.t_ref);
                credit(
                    id,
                    tr.sent + d * f.wire,
                    &mm,
                    &mut out.edge_bits,
                    &mut part_bits,
                );
                mm.remove(id);
                forget(&mut factors, id);
                let rem = tr.rem - d * f.goodput;
                if !start_flow(i, sub, t, router, &mut mm, &mut route, rem)
                    && flows[i as usize].gate.is_none()
                {
                    stuck += 1;
                }
            }
        }
        // Starts.
        while let Some(&Soonest(ts, _, s)) = waiting.peek() {
            if ts > t + tolerance(t) {
                break;
            }
            waiting.pop();
            happens(t, &mut t_end, &mut out);
            let src = &mut sources[s as usize];
            let i = src.list[src.next];
            src.next += 1;
            push_source(s as usize, &sources, &mut waiting);
            let k = router.subflows(i as usize);
            let rem = flows[i as usize].bits / k as f64;
            for sub in 0..k {
                if !start_flow(i, sub, t, router, &mut mm, &mut route, rem)
                    && flows[i as usize].gate.is_none()
                {
                    stuck += 1;
                }
            }
        }
        // Rates.
        let mut resolved = 0;
        let reorders = |i: u32| router.reorders(i as usize);
        mm.solve(|id, tr, old, new| {
            resolved += 1;
            let f = factors_of(&factors, id);
            let d = old * (t - tr.t_ref);
            tr.rem -= d * f.goodput;
            tr.sent += d * f.wire;
            tr.t_ref = t;
            stamp = stamp.wrapping_add(1);
            tr.version = stamp;
            if reorders(tr.flow) && rate_moved(old, new) {
                refactor.push(id);
                return;
            }
            let end = t + tr.rem / (new * f.goodput);
            if end.is_finite() {
                due.push(end, (id, tr.version));
            }
        });
        out.resolved += resolved;
        epoch += 1;
        for id in refactor.drain(..) {
            let links = Links {
                load: mm.edge_load(),
                cap,
                epoch,
            };
            let f = router.factors(mm.data(id).flow as usize, mm.rate(id), &links);
            if factors.len() <= id as usize {
                factors.resize(id as usize + 1, Factors::WHOLE);
            }
            factors[id as usize] = f;
            let tr = mm.data(id);
            let end = t + tr.rem / (mm.rate(id) * f.goodput);
            if end.is_finite() {
                due.push(end, (id, tr.version));
            }
        }
        // Every re-rating leaves a stale finish entry behind; keep them a minority.
        if due.len() > 2 * mm.len() + (1 << 20) {
            due.retain(|_, &(id, v)| mm.is_live(id) && mm.data(id).version == v);
        }
        // Next instant: a start, a failure, or the earliest live finish.
        let mut t_next = f64::INFINITY;
        if let Some(&Soonest(ts, _, _)) = waiting.peek() {
            t_next = ts;
        }
        if let Some(f) = failures.get(fail_ix) {
            t_next = t_next.min(f.at_ns.max(t));
        }
        // Stale finish entries before that go (taking one cannot pass a start).
        while let Some(tf) = due.min_time().filter(|&tf| tf <= t_next) {
            let (_, (id, v)) = due.pop().expect("a minimum was seen");
            if mm.is_live(id) && mm.data(id).version == v {
                due.push(tf, (id, v));
                t_next = tf;
                break;
            }
        }
        if !t_next.is_finite() {
            break;
        }
        t = t_next.max(t);
        // Finishes: due within the tolerance of now.
        let tol = tolerance(t).max(opts.coalesce_ns);
        while due.min_time().is_some_and(|tf| tf <= t + tol) {
            let (_, (id, v)) = due.pop().expect("a minimum was seen");
            let tr = *mm.data(id);
            if !mm.is_live(id) || tr.version != v {
                continue;
            }
            happens(t, &mut t_end, &mut out);
            // What is left is sent by now.
            let f = factors_of(&factors, id);
            credit(
                id,
                tr.sent + tr.rem / f.goodput * f.wire,
                &mm,
                &mut out.edge_bits,
                &mut part_bits,
            );
            mm.remove(id);
            forget(&mut factors, id);
            if opts.finish_times {
                let n = &mut subs_left[tr.flow as usize];
                *n -= 1;
                if *n == 0 {
                    out.finish_ns[tr.flow as usize] = t;
                }
            }
            if tr.gate != NO_GATE {
                let k = tr.gate as usize;
                let j = js.job_of[k] as usize;
                js.left[k] -= 1;
                if let Some(p) = opts.progress {
                    p.inc(1);
                }
                // Only the current iteration of a job has been released.
                if js.left[k] == 0 {
                    out.iteration_ns[j][k - js.first[j]] = t - js.begin[k];
                    out.end_ns = out.end_ns.max(t);
                    js.current[j] += 1;
                    release(
                        j,
                        t + jobs[j].gap_ns,
                        &mut js,
                        &mut sources,
                        &mut waiting,
                        &mut out,
                    );
                }
            }
        }
        if gated_flows > 0 && js.running == 0 {
            break;
        }
    }
    // Streams and unfinished flows: what they sent up to the end.
    let t_end = t_end.max(0.0);
    let live: Vec<FlowId> = mm.live().collect();
    for id in live {
        let tr = *mm.data(id);
        let d = mm.rate(id) * (t_end - tr.t_ref).max(0.0);
        credit(
            id,
            tr.sent + d * factors_of(&factors, id).wire,
            &mm,
            &mut out.edge_bits,
            &mut part_bits,
        );
    }
    for (p, &b) in part_bits.iter().enumerate() {
        for &(e, c) in mm.parts().get(p as u32) {
            out.edge_bits[e as usize] += c * b;
        }
    }
    if gated_flows == 0 {
        out.end_ns = t_end;
    }
    out.unfinished = stuck + js.left.iter().sum::<usize>();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parts::Use;
    use crate::reference;

    /// A candidate route: own edges and fractional pieces.
    type Candidate = (Vec<u32>, Vec<Vec<Use>>);

    /// Each flow has candidate routes (own edges, fractional pieces); its
    /// sub-flow `q` takes, from the `q`-th candidate on, the first whose
    /// links are all up, or, with `least_loaded`, the one whose busiest own
    /// link has the least load.
    #[derive(Clone)]
    struct Candidates {
        routes: Vec<Vec<Candidate>>,
        subflows: Vec<u32>,
        failed: Vec<bool>,
        least_loaded: bool,
        rehash: bool,
    }

    impl Router for Candidates {
        fn subflows(&self, i: usize) -> u32 {
            self.subflows[i]
        }
        fn route(
            &mut self,
            i: usize,
            sub: u32,
            load: &[f64],
            parts: &mut Parts,
            out: &mut Route,
        ) -> bool {
            let up = |c: &Candidate| {
                c.0.iter().all(|&e| !self.failed[e as usize])
                    && c.1.iter().flatten().all(|u| !self.failed[u.0 as usize])
            };
            let busiest = |c: &Candidate| c.0.iter().map(|&e| load[e as usize]).fold(0.0, f64::max);
            let mut best: Option<&Candidate> = None;
            let cands = &self.routes[i];
            let from = sub as usize % cands.len();
            for c in cands[from..].iter().chain(&cands[..from]).filter(|c| up(c)) {
                match best {
                    None => best = Some(c),
                    Some(b) if self.least_loaded && busiest(c) < busiest(b) => best = Some(c),
                    _ => {}
                }
                if !self.least_loaded {
                    break;
                }
            }
            let Some((edges, pieces)) = best else {
                return false;
            };
            out.edges.extend_from_slice(edges);
            for p in pieces {
                out.parts.push(parts.intern(p));
            }
            true
        }
        fn fail(&mut self, edges: &[u32]) {
            for &e in edges {
                self.failed[e as usize] = true;
            }
        }
        fn rehash_on_failure(&self, i: usize) -> bool {
            self.rehash && i % 2 == 0
        }
    }

    const TEST: Options = Options {
        progress: None,
        finish_times: true,
        coalesce_ns: 0.0,
    };

    fn fixed(routes: Vec<Vec<u32>>, edges: usize) -> Candidates {
        Candidates {
            subflows: vec![1; routes.len()],
            routes: routes.into_iter().map(|r| vec![(r, vec![])]).collect(),
            failed: vec![false; edges],
            least_loaded: false,
            rehash: false,
        }
    }

    fn one_job() -> Vec<Job> {
        vec![Job {
            iterations: 1,
            gap_ns: 0.0,
        }]
    }

    fn flow(bits: f64) -> SimFlow {
        SimFlow::gated(bits, 0, 0, 0.0)
    }

    #[test]
    fn single_bottleneck_closed_form() {
        // 8e9 bits over a 400 Gbit/s NIC and a 100 Gbit/s link: 80 ms.
        let mut r = fixed(vec![vec![0, 1]], 2);
        let o = simulate(&[flow(8e9)], &one_job(), &[400.0, 100.0], &mut r, &[], TEST);
        assert!((o.iteration_ns[0][0] - 8e7).abs() < 1.0, "{o:?}");
    }

    #[test]
    fn shared_link_max_min_then_speed_up() {
        // B and 2B bits sharing capacity C: the small one at C/2 finishes at
        // 2B/C; the big one then runs alone and finishes at 3B/C.
        let (b, c) = (1e6, 10.0);
        let mut r = fixed(vec![vec![0], vec![0]], 1);
        let o = simulate(
            &[flow(b), flow(2.0 * b)],
            &one_job(),
            &[c],
            &mut r,
            &[],
            TEST,
        );
        assert!((o.finish_ns[0] - 2.0 * b / c).abs() < 1e-3);
        assert!((o.finish_ns[1] - 3.0 * b / c).abs() < 1e-3);
        assert!((o.edge_bits[0] - 3.0 * b).abs() < 1e-3);
    }

    #[test]
    fn iterations_chain_and_background_does_not_gate() {
        let mut r = fixed(vec![vec![0], vec![0], vec![1]], 2);
        let flows = vec![
            SimFlow::gated(100.0, 0, 0, 0.0),
            SimFlow::gated(100.0, 0, 1, 0.0),
            SimFlow::at(1e9, 0.0),
        ];
        let jobs = [Job {
            iterations: 2,
            gap_ns: 0.0,
        }];
        let o = simulate(&flows, &jobs, &[10.0, 1.0], &mut r, &[], TEST);
        assert_eq!(o.iteration_ns, vec![vec![10.0, 10.0]]);
        assert!((o.finish_ns[1] - 20.0).abs() < 1e-9);
        // The run ends with the last iteration; the background has sent 20 bits.
        assert_eq!(o.end_ns, 20.0);
        assert!(o.finish_ns[2].is_infinite());
        assert!((o.edge_bits[1] - 20.0).abs() < 1e-9);
        assert_eq!(o.unfinished, 0);
    }

    #[test]
    fn jobs_keep_their_own_pace() {
        // Job 0: 100 bits per iteration, gap 5; job 1: 300 bits, gap 0;
        // separate links of 10: iterations of 10 and 30 ns.
        let mut r = fixed(vec![vec![0], vec![0], vec![1], vec![1]], 2);
        let flows = vec![
            SimFlow::gated(100.0, 0, 0, 0.0),
            SimFlow::gated(100.0, 0, 1, 0.0),
            SimFlow::gated(300.0, 1, 0, 0.0),
            SimFlow::gated(300.0, 1, 1, 0.0),
        ];
        let jobs = [
            Job {
                iterations: 2,
                gap_ns: 5.0,
            },
            Job {
                iterations: 2,
                gap_ns: 0.0,
            },
        ];
        let o = simulate(&flows, &jobs, &[10.0, 10.0], &mut r, &[], TEST);
        assert_eq!(o.iteration_ns, vec![vec![10.0, 10.0], vec![30.0, 30.0]]);
        assert_eq!(o.finish_ns[1], 25.0);
        assert_eq!(o.end_ns, 60.0);
    }

    #[test]
    fn rate_cap_and_stream() {
        // A stream capped at 2 shares a link of 10 with a flow of 80 bits.
        let mut r = fixed(vec![vec![0], vec![0]], 1);
        let mut stream = SimFlow::at(f64::INFINITY, 0.0);
        stream.max_gbps = 2.0;
        let o = simulate(
            &[flow(80.0), stream],
            &one_job(),
            &[10.0],
            &mut r,
            &[],
            TEST,
        );
        assert_eq!(o.iteration_ns, vec![vec![10.0]]);
        assert!((o.edge_bits[0] - 100.0).abs() < 1e-9);
    }

    #[test]
    fn failed_link_stalls_unroutable_flow() {
        let mut r = fixed(vec![vec![0]], 1);
        let f = [Failure {
            at_ns: 5.0,
            edges: vec![0],
        }];
        let o = simulate(&[flow(100.0)], &one_job(), &[1.0], &mut r, &f, TEST);
        assert_eq!(o.unfinished, 1);
        assert!(o.iteration_ns[0][0].is_infinite());
    }

    fn close(a: f64, b: f64) -> bool {
        a == b || (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
    }

    /// Random networks and traffic: the incremental engine agrees with the
    /// from-scratch reference on every finish time, iteration and link.
    #[test]
    fn agrees_with_the_reference_engine() {
        let mut rng = planner::rng::Rng::new(42);
        let mut cases = 0;
        for case in 0..300u64 {
            let ne = 4 + rng.below(12) as usize;
            let cap: Vec<f64> = (0..ne)
                .map(|_| [10.0, 25.0, 40.0, 100.0][rng.below(4) as usize])
                .collect();
            let spray = case % 3 == 0;
            let nf = 2 + rng.below(40) as usize;
            let pick = |rng: &mut planner::rng::Rng| -> Candidate {
                let mut own: Vec<u32> = (0..1 + rng.below(3))
                    .map(|_| rng.below(ne as u64) as u32)
                    .collect();
                own.sort_unstable();
                own.dedup();
                let mut pieces = Vec::new();
                if spray && rng.below(2) == 0 {
                    let k = 2 + rng.below(3) as usize;
                    let first = rng.below((ne - 1) as u64) as u32;
                    let piece: Vec<Use> = (0..k as u32)
                        .map(|j| ((first + j) % ne as u32, 1.0 / k as f64))
                        .collect();
                    pieces.push(piece);
                }
                (own, pieces)
            };
            let routes: Vec<Vec<Candidate>> = (0..nf)
                .map(|_| (0..1 + rng.below(3)).map(|_| pick(&mut rng)).collect())
                .collect();
            let jobs = vec![
                Job {
                    iterations: 1 + rng.below(3) as u32,
                    gap_ns: [0.0, 7.0][rng.below(2) as usize],
                },
                Job {
                    iterations: 1 + rng.below(2) as u32,
                    gap_ns: 3.0,
                },
            ];
            let flows: Vec<SimFlow> = (0..nf)
                .map(|_| {
                    // Few distinct sizes, so that flows finish together too.
                    let bits = [100.0, 250.0, 1000.0, 1234.5][rng.below(4) as usize];
                    let mut f = match rng.below(5) {
                        0 => SimFlow::at(bits, rng.below(40) as f64),
                        1 | 2 => SimFlow::gated(
                            bits,
                            0,
                            rng.below(jobs[0].iterations as u64) as u32,
                            0.0,
                        ),
                        _ => SimFlow::gated(
                            bits,
                            1,
                            rng.below(jobs[1].iterations as u64) as u32,
                            rng.below(3) as f64,
                        ),
                    };
                    if rng.below(6) == 0 {
                        f.max_gbps = 3.0;
                    }
                    if f.gate.is_none() && rng.below(4) == 0 {
                        f.bits = f64::INFINITY;
                    }
                    f
                })
                .collect();
            let failures = if case % 4 == 1 {
                vec![Failure {
                    // Sometimes down from the start.
                    at_ns: [0.0, 1.0 + rng.below(30) as f64][rng.below(2) as usize],
                    edges: vec![rng.below(ne as u64) as u32],
                }]
            } else {
                vec![]
            };
            let router = Candidates {
                subflows: (0..nf)
                    .map(|_| [1, 1, 2, 3][rng.below(4) as usize])
                    .collect(),
                routes,
                failed: vec![false; ne],
                least_loaded: !spray,
                rehash: case % 8 == 1,
            };
            let fast = simulate(&flows, &jobs, &cap, &mut router.clone(), &failures, TEST);
            let slow =
                reference::simulate(&flows, &jobs, &cap, &mut router.clone(), &failures, 0.0);
            let ctx = format!("case {case}: {fast:?}\nvs reference {slow:?}");
            assert_eq!(fast.unfinished, slow.unfinished, "{ctx}");
            for (a, b) in fast
                .iteration_ns
                .iter()
                .flatten()
                .zip(slow.iteration_ns.iter().flatten())
            {
                assert!(close(*a, *b), "iteration {a} vs {b}; {ctx}");
            }
            for (a, b) in fast.finish_ns.iter().zip(&slow.finish_ns) {
                assert!(close(*a, *b), "finish {a} vs {b}; {ctx}");
            }
            for (a, b) in fast.edge_bits.iter().zip(&slow.edge_bits) {
                assert!(
                    (a - b).abs() <= 1e-6 * a.abs().max(1.0),
                    "edge bits {a} vs {b}; {ctx}"
                );
            }
            assert!(close(fast.end_ns, slow.end_ns), "end; {ctx}");
            cases += usize::from(fast.resolved < fast.events * flows.len());
        }
        assert!(cases > 0);
    }
}
