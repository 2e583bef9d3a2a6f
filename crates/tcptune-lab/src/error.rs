//! Why a lab command failed: the one error type of every layer, below them all.

/// Why a lab command failed; each message is one sentence naming the input and what to do.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// A setting or option is wrong; the message names it and the fix.
    #[error("{0}")]
    Input(String),
    /// A host other than `client` or `server`.
    #[error("there is no host '{0}' in the lab; the hosts are client and server")]
    UnknownHost(String),
    /// `lab up` with a name a running lab has.
    #[error(
        "a lab named '{0}' is already running; pick another --name or remove it with \
         `tcptune lab down --name {0}`"
    )]
    NameInUse(String),
    /// No lab of that name.
    #[error("there is no lab named '{0}'; start one with `tcptune lab up --name {0}`")]
    NoSuchLab(String),
    /// The congestion control is not in this kernel.
    #[error(
        "congestion control '{cc}' is not available in this kernel (it has: {available}); \
         load its module (modprobe tcp_{cc}) or choose one of those"
    )]
    NoSuchCongestionControl {
        /// The algorithm asked for.
        cc: String,
        /// Those the kernel has (`net.ipv4.tcp_available_congestion_control`).
        available: String,
    },
    /// The machine could not do what the lab needs (a tool, a namespace, a device); the message
    /// says what and why.
    #[error("{0}")]
    Environment(String),
    /// SIGINT, SIGTERM or SIGHUP during setup; what was made is gone.
    #[error("interrupted by a signal; everything the lab had created was removed")]
    Interrupted,
    /// A lab command run without the privileges it needs (the command).
    #[error(
        "`tcptune {0}` needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN, to make namespaces and \
         links); run it with sudo"
    )]
    NeedsRoot(String),
}
