"""The house rules of the code base, as tests: the ground of harness/ never imports its top,
workloads/, nemesis/ and analysis/ import only the ground, analysis/'s folders import only the
floors below them, no import circles, no module is over 400 lines, and the docs' fault table is the
nemeses' own declaration."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("harness", "workloads", "nemesis", "analysis")
# The top floor of harness/: orchestration, CLI, pytest plugin, scenarios.
TOP = ("harness.run", "harness.experiments", "harness.checker_commands", "harness.cli",
       "harness.pytest_chaos", "harness.chaos_matrix", "harness.store_commands", "harness.scenario_commands", "harness.scenarios", "harness.target", "harness.__main__")
GROUND = ("harness.history", "harness.cluster", "harness.provision", "harness.kafka_settings", "harness.errors")


def modules() -> list[tuple[str, Path]]:
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            found.append((".".join(path.relative_to(ROOT).with_suffix("").parts), path))
    return found


def imports(path: Path) -> set[str]:
    """Every absolute module a file imports, at any depth (lazy imports inside functions too)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return names


def is_top(name: str) -> bool:
    return any(name == t or name.startswith(t + ".") for t in TOP)


def test_the_ground_and_the_other_folders_never_import_the_top_of_harness():
    wrong = []
    for name, path in modules():
        if name.startswith(GROUND) or name.split(".")[0] in ("workloads", "nemesis", "analysis"):
            wrong += [f"{name} imports {i}" for i in sorted(imports(path)) if is_top(i)]
    assert not wrong, "\n".join(wrong)


def test_every_harness_module_is_on_one_floor():
    loose = [name for name, _ in modules()
             if name.startswith("harness.") and not is_top(name) and not name.startswith(GROUND) and name != "harness.__init__"]
    assert not loose, f"put these in harness/history, harness/cluster or harness/provision, or name them in TOP: {loose}"


def test_the_ground_imports_nothing_above_it():
    """history is the bottom: it imports no cluster, provisioning, workload, nemesis or analysis."""
    wrong = []
    for name, path in modules():
        if name.startswith("harness.history"):
            wrong += [f"{name} imports {i}" for i in sorted(imports(path))
                      if i.split(".")[0] in PACKAGES and not i.startswith(("harness.history", "harness.errors"))]
    assert not wrong, "\n".join(wrong)


# analysis/'s floors, bottom up: each folder imports only the folders below it.
ANALYSIS_FLOORS = ("rules", "reference", "explain", "checking", "report")


def test_analysis_folders_import_only_the_floors_below():
    wrong = []
    for name, path in modules():
        parts = name.split(".")
        if parts[0] != "analysis" or len(parts) < 3 or parts[1] not in ANALYSIS_FLOORS:
            continue
        below = ANALYSIS_FLOORS[:ANALYSIS_FLOORS.index(parts[1]) + 1]
        wrong += [f"{name} imports {i}" for i in sorted(imports(path))
                  if i.startswith("analysis.") and i.split(".")[1] not in below]
    assert not wrong, "\n".join(wrong)


def test_no_import_circles():
    """No two modules import each other, directly or round a loop, counting lazy imports inside
    functions and imports for type checking: a circle is two modules that cannot be read apart."""
    known = {name.removesuffix(".__init__"): path for name, path in modules()}
    graph = {}
    for name, path in known.items():
        graph[name] = {i for i in imports(path) if i in known and i != name and not name.startswith(i + ".")}
    circles, state = [], {}

    def visit(node, trail):
        state[node] = "open"
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                circles.append(" -> ".join(trail[trail.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt, trail + [nxt])
        state[node] = "done"

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert not circles, "\n".join(circles)


@pytest.mark.parametrize("name, path", modules(), ids=[m[0] for m in modules()])
def test_no_module_is_over_400_lines(name, path):
    assert len(path.read_text().splitlines()) <= 400, f"{name} has grown past 400 lines: split it by job"


def test_the_docs_fault_table_is_the_nemeses_declaration():
    from nemesis.runner import build_nemeses
    from nemesis.schedule import PACKAGES as FAULT_PACKAGES

    table = {}
    for line in (ROOT / "docs" / "nemesis.md").read_text().splitlines():
        row = re.match(r"\| `(\w+)` \| (.+?) \| (.+?) \|", line)
        if row:
            table[row[1]] = (set(re.findall(r"`([\w-]+)`", row[2])), set(re.findall(r"`([\w-]+)`", row[3])))
    nemeses = build_nemeses(list(FAULT_PACKAGES))
    declared = {name: ({k.start for k in n.faults}, {k.stop for k in n.faults}) for name, n in nemeses.items()}
    assert all(n.faults for n in nemeses.values()), "every nemesis declares the fault kinds it records"
    assert table == declared


# What only harness/cluster/ may touch of a node: its folder and its container. Everything else acts
# on a node through the node (harness/cluster/node.py) and so through its transport.
NODE_INSIDES = ("node_dir", "container", "get_wrapped_container")


def test_only_the_cluster_floor_touches_a_node_s_folder_or_container():
    wrong = []
    for name, path in modules():
        if name.startswith("harness.cluster"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in NODE_INSIDES:
                wrong.append(f"{name}:{node.lineno} uses .{node.attr}")
    assert not wrong, "act through the node (read_log, exec, start_process, ...) instead:\n" + "\n".join(wrong)


def _module_containers(tree: ast.Module) -> set[str]:
    """Names a module binds at its top level to a dict, set or list (a display or a constructor call)."""
    names: set[str] = set()
    for stmt in tree.body:
        targets, value = [], None
        if isinstance(stmt, ast.Assign):
            targets, value = stmt.targets, stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            targets, value = [stmt.target], stmt.value
        mutable = isinstance(value, (ast.Dict, ast.Set, ast.List)) or (
            isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in ("dict", "set", "list", "defaultdict"))
        names.update(t.id for t in targets if mutable and isinstance(t, ast.Name))
    return names


def test_no_module_keeps_mutable_global_state_keyed_by_object_id():
    """A module-level container that a function changes, in a module that calls id(): the state of
    one object kept in a global under its id outlives the object, and a later object may get the
    same id (nemesis/targets.py's _LAST_ISRS did; a run's Observer holds it now)."""
    wrong = []
    for name, path in modules():
        tree = ast.parse(path.read_text())
        calls_id = any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "id" for n in ast.walk(tree))
        globals_ = _module_containers(tree)
        if not calls_id or not globals_:
            continue
        for func in [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]:
            for n in ast.walk(func):
                target = n.value if isinstance(n, (ast.Subscript, ast.Attribute)) else None
                if isinstance(target, ast.Name) and target.id in globals_:
                    wrong.append(f"{name}:{n.lineno} changes or reads the global {target.id} in a module that calls id()")
    assert not wrong, "\n".join(sorted(set(wrong)))


# How a module may name a run's config.json outside harness/history/record.py: ask about the path
# (exists, is_file, stat) or put it in text (an f-string, str()); opening, reading or writing it,
# or handing its path to any other function, goes through the record module.
RECORD_MODULE = "harness.history.record"
RECORD_PATH_QUERIES = ("exists", "is_file", "stat")


def _names_the_record(node: ast.AST) -> bool:
    """config.json's path: `X / "config.json"`, `X / RECORD_FILE`, or record_path(X)."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        right = node.right
        return ((isinstance(right, ast.Constant) and right.value == "config.json")
                or (isinstance(right, ast.Name) and right.id == "RECORD_FILE")
                or (isinstance(right, ast.Attribute) and right.attr == "RECORD_FILE"))
    if isinstance(node, ast.Call):
        func = node.func
        return (isinstance(func, ast.Name) and func.id == "record_path") or (isinstance(func, ast.Attribute) and func.attr == "record_path")
    return False


def _only_asked_about_or_shown(path: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    parent = parents.get(path)
    if isinstance(parent, ast.Attribute) and parent.attr in ("resolve", "absolute"):  # then shown as text
        parent = parents.get(parents.get(parent))
        return isinstance(parent, ast.FormattedValue) or (
            isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and parent.func.id == "str")
    if isinstance(parent, ast.Attribute):
        return parent.attr in RECORD_PATH_QUERIES
    return isinstance(parent, ast.FormattedValue) or (
        isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and parent.func.id == "str")


def test_only_the_record_module_opens_config_json():
    """A run's config.json is read through harness/history/record.py (read_record: one typed shape,
    older versions upgraded) and written through it (write_record stamps the version), so that no
    reader keeps its own `.get` chains over the file (analysis/ had about 70 before the record)."""
    wrong = []
    for name, path in modules():
        if name == RECORD_MODULE:
            continue
        tree = ast.parse(path.read_text())
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for node in ast.walk(tree):
            if _names_the_record(node) and not _only_asked_about_or_shown(node, parents):
                wrong.append(f"{name}:{node.lineno} uses config.json's path")
            elif (isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name) and node.func.id == "str")
                  and any(isinstance(a, ast.Constant) and a.value == "config.json" for a in node.args)):
                wrong.append(f"{name}:{node.lineno} passes 'config.json' to a call")
    assert not wrong, "read it with read_record and write it with write_record (harness/history/record.py):\n" + "\n".join(wrong)
