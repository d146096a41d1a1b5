//! Direct replay, the thesis's baseline: the decoded after-image is checked against the schema
//! and installed under the logged key, largest TID wins.

use super::{RedoRecord, ReplayError};
use crate::storage::{Key, Table};

/// Applies one redo record; see [`super::Replayer::apply`].
pub fn apply(table: &Table, record: RedoRecord<'_>) -> Result<bool, ReplayError> {
    if let Some(row) = &record.row {
        table.schema.check_row(row)?;
    }
    Ok(table.install_if_newer(&Key::from(record.key), record.row, record.tid))
}
