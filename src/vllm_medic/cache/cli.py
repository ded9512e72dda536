"""`vllm-medic cache flag|diff|probe`: the three conditions for prefix-cache reuse, one subcommand each."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from vllm_medic.cli_common import JsonOpt, JunitOpt, StrictOpt, VerboseOpt, emit_findings
from vllm_medic.errors import UsageError

if TYPE_CHECKING:
    from vllm_medic.cache.flag import FlagInputs

cache_app = typer.Typer(
    name="cache",
    help="Prefix caching: did the flag reach the engine (flag), are the prefixes identical token for token "
    "(diff), does a live server reuse them (probe)?",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
)

ApiKeyEnvOpt = Annotated[
    str, typer.Option("--api-key-env", help="Environment variable holding the server's API key (never argv).")
]


def register(app: typer.Typer) -> None:
    app.add_typer(cache_app, name="cache")


def _read_text(path: Path, what: str) -> str:
    from vllm_medic.safeio import MAX_FILE_BYTES, read_text

    return read_text(path, MAX_FILE_BYTES, what)


def _read_log_lines(path: Path) -> list[str]:
    """A log file as lines: gzip or plain, any encoding, ANSI colours (VLLM_LOGGING_COLOR) removed; the
    file and its decompression are capped (safeio.MAX_FILE_BYTES)."""
    from vllm_medic.safeio import MAX_FILE_BYTES, gunzip_capped, read_bytes
    from vllm_medic.triage.normalize import decode, strip_ansi

    raw, _cut = read_bytes(path, MAX_FILE_BYTES, "log")
    if raw[:2] == b"\x1f\x8b":
        try:
            raw, _cut = gunzip_capped(raw)
        except (OSError, EOFError) as exc:
            raise UsageError(f"log {path} looks gzipped but cannot be read: {exc}") from exc
    return [strip_ansi(decode(line)) for line in raw.split(b"\n")]  # decode() caps each line's length


def _check_url(url: str, what: str) -> str:
    """A server URL must be http(s)://host[:port]: anything else is a usage error (exit 2), not a failed
    request (exit 3) with an aiohttp message. ``host:port`` means ``http://host:port``, as in `accept`."""
    from urllib.parse import urlparse

    url = url.strip()
    if "://" not in url:
        url = "http://" + url
    try:
        parsed = urlparse(url)
        host, _port = parsed.hostname, parsed.port
    except ValueError as exc:  # `http://[::1` (unclosed IPv6 bracket) fails in urlparse itself
        raise UsageError(f"{what} {url!r} is not a valid URL ({exc})") from exc
    if parsed.scheme not in ("http", "https") or not host or any(c.isspace() for c in url):
        raise UsageError(f"{what} {url!r} is not an http(s) URL (expected e.g. http://127.0.0.1:8000)")
    return url


def _api_key(env_name: str) -> str | None:
    import os

    return os.environ.get(env_name) or None


@cache_app.command("flag")
def flag_command(
    launch: Annotated[
        str | None,
        typer.Option(
            "--launch",
            help="Launch command text or a file: shell script, docker inspect JSON, K8s/Helm YAML.",
        ),
    ] = None,
    log: Annotated[
        Path | None, typer.Option("--log", help="Engine log from startup (non-default args, engine config).")
    ] = None,
    server: Annotated[
        str | None, typer.Option("--server", help="Live server URL: reads vllm:cache_config_info.")
    ] = None,
    model_config: Annotated[
        Path | None, typer.Option("--model-config", help="Model config.json (or dir) to know the default.")
    ] = None,
    hybrid: Annotated[
        bool | None,
        typer.Option("--hybrid/--not-hybrid", help="Say whether the model is hybrid (KDA/mamba/linear)."),
    ] = None,
    api_key_env: ApiKeyEnvOpt = "VLLM_API_KEY",
    as_json: JsonOpt = False,
    junit: JunitOpt = None,
    strict: StrictOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Did --enable-prefix-caching reach the engine? Names the layer that dropped or overrode it."""
    from vllm_medic.cache.flag import FlagInputs, guess_hybrid, retention_note, verdict

    inp = FlagInputs()
    launch_env: dict[str, str] = {}
    extra: dict[str, object] = {}
    if launch is not None:
        _read_launch(launch, inp, launch_env, extra)
    if log is not None:
        _read_flag_log(log, inp)
    rows: list[dict[str, str]] = []
    if server is not None:
        rows = _read_server(server, api_key_env, inp, extra)
    if hybrid is not None:
        inp.hybrid, inp.hybrid_basis = hybrid, "--hybrid" if hybrid else "--not-hybrid"
    elif model_config is not None:
        inp.hybrid, inp.hybrid_basis = _hybrid_from_config(model_config)
    else:
        inp.hybrid, inp.hybrid_basis = guess_hybrid(inp.launch_model, inp.log, rows)
    findings = verdict(inp)
    retention = retention_note(
        inp.hybrid,
        rows,
        launch_env,
        metrics_source=f"{server}/metrics" if server is not None else None,
        log_mode=inp.log.mamba_mode if inp.log else None,
    )
    if retention is not None:
        findings.append(retention)
    extra["layers"] = _layers_seen(inp)
    extra["hybrid"] = inp.hybrid
    code = emit_findings(
        findings,
        as_json=as_json,
        junit=junit,
        strict=strict,
        suite="vllm-medic cache flag",
        extra=extra,
        title="Prefix caching: did the flag reach the engine?",
        verbose=verbose,
    )
    raise typer.Exit(int(code))


def _read_launch(launch: str, inp: FlagInputs, launch_env: dict[str, str], extra: dict[str, object]) -> None:
    """The launch layer (command text or a file), plus the retention env the launch sets."""
    from vllm_medic.cache.flag import launch_layer
    from vllm_medic.collect.api import check_launch_argument
    from vllm_medic.collect.launch import parse_launch

    check_launch_argument(launch)  # `--launch /no/such/file` is exit 2, not a command line running nothing
    path = Path(launch) if "\n" not in launch and len(launch) < 4096 else None
    is_file = path is not None and path.is_file()
    text = _read_text(path, "launch file") if is_file and path else launch
    parsed = parse_launch(text, source="file" if is_file else "argv")
    launch_env.update(parsed.env)
    if parsed.args.get("prefix_cache_retention_interval") is not None:
        launch_env["VLLM_PREFIX_CACHE_RETENTION_INTERVAL"] = str(
            parsed.args["prefix_cache_retention_interval"]
        )
    name = str(path) if is_file else "(command line)"
    inp.launch, inp.launch_order = launch_layer(parsed.args, parsed.argv, name, text)
    if parsed.warnings:
        inp.launch.evidence += f" (launch parser: {'; '.join(parsed.warnings[:2])})"
    inp.launch_model = parsed.model
    extra["launch"] = {
        "model": parsed.model,
        "enable_prefix_caching": inp.launch.value,
        "warnings": parsed.warnings,
    }


def _read_flag_log(log: Path, inp: FlagInputs) -> None:
    """The log layers (non-default args, engine config); a log with neither is named as empty input."""
    from vllm_medic.cache.flag import read_log

    lines = _read_log_lines(log)
    inp.log = read_log(lines, str(log))
    if not (inp.log.non_default or inp.log.engine):
        readable = sum(1 for line in lines if line.strip())
        inp.empty_inputs.append(
            f"log {log}: no 'non-default args' or engine-config line among {readable} non-empty line(s) "
            "(not a vLLM startup log, or binary?)"
        )


def _read_server(
    server: str, api_key_env: str, inp: FlagInputs, extra: dict[str, object]
) -> list[dict[str, str]]:
    """The metrics layer: the live server's vllm:cache_config_info rows."""
    from vllm_medic.cache.flag import metrics_layers

    rows = _server_cache_config(_check_url(server, "--server"), _api_key(api_key_env))
    inp.metrics = metrics_layers(rows, f"{server}/metrics")
    extra["cache_config_info"] = rows
    if not rows:
        inp.empty_inputs.append(
            f"server {server}/metrics: no vllm:cache_config_info sample (not a vLLM /metrics page?)"
        )
    return rows


def _hybrid_from_config(model_config: Path) -> tuple[bool, str]:
    """(hybrid, basis) from the model's config.json: linear-attention layers make it hybrid."""
    from vllm_medic.plan.inputs import read_model
    from vllm_medic.plan.shape import parse_model_config

    try:
        shape = parse_model_config(read_model(str(model_config)).config)
    except ValueError as exc:
        raise UsageError(f"--model-config {model_config}: {exc}") from exc
    layers = (
        f"{shape.count('linear')} linear-attention layers" if shape.hybrid else "no linear-attention layers"
    )
    return shape.hybrid, f"{model_config}: {shape.architecture or shape.model_type}, {layers}"


def _layers_seen(inp: FlagInputs) -> list[dict[str, object]]:
    """Every layer that said something about the flag, in the order the engine applies them."""
    log_layers = [lv for lv in (inp.log.non_default, inp.log.engine) if lv] if inp.log else []
    return [
        {"layer": lv.layer, "value": lv.value, "evidence": lv.evidence}
        for lv in ([inp.launch] if inp.launch else []) + log_layers + inp.metrics
    ]


def _server_cache_config(url: str, api_key: str | None) -> list[dict[str, str]]:
    import asyncio

    from vllm_medic.serve.client import ServerClient

    async def fetch() -> list[dict[str, str]]:
        async with ServerClient(url, api_key=api_key) as client:
            return (await client.metrics()).cache_config_info()

    return asyncio.run(fetch())


def _load_requests(path: Path) -> list[dict]:
    """A JSON request, a JSON list of requests, or JSONL (one request per line)."""
    import json

    from vllm_medic.cache.diff import NotAChatRequest, check_chat
    from vllm_medic.safeio import loads_json

    text = _read_text(path, "request file")
    if not text.strip():
        raise UsageError(f"{path} is empty")
    try:
        data = loads_json(text)
        items = data if isinstance(data, list) else [data]
        names = [f"{path}[{i}]" if isinstance(data, list) else str(path) for i in range(len(items))]
    except json.JSONDecodeError as whole_err:
        items, names = [], []
        for no, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                items.append(loads_json(line))
            except json.JSONDecodeError as exc:
                if no == 1:
                    raise UsageError(
                        f"{path} is not valid JSON ({whole_err}) nor JSONL (line 1: {exc})"
                    ) from exc
                raise UsageError(f"{path}:{no} is not valid JSON: {exc}") from exc
            names.append(f"{path}:{no}")
    try:
        return [check_chat(req, name) for req, name in zip(items, names, strict=True)]
    except NotAChatRequest as exc:
        raise UsageError(str(exc)) from exc


@cache_app.command("diff")
def diff_command(
    a: Annotated[Path, typer.Argument(help="First request (JSON), or a JSONL of captured requests.")],
    b: Annotated[
        Path | None,
        typer.Argument(help="Second request (JSON/JSONL); omit to compare A's requests in order."),
    ] = None,
    server: Annotated[
        str | None, typer.Option("--server", help="Tokenize with this server's /tokenize (chat template).")
    ] = None,
    tokenizer: Annotated[
        Path | None,
        typer.Option("--tokenizer", help="Local tokenizer.json (or model dir); needs vllm-medic[tokenizer]."),
    ] = None,
    block_size: Annotated[
        int | None, typer.Option("--block-size", min=1, help="KV block size (default: from the server).")
    ] = None,
    api_key_env: ApiKeyEnvOpt = "VLLM_API_KEY",
    as_json: JsonOpt = False,
    junit: JunitOpt = None,
    strict: StrictOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Where two chat requests stop sharing a prefix, in tokens, blocks and JSON location, and why."""
    from vllm_medic.cache.diff_run import compare_pairs

    if server is not None:
        server = _check_url(server, "--server")
    reqs_a = _load_requests(a)
    if b is not None:
        reqs_b = _load_requests(b)
        if len(reqs_a) != len(reqs_b):
            raise UsageError(
                f"{a} has {len(reqs_a)} request(s) and {b} has {len(reqs_b)}: compare files of equal length"
            )
        pairs = list(zip(reqs_a, reqs_b, strict=True))
        labels = (
            [f"{a}#{i + 1} vs {b}#{i + 1}" for i in range(len(pairs))] if len(pairs) > 1 else [f"{a} vs {b}"]
        )
    else:
        if len(reqs_a) < 2:
            raise UsageError(f"{a} holds one request: give a second file, or a JSONL of several requests")
        pairs = list(zip(reqs_a, reqs_a[1:], strict=False))
        labels = [f"{a}#{i + 1} vs #{i + 2}" for i in range(len(pairs))]
    report, findings = compare_pairs(
        pairs,
        labels,
        server=server,
        api_key=_api_key(api_key_env),
        tokenizer=tokenizer,
        block_size=block_size,
    )
    code = emit_findings(
        findings,
        as_json=as_json,
        junit=junit,
        strict=strict,
        suite="vllm-medic cache diff",
        extra=report,
        title="Prefix caching: are the prefixes identical?",
        verbose=verbose,
    )
    raise typer.Exit(int(code))


def _probe_extra_requests(request: Path | None) -> list[tuple[str, dict[str, Any]]]:
    """``--request``: the user's own fixed request, streamed with usage, sent twice before the probe's."""
    if request is None:
        return []
    body = _load_requests(request)[0]
    body = {**body, "stream": True, "stream_options": {"include_usage": True}}
    body.setdefault("max_tokens", 4)
    return [("your request#1", body), ("your request#2 (repeat)", body)]


def _probe_env(launch: str | None, retention_interval: int | None) -> dict[str, str]:
    """The server environment the retention model reads: ``--launch``, then ``--retention-interval``."""
    env: dict[str, str] = {}
    if launch is not None:
        from vllm_medic.collect.launch import parse_launch

        parsed = parse_launch(launch)
        env.update(parsed.env)
        if parsed.args.get("prefix_cache_retention_interval") is not None:
            env.setdefault(
                "VLLM_PREFIX_CACHE_RETENTION_INTERVAL", str(parsed.args["prefix_cache_retention_interval"])
            )
    if retention_interval is not None:
        env["VLLM_PREFIX_CACHE_RETENTION_INTERVAL"] = str(retention_interval)
    return env


class _ProbeSink:
    """Where each request goes as it finishes (``--out`` JSON lines, ``--store`` history) and the run's end."""

    def __init__(self, out: Path | None, store: str | None, url: str, filler_repeats: int) -> None:
        self.out_file = None
        self.history: Any = None
        self.run_id: str | None = None
        if out is not None:
            try:
                self.out_file = out.open("w", encoding="utf-8")
            except OSError as exc:
                raise UsageError(f"cannot write --out {out}: {exc.strerror or exc}") from exc
        if store is not None:
            from vllm_medic.store.api import open_store

            self.history = open_store(None if store == "default" else store)
            self.run_id = self.history.start_run("cache-probe", url, {"filler_repeats": filler_repeats})

    def save(self, rec: Any) -> None:  # a ProbeRecord, imported lazily
        import json

        from vllm_medic.redact import redact_obj

        if self.out_file is not None:
            self.out_file.write(json.dumps(redact_obj(rec.to_dict()), ensure_ascii=False) + "\n")
            self.out_file.flush()
        if self.history is not None and self.run_id is not None:
            self.history.record_event(self.run_id, "cache_probe_request", rec.to_dict())

    def interrupted(self, exc: BaseException) -> None:
        if self.history is not None and self.run_id is not None:
            self.history.mark_interrupted(self.run_id, f"{type(exc).__name__}: {exc}")
            self.history.close()

    def close_out(self) -> None:
        if self.out_file is not None:
            self.out_file.close()

    def finish(self, findings: list[Any], verdict: str) -> None:
        if self.history is None or self.run_id is None:
            return
        from vllm_medic.model import Severity, worst_severity
        from vllm_medic.store.step_row import StepRow

        worst = worst_severity(findings)
        self.history.record_step(
            self.run_id,
            StepRow.of(
                "prefix-cache probe",
                {Severity.FAIL: "fail", Severity.WARN: "warn"}.get(worst, "pass"),
                findings,
                {"verdict": verdict},
            ),
        )
        self.history.finish_run(self.run_id, "fail" if worst is Severity.FAIL else "pass")
        self.history.close()


def _probe_payload(report: Any, out: Path | None, run_id: str | None) -> dict[str, Any]:
    """The ``--json`` fields beyond the findings: the probe's verdict, policy and every request."""
    policy = report.policy
    return {
        "url": report.url,
        "verdict": report.verdict,
        "flag_on": report.flag_on,
        "engines": report.engines,
        "cache_config_info": report.cache_config,
        "retention_policy": None
        if policy is None
        else {
            "block_size": policy.block_size,
            "hybrid": policy.hybrid,
            "mamba_cache_mode": policy.mamba_cache_mode,
            "interval": policy.interval,
            "hash_block_size": policy.hash_block_size,
            "sources": list(policy.sources),
        },
        "requests": [r.to_dict() for r in report.records],
        "notes": report.notes,
        "out": str(out) if out else None,
        "run_id": run_id,
    }


_ProbeLogsOpt = Annotated[
    Path | None, typer.Option("--logs", help="The server's log file: keep the lines written per request.")
]
_ProbeOutOpt = Annotated[
    Path | None, typer.Option("--out", help="Write one JSON line per request here (as they finish).")
]
_ProbeRequestOpt = Annotated[
    Path | None,
    typer.Option("--request", help="Your own fixed chat request (JSON): sent twice before the probe's."),
]
_FillerRepeatsOpt = Annotated[
    int, typer.Option("--filler-repeats", min=1, max=20000, help="Length of the fixed prefix.")
]
_RetentionIntervalOpt = Annotated[
    int | None,
    typer.Option(
        "--retention-interval",
        help="VLLM_PREFIX_CACHE_RETENTION_INTERVAL of the server, if /metrics lacks it.",
    ),
]
_ProbeLaunchOpt = Annotated[
    str | None,
    typer.Option(
        "--launch",
        help="The server's launch (text or file): VLLM_PREFIX_CACHE_RETENTION_INTERVAL, mamba mode.",
    ),
]
_ProbeStoreOpt = Annotated[
    str | None,
    typer.Option("--store", help="Also record the run in the history: a SQLAlchemy URL, or 'default'."),
]
_ProbeTimeoutOpt = Annotated[
    str,
    typer.Option("--timeout", help="Per-request timeout, e.g. 60s, 5m (default 300s).", metavar="DURATION"),
]


@cache_app.command("probe")
def probe_command(
    url: Annotated[str, typer.Argument(help="Server base URL, e.g. http://127.0.0.1:8000")],
    logs: _ProbeLogsOpt = None,
    out: _ProbeOutOpt = None,
    request: _ProbeRequestOpt = None,
    filler_repeats: _FillerRepeatsOpt = 12,
    retention_interval: _RetentionIntervalOpt = None,
    launch: _ProbeLaunchOpt = None,
    store: _ProbeStoreOpt = None,
    timeout: _ProbeTimeoutOpt = "300s",
    api_key_env: ApiKeyEnvOpt = "VLLM_API_KEY",
    as_json: JsonOpt = False,
    junit: JunitOpt = None,
    strict: StrictOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Send a fixed request, repeats and variants; say whether prefix caching is effective and why not.

    On a terminal a progress line (requests done/planned, hits, errors, time left) is drawn on stderr
    while the requests are sent; it is quiet in pipes, in CI and with --json."""
    import asyncio

    from vllm_medic.accept.options import parse_duration
    from vllm_medic.cache.probe import probe_findings, run_probe
    from vllm_medic.progress import LiveLine, wanted

    url = _check_url(url, "URL")
    timeout_s = parse_duration(timeout, "--timeout")
    extra = _probe_extra_requests(request)
    env = _probe_env(launch, retention_interval)
    sink = _ProbeSink(out, store, url, filler_repeats)
    try:
        report = asyncio.run(
            run_probe(
                url,
                api_key=_api_key(api_key_env),
                filler_repeats=filler_repeats,
                log_path=logs,
                env=env,
                extra_requests=extra,
                on_record=sink.save,
                timeout_s=timeout_s,
                live=LiveLine(wanted(as_json)),
            )
        )
    except BaseException as exc:
        sink.interrupted(exc)
        raise
    finally:
        sink.close_out()
    findings = probe_findings(report)
    sink.finish(findings, report.verdict)
    code = emit_findings(
        findings,
        as_json=as_json,
        junit=junit,
        strict=strict,
        suite="vllm-medic cache probe",
        extra=_probe_payload(report, out, sink.run_id),
        title=f"Prefix caching on {url}: {report.verdict}",
        verbose=verbose,
    )
    raise typer.Exit(int(code))
