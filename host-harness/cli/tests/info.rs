//! `mrtr-gate info` names the component a host would pin (issue 27): its version and the
//! SHA-256 of exactly the bytes `mrtr-gate export-component` writes.

#![cfg(test)]

use std::process::Command;

#[test]
fn info_prints_the_version_and_the_digest_of_the_component_it_exports() {
    let bin = env!("CARGO_BIN_EXE_mrtr-gate");
    let out = Command::new(bin).arg("info").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .unwrap_or_else(|| panic!("`{name}` in:\n{text}"))
            .to_owned()
    };
    assert_eq!(field("version: "), env!("CARGO_PKG_VERSION"));
    let dir = std::env::temp_dir().join(format!("mrtr-gate-info-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("component.wasm");
    assert!(
        Command::new(bin)
            .arg("export-component")
            .arg(&path)
            .status()
            .unwrap()
            .success()
    );
    let bytes = std::fs::read(&path).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        field("component sha256: "),
        mrtr_gate_host::core::digest::sha256_hex(&bytes)
    );
    assert_eq!(field("component size: "), format!("{} bytes", bytes.len()));
}
