"""Distributed load: one load step run by N Ray actors, merged exactly.

Each actor runs the ordinary load generator (``accept.loadgen.LoadStep``) with its share of the
concurrency, requests and rate, on its own event loop and core (locally, or on other nodes when the
Ray cluster has them). The per-actor ``StepResult``s merge by adding histogram buckets
(``loadgen.merge_results``), never by averaging percentiles.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vllm_medic.errors import UsageError

if TYPE_CHECKING:
    from vllm_medic.accept.options import AcceptOptions


@dataclass(frozen=True)
class ClientSpec:
    base_url: str
    api_key: str | None = None
    timeout_s: float = 120.0
    model: str | None = None


def split(total: int | None, parts: int) -> list[int | None]:
    """Share ``total`` among ``parts`` as evenly as integers allow (None stays None)."""
    if total is None:
        return [None] * parts
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def shares(concurrency: int, requests: int | None, rate: float | None, workers: int) -> list[dict[str, Any]]:
    """Per-worker step arguments; never more workers than concurrent streams."""
    n = max(1, min(workers, concurrency))
    conc = split(concurrency, n)
    reqs = split(requests, n)
    return [
        {"concurrency": c, "requests": r, "rate": (rate / n if rate else None), "seed": i}
        for i, (c, r) in enumerate(zip(conc, reqs, strict=True))
        if (r is None or r > 0)
    ]


class LoadWorker:
    """A Ray actor body: holds nothing but the client spec; each call runs one step."""

    def __init__(self, spec: ClientSpec) -> None:
        self.spec = spec

    def run(self, step_kwargs: dict[str, Any], body_factory: Callable[[int], dict[str, Any]]) -> Any:
        from vllm_medic.accept.loadgen import LoadStep
        from vllm_medic.serve.client import ServerClient

        spec = self.spec

        def client() -> ServerClient:
            return ServerClient(
                spec.base_url, api_key=spec.api_key, timeout_s=spec.timeout_s, model=spec.model
            )

        return asyncio.run(LoadStep(client, body_factory=body_factory, **step_kwargs).run())


class DistributedLoad:
    """N Ray actors created once (per acceptance run) and reused for every step."""

    def __init__(
        self, spec: ClientSpec, workers: int, address: str | None = None, ship_package: bool = True
    ) -> None:
        if workers < 1:
            raise UsageError("--workers must be at least 1")
        from vllm_medic.cluster.raysession import connect, import_ray

        ray = import_ray("--workers")
        self._ray = ray
        self._owns_ray = not ray.is_initialized()
        if self._owns_ray:
            connect(address, what="--workers", ship_package=ship_package, start_local=True)
        actor = ray.remote(num_cpus=1, max_restarts=0)(LoadWorker)
        self.actors = [actor.remote(spec) for _ in range(workers)]

    def run_step(
        self,
        *,
        concurrency: int,
        body_factory: Callable[[int], dict[str, Any]],
        requests: int | None = None,
        rate: float | None = None,
        **step_kwargs: Any,
    ) -> Any:
        from vllm_medic.accept.loadgen import merge_results

        parts = shares(concurrency, requests, rate, len(self.actors))
        refs = [
            actor.run.remote({**step_kwargs, **part}, body_factory)
            for actor, part in zip(self.actors, parts, strict=False)
        ]
        return merge_results(self._ray.get(refs))

    def close(self) -> None:
        for a in self.actors:
            self._ray.kill(a)
        self.actors = []
        if self._owns_ray:
            self._ray.shutdown()

    def __enter__(self) -> DistributedLoad:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def for_accept(opts: AcceptOptions, model: str | None) -> DistributedLoad:
    """`accept --workers N [--ray ADDRESS]`: the workers every load level of the run is split over."""
    spec = ClientSpec(opts.url, api_key=opts.api_key, timeout_s=opts.request_timeout_s, model=model)
    return DistributedLoad(spec, opts.workers, address=opts.ray_address)
