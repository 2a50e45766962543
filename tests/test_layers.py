"""The product packages import one way: no import cycle, and devstack's layers point down.

The graph is read from the source with `ast`: every import statement, those inside functions
included (a lazy import is still a dependency), except those under `if TYPE_CHECKING:`.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tools.pulumi_env import ROOT

#: The packages whose modules must not import each other in a circle, and the program's entry point.
PRODUCT_PACKAGES = ("providers", "components", "devstack", "tools", "bench")
ENTRY_POINTS = ("__main__.py",)

#: devstack's layers, lowest first: a module imports only from its own layer or those below it.
DEVSTACK_LAYERS: tuple[tuple[str, frozenset[str]], ...] = (
    ("state", frozenset({"errors", "stack", "locks", "state", "history", "workspace", "yamledit", "scan"})),
    ("models", frozenset({"models"})),
    ("verbs", frozenset({"listing", "removal", "recovery", "environment", "gc", "declare"})),
    ("api", frozenset({"ledger", "api", "doctor", "ephemeral"})),
    ("cli", frozenset({"cli", "__main__", "command", "ledger_cli", "env_cli", "imperative", "doctor_cli",
                       "pytest_plugin"})),
)
#: Packages below devstack, which never import it.
BELOW_DEVSTACK = ("providers", "components")


@dataclass(frozen=True)
class Import:
    """One import statement's edge: the importing module, the imported one, and where it is written."""

    source: str
    target: str
    where: str


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def product_files() -> Iterator[Path]:
    for package in PRODUCT_PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            # Only importable modules: no tool's vendored tree (a directory name Python cannot import).
            if all(part.isidentifier() for part in path.relative_to(ROOT).with_suffix("").parts):
                yield path
    yield from (ROOT / name for name in ENTRY_POINTS if (ROOT / name).is_file())


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _statements(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement of `tree`, nested ones too, but not those under `if TYPE_CHECKING:`."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                yield from _statements(ast.Module(body=[child], type_ignores=[]))
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        yield from _statements(node)


def _resolve(name: str, modules: set[str]) -> str | None:
    """The product module `name` designates: itself, or the nearest package or module holding it."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def _targets(node: ast.Import | ast.ImportFrom, source: str, is_package: bool, modules: set[str]) -> Iterator[str]:
    if isinstance(node, ast.Import):
        for alias in node.names:
            if (found := _resolve(alias.name, modules)) is not None:
                yield found
        return
    base = node.module or ""
    if node.level:
        package = source if is_package else source.rpartition(".")[0]
        for _ in range(node.level - 1):
            package = package.rpartition(".")[0]
        base = f"{package}.{base}".strip(".")
    for alias in node.names:
        # `from pkg import mod` imports the module pkg.mod; `from mod import name`, the module mod.
        if (found := _resolve(f"{base}.{alias.name}", modules) if f"{base}.{alias.name}" in modules
                else _resolve(base, modules)) is not None:
            yield found


def import_graph() -> list[Import]:
    files = {module_name(path): path for path in product_files()}
    modules = set(files)
    edges: dict[Import, None] = {}  # one edge per statement and target, in the order written
    for source, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in _statements(tree):
            for target in _targets(node, source, path.name == "__init__.py", modules):
                if target != source:
                    edges[Import(source, target, f"{path.relative_to(ROOT)}:{node.lineno}")] = None
    return list(edges)


def strongly_connected(nodes: set[str], edges: list[Import]) -> list[list[str]]:
    """The components of more than one module (Tarjan's algorithm, iterative)."""
    out: dict[str, list[str]] = {n: [] for n in nodes}
    for edge in edges:
        out[edge.source].append(edge.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(out[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(out[child])))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
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
    return found


def one_cycle(component: list[str], edges: list[Import]) -> list[Import]:
    """A shortest circle of imports through the component's first module, each with where it is written."""
    inside = set(component)
    start = component[0]
    came: dict[str, Import] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for edge in edges:
                if edge.source != node or edge.target not in inside:
                    continue
                if edge.target == start:
                    path = [edge]
                    while path[0].source != start:
                        path.insert(0, came[path[0].source])
                    return path
                if edge.target not in came:
                    came[edge.target] = edge
                    following.append(edge.target)
        frontier = following
    return []


def describe(cycle: list[Import]) -> str:
    return " -> ".join(f"{edge.source} ({edge.where})" for edge in cycle) + f" -> {cycle[0].source}"


@pytest.fixture(scope="module")
def graph() -> list[Import]:
    return import_graph()


def test_the_graph_is_read_from_every_product_package(graph):
    sources = {edge.source.split(".")[0] for edge in graph}
    assert set(PRODUCT_PACKAGES) <= sources


def test_no_import_cycle_among_the_product_packages(graph):
    nodes = {module_name(path) for path in product_files()}
    cycles = [describe(one_cycle(component, graph)) for component in strongly_connected(nodes, graph)]
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_the_cycle_finder_finds_a_cycle_and_names_it():
    edges = [Import("a", "b", "a.py:1"), Import("b", "c", "b.py:2"), Import("c", "a", "c.py:3"),
             Import("c", "d", "c.py:4")]
    components = strongly_connected({"a", "b", "c", "d"}, edges)
    assert components == [["a", "b", "c"]]
    assert describe(one_cycle(components[0], edges)) == "a (a.py:1) -> b (b.py:2) -> c (c.py:3) -> a"


def test_imports_under_type_checking_and_inside_functions():
    tree = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import x\nelse:\n    import y\n"
                     "def f():\n    import z\n")
    assert [alias.name for node in _statements(tree) for alias in node.names] == ["TYPE_CHECKING", "y", "z"]


@pytest.mark.parametrize("package", BELOW_DEVSTACK)
def test_packages_below_devstack_never_import_it(graph, package):
    upward = [f"{edge.where}: {edge.target}" for edge in graph
              if edge.source.split(".")[0] == package and edge.target.split(".")[0] == "devstack"]
    assert not upward, f"{package} imports devstack:\n" + "\n".join(upward)


def test_devstack_layers_point_down(graph):
    rank = {name: i for i, (_, names) in enumerate(DEVSTACK_LAYERS) for name in names}
    layer = [name for name, _ in DEVSTACK_LAYERS]
    ours = sorted({module_name(path) for path in product_files() if module_name(path).startswith("devstack.")})
    unplaced = [m for m in ours if m.removeprefix("devstack.") not in rank]
    assert not unplaced, f"devstack modules with no layer in DEVSTACK_LAYERS: {', '.join(unplaced)}"
    upward = [f"{edge.where}: {edge.source} ({layer[rank[edge.source[9:]]]}) imports {edge.target} "
              f"({layer[rank[edge.target[9:]]]})"
              for edge in graph if edge.source.startswith("devstack.") and edge.target.startswith("devstack.")
              and rank[edge.target[9:]] > rank[edge.source[9:]]]
    assert not upward, "devstack imports against its layers:\n" + "\n".join(upward)
