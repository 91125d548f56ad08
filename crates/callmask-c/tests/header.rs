//! `include/callmask.h` is generated from the source with cbindgen: this test regenerates it and
//! fails when the checked-in header differs (`CALLMASK_BLESS=1` rewrites it instead).

use std::path::Path;

#[test]
fn header_is_up_to_date() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let mut generated = Vec::new();
    cbindgen::Builder::new()
        .with_crate(dir)
        .with_config(config)
        .generate()
        .expect("cbindgen generates the header")
        .write(&mut generated);
    let generated = String::from_utf8(generated).expect("UTF-8 header");
    let path = dir.join("include/callmask.h");
    if std::env::var_os("CALLMASK_BLESS").is_some() {
        std::fs::write(&path, &generated).expect("write include/callmask.h");
        return;
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == generated,
        "include/callmask.h is stale: run `CALLMASK_BLESS=1 cargo test --release -p callmask-c \
         --test header` (or scripts/gen-header.sh) and commit it"
    );
}
