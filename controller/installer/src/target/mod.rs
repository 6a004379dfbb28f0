//! Everything that differs between the switch targets Foresight drives:
//! BMv2 running the v1model program and Tofino running the TNA program.
//!
//! * [`device_config`] — the `p4_device_config` each target's P4Runtime
//!   server wants, and where the compiled artifacts are.

pub mod device_config;

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

pub use device_config::{Artifacts, DeviceConfigError, TofinoFormat, TofinoOutput};

/// The switch target: which program the switches run and how they take it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Target {
    /// BMv2 `simple_switch_grpc`, `p4src/foresight.p4` (v1model).
    #[default]
    Bmv2,
    /// Tofino (bf_switchd's P4Runtime server or Stratum), the TNA program.
    Tofino,
}

impl Target {
    pub const ALL: [Target; 2] = [Target::Bmv2, Target::Tofino];

    pub fn name(self) -> &'static str {
        match self {
            Target::Bmv2 => "bmv2",
            Target::Tofino => "tofino",
        }
    }

    /// The committed P4Info of this target's program, relative to the
    /// repository root (`p4src/compile.sh` and the TNA build write them).
    pub fn p4info_file(self) -> &'static str {
        match self {
            Target::Bmv2 => "p4src/build/foresight.p4info.binpb",
            Target::Tofino => "p4src/build/tna/foresight.p4info.binpb",
        }
    }

    /// [`Target::p4info_file`] in the checkout this controller was built from.
    pub fn committed_p4info(self) -> PathBuf {
        repository_root().join(self.p4info_file())
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Target {
    type Err = String;

    fn from_str(s: &str) -> Result<Target, String> {
        Target::ALL
            .into_iter()
            .find(|t| t.name() == s)
            .ok_or_else(|| format!("unknown target `{s}` (want bmv2 or tofino)"))
    }
}

/// The repository checkout the controller was built from.
fn repository_root() -> PathBuf {
    let root = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    root.canonicalize().unwrap_or(root)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse_by_name() {
        assert_eq!("tofino".parse::<Target>(), Ok(Target::Tofino));
        assert_eq!("bmv2".parse::<Target>(), Ok(Target::Bmv2));
        let err = "tna".parse::<Target>().unwrap_err();
        assert!(err.contains("bmv2 or tofino"), "{err}");
        assert_eq!(Target::default(), Target::Bmv2);
    }
}
