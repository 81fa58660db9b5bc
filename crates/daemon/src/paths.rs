//! Client-named paths, resolved only inside a configured directory.

use std::path::{Component, Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum PathError {
    #[error("path {0:?} is empty")]
    Empty(String),
    #[error("path {0:?} contains `..`")]
    Parent(String),
    #[error("path {path:?} does not exist or cannot be read: {source}")]
    Missing {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("path {path:?} resolves outside {dir}")]
    Outside { path: String, dir: String },
    #[error("path {0:?} is not a regular file")]
    NotFile(String),
}

/// `name` (relative to `dir`, or absolute) as a canonical path of a regular file inside `dir`.
/// Symlinks are followed before the check, so a link pointing out of `dir` is refused.
pub fn resolve_inside(dir: &Path, name: &str) -> Result<PathBuf, PathError> {
    if name.is_empty() {
        return Err(PathError::Empty(name.into()));
    }
    let p = Path::new(name);
    if p.components().any(|c| matches!(c, Component::ParentDir)) {
        return Err(PathError::Parent(name.into()));
    }
    let missing = |e| PathError::Missing {
        path: name.into(),
        source: e,
    };
    let root = dir.canonicalize().map_err(missing)?;
    let full = root.join(p).canonicalize().map_err(missing)?;
    if !full.starts_with(&root) {
        return Err(PathError::Outside {
            path: name.into(),
            dir: root.display().to_string(),
        });
    }
    if !full.is_file() {
        return Err(PathError::NotFile(name.into()));
    }
    Ok(full)
}
