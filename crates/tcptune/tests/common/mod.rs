//! Helpers shared by the CLI tests.

pub mod lab;
pub mod page;
pub mod serving;
