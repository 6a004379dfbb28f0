//! Generates the P4Runtime bindings from the descriptors that the PyPI
//! `p4runtime` package carries (see `p4runtime_descriptors.py`).
//!
//! The Python interpreter is `$FORESIGHT_PYTHON` if set, else `python3`;
//! `bash .ci/run` (or `ci/setup.sh`) prepares one that has the package.

use std::path::PathBuf;
use std::process::Command;

use prost::Message;

fn main() {
    let script = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"))
        .join("p4runtime_descriptors.py");
    println!("cargo:rerun-if-changed={}", script.display());
    println!("cargo:rerun-if-env-changed=FORESIGHT_PYTHON");
    let python = std::env::var("FORESIGHT_PYTHON").unwrap_or_else(|_| "python3".into());

    let output = Command::new(&python)
        .arg(&script)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {python} ({e}); set FORESIGHT_PYTHON to a Python with the `p4runtime` package (run `bash ci/setup.sh`)"));
    if !output.status.success() {
        panic!(
            "{python} {} failed: {}\nset FORESIGHT_PYTHON to a Python with `pip install p4runtime==1.4.1` (run `bash ci/setup.sh`)",
            script.display(),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let descriptors = prost_types::FileDescriptorSet::decode(output.stdout.as_slice())
        .expect("p4runtime_descriptors.py printed something that is not a FileDescriptorSet");

    // Kept for prost-reflect, which parses text-format P4Info with it.
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    std::fs::write(out_dir.join("p4runtime_descriptors.bin"), &output.stdout)
        .expect("writing p4runtime_descriptors.bin");

    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_fds(descriptors)
        .expect("generating P4Runtime bindings");
}
