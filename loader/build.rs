// Embed the git commit (and a dirty flag) so every cell records the exact build.
use std::process::Command;

fn main() {
    let commit = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    let dirty = Command::new("git")
        .args(["status", "--porcelain", "--untracked-files=no"])
        .output()
        .ok()
        .map(|o| !o.stdout.is_empty())
        .unwrap_or(false);
    let id = if dirty {
        format!("{commit}-dirty")
    } else {
        commit
    };
    println!("cargo:rustc-env=CROSSBENCH_GIT_COMMIT={id}");
    println!("cargo:rerun-if-changed=../.git/HEAD");
    println!("cargo:rerun-if-changed=../.git/index");
    // An edit that is not committed yet must still turn the id dirty: watch the
    // sources of every crate the binary is built from (not the workspace root, whose
    // target/ changes on every build).
    for dir in [
        "src",
        "../adapters/src",
        "../checker/src",
        "../sampler/src",
        "../report/src",
    ] {
        println!("cargo:rerun-if-changed={dir}");
    }
    for manifest in [
        "Cargo.toml",
        "../Cargo.toml",
        "../adapters/Cargo.toml",
        "../checker/Cargo.toml",
        "../sampler/Cargo.toml",
        "../report/Cargo.toml",
    ] {
        println!("cargo:rerun-if-changed={manifest}");
    }
}
