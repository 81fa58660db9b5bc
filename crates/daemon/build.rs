//! Compiles `proto/cuzk/v1/cuzk.proto` with the vendored protoc (no system protoc needed), and
//! writes its descriptor set for server reflection; and curio's definition,
//! `proto/curio/cuzk/v1/proving.proto`, apart into `$OUT_DIR/curio/`: its package is `cuzk.v1`
//! too, and prost writes one output file per package.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    let mut config = tonic_prost_build::Config::new();
    config.protoc_executable(&protoc);
    tonic_prost_build::configure()
        // A witness chunk is sliced out of the receive buffer, not copied into a Vec.
        .bytes(".cuzk.v1.SubmitRequest.chunk")
        .file_descriptor_set_path(out.join("cuzk_v1_descriptor.bin"))
        .compile_with_config(config, &["proto/cuzk/v1/cuzk.proto"], &["proto"])?;

    let curio = out.join("curio");
    std::fs::create_dir_all(&curio)?;
    let mut config = tonic_prost_build::Config::new();
    config.protoc_executable(&protoc);
    tonic_prost_build::configure()
        .out_dir(&curio)
        .compile_with_config(
            config,
            &["proto/curio/cuzk/v1/proving.proto"],
            &["proto/curio"],
        )?;
    Ok(())
}
