"""No import cycles in the package: no module of ``argus`` reaches itself through the modules
it imports, counting the imports under ``if TYPE_CHECKING:`` (a cycle there is still two
modules that each need the other to be understood) and those inside functions (deferred,
but a dependency all the same). The layers contracts in pyproject.toml allow cycles within a
":" layer and say nothing inside a module's own folder; this test closes both.

Package ``__init__`` modules that re-export their children count as Python runs them: a
module that imports ``p.x`` runs ``p``'s ``__init__`` first, and so imports whatever that
imports. The graph therefore has an edge from each importer to each package above what it
imports (unless the importer is inside that package: ``p`` is then already running).

The graph is grimp's, import-linter's own library, built from the source as lint-imports
builds it. A cycle is named by its shortest chain, e.g. ``argus.cli -> argus.completion ->
argus.cli``: break it by moving what both need to a module below them, or by handing the
lower module what it needs (cli.py hands completion its parser)."""

from __future__ import annotations

import grimp
import pytest

pytestmark = pytest.mark.unit


def import_graph() -> grimp.ImportGraph:
    return with_packages_run(grimp.build_graph("argus", exclude_type_checking_imports=False, cache_dir=None))


def with_packages_run(graph: grimp.ImportGraph) -> grimp.ImportGraph:
    """The graph plus, for each import of ``p.x`` from outside ``p``, an import of ``p`` (its
    ``__init__`` runs first)."""
    edges = [(importer, imported) for importer in sorted(graph.modules) for imported in graph.find_modules_directly_imported_by(importer)]
    for importer, imported in edges:
        parts = imported.split(".")
        for package in (".".join(parts[:i]) for i in range(1, len(parts))):
            if importer != package and not importer.startswith(package + "."):
                graph.add_import(importer=importer, imported=package)
    return graph


def strongly_connected(graph: grimp.ImportGraph) -> list[set[str]]:
    """The graph's strongly connected sets of more than one module (Tarjan's, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            module, imported = work[-1]
            step = next(imported, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(graph.find_modules_directly_imported_by(step)))))
                elif step in on_stack:
                    low[module] = min(low[module], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[module])
            if low[module] == index[module]:
                members = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    members.add(member)
                    if member == module:
                        break
                if len(members) > 1:
                    found.append(members)
    return found


def cycles(graph: grimp.ImportGraph) -> list[str]:
    """One shortest cycle through each strongly connected set, as "a -> b -> a"."""
    named = []
    for members in strongly_connected(graph):
        start = min(members)
        chains = [graph.find_shortest_chain(step, start) for step in graph.find_modules_directly_imported_by(start) if step in members]
        shortest = min((c for c in chains if c), key=lambda c: (len(c), c))
        named.append(" -> ".join((start, *shortest)))
    return sorted(named)


def test_no_module_of_argus_reaches_itself() -> None:
    found = cycles(import_graph())
    assert found == [], "import cycles (each shown by its shortest chain):\n" + "\n".join(found)


def test_the_graph_counts_type_checking_and_deferred_imports() -> None:
    graph = grimp.build_graph("argus", exclude_type_checking_imports=False, cache_dir=None)
    # core/policy.py imports core/inputs.py under TYPE_CHECKING only.
    assert "argus.core.inputs" in graph.find_modules_directly_imported_by("argus.core.policy")
    runtime = grimp.build_graph("argus", exclude_type_checking_imports=True, cache_dir=None)
    assert "argus.core.inputs" not in runtime.find_modules_directly_imported_by("argus.core.policy")
    # cli.py imports completion inside cmd_completion only.
    assert "argus.completion" in graph.find_modules_directly_imported_by("argus.cli")


def test_a_cycle_is_found_and_named() -> None:
    """Negative control: a graph with two cycles (one of three modules, one of two) and a
    module that only imports into one of them."""
    graph = grimp.ImportGraph()
    for importer, imported in [("p.a", "p.b"), ("p.b", "p.c"), ("p.c", "p.a"), ("p.d", "p.a"),
                               ("p.x", "p.y"), ("p.y", "p.x"), ("p.e", "p.d")]:
        graph.add_import(importer=importer, imported=imported)
    assert cycles(graph) == ["p.a -> p.b -> p.c -> p.a", "p.x -> p.y -> p.x"]


def test_a_cycle_through_a_packages_init_is_found() -> None:
    """``p/__init__.py`` re-exports ``p.y``, and ``p.y`` imports ``q``: a module ``q`` that
    imports ``p.x`` runs ``p``'s ``__init__`` first, hence ``p.y``, which needs ``q`` again.
    A module inside ``p`` importing ``p.x`` is no cycle: ``p`` is already running."""
    graph = grimp.ImportGraph()
    for importer, imported in [("p", "p.y"), ("p.y", "q"), ("q", "p.x"), ("p.y", "p.x")]:
        graph.add_import(importer=importer, imported=imported)
    assert cycles(graph) == []
    assert cycles(with_packages_run(graph)) == ["p -> p.y -> q -> p"]
