-- A path job names its witness file by the file's own checksum (the BLAKE3 of its contents
-- that ends every cuzk file, which the engine verifies in the pass that reads the file), so a
-- host compares 32 bytes when it starts the job instead of hashing the whole file.
ALTER TABLE cuzk_jobs ADD COLUMN witness_checksum bytea
    CHECK (witness_checksum IS NULL OR length(witness_checksum) = 32);
ALTER TABLE cuzk_jobs DROP CONSTRAINT cuzk_jobs_check;
-- Rows of older clients (a whole-file SHA-256) stay valid rows; hosts refuse to run them.
ALTER TABLE cuzk_jobs ADD CONSTRAINT cuzk_jobs_witness CHECK (
    (witness_inline IS NULL) =
    (witness_path IS NOT NULL AND (witness_checksum IS NOT NULL OR witness_sha256 IS NOT NULL)));
UPDATE cuzk_jobs SET state = 'failed', finished_at = now(),
    last_error = 'queued by an older cuzk with a SHA-256 witness digest; submit it again'
WHERE state = 'queued' AND witness_path IS NOT NULL AND witness_checksum IS NULL;

-- Hosts LISTEN on cuzk_jobs and claim at once when jobs are queued (submitted, or back in the
-- queue after a failure or an expired lease); their poll is the fallback.
CREATE FUNCTION cuzk_jobs_queued_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('cuzk_jobs', '');
    RETURN NULL;
END $$;
CREATE TRIGGER cuzk_jobs_submitted AFTER INSERT ON cuzk_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION cuzk_jobs_queued_notify();
CREATE TRIGGER cuzk_jobs_requeued AFTER UPDATE OF state ON cuzk_jobs
    FOR EACH ROW WHEN (NEW.state = 'queued' AND OLD.state <> 'queued')
    EXECUTE FUNCTION cuzk_jobs_queued_notify();
