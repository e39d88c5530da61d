"""Output formats behind one interface (mptool.outputs.formats): rendering, and all-or-nothing writes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mptool.outputs.formats import FORMATS, JunitSuite, OutputFile, render, write_files
from mptool.outputs.junit import GateCase


def test_every_format_renders_its_payload() -> None:
    frame = pd.DataFrame({"row": [0, 1], "pdtp": [0.1234567890123456, np.nan]})
    assert render(OutputFile("a.csv", "csv", frame)) == "row,pdtp\n0,0.123456789012\n1,\n"
    assert render(OutputFile("a.csv", "csv-exact", frame)) == "row,pdtp\n0,0.1234567890123456\n1,\n"
    doc = json.loads(render(OutputFile("a.json", "json", {"x": np.float64(np.inf), "y": np.arange(2), "p": Path("q")})))
    assert doc == {"x": None, "y": [0, 1], "p": "q"}
    xml = render(OutputFile("junit.xml", "junit", JunitSuite("s", (GateCase("g", "c", failed=True, message="m"),))))
    assert 'failures="1"' in xml and "<failure" in xml
    assert render(OutputFile("r.md", "text", "# hi\n")) == "# hi\n"
    assert set(FORMATS) == {"csv", "csv-exact", "json", "junit", "text"}


def test_a_payload_that_cannot_render_replaces_no_file(tmp_path: Path) -> None:
    (tmp_path / "a.csv").write_text("old a\n")
    (tmp_path / "b.json").write_text("old b\n")
    files = [
        OutputFile("a.csv", "csv", pd.DataFrame({"x": [1]})),
        OutputFile("b.json", "json", {"bad": object()}),  # json cannot hold it: fails while rendering
    ]
    with pytest.raises(TypeError):
        write_files(tmp_path, files)
    assert (tmp_path / "a.csv").read_text() == "old a\n"
    assert (tmp_path / "b.json").read_text() == "old b\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.csv", "b.json"]  # no temporary file left


def test_unknown_format_is_named(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown output format 'parquet'"):
        write_files(tmp_path, [OutputFile("a.parquet", "parquet", None)])
    assert list(tmp_path.iterdir()) == []
