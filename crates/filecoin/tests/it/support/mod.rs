//! What the Filecoin test targets share: the generated-parameters directory and running a
//! test again in a child process with filecoin-proofs pointed at it.
//!
//! filecoin-proofs reads `FIL_PROOFS_PARAMETER_CACHE` once per process, so each test that
//! needs parameters runs itself again in a child with it set (generation holds a lock in the
//! directory, so parallel tests make each file once).

use std::path::PathBuf;
use std::process::Command;

use cuzk_filecoin::FilecoinError;

const PARAM_ENV: &str = "FIL_PROOFS_PARAMETER_CACHE";

/// The parameters cuzk generates for the tests, under the target directory.
pub fn params_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("filecoin-generated-params")
}

/// True in the child that runs test `name` of `module` (`module_path!()`) with filecoin-proofs'
/// parameter directory set; in the parent, runs that child and checks it passed.
pub fn in_param_env(module: &str, name: &str) -> bool {
    in_param_env_at(module, name, &params_dir())
}

/// [`in_param_env`] with filecoin-proofs pointed at `dir` instead of the shared directory.
#[allow(dead_code)] // only the daemon's tests use a directory of their own
pub fn in_param_env_at(module: &str, name: &str, dir: &std::path::Path) -> bool {
    if std::env::var_os(PARAM_ENV).is_some_and(|v| v == dir) {
        return true;
    }
    // libtest names a test by its path without the test binary's crate.
    let test = match module.split_once("::") {
        Some((_, path)) => format!("{path}::{name}"),
        None => name.to_string(),
    };
    let test = test.as_str();
    let exe = std::env::current_exe().expect("test binary path");
    let status = Command::new(exe)
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(PARAM_ENV, dir)
        .status()
        .expect("running the test in a child process");
    assert!(status.success(), "{test} failed in its child process");
    false
}

/// `r` failed with a [`FilecoinError::Field`] naming `file` and `field`.
#[allow(dead_code)] // not every test target checks field errors
pub fn expect_field<T>(r: Result<T, FilecoinError>, file: &str, field: &str) {
    match r {
        Err(FilecoinError::Field {
            file: f,
            field: g,
            reason,
        }) => assert_eq!((f.as_str(), g), (file, field), "{reason}"),
        Err(other) => panic!("expected an error on {file} field {field}: {other:?}"),
        Ok(_) => panic!("expected an error on {file} field {field}, not a result"),
    }
}
