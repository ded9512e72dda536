"""Accuracy on the labelled real-log corpus, short and embedded in real-vLLM noise across rank files."""

from accuracy import load_corpus, score_embedded, score_short


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
    assert score.pct(score.category) >= 90.0
    assert score.pct(score.line) >= 80.0
    # The point of the tool: it must beat "first line with error/warn/traceback" clearly.
    assert score.line > score.naive_line


def test_embedded_in_rank_noise_meets_targets(tmp_path, capsys):
    score, misses = score_embedded(load_corpus(), tmp_path)
    with capsys.disabled():
        print(f"\n[triage accuracy, embedded in 4 rank files of real-vLLM noise] {score}")
        for m in misses:
            print("   miss:", m)
    assert score.pct(score.category) >= 90.0
    assert score.pct(score.line) >= 80.0
