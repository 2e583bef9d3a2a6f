//! Helpers shared by the CLI tests.

pub mod lab;
