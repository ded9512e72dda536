"""A real writer process for the kill tests: starts a run, records a step and events, says `ready`, then
keeps recording one event per line read from stdin until stdin closes. Ctrl-C (SIGINT) goes through
``Store.recording``, which marks the run interrupted; SIGKILL leaves it `running` with a dead pid."""

from __future__ import annotations

import sys

from vllm_medic.store.api import open_store
from vllm_medic.store.step_row import StepRow


def main() -> None:
    store = open_store(sys.argv[1])
    with store.recording(
        "accept", "http://127.0.0.1:9/v1", {"argv": ["accept", "--api-key", "sk-secretsecret1234567890"]}
    ) as run_id:
        store.record_step(run_id, StepRow("start", "pass", data={"ready_s": 1.5}))
        store.record_step(run_id, StepRow("ramp", "running"))
        for c in (1, 2, 4):
            store.record_event(run_id, "ramp_level", {"concurrency": c, "ttft_ms": {"p50": 10.0 * c}})
        print(run_id, flush=True)
        print("ready", flush=True)
        for line in sys.stdin:
            store.record_event(run_id, "soak_sample", {"t_s": float(line.strip() or 0)})
            print("ok", flush=True)
        store.finish_run(run_id, "pass")


if __name__ == "__main__":
    main()
