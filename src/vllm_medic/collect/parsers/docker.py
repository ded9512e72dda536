"""`docker image inspect IMAGE` (JSON) and `docker images --digests` (table)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from vllm_medic.redact import redact_env
from vllm_medic.snapshot import Image

_CUDA_LABELS = ("com.nvidia.cuda.version", "cuda.version", "org.opencontainers.image.cuda.version")


@dataclass
class ImageResult:
    image: Image = field(default_factory=Image)
    absent: bool = False  # the whole answer was `[]` / "No such image": not present locally
    partial: list[str] = field(default_factory=list)  # a filtered inspect (jq, --format): only some fields
    fragment: dict[str, Any] = field(default_factory=dict)  # what a filtered inspect showed, as shown
    problems: list[str] = field(default_factory=list)


@dataclass
class ImagesTableResult:
    rows: list[dict[str, str]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


_FILTER = re.compile(r"(--format|-f)[= ]|\|\s*jq\b")
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


def parse_image_inspect(
    text: str, requested: str | None = None, commands: list[str] | None = None
) -> ImageResult:
    """`docker image inspect IMAGE` JSON, or a fragment of it filtered with `jq` / `--format`
    (one object, a list of strings, a bare `"sha256:..."`): what the fragment shows is kept and
    the result is partial. `[]` means "not present locally" only when it is the whole, unfiltered answer."""
    result = ImageResult()
    filtered = next((c for c in commands or [] if _FILTER.search(c)), None)
    body = text.strip()
    if "No such image" in body or "No such object" in body:
        result.absent = True
        result.fragment["error"] = body.splitlines()[-1][:200]
        return result
    start = min((i for i in (body.find("["), body.find("{")) if i >= 0), default=-1)
    if start < 0:
        if _fragment_scalar(body, filtered, result):
            return result
        result.problems.append("no JSON in the output")
        return result
    try:
        data: Any = json.loads(body[start:])
    except json.JSONDecodeError as exc:
        if _go_template_list(body, filtered, result):
            return result
        result.problems.append(
            f"not valid JSON ({exc.msg} at line {exc.lineno}); fields salvaged from the text"
        )
        result.partial.append("the JSON is cut short: only the fields before the cut were read")
        _salvage(body[start:], result.image, requested)
        return result
    if data == [] and filtered is None:
        result.absent = True
        return result
    items = data if isinstance(data, list) else [data]
    obj = next((x for x in items if isinstance(x, dict)), None)
    if obj is None or not _is_image_object(obj):
        _fragment(data, filtered, result, requested)
        return result
    if filtered:
        result.partial.append(f"filtered (`{filtered}`): only the fields the filter kept")
    config = obj.get("Config") or obj.get("ContainerConfig") or {}
    img = result.image
    tags = [str(t) for t in obj.get("RepoTags") or []]
    img.tag = requested or (tags[0] if tags else None)
    img.repo_digests = [str(d) for d in obj.get("RepoDigests") or []]
    img.digest = _pick_digest(img.repo_digests, img.tag)
    img.id = obj.get("Id")
    img.created = obj.get("Created")
    env: dict[str, str] = {}
    for item in config.get("Env") or []:
        key, _, value = str(item).partition("=")
        env[key] = value
    img.env = redact_env(env)
    labels = config.get("Labels") or {}
    img.labels = {str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict) else {}
    img.entrypoint = [str(x) for x in config.get("Entrypoint") or []]
    img.cmd = [str(x) for x in config.get("Cmd") or []]
    img.cuda_version = env.get("CUDA_VERSION") or env.get("NV_CUDA_CUDART_VERSION_MAJOR_MINOR")
    if not img.cuda_version:
        for label in _CUDA_LABELS:
            if img.labels.get(label):
                img.cuda_version = img.labels[label]
                break
    if not img.cuda_version:
        req = env.get("NVIDIA_REQUIRE_CUDA", "")
        m = re.search(r"cuda>=(\d+\.\d+)", req)
        if m:
            img.cuda_version = m.group(1)
    return result


def _is_image_object(obj: dict[str, Any]) -> bool:
    return any(k in obj for k in ("Id", "RepoTags", "RepoDigests", "Config", "ContainerConfig", "Created"))


def _fragment(data: Any, filtered: str | None, result: ImageResult, requested: str | None) -> None:
    """A piece of the inspect JSON (what `jq '.[0].RepoDigests'` or `--format '{{json .Config}}'` printed)."""
    how = f"`{filtered}`" if filtered else "no command line pasted"
    img = result.image
    img.tag = requested
    strings = [x for x in data if isinstance(x, str)] if isinstance(data, list) else []
    if isinstance(data, list) and data and len(strings) == len(data):
        if all("@sha256:" in s for s in strings):
            img.repo_digests = strings
            img.digest = _pick_digest(strings, requested)
            result.fragment["RepoDigests"] = strings
        elif all(_DIGEST.match(s) for s in strings):
            result.fragment["digests"] = strings
        elif all("=" in s for s in strings):
            env = dict(s.partition("=")[::2] for s in strings)
            img.env = redact_env(env)
            img.cuda_version = env.get("CUDA_VERSION")
            result.fragment["Env"] = sorted(env)
        else:
            result.fragment["strings"] = strings
            if all(":" in s and "@" not in s for s in strings):
                img.tag = requested or strings[0]
                result.fragment["RepoTags"] = strings
        result.partial.append(f"a fragment of docker inspect ({how}): a list of {len(strings)} string(s)")
        return
    if isinstance(data, list) and not data:
        result.fragment["empty_list"] = True
        result.partial.append(f"a filtered inspect printed [] ({how}): an empty field, not a missing image")
        return
    if isinstance(data, dict):
        keys = sorted(data)
        result.fragment["keys"] = keys
        env = {str(x).partition("=")[0]: str(x).partition("=")[2] for x in data.get("Env") or []}
        if env:
            img.env = redact_env(env)
            img.cuda_version = env.get("CUDA_VERSION") or env.get("NV_CUDA_CUDART_VERSION_MAJOR_MINOR")
        labels = data.get("Labels")
        if isinstance(labels, dict):
            img.labels = {str(k): str(v) for k, v in labels.items()}
        img.entrypoint = [str(x) for x in data.get("Entrypoint") or []]
        img.cmd = [str(x) for x in data.get("Cmd") or []]
        result.partial.append(f"a fragment of docker inspect ({how}): an object with {', '.join(keys[:8])}")
        return
    result.problems.append(f"a JSON {type(data).__name__} that is not a docker inspect answer")


def _fragment_scalar(body: str, filtered: str | None, result: ImageResult) -> bool:
    """A bare value: `"sha256:..."` (`--format '{{.Id}}'`, `jq .Digest`) or `repo@sha256:...`."""
    value = body.strip().strip('"').strip("'")
    if "\n" in value:
        return False
    how = f"`{filtered}`" if filtered else "no command line pasted"
    if "@sha256:" in value:
        result.image.repo_digests = [value]
        result.image.digest = value.partition("@")[2]
        result.fragment["RepoDigests"] = [value]
    elif _DIGEST.match(value):
        field_name = None
        if filtered and re.search(r"\.Id\b", filtered):
            result.image.id = value
            field_name = "Id"
        elif filtered and re.search(r"Digest", filtered):
            result.image.digest = value
            field_name = "Digest"
        result.fragment[field_name or "sha256"] = value
        if field_name is None:
            result.problems.append(
                "a bare sha256 value with no command line: an image ID or a digest, not known which"
            )
    else:
        return False
    result.partial.append(f"a single value from docker inspect ({how})")
    return True


def _go_template_list(body: str, filtered: str | None, result: ImageResult) -> bool:
    """`--format '{{.RepoDigests}}'` prints a Go list: `[repo@sha256:... repo2@sha256:...]`."""
    m = re.fullmatch(r"\[([^\[\]\n]*)\]", body.strip())
    if not m:
        return False
    items = m.group(1).split()
    if items and all("@sha256:" in i for i in items):
        result.image.repo_digests = items
        result.image.digest = _pick_digest(items, None)
        result.fragment["RepoDigests"] = items
        how = f"`{filtered}`" if filtered else "no command line pasted"
        result.partial.append(f"docker inspect --format output ({how}): the RepoDigests list only")
        return True
    return False


_SALVAGE_ID = re.compile(r'"Id"\s*:\s*"(sha256:[0-9a-f]{64})"')
_SALVAGE_LIST = r'"{key}"\s*:\s*\[(?P<body>[^\]]*)'
_SALVAGE_ENV = re.compile(r'"(?P<k>CUDA_VERSION|NV_CUDA_CUDART_VERSION|NVIDIA_REQUIRE_CUDA)=(?P<v>[^"]*)"')


def _salvage(text: str, img: Image, requested: str | None) -> None:
    """Truncated `docker inspect` (a paste cut short): keep the fields that are complete."""
    m = _SALVAGE_ID.search(text)
    img.id = m.group(1) if m else None
    lists: dict[str, list[str]] = {}
    for key in ("RepoTags", "RepoDigests"):
        found = re.search(_SALVAGE_LIST.format(key=key), text)
        lists[key] = re.findall(r'"([^"]+)"', found.group("body")) if found else []
    img.tag = requested or (lists["RepoTags"][0] if lists["RepoTags"] else None)
    img.repo_digests = lists["RepoDigests"]
    img.digest = _pick_digest(img.repo_digests, img.tag)
    env = {m.group("k"): m.group("v") for m in _SALVAGE_ENV.finditer(text)}
    img.cuda_version = env.get("CUDA_VERSION")
    if not img.cuda_version and env.get("NVIDIA_REQUIRE_CUDA"):
        req = re.search(r"cuda>=(\d+\.\d+)", env["NVIDIA_REQUIRE_CUDA"])
        img.cuda_version = req.group(1) if req else None


def _pick_digest(repo_digests: list[str], tag: str | None) -> str | None:
    if not repo_digests:
        return None
    repo = tag.rsplit(":", 1)[0] if tag and ":" in tag.split("/")[-1] else tag
    for d in repo_digests:
        name, _, digest = d.partition("@")
        if repo and name == repo:
            return digest
    return repo_digests[0].partition("@")[2] or None


def parse_images_digests(text: str) -> ImagesTableResult:
    """`docker images --digests`: REPOSITORY TAG DIGEST IMAGE ID CREATED SIZE (columns by position)."""
    result = ImagesTableResult()
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    header_at = next((i for i, line in enumerate(lines) if line.startswith("REPOSITORY")), None)
    if header_at is None:
        if lines:
            result.problems.append("no 'REPOSITORY TAG DIGEST ...' header")
        return result
    for line in lines[header_at + 1 :]:
        parts = re.split(r"\s{2,}", line.strip())
        if len(parts) < 3:
            continue
        row = {"repository": parts[0], "tag": parts[1], "digest": parts[2]}
        if len(parts) > 3:
            row["image_id"] = parts[3]
        if len(parts) > 4:
            row["created"] = parts[4]
        if len(parts) > 5:
            row["size"] = parts[5]
        result.rows.append(row)
    return result
