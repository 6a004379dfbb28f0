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
    /// The allocator the switches are started with (`LD_PRELOAD`), if any:
    /// see [`switch_allocator`].
    pub preload: Option<PathBuf>,
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

/// Where the tools are looked for, in order.
pub fn search_dirs() -> Vec<PathBuf> {
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
            preload: switch_allocator(std::env::var_os(PRELOAD_VAR)),
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

/// Names the allocator BMv2 is started with; empty: glibc's.
const PRELOAD_VAR: &str = "FORESIGHT_BMV2_PRELOAD";

/// Debian's tcmalloc (package `libtcmalloc-minimal4`), for this machine's
/// multiarch directory.
fn debian_tcmalloc() -> PathBuf {
    Path::new("/usr/lib")
        .join(format!("{}-linux-gnu", std::env::consts::ARCH))
        .join("libtcmalloc_minimal.so.4")
}

/// The allocator the switches run with. A P4Runtime write spends a third
/// of BMv2's time in glibc's malloc; with tcmalloc the switches took a
/// fifth less CPU per write in the 1,024-rank loop (docs/figures.md). So
/// tcmalloc when it is installed; `FORESIGHT_BMV2_PRELOAD` names another
/// library, or none when empty.
fn switch_allocator(var: Option<std::ffi::OsString>) -> Option<PathBuf> {
    match var {
        Some(v) if v.is_empty() => None,
        Some(v) => Some(PathBuf::from(v)),
        None => Some(debian_tcmalloc()).filter(|p| p.is_file()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Empty means none, a path is taken as given, unset finds tcmalloc
    /// exactly when Debian's package put it there.
    #[test]
    fn the_switch_allocator_follows_the_variable_then_what_is_installed() {
        assert_eq!(switch_allocator(Some("".into())), None);
        assert_eq!(
            switch_allocator(Some("/opt/lib/libjemalloc.so.2".into())),
            Some(PathBuf::from("/opt/lib/libjemalloc.so.2"))
        );
        assert_eq!(
            switch_allocator(None),
            debian_tcmalloc().is_file().then(debian_tcmalloc)
        );
    }
}
