//! No code: this crate only asks for dependency features (see its `Cargo.toml`), so that a build
//! of `callmask-py` alone resolves them as `cargo test --workspace` does.
#![forbid(unsafe_code)]
