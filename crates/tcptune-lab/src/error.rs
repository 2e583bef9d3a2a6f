//! Why a lab command failed: the one error type of every layer, below them all.

/// Why a lab command failed; each message is one sentence naming the input and what to do.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    #[error("{0}")]
    Input(String),
    #[error("there is no host '{0}' in the lab; the hosts are client and server")]
    UnknownHost(String),
    #[error(
        "a lab named '{0}' is already running; pick another --name or remove it with \
         `tcptune lab down --name {0}`"
    )]
    NameInUse(String),
    #[error("there is no lab named '{0}'; start one with `tcptune lab up --name {0}`")]
    NoSuchLab(String),
    #[error(
        "congestion control '{cc}' is not available in this kernel (it has: {available}); \
         load its module (modprobe tcp_{cc}) or choose one of those"
    )]
    NoSuchCongestionControl { cc: String, available: String },
    #[error("{0}")]
    Environment(String),
    #[error("interrupted by a signal; everything the lab had created was removed")]
    Interrupted,
    #[error(
        "`tcptune {0}` needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN, to make namespaces and \
         links); run it with sudo"
    )]
    NeedsRoot(String),
}
