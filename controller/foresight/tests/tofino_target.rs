//! `--target tofino` from the command line, without a Tofino: every
//! missing or wrong input is reported before anything is contacted.

use std::path::Path;
use std::process::Command;

fn foresight(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_foresight"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

fn repo(path: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
        .display()
        .to_string()
}

#[test]
fn switch_push_names_what_the_compiler_output_lacks() {
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().display().to_string();
    let p4info = repo("p4src/build/foresight.p4info.binpb");
    let push = |extra: &[&str]| {
        let mut args = vec![
            "switch",
            "push",
            "--addr",
            "127.0.0.1:1",
            "--p4info",
            &p4info,
        ];
        args.extend_from_slice(extra);
        foresight(&args)
    };
    let (ok, err) = push(&["--target", "tofino", "--tofino-out", &dir]);
    assert!(!ok);
    assert!(err.contains("no pipe in Tofino compiler output"), "{err}");
    std::fs::create_dir(out.path().join("pipe")).unwrap();
    std::fs::write(out.path().join("pipe/tofino.bin"), b"bin").unwrap();
    std::fs::write(out.path().join("pipe/context.json"), b"{}").unwrap();
    let (ok, err) = push(&["--target", "tofino", "--tofino-out", &dir]);
    assert!(!ok);
    assert!(err.contains("bfrt.json is missing"), "{err}");
    let (ok, err) = push(&["--tofino-out", &dir]);
    assert!(!ok);
    assert!(err.contains("--tofino-out is for --target tofino"), "{err}");
}

#[test]
fn controller_checks_pipeline_and_port_maps_before_starting() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir_all(out.join("pipe")).unwrap();
    std::fs::write(out.join("pipe/tofino.bin"), b"bin").unwrap();
    std::fs::write(out.join("bfrt.json"), b"{}").unwrap();
    let switches = dir.path().join("switches.yaml");
    std::fs::write(
        &switches,
        "leaf1: {addr: \"127.0.0.1:1\", ports: {1: 128, 2: 136, 3: 144}}\n",
    )
    .unwrap();
    let topology = repo("bmv2-lab/topologies/leaf-spine-small.yaml");
    let p4info = repo("p4src/build/foresight.p4info.binpb");
    let out = out.display().to_string();
    let switches = switches.display().to_string();
    let controller = || {
        foresight(&[
            "controller",
            "--topology",
            &topology,
            "--switches",
            &switches,
            "--target",
            "tofino",
            "--tofino-out",
            &out,
            "--p4info",
            &p4info,
            "--state-file",
            "none",
            "--ndsp",
            "127.0.0.1:0",
            "--http",
            "127.0.0.1:0",
        ])
    };
    let (ok, err) = controller();
    assert!(!ok);
    assert!(err.contains("context.json is missing"), "{err}");
    std::fs::write(Path::new(&out).join("pipe/context.json"), b"{}").unwrap();
    let (ok, err) = controller();
    assert!(!ok);
    assert!(
        err.contains("leaf1: no device port for topology port(s) 4"),
        "{err}"
    );
}
