"""Read a vLLM launch however the user has it: a command line, a shell script, `docker run`,
`docker inspect` JSON, or a Kubernetes / Helm-rendered manifest, into one `Launch`.

`Launch.args` maps argparse dests (``tensor_parallel_size``, ``enable_prefix_caching``...) to typed
values so rules never re-parse strings. Secrets (``--api-key``, ``*_TOKEN`` env) are masked here,
before anything is stored or printed. Parsing never raises on odd input: what could not be read
goes to ``Launch.warnings``.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from vllm_medic.redact import MASK, is_secret_name, redact_argv, redact_env, redact_text
from vllm_medic.snapshot import Launch

_SHELL_SEPARATORS = {"&&", "||", ";", "|", "&"}
_VLLM_MODULE = re.compile(r"^vllm\.entrypoints\.(openai\.api_server|api_server|cli\.main)$")
_ENV_ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.DOTALL)
_K8S_VAR = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")
_SHELL_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")
_CONTAINER_CLIS = {"docker", "podman", "nerdctl"}

# docker run options that take no value (everything else unknown is assumed to take one).
_DOCKER_BOOL_OPTS = {
    "--rm",
    "-d",
    "--detach",
    "-i",
    "--interactive",
    "-t",
    "--tty",
    "--privileged",
    "--init",
    "-P",
    "--publish-all",
    "--read-only",
    "--sig-proxy",
    "--no-healthcheck",
    "--oom-kill-disable",
    "-q",
    "--quiet",
}
_DOCKER_SHORT_BOOL_LETTERS = set("ditP")
# docker run options recorded in Launch.runtime_options (the ones preflight rules read).
_DOCKER_RUNTIME_KEYS = {
    "--gpus": "gpus",
    "--ipc": "ipc",
    "--shm-size": "shm_size",
    "--runtime": "runtime",
    "--network": "network",
    "--net": "network",
    "--name": "name",
    "--ulimit": "ulimit",
    "--device": "device",
    "-v": "volume",
    "--volume": "volume",
    "--mount": "mount",
    "-p": "publish",
    "--publish": "publish",
    "--entrypoint": "entrypoint",
    "--env-file": "env_file",
    "--cap-add": "cap_add",
}
_DOCKER_REPEATABLE = {"ulimit", "device", "volume", "mount", "publish", "env_file", "cap_add"}


@dataclass(frozen=True)
class _ArgSpec:
    short_aliases: dict[str, str]
    bool_flags: frozenset[str]
    int_args: frozenset[str]
    float_args: frozenset[str]
    list_args: frozenset[str]
    human_int_args: frozenset[str]


@cache
def _spec() -> _ArgSpec:
    import yaml

    text = resources.files("vllm_medic.collect").joinpath("data/vllm_args.yaml").read_text(encoding="utf-8")
    data = yaml.safe_load(text) or {}
    return _ArgSpec(
        short_aliases=dict(data.get("short_aliases") or {}),
        bool_flags=frozenset(data.get("bool_flags") or ()),
        int_args=frozenset(data.get("int_args") or ()),
        float_args=frozenset(data.get("float_args") or ()),
        list_args=frozenset(data.get("list_args") or ()),
        human_int_args=frozenset(data.get("human_int_args") or ()),
    )


def parse_launch(text_or_argv: str | list[str], source: str = "argv") -> Launch:
    """Parse a launch given as argv, command text, a file path, JSON or YAML. Never raises."""
    try:
        return _parse_launch(text_or_argv, source)
    except Exception as exc:  # noqa: BLE001 - a launch we cannot read is a warning, not a crash
        return Launch(source=source, warnings=[f"could not parse the launch: {type(exc).__name__}: {exc}"])


def _parse_launch(text_or_argv: str | list[str], source: str) -> Launch:
    if isinstance(text_or_argv, list | tuple):
        launch = _from_argv([str(a) for a in text_or_argv], {}, [])
        launch.source = source
        return finalize_launch(launch)
    text = str(text_or_argv)
    path = _as_existing_file(text)
    if path is not None:
        from vllm_medic.errors import UsageError
        from vllm_medic.safeio import read_arg_text

        try:
            text = read_arg_text(path, "launch file")
        except UsageError as exc:
            return Launch(source=source, warnings=[str(exc)])
        if source == "argv":
            source = "file"
    launch = parse_launch_text(text)
    launch.source = source
    _apply_config_file(launch, path.parent if path is not None else Path.cwd())
    return finalize_launch(launch)


def parse_launch_text(text: str) -> Launch:
    """Sniff the text's format (JSON, Kubernetes YAML, shell) and parse it."""
    stripped = text.strip()
    if not stripped:
        return Launch(warnings=["the launch text is empty"])
    if stripped[0] in "[{":
        try:
            data = json.loads(stripped)
        except json.JSONDecodeError:
            data = None
        if data is not None:
            return _from_json(data)
    if _looks_like_manifest(stripped):
        return _from_manifest(stripped)
    return _from_shell(text)


def _as_existing_file(text: str) -> Path | None:
    if "\n" in text or len(text) > 4096 or not text.strip():
        return None
    candidate = Path(os.path.expanduser(text.strip()))
    try:
        return candidate if candidate.is_file() else None
    except OSError:
        return None


def _looks_like_manifest(text: str) -> bool:
    return bool(re.search(r"(?m)^\s*(apiVersion|kind|containers|spec|services)\s*:", text))


# ---------------------------------------------------------------- shell text


def _from_shell(text: str, base_env: dict[str, str] | None = None) -> Launch:
    warnings: list[str] = []
    joined = re.sub(r"\\\r?\n", " ", text)
    script_env: dict[str, str] = dict(base_env or {})
    candidates: list[list[str]] = []
    for tokens in _logical_lines(joined, warnings):
        for segment in _split_segments(tokens):
            if not segment:
                continue
            if segment[0] == "export":
                for item in segment[1:]:
                    m = _ENV_ASSIGN.match(item)
                    if m:
                        script_env[m.group(1)] = m.group(2)
                continue
            if all(_ENV_ASSIGN.match(t) for t in segment):
                for item in segment:
                    m = _ENV_ASSIGN.match(item)
                    if m:
                        script_env[m.group(1)] = m.group(2)
                continue
            if _find_vllm_start(segment) is not None or _container_run_index(segment) is not None:
                candidates.append([_expand_shell_vars(t, script_env) for t in segment])
    if not candidates:
        return Launch(
            env=script_env,
            warnings=[
                *warnings,
                "no vLLM command (vllm serve, python -m vllm.entrypoints..., docker run) found in the launch",
            ],
        )
    if len(candidates) > 1:
        warnings.append(f"{len(candidates)} vLLM commands found; read the first one")
    launch = _from_argv(candidates[0], script_env, warnings)
    return launch


# shlex builds each word a character at a time (quadratic): a 4 MiB word in launch.txt took minutes.
# No vLLM argument is this long; longer words are cut (linear regex) and the launch says so.
MAX_WORD_CHARS = 16 * 1024
_LONG_WORD = re.compile(rf"\S{{{MAX_WORD_CHARS + 1},}}")


def _cap_words(line: str, warnings: list[str]) -> str:
    if len(line) <= MAX_WORD_CHARS:
        return line
    capped = _LONG_WORD.sub(lambda m: m.group(0)[:MAX_WORD_CHARS], line)
    if capped != line and not any("partial:" in w and "KiB" in w for w in warnings):
        warnings.append(
            f"partial: a word over {MAX_WORD_CHARS // 1024} KiB was cut to its first {MAX_WORD_CHARS // 1024} KiB"
        )
    return capped


def _logical_lines(text: str, warnings: list[str]) -> list[list[str]]:
    """Shell words per logical line; a quoted argument spanning lines (a JSON config) stays whole."""
    out: list[list[str]] = []
    pending = ""
    for line in text.splitlines():
        line = _cap_words(line, warnings)
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        candidate = f"{pending}\n{line}" if pending else line
        try:
            out.append(shlex.split(candidate, comments=True, posix=True))
            pending = ""
        except ValueError:
            pending = candidate
            if pending.count("\n") > 200:
                break
    if pending:
        warnings.append("shell quoting not balanced; the rest was split on spaces")
        out.append(pending.split())
    return out


def _split_segments(tokens: list[str]) -> list[list[str]]:
    segments: list[list[str]] = [[]]
    for t in tokens:
        if t in _SHELL_SEPARATORS:
            segments.append([])
        else:
            segments[-1].append(t)
    return segments


def _expand_shell_vars(token: str, env: dict[str, str]) -> str:
    def sub(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        return env.get(name, m.group(0))

    return _SHELL_VAR.sub(sub, token)


# ---------------------------------------------------------------- argv


def _find_vllm_start(argv: list[str]) -> int | None:
    """Index of the first vLLM argument (after `vllm serve` / the api_server module), else None."""
    for i, tok in enumerate(argv):
        base = os.path.basename(tok)
        if base == "vllm" and i + 1 < len(argv) and argv[i + 1] == "serve":
            return i + 2
        if tok == "-m" and i + 1 < len(argv) and _VLLM_MODULE.match(argv[i + 1]):
            module = argv[i + 1]
            start = i + 2
            if module.endswith("cli.main") and start < len(argv) and argv[start] == "serve":
                start += 1
            return start
    return None


def _container_run_index(argv: list[str]) -> int | None:
    for i, tok in enumerate(argv[:-1]):
        if os.path.basename(tok) in _CONTAINER_CLIS and argv[i + 1] in ("run", "create"):
            return i + 2
        if (
            os.path.basename(tok) in _CONTAINER_CLIS
            and argv[i + 1] == "container"
            and i + 2 < len(argv)
            and argv[i + 2] in ("run", "create")
        ):
            return i + 3
    return None


def _from_argv(argv: list[str], env: dict[str, str], warnings: list[str]) -> Launch:
    env = dict(env)
    i = 0
    while i < len(argv) and (_ENV_ASSIGN.match(argv[i]) or argv[i] == "env"):
        m = _ENV_ASSIGN.match(argv[i])
        if m:
            env[m.group(1)] = m.group(2)
        i += 1
    argv = argv[i:]
    launch = Launch(argv=list(argv), env=env, warnings=list(warnings))
    run_at = _container_run_index(argv)
    vllm_at = _find_vllm_start(argv)
    if run_at is not None and (vllm_at is None or run_at < vllm_at):
        _read_container_run(argv[run_at:], launch)
        return launch
    if vllm_at is None:
        launch.warnings.append("no vLLM command (vllm serve, python -m vllm.entrypoints...) found")
        return launch
    positional_model = argv[vllm_at - 1] == "serve"
    _read_vllm_args(argv[vllm_at:], launch, positional_model=positional_model)
    return launch


def _read_container_run(opts: list[str], launch: Launch) -> None:
    """`docker run [OPTIONS] IMAGE [ARGS]`: keep env, GPUs, IPC, shm size; then read ARGS as vLLM's."""
    i = 0
    runtime: dict[str, Any] = {}
    while i < len(opts):
        tok = opts[i]
        if not tok.startswith("-") or tok == "-":
            break
        if tok == "--":
            i += 1
            break
        name, has_eq, value = tok.partition("=")
        is_bool = name in _DOCKER_BOOL_OPTS or (
            not name.startswith("--") and len(name) > 2 and set(name[1:]) <= _DOCKER_SHORT_BOOL_LETTERS
        )
        if is_bool and not has_eq:
            if name == "--privileged":
                runtime["privileged"] = True
            i += 1
            continue
        if not has_eq:
            if i + 1 >= len(opts):
                launch.warnings.append(f"docker option {name} has no value")
                i += 1
                break
            value = opts[i + 1]
            i += 2
        else:
            i += 1
        if name in ("-e", "--env"):
            key, eq, val = value.partition("=")
            if eq:
                launch.env[key] = val
            else:
                # `-e KEY` passes the caller's value at launch time: unknown here, so not recorded as a value
                launch.warnings.append(f"docker -e {key} passes the caller's value; not known here")
        elif name in _DOCKER_RUNTIME_KEYS:
            key = _DOCKER_RUNTIME_KEYS[name]
            if key in _DOCKER_REPEATABLE:
                runtime.setdefault(key, []).append(value)
            else:
                runtime[key] = value
    launch.runtime_options.update(runtime)
    if i >= len(opts):
        launch.warnings.append("docker run without an image")
        return
    launch.image = opts[i]
    rest = opts[i + 1 :]
    entrypoint = runtime.get("entrypoint")
    if entrypoint:
        rest = [str(entrypoint), *rest]
    vllm_at = _find_vllm_start(rest)
    if vllm_at is not None:
        _read_vllm_args(rest[vllm_at:], launch, positional_model=rest[vllm_at - 1] == "serve")
    else:
        # vllm/vllm-openai's entrypoint is `vllm serve`: the container args are vLLM's own.
        _read_vllm_args(rest, launch, positional_model=True)


def _read_vllm_args(args: list[str], launch: Launch, positional_model: bool) -> None:
    spec = _spec()
    parsed: dict[str, Any] = {}
    seen_count: dict[str, int] = {}
    i = 0
    while i < len(args):
        tok = args[i]
        if tok == "--":
            i += 1
            continue
        if not tok.startswith("-") or _is_number(tok):
            if positional_model and launch.model is None:
                launch.model = tok
            else:
                launch.warnings.append(f"unexpected positional argument {tok!r}")
            i += 1
            continue
        name, has_eq, inline = tok.partition("=")
        dest = _dest_for(name, spec)
        if dest is None:
            launch.warnings.append(f"unrecognised option {name!r}")
            i += 1
            continue
        negated = False
        if name.startswith("--no-") and dest.startswith("no_"):
            negated = True
            dest = dest[3:]
        values: list[str]
        if has_eq:
            values = [inline]
            i += 1
        elif negated or dest in spec.bool_flags:
            values = []
            i += 1
        elif dest in spec.list_args:
            j = i + 1
            while j < len(args) and (not args[j].startswith("-") or _is_number(args[j])):
                j += 1
            values = args[i + 1 : j]
            i = j
        elif i + 1 < len(args) and (not args[i + 1].startswith("-") or _is_number(args[i + 1])):
            values = [args[i + 1]]
            i += 2
        else:
            values = []
            i += 1
        value = _typed(dest, values, negated, spec)
        if is_secret_name(dest):
            value = MASK if not isinstance(value, list) else [MASK for _ in value]
        seen_count[dest] = seen_count.get(dest, 0) + 1
        if dest == "model" and isinstance(value, str):
            launch.model = value
        if seen_count[dest] > 1 and dest not in spec.bool_flags and not negated:
            prev = parsed[dest]
            prev_list = prev if isinstance(prev, list) else [prev]
            parsed[dest] = prev_list + (value if isinstance(value, list) else [value])
        else:
            parsed[dest] = value
    if launch.model is not None and "model" not in parsed:
        parsed["model"] = launch.model
    launch.args.update(parsed)


def _dest_for(name: str, spec: _ArgSpec) -> str | None:
    if name in spec.short_aliases:
        return spec.short_aliases[name]
    if name.startswith("--") and len(name) > 2:
        return name[2:].replace("-", "_")
    return None


def _is_number(tok: str) -> bool:
    return bool(re.fullmatch(r"-\d+(\.\d+)?", tok))


def _typed(dest: str, values: list[str], negated: bool, spec: _ArgSpec) -> Any:
    if negated:
        return False
    if not values:
        return True
    if dest in spec.list_args:
        return [_scalar(dest, v, spec) for v in values]
    return _scalar(dest, values[0], spec)


def _scalar(dest: str, raw: str, spec: _ArgSpec) -> Any:
    text = raw.strip()
    if dest in spec.bool_flags:
        low = text.lower()
        if low in ("true", "1", "yes", "on"):
            return True
        if low in ("false", "0", "no", "off"):
            return False
    if dest in spec.int_args:
        number = _int_value(text, human=dest in spec.human_int_args)
        return number if number is not None else text
    if dest in spec.float_args:
        try:
            return float(text)
        except ValueError:
            return text
    if text[:1] in "{[":
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return text
    return text


def _int_value(text: str, human: bool) -> int | None:
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    if human:
        m = re.fullmatch(r"(\d+(?:\.\d+)?)([kmgKMG])", text)
        if m:
            base = 1000 if m.group(2).islower() else 1024
            power = "kmg".index(m.group(2).lower()) + 1
            return int(float(m.group(1)) * base**power)
    return None


# ---------------------------------------------------------------- docker inspect JSON


def _from_json(data: Any) -> Launch:
    items = data if isinstance(data, list) else [data]
    for item in items:
        if isinstance(item, dict) and ("Config" in item or "HostConfig" in item):
            return _from_docker_inspect(item)
        if isinstance(item, dict) and ("spec" in item or "kind" in item or "items" in item):
            return _from_k8s_objects(items)
    return Launch(warnings=["JSON launch is neither `docker inspect` output nor a Kubernetes object"])


def _from_docker_inspect(obj: dict[str, Any]) -> Launch:
    config = obj.get("Config") or {}
    host = obj.get("HostConfig") or {}
    entrypoint = _as_list(config.get("Entrypoint"))
    cmd = _as_list(config.get("Cmd"))
    argv = entrypoint + cmd
    if not argv and obj.get("Path"):
        argv = [str(obj["Path"]), *_as_list(obj.get("Args"))]
    env: dict[str, str] = {}
    for item in _as_list(config.get("Env")):
        key, _, val = item.partition("=")
        env[key] = val
    launch = Launch(argv=argv, env=env, image=config.get("Image") or obj.get("Image"))
    start = _find_vllm_start(argv)
    if start is not None:
        _read_vllm_args(argv[start:], launch, positional_model=argv[start - 1] == "serve")
    else:
        launch.warnings.append("the container's Entrypoint + Cmd does not run vLLM")
    runtime: dict[str, Any] = {}
    if host.get("ShmSize") is not None:
        runtime["shm_size"] = host.get("ShmSize")
    if host.get("IpcMode"):
        runtime["ipc"] = host.get("IpcMode")
    if host.get("Runtime"):
        runtime["runtime"] = host.get("Runtime")
    if host.get("NetworkMode"):
        runtime["network"] = host.get("NetworkMode")
    gpus = []
    for req in host.get("DeviceRequests") or []:
        if isinstance(req, dict) and any("gpu" in c for caps in req.get("Capabilities") or [] for c in caps):
            count = req.get("Count")
            ids = req.get("DeviceIDs")
            gpus.append("all" if count == -1 else (",".join(ids) if ids else str(count)))
    if gpus:
        runtime["gpus"] = gpus[0]
    launch.runtime_options = runtime
    return launch


def _as_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [str(v) for v in value]
    return []


# ---------------------------------------------------------------- Kubernetes manifests


def _from_manifest(text: str) -> Launch:
    import yaml

    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        return Launch(warnings=[f"the manifest is not valid YAML{where}: {getattr(exc, 'problem', exc)}"])
    if any(isinstance(d, dict) and isinstance(d.get("services"), dict) for d in docs):
        return _from_compose(
            next(d for d in docs if isinstance(d, dict) and isinstance(d.get("services"), dict))
        )
    return _from_k8s_objects(docs)


# ---------------------------------------------------------------- docker compose


def _from_compose(doc: dict[str, Any]) -> Launch:
    """A docker-compose service: image, command/entrypoint, environment, ipc, shm_size, GPU devices."""
    services = {str(k): v for k, v in doc["services"].items() if isinstance(v, dict)}
    chosen = [(n, svc) for n, svc in services.items() if _compose_runs_vllm(svc)]
    if not chosen:
        return Launch(warnings=["no service in the compose file runs vLLM"])
    name, svc = chosen[0]
    env = _compose_env(svc.get("environment"))
    entrypoint = _compose_words(svc.get("entrypoint"))
    command = _compose_words(svc.get("command"))
    argv = [_expand_shell_vars(a, env) for a in entrypoint + command]
    launch = Launch(argv=argv, env=env, image=str(svc["image"]) if svc.get("image") else None)
    script = _shell_script_of(argv)
    if script is not None:
        inner = _from_shell(script, base_env=env)
        inner.image = launch.image
        launch = inner
    elif _find_vllm_start(argv) is not None:
        start = _find_vllm_start(argv) or 0
        _read_vllm_args(argv[start:], launch, positional_model=argv[start - 1] == "serve")
    else:
        _read_vllm_args(argv, launch, positional_model=True)  # the vllm-openai entrypoint is `vllm serve`
    runtime: dict[str, Any] = {}
    for key in ("ipc", "shm_size", "runtime", "network_mode"):
        if svc.get(key) is not None:
            runtime[{"network_mode": "network"}.get(key, key)] = svc[key]
    devices = (((svc.get("deploy") or {}).get("resources") or {}).get("reservations") or {}).get(
        "devices"
    ) or []
    for dev in devices if isinstance(devices, list) else []:
        if isinstance(dev, dict) and "gpu" in [str(c) for c in dev.get("capabilities") or []]:
            runtime["gpus"] = str(dev.get("count", ",".join(map(str, dev.get("device_ids") or []))))
    launch.runtime_options.update(runtime)
    if len(chosen) > 1:
        launch.warnings.append(f"{len(chosen)} compose services run vLLM; read the first ({name})")
    return launch


def _compose_runs_vllm(svc: dict[str, Any]) -> bool:
    words = _compose_words(svc.get("entrypoint")) + _compose_words(svc.get("command"))
    image = str(svc.get("image") or "")
    return _find_vllm_start(words) is not None or "vllm" in image or any("vllm serve" in w for w in words)


def _compose_words(value: Any) -> list[str]:
    if isinstance(value, list):
        return [str(v) for v in value]
    if isinstance(value, str):
        try:
            return shlex.split(value)
        except ValueError:
            return value.split()
    return []


def _compose_env(value: Any) -> dict[str, str]:
    if isinstance(value, dict):
        return {str(k): "" if v is None else str(v) for k, v in value.items()}
    env: dict[str, str] = {}
    for item in value if isinstance(value, list) else []:
        key, _, val = str(item).partition("=")
        env[key] = val
    return env


def _from_k8s_objects(docs: list[Any]) -> Launch:
    containers: list[tuple[dict[str, Any], dict[str, Any]]] = []
    for doc in docs:
        _collect_containers(doc, containers)
    if not containers:
        return Launch(warnings=["no containers[] found in the manifest"])
    launches: list[Launch] = []
    for c, pod in containers:
        launch = _from_k8s_container(c)
        if launch.args or launch.model:
            launch.runtime_options.update(_pod_runtime(c, pod))
            launches.append(launch)
    if not launches:
        first = _from_k8s_container(containers[0][0])
        first.warnings.append("no container in the manifest runs vLLM")
        return first
    chosen = launches[0]
    if len(launches) > 1:
        chosen.warnings.append(f"{len(launches)} containers run vLLM; read the first ({chosen.image})")
    return chosen


def _collect_containers(node: Any, out: list[tuple[dict[str, Any], dict[str, Any]]]) -> None:
    """(container, the pod spec holding it) for every containers[] entry, however deep."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "containers" and isinstance(value, list):
                out.extend((c, node) for c in value if isinstance(c, dict))
            else:
                _collect_containers(value, out)
    elif isinstance(node, list):
        for item in node:
            _collect_containers(item, out)


def _pod_runtime(container: dict[str, Any], pod: dict[str, Any]) -> dict[str, Any]:
    """Pod-level settings vLLM cares about: hostIPC, hostNetwork, and a memory emptyDir on /dev/shm."""
    runtime: dict[str, Any] = {}
    if pod.get("hostIPC") is True:
        runtime["ipc"] = "host"
    if pod.get("hostNetwork") is True:
        runtime["network"] = "host"
    shm_volumes = {
        str(m.get("name"))
        for m in container.get("volumeMounts") or []
        if isinstance(m, dict) and m.get("mountPath") == "/dev/shm"
    }
    for vol in pod.get("volumes") or []:
        if isinstance(vol, dict) and str(vol.get("name")) in shm_volumes:
            empty = vol.get("emptyDir")
            if isinstance(empty, dict) and empty.get("medium") == "Memory":
                runtime["shm_size"] = str(empty.get("sizeLimit") or "unlimited (node memory)")
    return runtime


def _from_k8s_container(c: dict[str, Any]) -> Launch:
    env: dict[str, str] = {}
    warnings: list[str] = []
    for item in c.get("env") or []:
        if not isinstance(item, dict) or "name" not in item:
            continue
        name = str(item["name"])
        if "value" in item:
            env[name] = "" if item["value"] is None else str(item["value"])
        elif "valueFrom" in item:
            env[name] = f"<from {next(iter(item['valueFrom'] or {'ref': ''}))}>"
    command = [_k8s_expand(str(x), env, warnings) for x in _as_list(c.get("command"))]
    args = [_k8s_expand(str(x), env, warnings) for x in _as_list(c.get("args"))]
    argv = command + args
    image = str(c["image"]) if c.get("image") else None
    script = _shell_script_of(argv)
    if script is not None:
        launch = _from_shell(script, base_env=env)
        launch.warnings = warnings + launch.warnings
    elif _find_vllm_start(argv) is not None:
        launch = _from_argv(argv, env, warnings)
    elif not command and args:
        # No command: the image entrypoint (vllm serve for vllm/vllm-openai) receives the args.
        launch = Launch(argv=argv, env=env, warnings=warnings)
        _read_vllm_args(args, launch, positional_model=True)
    else:
        launch = Launch(argv=argv, env=env, warnings=warnings)
    launch.image = launch.image or image
    resources_ = c.get("resources") or {}
    limits = resources_.get("limits") if isinstance(resources_, dict) else None
    if isinstance(limits, dict):
        gpu = limits.get("nvidia.com/gpu") or limits.get("amd.com/gpu")
        if gpu is not None:
            launch.runtime_options["gpus"] = str(gpu)
    return launch


def _shell_script_of(argv: list[str]) -> str | None:
    """`sh -c "..."` / `bash -lc "..."` (in command, args or split across both) -> the script."""
    for i, tok in enumerate(argv[:-1]):
        base = os.path.basename(tok)
        if base in ("sh", "bash", "dash", "zsh"):
            j = i + 1
            while j < len(argv) and argv[j].startswith("-"):
                if "c" in argv[j][1:]:
                    return " ".join(argv[j + 1 : j + 2]) if j + 1 < len(argv) else None
                j += 1
    if argv and argv[0] in ("-c", "-lc", "-ec"):
        return argv[1] if len(argv) > 1 else None
    return None


def _k8s_expand(value: str, env: dict[str, str], warnings: list[str]) -> str:
    def sub(m: re.Match[str]) -> str:
        name = m.group(1)
        if name in env:
            return env[name]
        warnings.append(f"$({name}) is not defined in the container env; left as is")
        return m.group(0)

    return _K8S_VAR.sub(sub, value)


# ---------------------------------------------------------------- finishing


def _apply_config_file(launch: Launch, base: Path) -> None:
    """`vllm serve --config FILE.yaml`: its keys are arguments too; the command line wins."""
    config = launch.args.get("config")
    if not isinstance(config, str):
        return
    from vllm_medic.errors import UsageError
    from vllm_medic.safeio import read_arg_text

    path = config_file_path(launch, base)
    if path is not None and not path.exists():
        launch.warnings.append(f"--config {config}: file not found here; its arguments were not read")
        return
    try:
        text = read_arg_text(path, "--config file") if path is not None else ""
    except UsageError as exc:  # a FIFO, a device, a directory, unreadable: named, never blocked on
        launch.warnings.append(f"{exc}; its arguments were not read")
        return
    merge_config_text(launch, text)


def config_file_path(launch: Launch, base: Path) -> Path | None:
    """Where `--config FILE` points, resolved against the launch file's directory."""
    config = launch.args.get("config")
    if not isinstance(config, str):
        return None
    path = Path(os.path.expanduser(config))
    return path if path.is_absolute() else base / path


def merge_config_text(launch: Launch, text: str) -> None:
    """Merge a `--config` YAML's arguments into the launch; the command line wins, as in vLLM."""
    import yaml

    config = launch.args.get("config")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        launch.warnings.append(f"--config {config}: not valid YAML ({getattr(exc, 'problem', exc)})")
        return
    if not isinstance(data, dict):
        launch.warnings.append(f"--config {config}: not a mapping of arguments")
        return
    spec = _spec()
    for key, value in data.items():
        dest = str(key).replace("-", "_")
        if dest in launch.args:
            continue  # the command line overrides the config file, as in vLLM
        if isinstance(value, str):
            value = _scalar(dest, value, spec)
        launch.args[dest] = MASK if is_secret_name(dest) else value
        if dest == "model" and isinstance(value, str) and launch.model is None:
            launch.model = value


def finalize_launch(launch: Launch) -> Launch:
    """Name unresolved variables, mask secrets, fill `model`: the last step of every parse."""
    unresolved = sorted(
        k for k, v in launch.args.items() if isinstance(v, str) and re.search(r"\$(\{|\()?[A-Za-z_]", v)
    )
    for key in unresolved:
        launch.warnings.append(
            f"--{key.replace('_', '-')} {launch.args[key]}: a variable not defined in the launch"
        )
    launch.argv = redact_argv(launch.argv)
    launch.env = redact_env(launch.env)
    launch.warnings = [redact_text(w) for w in launch.warnings]
    if launch.model is None and isinstance(launch.args.get("model"), str):
        launch.model = launch.args["model"]
    return launch
