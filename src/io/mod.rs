//! All file I/O goes through one trait (being written).
