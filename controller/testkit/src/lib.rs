//! Fixtures shared by the controller's unit tests and integration tests,
//! so that each lives once: INT telemetry reports as the data plane sends
//! them ([`int`]), NDSP requests as a client sends them ([`requests`]),
//! seeded mutations of valid inputs for fuzzing ([`mutate`]), loopback
//! ports for servers started as processes ([`ports`]), and the SKIPPED
//! line of a test whose tools are missing ([`skip`]).

pub mod etcd;
pub mod int;
pub mod mutate;
pub mod ports;
pub mod requests;
pub mod skip;
