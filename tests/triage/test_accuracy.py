"""Accuracy on the labelled real-log corpus and on the blind rounds already learned from, short and
embedded in real-vLLM noise across rank files. Regression tests: the blind figure of a round is the
one frozen beside it (`blind/roundN.score.txt`), not these."""

import pytest
from accuracy import LEARNED_ROUNDS, load_corpus, score_embedded, score_short


def test_corpus_is_labelled_and_sourced():
    cases = load_corpus()
    assert len(cases) >= 50
    for c in cases:
        assert c["source"], c["id"]
        lines = c["log"].split("\n")
        assert (
            lines[c["first_anomaly_line"] - 1].strip() == c["first_anomaly"].strip()
            or c["first_anomaly"].strip() in lines[c["first_anomaly_line"] - 1]
        ), c["id"]


def test_short_excerpts_meet_targets(capsys):
    score, misses = score_short(load_corpus())
    with capsys.disabled():
        print(f"\n[triage accuracy, short] {score}")
        for m in misses:
            print("   miss:", m)
    # The corpus is what the catalogue was tuned on: it stays whole.
    assert score.category == score.n and score.line == score.n and score.no_root == 0
    # The point of the tool: it must beat "first line with error/warn/traceback" clearly.
    assert score.line > score.naive_line


def test_embedded_in_rank_noise_meets_targets(tmp_path, capsys):
    score, misses = score_embedded(load_corpus(), tmp_path)
    with capsys.disabled():
        print(f"\n[triage accuracy, embedded in 4 rank files of real-vLLM noise] {score}")
        for m in misses:
            print("   miss:", m)
    # One weak-signal-only case (a 0 % hit rate) stays a signal once a healthy start-up surrounds it.
    assert score.category >= score.n - 1 and score.line >= score.n - 1


# Thresholds from what the tool reaches on each learned round (round 6: 65/69 category, 67/69 line
# short; 62/69 and 62/69 embedded, where four weak-signal-only logs — a trailing 4xx, a JSON 404, a
# zero-hit LMCache line, a /metrics counter — stay signals inside a healthy, serving neighbourhood by
# design, and vllm-ascend-2083's bare AssertionError is reported on its assert statement as the
# corpus labels it (vllm-4171) now that header-less frames are folded in the embedded form too.
# Round 7: 61/65 and 62/65 short, 63/65 and 61/65 embedded (aibrix-1188's lone 404 stays a signal
# inside serving noise). Round 8: 61/67 and 59/67 short, 62/67 and 59/67 embedded, two without a
# root (a prefix-cache hit rate of 0 % and an orderly uvicorn shutdown, both with no failure word).
# Round 9: 57/67 and 65/67 short, 58/67 and 64/67 embedded; one without a root short (a prefix-cache
# hit rate where none is possible), two embedded (the same, and a DEBUG `WAITING_FOR_REMOTE_KVS`
# weak signal that stays a signal after a healthy start-up).
# Round 10: 58/64 and 57/64 short with 3 without a root (a leak warning the healthy model knows, an
# Ollama cache-statistics line and a llama.cpp context-shift loop, none with a failure word); 57/64 and
# 57/64 embedded with 4 (the per-request prefix-hit delta stays a signal beside a healthy start-up).
# Round 11: 56/64 and 60/64 short with 2 without a root (llama.cpp slot lines whose only anomaly is a
# prompt processed with no cached tokens, no failure word); 56/64 and 59/64 embedded with 3.
# The misses left are listed in blind/README.md ("after scoring").
# The lean (data/families.yaml `lean_threshold`) cost one `other` label each in rounds 6, 8 and 9 for
# +6 on blind round 10 held out; round 11's learning (etcd connect failures stay `other`, Envoy lines
# are `other`) won rounds 6 and 8 back. Round 13: 49/68 and 56/68 short, 53/68 and 56/68 embedded, 7
# without a root (cache statistics and weak warnings, no failure word); its Ray memory-monitor phase cue
# took round 6's vllm-1160 and round 7's vllm-2669 to oom_runtime (+1 category each, short).
# The weak layer (triage/weak.py, data/weak_cues.yaml) took the no-root count down where a log's only
# anomaly is a weak cue: round 8 short 2 -> 1 (vLLM 0.8's `hit rate: GPU: 0.00%`), round 10 short
# 3 -> 2 and embedded 4 -> 2 (`slot unavailable`, a zero-hit benchmark's `fallback`), round 11 short
# 2 -> 1 (`n_cache_tokens=0`), round 12 short 2 -> 0 (LMCache's `not found, skipping`, `f_keep: 0.00`)
# and embedded 2 -> 1 (the `f_keep` statistic does not count beside a healthy start-up); no category
# or line was lost on any round.
# Merged (round-13 learning + weak layer), round 13 reaches 53/68, 60/68, 2 short and 56, 59, 3 embedded.
# The floors below are what each round reaches on the merged code.
# Round 14 learned (branch i10-learn14): 55/66, 62/66, 2 short and 57/66, 61/66, 3 embedded (from 43, 56, 4
# and 47, 56, 4 on main); rounds 6-13 and the corpus did not move.
# The structural layers (branch i10-structural: computed checks, repetition, uniform dedent) raised round
# 13 to 54, 61, 2 short and 57, 60, 3 embedded (llama-cpp-21099's pos_min > n_past), round 14 short to
# 55, 63, 1 (lmcache-1142's endless `Waiting for … core engine proc(s)`: line, not category) and round 15
# to 48, 53, 3 short and 49, 50, 5 embedded (the five cases its README lists as structural).
# Round 17 learned (branch i10-learn17): 48/63, 56/63, 3 short and 52/63, 56/63, 3 embedded (from 40, 50, 6
# and 45, 50, 6 on main at 7aa9254); its segfault stack lean also took round 10's sglang-23489 (a segfault
# inside SGLang's NIXL connector) to nccl_network: round 10 60, 57, 2 short and 59, 57, 2 embedded (from 59
# and 58). The other rounds and the corpus did not move.
# Round 18 learned (branch i10-learn18): 43/49, 45/49, 1 short and 45/49, 44/49, 2 embedded (from 32, 41, 4
# and 34, 40, 5 on main); the corpus and rounds 6-16 did not move.
LEARNED_FLOOR = {
    "round6.jsonl": {"short": (66, 67, 0), "embedded": (62, 63, 4)},
    "round7.jsonl": {"short": (62, 62, 0), "embedded": (63, 61, 1)},
    "round8.jsonl": {"short": (63, 60, 1), "embedded": (63, 59, 2)},
    "round9.jsonl": {"short": (56, 65, 1), "embedded": (57, 64, 2)},
    "round10.jsonl": {"short": (60, 57, 2), "embedded": (59, 57, 2)},
    "round11.jsonl": {"short": (57, 61, 1), "embedded": (56, 59, 3)},
    "round12.jsonl": {"short": (51, 59, 0), "embedded": (52, 60, 1)},
    "round13.jsonl": {"short": (54, 61, 2), "embedded": (57, 60, 3)},
    "round14.jsonl": {"short": (55, 63, 1), "embedded": (57, 61, 3)},
    "round15.jsonl": {"short": (48, 53, 3), "embedded": (49, 50, 5)},
    "round16.jsonl": {"short": (56, 57, 4), "embedded": (59, 57, 4)},
    "round17.jsonl": {"short": (48, 56, 3), "embedded": (52, 56, 3)},
    "round18.jsonl": {"short": (43, 45, 1), "embedded": (45, 44, 2)},
    "round19.jsonl": {"short": (74, 83, 2), "embedded": (77, 83, 2)},
    "round20.jsonl": {"short": (68, 75, 0), "embedded": (68, 73, 2)},
}


@pytest.mark.parametrize("path", LEARNED_ROUNDS, ids=lambda p: p.name)
def test_learned_round_short_stays_at_its_learned_level(path, capsys):
    score, misses = score_short(load_corpus(path))
    with capsys.disabled():
        print(f"\n[learned {path.name}, short — NOT blind] {score}")
        for m in misses:
            print("   miss:", m)
    category, line, no_root = LEARNED_FLOOR[path.name]["short"]
    assert score.category >= category and score.line >= line and score.no_root <= no_root


@pytest.mark.parametrize("path", LEARNED_ROUNDS, ids=lambda p: p.name)
def test_learned_round_embedded_stays_at_its_learned_level(path, tmp_path, capsys):
    score, misses = score_embedded(load_corpus(path), tmp_path)
    with capsys.disabled():
        print(f"\n[learned {path.name}, embedded — NOT blind] {score}")
        for m in misses:
            print("   miss:", m)
    category, line, no_root = LEARNED_FLOOR[path.name]["embedded"]
    assert score.category >= category and score.line >= line and score.no_root <= no_root
