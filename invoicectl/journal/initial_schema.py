"""The journal's first schema, migration m001's (``migrations.py``): shipped, never edited."""

INITIAL_SCHEMA = """
-- The exact bytes of every revision, once per sha256, as read.
CREATE TABLE blobs (
    sha256 TEXT PRIMARY KEY,
    size INTEGER NOT NULL,
    data BLOB NOT NULL
);

-- What each file looked like (lstat) when its bytes were last hashed. A file whose
-- size, mtime, ctime and inode are unchanged since then is not read again; ctime moves
-- on every write and cannot be set back, so a match means the content is the same.
CREATE TABLE file_stats (
    path TEXT PRIMARY KEY,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    ctime_ns INTEGER NOT NULL,
    inode INTEGER NOT NULL,
    sha256 TEXT NOT NULL,
    checked_at_ns INTEGER NOT NULL
);

-- One row per invoice ID; mirrors the facts of its current revision.
CREATE TABLE invoices (
    invoice_id TEXT PRIMARY KEY,
    document_type TEXT NOT NULL,
    receiver_scheme TEXT,
    receiver_id TEXT,
    sender_endpoint TEXT,
    issue_date TEXT,
    currency TEXT,
    payable_amount TEXT,
    current_sha256 TEXT NOT NULL,   -- the newest content seen for this ID
    source_path TEXT NOT NULL,
    state TEXT NOT NULL,            -- pending invalid accepted rejected key_reused unknown amended
    reason TEXT,
    key_version INTEGER NOT NULL DEFAULT 1,
    idempotency_key TEXT,           -- committed before the first request that carries it
    key_sha256 TEXT,                -- the content that key carries; never another under it
    key_first_used_at TEXT,         -- start of the key's 24-hour window
    state_before_amend TEXT,        -- restored if the file goes back to what was sent
    transaction_id TEXT,
    existing_transaction_id TEXT,
    remote_status TEXT,
    remote_checked_at TEXT,
    ingested_at TEXT NOT NULL,      -- when the content now to be sent was first seen
    accepted_at TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX invoices_state ON invoices(state);

-- Every distinct content ever seen under an invoice ID.
CREATE TABLE revisions (
    id INTEGER PRIMARY KEY,
    invoice_id TEXT NOT NULL REFERENCES invoices(invoice_id),
    sha256 TEXT NOT NULL REFERENCES blobs(sha256),
    size INTEGER NOT NULL,
    source_path TEXT NOT NULL,
    facts TEXT NOT NULL,            -- JSON of what ubl.parse_document extracted
    first_seen TEXT NOT NULL,
    UNIQUE (invoice_id, sha256)
);
CREATE INDEX revisions_sha256 ON revisions(sha256);

-- Files that yield no invoice ID, kept by path so nothing is dropped silently.
CREATE TABLE unidentified_files (
    path TEXT PRIMARY KEY,
    sha256 TEXT,
    reason TEXT NOT NULL,
    first_seen TEXT NOT NULL,
    updated_at TEXT NOT NULL
);

-- Who ran what, when, with which options, and how it ended.
CREATE TABLE runs (
    id INTEGER PRIMARY KEY,
    command TEXT NOT NULL,
    options TEXT NOT NULL,          -- JSON, never a secret
    base_url TEXT,
    key_fingerprint TEXT,
    pid INTEGER NOT NULL,
    host TEXT NOT NULL,
    started_at TEXT NOT NULL,
    finished_at TEXT,
    exit_code INTEGER,
    summary TEXT                    -- JSON
);

-- One row per HTTP request: written before it leaves, completed when it is answered.
CREATE TABLE attempts (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL REFERENCES runs(id),
    invoice_id TEXT NOT NULL REFERENCES invoices(invoice_id),
    revision_sha256 TEXT NOT NULL,
    idempotency_key TEXT NOT NULL,
    body_sha256 TEXT NOT NULL,
    started_at TEXT NOT NULL,
    finished_at TEXT,
    outcome TEXT,                   -- NULL: no answer recorded (in flight, or the process died)
    http_status INTEGER,
    error_code TEXT,
    message TEXT,
    transaction_id TEXT,
    existing_transaction_id TEXT,
    retry_after REAL,
    request_id TEXT,
    raw_body TEXT,
    duration REAL
);
CREATE INDEX attempts_invoice ON attempts(invoice_id);
CREATE INDEX attempts_open ON attempts(outcome) WHERE outcome IS NULL;

-- What the journal sends to. A single row.
CREATE TABLE environment (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    base_url TEXT NOT NULL,
    bound_at TEXT NOT NULL,
    bound_by_run INTEGER
);

-- Operator decisions and state changes worth an audit trail.
CREATE TABLE events (
    id INTEGER PRIMARY KEY,
    invoice_id TEXT,
    run_id INTEGER,
    at TEXT NOT NULL,
    kind TEXT NOT NULL,
    detail TEXT
);
CREATE INDEX events_invoice ON events(invoice_id);
"""

# m014's tables (``migrations.m014_workers_and_claims`` says what they are for).
WORKER_SCHEMA = """
CREATE TABLE workers (
    id INTEGER PRIMARY KEY,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    run_id INTEGER,
    lease_until REAL NOT NULL
);
CREATE TABLE claims (
    invoice_id TEXT PRIMARY KEY,
    worker_id INTEGER NOT NULL
);
CREATE INDEX claims_worker ON claims(worker_id);
CREATE TABLE rate_starts (
    account TEXT NOT NULL,
    slot REAL NOT NULL
);
CREATE INDEX rate_starts_account ON rate_starts(account, slot);
"""
