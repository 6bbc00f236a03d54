export { main, type Io } from './program.js';
export { ExitCode, CliError } from './exit-codes.js';
export { readStatus, type Status, type StatusSource, type LeaseStatus, type ResourceStatus, type JobStatus, type ElectionRecord, type Refusal } from './status/read-status.js';
export { createStatusHandler, type StatusHandlerOptions } from './status/status-handler.js';
export { runDoctor, type DoctorOptions, type DoctorReport } from './doctor/run-doctor.js';
export type { CheckResult, Verdict } from './doctor/check.js';
export type { RedisTarget, HostPort } from './connections.js';
