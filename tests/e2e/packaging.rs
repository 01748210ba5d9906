//! What the published crates carry (issue 27): the component says which release it is, the
//! wasmtime crate packs the WIT the workspace builds with and the component with its digest,
//! and only the crates a host author depends on (and the one the wasmtime crate builds its
//! component with) are released. `scripts/crates --check`
//! builds and runs them from outside the tree; this holds the manifests to it.

use mrtr_gate_wasmtime::runtime::EMBEDDED_COMPONENT;
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
fn the_wasmtime_crate_packs_the_workspace_wit_and_the_component_with_its_digest() {
    let wit = root().join("host-harness/wasmtime/wit");
    assert!(
        std::fs::symlink_metadata(&wit)
            .unwrap()
            .file_type()
            .is_symlink(),
        "host-harness/wasmtime/wit is the committed symlink to ../../wit"
    );
    assert_eq!(
        std::fs::canonicalize(&wit).unwrap(),
        std::fs::canonicalize(root().join("wit")).unwrap()
    );
    let manifest =
        std::fs::read_to_string(root().join("host-harness/wasmtime/Cargo.toml")).unwrap();
    let include = manifest
        .lines()
        .find_map(|l| l.strip_prefix("include = "))
        .expect("host-harness/wasmtime/Cargo.toml lists what the crate carries");
    for needed in [
        "\"/wit/**\"",
        "\"/build.rs\"",
        "\"/component/mrtr-gate.wasm\"",
        "\"/component/mrtr-gate.wasm.sha256\"",
    ] {
        assert!(include.contains(needed), "include lacks {needed}");
    }
    // Copied in by scripts/crates, never committed: the crate's is the workspace's build.
    let ignored = std::fs::read_to_string(root().join(".gitignore")).unwrap();
    assert!(
        ignored
            .lines()
            .any(|l| l == "/host-harness/wasmtime/component/")
    );
}

#[test]
fn only_the_crates_a_host_depends_on_are_released() {
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
            "mrtr-gate-componentize",
            "mrtr-gate-core",
            "mrtr-gate-host",
            "mrtr-gate-redis",
            "mrtr-gate-wasmtime"
        ]
    );
    assert!(
        manifest.contains("[workspace.package]") && manifest.contains("\npublish = false\n"),
        "a crate is released only when it says so"
    );
}

/// The README's list of crates (folder and what each uses of ours) is the workspace's: every
/// member, at its folder, with exactly its normal and build dependencies on other members.
#[test]
fn the_readmes_crate_list_is_the_workspaces() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let list = readme
        .split(
            "<!-- crates: the list tests/e2e/packaging.rs compares with Cargo.toml -->\n```text\n",
        )
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("the README's crate list");
    let short = |name: &str| name.strip_prefix("mrtr-gate-").unwrap_or(name).to_owned();
    let mut written = std::collections::BTreeMap::new();
    for line in list.lines() {
        let (name, rest) = line.split_once(' ').unwrap();
        let rest = rest.trim_start();
        let (folder, uses) = rest.split_once(char::is_whitespace).unwrap();
        let uses = uses.trim();
        let mut uses: Vec<String> = if uses == "uses nothing of ours" {
            Vec::new()
        } else {
            uses.split(", ").map(str::to_owned).collect()
        };
        uses.sort();
        written.insert(name.to_owned(), (folder.to_owned(), uses));
    }
    let out = std::process::Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(root())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let packages = meta["packages"].as_array().unwrap();
    let ours: std::collections::BTreeSet<&str> = packages
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    let mut actual = std::collections::BTreeMap::new();
    for p in packages {
        let manifest = Path::new(p["manifest_path"].as_str().unwrap());
        let dir = manifest.parent().unwrap().strip_prefix(root()).unwrap();
        let folder = if dir.as_os_str().is_empty() {
            ".".to_owned()
        } else {
            dir.display().to_string()
        };
        let mut uses: Vec<String> = p["dependencies"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["kind"].as_str() != Some("dev"))
            .filter_map(|d| d["name"].as_str())
            .filter(|d| ours.contains(d))
            .map(short)
            .collect();
        uses.sort();
        uses.dedup();
        actual.insert(p["name"].as_str().unwrap().to_owned(), (folder, uses));
    }
    assert_eq!(written, actual);
}
