"""The SQLite schema as a list of numbered migrations, applied in order (the same
tables and columns as PostgreSQL's, less what only replicas need).

A migration is never edited once released: a change is a new entry at the end. Each
one runs in its own transaction together with the ``schema_version`` bump, so a crash
mid-migration leaves the previous version intact. A database written by a newer evald
(a version above ``LATEST_VERSION``) is refused rather than misread.
"""

import sqlite3

from evald_server.store._errors import StoreError

# Version 1: datasets, runs, tasks, subtasks and the per-run event log.
_V1 = (
    """CREATE TABLE datasets (
        dataset_id TEXT PRIMARY KEY,
        tenant TEXT NOT NULL,
        name TEXT NOT NULL,
        benchmark_version TEXT NOT NULL,
        task_type TEXT NOT NULL,
        sha256 TEXT NOT NULL,
        record_count INTEGER NOT NULL,
        prompt_template TEXT,
        request_id TEXT,
        request_hash TEXT,
        created_at REAL NOT NULL,
        UNIQUE (tenant, name, benchmark_version)
    )""",
    """CREATE UNIQUE INDEX datasets_request ON datasets (tenant, request_id)
        WHERE request_id IS NOT NULL""",
    "CREATE INDEX datasets_created ON datasets (tenant, created_at, dataset_id)",
    """CREATE TABLE dataset_records (
        dataset_id TEXT NOT NULL REFERENCES datasets (dataset_id),
        idx INTEGER NOT NULL,
        record_id TEXT NOT NULL,
        fields TEXT NOT NULL,
        PRIMARY KEY (dataset_id, idx)
    ) WITHOUT ROWID""",
    """CREATE TABLE runs (
        run_id TEXT PRIMARY KEY,
        tenant TEXT NOT NULL,
        name TEXT NOT NULL,
        request_id TEXT,
        request_hash TEXT,
        spec TEXT NOT NULL,
        state TEXT NOT NULL,
        cancel_requested INTEGER NOT NULL DEFAULT 0,
        total INTEGER NOT NULL DEFAULT 0,
        pending INTEGER NOT NULL DEFAULT 0,
        running INTEGER NOT NULL DEFAULT 0,
        succeeded INTEGER NOT NULL DEFAULT 0,
        failed INTEGER NOT NULL DEFAULT 0,
        failed_permanent INTEGER NOT NULL DEFAULT 0,
        cancelled INTEGER NOT NULL DEFAULT 0,
        created_at REAL NOT NULL,
        started_at REAL,
        finished_at REAL,
        last_seq INTEGER NOT NULL DEFAULT 0,
        terminal_seq INTEGER
    )""",
    """CREATE UNIQUE INDEX runs_request ON runs (tenant, request_id)
        WHERE request_id IS NOT NULL""",
    "CREATE INDEX runs_created ON runs (tenant, created_at, run_id)",
    "CREATE INDEX runs_state ON runs (state)",
    """CREATE TABLE tasks (
        task_id TEXT PRIMARY KEY,
        run_id TEXT NOT NULL REFERENCES runs (run_id),
        ordinal INTEGER NOT NULL,
        model_id TEXT NOT NULL,
        model TEXT NOT NULL,
        dataset_id TEXT NOT NULL REFERENCES datasets (dataset_id),
        state TEXT NOT NULL,
        total INTEGER NOT NULL DEFAULT 0,
        pending INTEGER NOT NULL DEFAULT 0,
        running INTEGER NOT NULL DEFAULT 0,
        succeeded INTEGER NOT NULL DEFAULT 0,
        failed INTEGER NOT NULL DEFAULT 0,
        failed_permanent INTEGER NOT NULL DEFAULT 0,
        cancelled INTEGER NOT NULL DEFAULT 0,
        started_at REAL,
        finished_at REAL,
        result_status TEXT,
        UNIQUE (run_id, ordinal)
    )""",
    "CREATE INDEX tasks_state ON tasks (state)",
    """CREATE TABLE subtasks (
        row_id INTEGER PRIMARY KEY,
        run_id TEXT NOT NULL,
        task_id TEXT NOT NULL REFERENCES tasks (task_id),
        model_id TEXT NOT NULL,
        record_idx INTEGER NOT NULL,
        repeat_index INTEGER NOT NULL,
        state TEXT NOT NULL,
        attempt INTEGER NOT NULL DEFAULT 0,
        requests INTEGER NOT NULL DEFAULT 0,
        rate_limited INTEGER NOT NULL DEFAULT 0,
        next_attempt_at REAL,
        owner TEXT,
        output TEXT,
        prompt_tokens INTEGER,
        completion_tokens INTEGER,
        latency_s REAL,
        ttft_s REAL,
        call_time_s REAL NOT NULL DEFAULT 0,
        first_error TEXT,
        last_error TEXT,
        updated_at REAL NOT NULL
    )""",
    # The claim path: ready work of one (run, model); the implicit trailing row_id
    # is the run's order (insertion order: task ordinal, record, repeat).
    "CREATE INDEX subtasks_ready ON subtasks (run_id, model_id, state)",
    # Scoring, ListSamples and recounts: one task's subtasks by state.
    "CREATE INDEX subtasks_task ON subtasks (task_id, state)",
    """CREATE TABLE events (
        run_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        time REAL NOT NULL,
        kind TEXT NOT NULL,
        payload TEXT NOT NULL,
        PRIMARY KEY (run_id, seq)
    ) WITHOUT ROWID""",
)

# Version 2: per-sample scores for ListSamples, stored task results, upload sizes.
_V2 = (
    "ALTER TABLE subtasks ADD COLUMN scores TEXT",
    "ALTER TABLE subtasks ADD COLUMN correct INTEGER",
    "ALTER TABLE datasets ADD COLUMN size_bytes INTEGER NOT NULL DEFAULT 0",
    """CREATE TABLE results (
        task_id TEXT PRIMARY KEY REFERENCES tasks (task_id),
        run_id TEXT NOT NULL,
        result TEXT NOT NULL
    )""",
    "CREATE INDEX results_run ON results (run_id)",
)

# Version 3: indexes that a subtask's state changes touch as little as possible. The
# version-1 indexes keyed on state moved an index entry at every claim and every outcome
# (two indexes, delete + insert each); now a claim removes one entry from a partial
# index of pending work and an outcome touches no index at all, unless it schedules a
# retry (the partial index of waiting retries).
_V3 = (
    "DROP INDEX subtasks_ready",
    "DROP INDEX subtasks_task",
    "CREATE INDEX subtasks_of_run ON subtasks (run_id)",
    "CREATE INDEX subtasks_of_task ON subtasks (task_id)",
    "CREATE INDEX subtasks_pending ON subtasks (run_id, model_id) WHERE state = 'pending'",
    """CREATE INDEX subtasks_waiting ON subtasks (run_id, model_id, next_attempt_at)
        WHERE state = 'failed'""",
)

# Version 4: why generation stopped (stop / length / content_filter / tool_calls /
# unknown), stored with each successful answer; a dataset's chat prompt options (system
# message, k-shot examples); a subtask's first-token log-probabilities (JSON
# [[token, logprob], ...]) where a run scores multiple choice by them.
_V4 = (
    "ALTER TABLE subtasks ADD COLUMN finish_reason TEXT",
    "ALTER TABLE datasets ADD COLUMN prompt_options TEXT",
    "ALTER TABLE subtasks ADD COLUMN top_logprobs TEXT",
)

# Version 5 (rate control and cost): a subtask's failed attempts per retry class since
# it was last queued (each class may have its own retry budget), and what its
# successful call cost (tokens counted, pico-USD when the model has a price, whether the
# tokens were estimated); a run's running totals of the same, moved in the outcome's
# transaction, so a budget survives a restart; why the server cancelled a run.
_V5 = (
    "ALTER TABLE subtasks ADD COLUMN failed_rate_limited INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE subtasks ADD COLUMN failed_timeout INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE subtasks ADD COLUMN failed_transient INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE subtasks ADD COLUMN cost_picousd INTEGER",
    "ALTER TABLE subtasks ADD COLUMN cost_tokens INTEGER",
    "ALTER TABLE subtasks ADD COLUMN cost_estimated INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE runs ADD COLUMN cost_picousd INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE runs ADD COLUMN cost_tokens INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE runs ADD COLUMN cost_estimated INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE runs ADD COLUMN cancel_reason TEXT",
)

# Version 6: model-graded scoring and the response cache. A judge subtask is a subtasks
# row of phase 1 on the judge model, grading the answer in row ``judged_row_id`` in
# round ``judge_round`` (its parsed score in ``verdict``); a judged answer's aggregated
# verdict is written to ``judgement`` (JSON) when its task is scored. A task names its
# judge model and rounds. ``cache_hit``: answered from the response cache, whose
# entries are keyed by (scope, key), scope being a tenant or a model's shared scope.
_V6 = (
    "ALTER TABLE subtasks ADD COLUMN phase INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE subtasks ADD COLUMN judged_row_id INTEGER",
    "ALTER TABLE subtasks ADD COLUMN judge_round INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE subtasks ADD COLUMN verdict REAL",
    "ALTER TABLE subtasks ADD COLUMN judgement TEXT",
    "ALTER TABLE subtasks ADD COLUMN cache_hit INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE tasks ADD COLUMN judge_model_id TEXT",
    "ALTER TABLE tasks ADD COLUMN judge_rounds INTEGER NOT NULL DEFAULT 0",
    """CREATE INDEX subtasks_judged ON subtasks (judged_row_id, judge_round)
        WHERE judged_row_id IS NOT NULL""",
    """CREATE TABLE response_cache (
        scope TEXT NOT NULL,
        key TEXT NOT NULL,
        output TEXT NOT NULL,
        finish_reason TEXT NOT NULL,
        prompt_tokens INTEGER,
        completion_tokens INTEGER,
        created_at REAL NOT NULL,
        used_at REAL NOT NULL,
        hits INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (scope, key)
    ) WITHOUT ROWID""",
    "CREATE INDEX response_cache_created ON response_cache (created_at)",
    "CREATE INDEX response_cache_used ON response_cache (used_at)",
)

# Version 7: what a provider sent outside the bounds evald accepts (JSON list of flags,
# ``usage_invalid``, ``logprobs_invalid``, ...), stored with the answer; NULL: none.
_V7 = ("ALTER TABLE subtasks ADD COLUMN answer_flags TEXT",)

# Version 8: a code task's sample's run in the sandbox (JSON: verdict, reason, per-test
# outcomes, ...), written when it has run: a resumed task runs only those without it.
_V8 = ("ALTER TABLE subtasks ADD COLUMN execution TEXT",)

MIGRATIONS: tuple[tuple[str, ...], ...] = (_V1, _V2, _V3, _V4, _V5, _V6, _V7, _V8)
LATEST_VERSION = len(MIGRATIONS)


def schema_version(conn: sqlite3.Connection) -> int:
    """The schema version of ``conn``'s database (0 for an empty database)."""
    exists = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'"
    ).fetchone()
    if exists is None:
        return 0
    row = conn.execute("SELECT version FROM schema_version").fetchone()
    return 0 if row is None else int(row[0])


def migrate(conn: sqlite3.Connection, target: int = LATEST_VERSION) -> int:
    """Bring ``conn``'s database up to ``target``; returns the version it had before.

    ``conn`` must be in autocommit mode (``isolation_level=None``): each migration
    opens its own ``BEGIN IMMEDIATE`` transaction.
    """
    before = schema_version(conn)
    if before > LATEST_VERSION:
        raise StoreError(
            f"database schema version {before} is newer than this evald supports "
            f"({LATEST_VERSION}); upgrade evald"
        )
    for version in range(before + 1, target + 1):
        conn.execute("BEGIN IMMEDIATE")
        try:
            if version == 1:
                conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
                conn.execute("INSERT INTO schema_version (version) VALUES (0)")
            for statement in MIGRATIONS[version - 1]:
                conn.execute(statement)
            conn.execute("UPDATE schema_version SET version = ?", (version,))
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
    return before
