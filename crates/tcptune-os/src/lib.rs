//! The one OS layer. Every `unsafe` block of the workspace lives here, behind safe functions
//! whose contracts are checked at this boundary; every other crate is `#![forbid(unsafe_code)]`.
//! What is here is thin: a syscall, its argument checks and its error, nothing that decides.

pub mod sysctl;
