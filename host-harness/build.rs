//! Builds the guest for `wasm32-unknown-unknown` and turns it into the `mrtr:gate`
//! component, so `cargo build`/`cargo test` need no manual pre-build step (the pattern of
//! wasmtime's `crates/test-programs/artifacts`). The component's path reaches the crate as
//! `MRTR_GATE_COMPONENT`.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    if let Err(e) = run() {
        println!("cargo::error={e}");
    }
}

fn run() -> Result<(), String> {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").map_err(|e| e.to_string())?);
    let root = manifest
        .parent()
        .ok_or("host-harness has no parent directory")?
        .to_path_buf();
    let out = PathBuf::from(std::env::var("OUT_DIR").map_err(|e| e.to_string())?);
    for watched in ["guest", "wit", "Cargo.lock", "Cargo.toml"] {
        println!("cargo::rerun-if-changed={}", root.join(watched).display());
    }
    println!("cargo::rerun-if-env-changed=MRTR_GATE_PREBUILT_COMPONENT");
    println!("cargo::rerun-if-env-changed=CARGO_HOME");

    // An escape hatch for packagers who build the component elsewhere.
    if let Ok(prebuilt) = std::env::var("MRTR_GATE_PREBUILT_COMPONENT") {
        let bytes = std::fs::read(&prebuilt).map_err(|e| format!("reading {prebuilt}: {e}"))?;
        println!("cargo::rustc-env=MRTR_GATE_COMPONENT={prebuilt}");
        println!(
            "cargo::rustc-env=MRTR_GATE_COMPONENT_SHA256={}",
            sha256_hex(&bytes)
        );
        return Ok(());
    }

    // A target directory of its own: the outer cargo holds the lock on the usual one.
    let target_dir = root.join("target").join("guest");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .current_dir(&root)
        .args([
            "build",
            "--package",
            "mrtr-gate-component",
            "--target",
            "wasm32-unknown-unknown",
            "--profile",
            "guest",
        ])
        .env("CARGO_TARGET_DIR", &target_dir)
        // The outer build's flags are for the host, not for the guest; the guest's are only
        // these (set explicitly, they also beat a developer's `build.rustflags`), so the
        // component's bytes depend on the sources alone, not on where they were built.
        .env("CARGO_ENCODED_RUSTFLAGS", remap_flags(&root).join("\x1f"))
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_BUILD_RUSTFLAGS")
        .env_remove("CARGO_BUILD_TARGET")
        .env_remove("CARGO_LLVM_COV")
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .status()
        .map_err(|e| format!("could not run cargo for the guest: {e}"))?;
    if !status.success() {
        return Err(
            "building the guest failed (is the target installed? `rustup target add wasm32-unknown-unknown`)"
                .into(),
        );
    }
    let module_path = target_dir
        .join("wasm32-unknown-unknown")
        .join("guest")
        .join("mrtr_gate_component.wasm");
    let component = componentize(&module_path)?;
    let component_path = out.join("mrtr_gate.component.wasm");
    std::fs::write(&component_path, &component).map_err(|e| e.to_string())?;
    println!(
        "cargo::rustc-env=MRTR_GATE_COMPONENT={}",
        component_path.display()
    );
    // Hashed here, once: loading the embedded component then needs no pass over its bytes.
    println!(
        "cargo::rustc-env=MRTR_GATE_COMPONENT_SHA256={}",
        sha256_hex(&component)
    );
    Ok(())
}

/// `--remap-path-prefix` for every place a path of this machine could reach the component
/// (panic locations name source files): the cargo home, where the registry's sources are,
/// and the checkout, each also as its canonical path (a symlinked home is seen both ways).
fn remap_flags(root: &Path) -> Vec<String> {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")));
    let mut flags = Vec::new();
    let mut remap = |from: &Path, to: &str| {
        let mut paths = vec![from.to_path_buf()];
        if let Ok(canonical) = std::fs::canonicalize(from)
            && canonical != from
        {
            paths.push(canonical);
        }
        for path in paths {
            flags.push(format!("--remap-path-prefix={}={to}", path.display()));
        }
    };
    if let Some(home) = home {
        remap(&home, "/cargo");
    }
    remap(root, "/mrtr-gate");
    flags
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn componentize(module_path: &Path) -> Result<Vec<u8>, String> {
    let module = std::fs::read(module_path)
        .map_err(|e| format!("reading {}: {e}", module_path.display()))?;
    wit_component::ComponentEncoder::default()
        .module(&module)
        .map_err(|e| format!("the guest module has no usable component type: {e:#}"))?
        .validate(true)
        .encode()
        .map_err(|e| format!("componentizing the guest failed: {e:#}"))
}
