//! Direct replay, the thesis's baseline: the decoded after-image is checked against the schema
//! and installed under the logged key, largest TID wins.

use super::{RedoRecord, ReplayError};
use crate::storage::{Key, Record, Table};

/// Applies one redo record; see [`super::Replayer::apply`].
pub fn apply(table: &Table, record: RedoRecord<'_>) -> Result<bool, ReplayError> {
    if let Some(row) = &record.row {
        table.schema.check_row(row)?;
    }
    Ok(table.install_if_newer(&Key::from(record.key), record.row, record.tid))
}

/// [`apply`] for a caller whose lookup of the key found `found` (value replay looks every key up
/// to skip obsolete records): the install writes to that record, or links a new one, without
/// looking the key up again ([`Table::install_if_newer_at`]), as compiled replay does.
pub fn apply_at(table: &Table, found: Option<&Record>, record: RedoRecord<'_>) -> Result<bool, ReplayError> {
    if let Some(row) = &record.row {
        table.schema.check_row(row)?;
    }
    Ok(table.install_if_newer_at(found, record.key, record.row, record.tid))
}
