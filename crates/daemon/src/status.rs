//! The gRPC status of an engine job's error, shared by cuzk's service and the Filecoin proofs.

use cuzk_scheduler::JobError;
use tonic::Status;

/// The gRPC status of a job's error.
pub(crate) fn job_status(e: &JobError) -> Status {
    let m = e.to_string();
    match e {
        JobError::Cancelled => Status::cancelled(m),
        JobError::UnknownKey(_) => Status::not_found(m),
        JobError::NoDevice(_) => Status::failed_precondition(m),
        JobError::Witness(_) => Status::invalid_argument(m),
        JobError::Failed { .. } => Status::internal(m),
        JobError::OutOfDeviceMemory { .. } => Status::resource_exhausted(m),
        JobError::SelfCheck(_) => Status::data_loss(m),
        JobError::Shutdown => Status::unavailable(m),
    }
}
