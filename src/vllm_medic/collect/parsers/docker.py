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
    problems: list[str] = field(default_factory=list)


@dataclass
class ImagesTableResult:
    rows: list[dict[str, str]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def parse_image_inspect(text: str, requested: str | None = None) -> ImageResult:
    result = ImageResult()
    body = text.strip()
    start = min((i for i in (body.find("["), body.find("{")) if i >= 0), default=-1)
    if start < 0:
        result.problems.append("no JSON in the output")
        return result
    try:
        data: Any = json.loads(body[start:])
    except json.JSONDecodeError as exc:
        result.problems.append(
            f"not valid JSON ({exc.msg} at line {exc.lineno}); fields salvaged from the text"
        )
        _salvage(body[start:], result.image, requested)
        return result
    items = data if isinstance(data, list) else [data]
    obj = next((x for x in items if isinstance(x, dict)), None)
    if obj is None:
        result.problems.append("the JSON holds no image object (empty list: image not present locally?)")
        return result
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
