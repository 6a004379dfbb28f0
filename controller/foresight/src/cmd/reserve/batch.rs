//! `foresight reserve batch`: many point-to-point demands from a YAML or
//! JSON file, in one request: all are planned or none is (a job
//! scheduler's forecast).

use std::net::Ipv4Addr;

use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use ndsp::proto::{self, demand_signal, endpoint};
use ndsp::Validate;

use super::args::{header, parse_qp_choices, parse_size, Priority};
use super::client::{call, Target};
use super::output::{install_us, out, print_reservation, ReservationOut};
use crate::cmd::millis::{ms_to_ns, MAX_MS};

#[derive(Args)]
pub(super) struct BatchArgs {
    /// YAML or JSON list of demands: {id, src, dst, bytes, qp? | qp_choices?,
    /// start_unix_ns | start_in_ms, rate_gbps | duration_ms, priority?, elastic?}.
    #[arg(long)]
    file: std::path::PathBuf,
    #[command(flatten)]
    target: Target,
}

/// One demand of a batch file.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct BatchDemand {
    id: String,
    src: Ipv4Addr,
    dst: Ipv4Addr,
    #[serde(deserialize_with = "bytes_field")]
    bytes: u64,
    qp: Option<u32>,
    /// "FIRST-LAST": destination QPs the controller may choose among.
    qp_choices: Option<String>,
    start_unix_ns: Option<u64>,
    start_in_ms: Option<f64>,
    rate_gbps: Option<f64>,
    duration_ms: Option<f64>,
    #[serde(default = "default_batch_priority")]
    priority: String,
    #[serde(default)]
    elastic: bool,
}

fn default_batch_priority() -> String {
    "iteration-blocking".into()
}

/// Bytes as an integer or a string with a unit ("64KiB").
fn bytes_field<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    #[derive(serde::Deserialize)]
    #[serde(untagged)]
    enum B {
        N(u64),
        S(String),
    }
    match <B as serde::Deserialize>::deserialize(d)? {
        B::N(n) => Ok(n),
        B::S(s) => parse_size(&s).map_err(serde::de::Error::custom),
    }
}

impl BatchDemand {
    /// The NDSP demand; `at` names the entry in errors.
    fn signal(&self, at: &str) -> anyhow::Result<proto::DemandSignal> {
        let start = match (self.start_unix_ns, self.start_in_ms) {
            (Some(t), None) => demand_signal::Start::StartUnixNs(t),
            (None, Some(ms)) => demand_signal::Start::StartOffsetNs(
                ms_to_ns("--start-in-ms", ms, MAX_MS)
                    .with_context(|| format!("{at}.start_in_ms"))?,
            ),
            _ => bail!("{at}: give exactly one of start_unix_ns and start_in_ms"),
        };
        let pacing = match (self.rate_gbps, self.duration_ms) {
            (Some(r), None) if r.is_finite() && r > 0.0 => {
                demand_signal::Pacing::RateBps((r * 1e9).round() as u64)
            }
            (Some(_), None) => bail!("{at}.rate_gbps: must be a positive number"),
            (None, Some(d)) => demand_signal::Pacing::DurationNs(
                ms_to_ns("--duration-ms", d, MAX_MS)
                    .with_context(|| format!("{at}.duration_ms"))?,
            ),
            _ => bail!("{at}: give exactly one of rate_gbps and duration_ms"),
        };
        if self.qp.is_some() && self.qp_choices.is_some() {
            bail!("{at}: give qp or qp_choices, not both");
        }
        let qp_choices = self
            .qp_choices
            .as_deref()
            .map(parse_qp_choices)
            .transpose()
            .map_err(|e| anyhow::anyhow!("{at}.qp_choices: {e}"))?;
        let priority = <Priority as ValueEnum>::from_str(&self.priority, true).map_err(|_| {
            anyhow::anyhow!(
                "{at}.priority: {:?} is not one of background, standard, iteration-blocking, latency-critical",
                self.priority
            )
        })?;
        let host = |ip: Ipv4Addr| {
            Some(proto::Endpoint {
                address: Some(endpoint::Address::HostAddress(ip.to_string())),
            })
        };
        Ok(proto::DemandSignal {
            demand_id: self.id.clone(),
            job_id: String::new(),
            source: host(self.src),
            destination: host(self.dst),
            start: Some(start),
            size_bytes: self.bytes,
            pacing: Some(pacing),
            priority: priority.wire(),
            elasticity: if self.elastic {
                proto::Elasticity::Elastic
            } else {
                proto::Elasticity::Inelastic
            } as i32,
            deadline: None,
            dest_qp: self.qp,
            recurrence: None,
            dest_qp_choices: qp_choices,
        })
    }
}

/// Read a batch file and build its request (nothing is sent on any error).
fn batch_request(
    path: &std::path::Path,
    tenant: &str,
) -> anyhow::Result<proto::SubmitDemandRequest> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("--file {}: cannot read", path.display()))?;
    batch_from_text(&text, &path.display().to_string(), tenant)
}

/// A batch file's text as one request; `name` names the file in errors.
fn batch_from_text(
    text: &str,
    name: &str,
    tenant: &str,
) -> anyhow::Result<proto::SubmitDemandRequest> {
    let demands: Vec<BatchDemand> = planner::topology::yaml::from_str_located(
        text,
        &format!("--file {name}: not a list of demands"),
    )
    .map_err(|e| anyhow::anyhow!(e))?;
    if demands.is_empty() {
        bail!("--file {name}: no demands");
    }
    let demands = demands
        .iter()
        .enumerate()
        .map(|(i, d)| d.signal(&format!("{name}: demands[{i}] ({})", d.id)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let request = proto::SubmitDemandRequest {
        header: header(tenant),
        reference_unix_ns: 0,
        demands,
    };
    request
        .validate()
        .map_err(|e| anyhow::anyhow!("{name}: invalid request: {e}"))?;
    Ok(request)
}

/// `reserve batch`: one request, one reservation per demand.
pub(super) fn run_batch(a: BatchArgs) -> anyhow::Result<()> {
    let request = batch_request(&a.file, &a.target.tenant)?;
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async move {
        let response = call(&a.target, request, |mut c, r| {
            Box::pin(async move { c.submit_demand(r).await })
        })
        .await?;
        let us = install_us(&response);
        let body = response
            .into_inner()
            .validate()
            .map_err(|e| anyhow::anyhow!("the controller's answer is malformed: {e}"))?;
        let views: Vec<ReservationOut> = body.iter().map(|r| out(r, us)).collect();
        if a.target.json {
            println!("{}", serde_json::to_string_pretty(&views)?);
        } else {
            for v in &views {
                print_reservation(v);
            }
        }
        Ok(())
    })
}

#[cfg(test)]
mod batch_tests {
    use super::*;

    fn request(text: &str) -> anyhow::Result<proto::SubmitDemandRequest> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("demands.yaml");
        std::fs::write(&path, text).unwrap();
        batch_request(&path, "lab")
    }

    #[test]
    fn a_batch_becomes_one_request_in_file_order() {
        let r = request(
            "- {id: a, src: 10.0.1.1, dst: 10.0.2.1, bytes: 64KiB, qp: 256, start_in_ms: 5, rate_gbps: 50}\n\
             - {id: b, src: 10.0.1.2, dst: 10.0.2.2, bytes: 1000, start_unix_ns: 7, duration_ms: 2, priority: background}\n",
        )
        .unwrap();
        assert_eq!(r.demands.len(), 2);
        assert_eq!(r.demands[0].size_bytes, 65536);
        assert_eq!(r.demands[0].dest_qp, Some(256));
        assert_eq!(
            r.demands[1].priority,
            proto::PriorityClass::Background as i32
        );
    }

    /// A batch entry may let the controller choose the destination QP; a
    /// malformed or doubled choice names the entry and the field.
    #[test]
    fn qp_choices_are_a_range_or_an_error_that_says_where() {
        let entry = |extra: &str| {
            request(&format!(
                "- {{id: a, src: 10.0.1.1, dst: 10.0.2.1, bytes: 1000, start_in_ms: 1, rate_gbps: 1, {extra}}}\n"
            ))
        };
        let r = entry("qp_choices: 0x400-0x4ff").unwrap();
        assert_eq!(
            r.demands[0].dest_qp_choices,
            Some(proto::QpRange {
                first_qp: 0x400,
                count: 256
            })
        );
        for (extra, want) in [
            (
                "qp_choices: 9-3",
                "demands[0] (a).qp_choices: QP choices '9-3': the last QP is below the first",
            ),
            (
                "qp_choices: abc",
                "demands[0] (a).qp_choices: QP choices 'abc': no '-'",
            ),
            (
                "qp: 5, qp_choices: 2-9",
                "demands[0] (a): give qp or qp_choices, not both",
            ),
            ("qp_choices: 0-1", "dest_qp_choices.first_qp"),
        ] {
            let e = format!("{:#}", entry(extra).unwrap_err());
            assert!(e.contains(want), "{extra}: {e}");
        }
    }

    #[test]
    fn errors_name_the_entry_and_field() {
        let e = request("- {id: a, src: 10.0.1.1, dst: 10.0.2.1, bytes: 1, rate_gbps: 1}\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("demands[0] (a): give exactly one of start_unix_ns and start_in_ms"),
            "{e}"
        );
        let e = request(
            "- {id: a, src: 10.0.1.1, dst: 10.0.2.1, bytes: 1, start_in_ms: 1, rate_gbps: 1, priority: urgent}\n",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("demands[0] (a).priority"), "{e}");
        let e = format!(
            "{:#}",
            request("- {id: a, src: nowhere, dst: 10.0.2.1, bytes: 1}\n").unwrap_err()
        );
        assert!(e.contains("not a list of demands"), "{e}");
        let e = request("[]").unwrap_err().to_string();
        assert!(e.contains("no demands"), "{e}");
    }

    /// Mutated batch files (seeded; `FORESIGHT_FUZZ_INPUTS`, default
    /// 5,000) never panic, and every rejection says where: an entry and
    /// field, a line and column, or the request field.
    #[test]
    fn mutated_batch_files_never_panic_and_every_rejection_says_where() {
        let corpus = [
            "- {id: a, src: 10.0.1.1, dst: 10.0.2.1, bytes: 64KiB, qp: 256, start_in_ms: 5, rate_gbps: 50}\n\
             - {id: b, src: 10.0.1.2, dst: 10.0.2.2, bytes: 1000, start_unix_ns: 7, duration_ms: 2, priority: background}\n",
            "- id: ring-h1-h2\n  src: 10.0.1.1\n  dst: 10.0.1.2\n  qp: 4096\n  bytes: 1250000\n  rate_gbps: 50.0\n  start_unix_ns: 1795479704019968386\n  priority: iteration-blocking\n\
             - id: bg-h3-h1\n  src: 10.0.2.1\n  dst: 10.0.1.1\n  bytes: 1GB\n  duration_ms: 1500\n  start_in_ms: 0\n  priority: background\n  elastic: true\n",
        ];
        for text in corpus {
            batch_from_text(text, "f.yaml", "lab").expect("the corpus is valid");
        }
        let inputs: u64 = std::env::var("FORESIGHT_FUZZ_INPUTS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(5_000);
        let mut m = testkit::mutate::Mutator::new(1);
        let (mut ok, mut rejected) = (0u64, 0u64);
        for _ in 0..inputs {
            let (a, b) = (m.below(2), m.below(2));
            let input = m.text(corpus[a], corpus[b]);
            let r = std::panic::catch_unwind(|| batch_from_text(&input, "f.yaml", "lab"))
                .unwrap_or_else(|_| panic!("the batch parser panicked on:\n{input}"));
            match r {
                Ok(_) => ok += 1,
                Err(e) => {
                    rejected += 1;
                    let e = format!("{e:#}");
                    assert!(
                        e.contains("demands[")
                            || e.contains(" line ")
                            || e.contains("the document as a whole")
                            || e.contains("no demands")
                            || e.contains("invalid request: "),
                        "a rejection without its place: {e}\n--- input ---\n{input}"
                    );
                }
            }
        }
        println!("{inputs} mutated batch files: no panic, {ok} accepted, {rejected} rejected with their place");
        assert!(rejected > inputs / 2);
    }
}
