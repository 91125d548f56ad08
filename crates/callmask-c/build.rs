//! Tells the C tests where llama.cpp's headers are: llama-cpp-sys-2 (which builds llama.cpp and
//! installs its headers next to the static libraries bundled into libcallmask_c.a) passes its
//! CMake package folder to direct dependents as `DEP_LLAMA_GGML_CMAKE_DIR`
//! (`<out>/lib/cmake`); the headers are in `<out>/include`.

fn main() {
    println!("cargo:rerun-if-env-changed=DEP_LLAMA_GGML_CMAKE_DIR");
    if let Some(cmake) = std::env::var_os("DEP_LLAMA_GGML_CMAKE_DIR") {
        let out = std::path::Path::new(&cmake).join("../../include");
        println!("cargo:rustc-env=CALLMASK_LLAMA_INCLUDE={}", out.display());
    }
}
