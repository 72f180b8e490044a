//! MPI error classes (the numbers of `mpi.h`) and the layer's error.

/// An MPI error class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// `MPI_ERR_BUFFER`
    Buffer = 1,
    /// `MPI_ERR_COUNT`
    Count = 2,
    /// `MPI_ERR_TYPE`
    Type = 3,
    /// `MPI_ERR_TAG`
    Tag = 4,
    /// `MPI_ERR_COMM`
    Comm = 5,
    /// `MPI_ERR_RANK`
    Rank = 6,
    /// `MPI_ERR_REQUEST`
    Request = 7,
    /// `MPI_ERR_ROOT`
    Root = 8,
    /// `MPI_ERR_GROUP`
    Group = 9,
    /// `MPI_ERR_OP`
    Op = 10,
    /// `MPI_ERR_ARG`
    Arg = 13,
    /// `MPI_ERR_TRUNCATE`
    Truncate = 15,
    /// `MPI_ERR_OTHER`
    Other = 16,
    /// `MPI_ERR_INTERN`
    Intern = 17,
    /// `MPI_ERR_IN_STATUS`
    InStatus = 18,
}

impl Class {
    /// The class's name in `mpi.h`.
    pub fn name(self) -> &'static str {
        match self {
            Class::Buffer => "MPI_ERR_BUFFER",
            Class::Count => "MPI_ERR_COUNT",
            Class::Type => "MPI_ERR_TYPE",
            Class::Tag => "MPI_ERR_TAG",
            Class::Comm => "MPI_ERR_COMM",
            Class::Rank => "MPI_ERR_RANK",
            Class::Request => "MPI_ERR_REQUEST",
            Class::Root => "MPI_ERR_ROOT",
            Class::Group => "MPI_ERR_GROUP",
            Class::Op => "MPI_ERR_OP",
            Class::Arg => "MPI_ERR_ARG",
            Class::Truncate => "MPI_ERR_TRUNCATE",
            Class::Other => "MPI_ERR_OTHER",
            Class::Intern => "MPI_ERR_INTERN",
            Class::InStatus => "MPI_ERR_IN_STATUS",
        }
    }
}

/// The text `MPI_Error_string` gives for an error code.
pub fn describe(code: i32) -> &'static str {
    match code {
        0 => "MPI_SUCCESS: no error",
        1 => "MPI_ERR_BUFFER: invalid buffer pointer",
        2 => "MPI_ERR_COUNT: invalid count argument",
        3 => "MPI_ERR_TYPE: invalid datatype",
        4 => "MPI_ERR_TAG: invalid tag",
        5 => "MPI_ERR_COMM: invalid communicator",
        6 => "MPI_ERR_RANK: invalid rank",
        7 => "MPI_ERR_REQUEST: invalid request",
        8 => "MPI_ERR_ROOT: invalid root",
        9 => "MPI_ERR_GROUP: invalid group",
        10 => "MPI_ERR_OP: invalid reduce operation",
        11 => "MPI_ERR_TOPOLOGY: invalid topology",
        12 => "MPI_ERR_DIMS: invalid dimensions",
        13 => "MPI_ERR_ARG: invalid argument",
        14 => "MPI_ERR_UNKNOWN: unknown error",
        15 => "MPI_ERR_TRUNCATE: message truncated",
        16 => "MPI_ERR_OTHER: other error",
        17 => "MPI_ERR_INTERN: internal error",
        18 => "MPI_ERR_IN_STATUS: error code is in status",
        19 => "MPI_ERR_PENDING: pending request",
        _ => "unknown error code",
    }
}

/// A failed call's class and what was wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {message}", class.name())]
pub struct MpiError {
    /// The class returned to the program.
    pub class: Class,
    /// What was wrong, for the fatal handler's message.
    pub message: String,
}

impl MpiError {
    /// An error of `class`.
    pub fn new(class: Class, message: impl Into<String>) -> MpiError {
        MpiError {
            class,
            message: message.into(),
        }
    }
}

impl From<qcg::Error> for MpiError {
    fn from(e: qcg::Error) -> MpiError {
        let class = match &e {
            qcg::Error::InvalidRank { .. } => Class::Rank,
            qcg::Error::Truncated { .. } => Class::Truncate,
            qcg::Error::InvalidArgument(_) => Class::Arg,
            qcg::Error::Disagreement { on, .. } => match on {
                qcg::callsig::Disagree::Root => Class::Root,
                qcg::callsig::Disagree::Size => Class::Count,
                qcg::callsig::Disagree::Operation => Class::Op,
                qcg::callsig::Disagree::Settings => Class::Other,
            },
            _ => Class::Other,
        };
        MpiError::new(class, e.to_string())
    }
}
