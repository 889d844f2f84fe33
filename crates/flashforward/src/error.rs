//! The library's typed error. Every message names the file, key, flag, shape or prompt word at
//! fault; [`Error::Context`] adds what was being done to an underlying error, so a chain reads
//! like "cannot load the DiT from DIR: DIR/x.safetensors: tensor 'k' has shape ...".

use std::path::PathBuf;

/// Errors of loading a model folder, checking a request, generating and writing video.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A request or model folder that cannot work, with what to change.
    #[error("{0}")]
    Invalid(String),
    /// A file that could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// Loading or running a model.
    #[error(transparent)]
    Model(#[from] ff_model::ModelError),
    /// Building or executing a schedule, or reading a student's files.
    #[error(transparent)]
    Sched(#[from] ff_sched::SchedError),
    /// A training checkpoint served directly (`train` feature).
    #[cfg(feature = "train")]
    #[error(transparent)]
    Train(#[from] ff_train::TrainError),
    /// An error of a library below (I/O, the video codecs, JSON), with [`Error::Context`] around
    /// it saying which file.
    #[error(transparent)]
    External(Box<dyn std::error::Error + Send + Sync>),
    /// What was being done when `source` failed.
    #[error("{message}: {source}")]
    Context {
        /// What was being done.
        message: String,
        /// Why it failed.
        source: Box<Error>,
    },
}

/// Result alias of the library.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io { path: path.into(), source }
    }
}

/// Errors of the libraries below, kept whole for [`Error::External`].
macro_rules! external {
    ($($source:ty),*) => {$(
        impl From<$source> for Error {
            fn from(e: $source) -> Self {
                Self::External(Box::new(e))
            }
        }
    )*};
}
external!(std::io::Error, serde_json::Error, image::ImageError);
#[cfg(feature = "video")]
external!(mp4::Error, openh264::Error);

/// `bail!`-style early return with [`Error::Invalid`].
macro_rules! invalid {
    ($($arg:tt)*) => {
        return Err($crate::Error::Invalid(format!($($arg)*)))
    };
}
pub(crate) use invalid;

/// Adds what was being done to an error (see [`Error::Context`]).
pub(crate) trait Context<T> {
    fn context(self, message: impl Into<String>) -> Result<T>;
    fn with_context(self, message: impl FnOnce() -> String) -> Result<T>;
}

impl<T, E: Into<Error>> Context<T> for std::result::Result<T, E> {
    fn context(self, message: impl Into<String>) -> Result<T> {
        self.map_err(|e| Error::Context { message: message.into(), source: Box::new(e.into()) })
    }

    fn with_context(self, message: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|e| Error::Context { message: message(), source: Box::new(e.into()) })
    }
}

impl<T> Context<T> for Option<T> {
    fn context(self, message: impl Into<String>) -> Result<T> {
        self.ok_or_else(|| Error::Invalid(message.into()))
    }

    fn with_context(self, message: impl FnOnce() -> String) -> Result<T> {
        self.ok_or_else(|| Error::Invalid(message()))
    }
}
