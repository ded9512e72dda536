"""Inline SVG line charts for the offline acceptance sheet (no JavaScript, no external assets).

Every label goes through ``html.escape``; numbers are formatted here, so nothing from a run reaches
the markup unescaped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf")


@dataclass
class Series:
    label: str
    points: list[tuple[float, float]]
    dashed: bool = False


def nice_ticks(upper: float, count: int = 5) -> list[float]:
    """0 .. a round number >= upper in ``count``-ish round steps (1, 2, 2.5, 5 x 10^k)."""
    if upper <= 0 or not math.isfinite(upper):
        return [0.0, 1.0]
    raw = upper / count
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    n = math.ceil(upper / step - 1e-9)
    return [round(i * step, 10) for i in range(n + 1)]


def fmt(v: float) -> str:
    if v == 0:
        return "0"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}".rstrip("0").rstrip(".")
    return f"{v:.2f}".rstrip("0").rstrip(".")


def line_chart(
    series: list[Series],
    *,
    title: str,
    x_label: str,
    y_label: str,
    categorical_x: bool = False,
    y_max: float | None = None,
    width: int = 540,
    height: int = 300,
) -> str:
    """A line chart as an ``<svg>`` element. With ``categorical_x`` the distinct x values are spaced
    evenly (concurrency 1, 2, 4, 8 ... reads better than on a linear axis)."""
    left, right, top, bottom = 64, 130, 32, 48
    plot_w, plot_h = width - left - right, height - top - bottom
    xs = sorted({x for s in series for x, _ in s.points})
    ys = [y for s in series for _, y in s.points]
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" aria-label="{escape(title)}">',
        f"<title>{escape(title)}</title>",
        f'<text x="{width / 2:.0f}" y="18" text-anchor="middle" class="chart-title">{escape(title)}</text>',
    ]
    if not xs or not ys:
        parts.append(
            f'<text x="{width / 2:.0f}" y="{height / 2:.0f}" text-anchor="middle" class="muted">no data recorded</text>'
        )
        parts.append("</svg>")
        return "".join(parts)

    ticks = nice_ticks(y_max if y_max is not None else max(ys))
    top_y = ticks[-1] or 1.0

    def px(x: float) -> float:
        if categorical_x:
            i = xs.index(x)
            return left + (plot_w * (i + 0.5) / len(xs))
        lo, hi = xs[0], xs[-1]
        return left + (plot_w * ((x - lo) / (hi - lo) if hi > lo else 0.5))

    def py(y: float) -> float:
        return top + plot_h - plot_h * min(max(y, 0.0), top_y) / top_y

    for t in ticks:
        y = py(t)
        parts.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" class="grid"/>')
        parts.append(
            f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" class="tick">{escape(fmt(t))}</text>'
        )
    x_ticks = xs if categorical_x or len(xs) <= 8 else [xs[0] + (xs[-1] - xs[0]) * i / 6 for i in range(7)]
    for x in x_ticks:
        parts.append(
            f'<text x="{px(x):.1f}" y="{top + plot_h + 16}" text-anchor="middle" class="tick">{escape(fmt(x))}</text>'
        )
    parts.append(
        f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" class="axis"/>'
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" class="axis"/>'
        f'<text x="{left + plot_w / 2:.0f}" y="{height - 8}" text-anchor="middle" class="axis-label">{escape(x_label)}</text>'
        f'<text transform="translate(14 {top + plot_h / 2:.0f}) rotate(-90)" text-anchor="middle" '
        f'class="axis-label">{escape(y_label)}</text>'
    )
    for i, s in enumerate(series):
        color = PALETTE[i % len(PALETTE)]
        pts = sorted(s.points)
        if not pts:
            continue
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
        dash = ' stroke-dasharray="6 4"' if s.dashed else ""
        parts.append(
            f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"{dash}>'
            f"<title>{escape(s.label)}</title></polyline>"
        )
        for x, y in pts:
            parts.append(
                f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{color}">'
                f"<title>{escape(s.label)}: {escape(fmt(x))} → {escape(fmt(y))}</title></circle>"
            )
        ly = top + 4 + 16 * i
        parts.append(
            f'<rect x="{left + plot_w + 10}" y="{ly}" width="10" height="10" fill="{color}"/>'
            f'<text x="{left + plot_w + 24}" y="{ly + 9}" class="legend">{escape(s.label)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)
