"""The package's shape: no import cycles between its modules, and no file a newcomer cannot read at once."""

import ast
from pathlib import Path

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


def test_no_import_cycles():
    edges = graph()
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(edges[node]):
            if state.get(nxt) == "open":
                raise AssertionError("import cycle: " + " -> ".join(stack[stack.index(nxt):] + [nxt]))
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = "done"

    for node in sorted(edges):
        if node not in state:
            visit(node)
    assert "lit_attention.compare" not in edges["lit_attention.cli"]  # compare depends on the CLI, never the reverse


def test_no_file_over_400_lines_outside_tests():
    long = {str(p.relative_to(ROOT)): n for package in (*PACKAGES, "benchmarks") for p in (ROOT / package).rglob("*.py")
            if (n := len(p.read_text().splitlines())) > 400}
    assert not long, long
