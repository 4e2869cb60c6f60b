"""The PostgreSQL schema as numbered migrations, applied in order (like SQLite's: the same
tables and columns, and what only replicas need; ``tests/store/test_schema_parity.py``).

A migration is never edited once released: a change is a new entry at the end. Each one
runs in its own transaction with the ``schema_version`` bump, under an advisory lock, and
reads the version the lock's holder left behind (through a query, never the session's
catalog cache), so replicas starting together migrate once. A database written by a
newer evald is refused.

The hot tables (subtasks, tasks, runs) get aggressive autovacuum settings: every claim
and outcome rewrites a row, and the dead index entries they leave behind make the claim's
index scan grow with the table until vacuum removes them (bench/bench_pg_driver.py:
claim CPU per row grew with the table at PostgreSQL's default thresholds).
"""

import asyncpg

from evald_server.store._errors import StoreError

_HOT = (
    "autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000, "
    "autovacuum_analyze_scale_factor = 0.02, autovacuum_vacuum_cost_delay = 0"
)

# Version 1: the SQLite schema at its version 4, plus what several replicas need: the
# owner's claim token and lease on subtasks, the scorer's lease on tasks, membership.
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
        created_at DOUBLE PRECISION NOT NULL,
        size_bytes BIGINT NOT NULL DEFAULT 0,
        prompt_options TEXT,
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
    )""",
    f"""CREATE TABLE runs (
        run_id TEXT PRIMARY KEY,
        tenant TEXT NOT NULL,
        name TEXT NOT NULL,
        request_id TEXT,
        request_hash TEXT,
        spec TEXT NOT NULL,
        state TEXT NOT NULL,
        cancel_requested BOOLEAN NOT NULL DEFAULT FALSE,
        total INTEGER NOT NULL DEFAULT 0,
        pending INTEGER NOT NULL DEFAULT 0,
        running INTEGER NOT NULL DEFAULT 0,
        succeeded INTEGER NOT NULL DEFAULT 0,
        failed INTEGER NOT NULL DEFAULT 0,
        failed_permanent INTEGER NOT NULL DEFAULT 0,
        cancelled INTEGER NOT NULL DEFAULT 0,
        created_at DOUBLE PRECISION NOT NULL,
        started_at DOUBLE PRECISION,
        finished_at DOUBLE PRECISION,
        last_seq BIGINT NOT NULL DEFAULT 0,
        terminal_seq BIGINT
    ) WITH ({_HOT})""",
    # Idempotent CreateRun across replicas: the constraint, not a read, decides.
    """CREATE UNIQUE INDEX runs_request ON runs (tenant, request_id)
        WHERE request_id IS NOT NULL""",
    "CREATE INDEX runs_created ON runs (tenant, created_at, run_id)",
    "CREATE INDEX runs_live ON runs (tenant) WHERE state IN ('pending', 'running')",
    f"""CREATE TABLE tasks (
        row_id BIGSERIAL UNIQUE,
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
        started_at DOUBLE PRECISION,
        finished_at DOUBLE PRECISION,
        result_status TEXT,
        scorer TEXT,
        UNIQUE (run_id, ordinal)
    ) WITH ({_HOT})""",
    "CREATE INDEX tasks_of_run ON tasks (run_id)",
    "CREATE INDEX tasks_scoring ON tasks (row_id) WHERE state = 'scoring'",
    f"""CREATE TABLE subtasks (
        row_id BIGSERIAL PRIMARY KEY,
        run_id TEXT NOT NULL,
        task_id TEXT NOT NULL REFERENCES tasks (task_id),
        model_id TEXT NOT NULL,
        record_idx INTEGER NOT NULL,
        repeat_index INTEGER NOT NULL,
        state TEXT NOT NULL,
        attempt INTEGER NOT NULL DEFAULT 0,
        requests INTEGER NOT NULL DEFAULT 0,
        rate_limited INTEGER NOT NULL DEFAULT 0,
        next_attempt_at DOUBLE PRECISION,
        owner TEXT,
        claim_token TEXT,
        lease_until DOUBLE PRECISION,
        output TEXT,
        prompt_tokens INTEGER,
        completion_tokens INTEGER,
        latency_s DOUBLE PRECISION,
        ttft_s DOUBLE PRECISION,
        call_time_s DOUBLE PRECISION NOT NULL DEFAULT 0,
        first_error TEXT,
        last_error TEXT,
        updated_at DOUBLE PRECISION NOT NULL,
        scores TEXT,
        correct BOOLEAN,
        finish_reason TEXT,
        top_logprobs TEXT
    ) WITH ({_HOT})""",
    "CREATE INDEX subtasks_of_run ON subtasks (run_id, row_id)",
    "CREATE INDEX subtasks_of_task ON subtasks (task_id, row_id)",
    # Keyset claims walk this partial index in row order (bench_pg_driver: a claim that
    # sorts by row_id over an index without it plans a sort of every pending row).
    """CREATE INDEX subtasks_pending ON subtasks (run_id, model_id, row_id)
        WHERE state = 'pending'""",
    """CREATE INDEX subtasks_waiting ON subtasks (run_id, model_id, next_attempt_at)
        WHERE state = 'failed'""",
    # The reaper's and the restart's path: running rows by owner.
    "CREATE INDEX subtasks_running ON subtasks (owner) WHERE state = 'running'",
    """CREATE TABLE events (
        run_id TEXT NOT NULL,
        seq BIGINT NOT NULL,
        time DOUBLE PRECISION NOT NULL,
        kind TEXT NOT NULL,
        payload TEXT NOT NULL,
        PRIMARY KEY (run_id, seq)
    )""",
    """CREATE TABLE results (
        task_id TEXT PRIMARY KEY REFERENCES tasks (task_id),
        run_id TEXT NOT NULL,
        result TEXT NOT NULL
    )""",
    "CREATE INDEX results_run ON results (run_id)",
    # Membership: one row per replica, renewed by its heartbeat. A replica whose
    # lease_until (database clock) has passed is dead; its running subtasks and its
    # scoring jobs may be taken back by any other replica. ``capacity``: the slots of
    # each model's global limit the replica may be using (JSON model id -> slots).
    """CREATE TABLE replicas (
        replica_id TEXT PRIMARY KEY,
        owner TEXT NOT NULL,
        started_at DOUBLE PRECISION NOT NULL,
        heartbeat_at DOUBLE PRECISION NOT NULL,
        lease_until DOUBLE PRECISION NOT NULL,
        capacity TEXT NOT NULL DEFAULT '{}'
    )""",
)

# Version 2: SQLite's versions 5 and 6 — rate control and cost (a subtask's failed
# attempts per retry class, its cost; a run's cost totals and why the server cancelled
# it) and model-graded scoring with the response cache (a judge phase of subtask rows
# grading the answer in ``judged_row_id``, a task's judge model and rounds, the cache).
_V2 = (
    "ALTER TABLE subtasks ADD COLUMN failed_rate_limited INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE subtasks ADD COLUMN failed_timeout INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE subtasks ADD COLUMN failed_transient INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE subtasks ADD COLUMN cost_picousd BIGINT",
    "ALTER TABLE subtasks ADD COLUMN cost_tokens BIGINT",
    "ALTER TABLE subtasks ADD COLUMN cost_estimated BOOLEAN NOT NULL DEFAULT FALSE",
    "ALTER TABLE runs ADD COLUMN cost_picousd BIGINT NOT NULL DEFAULT 0",
    "ALTER TABLE runs ADD COLUMN cost_tokens BIGINT NOT NULL DEFAULT 0",
    "ALTER TABLE runs ADD COLUMN cost_estimated BOOLEAN NOT NULL DEFAULT FALSE",
    "ALTER TABLE runs ADD COLUMN cancel_reason TEXT",
    "ALTER TABLE subtasks ADD COLUMN phase INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE subtasks ADD COLUMN judged_row_id BIGINT",
    "ALTER TABLE subtasks ADD COLUMN judge_round INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE subtasks ADD COLUMN verdict DOUBLE PRECISION",
    "ALTER TABLE subtasks ADD COLUMN judgement TEXT",
    "ALTER TABLE subtasks ADD COLUMN cache_hit BOOLEAN NOT NULL DEFAULT FALSE",
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
        created_at DOUBLE PRECISION NOT NULL,
        used_at DOUBLE PRECISION NOT NULL,
        hits BIGINT NOT NULL DEFAULT 0,
        PRIMARY KEY (scope, key)
    )""",
    "CREATE INDEX response_cache_created ON response_cache (created_at)",
    "CREATE INDEX response_cache_used ON response_cache (used_at)",
)

# Version 3: SQLite's version 7 — an answer's flags of what its provider sent outside
# the bounds evald accepts (JSON list; NULL: none).
_V3 = ("ALTER TABLE subtasks ADD COLUMN answer_flags TEXT",)

# Version 4: SQLite's version 8 — a code sample's run in the sandbox (JSON; NULL: not
# run yet).
_V4 = ("ALTER TABLE subtasks ADD COLUMN execution TEXT",)

MIGRATIONS: tuple[tuple[str, ...], ...] = (_V1, _V2, _V3, _V4)
LATEST_VERSION = len(MIGRATIONS)

_MIGRATION_LOCK = 0x65766164  # "evad": one advisory lock id for every replica's migration

_VERSION_TABLE_EXISTS = (
    "SELECT EXISTS (SELECT FROM pg_catalog.pg_class c "
    "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
    "WHERE c.relname = 'schema_version' AND n.nspname = current_schema())"
)


async def schema_version(conn: asyncpg.Connection) -> int:
    """The schema version of ``conn``'s database (0 for an empty one)."""
    # A query on pg_class, not to_regclass(): to_regclass answers from this session's
    # catalog cache, which keeps "no such table" from before another replica's migration
    # committed (taking an advisory lock does not refresh it), so the replica that waited
    # for the lock would create the table again. A query sees every commit before it.
    exists = await conn.fetchval(_VERSION_TABLE_EXISTS)
    if not exists:
        return 0
    version = await conn.fetchval("SELECT version FROM schema_version")
    return 0 if version is None else int(version)


async def migrate(conn: asyncpg.Connection, target: int = LATEST_VERSION) -> int:
    """Bring the database up to ``target``; returns the version it had before."""
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", _MIGRATION_LOCK)
        before = await schema_version(conn)
    if before > LATEST_VERSION:
        raise StoreError(
            f"database schema version {before} is newer than this evald supports "
            f"({LATEST_VERSION}); upgrade evald"
        )
    for version in range(before + 1, target + 1):
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", _MIGRATION_LOCK)
            if await schema_version(conn) >= version:
                continue  # another replica migrated meanwhile
            if version == 1:
                await conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
                await conn.execute("INSERT INTO schema_version (version) VALUES (0)")
            for statement in MIGRATIONS[version - 1]:
                await conn.execute(statement)
            await conn.execute("UPDATE schema_version SET version = $1", version)
    return before
