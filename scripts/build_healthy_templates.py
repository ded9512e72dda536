"""Rebuild src/vllm_medic/triage/data/healthy_templates.json: the novelty layer's model of healthy output.

Mines log templates with drain3 (pip install drain3; a test extra, not needed at run time) from REAL
healthy logs only:
  * tests/data/triage/noise/*.log        real vLLM 0.32.0 (CPU build) servers started here (SOURCES.md)
  * tests/data/triage/healthy/*.log      healthy lines (before the failure) from public reports; `#` lines
                                          name the source URL and are skipped
Each line is normalised exactly as triage does (prefixes, timestamps peeled) and masked with
`vllm_medic.triage.novelty.mask`, so the shipped templates and the run-time matcher see the same tokens.

    python scripts/build_healthy_templates.py            # write the JSON
    python scripts/build_healthy_templates.py --check    # exit 1 if the shipped JSON is stale
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from vllm_medic.triage.normalize import normalize_line  # noqa: E402
from vllm_medic.triage.novelty import WILDCARD, mask  # noqa: E402

OUT = ROOT / "src/vllm_medic/triage/data/healthy_templates.json"
INPUTS = ("tests/data/triage/noise/*.log", "tests/data/triage/healthy/*.log")
SIM_THRESHOLD = 0.5
DEPTH = 4
MIN_LITERALS = 2  # a template of (almost) only wildcards would call every line healthy


def healthy_messages() -> tuple[list[str], list[str]]:
    files: list[Path] = []
    for pattern in INPUTS:
        files.extend(sorted(ROOT.glob(pattern)))
    messages: list[str] = []
    for path in files:
        for i, raw in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if raw.startswith("#"):
                continue
            msg = normalize_line(raw, path.name, i).message
            if msg.strip():
                messages.append(msg)
    return [str(p.relative_to(ROOT)) for p in files], messages


def mine(messages: list[str]) -> list[str]:
    from drain3 import TemplateMiner
    from drain3.template_miner_config import TemplateMinerConfig

    cfg = TemplateMinerConfig()
    cfg.drain_sim_th = SIM_THRESHOLD
    cfg.drain_depth = DEPTH
    cfg.parametrize_numeric_tokens = False  # numbers are masked already, consistently with the matcher
    cfg.masking_instructions = []
    cfg.profiling_enabled = False
    miner = TemplateMiner(persistence_handler=None, config=cfg)
    for msg in messages:
        tokens = mask(msg)
        if tokens:
            miner.add_log_message(" ".join(tokens))
    out = set()
    for cluster in miner.drain.clusters:
        tokens = cluster.get_template().split(" ")
        if sum(t != WILDCARD for t in tokens) >= min(MIN_LITERALS, len(tokens)):
            out.add(" ".join(tokens))
    return sorted(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="exit 1 when the shipped file differs")
    args = ap.parse_args()
    sources, messages = healthy_messages()
    doc = {
        "version": 1,
        "built_by": "scripts/build_healthy_templates.py (drain3)",
        "drain": {"sim_th": SIM_THRESHOLD, "depth": DEPTH, "min_literals": MIN_LITERALS},
        "sources": sources,
        "lines": len(messages),
        "templates": mine(messages),
    }
    text = json.dumps(doc, indent=1, ensure_ascii=False) + "\n"
    if args.check:
        current = OUT.read_text(encoding="utf-8") if OUT.exists() else ""
        if current != text:
            print(
                f"{OUT.relative_to(ROOT)} is stale: run scripts/build_healthy_templates.py", file=sys.stderr
            )
            return 1
        print(f"{OUT.relative_to(ROOT)} is up to date ({len(doc['templates'])} templates)")
        return 0
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}: {len(doc['templates'])} templates from {len(messages)} lines")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
