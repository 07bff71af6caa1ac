"""The shape of the import graph, beyond what ``lint-imports`` checks.

- No import cycle among acmi_core's modules, counting every import: the ones under
  ``TYPE_CHECKING`` (which the layers contract leaves out) and the ones inside functions
  (which cold starts defer). A cycle is a strongly connected component of more than one
  module; the test names its modules.
- Every module under acmi_core sits in a layer of the layers contract in pyproject.toml,
  so a new top-level module cannot slip past the contract by belonging to no layer.
- ``MemoryAPI`` is a composition: each of its methods has the signature of the concern's
  method it calls, so splitting the memory commands changed no caller.

``cycles`` and ``unlayered`` are plain functions, tested on synthetic graphs and module
lists too, so a violation is shown to fail, not only a clean tree to pass.
"""

from __future__ import annotations

import inspect
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import grimp

from acmi_core.memory.forget import MemoryForget
from acmi_core.memory.reads import MemoryReads
from acmi_core.memory.service import MemoryAPI
from acmi_core.memory.transfer import MemoryTransfer
from acmi_core.memory.upkeep import MemoryUpkeep
from acmi_core.memory.vectors import MemoryVectors
from acmi_core.memory.writes import MemoryWrites
from tests.kit import ROOT

# Outside the layers on purpose (ARCHITECTURE.md): the package itself, `python -m acmi_core`
# and the test kit, which may import anything and which nothing shipped imports.
UNLAYERED_OK = ("acmi_core", "acmi_core.__main__")
UNLAYERED_PACKAGES_OK = ("acmi_core.testing",)

# --- cycles ----------------------------------------------------------------------------------


def cycles(edges: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm,
    iterative: the graph is deep enough to trouble the recursion limit), largest first,
    each sorted."""
    graph = {node: sorted(set(targets)) for node, targets in edges.items()}
    for targets in list(graph.values()):
        for target in targets:
            graph.setdefault(target, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        work = [(root, iter(graph[root]))]
        while work:
            node, successors = work[-1]
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = len(index)
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(graph[succ])))
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return sorted(found, key=lambda c: (-len(c), c))


def import_edges(package: str) -> dict[str, set[str]]:
    """Every module of ``package`` -> the modules of it that it imports, counting imports
    under TYPE_CHECKING and inside functions (grimp reads every import statement)."""
    graph = grimp.build_graph(package, exclude_type_checking_imports=False, cache_dir=None)
    return {m: graph.find_modules_directly_imported_by(m) & graph.modules for m in graph.modules}


def test_cycles_finds_components_on_a_synthetic_graph() -> None:
    edges = {
        "a": ["b"],
        "b": ["c"],
        "c": ["a", "d"],  # a -> b -> c -> a
        "d": ["e"],
        "e": ["d"],  # d <-> e
        "f": ["a"],  # into a cycle, not part of one
        "g": ["g"],  # a self-import is one module, not a cycle between modules
    }
    assert cycles(edges) == [["a", "b", "c"], ["d", "e"]]
    assert cycles({"a": ["b"], "b": ["c"], "c": []}) == []


def test_the_graph_counts_type_checking_and_function_imports(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """The graph the cycle test reads sees the two kinds of import the layers contract
    does not: a cycle made only of them is still a cycle."""
    pkg = tmp_path / "cyclepkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "low.py").write_text(
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from cyclepkg.high import H\n"
    )
    (pkg / "high.py").write_text("def build() -> None:\n    from cyclepkg import low\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert cycles(import_edges("cyclepkg")) == [["cyclepkg.high", "cyclepkg.low"]]


def test_no_import_cycle_among_acmi_core_modules() -> None:
    found = cycles(import_edges("acmi_core"))
    assert not found, "import cycles (each a set of modules importing each other): " + "; ".join(
        ", ".join(c) for c in found
    )


# --- layers ----------------------------------------------------------------------------------


def contract_layers(pyproject: Path = ROOT / "pyproject.toml") -> list[str]:
    """The packages named by the top-level layers contract (the one without containers),
    siblings (``a | b``) split."""
    config = tomllib.loads(pyproject.read_text())["tool"]["importlinter"]
    contracts = [
        c for c in config["contracts"] if c.get("type") == "layers" and not c.get("containers")
    ]
    assert len(contracts) == 1, "expected one top-level layers contract in pyproject.toml"
    names: list[str] = []
    for layer in contracts[0]["layers"]:
        names += [part.strip() for part in layer.replace(":", "|").split("|") if part.strip()]
    return names


def unlayered(
    modules: Iterable[str],
    layers: Iterable[str],
    *,
    allowed: Iterable[str] = UNLAYERED_OK,
    allowed_packages: Iterable[str] = UNLAYERED_PACKAGES_OK,
) -> list[str]:
    """The modules that are in no layer (a layer holds its package and every module
    under it) and are not one of the allowed exceptions, sorted."""
    inside = tuple(layers)
    packages = tuple(allowed_packages)
    exempt = set(allowed)

    def within(module: str, roots: tuple[str, ...]) -> bool:
        return any(module == r or module.startswith(r + ".") for r in roots)

    return sorted(
        m
        for m in set(modules)
        if m not in exempt and not within(m, packages) and not within(m, inside)
    )


def test_contract_layers_are_read_from_pyproject() -> None:
    layers = contract_layers()
    assert {"acmi_core.base", "acmi_core.client", "acmi_core.coordination"} <= set(layers)
    assert "acmi_core.memory" in layers  # the sibling of "acmi_core.coordination | ..."


def test_unlayered_catches_a_new_top_level_module() -> None:
    layers = contract_layers()
    modules = [
        "acmi_core",
        "acmi_core.__main__",
        "acmi_core.testing",
        "acmi_core.testing.fleet",
        "acmi_core.memory.service",
        "acmi_core.digest",  # a new top-level module, in no layer
        "acmi_core.basement",  # shares a prefix with acmi_core.base, not its package
    ]
    assert unlayered(modules, layers) == ["acmi_core.basement", "acmi_core.digest"]


def test_every_acmi_core_module_is_in_a_layer() -> None:
    modules = grimp.build_graph("acmi_core", cache_dir=None).modules
    missing = unlayered(modules, contract_layers())
    assert not missing, (
        "modules in no layer of the import contract (pyproject.toml [tool.importlinter]): "
        + ", ".join(missing)
    )


# --- MemoryAPI: a composition that changed no caller -----------------------------------------

CONCERNS = (MemoryReads, MemoryWrites, MemoryUpkeep, MemoryTransfer, MemoryForget, MemoryVectors)
# The methods callers use (routes, MCP, CLI, jobs, tests): each kept on MemoryAPI.
MEMORY_METHODS = {
    "load",
    "status",
    "active",
    "search",
    "get",
    "forget",
    "debug",
    "set_active",
    "remember",
    "topic_create",
    "handoff",
    "take_handoff",
    "log_session_start",
    "prune",
    "prune_vectors",
    "review",
    "daily_summary",
    "export_snapshot",
    "import_snapshot",
    "migrate",
}


def _public_methods(cls: type) -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(member)
        for name, member in inspect.getmembers(cls, inspect.isfunction)
        if not name.startswith("_")
    }


def test_memory_api_keeps_every_method_with_its_concerns_signature() -> None:
    api = _public_methods(MemoryAPI)
    assert set(api) == MEMORY_METHODS
    implemented: dict[str, inspect.Signature] = {}
    for concern in CONCERNS:
        for name, signature in _public_methods(concern).items():
            if name != "load" or concern is MemoryReads:  # load: every concern inherits it
                assert name not in implemented, f"{name} is in two concerns"
                implemented[name] = signature
    assert set(implemented) == MEMORY_METHODS
    for name, signature in api.items():
        assert str(signature) == str(implemented[name]), name
