//! Generates the P4Runtime client from `proto/` with protox (a pure-Rust .proto compiler):
//! building needs nothing but Rust.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto");
    let fds = protox::compile(["p4/v1/p4runtime.proto"], ["proto"])?;
    tonic_prost_build::configure()
        .build_server(false)
        .compile_fds(fds)?;
    Ok(())
}
