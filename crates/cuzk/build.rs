//! Records the git commit of the build for `cuzk --version` ("unknown" outside a checkout).

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
}

fn main() {
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    println!("cargo::rustc-env=CUZK_GIT_COMMIT={commit}");
    // Rebuild when HEAD moves: HEAD itself, the branch it names, and packed refs.
    let mut watched = vec!["HEAD".to_string(), "packed-refs".to_string()];
    watched.extend(git(&["symbolic-ref", "-q", "HEAD"]));
    for w in watched {
        if let Some(p) = git(&["rev-parse", "--path-format=absolute", "--git-path", &w]) {
            println!("cargo::rerun-if-changed={p}");
        }
    }
    println!("cargo::rerun-if-changed=build.rs");
}
