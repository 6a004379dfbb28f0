//! BMv2 `simple_switch_grpc` processes, started on loopback with free ports
//! and stopped by PID when dropped — also when a test panics.
//!
//! ```no_run
//! let tools = bmv2::Toolchain::find().expect("BMv2 installed");
//! let switches = bmv2::start_switches(&tools, 2).unwrap();
//! println!("P4Runtime of s1 at {}", switches[0].grpc_addr());
//! ```
//!
//! Each switch writes its log into its own directory; the directory is
//! removed when the switch is dropped normally and kept (path printed) when
//! the thread is panicking or `FORESIGHT_KEEP_LOGS` is set.
//!
//! Switches run with tcmalloc when Debian's `libtcmalloc-minimal4` is
//! installed (a fifth less CPU per P4Runtime write than glibc's malloc);
//! `FORESIGHT_BMV2_PRELOAD` names another allocator, or none when empty.
//!
//! Switches die with the process that started them, even when it is
//! SIGKILLed: they are forked by one long-lived thread with
//! `PR_SET_PDEATHSIG` (see [`spawn_tied`]).

mod switch;
mod toolchain;

pub use switch::{
    spawn_tied, start_switches, Bmv2Switch, StartError, SwitchSpec, DEFAULT_CPU_PORT,
};
pub use toolchain::{search_dirs, Toolchain, ToolchainMissing};
