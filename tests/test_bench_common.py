"""benchmarks/_common.py: the benchmarks find unbundled data sets through MPTOOL_DATASETS (issue 28 item 7)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

COMMON = Path(__file__).resolve().parents[1] / "benchmarks" / "_common.py"


@pytest.fixture(scope="module")
def common():
    spec = importlib.util.spec_from_file_location("bench_common", COMMON)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_dataset_is_read_from_the_folder_the_variable_names(common, tmp_path, monkeypatch) -> None:
    (tmp_path / "military.csv.gz").write_bytes(b"")
    monkeypatch.setenv("MPTOOL_DATASETS", str(tmp_path))
    assert common.dataset("military.csv.gz") == tmp_path / "military.csv.gz"


def test_a_missing_dataset_stops_with_one_line_naming_the_variable(common, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("MPTOOL_DATASETS", str(tmp_path))
    with pytest.raises(SystemExit) as stop:
        common.dataset("military.csv.gz")
    message = str(stop.value)
    assert "MPTOOL_DATASETS" in message and "military.csv.gz" in message and "\n" not in message


def test_without_the_variable_the_default_is_shared_datasets_beside_the_repository(common, monkeypatch) -> None:
    monkeypatch.delenv("MPTOOL_DATASETS", raising=False)
    assert common.DEFAULT == COMMON.parents[2] / "shared" / "datasets"


def test_every_name_a_benchmark_imports_from_another_benchmark_exists() -> None:
    """A helper moved between benchmark modules breaks no script at import (static: nothing is imported here)."""
    import ast

    folder = COMMON.parent
    defined: dict[str, set[str]] = {}
    for path in folder.glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = set()
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
                names.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    names.update(e.id for e in ast.walk(t) if isinstance(e, ast.Name))
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names.update((a.asname or a.name).split(".")[0] for a in node.names)
        defined[path.stem] = names
    missing = []
    for path in folder.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module in defined and not node.level:
                missing += [f"{path.name}: {node.module}.{a.name}" for a in node.names
                            if a.name not in defined[node.module]]
    assert not missing, missing
