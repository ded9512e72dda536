"""Rank files scanned side by side: worker processes (one per CPU) each scan whole files into an
`Accumulator` of their own, and the parent merges them in input order, so the verdict is the one a
single process reaches. The screen is what costs (bytes per second); classification is per candidate
line and stays in each file's worker.

Workers are forked after the catalogue and screens are built, so they start in milliseconds and share
those pages. Signatures and families travel back as their index in the parent's lists (the parent
gets its own objects back, not copies). VLLM_MEDIC_TRIAGE_JOBS=N sets the number of workers; 1 scans
in this process. Below `MIN_BYTES` of input, with a single file, on one CPU, off Linux or with other
threads running, nothing is forked.
"""

from __future__ import annotations

import contextlib
import io
import multiprocessing
import os
import pickle
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import fields
from typing import Any

from vllm_medic.triage.catalogue import Catalogue
from vllm_medic.triage.families import load_families
from vllm_medic.triage.scanner import _MAX_NAMES, _MAX_RANKS, Accumulator, SigStats
from vllm_medic.triage.sources import LogSource
from vllm_medic.waits import SLICE_S

MIN_BYTES = 32 << 20
_MAX_JOBS = 16

# Set in the parent just before the fork; the workers read it (fork copies it).
_WORK: Callable[[int], Any] | None = None
_CATALOGUE: Catalogue | None = None


def jobs_for(sources: list[LogSource]) -> int:
    """How many workers to scan `sources` with (1: scan here)."""
    if len(sources) < 2 or not all(s.path is not None and s.opener is not None for s in sources):
        return 1
    # Fork only where it is the platform's own way, and never under threads (a lock held by another
    # thread at the fork would stay held in the child): a Ray task or an embedding app scans here.
    if not sys.platform.startswith("linux") or threading.active_count() > 1:
        return 1
    env = os.environ.get("VLLM_MEDIC_TRIAGE_JOBS", "").strip()
    if env:
        try:
            return max(1, min(int(env), len(sources), _MAX_JOBS))
        except ValueError:
            return 1
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    if cpus < 2:
        return 1
    size = 0
    for s in sources:
        with contextlib.suppress(OSError):
            size += s.path.stat().st_size if s.path is not None else 0  # every one has a path (checked above)
    return 1 if size < MIN_BYTES else min(cpus, len(sources), _MAX_JOBS)


def _shared_objects(catalogue: Catalogue) -> list[Any]:
    return [*catalogue.signatures, *load_families().families]


class _Pickler(pickle.Pickler):
    def __init__(self, fh: io.BytesIO, shared: dict[int, int]) -> None:
        super().__init__(fh, protocol=pickle.HIGHEST_PROTOCOL)
        self._shared = shared

    def persistent_id(self, obj: Any) -> int | None:  # noqa: D102 - pickle's hook
        return self._shared.get(id(obj))


class _Unpickler(pickle.Unpickler):
    def __init__(self, fh: io.BytesIO, shared: list[Any]) -> None:
        super().__init__(fh)
        self._shared = shared

    def persistent_load(self, pid: Any) -> Any:  # noqa: D102 - pickle's hook
        return self._shared[pid]


_PR_SET_PDEATHSIG = 1
_PARENT_PID = 0  # the scanning process, set before the fork


def _worker_init() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent reports an interrupt, once
    _die_with_the_scan()


def _die_with_the_scan() -> None:
    """A worker never outlives the scan. The Pool may fork a replacement worker from its handler thread
    while it shuts down; such a child can wait forever on a queue lock another thread held at the fork
    (seen once in the test suite: an orphan that kept the run's output pipe open). The kernel kills a
    worker when the thread that forked it ends; one whose scan is already gone leaves at once."""
    import ctypes  # here, in the worker: not on every run's start-up

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if _PARENT_PID and os.getppid() != _PARENT_PID:
        os._exit(0)


def _run(i: int) -> bytes:
    assert _WORK is not None and _CATALOGUE is not None
    result = _WORK(i)
    shared = {id(obj): n for n, obj in enumerate(_shared_objects(_CATALOGUE))}
    fh = io.BytesIO()
    _Pickler(fh, shared).dump(result)
    return fh.getvalue()


def _pool_results(results: Any) -> Iterator[Any]:
    """Iterate a `Pool.imap`, woken every SLICE_S: the pool's own handler threads are where a
    terminal's Ctrl-C often lands while the main thread waits for the next file's result."""
    while True:
        try:
            yield results.next(timeout=SLICE_S)
        except multiprocessing.TimeoutError:
            continue
        except StopIteration:
            return


def scan_in_workers(count: int, jobs: int, catalogue: Catalogue, work: Callable[[int], Any]) -> Iterator[Any]:
    """`work(0) … work(count - 1)` in `jobs` forked workers; results in order, as they complete."""
    global _WORK, _CATALOGUE, _PARENT_PID
    _WORK, _CATALOGUE, _PARENT_PID = work, catalogue, os.getpid()
    shared = _shared_objects(catalogue)
    pool = multiprocessing.get_context("fork").Pool(jobs, initializer=_worker_init)
    try:
        for raw in _pool_results(pool.imap(_run, range(count))):
            yield _Unpickler(io.BytesIO(raw), shared).load()
        pool.close()
    finally:
        pool.terminate()
        pool.join()
        _WORK, _CATALOGUE = None, None


def merge(into: Accumulator, part: Accumulator) -> None:
    """Add one file's accumulator to the run's; called in input order, it reproduces a sequential scan
    (dicts keyed by source index, first-seen order of signatures and of the sources naming them)."""
    for f in fields(Accumulator):
        mine, theirs = getattr(into, f.name), getattr(part, f.name)
        if f.name == "stats":
            for sig_id, st in theirs.items():
                _merge_stats(mine.setdefault(sig_id, SigStats()), st)
        elif isinstance(mine, dict):
            mine.update(theirs)
        elif isinstance(mine, set):
            mine |= theirs
        elif isinstance(mine, list):
            mine.extend(theirs)
        else:  # a new kind of field: say so here rather than drop it silently
            raise TypeError(f"Accumulator.{f.name}: no merge rule for {type(mine).__name__}")


def _merge_stats(into: SigStats, st: SigStats) -> None:
    into.count += st.count
    for r in sorted(st.ranks):
        if len(into.ranks) >= _MAX_RANKS:
            break
        into.ranks.add(r)
    for name in st.sources:
        if name not in into.sources and len(into.sources) < _MAX_NAMES:
            into.sources.append(name)
    for node in st.nodes:
        if node not in into.nodes and len(into.nodes) < _MAX_NAMES:
            into.nodes.append(node)
