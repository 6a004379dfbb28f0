//! `foresight doctor`: what this machine has of the tools Foresight uses,
//! with versions and paths, and for each missing one what it disables and
//! the command that installs it. A newcomer's first question ("why did the
//! demo only plan?", "why are these suites skipped?") answered in one place.

use std::path::{Path, PathBuf};
use std::process::Command;

use clap::Args;

use super::text_table;

#[derive(Args)]
pub struct DoctorCmd {
    /// The Foresight checkout whose Python environments (.venv, .venv-jax,
    /// .venv-finsy) are checked; default: the current directory or the
    /// nearest one above it holding `ci/setup.sh`.
    #[arg(long)]
    checkout: Option<PathBuf>,
}

pub fn run(cmd: DoctorCmd) -> anyhow::Result<()> {
    let probe = Probe::from_environment(cmd.checkout)?;
    print!("{}", render(&examine(&probe)));
    Ok(())
}

/// Where the tools are looked for: the same places the tests, the demo and
/// the lab look (`bmv2::toolchain`), made explicit so a test can point
/// them at a machine of its own making.
pub struct Probe {
    /// Directories searched for executables, in order.
    pub bin_dirs: Vec<PathBuf>,
    /// The Tofino-enabled p4c's prefix (never on PATH: it changes p4c's
    /// default target).
    pub tofino_prefix: PathBuf,
    /// The checkout whose Python environments are checked.
    pub checkout: PathBuf,
    /// The interpreter Mininet and BMv2's Thrift CLI run under.
    pub system_python: PathBuf,
}

impl Probe {
    fn from_environment(checkout: Option<PathBuf>) -> anyhow::Result<Probe> {
        let checkout = match checkout {
            Some(c) => c,
            None => {
                let here = std::env::current_dir()?;
                here.ancestors()
                    .find(|d| d.join("ci/setup.sh").is_file())
                    .map(Path::to_path_buf)
                    .unwrap_or(here)
            }
        };
        Ok(Probe {
            bin_dirs: bmv2::search_dirs(),
            tofino_prefix: std::env::var_os("FORESIGHT_TOFINO_PREFIX")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("/opt/p4c-tofino")),
            checkout,
            system_python: PathBuf::from("/usr/bin/python3"),
        })
    }

    fn find(&self, name: &str) -> Option<PathBuf> {
        self.bin_dirs
            .iter()
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    }
}

/// One tool: found (where, which version) or not, and what its absence costs.
pub struct Finding {
    pub tool: &'static str,
    pub found: Option<Found>,
    pub disables: &'static str,
    pub install: &'static str,
}

pub struct Found {
    pub path: PathBuf,
    pub version: String,
}

const TOOLCHAIN: &str = "bash ci/p4-toolchain.sh (PI and BMv2 from source, ~35 min on 2 cores)";
const SETUP: &str = "bash ci/setup.sh";

/// Every check, in the order a newcomer needs them.
pub fn examine(probe: &Probe) -> Vec<Finding> {
    let bmv2 = probe.find("simple_switch_grpc");
    // PI is found beside the BMv2 that was built against it.
    let bmv2_prefix = bmv2.as_deref().and_then(prefix_of);
    let pi = bmv2_prefix
        .as_ref()
        .map(|prefix| prefix.join("lib/libpi.so"))
        .filter(|p| p.is_file());
    vec![
        Finding {
            tool: "BMv2 simple_switch_grpc",
            found: bmv2.as_deref().map(|p| found(p, version_of(p, &["--version"]))),
            disables: "foresight demo on switches (it only plans), the BMv2 integration tests, PTF, Mininet smoke and the lab",
            install: TOOLCHAIN,
        },
        Finding {
            tool: "BMv2 simple_switch_CLI",
            found: probe
                .find("simple_switch_CLI")
                .map(|p| found(&p, "Thrift CLI".into())),
            disables: "queue rates and depths (PTF ECN tests, the lab's shaped ports)",
            install: TOOLCHAIN,
        },
        Finding {
            tool: "PI (P4Runtime server for BMv2)",
            found: pi.map(|p| {
                let version = bmv2_prefix
                    .as_deref()
                    .and_then(|prefix| stamped_version(prefix, "pi"))
                    .unwrap_or_else(|| "installed".into());
                found(&p, version)
            }),
            disables: "simple_switch_grpc (BMv2 is built against it)",
            install: TOOLCHAIN,
        },
        Finding {
            tool: "p4c (BMv2 backend)",
            found: probe
                .find("p4c")
                .or_else(|| Some(probe.tofino_prefix.join("bin/p4c")).filter(|p| p.is_file()))
                .map(|p| found(&p, version_of(&p, &["--version"]))),
            disables: "the P4 artifact freshness check and recompiling p4src/ (the committed artifacts run everything else)",
            install: "bash ci/p4-toolchain.sh --p4c (~60 min more on 2 cores)",
        },
        Finding {
            tool: "p4c (Tofino backend)",
            found: Some(probe.tofino_prefix.join("bin/p4c-barefoot"))
                .filter(|p| p.is_file())
                .map(|p| {
                    let version = stamped_version(&probe.tofino_prefix, "p4c-tofino")
                        .unwrap_or_else(|| "installed".into());
                    found(&p, version)
                }),
            disables: "the TNA artifact check (p4src/compile.sh --check --tna)",
            install: "bash ci/p4-toolchain.sh --tofino (1.5-3 h on 2 cores)",
        },
        Finding {
            tool: "Mininet",
            found: probe.find("mn").map(|p| found(&p, version_of(&p, &["--version"]))),
            disables: "the Mininet smoke test and the lab (bmv2-lab/)",
            install: SETUP,
        },
        Finding {
            tool: "etcd",
            found: probe
                .find("etcd")
                .map(|p| found(&p, version_of(&p, &["--version"]))),
            disables: "controller replicas (--etcd) and their tests",
            install: SETUP,
        },
        Finding {
            tool: "Chromium",
            found: probe
                .find("chromium")
                .map(|p| found(&p, version_of(&p, &["--version"]))),
            disables: "the operator page's browser test (bmv2-lab/test_ui.py)",
            install: SETUP,
        },
        Finding {
            tool: "Debian python3 with Thrift",
            found: Some(probe.system_python.clone())
                .filter(|p| p.is_file())
                .and_then(|p| {
                    imports(&p, "thrift")?;
                    let v = package_version(&p, "thrift").unwrap_or_else(|| "importable".into());
                    Some(found(&p, format!("thrift {v}")))
                }),
            disables: "BMv2's Thrift CLI and Mininet (both run under it)",
            install: SETUP,
        },
        venv(
            probe,
            ".venv",
            "p4.v1.p4runtime_pb2",
            "p4runtime",
            "building the controller (its P4Runtime bindings), PTF",
        ),
        venv(
            probe,
            ".venv-jax",
            "jax",
            "jax",
            "the lab's JAX experiments (experiment.py jax, t5)",
        ),
        venv(
            probe,
            ".venv-finsy",
            "finsy",
            "finsy",
            "the P4Runtime client comparison bench",
        ),
    ]
}

fn venv(
    probe: &Probe,
    name: &'static str,
    module: &str,
    package: &str,
    disables: &'static str,
) -> Finding {
    let python = probe.checkout.join(name).join("bin/python");
    let found = Some(python.clone())
        .filter(|p| p.is_file())
        .and_then(|p| imports(&p, module).map(|_| p))
        .map(|p| {
            let version = package_version(&p, package).unwrap_or_else(|| "importable".into());
            found(&p, format!("{package} {version}"))
        });
    Finding {
        tool: name,
        found,
        disables,
        install: SETUP,
    }
}

fn found(path: &Path, version: String) -> Found {
    Found {
        path: path.to_path_buf(),
        version,
    }
}

/// `<prefix>` of `<prefix>/bin/<tool>`.
fn prefix_of(tool: &Path) -> Option<PathBuf> {
    Some(tool.parent()?.parent()?.to_path_buf())
}

/// The version the toolchain script recorded when it installed `component`.
fn stamped_version(prefix: &Path, component: &str) -> Option<String> {
    let stamp =
        std::fs::read_to_string(prefix.join("share/foresight-toolchain").join(component)).ok()?;
    stamp.split_whitespace().nth(1).map(str::to_string)
}

/// The first non-empty line a tool prints for `args`, or why it printed none.
fn version_of(tool: &Path, args: &[&str]) -> String {
    match Command::new(tool).args(args).output() {
        Ok(out) => {
            let text = String::from_utf8_lossy(&out.stdout).to_string()
                + &String::from_utf8_lossy(&out.stderr);
            text.lines()
                .map(str::trim)
                .find(|l| !l.is_empty())
                .map(str::to_string)
                .unwrap_or_else(|| "(printed no version)".into())
        }
        Err(e) => format!("(does not run: {e})"),
    }
}

/// `Some` when `python` imports `module`.
fn imports(python: &Path, module: &str) -> Option<()> {
    let out = Command::new(python)
        .args(["-c", &format!("import {module}")])
        .output()
        .ok()?;
    out.status.success().then_some(())
}

fn package_version(python: &Path, package: &str) -> Option<String> {
    let out = Command::new(python)
        .args([
            "-c",
            &format!("import importlib.metadata as m; print(m.version('{package}'))"),
        ])
        .output()
        .ok()?;
    let v = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !v.is_empty()).then_some(v)
}

/// The report: a table of what is there, then what is missing, what that
/// disables and how to get it.
pub fn render(findings: &[Finding]) -> String {
    let mut table = text_table::new(&["tool", "version", "path"], &[]);
    for f in findings {
        match &f.found {
            Some(found) => table.add_row(vec![
                f.tool.to_string(),
                found.version.clone(),
                found.path.display().to_string(),
            ]),
            None => table.add_row(vec![f.tool.to_string(), "MISSING".into(), String::new()]),
        };
    }
    let mut out = String::from("Foresight's tools on this machine:\n");
    out.push_str(&text_table::indented(&table));
    let missing: Vec<&Finding> = findings.iter().filter(|f| f.found.is_none()).collect();
    if missing.is_empty() {
        out.push_str(
            "\neverything is installed: the demo runs on BMv2 and no test suite is skipped\n",
        );
    } else {
        out.push_str(&format!("\n{} missing:\n", missing.len()));
        for f in missing {
            out.push_str(&format!(
                "  {}: disables {}\n    install: {}\n",
                f.tool, f.disables, f.install
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn empty_probe(dir: &Path) -> Probe {
        Probe {
            bin_dirs: vec![dir.join("bin")],
            tofino_prefix: dir.join("tofino"),
            checkout: dir.join("checkout"),
            system_python: dir.join("no-python"),
        }
    }

    fn script(path: &Path, body: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    /// A machine with nothing: every tool reported missing, each with what
    /// it disables and the command that installs it.
    #[test]
    fn a_machine_with_nothing_lists_every_tool_as_missing() {
        let dir = tempfile::tempdir().unwrap();
        let findings = examine(&empty_probe(dir.path()));
        assert!(findings.iter().all(|f| f.found.is_none()));
        let text = render(&findings);
        assert!(
            text.contains(&format!("{} missing:", findings.len())),
            "{text}"
        );
        for f in &findings {
            assert!(text.contains(&format!("{}: disables {}", f.tool, f.disables)));
        }
        assert!(text.contains("install: bash ci/p4-toolchain.sh (PI and BMv2"));
        assert!(text.contains("install: bash ci/p4-toolchain.sh --p4c"));
        assert!(!text.contains("everything is installed"));
    }

    /// A machine with everything: each tool found where it is, with the
    /// version it prints (or the toolchain's stamp records), nothing missing.
    #[test]
    fn a_machine_with_everything_reports_versions_and_paths() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let probe = empty_probe(d);
        let bin = d.join("bin");
        script(&bin.join("simple_switch_grpc"), "echo 1.15.0-test");
        script(&bin.join("simple_switch_CLI"), "exit 0");
        script(&bin.join("p4c"), "echo 'p4c 1.2.5.16 (SHA: test)'");
        script(&bin.join("mn"), "echo 2.3.0.dev6");
        script(
            &bin.join("etcd"),
            "echo 'etcd Version: 3.4.23'; echo 'Git SHA: x'",
        );
        script(
            &bin.join("chromium"),
            "echo 'Chromium 156.0 built on Debian'",
        );
        std::fs::create_dir_all(d.join("lib")).unwrap();
        std::fs::write(d.join("lib/libpi.so"), "").unwrap();
        std::fs::create_dir_all(d.join("share/foresight-toolchain")).unwrap();
        std::fs::write(
            d.join("share/foresight-toolchain/pi"),
            "pi v0.1.2 --with-proto",
        )
        .unwrap();
        script(&d.join("tofino/bin/p4c-barefoot"), "exit 0");
        // A python that imports anything and names a package's version.
        let python = "case \"$2\" in *importlib*) echo 9.9 ;; esac; exit 0";
        for venv in [".venv", ".venv-jax", ".venv-finsy"] {
            script(&d.join("checkout").join(venv).join("bin/python"), python);
        }
        script(&d.join("no-python"), python);

        let findings = examine(&probe);
        let missing: Vec<_> = findings
            .iter()
            .filter(|f| f.found.is_none())
            .map(|f| f.tool)
            .collect();
        assert!(missing.is_empty(), "missing: {missing:?}");
        let version = |tool: &str| {
            let f = findings.iter().find(|f| f.tool == tool).unwrap();
            f.found.as_ref().unwrap().version.clone()
        };
        assert_eq!(version("BMv2 simple_switch_grpc"), "1.15.0-test");
        assert_eq!(version("p4c (BMv2 backend)"), "p4c 1.2.5.16 (SHA: test)");
        assert_eq!(version("PI (P4Runtime server for BMv2)"), "v0.1.2");
        assert_eq!(version("etcd"), "etcd Version: 3.4.23");
        assert_eq!(version(".venv-jax"), "jax 9.9");
        let text = render(&findings);
        assert!(text.contains("everything is installed"), "{text}");
        assert!(text.contains(&bin.join("p4c").display().to_string()));
    }

    /// The Tofino p4c alone also serves as the BMv2 p4c (its BMv2 backend is
    /// the same), as p4src/compile.sh uses it.
    #[test]
    fn the_tofino_p4c_counts_as_the_bmv2_p4c() {
        let dir = tempfile::tempdir().unwrap();
        let probe = empty_probe(dir.path());
        script(&dir.path().join("tofino/bin/p4c"), "echo 'p4c 1.2.5.16'");
        let findings = examine(&probe);
        let p4c = findings
            .iter()
            .find(|f| f.tool == "p4c (BMv2 backend)")
            .unwrap();
        assert_eq!(
            p4c.found.as_ref().unwrap().path,
            dir.path().join("tofino/bin/p4c")
        );
    }
}
