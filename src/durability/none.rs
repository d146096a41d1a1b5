//! Scheme `none`: nothing is logged; every transaction is durable (acknowledgeable) at once.
//! This is Silo without persistence ("MemSilo" in SiloR §6), the baseline every scheme is compared
//! against.

use super::{CommitTicket, CommitView, DurabilityError, DurabilityTicket, LogScheme, ViewNeeds, WorkerLog};

/// The `none` scheme.
#[derive(Debug, Default)]
pub struct NoLogging;

struct NoWorkerLog;

impl LogScheme for NoLogging {
    fn name(&self) -> &'static str {
        "none"
    }

    fn worker(&self, _worker_id: usize) -> Box<dyn WorkerLog> {
        Box::new(NoWorkerLog)
    }

    fn is_durable(&self, ticket: &DurabilityTicket) -> bool {
        matches!(ticket, DurabilityTicket::Immediate)
    }

    fn wait_durable(&self, ticket: &DurabilityTicket) -> Result<(), DurabilityError> {
        if self.is_durable(ticket) {
            Ok(())
        } else {
            Err(DurabilityError::Failed(format!("scheme none cannot make {ticket:?} durable")))
        }
    }

    fn wait_committed_durable(&self) -> Result<(), DurabilityError> {
        Ok(())
    }

    fn shutdown(&self) -> Result<(), DurabilityError> {
        Ok(())
    }
}

impl WorkerLog for NoWorkerLog {
    fn view_needs(&self) -> ViewNeeds {
        ViewNeeds::NOTHING
    }

    fn serialization_point(&mut self, _epoch: u64) -> u64 {
        0
    }

    fn abandon(&mut self, _commit_seq: u64) {}

    fn log_commit(&mut self, _view: &CommitView<'_>) -> Result<CommitTicket, DurabilityError> {
        Ok(CommitTicket { last_writer: 0, durability: DurabilityTicket::Immediate })
    }
}
