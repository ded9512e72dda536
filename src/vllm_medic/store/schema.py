"""The history tables (SQLAlchemy Core, portable across SQLite and PostgreSQL).

JSON is kept in TEXT columns rather than a dialect JSON type so the same rows read back identically
on every backend; timestamps are ISO-8601 UTC strings (lexically sortable) plus the heartbeat as a
float for staleness arithmetic.
"""

from __future__ import annotations

from sqlalchemy import Column, Float, ForeignKey, Integer, LargeBinary, MetaData, String, Table, Text

SCHEMA_VERSION = 1

metadata = MetaData()

runs = Table(
    "medic_runs",
    metadata,
    Column("run_id", String(64), primary_key=True),
    Column("kind", String(64), nullable=False, index=True),
    Column("target", Text, nullable=False, default=""),
    Column("status", String(32), nullable=False),  # running | finished | interrupted
    Column(
        "verdict", String(32), nullable=True
    ),  # pass | pass_unverified | fail | incomplete (None while running)
    Column("reason", Text, nullable=True),  # why interrupted / incomplete
    Column("started_at", String(40), nullable=False, index=True),
    Column("finished_at", String(40), nullable=True),
    Column("heartbeat", Float, nullable=False),  # epoch seconds of the last write
    Column("host", String(255), nullable=False, default=""),
    Column("pid", Integer, nullable=True),
    Column("pid_start", String(64), nullable=True),  # /proc/<pid>/stat start time, guards pid reuse
    Column("meta", Text, nullable=False, default="{}"),
    Column("tool_version", String(64), nullable=True),
)

steps = Table(
    "medic_steps",
    metadata,
    Column("run_id", String(64), ForeignKey("medic_runs.run_id", ondelete="CASCADE"), primary_key=True),
    Column("name", String(64), primary_key=True),
    Column("position", Integer, nullable=False),
    Column("status", String(32), nullable=False),
    Column("findings", Text, nullable=False, default="[]"),
    Column("data", Text, nullable=False, default="{}"),
    Column("updated_at", String(40), nullable=False),
)

events = Table(
    "medic_events",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column(
        "run_id", String(64), ForeignKey("medic_runs.run_id", ondelete="CASCADE"), nullable=False, index=True
    ),
    Column("kind", String(64), nullable=False),
    Column("at", String(40), nullable=False),
    Column("payload", Text, nullable=False, default="{}"),
)

# One row: the schema version that created the tables, so an older vllm-medic refuses (clearly) a history
# that a newer one has reshaped, instead of misreading it.
schema_info = Table(
    "medic_schema",
    metadata,
    Column("version", Integer, primary_key=True),
)

attachments = Table(
    "medic_attachments",
    metadata,
    Column("run_id", String(64), ForeignKey("medic_runs.run_id", ondelete="CASCADE"), primary_key=True),
    Column("name", String(255), primary_key=True),
    Column("media_type", String(128), nullable=False),
    Column("size", Integer, nullable=False),
    Column("content", LargeBinary, nullable=False),
)
