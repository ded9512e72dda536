"""A stored run as JUnit XML: one testsuite per acceptance step, one testcase per finding."""

from __future__ import annotations

from typing import Any
from xml.etree import ElementTree as ET

from vllm_medic.redact import redact_text


def _body(f: dict[str, Any]) -> str:
    lines = ["evidence:", *(f"  {e}" for e in f.get("evidence") or []), "fix:"]
    lines += [f"  {i}. {s}" for i, s in enumerate(f.get("fix") or [], 1)]
    return redact_text("\n".join(lines))


def run_to_junit(run: dict[str, Any], strict: bool = False) -> str:
    root = ET.Element("testsuites", name=f"vllm-medic {run.get('kind', 'run')} {run.get('run_id', '')}")
    suites = []
    if run.get("status") == "interrupted" or run.get("verdict") == "incomplete":
        suite = ET.SubElement(root, "testsuite", name="acceptance.run")
        case = ET.SubElement(suite, "testcase", classname="acceptance.run", name="run completed")
        el = ET.SubElement(
            case,
            "failure",
            message=redact_text(f"run {run.get('status')}: {run.get('reason') or 'incomplete'}"),
            type="incomplete",
        )
        el.text = redact_text(str(run.get("reason") or ""))
        suites.append((suite, 1, 1, 0))
    if run.get("verdict") == "pass_unverified":
        suite = ET.SubElement(root, "testsuite", name="acceptance.environment")
        case = ET.SubElement(
            suite, "testcase", classname="acceptance.environment", name="environment verified"
        )
        el = ET.SubElement(
            case, "skipped", message="pass (environment not verified): nothing was archived and checked"
        )
        el.text = "run `vllm-medic collect` on the server host and pass --bundle, or rerun accept there"
        suites.append((suite, 1, 0, 1))
    for step in run.get("steps") or []:
        name = str(step.get("name"))
        suite = ET.SubElement(root, "testsuite", name=f"acceptance.{name}")
        tests = failures = skipped = 0
        status = step.get("status")
        findings = step.get("findings") or []
        for f in findings:
            tests += 1
            sev = f.get("severity")
            case = ET.SubElement(
                suite,
                "testcase",
                classname=f"acceptance.{name}.{f.get('category', 'other')}",
                name=f"{f.get('id')} {redact_text(str(f.get('title', '')))}",
            )
            if sev == "fail" or (strict and sev == "warn"):
                failures += 1
                el = ET.SubElement(
                    case, "failure", message=redact_text(str(f.get("title", ""))), type=str(sev)
                )
                el.text = _body(f)
            elif sev == "not_checked":
                skipped += 1
                el = ET.SubElement(case, "skipped", message=redact_text(f"not checked: {f.get('title', '')}"))
                el.text = _body(f)
            elif sev in ("warn", "info"):
                out = ET.SubElement(case, "system-out")
                out.text = f"[{sev}] {_body(f)}"
        if (
            status == "skipped"
            or status == "running"
            or (status == "fail" and not any(f.get("severity") == "fail" for f in findings))
            or not findings
        ):
            tests += 1
            case = ET.SubElement(suite, "testcase", classname=f"acceptance.{name}", name=f"step {name}")
            if status == "skipped":
                skipped += 1
                ET.SubElement(
                    case,
                    "skipped",
                    message=redact_text(str((step.get("data") or {}).get("skipped_reason", "skipped"))),
                )
            elif status in ("fail", "running") or (strict and status == "warn"):
                failures += 1
                ET.SubElement(case, "failure", message=f"step {name} ended {status}", type=str(status))
        suites.append((suite, tests, failures, skipped))
    for suite, tests, failures, skipped in suites:
        suite.set("tests", str(tests))
        suite.set("failures", str(failures))
        suite.set("errors", "0")
        suite.set("skipped", str(skipped))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
