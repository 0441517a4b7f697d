//! Compiles `proto/lf/a2a/v1/a2a.proto` with protox (pure Rust, no protoc on the machine) into
//! prost messages, the tonic service, pbjson ProtoJSON serde impls and a descriptor set for
//! gRPC server reflection; and the 0.3 `proto/a2a/v1/a2a.proto` into prost messages, its tonic
//! service and a descriptor set (no ProtoJSON: the 0.3 gRPC service only speaks protobuf).

use std::{
    env, fs,
    path::{Path, PathBuf},
};

use prost::Message;

/// Types we implement by hand in `src/`, because the wire rules ask for more than pbjson does:
/// timestamps print in UTC with `Z` and millisecond precision, and `StringList` accepts the bare
/// array form that some SDKs emit, and `Struct`/`Value`/`ListValue` print integral numbers as
/// JSON integers (`5`, not `5.0`) like Go protojson and Python.
const OVERRIDES: &[(&str, &str)] = &[
    (".google.protobuf.Timestamp", "crate::wkt::Timestamp"),
    (".google.protobuf.Struct", "crate::wkt::Struct"),
    (".google.protobuf.Value", "crate::wkt::Value"),
    (".google.protobuf.ListValue", "crate::wkt::ListValue"),
    (".lf.a2a.v1.StringList", "crate::string_list::StringList"),
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(env::var("CARGO_MANIFEST_DIR")?).join("../../proto");
    let out = PathBuf::from(env::var("OUT_DIR")?);
    println!("cargo:rerun-if-changed={}", root.display());

    let fds = protox::compile(["lf/a2a/v1/a2a.proto"], [&root])?;
    let descriptor_bytes = fds.encode_to_vec();
    fs::write(out.join("a2a_descriptor.bin"), &descriptor_bytes)?;

    let mut prost_cfg = tonic_prost_build::configure()
        .compile_well_known_types(true)
        .extern_path(".google.protobuf", "::pbjson_types")
        .build_transport(false);
    for (proto, rust) in OVERRIDES {
        prost_cfg = prost_cfg.extern_path(*proto, *rust);
    }
    prost_cfg.skip_protoc_run().compile_fds(fds)?;

    let mut json_cfg = pbjson_build::Builder::new();
    json_cfg
        .register_descriptors(&descriptor_bytes)?
        .ignore_unknown_fields()
        .exclude([".lf.a2a.v1.StringList", ".lf.a2a.v1.ListTasksResponse"])
        .extern_path(".google.protobuf", "::pbjson_types");
    for (proto, rust) in OVERRIDES {
        json_cfg.extern_path(*proto, *rust);
    }
    json_cfg.build(&[".lf.a2a.v1"])?;
    null_data_is_a_value(&out.join("lf.a2a.v1.serde.rs"))?;
    compile_v03(&root, &out)
}

/// The 0.3 service (`a2a.v1`). Its well-known types are the 1.0 model's (the same overrides), so
/// the edge translation moves timestamps, structs and values without converting them.
fn compile_v03(root: &Path, out: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let fds = protox::compile(["a2a/v1/a2a.proto"], [root])?;
    fs::write(out.join("a2a_v03_descriptor.bin"), fds.encode_to_vec())?;
    let mut prost_cfg = tonic_prost_build::configure()
        .compile_well_known_types(true)
        .extern_path(".google.protobuf", "::pbjson_types")
        .build_transport(false);
    for (proto, rust) in OVERRIDES.iter().filter(|(p, _)| p.starts_with(".google")) {
        prost_cfg = prost_cfg.extern_path(*proto, *rust);
    }
    prost_cfg.skip_protoc_run().compile_fds(fds)?;
    Ok(())
}

/// ProtoJSON reads `null` in a `google.protobuf.Value` field as the null value; pbjson reads a
/// null oneof member as absent, so `{"data": null}` came back as a part without content (found
/// by the ProtoJSON round-trip property test). `Part.data` is the proto's only Value field.
fn null_data_is_a_value(serde_rs: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let text = fs::read_to_string(serde_rs)?;
    let absent = "map_.next_value::<::std::option::Option<_>>()?.map(part::Content::Data)";
    if !text.contains(absent) {
        return Err("pbjson's decoding of Part.data changed: revisit null_data_is_a_value".into());
    }
    fs::write(
        serde_rs,
        text.replace(absent, "Some(part::Content::Data(map_.next_value()?))"),
    )?;
    Ok(())
}
