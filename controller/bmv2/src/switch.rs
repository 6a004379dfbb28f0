//! One `simple_switch_grpc` process and its lifetime.

use std::fs::File;
use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::Toolchain;

/// The CPU port the harness gives switches unless told otherwise; the P4
/// programs' `CPU_PORT` constants use the same number.
pub const DEFAULT_CPU_PORT: u32 = 255;

/// What to start. Ports and log directory are chosen by [`Bmv2Switch::start`].
#[derive(Debug, Clone)]
pub struct SwitchSpec {
    /// Name used in logs and log directory names (e.g. `s1`).
    pub name: String,
    /// P4Runtime device id (BMv2's default is 0).
    pub device_id: u64,
    /// Data-plane ports: (port number, Linux interface name).
    pub interfaces: Vec<(u32, String)>,
    /// Extra arguments for BMv2 before `--` (e.g. `--priority-queues 8`).
    pub extra_args: Vec<String>,
    /// Extra target arguments, after `--` (e.g. `--priority-queues 8`).
    pub target_args: Vec<String>,
    /// Port number of the CPU port for P4Runtime packet-in/out (`None`: off).
    pub cpu_port: Option<u32>,
    /// How long to wait for the gRPC server to accept connections.
    pub ready_timeout: Duration,
}

impl SwitchSpec {
    pub fn new(name: impl Into<String>, device_id: u64) -> Self {
        SwitchSpec {
            name: name.into(),
            device_id,
            interfaces: Vec::new(),
            extra_args: Vec::new(),
            target_args: Vec::new(),
            cpu_port: Some(DEFAULT_CPU_PORT),
            ready_timeout: Duration::from_secs(15),
        }
    }

    pub fn interface(mut self, port: u32, name: impl Into<String>) -> Self {
        self.interfaces.push((port, name.into()));
        self
    }

    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.extra_args.push(arg.into());
        self
    }

    pub fn target_arg(mut self, arg: impl Into<String>) -> Self {
        self.target_args.push(arg.into());
        self
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("{name}: cannot prepare ({0})", name = .1)]
    Io(#[source] std::io::Error, String),
    #[error("{name}: simple_switch_grpc exited during start-up ({status}); log {log}:\n{tail}")]
    Exited {
        name: String,
        status: String,
        log: String,
        tail: String,
    },
    #[error(
        "{name}: port {port} was taken by another process before simple_switch_grpc could bind it"
    )]
    PortTaken { name: String, port: u16 },
    #[error("{name}: gRPC server did not accept connections on {addr} within {waited:?}; log {log}:\n{tail}")]
    NotReady {
        name: String,
        addr: String,
        waited: Duration,
        log: String,
        tail: String,
    },
}

/// A running switch. Dropping it stops the process (SIGTERM, then SIGKILL).
pub struct Bmv2Switch {
    spec: SwitchSpec,
    child: Child,
    grpc_port: u16,
    thrift_port: u16,
    log_dir: Option<tempfile::TempDir>,
    /// Where this start's lines begin in the log (a restart appends).
    log_start: u64,
    tools: Toolchain,
}

/// Two distinct ports that were free a moment ago on 127.0.0.1 (both held
/// while choosing, so the kernel cannot hand out the same one twice).
fn free_ports() -> std::io::Result<(u16, u16)> {
    let a = TcpListener::bind("127.0.0.1:0")?;
    let b = TcpListener::bind("127.0.0.1:0")?;
    Ok((a.local_addr()?.port(), b.local_addr()?.port()))
}

fn tail(path: &Path, max_bytes: u64) -> String {
    let mut text = String::new();
    if let Ok(mut file) = File::open(path) {
        let len = file.metadata().map(|m| m.len()).unwrap_or(0);
        let mut buf = Vec::new();
        use std::io::Seek;
        let _ = file.seek(std::io::SeekFrom::Start(len.saturating_sub(max_bytes)));
        let _ = file.read_to_end(&mut buf);
        text = String::from_utf8_lossy(&buf).into_owned();
    }
    text
}

impl Bmv2Switch {
    /// Start a switch with no pipeline (`--no-p4`); the caller pushes one over
    /// P4Runtime. Retries with new ports if the chosen ones were taken.
    pub fn start(tools: &Toolchain, spec: SwitchSpec) -> Result<Bmv2Switch, StartError> {
        let mut last_err = None;
        for _ in 0..3 {
            match Self::start_once(tools, spec.clone()) {
                Ok(switch) => return Ok(switch),
                Err(err @ (StartError::Exited { .. } | StartError::PortTaken { .. })) => {
                    // The error keeps the last attempt's log, not every attempt's.
                    if let Some(StartError::Exited { log, .. }) = last_err.replace(err) {
                        if let Some(dir) = Path::new(&log).parent() {
                            let _ = std::fs::remove_dir_all(dir);
                        }
                    }
                }
                Err(err) => return Err(err),
            }
        }
        Err(last_err.expect("three attempts"))
    }

    fn start_once(tools: &Toolchain, spec: SwitchSpec) -> Result<Bmv2Switch, StartError> {
        let io = |e| StartError::Io(e, spec.name.clone());
        let (grpc_port, thrift_port) = free_ports().map_err(io)?;
        let log_dir = tempfile::Builder::new()
            .prefix(&format!("foresight-bmv2-{}-", spec.name))
            .tempdir()
            .map_err(io)?;
        let child = spawn(tools, &spec, grpc_port, thrift_port, log_dir.path())?;
        let mut switch = Bmv2Switch {
            spec,
            child,
            grpc_port,
            thrift_port,
            log_dir: Some(log_dir),
            log_start: 0,
            tools: tools.clone(),
        };
        switch.wait_ready()?;
        Ok(switch)
    }

    /// Stop the process and start it again on the same ports (simulates a
    /// switch reboot: the pipeline and all state are gone).
    pub fn restart(&mut self) -> Result<(), StartError> {
        self.stop();
        let dir = self
            .log_dir
            .as_ref()
            .map(|d| d.path().to_path_buf())
            .unwrap_or_else(std::env::temp_dir);
        self.log_start = std::fs::metadata(self.log_path()).map_or(0, |m| m.len());
        self.child = spawn(
            &self.tools,
            &self.spec,
            self.grpc_port,
            self.thrift_port,
            &dir,
        )?;
        self.wait_ready()
    }

    /// Poll until the switch says its gRPC server is listening and the port
    /// accepts a connection (and so does its Thrift port), or fail with the
    /// log's tail if the process exits or the timeout passes. The port was free when it was chosen,
    /// but another process may bind it first: then the switch logs "Address
    /// already in use" (and still starts), while the connection reaches the
    /// other process. That is `PortTaken`, and `start` tries new ports.
    fn wait_ready(&mut self) -> Result<(), StartError> {
        let started = Instant::now();
        let addr = self.grpc_addr();
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(StartError::Exited {
                    name: self.spec.name.clone(),
                    status: status.to_string(),
                    log: self.keep_logs().join("switch.log").display().to_string(),
                    tail: tail(&self.log_path(), 2000),
                });
            }
            let log = self.log_since_start();
            if log.contains("Address already in use") {
                self.stop();
                return Err(StartError::PortTaken {
                    name: self.spec.name.clone(),
                    port: self.grpc_port,
                });
            }
            // Ready: gRPC listening and answering, and the Thrift server
            // (which starts after it, and whose port can be taken too) up.
            let sock = addr.parse().expect("valid address");
            let thrift = SocketAddr::from(([127, 0, 0, 1], self.thrift_port));
            if log.contains("Server listening on")
                && TcpStream::connect_timeout(&sock, Duration::from_millis(200)).is_ok()
                && TcpStream::connect_timeout(&thrift, Duration::from_millis(200)).is_ok()
                && !self.log_since_start().contains("Address already in use")
            {
                return Ok(());
            }
            if started.elapsed() > self.spec.ready_timeout {
                return Err(StartError::NotReady {
                    name: self.spec.name.clone(),
                    addr,
                    waited: self.spec.ready_timeout,
                    log: self.keep_logs().join("switch.log").display().to_string(),
                    tail: tail(&self.log_path(), 2000),
                });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// What this start has logged so far.
    fn log_since_start(&self) -> String {
        let mut text = Vec::new();
        if let Ok(mut file) = File::open(self.log_path()) {
            use std::io::Seek;
            let _ = file.seek(std::io::SeekFrom::Start(self.log_start));
            let _ = file.read_to_end(&mut text);
        }
        String::from_utf8_lossy(&text).into_owned()
    }

    pub fn name(&self) -> &str {
        &self.spec.name
    }

    pub fn device_id(&self) -> u64 {
        self.spec.device_id
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `127.0.0.1:<port>` of the P4Runtime server.
    pub fn grpc_addr(&self) -> String {
        format!("127.0.0.1:{}", self.grpc_port)
    }

    /// Thrift port for `simple_switch_CLI`. BMv2 binds it on all interfaces.
    pub fn thrift_port(&self) -> u16 {
        self.thrift_port
    }

    pub fn log_path(&self) -> PathBuf {
        self.log_dir
            .as_ref()
            .map(|d| d.path().join("switch.log"))
            .unwrap_or_default()
    }

    /// Keep the log directory after drop; returns its path.
    pub fn keep_logs(&mut self) -> PathBuf {
        match self.log_dir.take() {
            Some(dir) => dir.keep(),
            None => PathBuf::new(),
        }
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Run `simple_switch_CLI` commands (e.g. `set_queue_rate 100 1`) on this
    /// switch's Thrift port; returns the CLI's output.
    pub fn cli(&self, tools: &Toolchain, commands: &str) -> std::io::Result<String> {
        use std::io::Write;
        let cli = tools.simple_switch_cli.as_ref().ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "simple_switch_CLI not installed",
            )
        })?;
        let mut child = Command::new(cli)
            .arg("--thrift-port")
            .arg(self.thrift_port.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        child
            .stdin
            .take()
            .expect("piped")
            .write_all(commands.as_bytes())?;
        let out = child.wait_with_output()?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        if !out.status.success() {
            return Err(std::io::Error::other(format!(
                "simple_switch_CLI failed: {text}"
            )));
        }
        Ok(text)
    }

    /// Stop the process now: SIGTERM, then SIGKILL after 2 s.
    pub fn stop(&mut self) {
        if !self.is_running() {
            return;
        }
        // SAFETY: kill(2) on the PID of a child we spawned and have not reaped.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline {
            if !self.is_running() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Launch `simple_switch_grpc` with its output appended to `dir/switch.log`.
fn spawn(
    tools: &Toolchain,
    spec: &SwitchSpec,
    grpc_port: u16,
    thrift_port: u16,
    dir: &Path,
) -> Result<Child, StartError> {
    let io = |e| StartError::Io(e, spec.name.clone());
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("switch.log"))
        .map_err(io)?;
    let mut command = Command::new(&tools.simple_switch_grpc);
    command
        .arg("--no-p4")
        .arg("--device-id")
        .arg(spec.device_id.to_string())
        .arg("--thrift-port")
        .arg(thrift_port.to_string())
        .arg("--log-console");
    for (port, interface) in &spec.interfaces {
        command.arg("-i").arg(format!("{port}@{interface}"));
    }
    command.args(&spec.extra_args);
    command
        .arg("--")
        .arg("--grpc-server-addr")
        .arg(format!("127.0.0.1:{grpc_port}"));
    if let Some(cpu_port) = spec.cpu_port {
        command.arg("--cpu-port").arg(cpu_port.to_string());
    }
    command.args(&spec.target_args);
    if let Some(allocator) = &tools.preload {
        command.env("LD_PRELOAD", allocator);
    }
    if let Some(lib) = tools.lib_dir() {
        let mut paths = vec![lib];
        if let Some(old) = std::env::var_os("LD_LIBRARY_PATH") {
            paths.extend(std::env::split_paths(&old));
        }
        command.env(
            "LD_LIBRARY_PATH",
            std::env::join_paths(paths).expect("valid paths"),
        );
    }
    command
        .stdin(Stdio::null())
        .stdout(log.try_clone().map_err(io)?)
        .stderr(log);
    spawn_tied(command).map_err(io)
}

/// A request to the spawner thread: the command, and where to answer.
type SpawnRequest = (Command, mpsc::Sender<std::io::Result<Child>>);

/// The spawner thread's queue, started on first use.
static SPAWNER: OnceLock<Mutex<mpsc::Sender<SpawnRequest>>> = OnceLock::new();

/// Spawn `command` so that the child gets SIGKILL when this process dies,
/// however it dies (also SIGKILL, which runs no destructor).
///
/// `PR_SET_PDEATHSIG` fires when the *thread* that forked the child exits,
/// not the process: a switch forked from a short-lived thread (a tokio
/// blocking thread, a test thread) would be killed with it. So every child
/// is forked by one thread that is started on first use and never exits:
/// the signal then comes exactly when the process ends. The pre-exec hook
/// also exits the child at once if the parent died before `prctl` ran.
pub fn spawn_tied(command: Command) -> std::io::Result<Child> {
    let queue = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnRequest>();
        std::thread::Builder::new()
            .name("bmv2-spawner".into())
            .spawn(move || {
                for (mut command, answer) in rx {
                    let _ = answer.send(spawn_with_deathsig(&mut command));
                }
            })
            .expect("the BMv2 spawner thread starts");
        Mutex::new(tx)
    });
    let (tx, rx) = mpsc::channel();
    queue
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .send((command, tx))
        .map_err(|_| std::io::Error::other("the BMv2 spawner thread is gone"))?;
    rx.recv()
        .map_err(|_| std::io::Error::other("the BMv2 spawner thread is gone"))?
}

fn spawn_with_deathsig(command: &mut Command) -> std::io::Result<Child> {
    use std::os::unix::process::CommandExt;
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: the hook runs in the forked child before exec and calls only
    // async-signal-safe functions (prctl, getppid) without allocating.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            if libc::getppid() != parent {
                // The parent died between fork and prctl: nobody will stop us.
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
    command.spawn()
}

impl Drop for Bmv2Switch {
    fn drop(&mut self) {
        self.stop();
        let keep = std::thread::panicking() || std::env::var_os("FORESIGHT_KEEP_LOGS").is_some();
        if keep {
            let path = self.keep_logs();
            if !path.as_os_str().is_empty() {
                eprintln!("bmv2: kept log of {} in {}", self.spec.name, path.display());
            }
        }
    }
}

/// Start `count` switches without data-plane ports, named `s1..sN` with
/// device ids 0..N-1 (BMv2's default device id is 0).
pub fn start_switches(tools: &Toolchain, count: usize) -> Result<Vec<Bmv2Switch>, StartError> {
    (0..count)
        .map(|i| Bmv2Switch::start(tools, SwitchSpec::new(format!("s{}", i + 1), i as u64)))
        .collect()
}
