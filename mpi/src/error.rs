//! MPI error classes (the numbers of `mpi.h`) and the layer's error.

/// An MPI error class (the numbers of `mpi.h`, MPI 3.1's whole list).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// `MPI_ERR_BUFFER`: invalid buffer pointer
    Buffer = 1,
    /// `MPI_ERR_COUNT`: invalid count argument
    Count = 2,
    /// `MPI_ERR_TYPE`: invalid datatype
    Type = 3,
    /// `MPI_ERR_TAG`: invalid tag
    Tag = 4,
    /// `MPI_ERR_COMM`: invalid communicator
    Comm = 5,
    /// `MPI_ERR_RANK`: invalid rank
    Rank = 6,
    /// `MPI_ERR_REQUEST`: invalid request
    Request = 7,
    /// `MPI_ERR_ROOT`: invalid root
    Root = 8,
    /// `MPI_ERR_GROUP`: invalid group
    Group = 9,
    /// `MPI_ERR_OP`: invalid reduce operation
    Op = 10,
    /// `MPI_ERR_TOPOLOGY`: invalid topology
    Topology = 11,
    /// `MPI_ERR_DIMS`: invalid dimensions
    Dims = 12,
    /// `MPI_ERR_ARG`: invalid argument
    Arg = 13,
    /// `MPI_ERR_UNKNOWN`: unknown error
    Unknown = 14,
    /// `MPI_ERR_TRUNCATE`: message truncated
    Truncate = 15,
    /// `MPI_ERR_OTHER`: other error
    Other = 16,
    /// `MPI_ERR_INTERN`: internal error
    Intern = 17,
    /// `MPI_ERR_IN_STATUS`: error code is in status
    InStatus = 18,
    /// `MPI_ERR_PENDING`: pending request
    Pending = 19,
    /// `MPI_ERR_ACCESS`: permission denied
    Access = 20,
    /// `MPI_ERR_AMODE`: invalid file access mode
    Amode = 21,
    /// `MPI_ERR_ASSERT`: invalid assertion
    Assert = 22,
    /// `MPI_ERR_BAD_FILE`: invalid file name
    BadFile = 23,
    /// `MPI_ERR_BASE`: invalid base address
    Base = 24,
    /// `MPI_ERR_CONVERSION`: data conversion failed
    Conversion = 25,
    /// `MPI_ERR_DISP`: invalid displacement
    Disp = 26,
    /// `MPI_ERR_DUP_DATAREP`: data representation already defined
    DupDatarep = 27,
    /// `MPI_ERR_FILE_EXISTS`: file exists
    FileExists = 28,
    /// `MPI_ERR_FILE_IN_USE`: file in use
    FileInUse = 29,
    /// `MPI_ERR_FILE`: invalid file handle
    File = 30,
    /// `MPI_ERR_INFO_KEY`: info key too long or empty
    InfoKey = 31,
    /// `MPI_ERR_INFO_NOKEY`: no such info key
    InfoNokey = 32,
    /// `MPI_ERR_INFO_VALUE`: info value too long or empty
    InfoValue = 33,
    /// `MPI_ERR_INFO`: invalid info object
    Info = 34,
    /// `MPI_ERR_IO`: input/output error
    Io = 35,
    /// `MPI_ERR_KEYVAL`: invalid attribute key
    Keyval = 36,
    /// `MPI_ERR_LOCKTYPE`: invalid lock type
    Locktype = 37,
    /// `MPI_ERR_NAME`: invalid service name
    Name = 38,
    /// `MPI_ERR_NO_MEM`: out of memory
    NoMem = 39,
    /// `MPI_ERR_NOT_SAME`: processes passed different arguments
    NotSame = 40,
    /// `MPI_ERR_NO_SPACE`: no space left
    NoSpace = 41,
    /// `MPI_ERR_NO_SUCH_FILE`: no such file
    NoSuchFile = 42,
    /// `MPI_ERR_PORT`: invalid port
    Port = 43,
    /// `MPI_ERR_QUOTA`: quota exceeded
    Quota = 44,
    /// `MPI_ERR_READ_ONLY`: read-only file
    ReadOnly = 45,
    /// `MPI_ERR_RMA_CONFLICT`: conflicting one-sided accesses
    RmaConflict = 46,
    /// `MPI_ERR_RMA_SYNC`: wrong one-sided synchronization
    RmaSync = 47,
    /// `MPI_ERR_SERVICE`: invalid service
    Service = 48,
    /// `MPI_ERR_SIZE`: invalid size
    Size = 49,
    /// `MPI_ERR_SPAWN`: spawn failed
    Spawn = 50,
    /// `MPI_ERR_UNSUPPORTED_DATAREP`: unsupported data representation
    UnsupportedDatarep = 51,
    /// `MPI_ERR_UNSUPPORTED_OPERATION`: unsupported operation
    UnsupportedOperation = 52,
    /// `MPI_ERR_WIN`: invalid window
    Win = 53,
    /// `MPI_ERR_RMA_RANGE`: target memory out of the window
    RmaRange = 54,
    /// `MPI_ERR_RMA_ATTACH`: memory cannot be attached
    RmaAttach = 55,
    /// `MPI_ERR_RMA_SHARED`: memory cannot be shared
    RmaShared = 56,
    /// `MPI_ERR_RMA_FLAVOR`: wrong window flavor
    RmaFlavor = 57,
}

/// Every class: (class, name, description), in number order from 1.
const CLASSES: &[(Class, &str, &str)] = &[
    (Class::Buffer, "MPI_ERR_BUFFER", "invalid buffer pointer"),
    (Class::Count, "MPI_ERR_COUNT", "invalid count argument"),
    (Class::Type, "MPI_ERR_TYPE", "invalid datatype"),
    (Class::Tag, "MPI_ERR_TAG", "invalid tag"),
    (Class::Comm, "MPI_ERR_COMM", "invalid communicator"),
    (Class::Rank, "MPI_ERR_RANK", "invalid rank"),
    (Class::Request, "MPI_ERR_REQUEST", "invalid request"),
    (Class::Root, "MPI_ERR_ROOT", "invalid root"),
    (Class::Group, "MPI_ERR_GROUP", "invalid group"),
    (Class::Op, "MPI_ERR_OP", "invalid reduce operation"),
    (Class::Topology, "MPI_ERR_TOPOLOGY", "invalid topology"),
    (Class::Dims, "MPI_ERR_DIMS", "invalid dimensions"),
    (Class::Arg, "MPI_ERR_ARG", "invalid argument"),
    (Class::Unknown, "MPI_ERR_UNKNOWN", "unknown error"),
    (Class::Truncate, "MPI_ERR_TRUNCATE", "message truncated"),
    (Class::Other, "MPI_ERR_OTHER", "other error"),
    (Class::Intern, "MPI_ERR_INTERN", "internal error"),
    (
        Class::InStatus,
        "MPI_ERR_IN_STATUS",
        "error code is in status",
    ),
    (Class::Pending, "MPI_ERR_PENDING", "pending request"),
    (Class::Access, "MPI_ERR_ACCESS", "permission denied"),
    (Class::Amode, "MPI_ERR_AMODE", "invalid file access mode"),
    (Class::Assert, "MPI_ERR_ASSERT", "invalid assertion"),
    (Class::BadFile, "MPI_ERR_BAD_FILE", "invalid file name"),
    (Class::Base, "MPI_ERR_BASE", "invalid base address"),
    (
        Class::Conversion,
        "MPI_ERR_CONVERSION",
        "data conversion failed",
    ),
    (Class::Disp, "MPI_ERR_DISP", "invalid displacement"),
    (
        Class::DupDatarep,
        "MPI_ERR_DUP_DATAREP",
        "data representation already defined",
    ),
    (Class::FileExists, "MPI_ERR_FILE_EXISTS", "file exists"),
    (Class::FileInUse, "MPI_ERR_FILE_IN_USE", "file in use"),
    (Class::File, "MPI_ERR_FILE", "invalid file handle"),
    (
        Class::InfoKey,
        "MPI_ERR_INFO_KEY",
        "info key too long or empty",
    ),
    (Class::InfoNokey, "MPI_ERR_INFO_NOKEY", "no such info key"),
    (
        Class::InfoValue,
        "MPI_ERR_INFO_VALUE",
        "info value too long or empty",
    ),
    (Class::Info, "MPI_ERR_INFO", "invalid info object"),
    (Class::Io, "MPI_ERR_IO", "input/output error"),
    (Class::Keyval, "MPI_ERR_KEYVAL", "invalid attribute key"),
    (Class::Locktype, "MPI_ERR_LOCKTYPE", "invalid lock type"),
    (Class::Name, "MPI_ERR_NAME", "invalid service name"),
    (Class::NoMem, "MPI_ERR_NO_MEM", "out of memory"),
    (
        Class::NotSame,
        "MPI_ERR_NOT_SAME",
        "processes passed different arguments",
    ),
    (Class::NoSpace, "MPI_ERR_NO_SPACE", "no space left"),
    (Class::NoSuchFile, "MPI_ERR_NO_SUCH_FILE", "no such file"),
    (Class::Port, "MPI_ERR_PORT", "invalid port"),
    (Class::Quota, "MPI_ERR_QUOTA", "quota exceeded"),
    (Class::ReadOnly, "MPI_ERR_READ_ONLY", "read-only file"),
    (
        Class::RmaConflict,
        "MPI_ERR_RMA_CONFLICT",
        "conflicting one-sided accesses",
    ),
    (
        Class::RmaSync,
        "MPI_ERR_RMA_SYNC",
        "wrong one-sided synchronization",
    ),
    (Class::Service, "MPI_ERR_SERVICE", "invalid service"),
    (Class::Size, "MPI_ERR_SIZE", "invalid size"),
    (Class::Spawn, "MPI_ERR_SPAWN", "spawn failed"),
    (
        Class::UnsupportedDatarep,
        "MPI_ERR_UNSUPPORTED_DATAREP",
        "unsupported data representation",
    ),
    (
        Class::UnsupportedOperation,
        "MPI_ERR_UNSUPPORTED_OPERATION",
        "unsupported operation",
    ),
    (Class::Win, "MPI_ERR_WIN", "invalid window"),
    (
        Class::RmaRange,
        "MPI_ERR_RMA_RANGE",
        "target memory out of the window",
    ),
    (
        Class::RmaAttach,
        "MPI_ERR_RMA_ATTACH",
        "memory cannot be attached",
    ),
    (
        Class::RmaShared,
        "MPI_ERR_RMA_SHARED",
        "memory cannot be shared",
    ),
    (
        Class::RmaFlavor,
        "MPI_ERR_RMA_FLAVOR",
        "wrong window flavor",
    ),
];

impl Class {
    /// The class's name in `mpi.h`.
    pub fn name(self) -> &'static str {
        CLASSES[self as usize - 1].1
    }

    /// The class numbered `n`, if it is one of MPI's.
    pub fn from_code(n: i32) -> Option<Class> {
        let i = usize::try_from(n).ok()?.checked_sub(1)?;
        CLASSES.get(i).map(|c| c.0)
    }
}

/// The text `MPI_Error_string` gives for an error code of MPI's own.
pub fn describe(code: i32) -> String {
    if code == 0 {
        return "MPI_SUCCESS: no error".into();
    }
    match Class::from_code(code) {
        Some(c) => {
            let (_, name, text) = CLASSES[c as usize - 1];
            format!("{name}: {text}")
        }
        None => "unknown error code".into(),
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
                qcg::callsig::Disagree::Elements => Class::Type,
            },
            _ => Class::Other,
        };
        MpiError::new(class, e.to_string())
    }
}
