//! The configuration's error: a problem, named precisely (the file, the runtime, the key).

/// A configuration problem, named precisely.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("config {path}: {message}")]
    Parse { path: String, message: String },
    #[error("config: runtime {id:?}: {message}")]
    Runtime { id: String, message: String },
}
