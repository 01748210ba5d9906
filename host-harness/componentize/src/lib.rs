//! Building the guest and turning it into the `mrtr:gate` component: one library used by the
//! wasmtime crate's build script (`host-harness/wasmtime/build.rs`) and this crate's
//! `mrtr-gate-componentize` binary (`scripts/reproducible`), so the second build that the
//! reproducibility check compares with is made by the very code that made the embedded
//! component.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Builds `mrtr-gate-component` of the workspace at `root` for `wasm32-unknown-unknown` with
/// the `guest` profile into `target_dir`, and returns the core module's path.
///
/// `cargo_home` is the cargo home whose registry sources the build reads (mapped to
/// `/cargo` in the module, as the checkout is to `/mrtr-gate`).
pub fn build_guest(
    cargo: &str,
    root: &Path,
    target_dir: &Path,
    cargo_home: Option<&Path>,
) -> Result<PathBuf, String> {
    let status = Command::new(cargo)
        .current_dir(root)
        .args([
            "build",
            "--locked",
            "--package",
            "mrtr-gate-component",
            "--target",
            "wasm32-unknown-unknown",
            "--profile",
            "guest",
        ])
        .env("CARGO_TARGET_DIR", target_dir)
        // The outer build's flags are for the host, not for the guest; the guest's are only
        // these (set explicitly, they also beat a developer's `build.rustflags`), so the
        // component's bytes depend on the sources alone, not on where they were built.
        .env(
            "CARGO_ENCODED_RUSTFLAGS",
            remap_flags(root, cargo_home).join("\x1f"),
        )
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
    Ok(target_dir
        .join("wasm32-unknown-unknown")
        .join("guest")
        .join("mrtr_gate_component.wasm"))
}

/// The cargo home a cargo started from here uses: `$CARGO_HOME`, else `$HOME/.cargo`.
pub fn cargo_home() -> Option<PathBuf> {
    std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
}

/// `--remap-path-prefix` for every place a path of this machine could reach the component
/// (panic locations name source files): the cargo home, where the registry's sources are,
/// and the checkout, each also as its canonical path (a symlinked home is seen both ways).
fn remap_flags(root: &Path, cargo_home: Option<&Path>) -> Vec<String> {
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
    if let Some(home) = cargo_home {
        remap(home, "/cargo");
    }
    remap(root, "/mrtr-gate");
    flags
}

/// The component of the core module at `module_path`, with `processed-by mrtr-gate <version>`
/// in its producers section (the release it is, read back by `tests/e2e/component.rs`).
pub fn componentize(module_path: &Path, version: &str) -> Result<Vec<u8>, String> {
    let module = std::fs::read(module_path)
        .map_err(|e| format!("reading {}: {e}", module_path.display()))?;
    let component = wit_component::ComponentEncoder::default()
        .module(&module)
        .map_err(|e| format!("the guest module has no usable component type: {e:#}"))?
        .validate(true)
        .encode()
        .map_err(|e| format!("componentizing the guest failed: {e:#}"))?;
    let mut producers = wasm_metadata::Producers::empty();
    producers.add("processed-by", "mrtr-gate", version);
    producers
        .add_to_wasm(&component)
        .map_err(|e| format!("adding the version to the component failed: {e:#}"))
}

/// Lowercase hex SHA-256.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The bytes of `wasm`, only if their SHA-256 is the one `sum` gives (`sha256sum`'s format:
/// the digest, then the file's name): how the published crate checks the component it
/// carries. A missing file, an unreadable or empty sum, or another digest is an error.
// Used by build.rs; the componentize binary has it for its tests only.
#[cfg_attr(not(test), allow(dead_code))]
pub fn read_verified(wasm: &Path, sum: &Path) -> Result<Vec<u8>, String> {
    let bytes = std::fs::read(wasm).map_err(|e| {
        format!(
            "reading {}: {e} (outside the workspace the crate needs the component that `scripts/crates` packs into it)",
            wasm.display()
        )
    })?;
    let expected =
        std::fs::read_to_string(sum).map_err(|e| format!("reading {}: {e}", sum.display()))?;
    let expected = expected.split_whitespace().next().unwrap_or_default();
    let actual = sha256_hex(&bytes);
    if expected != actual {
        return Err(format!(
            "{} has SHA-256 {actual}, but {} says {expected:?}: refusing to embed it",
            wasm.display(),
            sum.display()
        ));
    }
    Ok(bytes)
}
