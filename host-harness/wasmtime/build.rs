//! Gives the crate its `mrtr:gate` component; its path reaches the crate as
//! `MRTR_GATE_COMPONENT`, its SHA-256 as `MRTR_GATE_COMPONENT_SHA256`. In order:
//!
//! 1. `MRTR_GATE_PREBUILT_COMPONENT=FILE`: that file (packagers who build it elsewhere);
//! 2. in the workspace (`../../guest` is there): builds the guest for
//!    `wasm32-unknown-unknown` and componentizes it (`mrtr-gate-componentize`), so
//!    `cargo build` and `cargo test` need no manual pre-build step (the pattern of
//!    wasmtime's `crates/test-programs/artifacts`);
//! 3. in the published crate: `component/mrtr-gate.wasm`, which `scripts/crates` put in
//!    beside its `component/mrtr-gate.wasm.sha256`; a missing file or another digest fails
//!    the build.
//!
//! Nothing is written into the source folder (cargo's package verification refuses that).

use mrtr_gate_componentize as guest;

use std::path::PathBuf;

fn main() {
    if let Err(e) = run() {
        println!("cargo::error={e}");
    }
}

fn run() -> Result<(), String> {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").map_err(|e| e.to_string())?);
    println!("cargo::rerun-if-env-changed=MRTR_GATE_PREBUILT_COMPONENT");

    if let Ok(prebuilt) = std::env::var("MRTR_GATE_PREBUILT_COMPONENT") {
        println!("cargo::rerun-if-changed={prebuilt}");
        let bytes = std::fs::read(&prebuilt).map_err(|e| format!("reading {prebuilt}: {e}"))?;
        return emit(&PathBuf::from(prebuilt), &bytes);
    }

    // The workspace's root is two folders up (host-harness/wasmtime) in a checkout.
    match manifest.ancestors().nth(2) {
        Some(root) if root.join("guest/component/Cargo.toml").is_file() => {
            workspace(root.to_path_buf())
        }
        _ => packaged(manifest),
    }
}

fn workspace(root: PathBuf) -> Result<(), String> {
    for watched in ["guest", "wit", "Cargo.lock", "Cargo.toml"] {
        println!("cargo::rerun-if-changed={}", root.join(watched).display());
    }
    println!("cargo::rerun-if-env-changed=CARGO_HOME");
    let out = PathBuf::from(std::env::var("OUT_DIR").map_err(|e| e.to_string())?);
    // A target directory of its own: the outer cargo holds the lock on the usual one.
    let target_dir = root.join("target").join("guest");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let module = guest::build_guest(&cargo, &root, &target_dir, guest::cargo_home().as_deref())?;
    let version = std::env::var("CARGO_PKG_VERSION").map_err(|e| e.to_string())?;
    let component = guest::componentize(&module, &version)?;
    let component_path = out.join("mrtr_gate.component.wasm");
    std::fs::write(&component_path, &component).map_err(|e| e.to_string())?;
    emit(&component_path, &component)
}

fn packaged(manifest: PathBuf) -> Result<(), String> {
    let dir = manifest.join("component");
    let wasm = dir.join("mrtr-gate.wasm");
    let sum = dir.join("mrtr-gate.wasm.sha256");
    for watched in [&wasm, &sum] {
        println!("cargo::rerun-if-changed={}", watched.display());
    }
    let bytes = guest::read_verified(&wasm, &sum)?;
    emit(&wasm, &bytes)
}

fn emit(path: &std::path::Path, bytes: &[u8]) -> Result<(), String> {
    println!("cargo::rustc-env=MRTR_GATE_COMPONENT={}", path.display());
    // Hashed here, once: loading the embedded component then needs no pass over its bytes.
    println!(
        "cargo::rustc-env=MRTR_GATE_COMPONENT_SHA256={}",
        guest::sha256_hex(bytes)
    );
    Ok(())
}
