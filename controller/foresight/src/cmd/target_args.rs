//! `--target` and the flags that say where a Tofino pipeline is, shared by
//! `controller` and `switch push`.

use std::path::PathBuf;

use anyhow::bail;
use clap::Args;
use installer::device::device_config::DEFAULT_PROGRAM;
use installer::device::{Target, TofinoFormat, TofinoOutput};

#[derive(Args, Clone, Debug)]
pub struct TargetArgs {
    /// Switch target: bmv2 (v1model program, BMv2 JSON) or tofino (TNA
    /// program, tofino.bin + context.json for bf_switchd's P4Runtime
    /// server or Stratum).
    #[arg(long, default_value = "bmv2", value_name = "bmv2|tofino")]
    pub target: Target,
    /// Tofino: the output directory of p4c's Tofino backend
    /// (<DIR>/<pipe>/tofino.bin, <DIR>/<pipe>/context.json, <DIR>/bfrt.json).
    #[arg(long, value_name = "DIR")]
    tofino_out: Option<PathBuf>,
    /// Tofino: the pipe under --tofino-out [default: the only one with a tofino.bin].
    #[arg(long, value_name = "PIPE")]
    tofino_pipe: Option<String>,
    /// Tofino: the program name the switch loads the pipeline as [default: foresight].
    #[arg(long, value_name = "NAME")]
    tofino_program: Option<String>,
    /// Tofino: device config format, pi (bf_switchd's P4Runtime server) or
    /// stratum (Stratum's BfPipelineConfig) [default: pi].
    #[arg(long, value_name = "pi|stratum")]
    tofino_format: Option<TofinoFormat>,
}

impl TargetArgs {
    /// Where the Tofino pipeline is (`None` for BMv2). Tofino flags
    /// without `--target tofino`, or that target without `--tofino-out`,
    /// are errors.
    pub fn tofino(&self) -> anyhow::Result<Option<TofinoOutput>> {
        match self.target {
            Target::Bmv2 => {
                let given = [
                    ("--tofino-out", self.tofino_out.is_some()),
                    ("--tofino-pipe", self.tofino_pipe.is_some()),
                    ("--tofino-program", self.tofino_program.is_some()),
                    ("--tofino-format", self.tofino_format.is_some()),
                ];
                if let Some((flag, _)) = given.iter().find(|(_, given)| *given) {
                    bail!("{flag} is for --target tofino (the target is bmv2)");
                }
                Ok(None)
            }
            Target::Tofino => {
                let Some(dir) = &self.tofino_out else {
                    bail!(
                        "--target tofino needs --tofino-out DIR, the output directory of \
                         p4c's Tofino backend (<DIR>/<pipe>/tofino.bin and context.json)"
                    );
                };
                Ok(Some(TofinoOutput {
                    dir: dir.clone(),
                    pipe: self.tofino_pipe.clone(),
                    program: self
                        .tofino_program
                        .clone()
                        .unwrap_or_else(|| DEFAULT_PROGRAM.into()),
                    format: self.tofino_format.unwrap_or_default(),
                }))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        target: TargetArgs,
    }

    fn parse(args: &[&str]) -> Result<TargetArgs, String> {
        Cli::try_parse_from(std::iter::once("t").chain(args.iter().copied()))
            .map(|c| c.target)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn bmv2_is_the_default_and_takes_no_tofino_flags() {
        let args = parse(&[]).unwrap();
        assert_eq!(args.target, Target::Bmv2);
        assert_eq!(args.tofino().unwrap(), None);
        let err = parse(&["--tofino-out", "/x"])
            .unwrap()
            .tofino()
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "--tofino-out is for --target tofino (the target is bmv2)"
        );
        let err = parse(&["--target", "bmv2", "--tofino-format", "stratum"])
            .unwrap()
            .tofino()
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("--tofino-format is for"), "{err}");
    }

    #[test]
    fn tofino_needs_the_compiler_output() {
        let err = parse(&["--target", "tofino"])
            .unwrap()
            .tofino()
            .unwrap_err()
            .to_string();
        assert!(err.contains("needs --tofino-out DIR"), "{err}");
        let out = parse(&["--target", "tofino", "--tofino-out", "/x"])
            .unwrap()
            .tofino()
            .unwrap()
            .unwrap();
        assert_eq!(out, TofinoOutput::new("/x"));
        let out = parse(&[
            "--target",
            "tofino",
            "--tofino-out",
            "/x",
            "--tofino-pipe",
            "pipe1",
            "--tofino-program",
            "fs2",
            "--tofino-format",
            "stratum",
        ])
        .unwrap()
        .tofino()
        .unwrap()
        .unwrap();
        assert_eq!(out.pipe.as_deref(), Some("pipe1"));
        assert_eq!(out.program, "fs2");
        assert_eq!(out.format, TofinoFormat::Stratum);
    }

    #[test]
    fn unknown_values_are_refused_by_the_parser() {
        let err = parse(&["--target", "tna"]).err().unwrap();
        assert!(err.contains("want bmv2 or tofino"), "{err}");
        let err = parse(&["--target", "tofino", "--tofino-format", "bfrt"])
            .err()
            .unwrap();
        assert!(err.contains("want pi for bf_switchd"), "{err}");
    }
}
