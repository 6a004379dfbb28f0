//! Compiles `proto/ndsp/v1/ndsp.proto` with `protox` (a protobuf compiler
//! written in Rust), so no system `protoc` is needed, and generates the
//! prost messages and the tonic client and server from the descriptors.

use std::path::PathBuf;

use prost::Message;

fn main() {
    let manifest =
        PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let proto_root = manifest.join("../../proto");
    let file = proto_root.join("ndsp/v1/ndsp.proto");
    println!("cargo:rerun-if-changed={}", file.display());

    let descriptors = protox::compile([&file], [&proto_root])
        .unwrap_or_else(|e| panic!("compiling {}: {e:?}", file.display()));

    // The encoded descriptors, for gRPC reflection and tools (grpcurl).
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    std::fs::write(
        out_dir.join("ndsp_descriptors.bin"),
        descriptors.encode_to_vec(),
    )
    .expect("writing ndsp_descriptors.bin");

    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_fds(descriptors)
        .expect("generating NDSP bindings");
}
