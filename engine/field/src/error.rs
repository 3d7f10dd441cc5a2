//! Why a field operation was refused.

/// Why a field operation was refused.
#[derive(Debug, Clone, thiserror::Error)]
pub enum FieldError {
    /// A vector of the wrong length.
    #[error("vector has dimension {got}, the field has {expected}")]
    WrongDimension {
        /// The field's dimension.
        expected: usize,
        /// The vector's.
        got: usize,
    },
    /// An all-zero or non-finite vector cannot be normalised.
    #[error("vector cannot be normalised (zero or not finite)")]
    BadVector,
    /// A strength that is negative, not a number, or so large that the
    /// scores and resonances built from it could overflow.
    /// (The bound is the field's `MAX_STRENGTH`, 10^6.)
    #[error("strength x permeability must be a finite number from 0 to 1e6, got {0}")]
    BadStrength(f64),
    /// A pattern whose strength, score or resonance is not a finite number
    /// (a damaged or hand-made pattern table; the field never makes one).
    #[error("field pattern {id} (key \"{key}\"): its {what} is {value}, not a finite number in range")]
    NonFinite {
        /// The pattern's id.
        id: u64,
        /// Its key.
        key: String,
        /// Which quantity: `strength`, `amplification`, `score`,
        /// `effective strength` or `resonance`.
        what: &'static str,
        /// The value.
        value: f64,
    },
    /// FAISS reported an error.
    #[error("faiss: {0}")]
    Faiss(String),
    /// A field file is damaged, or could not be written or read: the
    /// engine's typed error names the file, and for damage the frame and
    /// its offset.
    #[error(transparent)]
    Stored(#[from] std::sync::Arc<engine::Error>),
    /// A field parameter out of range.
    #[error("field config {field}: {cause}")]
    Config {
        /// The parameter.
        field: &'static str,
        /// What is wrong with it.
        cause: String,
    },
    /// A saved field could not be written or read.
    #[error("field files {path}: {cause}")]
    Files {
        /// The directory.
        path: String,
        /// What went wrong.
        cause: String,
    },
}

impl FieldError {
    /// Whether the caller is at fault: a bad vector or strength, a damaged
    /// or mismatched saved field. FAISS failures and I/O errors are not.
    pub fn is_caller_fault(&self) -> bool {
        match self {
            FieldError::WrongDimension { .. } | FieldError::BadVector | FieldError::BadStrength(_) => true,
            FieldError::NonFinite { .. } => true,
            FieldError::Files { .. } | FieldError::Config { .. } => true,
            FieldError::Stored(e) => !matches!(**e, engine::Error::Io { .. }),
            FieldError::Faiss(_) => false,
        }
    }
}

/// Errors compare by value; a stored-file error (which holds an I/O error
/// that has no equality) compares by its message.
impl PartialEq for FieldError {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::WrongDimension { expected: a, got: b }, Self::WrongDimension { expected: c, got: d }) => {
                (a, b) == (c, d)
            }
            (Self::BadVector, Self::BadVector) => true,
            (Self::BadStrength(a), Self::BadStrength(b)) => a.to_bits() == b.to_bits(),
            (Self::Faiss(a), Self::Faiss(b)) => a == b,
            (
                Self::NonFinite { id: a, key: b, what: c, value: d },
                Self::NonFinite { id: e, key: f, what: g, value: h },
            ) => (a, b, c, d.to_bits()) == (e, f, g, h.to_bits()),
            (Self::Stored(a), Self::Stored(b)) => a.to_string() == b.to_string(),
            (Self::Files { path: a, cause: b }, Self::Files { path: c, cause: d }) => (a, b) == (c, d),
            (Self::Config { field: a, cause: b }, Self::Config { field: c, cause: d }) => (a, b) == (c, d),
            (
                Self::WrongDimension { .. }
                | Self::BadVector
                | Self::BadStrength(_)
                | Self::NonFinite { .. }
                | Self::Faiss(_)
                | Self::Stored(_)
                | Self::Files { .. }
                | Self::Config { .. },
                _,
            ) => false,
        }
    }
}
