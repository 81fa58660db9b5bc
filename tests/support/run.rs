//! Running the built `cuzk` binary, shared by the command's end-to-end test targets.

use std::process::{Command, Output};

pub fn cuzk(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cuzk"))
        .args(args)
        .output()
        .expect("run cuzk")
}

/// Runs a command that must succeed and returns its stdout.
pub fn ok(args: &[&str]) -> String {
    let out = cuzk(args);
    assert!(
        out.status.success(),
        "cuzk {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs a command that must fail and returns its stderr.
#[allow(dead_code)] // not every test target checks failures
pub fn fails(args: &[&str]) -> String {
    let out = cuzk(args);
    assert!(!out.status.success(), "cuzk {args:?} should have failed");
    String::from_utf8_lossy(&out.stderr).into_owned()
}
