//! `foresight reserve demand|collective|batch`, `foresight cancel` and
//! `foresight register`: operator requests to a running controller over
//! NDSP. One file per subcommand, beside what they share:
//!
//! * `demand`, `collective`, `batch` — the three kinds of `reserve`
//!   (`run` below dispatches them);
//! * `cancel`, `register` — `foresight cancel` and `foresight register`;
//! * `args` — flags and fields every request shares (timing, priority,
//!   header, default ids, sizes, QP ranges);
//! * `client` — where the controller is (`Target`) and sending a request
//!   to it, following replicas to their leader;
//! * `output` — a reservation as JSON or as text.

mod args;
mod batch;
mod cancel;
mod client;
mod collective;
mod demand;
mod output;
mod register;

use clap::{Args, Subcommand};

use batch::BatchArgs;
use collective::CollectiveArgs;
use demand::DemandArgs;
use output::{out, print_reservation};

pub use cancel::{cancel, CancelCmd};
pub use register::{register, RegisterCmd};

#[derive(Args)]
pub struct ReserveCmd {
    #[command(subcommand)]
    what: What,
}

#[derive(Subcommand)]
enum What {
    /// A point-to-point transfer between two host addresses.
    Demand(DemandArgs),
    /// A collective over whole hosts (each host's GPUs are consecutive ranks).
    Collective(CollectiveArgs),
    /// Many point-to-point demands from a file, in one request: all are
    /// planned or none is (a job scheduler's forecast).
    Batch(BatchArgs),
}

pub fn run(cmd: ReserveCmd) -> anyhow::Result<()> {
    let what = match cmd.what {
        What::Batch(a) => return batch::run_batch(a),
        other => other,
    };
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async move {
        let (target, reservation, us) = match what {
            What::Batch(_) => unreachable!("handled above"),
            What::Demand(a) => demand::submit(a).await?,
            What::Collective(a) => collective::submit(a).await?,
        };
        let view = out(&reservation, us);
        if target.json {
            println!("{}", serde_json::to_string_pretty(&view)?);
        } else {
            print_reservation(&view);
        }
        Ok(())
    })
}
