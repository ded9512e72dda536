"""The acceptance sheet: one self-contained offline HTML file (inline CSS, inline SVG, no script).

Driver, image and topology live on the same sheet as the verdict (MISSION point 8). Every value from
the run is redacted and then ``html.escape``d; a Content-Security-Policy forbids any network fetch or
script, so the file is safe to mail around and open anywhere.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from html import escape
from importlib import resources
from typing import Any

from vllm_medic import __version__
from vllm_medic.accept_steps import STEP_NAMES, numbered_title
from vllm_medic.redact import redact_argv, redact_obj
from vllm_medic.report.svg import Series, fmt, line_chart
from vllm_medic.store import views

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"
SEVERITY_GLYPH = {"pass": "✓", "not_checked": "?", "info": "•", "warn": "!", "fail": "✗"}


def _e(v: Any) -> str:
    return escape("" if v is None else str(v), quote=True)


def _badge(status: str | None, extra: str = "") -> str:
    s = (status or "unknown").lower()
    return f'<span class="badge {_e(s)}{" " + extra if extra else ""}">{_e(VERDICT_TEXT.get(s, s))}</span>'


def _link(url: str) -> str:
    if url.startswith(("https://", "http://")):
        return f'<a href="{_e(url)}" rel="noreferrer noopener">{_e(url)}</a>'
    return _e(url)


def _css() -> str:
    return resources.files("vllm_medic.report").joinpath("sheet.css").read_text(encoding="utf-8")


def _num_cell(v: float | int | None, suffix: str = "") -> str:
    return f'<td class="num">{_e(fmt(float(v)) + suffix) if v is not None else "–"}</td>'


def _finding(f: dict[str, Any]) -> str:
    sev = str(f.get("severity", "info"))
    out = [
        f'<div class="finding {_e(sev)}"><div><b>[{_e(SEVERITY_GLYPH.get(sev, "?"))}] {_e(f.get("title"))}</b> '
        f'<span class="id">{_e(f.get("id"))} · {_e(f.get("category"))} · {_e(sev)}</span></div>'
    ]
    if f.get("evidence"):
        out.append(
            "<div>Evidence:</div><ul>"
            + "".join(f"<li><code>{_e(e)}</code></li>" for e in f["evidence"])
            + "</ul>"
        )
    if f.get("fix"):
        out.append("<div>Fix:</div><ol>" + "".join(f"<li>{_e(s)}</li>" for s in f["fix"]) + "</ol>")
    if f.get("docs"):
        out.append("<div class='muted'>Docs: " + " · ".join(_link(str(d)) for d in f["docs"]) + "</div>")
    out.append("</div>")
    return "".join(out)


def _ordered_steps(run: dict[str, Any]) -> list[dict[str, Any]]:
    steps = list(run.get("steps") or [])
    rank = {n: i for i, n in enumerate(STEP_NAMES)}
    return sorted(steps, key=lambda s: (rank.get(s.get("name"), len(rank)), steps.index(s)))


def _summary(run: dict[str, Any]) -> str:
    rows = []
    for s in _ordered_steps(run):
        sevs = [str(f.get("severity")) for f in s.get("findings") or []]
        counts = (
            ", ".join(
                f"{sevs.count(k)} {k}"
                for k in ("fail", "warn", "not_checked", "info", "pass")
                if sevs.count(k)
            )
            or "–"
        )
        worst = next(
            (f for k in ("fail", "warn") for f in s.get("findings") or [] if f.get("severity") == k), None
        )
        headline = worst.get("title") if worst else (s.get("data") or {}).get("skipped_reason", "")
        name = str(s.get("name"))
        rows.append(
            f'<tr><td><a href="#step-{_e(name)}">{_e(numbered_title(name))}</a></td><td>{_badge(s.get("status"))}</td>'
            f"<td>{_e(counts)}</td><td>{_e(headline)}</td></tr>"
        )
    if not rows:
        return "<p class='muted'>No step was recorded.</p>"
    return (
        "<table><tr><th>Step</th><th>Status</th><th>Findings</th><th>Headline</th></tr>"
        + "".join(rows)
        + "</table>"
    )


def _results(run: dict[str, Any]) -> str:
    levels = views.ramp_levels(run)
    ratio = views.prefix_hit_ratio(run)
    stop = views.ramp_stop_reason(run)
    out = ["<h2 id='results'>Results</h2><table class='meta'>"]
    out.append(f"<tr><td>Max sustainable concurrency</td><td>{_e(views.concurrency_text(run))}</td></tr>")
    if stop:
        out.append(f"<tr><td>Ramp stopped because</td><td>{_e(stop)}</td></tr>")
    out.append(
        f"<tr><td>Prefix-cache hit ratio</td><td>{_e(f'{ratio:.1%}' if ratio is not None else '–')}</td></tr></table>"
    )
    if levels:
        head = (
            "<tr><th>Concurrency</th><th>Status</th><th>Requests</th><th>Errors</th><th>Timeouts</th>"
            "<th>TTFT p50</th><th>TTFT p99</th><th>TPOT p50</th><th>TPOT p99</th><th>ITL p99</th>"
            "<th>E2E p50</th><th>E2E p99</th><th>req/s</th><th>out tok/s</th><th>KV max</th><th>Preempt.</th>"
            "<th>Queue max</th><th>GPU mem peak</th><th>Restarts</th><th>Note</th></tr>"
        )
        rows = []
        for lv in levels:
            lat = lv.latency_ms
            rows.append(
                f"<tr><td class='num'>{lv.concurrency}</td><td>{_badge(lv.status)}</td>"
                + _num_cell(lv.requests)
                + _num_cell(lv.errors)
                + _num_cell(lv.timeouts)
                + "".join(
                    _num_cell(lat.get(m, {}).get(p), " ms")
                    for m, p in (
                        ("ttft", "p50"),
                        ("ttft", "p99"),
                        ("tpot", "p50"),
                        ("tpot", "p99"),
                        ("itl", "p99"),
                        ("e2e", "p50"),
                        ("e2e", "p99"),
                    )
                )
                + _num_cell(lv.requests_per_s)
                + _num_cell(lv.output_tokens_per_s)
                + _num_cell(None if lv.kv_cache_usage_max is None else lv.kv_cache_usage_max * 100, " %")
                + _num_cell(lv.preemptions)
                + _num_cell(lv.queue_max)
                + _num_cell(lv.gpu_memory_peak_mib, " MiB")
                + _num_cell(lv.restarts)
                + f"<td>{_e(lv.reason)}</td></tr>"
            )
        out.append(
            "<h3>Concurrency ramp</h3><div class='wide'><table>" + head + "".join(rows) + "</table></div>"
        )
    out.append("<div class='charts'>")
    for metric, label in (("ttft", "TTFT"), ("tpot", "TPOT"), ("itl", "ITL"), ("e2e", "E2E")):
        series = [
            Series(
                f"{label} {p}",
                [
                    (lv.concurrency, lv.latency_ms[metric][p])
                    for lv in levels
                    if p in lv.latency_ms.get(metric, {})
                ],
                dashed=p != "p50",
            )
            for p in ("p50", "p90", "p99")
        ]
        series = [s for s in series if s.points]
        if series:
            out.append(
                line_chart(
                    series,
                    title=f"{label} percentiles vs concurrency",
                    x_label="concurrency",
                    y_label="ms",
                    categorical_x=True,
                )
            )
    tput = [
        Series(
            "output tokens/s",
            [(lv.concurrency, lv.output_tokens_per_s) for lv in levels if lv.output_tokens_per_s is not None],
        ),
    ]
    rps = Series(
        "requests/s", [(lv.concurrency, lv.requests_per_s) for lv in levels if lv.requests_per_s is not None]
    )
    if levels:
        out.append(
            line_chart(
                [s for s in tput if s.points] or [rps],
                title="Throughput vs concurrency",
                x_label="concurrency",
                y_label="output tokens/s" if tput[0].points else "requests/s",
                categorical_x=True,
            )
        )
    samples = views.soak_samples(run)
    kv = [(s.t_s, s.kv_cache_usage * 100) for s in samples if s.kv_cache_usage is not None]
    if samples or views.step(run, "soak"):
        out.append(
            line_chart(
                [Series("KV-cache usage", kv)],
                title="KV-cache usage over the soak",
                x_label="seconds",
                y_label="%",
                y_max=100,
            )
        )
        p99 = [(s.t_s, s.e2e_p99_ms) for s in samples if s.e2e_p99_ms is not None]
        if p99:
            out.append(
                line_chart(
                    [Series("E2E p99", p99)], title="E2E p99 over the soak", x_label="seconds", y_label="ms"
                )
            )
    out.append("</div>")
    return "".join(out)


VERDICT_TEXT = {"pass_unverified": "pass (environment not verified)", "not_verified": "not verified"}


def _environment_verdict(run: dict[str, Any]) -> str:
    env = views.environment_verdict(run)
    status = str(env.get("status"))
    out = [
        "<h2 id='environment-verdict'>Environment verdict</h2>",
        f"<p>{_badge(status)} ",
    ]
    if status == "not_verified":
        out.append(f"{_e(env.get('reason') or '')}</p>")
        out.append(
            "<p class='muted'>Nothing was archived and checked: run <code>vllm-medic collect</code> on the "
            "server host and pass <code>--bundle</code> (with <code>--recipe</code>), or rerun accept there.</p>"
        )
        return "".join(out)
    c = env.get("counts") or {}
    out.append(
        f"recipe {_e(env.get('recipe'))}; evidence: {_e(env.get('evidence_from'))}; "
        f"{_e(c.get('fail', 0))} fail, {_e(c.get('warn', 0))} warn, {_e(c.get('not_checked', 0))} not checked, "
        f"{_e(c.get('pass', 0))} pass</p>"
    )
    findings = env.get("findings") or []
    if findings:
        out.append("".join(_finding(f) for f in findings if isinstance(f, dict)))
    else:
        out.append("<p class='muted'>No check failed, warned or was left unchecked.</p>")
    return "".join(out)


def _environment(run: dict[str, Any], snapshot: dict[str, Any] | None) -> str:
    env = views.environment(run, snapshot)
    rows = [
        ("Driver", env["driver"]),
        ("CUDA (driver)", env["cuda"]),
        ("Image", env["image"]),
        ("Image digest", env["image_digest"]),
        ("vLLM", env["vllm"]),
        ("GPUs", f"{env['gpu_count']} × {', '.join(env['gpus'])}" if env["gpus"] else env["gpu_count"]),
        ("Host", env["host"]),
    ]
    out = ["<h2 id='environment'>Environment</h2><table class='meta'>"]
    out += [
        f"<tr><td>{_e(k)}</td><td>{_e(v) if v not in (None, '') else '<span class=muted>not recorded</span>'}</td></tr>"
        for k, v in rows
    ]
    out.append("</table>")
    out.append(
        "<h3>Topology</h3>"
        + (f"<pre>{_e(env['topology'])}</pre>" if env["topology"] else "<p class='muted'>not recorded</p>")
    )
    args = redact_argv(env["launch_args"])
    out.append(
        "<h3>Launch arguments</h3>"
        + (f"<pre>{_e(' '.join(args))}</pre>" if args else "<p class='muted'>not recorded</p>")
    )
    logs = env["key_log_lines"]
    out.append(
        "<h3>Key log lines</h3>"
        + (
            "<pre class='logs'>" + "\n".join(_e(line) for line in logs) + "</pre>"
            if logs
            else "<p class='muted'>none recorded</p>"
        )
    )
    return "".join(out)


def _steps(run: dict[str, Any]) -> str:
    out = ["<h2 id='steps'>Steps</h2>"]
    for s in _ordered_steps(run):
        name = str(s.get("name"))
        out.append(
            f"<section id='step-{_e(name)}'><h3>{_e(numbered_title(name))} {_badge(s.get('status'))}</h3>"
        )
        findings = s.get("findings") or []
        if findings:
            out.extend(_finding(f) for f in findings)
        else:
            out.append("<p class='muted'>No findings recorded.</p>")
        data = s.get("data") or {}
        if data:
            out.append(
                "<details><summary>Measurements (JSON)</summary><pre>"
                + _e(json.dumps(data, indent=2, ensure_ascii=False, default=str)[:200_000])
                + "</pre></details>"
            )
        out.append("</section>")
    return "".join(out)


def render_sheet(run: dict[str, Any], snapshot: dict[str, Any] | None = None) -> str:
    """The whole sheet as one HTML string. ``run`` is ``Store.get_run``'s dict; ``snapshot`` the run's
    ``snapshot.json`` attachment, if any."""
    event_count = len(run.get("events") or [])
    # Only the events the sheet draws are re-redacted (defence in depth: the store redacted them already);
    # per-request records can number in the hundred thousands and are not shown.
    drawn = [
        e for e in run.get("events") or [] if isinstance(e, dict) and e.get("kind") in views.SHEET_EVENT_KINDS
    ]
    run = redact_obj({**run, "events": drawn})
    snapshot = redact_obj(snapshot) if snapshot else None
    verdict = run.get("verdict") or ("incomplete" if run.get("status") != "running" else "running")
    title = f"Acceptance sheet — {run.get('target') or run.get('run_id')}"
    head = (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f'<meta http-equiv="Content-Security-Policy" content="{_e(CSP)}">'
        "<meta name='referrer' content='no-referrer'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{_e(title)}</title><style>{_css()}</style></head><body>"
    )
    meta_rows = [
        ("Run", run.get("run_id")),
        ("Kind", run.get("kind")),
        ("Target", run.get("target")),
        ("Status", run.get("status")),
        ("Started", run.get("started_at")),
        ("Finished", run.get("finished_at") or "–"),
    ]
    if run.get("reason"):
        meta_rows.append(("Why incomplete", run.get("reason")))
    header = (
        f"<header><h1>{_e(title)}</h1><p>Verdict: <span id='verdict'>{_badge(verdict, 'verdict')}</span></p>"
        "<table class='meta'>"
        + "".join(f"<tr><td>{_e(k)}</td><td>{_e(v)}</td></tr>" for k, v in meta_rows)
        + "</table></header>"
    )
    attachments = run.get("attachments") or []
    att = (
        "<h2 id='archive'>Archived items</h2><table><tr><th>Name</th><th>Type</th><th>Bytes</th></tr>"
        + "".join(
            f"<tr><td>{_e(a.get('name'))}</td><td>{_e(a.get('media_type'))}</td>{_num_cell(a.get('size'))}</tr>"
            for a in attachments
        )
        + "</table>"
        if attachments
        else ""
    )
    generated = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    footer = (
        f"<footer>Generated by vllm-medic {_e(__version__)} at {_e(generated)} · events recorded: "
        f"{event_count} · secrets redacted · this file loads nothing from the network.</footer>"
    )
    body = (
        header
        + "<h2 id='summary'>Summary</h2>"
        + _summary(run)
        + _results(run)
        + _environment_verdict(run)
        + _environment(run, snapshot)
        + _steps(run)
        + att
        + footer
    )
    return head + body + "</body></html>\n"
