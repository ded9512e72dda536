"""The run history: every acceptance run written incrementally, so a crash, `kill -9` or Ctrl-C keeps what
was measured.

Each write is its own committed transaction. A run left ``running`` by a writer that is gone (its pid on
this host no longer exists, or a remote writer has been silent for ``STALE_AFTER_S``) reads back as
``interrupted`` with verdict ``incomplete``. Everything is redacted (``vllm_medic.redact``) before it is
stored. Any SQLAlchemy URL works; the default is embedded SQLite in the user's data directory.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import wraps
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, and_, create_engine, event, func, insert, select, update
from sqlalchemy.engine import make_url
from sqlalchemy.exc import (
    ArgumentError,
    IntegrityError,
    NoSuchModuleError,
    OperationalError,
    ProgrammingError,
    SQLAlchemyError,
)

from vllm_medic import __version__
from vllm_medic.errors import ToolError, UsageError
from vllm_medic.redact import redact_obj, redact_text
from vllm_medic.store import schema
from vllm_medic.store.liveness import process_start_token, this_host, writer_gone
from vllm_medic.store.step_row import StepRow

STEP_STATUSES = ("pass", "warn", "fail", "skipped", "running")
VERDICTS = ("pass", "pass_unverified", "fail", "incomplete")
RUN_STATUSES = ("running", "finished", "interrupted")


def default_db_url() -> str:
    """$VLLM_MEDIC_DB if set, else SQLite at $XDG_DATA_HOME/vllm-medic/history.db (~/.local/share/...)."""
    explicit = os.environ.get("VLLM_MEDIC_DB")
    if explicit:
        return explicit
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return f"sqlite:///{Path(base) / 'vllm-medic' / 'history.db'}"


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


_last_id_us = 0
_id_lock = threading.Lock()


def new_run_id() -> str:
    """Sortable by start time, unique by the random tail: 20261130T024512345678-3fa9c1.

    Microsecond resolution, kept strictly increasing within a process so runs started back to back
    still list in the order they were started."""
    global _last_id_us
    with _id_lock:
        now_us = max(time.time_ns() // 1000, _last_id_us + 1)
        _last_id_us = now_us
    now = datetime.fromtimestamp(now_us // 1_000_000, UTC)
    return f"{now:%Y%m%dT%H%M%S}{now_us % 1_000_000:06d}-{secrets.token_hex(3)}"


def _to_json(obj: Any) -> str:
    return json.dumps(redact_obj(obj), ensure_ascii=False, default=str, sort_keys=False)


def _from_json(text: str | None, fallback: Any) -> Any:
    if not text:
        return fallback
    try:
        return json.loads(text)
    except ValueError:
        return fallback


def _redact_attachment(content: str | bytes, media_type: str) -> bytes:
    if isinstance(content, bytes):
        try:
            text = content.decode("utf-8")
        except UnicodeDecodeError:
            return content  # binary (an image, a tarball): nothing textual to redact
    else:
        text = content
    if "json" in media_type:
        try:
            return json.dumps(redact_obj(json.loads(text)), indent=2, ensure_ascii=False).encode("utf-8")
        except ValueError:
            pass
    return redact_text(text).encode("utf-8")


def _safe_url(url: str) -> str:
    return redact_text(url)


def _db_errors(fn: Any) -> Any:
    """A database failure in the middle of a run is the tool's problem (exit 3), never a traceback."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except SQLAlchemyError as exc:
            raise ToolError(
                f"history database error: {type(exc).__name__}: {redact_text(str(exc.orig if hasattr(exc, 'orig') and exc.orig else exc))}"
            ) from exc

    return wrapper


def _as_object(value: Any) -> dict[str, Any]:
    """A stored JSON object read back as one: another shape (written by another version or writer) is
    kept under ``raw`` so renderers can rely on a dict and nothing stored is dropped."""
    if isinstance(value, dict):
        return value
    return {} if value is None else {"raw": value}


def _step_row(row: Any) -> StepRow:
    """A row of the steps table; its JSON columns read back whatever shape another writer left."""
    return StepRow(
        name=row.name,
        status=row.status,
        findings=_as_findings(_from_json(row.findings, [])),
        data=_as_object(_from_json(row.data, {})),
        updated_at=row.updated_at,
    )


_FINDING_TEXT = ("id", "severity", "category", "title")
_FINDING_LISTS = ("evidence", "fix", "docs")


def _as_findings(value: Any) -> list[dict[str, Any]]:
    """Stored findings read back as a list of finding dicts with text fields and lists of text."""
    items = value if isinstance(value, list) else ([] if value is None else [value])
    out = []
    for item in items:
        f = dict(item) if isinstance(item, dict) else {"title": json.dumps(item, default=str)}
        for key in _FINDING_TEXT:
            if key in f and not isinstance(f[key], str):
                f[key] = "" if f[key] is None else json.dumps(f[key], default=str)
        for key in _FINDING_LISTS:
            v = f.get(key)
            if v is not None:
                f[key] = [
                    x if isinstance(x, str) else json.dumps(x, default=str)
                    for x in (v if isinstance(v, list) else [v])
                ]
        out.append(f)
    return out


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA busy_timeout=30000")
    cur.execute("PRAGMA foreign_keys=ON")
    # WAL is unavailable for :memory: and some filesystems; the store still works without it.
    with contextlib.suppress(Exception):
        cur.execute("PRAGMA journal_mode=WAL")
    # In WAL mode NORMAL keeps every committed write across a crash, `kill -9` or Ctrl-C of the writer
    # (the WAL is in the OS page cache); only a power loss may drop the last transactions. FULL would
    # fsync on every measurement and cut the write rate by an order of magnitude (bench/bench_store.py).
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.close()


def _build_engine(url: str, *, create_parent: bool) -> Engine:
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise UsageError(
            f"not a database URL: {_safe_url(url)!r} (expected e.g. sqlite:////path/history.db or "
            "postgresql+psycopg://user@host/dbname)"
        ) from exc
    backend = parsed.get_backend_name()
    connect_args: dict[str, Any] = {}
    if backend == "sqlite":
        db = parsed.database
        if db and db != ":memory:" and not db.startswith("file:"):
            parent = Path(db).expanduser().parent
            if create_parent:
                try:
                    parent.mkdir(parents=True, exist_ok=True)
                except OSError as exc:
                    raise UsageError(f"cannot create the history directory {parent}: {exc}") from exc
            elif not parent.is_dir():
                raise UsageError(f"cannot open {_safe_url(url)}: directory {parent} does not exist")
        connect_args["timeout"] = 30
    elif backend == "postgresql":
        connect_args["connect_timeout"] = 10
    try:
        engine = create_engine(parsed, connect_args=connect_args, future=True)
    except NoSuchModuleError as exc:
        raise UsageError(f"unsupported database in {_safe_url(url)!r}: {exc}") from exc
    except ModuleNotFoundError as exc:
        raise UsageError(
            f"the driver for {_safe_url(url)!r} is not installed ({exc.name}); for PostgreSQL install "
            "vllm-medic[postgres] and use postgresql+psycopg://..."
        ) from exc
    if backend == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas)
    return engine


class NoHistory(UsageError):
    """A read-only command pointed at an SQLite history file that does not exist (yet)."""


def sqlite_path(url: str) -> Path | None:
    """The file behind an SQLite URL, or None for other databases (and in-memory SQLite)."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        return None
    db = parsed.database
    if parsed.get_backend_name() != "sqlite" or not db or db == ":memory:" or db.startswith("file:"):
        return None
    return Path(db).expanduser()


def _create_tables(engine: Engine, attempts: int = 5) -> None:
    """``create_all`` tolerant of a concurrent first open: two `accept` runs starting together on a fresh
    history both see no tables and both create them; the loser's "already exists" is retried, and the
    retry's existence check then passes."""
    for attempt in range(attempts):
        try:
            schema.metadata.create_all(engine)
            return
        except (OperationalError, ProgrammingError, IntegrityError) as exc:
            if (
                attempt == attempts - 1
                or "exist" not in str(exc).lower()
                and not isinstance(exc, IntegrityError)
            ):
                raise


def _schema_version(engine: Engine) -> int | None:
    """The version recorded in the history; records ours in a new one (another process may race us)."""
    with engine.connect() as conn:
        found = conn.execute(select(func.max(schema.schema_info.c.version))).scalar()
    if found is not None:
        return int(found)
    try:
        with engine.begin() as conn:
            conn.execute(insert(schema.schema_info).values(version=schema.SCHEMA_VERSION))
    except IntegrityError:
        pass  # a concurrent first open recorded it
    return None


def open_store(url: str | None = None, *, must_exist: bool = False) -> Store:
    """Open (and create the tables of) the history at ``url``, or at :func:`default_db_url`.

    ``must_exist`` (for commands that only read): a missing SQLite file raises :class:`NoHistory` instead
    of creating an empty database at a mistyped path."""
    use_default = url is None
    target = url if url is not None else default_db_url()
    path = sqlite_path(target)
    if must_exist and path is not None and not path.exists():
        raise NoHistory(
            f"no history database at {path}: nothing has been recorded there (check --db / $VLLM_MEDIC_DB)"
        )
    engine = _build_engine(target, create_parent=use_default or os.environ.get("VLLM_MEDIC_DB") == target)
    try:
        _create_tables(engine)
        found = _schema_version(engine)
    except SQLAlchemyError as exc:
        engine.dispose()
        detail = redact_text(str(getattr(exc, "orig", None) or exc)).strip().splitlines()
        raise UsageError(
            f"cannot open the history database {_safe_url(target)}: {detail[0] if detail else type(exc).__name__}"
        ) from exc
    if found is not None and found > schema.SCHEMA_VERSION:
        engine.dispose()
        raise UsageError(
            f"the history at {_safe_url(target)} has schema version {found}, written by a newer vllm-medic "
            f"(this one reads version {schema.SCHEMA_VERSION}); upgrade vllm-medic or use another --db"
        )
    return Store(engine, target)


class Store:
    """One history database. Every method commits before returning."""

    def __init__(self, engine: Engine, url: str) -> None:
        self.engine = engine
        self.url = _safe_url(url)

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # ---- writing -------------------------------------------------------------------------------

    @_db_errors
    def start_run(self, kind: str, target: str, meta: dict[str, Any]) -> str:
        run_id = new_run_id()
        pid = os.getpid()
        with self.engine.begin() as conn:
            conn.execute(
                insert(schema.runs).values(
                    run_id=run_id,
                    kind=kind,
                    target=redact_text(target or ""),
                    status="running",
                    verdict=None,
                    started_at=_now_iso(),
                    heartbeat=time.time(),
                    host=this_host(),
                    pid=pid,
                    pid_start=process_start_token(pid),
                    meta=_to_json(meta or {}),
                    tool_version=__version__,
                )
            )
        return run_id

    def _touch(self, conn: Any, run_id: str) -> None:
        res = conn.execute(
            update(schema.runs).where(schema.runs.c.run_id == run_id).values(heartbeat=time.time())
        )
        if res.rowcount == 0:
            raise UsageError(f"no run {run_id!r} in {self.url}")

    @_db_errors
    def heartbeat(self, run_id: str) -> None:
        """Say the writer is still alive (only matters for a writer on another host than the reader)."""
        with self.engine.begin() as conn:
            self._touch(conn, run_id)

    @_db_errors
    def record_step(self, run_id: str, step: StepRow) -> None:
        """Write the step (again, under the same name, as it progresses: it keeps its position)."""
        name, status = step.name, step.status
        if not name:
            raise ValueError("a step needs a name")
        if status not in STEP_STATUSES:
            raise ValueError(f"step status must be one of {STEP_STATUSES}, not {status!r}")
        findings = _to_json(step.findings)
        data = _to_json(step.data)
        now = _now_iso()
        t = schema.steps
        with self.engine.begin() as conn:
            self._touch(conn, run_id)
            res = conn.execute(
                update(t)
                .where(and_(t.c.run_id == run_id, t.c.name == name))
                .values(status=status, findings=findings, data=data, updated_at=now)
            )
            if res.rowcount == 0:
                position = conn.execute(
                    select(func.count()).select_from(t).where(t.c.run_id == run_id)
                ).scalar_one()
                conn.execute(
                    insert(t).values(
                        run_id=run_id,
                        name=name,
                        position=int(position),
                        status=status,
                        findings=findings,
                        data=data,
                        updated_at=now,
                    )
                )

    @_db_errors
    def record_event(self, run_id: str, kind: str, payload: dict[str, Any]) -> None:
        self.record_events(run_id, kind, [payload])

    @_db_errors
    def record_events(self, run_id: str, kind: str, payloads: Iterable[dict[str, Any]]) -> None:
        """Several measurements of one kind in one transaction (e.g. a batch of per-request records)."""
        now = _now_iso()
        rows = [{"run_id": run_id, "kind": kind, "at": now, "payload": _to_json(p)} for p in payloads]
        with self.engine.begin() as conn:
            self._touch(conn, run_id)
            if rows:
                conn.execute(insert(schema.events), rows)

    @_db_errors
    def attach(self, run_id: str, name: str, content: str | bytes, media_type: str = "text/plain") -> None:
        blob = _redact_attachment(content, media_type)
        t = schema.attachments
        with self.engine.begin() as conn:
            self._touch(conn, run_id)
            res = conn.execute(
                update(t)
                .where(and_(t.c.run_id == run_id, t.c.name == name))
                .values(media_type=media_type, size=len(blob), content=blob)
            )
            if res.rowcount == 0:
                conn.execute(
                    insert(t).values(
                        run_id=run_id, name=name, media_type=media_type, size=len(blob), content=blob
                    )
                )

    @_db_errors
    def finish_run(self, run_id: str, verdict: str, status: str = "finished") -> None:
        if verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}, not {verdict!r}")
        if status not in RUN_STATUSES:
            raise ValueError(f"status must be one of {RUN_STATUSES}, not {status!r}")
        with self.engine.begin() as conn:
            self._touch(conn, run_id)
            conn.execute(
                update(schema.runs)
                .where(schema.runs.c.run_id == run_id)
                .values(verdict=verdict, status=status, finished_at=_now_iso())
            )

    @_db_errors
    def mark_interrupted(self, run_id: str, reason: str) -> None:
        """Status interrupted, verdict incomplete — only for a run still running: a run that already
        finished keeps its verdict (an interrupt during cleanup must not erase a complete result)."""
        with self.engine.begin() as conn:
            self._touch(conn, run_id)
            conn.execute(
                update(schema.runs)
                .where(and_(schema.runs.c.run_id == run_id, schema.runs.c.status == "running"))
                .values(
                    status="interrupted",
                    verdict="incomplete",
                    reason=redact_text(reason),
                    finished_at=_now_iso(),
                )
            )

    @contextmanager
    def recording(self, kind: str, target: str, meta: dict[str, Any]) -> Iterator[str]:
        """``with store.recording("accept", url, meta) as run_id:`` — marks the run interrupted on Ctrl-C or
        on an exception escaping the block (then re-raises). The block must call ``finish_run`` itself."""
        run_id = self.start_run(kind, target, meta)
        try:
            yield run_id
        except KeyboardInterrupt:
            self.mark_interrupted(run_id, "interrupted by Ctrl-C (SIGINT)")
            raise
        except BaseException as exc:
            self.mark_interrupted(run_id, f"aborted: {type(exc).__name__}: {exc}")
            raise

    # ---- reading -------------------------------------------------------------------------------

    def _resolve(self, conn: Any, run_id: str) -> Any:
        t = schema.runs
        ref = (run_id or "").strip()
        if ref in ("latest", "last"):
            row = conn.execute(select(t).order_by(t.c.run_id.desc()).limit(1)).first()
            if row is None:
                raise UsageError(f"no runs recorded yet in {self.url}")
            return row
        if not ref:
            raise UsageError("a run id is needed (see `vllm-medic history`)")
        row = conn.execute(select(t).where(t.c.run_id == ref)).first()
        if row is not None:
            return row
        escaped = ref.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        rows = conn.execute(select(t).where(t.c.run_id.like(escaped + "%", escape="\\")).limit(6)).all()
        if not rows:
            raise UsageError(f"no run {ref!r} in {self.url} (see `vllm-medic history`)")
        if len(rows) > 1:
            ids = ", ".join(r.run_id for r in rows[:5])
            raise UsageError(f"run id prefix {ref!r} is ambiguous: {ids}")
        return rows[0]

    @staticmethod
    def _run_summary(row: Any, now: float) -> dict[str, Any]:
        status, verdict, reason = row.status, row.verdict, row.reason
        if status == "running":
            gone = writer_gone(row.host, row.pid, row.pid_start, row.heartbeat, now)
            if gone:
                status, verdict, reason = "interrupted", "incomplete", gone
        return {
            "run_id": row.run_id,
            "kind": row.kind,
            "target": row.target,
            "status": status,
            "verdict": verdict,
            "reason": reason,
            "started_at": row.started_at,
            "finished_at": row.finished_at,
            "last_write_at": datetime.fromtimestamp(row.heartbeat, UTC)
            .isoformat(timespec="seconds")
            .replace("+00:00", "Z"),
            "host": row.host,
            "pid": row.pid,
            "tool_version": row.tool_version,
            "meta": _as_object(_from_json(row.meta, {})),
        }

    @_db_errors
    def get_run(self, run_id: str, include_events: bool = True) -> dict[str, Any]:
        with self.engine.connect() as conn:
            row = self._resolve(conn, run_id)
            run = self._run_summary(row, time.time())
            rid = row.run_id
            st = schema.steps
            run["steps"] = [
                _step_row(s).to_json()
                for s in conn.execute(select(st).where(st.c.run_id == rid).order_by(st.c.position))
            ]
            ev = schema.events
            if include_events:
                run["events"] = [
                    {
                        "seq": e.id,
                        "kind": e.kind,
                        "at": e.at,
                        "payload": _as_object(_from_json(e.payload, {})),
                    }
                    for e in conn.execute(select(ev).where(ev.c.run_id == rid).order_by(ev.c.id))
                ]
            else:
                run["events"] = []
            at = schema.attachments
            run["attachments"] = [
                {"name": a.name, "media_type": a.media_type, "size": a.size}
                for a in conn.execute(
                    select(at.c.name, at.c.media_type, at.c.size)
                    .where(at.c.run_id == rid)
                    .order_by(at.c.name)
                )
            ]
        return run

    @_db_errors
    def get_events(self, run_id: str, kind: str | None = None) -> list[dict[str, Any]]:
        with self.engine.connect() as conn:
            rid = self._resolve(conn, run_id).run_id
            ev = schema.events
            q = select(ev).where(ev.c.run_id == rid)
            if kind is not None:
                q = q.where(ev.c.kind == kind)
            return [
                {"seq": e.id, "kind": e.kind, "at": e.at, "payload": _as_object(_from_json(e.payload, {}))}
                for e in conn.execute(q.order_by(ev.c.id))
            ]

    @_db_errors
    def get_attachment(self, run_id: str, name: str) -> bytes:
        with self.engine.connect() as conn:
            rid = self._resolve(conn, run_id).run_id
            at = schema.attachments
            row = conn.execute(
                select(at.c.content).where(and_(at.c.run_id == rid, at.c.name == name))
            ).first()
        if row is None:
            raise UsageError(f"run {rid} has no attachment {name!r}")
        return bytes(row.content)

    @_db_errors
    def list_runs(self, limit: int = 50, kind: str | None = None) -> list[dict[str, Any]]:
        t = schema.runs
        q = select(t).order_by(t.c.run_id.desc()).limit(max(1, int(limit)))
        if kind is not None:
            q = q.where(t.c.kind == kind)
        now = time.time()
        with self.engine.connect() as conn:
            runs = [self._run_summary(r, now) for r in conn.execute(q)]
            ids = [r["run_id"] for r in runs]
            by_run: dict[str, list[dict[str, str]]] = {rid: [] for rid in ids}
            if ids:
                st = schema.steps
                for s in conn.execute(
                    select(st.c.run_id, st.c.name, st.c.status)
                    .where(st.c.run_id.in_(ids))
                    .order_by(st.c.run_id, st.c.position)
                ):
                    by_run[s.run_id].append({"name": s.name, "status": s.status})
        for r in runs:
            r["steps"] = by_run[r["run_id"]]
        return runs
