-- The cuzk job queue. One row per job; a host claims rows with FOR UPDATE SKIP LOCKED,
-- renews its lease by heartbeat, and writes the proof in the statement that marks it done.
CREATE TABLE cuzk_jobs (
    id               bigserial PRIMARY KEY,
    -- Makes resubmission idempotent: a second submit with the same id answers the first job.
    request_id       text UNIQUE,
    key_id           text NOT NULL,
    -- hex SHA-256 of the verifying key; a host claims only jobs of the keys it holds.
    key_digest       text NOT NULL,
    -- 0 low, 1 normal, 2 high; FIFO (by id) within a level.
    priority         smallint NOT NULL DEFAULT 1 CHECK (priority BETWEEN 0 AND 2),
    -- Either a path on storage every host reads, with the file's SHA-256, or the bytes.
    witness_path     text,
    witness_sha256   bytea,
    witness_inline   bytea,
    state            text NOT NULL DEFAULT 'queued'
                     CHECK (state IN ('queued', 'running', 'done', 'failed', 'cancelled')),
    -- Claims so far; a lease is (owner, attempt), so a stale host cannot write a result.
    attempt          integer NOT NULL DEFAULT 0,
    -- Failed runs and expired leases; at max_failures the job fails for good.
    failures         integer NOT NULL DEFAULT 0,
    max_failures     integer NOT NULL DEFAULT 3 CHECK (max_failures >= 1),
    owner            text,
    lease_until      timestamptz,
    cancel_requested boolean NOT NULL DEFAULT false,
    last_error       text,
    proof            bytea,
    public_inputs    bytea,
    timings          jsonb,
    done_by          text,
    submitted_at     timestamptz NOT NULL DEFAULT now(),
    claimed_at       timestamptz,
    finished_at      timestamptz,
    CHECK ((witness_inline IS NULL) = (witness_path IS NOT NULL AND witness_sha256 IS NOT NULL))
);

CREATE INDEX cuzk_jobs_queued ON cuzk_jobs (priority DESC, id) WHERE state = 'queued';
CREATE INDEX cuzk_jobs_leases ON cuzk_jobs (lease_until) WHERE state = 'running';

-- Every claim ever made: (job, attempt) is unique, so a job claimed twice at once cannot be.
CREATE TABLE cuzk_claims (
    job_id     bigint NOT NULL REFERENCES cuzk_jobs (id) ON DELETE CASCADE,
    attempt    integer NOT NULL,
    owner      text NOT NULL,
    claimed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job_id, attempt)
);

-- One row per host, written by its heartbeat.
CREATE TABLE cuzk_hosts (
    host      text PRIMARY KEY,
    owner     text NOT NULL,
    last_seen timestamptz NOT NULL,
    capacity  integer NOT NULL,
    running   integer NOT NULL,
    keys      text[] NOT NULL
);
