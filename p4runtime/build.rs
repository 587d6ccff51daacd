//! Compiles P4Runtime's .proto files (proto/) into Rust types and keeps their descriptors for
//! the text and JSON forms.

use std::path::PathBuf;

use prost::Message;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = [
        "proto/p4/v1/p4runtime.proto",
        "proto/p4/config/v1/p4info.proto",
        "proto/google/rpc/status.proto",
    ];
    for f in &files {
        println!("cargo:rerun-if-changed={f}");
    }
    println!("cargo:rerun-if-changed=proto");
    let fds = protox::compile(files, ["proto"])?;
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(out.join("descriptors.bin"), fds.encode_to_vec())?;
    tonic_prost_build::configure()
        // Bytes fields as slices of the received message, not one allocation each: a Write of
        // 1,000 updates carries some 3,000 of them.
        .bytes(".p4.v1")
        .build_client(true)
        .build_server(true)
        .compile_fds(fds)?;
    Ok(())
}
