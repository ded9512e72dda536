"""JUnit XML for CI: one testcase per finding, `fail` as failure, `warn` as failure only with strict,
`not_checked` as skipped (with what was missing)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from xml.etree import ElementTree as ET

from vllm_medic.errors import ToolError
from vllm_medic.model import Finding, Severity
from vllm_medic.redact import redact_text


def findings_to_junit(
    findings: Iterable[Finding],
    suite_name: str,
    strict: bool = False,
    properties: dict[str, str] | None = None,
) -> str:
    items = list(findings)
    suite = ET.Element("testsuite", name=suite_name)
    if properties:
        props = ET.SubElement(suite, "properties")
        for key, value in properties.items():
            ET.SubElement(props, "property", name=key, value=redact_text(str(value)))
    failures = 0
    skipped = 0
    for f in items:
        case = ET.SubElement(
            suite, "testcase", classname=f"{suite_name}.{f.category.value}", name=f"{f.id} {f.title}"
        )
        body = "\n".join(
            ["evidence:"]
            + [f"  {e}" for e in f.evidence]
            + ["fix:"]
            + [f"  {i}. {s}" for i, s in enumerate(f.fix, 1)]
        )
        body = redact_text(body)
        if f.severity is Severity.FAIL or (strict and f.severity is Severity.WARN):
            failures += 1
            el = ET.SubElement(case, "failure", message=redact_text(f.title), type=f.severity.value)
            el.text = body
        elif f.severity is Severity.WARN:
            out = ET.SubElement(case, "system-out")
            out.text = f"[warn] {body}"
        elif f.severity is Severity.NOT_CHECKED:
            skipped += 1
            el = ET.SubElement(case, "skipped", message=redact_text(f"not checked: {f.title}"))
            el.text = body
        elif f.severity is Severity.INFO:
            out = ET.SubElement(case, "system-out")
            out.text = f"[info] {body}"
    suite.set("tests", str(len(items)))
    suite.set("failures", str(failures))
    suite.set("errors", "0")
    suite.set("skipped", str(skipped))
    root = ET.Element("testsuites")
    root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write_junit(
    path: Path,
    findings: Iterable[Finding],
    suite_name: str,
    strict: bool = False,
    properties: dict[str, str] | None = None,
) -> None:
    """Write the XML; a path that cannot be written (a directory, under a file, read-only) is a ToolError
    naming the path and the reason, so the command exits 3 with a message instead of a crash."""
    xml = findings_to_junit(findings, suite_name, strict, properties)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(xml, encoding="utf-8")
    except OSError as exc:
        raise ToolError(f"cannot write the JUnit XML to {path}: {exc.strerror or exc}") from exc
