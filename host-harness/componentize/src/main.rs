//! `mrtr-gate-componentize --root CHECKOUT --target-dir DIR --out FILE`: builds the guest of
//! the checkout at `CHECKOUT` and componentizes it exactly as the wasmtime crate's build script
//! does (the same code, this crate's library), without building wasmtime. `scripts/reproducible`
//! compares what it writes with the component the workspace embeds.

use mrtr_gate_componentize as guest;

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    match run() {
        Ok(sha256) => {
            println!("{sha256}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("mrtr-gate-componentize: {e}");
            ExitCode::from(2)
        }
    }
}

fn run() -> Result<String, String> {
    let usage = "usage: mrtr-gate-componentize --root CHECKOUT --target-dir DIR --out FILE";
    let (mut root, mut target_dir, mut out) = (None, None, None);
    let mut args = std::env::args_os().skip(1);
    while let Some(flag) = args.next() {
        let slot = match flag.to_str() {
            Some("--root") => &mut root,
            Some("--target-dir") => &mut target_dir,
            Some("--out") => &mut out,
            _ => return Err(format!("unknown argument {flag:?}; {usage}")),
        };
        *slot = Some(PathBuf::from(args.next().ok_or(usage)?));
    }
    let (Some(root), Some(target_dir), Some(out)) = (root, target_dir, out) else {
        return Err(usage.into());
    };
    // Absolute, as build.rs's `CARGO_MANIFEST_DIR` is: the prefix the guest build maps away.
    let root = std::fs::canonicalize(&root).map_err(|e| format!("{}: {e}", root.display()))?;
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let module = guest::build_guest(&cargo, &root, &target_dir, guest::cargo_home().as_deref())?;
    let component = guest::componentize(&module, env!("CARGO_PKG_VERSION"))?;
    std::fs::write(&out, &component).map_err(|e| format!("{}: {e}", out.display()))?;
    Ok(guest::sha256_hex(&component))
}

#[cfg(test)]
mod tests {
    //! The published host crate's check of the component it carries (build.rs, `packaged`).
    use mrtr_gate_componentize::{read_verified, sha256_hex};
    use std::path::PathBuf;

    fn folder(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "mrtr-gate-componentize-{}-{name}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        assert!(std::fs::create_dir_all(&dir).is_ok());
        dir
    }

    #[test]
    fn the_component_is_embedded_only_with_the_digest_beside_it() {
        let dir = folder("digest");
        let (wasm, sum) = (
            dir.join("mrtr-gate.wasm"),
            dir.join("mrtr-gate.wasm.sha256"),
        );
        let bytes = b"\0asm\x0d\0\x01\0".to_vec();
        let write = |path: &PathBuf, text: &[u8]| std::fs::write(path, text).is_ok();
        assert!(write(&wasm, &bytes));
        assert!(
            matches!(read_verified(&wasm, &sum), Err(e) if e.contains("mrtr-gate.wasm.sha256"))
        );
        assert!(write(
            &sum,
            format!("{}  mrtr-gate.wasm\n", sha256_hex(&bytes)).as_bytes()
        ));
        assert_eq!(read_verified(&wasm, &sum), Ok(bytes.clone()));
        // One byte changed, an empty sum, another file's digest: refused.
        assert!(write(&wasm, b"\0asm\x0d\0\x01\x01"));
        assert!(matches!(read_verified(&wasm, &sum), Err(e) if e.contains("refusing")));
        assert!(write(&wasm, &bytes));
        assert!(write(&sum, b""));
        assert!(matches!(read_verified(&wasm, &sum), Err(e) if e.contains("refusing")));
        assert!(write(&sum, sha256_hex(b"other").as_bytes()));
        assert!(matches!(read_verified(&wasm, &sum), Err(e) if e.contains("refusing")));
        assert!(std::fs::remove_file(&wasm).is_ok());
        assert!(matches!(read_verified(&wasm, &sum), Err(e) if e.contains("scripts/crates")));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
