"""Load a recipe by shipped name or path: our YAML, or an official vllm-project/recipes model file.

A malformed recipe is a usage error (exit 2) whose message names the file and the field.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from vllm_medic.errors import UsageError
from vllm_medic.recipes.model import (
    Architecture,
    BadImage,
    DriverFloor,
    Floor,
    HardwareBaseline,
    ImageSpec,
    Network,
    OfficialProfile,
    Recipe,
    RequiredFlag,
    Sourced,
)

OUR_SCHEMA = "vllm-medic/recipe/v1"
SHIPPED = ("kimi-k3", "generic")

# Keys of an official strategy_min_gpus map that name hardware, not strategies (e.g. "h100: 32").
HARDWARE_KEYS = {
    "h100", "h200", "h20", "h800", "b200", "b300", "gb200", "gb300", "a100",
    "mi300x", "mi325x", "mi350x", "mi355x", "l40s",
}  # fmt: skip


@dataclass(frozen=True)
class RecipeInfo:
    name: str
    title: str
    model: str | None
    source: str


def list_recipes() -> list[RecipeInfo]:
    out = []
    for name in SHIPPED:
        r = load_recipe(name)
        out.append(RecipeInfo(r.name, r.title, r.model_id, r.source))
    return out


def load_recipe(name_or_path: str) -> Recipe:
    """A shipped name ("kimi-k3", "generic") or a YAML path (ours or an official model file)."""
    key = (name_or_path or "").strip()
    if key in SHIPPED:
        return _parse_ours(_shipped_doc(key), f"shipped:{key}", origin="shipped")
    path = Path(key).expanduser()
    if not path.exists():
        raise UsageError(
            f"unknown recipe {key!r}: shipped recipes are {', '.join(SHIPPED)}; "
            "or give the path of a recipe YAML file (ours or an official vllm-project/recipes model file)"
        )
    if path.is_dir():
        raise UsageError(f"recipe {path}: is a directory; give a recipe YAML file")
    from vllm_medic.safeio import read_arg_text

    text = read_arg_text(path, "recipe")  # a FIFO or a device: exit 2 at once, not a blocked read
    doc = _yaml(text, str(path))
    try:
        if isinstance(doc, dict) and str(doc.get("schema", "")).startswith("vllm-medic/recipe/"):
            return _parse_ours(doc, str(path), origin="user")
        if isinstance(doc, dict) and isinstance(doc.get("model"), dict) and "model_id" in doc["model"]:
            return _parse_official(doc, path)
    except (TypeError, ValueError, AttributeError, KeyError, IndexError) as exc:
        # The field readers name most shape errors; this catches the rest (a list where a number was
        # expected deep inside) so a malformed recipe is a usage error naming the file, never a crash.
        raise UsageError(
            f"recipe {path}: a field has an unexpected shape ({type(exc).__name__}: {exc})"
        ) from None
    raise UsageError(
        f"recipe {path}: not a recipe: expected 'schema: {OUR_SCHEMA}' (vllm-medic format) or a "
        "'model: {{model_id: ...}}' block (vllm-project/recipes format)"
    )


def _shipped_doc(name: str) -> dict[str, Any]:
    text = resources.files("vllm_medic.recipes").joinpath(f"data/{name}.yaml").read_text("utf-8")
    return yaml.safe_load(text)


def _yaml(text: str, where: str) -> Any:
    from vllm_medic.safeyaml import safe_load

    try:
        return safe_load(text)  # aliases refused (billion laughs), depth and size capped
    except yaml.YAMLError as exc:
        raise UsageError(f"recipe {where}: not valid YAML: {' '.join(str(exc).split())}") from exc


class _Reader:
    """Typed access to one YAML mapping; wrong shapes become UsageErrors naming file and field."""

    def __init__(self, where: str) -> None:
        self.where = where

    def fail(self, field: str, expected: str, got: Any) -> UsageError:
        return UsageError(
            f"recipe {self.where}: field '{field}' must be {expected}, got {type(got).__name__} {got!r:.60}"
        )

    def get(
        self, d: dict[str, Any], key: str, kind: type | tuple[type, ...], field: str, default: Any = None
    ):
        value = d.get(key, default)
        if value is None:
            return default
        if not isinstance(value, kind):
            names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
            raise self.fail(field, names, value)
        return value

    def req(self, d: dict[str, Any], key: str, kind: type | tuple[type, ...], field: str):
        if key not in d or d[key] is None:
            raise UsageError(f"recipe {self.where}: missing required field '{field}'")
        return self.get(d, key, kind, field)


def _s(value: Any) -> str:
    return " ".join(str(value).split())


def _parse_ours(doc: Any, where: str, origin: str) -> Recipe:
    r = _Reader(where)
    if not isinstance(doc, dict):
        raise UsageError(f"recipe {where}: top level must be a mapping")
    name = r.req(doc, "name", str, "name")
    recipe = Recipe(
        name=name,
        title=r.get(doc, "title", str, "title", name),
        model_id=r.get(doc, "model_id", str, "model_id"),
        source=where if origin != "shipped" else _s(doc.get("source") or where),
        origin=origin,
        model_aliases=[str(a) for a in r.get(doc, "model_aliases", list, "model_aliases", [])],
        docs=[str(u) for u in r.get(doc, "docs", list, "docs", [])],
    )
    for i, a in enumerate(r.get(doc, "architectures", list, "architectures", [])):
        f = f"architectures[{i}]"
        a = r.req({"x": a}, "x", dict, f)
        recipe.architectures.append(
            Architecture(r.req(a, "name", str, f + ".name"), a.get("min_vllm"), _s(a.get("source", where)))
        )
    hy = r.get(doc, "hybrid_attention", dict, "hybrid_attention")
    if hy is not None:
        recipe.hybrid_attention = Sourced(bool(hy.get("value")), _s(hy.get("source", where)))
    kh = r.get(doc, "known_hybrid", dict, "known_hybrid")
    if kh is not None:
        recipe.known_hybrid = {
            "model_patterns": [
                str(x) for x in r.get(kh, "model_patterns", list, "known_hybrid.model_patterns", [])
            ],
            "architectures": [
                str(x) for x in r.get(kh, "architectures", list, "known_hybrid.architectures", [])
            ],
            "source": _s(kh.get("source", where)),
        }
    for i, fl in enumerate(r.get(doc, "vllm_floors", list, "vllm_floors", [])):
        f = f"vllm_floors[{i}]"
        fl = r.req({"x": fl}, "x", dict, f)
        recipe.vllm_floors.append(
            Floor(
                str(r.req(fl, "version", (str, int, float), f + ".version")),
                _s(fl.get("source", where)),
                bool(r.get(fl, "enforced", bool, f + ".enforced", True)),
            )
        )
    for i, im in enumerate(r.get(doc, "images", list, "images", [])):
        f = f"images[{i}]"
        im = r.req({"x": im}, "x", dict, f)
        recipe.images.append(
            ImageSpec(
                r.req(im, "tag", str, f + ".tag"),
                str(im.get("platform", "nvidia")),
                _s(im.get("source", where)),
                str(im["cuda"]) if im.get("cuda") is not None else None,
            )
        )
    for i, b in enumerate(r.get(doc, "known_bad_images", list, "known_bad_images", [])):
        f = f"known_bad_images[{i}]"
        b = r.req({"x": b}, "x", dict, f)
        kind = str(b.get("kind", "exact"))
        if kind not in ("exact", "prefix", "glob"):
            raise r.fail(f + ".kind", "one of exact, prefix, glob", kind)
        recipe.known_bad_images.append(
            BadImage(
                r.req(b, "match", str, f + ".match"),
                kind,
                _s(b.get("reason", "")),
                tuple(_s(x) for x in r.get(b, "fix", list, f + ".fix", [])),
                _s(b.get("source", where)),
            )
        )
    ut = r.get(doc, "unverified_tags", dict, "unverified_tags")
    if ut is not None:
        recipe.unverified_tags = {
            "patterns": [str(p) for p in r.get(ut, "patterns", list, "unverified_tags.patterns", [])],
            "reason": _s(ut.get("reason", "")),
            "source": _s(ut.get("source", where)),
        }
    drv = r.get(doc, "driver", dict, "driver")
    if drv is not None:
        recipe.driver = DriverFloor(
            min_version=str(r.req(drv, "min_version", str, "driver.min_version")),
            branch=str(drv.get("branch", "")),
            cuda=str(drv["cuda"]) if drv.get("cuda") is not None else None,
            source=_s(drv.get("source", where)),
            compliant_paths=tuple(
                _s(p) for p in r.get(drv, "compliant_paths", list, "driver.compliant_paths", [])
            ),
            paths_source=_s(drv.get("paths_source", "")),
        )
    hw = r.get(doc, "hardware", dict, "hardware")
    if hw is not None:
        src = _s(hw.get("source", where))
        for key, b in r.get(hw, "baselines", dict, "hardware.baselines", {}).items():
            f = f"hardware.baselines.{key}"
            b = r.req({"x": b}, "x", dict, f)
            layout = r.get(b, "layout", dict, f + ".layout", {})
            for lk, lv in layout.items():
                if lk not in ("tp", "pp", "dp", "ep") or not isinstance(lv, int):
                    raise r.fail(f"{f}.layout.{lk}", "tp/pp/dp/ep: an integer (ep: 0 or 1)", lv)
            recipe.hardware[str(key).lower()] = HardwareBaseline(
                int(r.req(b, "min_gpus", int, f + ".min_gpus")),
                r.get(b, "min_nodes", int, f + ".min_nodes"),
                _s(b.get("note", "")),
                src,
                tuple((str(k), int(v)) for k, v in layout.items()),
            )
    smg = r.get(doc, "strategy_min_gpus", dict, "strategy_min_gpus")
    if smg is not None:
        value = r.req(smg, "value", dict, "strategy_min_gpus.value")
        recipe.strategy_min_gpus = Sourced(
            {str(k): int(v) for k, v in value.items()}, _s(smg.get("source", where))
        )
    st = r.get(doc, "strategies", dict, "strategies")
    if st is not None:
        compat = [str(x) for x in r.get(st, "compatible", list, "strategies.compatible", [])]
        recipe.compatible_strategies = Sourced(compat, _s(st.get("source", where)))
        for name, gates in r.get(st, "hardware", dict, "strategies.hardware", {}).items():
            gates = r.get({"x": gates}, "x", dict, f"strategies.hardware.{name}")
            recipe.strategy_hardware[str(name)] = {str(k).lower(): str(v) for k, v in gates.items()}
    w = r.get(doc, "weights", dict, "weights")
    if w is not None:
        gb = r.req(w, "gb", (int, float), "weights.gb")
        recipe.weights = Sourced(float(gb), _s(w.get("source", where)))
    cl = r.get(doc, "context_length", dict, "context_length")
    if cl is not None:
        tokens = r.req(cl, "tokens", int, "context_length.tokens")
        recipe.context_length = Sourced(int(tokens), _s(cl.get("source", where)))
    for i, fl in enumerate(r.get(doc, "required_flags", list, "required_flags", [])):
        f = f"required_flags[{i}]"
        fl = r.req({"x": fl}, "x", dict, f)
        recipe.required_flags.append(
            RequiredFlag(
                r.req(fl, "flag", str, f + ".flag"),
                r.req(fl, "dest", str, f + ".dest"),
                str(fl.get("category", "other")),
                _s(fl.get("why", "")),
                _s(fl.get("source", where)),
            )
        )
    recipe.network = _parse_network(r, r.get(doc, "network", dict, "network", {}), where)
    ret = r.get(doc, "prefix_cache_retention", dict, "prefix_cache_retention")
    if ret is not None:
        recipe.prefix_cache_retention = {
            "env": str(ret.get("env", "VLLM_PREFIX_CACHE_RETENTION_INTERVAL")),
            "flag": str(ret.get("flag", "")),
            "example_interval_tokens": r.get(
                ret, "example_interval_tokens", int, "prefix_cache_retention.example_interval_tokens"
            ),
            "choose": [_s(x) for x in r.get(ret, "choose", list, "prefix_cache_retention.choose", [])],
            "source": _s(ret.get("source", where)),
        }
    return recipe


def _parse_network(r: _Reader, net: dict[str, Any], where: str) -> Network:
    out = Network()
    a2a = r.get(net, "all2all", dict, "network.all2all")
    if a2a is not None:
        out.all2all = {k: str(v) for k, v in a2a.items() if k in ("rdma", "nvlink")}
        out.all2all_source = _s(a2a.get("source", where))
    nl = r.get(net, "nvlink_only_moe_backends", dict, "network.nvlink_only_moe_backends")
    if nl is not None:
        out.nvlink_only_moe_backends = Sourced(
            [str(x) for x in r.get(nl, "value", list, "network.nvlink_only_moe_backends.value", [])],
            _s(nl.get("source", where)),
        )
    for k, v in r.get(net, "rdma_env", dict, "network.rdma_env", {}).items():
        v = r.get({"x": v}, "x", dict, f"network.rdma_env.{k}")
        out.rdma_env[str(k)] = Sourced(str(v.get("value", "")), _s(v.get("source", where)))
        scope = r.get(v, "strategies", list, f"network.rdma_env.{k}.strategies", [])
        if scope:
            out.rdma_env_strategies[str(k)] = [str(x) for x in scope]
    dm = r.get(net, "dmabuf_fallback", dict, "network.dmabuf_fallback")
    if dm is not None:
        out.dmabuf_fallback = {
            "env": str(dm.get("env", "NCCL_DMABUF_ENABLE")),
            "value": str(dm.get("value", "0")),
            "requires_module": str(dm.get("requires_module", "nvidia_peermem")),
            "source": _s(dm.get("source", where)),
        }
    mn = r.get(net, "mnnvl_env", dict, "network.mnnvl_env")
    if mn is not None:
        out.mnnvl_env = Sourced(
            {str(k): str(v) for k, v in r.get(mn, "value", dict, "network.mnnvl_env.value", {}).items()},
            _s(mn.get("source", where)),
        )
    return out


def _base_for_model(model_id: str) -> Recipe:
    for name in SHIPPED:
        r = load_recipe(name)
        if r.model_id == model_id or model_id in r.model_aliases:
            return r
    return load_recipe("generic")


def _find_strategies_dir(path: Path) -> Path | None:
    for parent in list(path.resolve().parents)[:4]:
        cand = parent / "strategies"
        if cand.is_dir():
            return cand
    return None


def _load_strategies(path: Path, wanted: set[str]) -> dict[str, dict[str, Any]]:
    sdir = _find_strategies_dir(path)
    if sdir is None:
        return {}
    out: dict[str, dict[str, Any]] = {}
    for f in sorted(sdir.glob("*.yaml")):
        if wanted and f.stem not in wanted:
            continue
        from vllm_medic.safeio import read_arg_text

        doc = _yaml(read_arg_text(f, "recipe strategy"), str(f))
        if isinstance(doc, dict):
            out[str(doc.get("name", f.stem))] = doc
    return out


def _parse_official(doc: dict[str, Any], path: Path) -> Recipe:
    where = str(path)
    r = _Reader(where)
    model = doc["model"]
    model_id = r.req(model, "model_id", str, "model.model_id")
    base = copy.deepcopy(_base_for_model(model_id))
    meta = r.get(doc, "meta", dict, "meta", {})
    recipe = base
    recipe.name = str(meta.get("slug") or model_id.split("/")[-1].lower())
    recipe.title = str(meta.get("title") or model_id)
    recipe.model_id = model_id
    recipe.source = where
    recipe.origin = "official"
    if model_id not in recipe.model_aliases:
        recipe.model_aliases.append(model_id)

    floor = model.get("min_vllm_version")
    if floor is not None:
        if not isinstance(floor, str | int | float):
            raise r.fail("model.min_vllm_version", "a version string", floor)
        official_floor = Floor(str(floor), f"{where}: model.min_vllm_version")
        recipe.vllm_floors = [official_floor] + [f for f in recipe.vllm_floors if f.version != str(floor)]
        recipe.architectures = [
            Architecture(a.name, str(floor), a.source + f"; floor from {where}") for a in recipe.architectures
        ]

    variants = r.get(doc, "variants", dict, "variants", {})
    default = variants.get("default")
    if isinstance(default, dict) and default.get("vram_minimum_gb") is not None:
        gb = default["vram_minimum_gb"]
        if not isinstance(gb, int | float):
            raise r.fail("variants.default.vram_minimum_gb", "a number", gb)
        recipe.weights = Sourced(float(gb), f"{where}: variants.default.vram_minimum_gb")

    smg = r.get(doc, "strategy_min_gpus", dict, "strategy_min_gpus")
    if smg is not None:
        strategies: dict[str, int] = {}
        for k, v in smg.items():
            if not isinstance(v, int):
                raise r.fail(f"strategy_min_gpus.{k}", "an integer", v)
            if str(k).lower() in HARDWARE_KEYS:
                old = recipe.hardware.get(str(k).lower())
                recipe.hardware[str(k).lower()] = HardwareBaseline(
                    v,
                    old.min_nodes if old else None,
                    old.note if old else "",
                    f"{where}: strategy_min_gpus.{k}",
                    old.layout if old else (),
                )
            else:
                strategies[str(k)] = v
        recipe.strategy_min_gpus = Sourced(strategies, f"{where}: strategy_min_gpus")

    ctx_len = model.get("context_length")
    if ctx_len is not None:
        if not isinstance(ctx_len, int) or isinstance(ctx_len, bool):
            raise r.fail("model.context_length", "an integer", ctx_len)
        recipe.context_length = Sourced(ctx_len, f"{where}: model.context_length")
    base_args = [str(a) for a in r.get(model, "base_args", list, "model.base_args", [])]
    compatible = [str(s) for s in r.get(doc, "compatible_strategies", list, "compatible_strategies", [])]
    strategy_overrides = r.get(doc, "strategy_overrides", dict, "strategy_overrides", {})
    hw_overrides = r.get(doc, "hardware_overrides", dict, "hardware_overrides", {})
    for fam, block in hw_overrides.items():
        r.get({"x": block}, "x", dict, f"hardware_overrides.{fam}")
        r.get(block, "extra_args", list, f"hardware_overrides.{fam}.extra_args")
        r.get(block, "extra_env", dict, f"hardware_overrides.{fam}.extra_env")
    wanted = set(compatible) | set(strategy_overrides) | set(doc.get("strategy_hardware") or {})
    if compatible or doc.get("strategy_hardware"):
        recipe.compatible_strategies = Sourced(compatible, f"{where}: compatible_strategies")
        recipe.strategy_hardware = {
            str(k): {str(h).lower(): str(x) for h, x in v.items()}
            for k, v in (doc.get("strategy_hardware") or {}).items()
            if isinstance(v, dict)
        }
    recipe.official = OfficialProfile(
        path=where,
        base_args=base_args,
        base_env={str(k): str(v) for k, v in r.get(model, "base_env", dict, "model.base_env", {}).items()},
        hardware_overrides=hw_overrides,
        strategy_overrides=strategy_overrides,
        compatible_strategies=compatible,
        strategies=_load_strategies(path, wanted),
        strategy_hardware={
            str(k): {str(h): str(x) for h, x in v.items()}
            for k, v in (doc.get("strategy_hardware") or {}).items()
            if isinstance(v, dict)
        },
        default_strategy=doc.get("default_strategy"),
        default_hardware=meta.get("default_hardware"),
        verified_hardware={str(k): str(v) for k, v in (meta.get("hardware") or {}).items()},
        guide=str(doc.get("guide") or ""),
    )
    if "--trust-remote-code" in base_args and not any(
        f.dest == "trust_remote_code" for f in recipe.required_flags
    ):
        recipe.required_flags.append(
            RequiredFlag(
                "--trust-remote-code",
                "trust_remote_code",
                "image_dependency",
                "the recipe's base_args pass it: the model needs its own code",
                f"{where}: model.base_args",
            )
        )
    return recipe
