//! Command handlers, one file per family.

pub mod admin;
pub mod functions;
pub mod keys;
pub mod strings;
