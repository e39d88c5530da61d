"""JUnit XML (``--format junit``): one test case per gate, for CI test reporters.

GitLab, Jenkins, Azure Pipelines and GitHub test-report actions read the Ant/Jenkins JUnit
layout: ``<testsuites>`` holding one ``<testsuite name tests failures errors skipped time
timestamp hostname package id>`` with ``<properties>``, whose ``<testcase name classname
time>`` elements hold at most one ``<failure message type>`` (or ``<skipped>``), then
``<system-out>`` and ``<system-err>``. The file written
here keeps to that schema (tests/test_ci_cron.py validates it against the XSD).

Every override a verdict rests on (a release policy, a sample, a subset of records, a baseline,
waivers) is a case's ``evidence``: written as the case's ``status`` (``passed-with-overrides``
when it passed), in its own ``<system-out>`` and as suite ``<properties>``
(``mptool.evidence.N``), so a CI reader sees a pass that rests on excused records, not a plain
pass (issue 26).

A failing gate names the violating records in the failure text: row number, id or
fingerprint and PDTP -- never a feature value. Every text is escaped twice over: control
and invisible characters become visible escapes (:func:`mptool.runtime.ui.escape_controls`;
XML 1.0 cannot hold most of them at all), then ElementTree escapes ``& < > "``.
"""

from __future__ import annotations

import time
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass

from mptool.runtime import ui
from mptool.runtime.version import __version__

#: Longest failure message attribute (the full text is in the element body).
MESSAGE_LIMIT = 300
#: Most records named in one failure text.
MAX_LISTED = 200


@dataclass(frozen=True)
class GateCase:
    """One gate as a JUnit test case: passed, failed (with message and details) or skipped."""

    name: str
    classname: str
    failed: bool
    message: str = ""
    details: str = ""
    skipped: bool = False
    seconds: float = 0.0
    evidence: tuple[str, ...] = ()  # what the verdict rests on beyond a full audit (module docstring)
    notes: tuple[str, ...] = ()  # facts of the run that change no status (how a --fail-fast run ended)


def _text(value: object, keep_newlines: bool = True) -> str:
    return ui.escape_controls(str(value), keep_newlines=keep_newlines)


def junit_xml(suite: str, cases: Sequence[GateCase], seconds: float = 0.0, stdout: str = "") -> str:
    """The JUnit XML document of one test suite holding ``cases``."""
    failures = sum(c.failed for c in cases)
    skipped = sum(c.skipped and not c.failed for c in cases)
    root = ET.Element(
        "testsuites", name="mptool", tests=str(len(cases)), failures=str(failures), errors="0",
        time=f"{seconds:.3f}",
    )
    ts = ET.SubElement(
        root, "testsuite", name=_text(suite, False), tests=str(len(cases)), failures=str(failures), errors="0",
        skipped=str(skipped), time=f"{seconds:.3f}", timestamp=time.strftime("%Y-%m-%dT%H:%M:%S"),
        hostname="localhost", package="mptool", id="0",
    )
    props = ET.SubElement(ts, "properties")
    ET.SubElement(props, "property", name="mptool.version", value=__version__)
    listed = [line for case in cases for line in case.evidence]
    for i, line in enumerate(listed, 1):
        ET.SubElement(props, "property", name=f"mptool.evidence.{i}", value=ui.safe_line(line, None))
    for case in cases:
        tc = ET.SubElement(ts, "testcase", name=_text(case.name, False), classname=_text(case.classname, False),
                           time=f"{case.seconds:.3f}")
        if case.evidence and not case.skipped:
            tc.set("status", "failed-with-overrides" if case.failed else "passed-with-overrides")
        if case.failed:
            failure = ET.SubElement(tc, "failure", message=ui.safe_line(case.message, MESSAGE_LIMIT), type="gate")
            failure.text = _text(case.details or case.message)
        elif case.skipped:
            ET.SubElement(tc, "skipped", message=ui.safe_line(case.message, MESSAGE_LIMIT))
        said = (["verdict rests on:", *case.evidence] if case.evidence else []) + list(case.notes)
        if said:
            ET.SubElement(tc, "system-out").text = _text("\n".join(said))
    out = ET.SubElement(ts, "system-out")
    out.text = _text(stdout)
    ET.SubElement(ts, "system-err")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def record_lines(records: Sequence[dict], id_column: bool, limit: int = MAX_LISTED, before: str = "baseline") -> str:
    """One line per record: ``row R  id|fingerprint K  PDTP P`` (and ``was`` when known); no feature values.

    A record without a key (no data.id and no MPTOOL_FINGERPRINT_KEY: no fingerprint) is ``row R  PDTP P``.
    """
    kind = "id" if id_column else "fingerprint"
    lines = []
    for rec in records[:limit]:
        key = rec.get("key")
        named = "" if key is None or key == "" or key != key else f"  {kind} {ui.excerpt(key)}"  # key != key: NaN
        line = f"row {rec['row']}{named}  PDTP {rec['pdtp']:.4f}"
        if rec.get("before") is not None:
            line += f" ({before} {rec['before']:.4f})"
        if rec.get("note"):
            line += f"  {rec['note']}"
        lines.append(line)
    if len(records) > limit:
        lines.append(f"... and {len(records) - limit} more (see pdtp.csv)")
    return "\n".join(lines)
