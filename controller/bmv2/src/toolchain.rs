//! Finding the P4 tools: `$FORESIGHT_P4_PREFIX/bin`, then `PATH`, then the
//! default prefix `/opt/p4tools/bin`.

use std::path::{Path, PathBuf};

/// Where the P4 tools live on this machine.
#[derive(Debug, Clone)]
pub struct Toolchain {
    pub simple_switch_grpc: PathBuf,
    /// The Thrift CLI (sets queue rates/depths); optional for most tests.
    pub simple_switch_cli: Option<PathBuf>,
    pub p4c: Option<PathBuf>,
}

/// Why the toolchain was not found, for skip messages.
#[derive(Debug, thiserror::Error)]
#[error(
    "simple_switch_grpc not found (looked in {searched}); install BMv2 or set FORESIGHT_P4_PREFIX"
)]
pub struct ToolchainMissing {
    pub searched: String,
}

/// The default install prefix of the toolchain instructions in docs/data-plane.md.
pub const DEFAULT_PREFIX: &str = "/opt/p4tools";

fn search_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Ok(prefix) = std::env::var("FORESIGHT_P4_PREFIX") {
        dirs.push(Path::new(&prefix).join("bin"));
    }
    if let Some(path) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&path));
    }
    dirs.push(Path::new(DEFAULT_PREFIX).join("bin"));
    dirs
}

fn find_in(dirs: &[PathBuf], name: &str) -> Option<PathBuf> {
    dirs.iter().map(|d| d.join(name)).find(|p| p.is_file())
}

impl Toolchain {
    pub fn find() -> Result<Toolchain, ToolchainMissing> {
        let dirs = search_dirs();
        let simple_switch_grpc =
            find_in(&dirs, "simple_switch_grpc").ok_or_else(|| ToolchainMissing {
                searched: format!("$FORESIGHT_P4_PREFIX/bin, PATH, {DEFAULT_PREFIX}/bin"),
            })?;
        Ok(Toolchain {
            simple_switch_cli: find_in(&dirs, "simple_switch_CLI"),
            p4c: find_in(&dirs, "p4c"),
            simple_switch_grpc,
        })
    }

    /// The directory holding `simple_switch_grpc`'s libraries, if it sits in
    /// a `<prefix>/bin`: used for `LD_LIBRARY_PATH` when the prefix is not
    /// known to the dynamic linker.
    pub fn lib_dir(&self) -> Option<PathBuf> {
        let lib = self.simple_switch_grpc.parent()?.parent()?.join("lib");
        lib.is_dir().then_some(lib)
    }
}
