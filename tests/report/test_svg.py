"""The inline SVG charts: round axis ticks, escaped labels, a clear 'no data' chart."""

from __future__ import annotations

from xml.etree import ElementTree as ET

from vllm_medic.report.svg import Series, line_chart, nice_ticks


def test_nice_ticks_cover_the_maximum_in_round_steps() -> None:
    assert nice_ticks(0.93) == [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert nice_ticks(1000) == [0.0, 200.0, 400.0, 600.0, 800.0, 1000.0]
    assert nice_ticks(1100)[-1] >= 1100
    assert nice_ticks(0) == [0.0, 1.0]


def test_chart_is_well_formed_svg_with_escaped_labels() -> None:
    svg = line_chart(
        [Series("p99 <b>&", [(1, 10.0), (2, 30.0), (4, 25.0)])],
        title="TTFT <script>",
        x_label="concurrency",
        y_label="ms",
        categorical_x=True,
    )
    root = ET.fromstring(svg)  # parses: well-formed XML, so nothing broke out of an attribute or text
    ns = "{http://www.w3.org/2000/svg}"
    assert root.find(f"{ns}title").text == "TTFT <script>"
    assert len(root.findall(f"{ns}circle")) == 3
    assert not root.findall(f".//{ns}script")
    points = root.find(f"{ns}polyline").get("points").split()
    xs = [float(p.split(",")[0]) for p in points]
    assert xs == sorted(xs) and len(set(xs)) == 3


def test_chart_without_points_says_so() -> None:
    svg = line_chart([Series("kv", [])], title="KV", x_label="s", y_label="%")
    assert "no data recorded" in svg
    ET.fromstring(svg)
