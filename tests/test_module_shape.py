"""The package's shape (issue 30 item 5): no import circle among mptool's modules and no module over
900 lines. Static: every ``import`` / ``from ... import`` in every module is read with ``ast``
(imports inside functions count too: a lazy import is still a circle), nothing is imported."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "mptool"
MAX_LINES = 900


def module_files() -> dict[str, Path]:
    """Dotted module name -> file, for every .py file under mptool/ (a package is its __init__)."""
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def owner(name: str, modules: dict[str, Path]) -> str | None:
    """The longest prefix of dotted ``name`` that is an mptool module (None: not mptool's)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the mptool modules it imports (``from pkg import mod`` counts as importing ``pkg.mod``)."""
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                deps.update(filter(None, (owner(a.name, modules) for a in node.names)))
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    parts = parts[: len(parts) - node.level + 1]
                    base = ".".join([*parts, base] if base else parts)
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    dep = full if full in modules else owner(base, modules)
                    if dep:
                        deps.add(dep)
        deps.discard(name)
        graph[name] = deps
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_circle() -> None:
    """No set of mptool modules imports itself round (issue 30: options -> untargeted -> data -> spec ->
    options and two inside outputs/report/ were the last ones)."""
    assert circles(import_graph(module_files())) == []


def test_the_circle_finder_finds_a_circle() -> None:
    """The finder itself: a three-module ring and a self-contained pair are found, a chain is not."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"e"}, "e": set(), "f": {"g"}, "g": {"f"}}
    assert sorted(circles(graph)) == [["a", "b", "c"], ["f", "g"]]


def test_the_graph_sees_lazy_and_relative_imports(tmp_path: Path) -> None:
    """An import inside a function and a relative import are both edges."""
    modules = {"pkg": tmp_path / "__init__.py", "pkg.a": tmp_path / "a.py", "pkg.b": tmp_path / "b.py"}
    modules["pkg"].write_text("")
    modules["pkg.a"].write_text("def f():\n    from pkg.b import x\n")
    modules["pkg.b"].write_text("from . import a\n")
    assert import_graph(modules) == {"pkg": set(), "pkg.a": {"pkg.b"}, "pkg.b": {"pkg.a"}}


def test_no_module_over_900_lines() -> None:
    """One job per module: none over 900 lines (attacks/protocol.py was 1,198 before its split)."""
    sizes = {name: path.read_text(encoding="utf-8").count("\n") for name, path in module_files().items()}
    assert len(sizes) > 50  # the walk found the package
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}
