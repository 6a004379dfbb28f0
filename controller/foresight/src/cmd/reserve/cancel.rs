//! `foresight cancel`: a demand, collective, reservation or job, on a
//! running controller.

use anyhow::bail;
use clap::Args;
use ndsp::proto::{self, cancel_request};
use ndsp::Validate;

use super::args::header;
use super::client::{call, AfterLostAnswer, Target};
use super::output::install_us;

#[derive(Args)]
pub struct CancelCmd {
    /// Cancel this demand.
    #[arg(long, group = "what")]
    demand: Option<String>,
    /// Cancel this collective.
    #[arg(long, group = "what")]
    collective: Option<String>,
    /// Cancel this reservation (id as `foresight status` shows it).
    #[arg(long, group = "what")]
    reservation: Option<String>,
    /// Cancel everything of this job and unregister it.
    #[arg(long, group = "what")]
    job: Option<String>,
    #[command(flatten)]
    target: Target,
}

pub fn cancel(cmd: CancelCmd) -> anyhow::Result<()> {
    let target = match (&cmd.demand, &cmd.collective, &cmd.reservation, &cmd.job) {
        (Some(d), None, None, None) => cancel_request::Target::DemandId(d.clone()),
        (None, Some(c), None, None) => cancel_request::Target::CollectiveId(c.clone()),
        (None, None, Some(r), None) => cancel_request::Target::ReservationId(r.clone()),
        (None, None, None, Some(j)) => cancel_request::Target::JobId(j.clone()),
        _ => bail!("say what to cancel: one of --demand, --collective, --reservation or --job"),
    };
    let request = proto::CancelRequest {
        header: header(&cmd.target.tenant),
        target: Some(target),
    };
    request
        .validate()
        .map_err(|e| anyhow::anyhow!("invalid request: {e}"))?;
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async move {
        let answer = call(&cmd.target, request, |mut c, r| {
            Box::pin(async move { c.cancel(r).await })
        })
        .await;
        // Resent after a lost answer and nothing is live any more: the
        // first attempt cancelled it.
        let already = answer.as_ref().err().and_then(|e| e.downcast_ref::<AfterLostAnswer>());
        if already.is_some_and(|a| a.0.code() == tonic::Code::NotFound) {
            if cmd.target.json {
                println!("{}", serde_json::json!({ "cancelled": [], "already_cancelled": true }));
            } else {
                println!("already cancelled: the first attempt's answer was lost, and nothing of it is live now");
            }
            return Ok(());
        }
        let response = answer?;
        let us = install_us(&response);
        let ids = response.into_inner().cancelled_reservation_ids;
        if cmd.target.json {
            println!(
                "{}",
                serde_json::json!({ "cancelled": ids, "removed_us": us })
            );
        } else if ids.is_empty() {
            println!("nothing to cancel (the job is unregistered)");
        } else {
            for id in &ids {
                println!("cancelled {id}");
            }
            if let Some(us) = us {
                println!(
                    "entries removed from every switch in {:.2} ms",
                    us as f64 / 1e3
                );
            }
        }
        Ok(())
    })
}
