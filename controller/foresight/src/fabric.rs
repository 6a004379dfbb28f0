//! Sessions with every switch of a fabric, driven concurrently (one task per
//! switch): push the pipeline, reconcile intended state.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context};
use installer::device::Artifacts;
use installer::reconcile::{reconcile, Diff};
use installer::{Devices, Intent};
use p4rt::{P4Info, Switch, SwitchOptions};

/// The compiled Foresight pipeline: P4Info plus the target's device
/// config (the BMv2 JSON, or the packed Tofino binary).
#[derive(Clone)]
pub struct Pipeline {
    pub info: Arc<P4Info>,
    pub device_config: Arc<Vec<u8>>,
}

impl Pipeline {
    /// The pipeline compiled into this binary (`p4src/build/foresight.*`).
    pub fn embedded() -> anyhow::Result<Pipeline> {
        let info = P4Info::from_binary(include_bytes!(
            "../../../p4src/build/foresight.p4info.binpb"
        ))?;
        Ok(Pipeline {
            info: Arc::new(info),
            device_config: Arc::new(include_bytes!("../../../p4src/build/foresight.json").to_vec()),
        })
    }

    /// A BMv2 pipeline from `<prefix>.p4info.binpb` and `<prefix>.json`.
    pub fn load(prefix: &str) -> anyhow::Result<Pipeline> {
        let json = std::path::PathBuf::from(format!("{prefix}.json"));
        Pipeline::from_artifacts(
            std::path::Path::new(&format!("{prefix}.p4info.binpb")),
            &Artifacts::Bmv2 { json },
        )
    }

    /// The P4Info at `p4info` and the device config built from `artifacts`.
    pub fn from_artifacts(
        p4info: &std::path::Path,
        artifacts: &Artifacts,
    ) -> anyhow::Result<Pipeline> {
        let info = P4Info::load(p4info)
            .with_context(|| format!("{} P4Info {}", artifacts.target(), p4info.display()))?;
        let device_config = artifacts.device_config()?;
        Ok(Pipeline {
            info: Arc::new(info),
            device_config: Arc::new(device_config),
        })
    }
}

/// Where a switch's P4Runtime server is.
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub addr: String,
    pub device_id: u64,
    /// P4Runtime over TLS (`--p4rt-tls-ca`); plain text when `None`.
    pub tls: Option<tonic::transport::ClientTlsConfig>,
}

/// Primary sessions with every switch, by switch name.
pub struct Fabric {
    pub pipeline: Pipeline,
    pub devices: Arc<Devices>,
    pub switches: BTreeMap<String, Arc<Switch>>,
}

/// Run `f` on every switch concurrently; fail with the switch's name.
async fn each<T, F, Fut>(
    switches: &BTreeMap<String, Arc<Switch>>,
    f: F,
) -> anyhow::Result<BTreeMap<String, T>>
where
    T: Send + 'static,
    F: Fn(String, Arc<Switch>) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<T>> + Send + 'static,
{
    let tasks: Vec<_> = switches
        .iter()
        .map(|(name, sw)| (name.clone(), tokio::spawn(f(name.clone(), sw.clone()))))
        .collect();
    let mut out = BTreeMap::new();
    for (name, task) in tasks {
        let value = task
            .await
            .map_err(|e| anyhow!("{name}: task failed: {e}"))?
            .with_context(|| format!("switch {name}"))?;
        out.insert(name, value);
    }
    Ok(out)
}

impl Fabric {
    /// Connect to every switch and become primary (election id `election_id`).
    pub async fn connect(
        pipeline: Pipeline,
        devices: Devices,
        endpoints: &BTreeMap<String, Endpoint>,
        election_id: u128,
    ) -> anyhow::Result<Fabric> {
        let mut tasks = Vec::new();
        for (name, ep) in endpoints {
            let options = SwitchOptions::new(&ep.addr, ep.device_id)
                .election_id(election_id)
                .tls(ep.tls.clone());
            tasks.push((
                name.clone(),
                tokio::spawn(async move {
                    let switch =
                        Switch::connect_with_retry(options, Duration::from_secs(10)).await?;
                    switch.wait_primary(Duration::from_secs(5)).await?;
                    Ok::<_, p4rt::Error>(switch)
                }),
            ));
        }
        let mut switches = BTreeMap::new();
        for (name, task) in tasks {
            let switch = task
                .await?
                .with_context(|| format!("connecting to switch {name}"))?;
            switches.insert(name, Arc::new(switch));
        }
        Ok(Fabric {
            pipeline,
            devices: Arc::new(devices),
            switches,
        })
    }

    /// Push the pipeline to every switch.
    pub async fn push_pipeline(&self) -> anyhow::Result<()> {
        let pipeline = self.pipeline.clone();
        each(&self.switches, move |_, sw| {
            let pipeline = pipeline.clone();
            async move {
                installer::pipeline::push(&sw, &pipeline.info, pipeline.device_config.to_vec())
                    .await?;
                Ok(())
            }
        })
        .await?;
        Ok(())
    }

    /// Reconcile every switch with its intent (switches without one are
    /// reconciled to empty). Returns each switch's diff and the time until
    /// the last switch acknowledged.
    pub async fn reconcile(
        &self,
        intents: &BTreeMap<String, Intent>,
    ) -> anyhow::Result<(BTreeMap<String, Diff>, Duration)> {
        let info = self.pipeline.info.clone();
        let mut resolved = BTreeMap::new();
        for name in self.switches.keys() {
            let intent = intents.get(name).cloned().unwrap_or_default();
            resolved.insert(
                name.clone(),
                Arc::new(intent.resolve(name, &info, &self.devices)?),
            );
        }
        let start = Instant::now();
        let resolved = Arc::new(resolved);
        let diffs = each(&self.switches, move |name, sw| {
            let (info, resolved) = (info.clone(), resolved.clone());
            async move { Ok(reconcile(&sw, &info, &resolved[&name], 1000).await?) }
        })
        .await?;
        Ok((diffs, start.elapsed()))
    }

    /// Close every session.
    pub async fn shutdown(self) {
        for (_, sw) in self.switches {
            if let Ok(sw) = Arc::try_unwrap(sw) {
                sw.shutdown().await;
            }
        }
    }
}

/// A TLS client configuration from PEM files: the CA that signed the
/// server, and our certificate and key when the server requires one.
/// `flag` prefixes the option names in errors (`--tls`, `--p4rt-tls`).
pub fn client_tls(
    flag: &str,
    ca: Option<&std::path::Path>,
    cert: Option<&std::path::Path>,
    key: Option<&std::path::Path>,
) -> anyhow::Result<Option<tonic::transport::ClientTlsConfig>> {
    use anyhow::Context;
    use tonic::transport::{Certificate, ClientTlsConfig, Identity};
    let Some(ca) = ca else {
        return Ok(None);
    };
    let read = |p: &std::path::Path, what: &str| {
        std::fs::read(p).with_context(|| format!("{flag}-{what} {}", p.display()))
    };
    let mut tls = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(read(ca, "ca")?));
    if let (Some(cert), Some(key)) = (cert, key) {
        tls = tls.identity(Identity::from_pem(read(cert, "cert")?, read(key, "key")?));
    }
    Ok(Some(tls))
}
