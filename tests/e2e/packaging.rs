//! What the published crates carry (issue 27): the component says which release it is, the
//! host crate packs the WIT the workspace builds with and the component with its digest, and
//! only the four crates a host author depends on are released. `scripts/crates --check`
//! builds and runs them from outside the tree; this holds the manifests to it.

use mrtr_gate_host::runtime::EMBEDDED_COMPONENT;
use std::path::Path;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn the_component_names_its_release_in_its_producers_section() {
    let producers = wasm_metadata::Producers::from_wasm(EMBEDDED_COMPONENT)
        .unwrap()
        .expect("the component has a producers section");
    let processed_by = producers.get("processed-by").expect("a processed-by field");
    assert_eq!(
        processed_by.get("mrtr-gate").map(String::as_str),
        Some(env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn the_host_crate_packs_the_workspace_wit_and_the_component_with_its_digest() {
    let wit = root().join("host-harness/wit");
    assert!(
        std::fs::symlink_metadata(&wit)
            .unwrap()
            .file_type()
            .is_symlink(),
        "host-harness/wit is the committed symlink to ../wit"
    );
    assert_eq!(
        std::fs::canonicalize(&wit).unwrap(),
        std::fs::canonicalize(root().join("wit")).unwrap()
    );
    let manifest = std::fs::read_to_string(root().join("host-harness/Cargo.toml")).unwrap();
    let include = manifest
        .lines()
        .find_map(|l| l.strip_prefix("include = "))
        .expect("host-harness/Cargo.toml lists what the crate carries");
    for needed in [
        "\"/wit/**\"",
        "\"/build/**\"",
        "\"/component/mrtr-gate.wasm\"",
        "\"/component/mrtr-gate.wasm.sha256\"",
    ] {
        assert!(include.contains(needed), "include lacks {needed}");
    }
    // Copied in by scripts/crates, never committed: the crate's is the workspace's build.
    let ignored = std::fs::read_to_string(root().join(".gitignore")).unwrap();
    assert!(ignored.lines().any(|l| l == "/host-harness/component/"));
}

#[test]
fn only_the_four_crates_a_host_depends_on_are_released() {
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let members = manifest
        .lines()
        .find_map(|l| l.strip_prefix("members = "))
        .expect("the workspace's members");
    let mut released = Vec::new();
    for member in members.trim_matches(['[', ']']).split(", ") {
        let dir = root().join(member.trim_matches('"'));
        let text = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        let name = text
            .lines()
            .find_map(|l| l.strip_prefix("name = "))
            .unwrap()
            .trim_matches('"')
            .to_owned();
        let publish = text.lines().find(|l| l.starts_with("publish"));
        if publish == Some("publish = true") {
            assert!(
                text.lines().any(|l| l == "readme = \"README.md\"")
                    && dir.join("README.md").is_file(),
                "{name} has a README"
            );
            assert!(
                dir.join("LICENSE").is_file(),
                "{name} carries the license text"
            );
            released.push(name);
        } else {
            assert!(
                publish == Some("publish = false") || publish == Some("publish.workspace = true"),
                "{name}: {publish:?}"
            );
        }
    }
    released.sort();
    assert_eq!(
        released,
        [
            "mrtr-gate-client",
            "mrtr-gate-core",
            "mrtr-gate-host",
            "mrtr-gate-redis"
        ]
    );
    assert!(
        manifest.contains("[workspace.package]") && manifest.contains("\npublish = false\n"),
        "a crate is released only when it says so"
    );
}
