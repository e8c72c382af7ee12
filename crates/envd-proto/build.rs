//! Compiles `proto/` with protox (pure Rust, no `protoc` on CI) into a
//! descriptor set, then lets connectrpc-build generate messages, service
//! traits and clients from it.

use std::path::PathBuf;

const FILES: [&str; 2] = ["process/process.proto", "filesystem/filesystem.proto"];

fn main() {
    for file in FILES {
        println!("cargo:rerun-if-changed=proto/{file}");
    }
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let descriptors = protox::compile(FILES, ["proto"]).expect("proto files compile");
    let set_path = out_dir.join("envd.fds.bin");
    std::fs::write(&set_path, prost_encode(&descriptors)).expect("write descriptor set");
    connectrpc_build::Config::new()
        // Its directives would watch the descriptor set, which this script
        // writes on every run: the script would always be stale and every
        // build would recompile envd-proto and its dependents. The .proto
        // files above are the real inputs.
        .emit_rerun_directives(false)
        .descriptor_set(&set_path)
        .files(&FILES)
        .client_feature_name("client")
        .include_file("_connectrpc.rs")
        .compile()
        .expect("connectrpc code generation");
}

fn prost_encode(set: &protox::prost_reflect::prost_types::FileDescriptorSet) -> Vec<u8> {
    use protox::prost_reflect::prost::Message;
    set.encode_to_vec()
}
