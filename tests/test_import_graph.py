"""No import circles between the package's modules (lazy and type-checking imports included).

A circle means two modules cannot be understood, tested or moved one without the other;
import-linter's layer contracts catch circles between layers, this catches them within one.
"""

from __future__ import annotations

import ast
from pathlib import Path

import napari_sam3_onnx

ROOT = Path(napari_sam3_onnx.__file__).parent
PACKAGE = ROOT.name


def module_names() -> dict[str, tuple[Path, list[str]]]:
    """Dotted name -> (file, the package it sits in as a list of parts)."""
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = [PACKAGE, *path.relative_to(ROOT).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts = parts[:-1]
            package = parts
        else:
            package = parts[:-1]
        out[".".join(parts)] = (path, package)
    return out


def import_edges() -> dict[str, set[str]]:
    """Which of the package's modules each module imports, anywhere in its body."""
    modules = module_names()
    edges: dict[str, set[str]] = {name: set() for name in modules}
    for name, (path, package) in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = package[: len(package) - node.level + 1] if node.level else []
                where = ".".join(base + ([node.module] if node.module else []))
                subs = [f"{where}.{alias.name}" for alias in node.names]
                targets = [s for s in subs if s in modules] or [where]
            else:
                continue
            edges[name] |= {t for t in targets if t in modules and t != name}
    return edges


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        top = stack.pop()
                        on_stack.discard(top)
                        group.append(top)
                        if top == node:
                            break
                    if len(group) > 1:
                        found.append(sorted(group))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(edges[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def test_the_finder_sees_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_the_edges_include_lazy_and_relative_imports():
    edges = import_edges()
    assert len(edges) > 150
    # a function-level import (the tabs are built lazily) and a relative one
    assert f"{PACKAGE}._napari.text.panel" in edges[f"{PACKAGE}._napari.panels"]
    assert f"{PACKAGE}.models.roles" in edges[f"{PACKAGE}.models.base"]


def test_no_module_imports_itself_back_through_others():
    assert circles(import_edges()) == []
