//! The `p4_device_config` of `SetForwardingPipelineConfig`, per target,
//! from the compiler's output.
//!
//! * BMv2: the JSON of p4c's BMv2 backend, as it is.
//! * Tofino, `pi` format — what bf_switchd's P4Runtime server (PI's Tofino
//!   backend) reads in `_pi_update_device_start`, p4lang/open-p4studio
//!   `pkgsrc/bf-drivers/src/pi/pi_imp.c`: length-prefixed chunks, each
//!   length a 4-byte unsigned integer in the server's byte order (copied
//!   with `memcpy`; little-endian on the x86 hosts of Tofino switches):
//!
//!   ```text
//!   u32 len | program name        (at most 100 bytes)
//!   u32 len | tofino.bin
//!   u32 len | context.json
//!   u32 len | pipe name           (0 = none, and nothing follows)
//!   u32 len | bfrt.json
//!   ```
//!
//!   The first three chunks are the older layout, as p4lang/p4runtime-shell
//!   `config_builders/tofino.py` writes it (and Stratum's
//!   `stratum/hal/lib/barefoot/bf_pipeline_utils.cc` did while it drove
//!   PI); open-p4studio's server always reads the fourth length, so
//!   Foresight sends the pipe and `bfrt.json` too (which also lets BfRt
//!   clients see the program).
//! * Tofino, `stratum` format — Stratum (stratum_bfrt) takes a serialized
//!   `BfPipelineConfig` message, stratum/stratum
//!   `stratum/hal/lib/barefoot/bf.proto`: `p4_name` (1), `bfruntime_info`
//!   (2, bfrt.json), `profiles` (3) of `profile_name` (1), `context` (2),
//!   `binary` (3), `pipe_scope` (4, empty = every pipe).

use std::io;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use prost::Message;

use super::Target;

/// The program name the Foresight TNA build is known by.
pub const DEFAULT_PROGRAM: &str = "foresight";

/// Longest program or pipe name the Tofino servers accept
/// (`_PI_UPDATE_MAX_NAME_SIZE`).
const MAX_NAME_BYTES: usize = 100;

/// How a Tofino pipeline is packed for the P4Runtime server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TofinoFormat {
    /// bf_switchd's P4Runtime server (PI).
    #[default]
    Pi,
    /// Stratum's `BfPipelineConfig`.
    Stratum,
}

impl FromStr for TofinoFormat {
    type Err = String;

    fn from_str(s: &str) -> Result<TofinoFormat, String> {
        match s {
            "pi" => Ok(TofinoFormat::Pi),
            "stratum" => Ok(TofinoFormat::Stratum),
            _ => Err(format!(
                "unknown Tofino device config format `{s}` (want pi for bf_switchd, stratum for Stratum)"
            )),
        }
    }
}

/// Why no device config could be built.
#[derive(Debug, thiserror::Error)]
pub enum DeviceConfigError {
    #[error("{what} {} is missing{hint}", path.display())]
    Missing {
        what: &'static str,
        path: PathBuf,
        hint: &'static str,
    },
    #[error("reading {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("no pipe in Tofino compiler output {}: want <DIR>/<pipe>/tofino.bin{tofino2}", dir.display())]
    NoPipe { dir: PathBuf, tofino2: &'static str },
    #[error("Tofino compiler output {} has several pipes ({}): choose one with --tofino-pipe", dir.display(), pipes.join(", "))]
    SeveralPipes { dir: PathBuf, pipes: Vec<String> },
    #[error("{what} `{name}`: {reason}")]
    BadName {
        what: &'static str,
        name: String,
        reason: &'static str,
    },
    #[error("{what} is {len} bytes, more than a 32-bit length can describe")]
    TooLarge { what: &'static str, len: usize },
}

/// Where a target's compiled pipeline is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Artifacts {
    /// The BMv2 JSON of p4c's BMv2 backend.
    Bmv2 { json: PathBuf },
    /// The output directory of p4c's Tofino backend.
    Tofino(TofinoOutput),
}

impl Artifacts {
    pub fn target(&self) -> Target {
        match self {
            Artifacts::Bmv2 { .. } => Target::Bmv2,
            Artifacts::Tofino(_) => Target::Tofino,
        }
    }

    /// The `p4_device_config` to push.
    pub fn device_config(&self) -> Result<Vec<u8>, DeviceConfigError> {
        match self {
            Artifacts::Bmv2 { json } => read(json, "BMv2 JSON", ""),
            Artifacts::Tofino(out) => out.read()?.device_config(out.format),
        }
    }
}

/// p4c's Tofino output directory and how to pack what is in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TofinoOutput {
    /// `<dir>/<pipe>/tofino.bin`, `<dir>/<pipe>/context.json`, `<dir>/bfrt.json`.
    pub dir: PathBuf,
    /// The pipe; `None` takes the only subdirectory holding a `tofino.bin`.
    pub pipe: Option<String>,
    /// Program name given to the server.
    pub program: String,
    pub format: TofinoFormat,
}

impl TofinoOutput {
    /// `dir` with the default program name, pipe and format.
    pub fn new(dir: impl Into<PathBuf>) -> TofinoOutput {
        TofinoOutput {
            dir: dir.into(),
            pipe: None,
            program: DEFAULT_PROGRAM.into(),
            format: TofinoFormat::default(),
        }
    }

    /// Read the compiled pipeline.
    pub fn read(&self) -> Result<TofinoPipeline, DeviceConfigError> {
        if !self.dir.is_dir() {
            return Err(DeviceConfigError::Missing {
                what: "Tofino compiler output directory",
                path: self.dir.clone(),
                hint: " (--tofino-out: the directory p4c's Tofino backend wrote)",
            });
        }
        let pipe = match &self.pipe {
            Some(p) => p.clone(),
            None => self.only_pipe()?,
        };
        check_name("pipe name", &pipe)?;
        check_name("program name", &self.program)?;
        let pipe_dir = self.dir.join(&pipe);
        let compiled_here = " (p4c's Tofino backend writes it; is the compile complete?)";
        Ok(TofinoPipeline {
            program: self.program.clone(),
            binary: read(&pipe_dir.join("tofino.bin"), "Tofino binary", compiled_here)?,
            context: read(
                &pipe_dir.join("context.json"),
                "Tofino context",
                compiled_here,
            )?,
            bfrt: read(
                &self.dir.join("bfrt.json"),
                "BfRt description",
                compiled_here,
            )?,
            pipe,
        })
    }

    fn only_pipe(&self) -> Result<String, DeviceConfigError> {
        let entries = std::fs::read_dir(&self.dir).map_err(|source| DeviceConfigError::Read {
            path: self.dir.clone(),
            source,
        })?;
        let mut pipes = Vec::new();
        let mut tofino2 = false;
        for entry in entries.flatten() {
            let path = entry.path();
            if path.join("tofino.bin").is_file() {
                pipes.push(entry.file_name().to_string_lossy().into_owned());
            }
            tofino2 |= path.join("tofino2.bin").is_file();
        }
        pipes.sort();
        match pipes.len() {
            1 => Ok(pipes.remove(0)),
            0 => Err(DeviceConfigError::NoPipe {
                dir: self.dir.clone(),
                tofino2: if tofino2 {
                    " (found tofino2.bin: the program was compiled for Tofino 2; Foresight's TNA build targets Tofino 1)"
                } else {
                    ""
                },
            }),
            _ => Err(DeviceConfigError::SeveralPipes {
                dir: self.dir.clone(),
                pipes,
            }),
        }
    }
}

/// One compiled Tofino pipe, ready to pack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TofinoPipeline {
    pub program: String,
    pub pipe: String,
    /// `tofino.bin`.
    pub binary: Vec<u8>,
    /// `context.json`.
    pub context: Vec<u8>,
    /// `bfrt.json`.
    pub bfrt: Vec<u8>,
}

impl TofinoPipeline {
    pub fn device_config(&self, format: TofinoFormat) -> Result<Vec<u8>, DeviceConfigError> {
        match format {
            TofinoFormat::Pi => self.pi_config(),
            TofinoFormat::Stratum => Ok(self.stratum_config()),
        }
    }

    /// The PI packing (module docs).
    pub fn pi_config(&self) -> Result<Vec<u8>, DeviceConfigError> {
        let chunks: [(&'static str, &[u8]); 5] = [
            ("program name", self.program.as_bytes()),
            ("tofino.bin", &self.binary),
            ("context.json", &self.context),
            ("pipe name", self.pipe.as_bytes()),
            ("bfrt.json", &self.bfrt),
        ];
        let mut out = Vec::with_capacity(chunks.iter().map(|(_, c)| 4 + c.len()).sum());
        for (what, chunk) in chunks {
            let len = u32::try_from(chunk.len()).map_err(|_| DeviceConfigError::TooLarge {
                what,
                len: chunk.len(),
            })?;
            out.extend_from_slice(&len.to_le_bytes());
            out.extend_from_slice(chunk);
        }
        Ok(out)
    }

    /// Stratum's `BfPipelineConfig` (module docs).
    pub fn stratum_config(&self) -> Vec<u8> {
        BfPipelineConfig {
            p4_name: self.program.clone(),
            bfruntime_info: self.bfrt.clone(),
            profiles: vec![BfProfile {
                profile_name: self.pipe.clone(),
                context: self.context.clone(),
                binary: self.binary.clone(),
                pipe_scope: Vec::new(),
            }],
        }
        .encode_to_vec()
    }
}

/// Stratum's `stratum.hal.barefoot.BfPipelineConfig`.
#[derive(Clone, PartialEq, Message)]
struct BfPipelineConfig {
    #[prost(string, tag = "1")]
    p4_name: String,
    #[prost(bytes = "vec", tag = "2")]
    bfruntime_info: Vec<u8>,
    #[prost(message, repeated, tag = "3")]
    profiles: Vec<BfProfile>,
}

/// `BfPipelineConfig.Profile`: one pipe's compiled program.
#[derive(Clone, PartialEq, Message)]
struct BfProfile {
    #[prost(string, tag = "1")]
    profile_name: String,
    #[prost(bytes = "vec", tag = "2")]
    context: Vec<u8>,
    #[prost(bytes = "vec", tag = "3")]
    binary: Vec<u8>,
    #[prost(uint32, repeated, tag = "4")]
    pipe_scope: Vec<u32>,
}

/// Program and pipe names become file and directory names on the switch
/// (bf_switchd's temporary files, Stratum's config directory).
fn check_name(what: &'static str, name: &str) -> Result<(), DeviceConfigError> {
    let bad = |reason| {
        Err(DeviceConfigError::BadName {
            what,
            name: name.into(),
            reason,
        })
    };
    if name.is_empty() {
        return bad("empty");
    }
    if name.len() > MAX_NAME_BYTES {
        return bad("longer than the 100 bytes the Tofino P4Runtime servers accept");
    }
    if name.starts_with('.')
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b))
    {
        return bad(
            "want letters, digits, `_`, `-` and `.` (not first): it names files on the switch",
        );
    }
    Ok(())
}

fn read(path: &Path, what: &'static str, hint: &'static str) -> Result<Vec<u8>, DeviceConfigError> {
    std::fs::read(path).map_err(|source| {
        if source.kind() == io::ErrorKind::NotFound {
            DeviceConfigError::Missing {
                what,
                path: path.to_path_buf(),
                hint,
            }
        } else {
            DeviceConfigError::Read {
                path: path.to_path_buf(),
                source,
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> TofinoPipeline {
        TofinoPipeline {
            program: "fs".into(),
            pipe: "pipe".into(),
            binary: vec![0xb0, 0xb1, 0xb2],
            context: b"{}".to_vec(),
            bfrt: b"[]".to_vec(),
        }
    }

    #[test]
    fn pi_packing_byte_for_byte() {
        #[rustfmt::skip]
        let expected: Vec<u8> = vec![
            2, 0, 0, 0, b'f', b's',
            3, 0, 0, 0, 0xb0, 0xb1, 0xb2,
            2, 0, 0, 0, b'{', b'}',
            4, 0, 0, 0, b'p', b'i', b'p', b'e',
            2, 0, 0, 0, b'[', b']',
        ];
        assert_eq!(small().pi_config().unwrap(), expected);
    }

    #[test]
    fn pi_lengths_are_little_endian_beyond_one_byte() {
        let mut p = small();
        p.binary = vec![7; 0x0102];
        let packed = p.pi_config().unwrap();
        assert_eq!(&packed[6..10], &[0x02, 0x01, 0, 0]);
        assert_eq!(packed.len(), 6 + 4 + 0x0102 + 6 + 8 + 6);
    }

    #[test]
    fn stratum_packing_byte_for_byte() {
        #[rustfmt::skip]
        let expected: Vec<u8> = vec![
            0x0a, 2, b'f', b's',                 // p4_name
            0x12, 2, b'[', b']',                 // bfruntime_info
            0x1a, 15,                            // profiles[0], 15 bytes
              0x0a, 4, b'p', b'i', b'p', b'e',   //   profile_name
              0x12, 2, b'{', b'}',               //   context
              0x1a, 3, 0xb0, 0xb1, 0xb2,         //   binary
        ];
        assert_eq!(small().stratum_config(), expected);
        assert_eq!(
            small().device_config(TofinoFormat::Stratum).unwrap(),
            expected
        );
    }

    fn compiler_output(pipes: &[&str]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("bfrt.json"), b"[]").unwrap();
        for pipe in pipes {
            let p = dir.path().join(pipe);
            std::fs::create_dir(&p).unwrap();
            std::fs::write(p.join("tofino.bin"), [0xb0, 0xb1, 0xb2]).unwrap();
            std::fs::write(p.join("context.json"), b"{}").unwrap();
        }
        dir
    }

    #[test]
    fn the_only_pipe_of_a_compiler_output_is_packed() {
        let dir = compiler_output(&["pipe"]);
        let mut out = TofinoOutput::new(dir.path());
        out.program = "fs".into();
        let artifacts = Artifacts::Tofino(out);
        assert_eq!(artifacts.target(), Target::Tofino);
        assert_eq!(
            artifacts.device_config().unwrap(),
            small().pi_config().unwrap()
        );
    }

    #[test]
    fn missing_files_are_named() {
        let dir = compiler_output(&["pipe"]);
        std::fs::remove_file(dir.path().join("pipe/context.json")).unwrap();
        let err = TofinoOutput::new(dir.path())
            .read()
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("Tofino context "), "{err}");
        assert!(err.contains("pipe/context.json is missing"), "{err}");

        std::fs::remove_file(dir.path().join("bfrt.json")).unwrap();
        std::fs::write(dir.path().join("pipe/context.json"), b"{}").unwrap();
        let err = TofinoOutput::new(dir.path())
            .read()
            .unwrap_err()
            .to_string();
        assert!(err.contains("bfrt.json is missing"), "{err}");

        let err = TofinoOutput::new(dir.path().join("nowhere"))
            .read()
            .unwrap_err()
            .to_string();
        assert!(err.contains("nowhere is missing"), "{err}");
        assert!(err.contains("--tofino-out"), "{err}");

        let err = Artifacts::Bmv2 {
            json: dir.path().join("foresight.json"),
        }
        .device_config()
        .unwrap_err()
        .to_string();
        assert!(
            err.starts_with("BMv2 JSON ") && err.ends_with("foresight.json is missing"),
            "{err}"
        );
    }

    #[test]
    fn the_pipe_must_be_unambiguous() {
        let none = compiler_output(&[]);
        let err = TofinoOutput::new(none.path())
            .read()
            .unwrap_err()
            .to_string();
        assert!(err.contains("want <DIR>/<pipe>/tofino.bin"), "{err}");
        std::fs::create_dir(none.path().join("pipe")).unwrap();
        std::fs::write(none.path().join("pipe/tofino2.bin"), b"").unwrap();
        let err = TofinoOutput::new(none.path())
            .read()
            .unwrap_err()
            .to_string();
        assert!(err.contains("compiled for Tofino 2"), "{err}");

        let two = compiler_output(&["pipe1", "pipe0"]);
        let err = TofinoOutput::new(two.path())
            .read()
            .unwrap_err()
            .to_string();
        assert!(err.contains("several pipes (pipe0, pipe1)"), "{err}");
        assert!(err.contains("--tofino-pipe"), "{err}");
        let mut out = TofinoOutput::new(two.path());
        out.pipe = Some("pipe1".into());
        assert_eq!(out.read().unwrap().pipe, "pipe1");
        out.pipe = Some("pipe7".into());
        let err = out.read().unwrap_err().to_string();
        assert!(err.contains("pipe7/tofino.bin is missing"), "{err}");
    }

    #[test]
    fn names_that_would_name_files_badly_are_refused() {
        let dir = compiler_output(&["pipe"]);
        for (program, reason) in [
            ("", "empty"),
            ("../x", "want letters"),
            (".hidden", "want letters"),
            (&"p".repeat(101), "100 bytes"),
        ] {
            let mut out = TofinoOutput::new(dir.path());
            out.program = program.to_string();
            let err = out.read().unwrap_err().to_string();
            assert!(err.starts_with("program name `"), "{err}");
            assert!(err.contains(reason), "{program}: {err}");
        }
        let mut out = TofinoOutput::new(dir.path());
        out.program = "p".repeat(100);
        assert!(out.read().is_ok());
    }

    #[test]
    fn formats_parse_by_name() {
        assert_eq!("pi".parse(), Ok(TofinoFormat::Pi));
        assert_eq!("stratum".parse(), Ok(TofinoFormat::Stratum));
        assert!("bfrt"
            .parse::<TofinoFormat>()
            .unwrap_err()
            .contains("pi for bf_switchd"));
    }
}
