"""The history API on SQLite and on a real PostgreSQL server: incremental writes, redaction, lookup."""

from __future__ import annotations

import json
import threading

import pytest

from vllm_medic.errors import UsageError
from vllm_medic.model import Finding
from vllm_medic.store.api import default_db_url, open_store
from vllm_medic.store.step_row import StepRow


def test_round_trip_incremental_and_redacted(store_url: str) -> None:
    store = open_store(store_url)
    rid = store.start_run(
        "accept",
        "http://admin:hunter2pass@gpu-01:8000",
        {"argv": ["--api-key", "sk-abcdefabcdefabcdef1234"], "quick": True},
    )
    # visible as running before anything else is written: each call commits on its own
    other = open_store(store_url)
    assert other.get_run(rid)["status"] == "running"
    assert other.get_run(rid)["verdict"] is None

    finding = Finding(
        "ACC-BASIC-001",
        "fail",
        "other",
        "tool call args break schema",
        ["HF_TOKEN=hf_abcdefghijklmnopqrstuvwx"],
        ["fix it"],
    )
    store.record_step(rid, StepRow("start", "pass", data={"ready_s": 3}))
    store.record_step(rid, StepRow("basic", "running"))
    store.record_step(rid, StepRow.of("basic", "fail", [finding], {"n": 2}))
    store.record_events(rid, "request", [{"i": i, "ttft_ms": 5.0 + i} for i in range(50)])
    store.record_event(rid, "ramp_level", {"concurrency": 2})
    store.attach(rid, "launch_args.txt", "vllm serve m --api-key topsecretvalue123")
    store.attach(
        rid,
        "snapshot.json",
        json.dumps({"env": {"HF_TOKEN": "hf_zzzzzzzzzzzzzzzzzzzzzzzz", "CUDA_VISIBLE_DEVICES": "0,1"}}),
        "application/json",
    )
    store.attach(rid, "blob.bin", b"\xff\x00\xfe")

    run = other.get_run(rid)
    assert [s["name"] for s in run["steps"]] == ["start", "basic"]  # upsert keeps first position
    assert run["steps"][1]["status"] == "fail" and run["steps"][1]["data"] == {"n": 2}
    assert run["steps"][1]["findings"][0]["id"] == "ACC-BASIC-001"
    assert len([e for e in run["events"] if e["kind"] == "request"]) == 50
    assert [e["payload"]["i"] for e in run["events"][:3]] == [0, 1, 2]
    dumped = (
        json.dumps(run)
        + other.get_attachment(rid, "launch_args.txt").decode()
        + other.get_attachment(rid, "snapshot.json").decode()
    )
    for secret in (
        "hunter2pass",
        "sk-abcdefabcdefabcdef1234",
        "hf_abcdefghijklmnopqrstuvwx",
        "topsecretvalue123",
        "hf_zzzz",
    ):
        assert secret not in dumped
    assert "0,1" in other.get_attachment(rid, "snapshot.json").decode()
    assert other.get_attachment(rid, "blob.bin") == b"\xff\x00\xfe"
    assert {a["name"] for a in run["attachments"]} == {"launch_args.txt", "snapshot.json", "blob.bin"}

    store.finish_run(rid, "fail")
    done = other.get_run(rid[:15])  # unique prefix
    assert (done["status"], done["verdict"]) == ("finished", "fail")
    assert done["finished_at"] >= done["started_at"]


def test_list_lookup_and_interrupt(store_url: str) -> None:
    store = open_store(store_url)
    a = store.start_run("accept", "http://a", {})
    b = store.start_run("accept", "http://b", {})
    c = store.start_run("sim", "http://c", {})
    store.record_step(a, StepRow("basic", "pass"))
    store.mark_interrupted(b, "Ctrl-C during ramp")
    store.finish_run(c, "pass")
    store.mark_interrupted(c, "Ctrl-C after the end")  # a finished run keeps its verdict
    assert (store.get_run(c)["status"], store.get_run(c)["verdict"]) == ("finished", "pass")
    runs = store.list_runs()
    assert [r["run_id"] for r in runs] == [c, b, a]  # newest first; ids sort by time
    assert [r["run_id"] for r in store.list_runs(kind="accept")] == [b, a]
    assert runs[2]["steps"] == [{"name": "basic", "status": "pass"}]
    got = store.get_run(b)
    assert (got["status"], got["verdict"], got["reason"]) == (
        "interrupted",
        "incomplete",
        "Ctrl-C during ramp",
    )
    assert store.get_run("latest")["run_id"] == c
    assert len(store.list_runs(limit=2)) == 2
    with pytest.raises(UsageError, match="no run"):
        store.get_run("19990101")
    with pytest.raises(UsageError, match="ambiguous"):
        store.get_run(a[:8])
    with pytest.raises(UsageError, match="no run"):
        store.record_step("nope", StepRow("x", "pass"))
    with pytest.raises(UsageError, match="no attachment"):
        store.get_attachment(a, "missing.txt")
    with pytest.raises(ValueError):
        store.record_step(a, StepRow("basic", "great"))
    with pytest.raises(ValueError):
        store.finish_run(a, "maybe")


def test_concurrent_writers_do_not_lose_rows(store_url: str) -> None:
    store = open_store(store_url)
    rid = store.start_run("accept", "x", {})
    errors: list[BaseException] = []

    def write(tid: int) -> None:
        try:
            writer = open_store(store_url)
            for i in range(25):
                writer.record_event(rid, "soak_sample", {"thread": tid, "i": i})
            writer.close()
        except BaseException as exc:  # noqa: BLE001 - surfaced by the assert below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors
    assert len(store.get_events(rid, kind="soak_sample")) == 100


def test_concurrent_first_opens_of_a_fresh_history(store_url: str) -> None:
    """Two `accept` runs starting at once on a fresh history must not fail on "table already exists"."""
    errors: list[BaseException] = []
    barrier = threading.Barrier(6)

    def first_open() -> None:
        try:
            barrier.wait(timeout=60)
            s = open_store(store_url)
            s.start_run("accept", "x", {})
            s.close()
        except BaseException as exc:  # noqa: BLE001 - surfaced by the assert below
            errors.append(exc)

    threads = [threading.Thread(target=first_open) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == []
    assert len(open_store(store_url).list_runs()) == 6


def test_default_url_follows_environment(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.delenv("VLLM_MEDIC_DB", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_db_url() == f"sqlite:///{tmp_path / 'xdg' / 'vllm-medic' / 'history.db'}"
    store = open_store()  # creates the data directory
    store.start_run("accept", "x", {})
    assert (tmp_path / "xdg" / "vllm-medic" / "history.db").exists()
    monkeypatch.setenv("VLLM_MEDIC_DB", f"sqlite:///{tmp_path / 'other.db'}")
    assert default_db_url() == f"sqlite:///{tmp_path / 'other.db'}"


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("not a url", "not a database URL"),
        ("nosuchdb://x/y", "unsupported database"),
        ("sqlite:////nonexistent-dir-medic/sub/h.db", "does not exist"),
        ("postgresql+psycopg://medic:pw@127.0.0.1:9/x", "cannot open the history database"),
    ],
)
def test_bad_urls_are_usage_errors(url: str, message: str) -> None:
    with pytest.raises(UsageError, match=message) as info:
        open_store(url)
    assert "pw@" not in str(info.value)


def test_newer_schema_is_refused_clearly(tmp_path) -> None:
    import sqlite3

    url = f"sqlite:///{tmp_path / 'h.db'}"
    open_store(url).close()
    with sqlite3.connect(tmp_path / "h.db") as conn:  # as a future vllm-medic would leave it
        conn.execute("INSERT INTO medic_schema (version) VALUES (99)")
    with pytest.raises(UsageError, match="schema version 99, written by a newer vllm-medic"):
        open_store(url)


def test_a_step_row_reads_back_as_the_record_written(store_url: str) -> None:
    store = open_store(store_url)
    rid = store.start_run("accept", "http://gpu-01:8000", {})
    finding = Finding(
        "ACC-RAMP-KV-FULL", "warn", "other", "KV cache full at 16", ["preemptions +14"], ["lower"]
    )
    written = StepRow.of("ramp", "warn", [finding], {"max_sustainable_concurrency": 8})
    store.record_step(rid, written)
    (step,) = store.get_run(rid)["steps"]
    assert list(step) == ["name", "status", "findings", "data", "updated_at"]
    assert step == {**written.to_json(), "updated_at": step["updated_at"]} and step["updated_at"]
    assert step["findings"] == [finding.to_dict()]


def test_a_step_row_refuses_what_is_not_a_finding() -> None:
    with pytest.raises(ValueError, match="a finding must be a Finding or its dict"):
        StepRow.of("basic", "fail", ["just text"], {})  # type: ignore[list-item]
