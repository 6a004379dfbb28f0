//! A connection to one P4Runtime switch: arbitration over the StreamChannel,
//! pipeline push, batched writes, streamed reads, packet I/O and digests.
//!
//! One [`Switch`] per device; it is `Send + Sync` and cheap to share behind
//! an `Arc`, so one process can drive a whole fabric (one task per switch).

use std::time::Duration;

use prost::Message;
use tokio::sync::{mpsc, watch, Mutex};
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::StreamExt;
use tonic::transport::{Channel, ClientTlsConfig, Endpoint};

use crate::entity::describe;
use crate::error::{Error, Result, UpdateFailure, WriteError};
use crate::p4info::P4Info;
use crate::proto::google::rpc;
use crate::proto::p4::v1 as p4;
use crate::proto::p4::v1::p4_runtime_client::P4RuntimeClient;
use crate::shared_write::{SharedUpdate, SharedWriteRequest};
use p4::stream_message_request::Update as Request;
use p4::stream_message_response::Update as Response;

/// How to reach and identify ourselves to a switch.
#[derive(Debug, Clone)]
pub struct SwitchOptions {
    /// `host:port` of the P4Runtime server.
    pub addr: String,
    pub device_id: u64,
    /// Higher wins primary; two clients of one role must differ.
    pub election_id: u128,
    /// Role name; empty is the default (full-access) role.
    pub role: String,
    /// How long to wait for the TCP connection and for the arbitration answer.
    pub timeout: Duration,
    /// TLS to the P4Runtime server (a CA to verify it, and our certificate
    /// when it requires one); plain text when `None`.
    pub tls: Option<ClientTlsConfig>,
}

impl SwitchOptions {
    pub fn new(addr: impl Into<String>, device_id: u64) -> Self {
        SwitchOptions {
            addr: addr.into(),
            device_id,
            election_id: 1,
            role: String::new(),
            timeout: Duration::from_secs(5),
            tls: None,
        }
    }

    pub fn election_id(mut self, election_id: u128) -> Self {
        self.election_id = election_id;
        self
    }

    pub fn tls(mut self, tls: Option<ClientTlsConfig>) -> Self {
        self.tls = tls;
        self
    }
}

/// What the last arbitration update said about us.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mastership {
    /// True while the switch considers us the primary client.
    pub is_primary: bool,
    /// Election id of the current primary, if the switch told us.
    pub primary_election_id: Option<u128>,
    /// False once the stream has closed (switch gone or shut down).
    pub connected: bool,
}

/// Messages the switch sends unprompted.
#[derive(Debug)]
pub enum StreamEvent {
    PacketIn(p4::PacketIn),
    Digest(p4::DigestList),
    IdleTimeout(p4::IdleTimeoutNotification),
    Error(p4::StreamError),
}

/// A live P4Runtime session with one device.
pub struct Switch {
    options: SwitchOptions,
    client: P4RuntimeClient<Channel>,
    /// Write RPCs of shared updates, on the client's channel.
    writer: tonic::client::Grpc<Channel>,
    stream_tx: mpsc::Sender<p4::StreamMessageRequest>,
    mastership: watch::Receiver<Mastership>,
    events: Mutex<mpsc::Receiver<StreamEvent>>,
}

fn to_uint128(v: u128) -> p4::Uint128 {
    p4::Uint128 {
        high: (v >> 64) as u64,
        low: v as u64,
    }
}

fn from_uint128(v: &p4::Uint128) -> u128 {
    (u128::from(v.high) << 64) | u128::from(v.low)
}

impl Switch {
    /// Connect, open the stream channel and send our arbitration request.
    /// Returns once the switch has answered (primary or backup).
    pub async fn connect(options: SwitchOptions) -> Result<Switch> {
        let scheme = if options.tls.is_some() {
            "https"
        } else {
            "http"
        };
        let mut endpoint = Endpoint::from_shared(format!("{scheme}://{}", options.addr))
            .map_err(|source| Error::Connect {
                addr: options.addr.clone(),
                source,
            })?
            .connect_timeout(options.timeout)
            .tcp_nodelay(true);
        if let Some(tls) = &options.tls {
            endpoint = endpoint
                .tls_config(tls.clone())
                .map_err(|source| Error::Connect {
                    addr: options.addr.clone(),
                    source,
                })?;
        }
        let channel = endpoint.connect().await.map_err(|source| Error::Connect {
            addr: options.addr.clone(),
            source,
        })?;
        let writer = tonic::client::Grpc::new(channel.clone())
            .max_decoding_message_size(256 << 20)
            .max_encoding_message_size(256 << 20);
        let mut client = P4RuntimeClient::new(channel)
            .max_decoding_message_size(256 << 20)
            .max_encoding_message_size(256 << 20);

        let (stream_tx, stream_rx) = mpsc::channel(1024);
        stream_tx
            .send(arbitration_request(&options))
            .await
            .expect("receiver is alive");
        let responses = client
            .stream_channel(ReceiverStream::new(stream_rx))
            .await
            .map_err(|status| rpc_error("StreamChannel", &options.addr, status))?
            .into_inner();

        let (mastership_tx, mut mastership) = watch::channel(Mastership {
            is_primary: false,
            primary_election_id: None,
            connected: true,
        });
        let (events_tx, events_rx) = mpsc::channel(4096);
        tokio::spawn(read_stream(
            options.clone(),
            responses,
            mastership_tx,
            events_tx,
        ));

        // Wait for the first arbitration answer (or the stream ending).
        let answered = tokio::time::timeout(options.timeout, mastership.changed()).await;
        match answered {
            Err(_) => {
                return Err(Error::ArbitrationTimeout {
                    addr: options.addr.clone(),
                    waited_ms: options.timeout.as_millis() as u64,
                })
            }
            Ok(Err(_)) => {
                return Err(Error::StreamClosed {
                    addr: options.addr.clone(),
                    reason: "closed before arbitration".into(),
                })
            }
            Ok(Ok(())) => {}
        }
        if !mastership.borrow().connected {
            return Err(Error::StreamClosed {
                addr: options.addr.clone(),
                reason: "closed before arbitration (is the device id right?)".into(),
            });
        }
        Ok(Switch {
            options,
            client,
            writer,
            stream_tx,
            mastership,
            events: Mutex::new(events_rx),
        })
    }

    /// [`Switch::connect`], retried with exponential backoff (50 ms doubling
    /// to 1 s) until `deadline` passes; for switches that are still starting.
    pub async fn connect_with_retry(options: SwitchOptions, deadline: Duration) -> Result<Switch> {
        let start = tokio::time::Instant::now();
        let mut delay = Duration::from_millis(50);
        loop {
            match Switch::connect(options.clone()).await {
                Ok(switch) => return Ok(switch),
                Err(err) if start.elapsed() + delay >= deadline => return Err(err),
                Err(err) => {
                    tracing::debug!(addr = %options.addr, %err, "connect failed, retrying");
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(1));
                }
            }
        }
    }

    /// A fresh session with the same options (after the switch restarted or
    /// the stream closed); the caller re-pushes pipeline and state.
    pub async fn reconnect(&self, deadline: Duration) -> Result<Switch> {
        Switch::connect_with_retry(self.options.clone(), deadline).await
    }

    pub fn options(&self) -> &SwitchOptions {
        &self.options
    }

    pub fn addr(&self) -> &str {
        &self.options.addr
    }

    /// Current mastership; `watch` it to follow changes.
    pub fn mastership(&self) -> watch::Receiver<Mastership> {
        self.mastership.clone()
    }

    pub fn is_primary(&self) -> bool {
        let m = self.mastership.borrow();
        m.is_primary && m.connected
    }

    /// Wait until we are primary or `timeout` passes.
    pub async fn wait_primary(&self, timeout: Duration) -> Result<()> {
        let mut watch = self.mastership.clone();
        let waited =
            tokio::time::timeout(timeout, watch.wait_for(|m| m.is_primary || !m.connected)).await;
        match waited {
            Ok(Ok(m)) if m.is_primary => Ok(()),
            _ => Err(self.not_primary()),
        }
    }

    fn not_primary(&self) -> Error {
        Error::NotPrimary {
            addr: self.options.addr.clone(),
            device_id: self.options.device_id,
            election_id: self.options.election_id,
            primary: self.mastership.borrow().primary_election_id,
        }
    }

    /// Push a pipeline: P4Info plus the target's device config (the BMv2 JSON).
    pub async fn set_pipeline(
        &self,
        p4info: &P4Info,
        device_config: Vec<u8>,
        action: p4::set_forwarding_pipeline_config_request::Action,
    ) -> Result<()> {
        let request = p4::SetForwardingPipelineConfigRequest {
            device_id: self.options.device_id,
            role: self.options.role.clone(),
            election_id: Some(to_uint128(self.options.election_id)),
            action: action as i32,
            config: Some(p4::ForwardingPipelineConfig {
                p4info: Some(p4info.raw().clone()),
                p4_device_config: device_config,
                cookie: None,
            }),
            ..Default::default()
        };
        self.client
            .clone()
            .set_forwarding_pipeline_config(request)
            .await
            .map_err(|s| rpc_error("SetForwardingPipelineConfig", &self.options.addr, s))?;
        Ok(())
    }

    /// The pipeline the switch holds (`ALL`, `COOKIE_ONLY`, ...).
    pub async fn get_pipeline(
        &self,
        response_type: p4::get_forwarding_pipeline_config_request::ResponseType,
    ) -> Result<Option<p4::ForwardingPipelineConfig>> {
        let request = p4::GetForwardingPipelineConfigRequest {
            device_id: self.options.device_id,
            response_type: response_type as i32,
        };
        let response = self
            .client
            .clone()
            .get_forwarding_pipeline_config(request)
            .await
            .map_err(|s| rpc_error("GetForwardingPipelineConfig", &self.options.addr, s))?;
        Ok(response.into_inner().config)
    }

    /// Send one Write RPC with all of `updates`; failures come back per update.
    pub async fn write(&self, updates: Vec<p4::Update>) -> Result<(), WriteError> {
        self.write_batched(updates, usize::MAX).await
    }

    /// Send `updates` in Write RPCs of at most `batch_size` updates, in order.
    /// Stops at the first batch with a failure; the error lists the failed
    /// updates by their index in `updates` and how many were not sent.
    pub async fn write_batched(
        &self,
        updates: Vec<p4::Update>,
        batch_size: usize,
    ) -> Result<(), WriteError> {
        self.write_streamed(updates, batch_size, 1).await
    }

    /// Send `updates` in Write RPCs of at most `batch_size` updates with up
    /// to `in_flight` of them outstanding, building each batch from the
    /// iterator only when it is sent: building, encoding and the switch's
    /// work overlap, and the round trip is hidden. With `in_flight` 1 the
    /// batches are applied in order; with more the switch may apply them in
    /// any order, so the updates must not depend on each other. After a
    /// failed batch no new one is sent; the error lists every failed update
    /// (of every batch sent) by its index and how many were not sent.
    pub async fn write_streamed(
        &self,
        updates: impl IntoIterator<Item = impl Into<SharedUpdate>>,
        batch_size: usize,
        in_flight: usize,
    ) -> Result<(), WriteError> {
        let (batch_size, in_flight) = (batch_size.max(1), in_flight.max(1));
        let mut updates = updates.into_iter().map(Into::into);
        let mut pending = tokio::task::JoinSet::new();
        let (mut offset, mut failed) = (0, None::<WriteError>);
        loop {
            while failed.is_none() && pending.len() < in_flight {
                let batch: Vec<SharedUpdate> = updates.by_ref().take(batch_size).collect();
                if batch.is_empty() {
                    break;
                }
                let len = batch.len();
                // A task of its own: the request is on its way while the
                // next batch is built.
                pending.spawn(self.send_batch(batch, offset));
                offset += len;
            }
            let Some(joined) = pending.join_next().await else {
                break;
            };
            let result = joined.unwrap_or_else(|e| {
                Err(WriteError {
                    addr: self.options.addr.clone(),
                    failures: Vec::new(),
                    status: Some(format!("write task failed: {e}")),
                    not_sent: 0,
                })
            });
            if let Err(err) = result {
                let all = failed.get_or_insert_with(|| WriteError {
                    addr: err.addr.clone(),
                    failures: Vec::new(),
                    status: None,
                    not_sent: 0,
                });
                all.failures.extend(err.failures);
                all.status = all.status.take().or(err.status);
            }
        }
        match failed {
            None => Ok(()),
            Some(mut err) => {
                err.failures.sort_by_key(|f| f.index);
                err.not_sent = updates.count();
                Err(err)
            }
        }
    }

    /// One Write RPC with `batch`, whose first update is `offset` in what
    /// the caller sends; failures name their updates.
    fn send_batch(
        &self,
        batch: Vec<SharedUpdate>,
        offset: usize,
    ) -> impl std::future::Future<Output = Result<(), WriteError>> + Send + 'static {
        let mut writer = self.writer.clone();
        let addr = self.options.addr.clone();
        let request = SharedWriteRequest {
            device_id: self.options.device_id,
            role: self.options.role.clone(),
            election_id: Some(to_uint128(self.options.election_id)),
            // The request shares the batch's entities; the batch stays to
            // name what failed.
            updates: batch.clone(),
            atomicity: p4::write_request::Atomicity::ContinueOnError as i32,
        };
        async move {
            let Err(status) = write_rpc(&mut writer, request).await else {
                return Ok(());
            };
            let failures = update_failures(&status, offset, &batch);
            Err(WriteError {
                addr,
                status: failures
                    .is_empty()
                    .then(|| format!("{}: {}", code_name(status.code()), status.message())),
                failures,
                not_sent: 0,
            })
        }
    }

    /// Insert, modify or delete `entities`, in batches of `batch_size`.
    pub async fn apply(
        &self,
        kind: p4::update::Type,
        entities: impl IntoIterator<Item = p4::Entity>,
        batch_size: usize,
    ) -> Result<(), WriteError> {
        let updates = entities.into_iter().map(|e| update(kind, e));
        self.write_streamed(updates, batch_size, 1).await
    }

    /// Insert, and turn the inserts the switch refuses as ALREADY_EXISTS into
    /// modifies: makes re-applying intended state idempotent.
    pub async fn insert_or_modify(
        &self,
        entities: Vec<p4::Entity>,
        batch_size: usize,
    ) -> Result<(), WriteError> {
        let mut modify = Vec::new();
        for chunk in entities.chunks(batch_size.max(1)) {
            match self
                .apply(p4::update::Type::Insert, chunk.to_vec(), usize::MAX)
                .await
            {
                Ok(()) => {}
                Err(err) => {
                    let exists = tonic::Code::AlreadyExists as i32;
                    if err.status.is_some() || err.failures.iter().any(|f| f.code != exists) {
                        return Err(err);
                    }
                    modify.extend(err.failures.iter().map(|f| chunk[f.index].clone()));
                }
            }
        }
        self.apply(p4::update::Type::Modify, modify, batch_size)
            .await
    }

    /// Read `entities` (wildcards allowed) and collect every answer.
    pub async fn read(&self, entities: Vec<p4::Entity>) -> Result<Vec<p4::Entity>> {
        let mut stream = self.read_stream(entities).await?;
        let mut out = Vec::new();
        while let Some(batch) = stream.next().await {
            out.extend(batch?);
        }
        Ok(out)
    }

    /// Read `entities` as a stream of batches, as the switch sends them.
    pub async fn read_stream(
        &self,
        entities: Vec<p4::Entity>,
    ) -> Result<impl futures::Stream<Item = Result<Vec<p4::Entity>>> + Send + 'static> {
        let request = p4::ReadRequest {
            device_id: self.options.device_id,
            role: self.options.role.clone(),
            entities,
        };
        let addr = self.options.addr.clone();
        let stream = self
            .client
            .clone()
            .read(request)
            .await
            .map_err(|s| rpc_error("Read", &addr, s))?
            .into_inner();
        Ok(stream.map(move |r| {
            r.map(|r| r.entities)
                .map_err(|s| rpc_error("Read", &addr, s))
        }))
    }

    /// The P4Runtime API version the switch implements.
    pub async fn capabilities(&self) -> Result<String> {
        let response = self
            .client
            .clone()
            .capabilities(p4::CapabilitiesRequest {})
            .await
            .map_err(|s| rpc_error("Capabilities", &self.options.addr, s))?;
        Ok(response.into_inner().p4runtime_api_version)
    }

    /// Send a packet to the switch's CPU port with metadata.
    pub async fn send_packet(&self, packet: p4::PacketOut) -> Result<()> {
        self.send_stream(Request::Packet(packet)).await
    }

    /// Acknowledge a digest list so the switch can send more of that digest.
    pub async fn ack_digest(&self, digest_id: u32, list_id: u64) -> Result<()> {
        self.send_stream(Request::DigestAck(p4::DigestListAck { digest_id, list_id }))
            .await
    }

    async fn send_stream(&self, update: Request) -> Result<()> {
        self.stream_tx
            .send(p4::StreamMessageRequest {
                update: Some(update),
            })
            .await
            .map_err(|_| Error::StreamClosed {
                addr: self.options.addr.clone(),
                reason: "stream task ended".into(),
            })
    }

    /// The next packet-in, digest or idle-timeout notification, or `None`
    /// once the stream has closed.
    pub async fn next_event(&self) -> Option<StreamEvent> {
        self.events.lock().await.recv().await
    }

    /// Close the stream channel so the switch releases our mastership now,
    /// not when the TCP connection times out.
    pub async fn shutdown(self) {
        drop(self.stream_tx);
        let mut watch = self.mastership;
        let _ =
            tokio::time::timeout(Duration::from_secs(1), watch.wait_for(|m| !m.connected)).await;
    }
}

/// An update of `kind` for `entity`.
pub fn update(kind: p4::update::Type, entity: p4::Entity) -> p4::Update {
    p4::Update {
        r#type: kind as i32,
        entity: Some(entity),
    }
}

fn arbitration_request(options: &SwitchOptions) -> p4::StreamMessageRequest {
    p4::StreamMessageRequest {
        update: Some(Request::Arbitration(p4::MasterArbitrationUpdate {
            device_id: options.device_id,
            role: (!options.role.is_empty()).then(|| p4::Role {
                name: options.role.clone(),
                ..Default::default()
            }),
            election_id: Some(to_uint128(options.election_id)),
            status: None,
        })),
    }
}

/// Follows the stream: arbitration updates go to the watch, the rest to events.
async fn read_stream(
    options: SwitchOptions,
    mut responses: tonic::Streaming<p4::StreamMessageResponse>,
    mastership: watch::Sender<Mastership>,
    events: mpsc::Sender<StreamEvent>,
) {
    let reason = loop {
        let message = match responses.message().await {
            Ok(Some(message)) => message,
            Ok(None) => break "closed by the switch".to_string(),
            Err(status) => break status.to_string(),
        };
        let event = match message.update {
            Some(Response::Arbitration(update)) => {
                let is_primary = update.status.as_ref().is_some_and(|s| s.code == 0);
                let primary = update.election_id.as_ref().map(from_uint128);
                tracing::debug!(addr = %options.addr, is_primary, ?primary, "arbitration");
                mastership.send_replace(Mastership {
                    is_primary,
                    primary_election_id: primary,
                    connected: true,
                });
                continue;
            }
            Some(Response::Packet(packet)) => StreamEvent::PacketIn(packet),
            Some(Response::Digest(digest)) => StreamEvent::Digest(digest),
            Some(Response::IdleTimeoutNotification(n)) => StreamEvent::IdleTimeout(n),
            Some(Response::Error(e)) => StreamEvent::Error(e),
            Some(Response::Other(_)) | None => continue,
        };
        // A consumer that does not read events must not stall arbitration.
        if events.try_send(event).is_err() {
            tracing::warn!(addr = %options.addr, "stream event dropped: queue full or no reader");
        }
    };
    tracing::debug!(addr = %options.addr, %reason, "stream channel ended");
    mastership.send_modify(|m| {
        m.connected = false;
        m.is_primary = false;
    });
}

fn rpc_error(rpc: &'static str, addr: &str, status: tonic::Status) -> Error {
    Error::Rpc {
        rpc,
        addr: addr.to_string(),
        status: Box::new(status),
    }
}

fn code_name(code: tonic::Code) -> String {
    format!("{code:?}")
}

/// P4Runtime's Write RPC with a request of shared updates (the generated
/// client takes only the generated request type).
async fn write_rpc(
    writer: &mut tonic::client::Grpc<Channel>,
    request: SharedWriteRequest,
) -> std::result::Result<(), tonic::Status> {
    writer
        .ready()
        .await
        .map_err(|e| tonic::Status::unknown(format!("channel not ready: {e}")))?;
    let codec = tonic_prost::ProstCodec::<SharedWriteRequest, p4::WriteResponse>::default();
    writer
        .unary(
            tonic::Request::new(request),
            tonic::codegen::http::uri::PathAndQuery::from_static(WRITE_PATH),
            codec,
        )
        .await
        .map(|_| ())
}

/// The Write method's path (`/<service>/<method>`).
const WRITE_PATH: &str = "/p4.v1.P4Runtime/Write";

/// Per-update errors from a failed Write: the status details carry a
/// `google.rpc.Status` whose details are one `p4.v1.Error` per update.
fn update_failures(
    status: &tonic::Status,
    offset: usize,
    batch: &[SharedUpdate],
) -> Vec<UpdateFailure> {
    let Ok(details) = rpc::Status::decode(status.details()) else {
        return Vec::new();
    };
    details
        .details
        .iter()
        .enumerate()
        .filter_map(|(i, any)| {
            let error = p4::Error::decode(any.value.as_slice()).ok()?;
            (error.canonical_code != 0).then(|| UpdateFailure {
                index: offset + i,
                entity: batch
                    .get(i)
                    .and_then(|u| u.entity())
                    .map_or_else(String::new, |e| describe(None, e)),
                code: error.canonical_code,
                message: error.message,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    /// Writes of shared updates go to the generated service's Write method.
    #[test]
    fn the_write_path_names_the_generated_service() {
        use crate::proto::p4::v1::p4_runtime_server::SERVICE_NAME;
        assert_eq!(super::WRITE_PATH, format!("/{SERVICE_NAME}/Write"));
    }
}
