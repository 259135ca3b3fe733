"""The package's shape (docs/DESIGN.md §4): no import cycles, no private name imported across modules, and
layers that import only downward: modeling (no Lightning) < training and datamodules < analysis < stats < sweep <
reports < scaling < the compare command < the scorecard < the entry point."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("lit_attention", "datamodules")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    """The package modules a file imports at module level or inside functions (each counts for a cycle)."""
    found = set()
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            found.add(base)
            found |= {f"{base}.{alias.name}" for alias in node.names}
    return found


def graph() -> dict[str, set[str]]:
    files = {module_name(p): p for package in PACKAGES for p in (ROOT / package).rglob("*.py")}
    edges = {}
    for name, path in files.items():
        # An import of a package's submodule also runs the package's __init__; __init__ files re-export.
        edges[name] = {m for m in imports_of(path) if m in files and m != name and not files[m].name == "__init__.py"}
    return edges


@pytest.mark.slow
def test_no_import_cycles():
    edges = graph()
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(edges[node]):
            if state.get(nxt) == "open":
                raise AssertionError("import cycle: " + " -> ".join(stack[stack.index(nxt) :] + [nxt]))
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = "done"

    for node in sorted(edges):
        if node not in state:
            visit(node)
    assert "lit_attention.compare" not in edges["lit_attention.training.cli"]  # compare depends on the CLI, never the reverse


# Each layer and what it may import from this project; `lit_attention.errors`, `lit_attention.limits`
# (the limits of every value, which the model configs and the tasks share), `lit_attention.markdown` (the
# one table writer) and `lit_attention.atomic_files` (the one atomic file writer) are below them all.
BELOW_ALL = (
    "lit_attention.errors",
    "lit_attention.limits",
    "lit_attention.markdown",
    "lit_attention.atomic_files",
    "lit_attention.recipe_names",
)
LAYERS = {
    "lit_attention.modeling": BELOW_ALL,
    "datamodules": BELOW_ALL,
    "lit_attention.training": (*BELOW_ALL, "lit_attention.modeling", "datamodules"),
    "lit_attention.analysis": (*BELOW_ALL, "lit_attention.modeling", "lit_attention.training", "datamodules"),
    "lit_attention.stats": BELOW_ALL,
    "lit_attention.sharing": (
        *BELOW_ALL,
        "lit_attention.modeling",
        "lit_attention.training",
        "datamodules",
        "lit_attention.analysis",
    ),
    "lit_attention.sweep": (
        *BELOW_ALL,
        "lit_attention.modeling",
        "lit_attention.training",
        "datamodules",
        "lit_attention.analysis",
        "lit_attention.stats",
    ),
    "lit_attention.reports": (
        *BELOW_ALL,
        "lit_attention.modeling",
        "lit_attention.training",
        "datamodules",
        "lit_attention.analysis",
        "lit_attention.stats",
        "lit_attention.sweep",
    ),
    "lit_attention.scaling": (
        *BELOW_ALL,
        "lit_attention.modeling",
        "lit_attention.training",
        "datamodules",
        "lit_attention.analysis",
        "lit_attention.stats",
        "lit_attention.sweep",
        "lit_attention.reports",
    ),
    # The scorecard runs compare's sweeps and reads their records: it sits above compare, below the entry point.
    "lit_attention.scorecard": (
        *BELOW_ALL,
        "lit_attention.modeling",
        "lit_attention.training",
        "datamodules",
        "lit_attention.analysis",
        "lit_attention.stats",
        "lit_attention.sweep",
        "lit_attention.reports",
        "lit_attention.scaling",
        "lit_attention.compare",
    ),
}
# The entry point and the compare command, which may import every layer, and the --help cache the entry
# point alone uses.
TOP = ("lit_attention", "lit_attention.main", "lit_attention.__main__", "lit_attention.help_cache", "lit_attention.compare")


def layer_of(module: str) -> str | None:
    return next((layer for layer in LAYERS if module == layer or module.startswith(layer + ".")), None)


@pytest.mark.slow
def test_layers_import_only_downward():
    wrong = []
    for module, imported in graph().items():
        if module in TOP:
            continue
        if module in BELOW_ALL:  # each imports only errors, below it
            assert set(imported) <= {"lit_attention.errors"}, f"{module} imports {sorted(imported)}"
            continue
        layer = layer_of(module)
        assert layer is not None, f"{module} belongs to no layer; put it in one of {sorted(LAYERS)} (docs/DESIGN.md §4)"
        allowed = (layer, *LAYERS[layer])
        wrong += [f"{module} -> {m}" for m in imported if not any(m == a or m.startswith(a + ".") for a in allowed)]
    assert not wrong, wrong


def test_modeling_does_not_import_lightning():
    for path in (ROOT / "lit_attention" / "modeling").rglob("*.py"):
        assert not any(m.split(".")[0] in ("lightning", "pytorch_lightning") for m in imports_of(path)), path


@pytest.mark.slow
def test_no_private_name_is_imported_across_modules():
    found = []
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in PACKAGES:
                    found += [f"{path.relative_to(ROOT)}: {alias.name}" for alias in node.names if alias.name.startswith("_")]
    assert not found, found


@pytest.mark.slow
def test_private_lightning_api_only_in_lightning_internals():
    found = []
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if path.name == "lightning_internals.py":
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "lightning":
                    found += [f"{path.relative_to(ROOT)}: {alias.name}" for alias in node.names if alias.name.startswith("_")]
                    found += [f"{path.relative_to(ROOT)}: {node.module}"] if "._" in (node.module or "") else []
    assert not found, found
