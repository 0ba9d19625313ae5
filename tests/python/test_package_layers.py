"""The gpuleak package's modules stand in layers: each imports only modules of its own layer or of a lower
one, and no import leads back to the module that made it. Read from the source with ast, nothing imported:
every import counts, a module's own and one deferred inside a function alike.
"""

import ast
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent.parent.parent / "python" / "gpuleak"

# Lowest first.
LAYERS = [
    # ctypes' view of libgpuleak.so.
    ["gpuleak._native"],
    # gpuleak-report run on a trace, and how the package writes what it shows.
    ["gpuleak._report", "gpuleak._formatting"],
    # gpuleak watch followed in a notebook's display.
    ["gpuleak._watch"],
    # gpuleak.why(): the answer, the program's objects and their autograd graphs, the sites searched for,
    # where TensorFlow's tensors lie, the search and the chains it follows, its text and its record, and
    # the package's face.
    [
        "gpuleak._why._answer",
        "gpuleak._why._objects",
        "gpuleak._why._graphs",
        "gpuleak._why._sites",
        "gpuleak._why._tensorflow",
        "gpuleak._why._chains",
        "gpuleak._why._search",
        "gpuleak._why._text",
        "gpuleak._why._record",
        "gpuleak._why",
    ],
    # What a program uses: phases, isolated calls, the %gpuleak magic and the notebook's extension.
    ["gpuleak._phase", "gpuleak._isolated", "gpuleak._magic", "gpuleak._notebook"],
    ["gpuleak", "gpuleak.__main__"],
]


def package_modules(package_dir):
    """{module name: (its file, whether it is a package)} for every module of the package in `package_dir`."""
    modules = {}
    for path in package_dir.rglob("*.py"):
        parts = list(path.relative_to(package_dir.parent).with_suffix("").parts)
        package = parts[-1] == "__init__"
        if package:
            parts.pop()
        modules[".".join(parts)] = (path, package)
    return modules


def imports_of(name, path, package, modules):
    """The package's modules that importing `name` may import, wherever in it the import stands: each
    module named, and the packages above it that `name` is not within (importing a.b.c imports a.b first)."""
    own_package = name if package else name.rpartition(".")[0]
    parts = name.split(".")
    within = {".".join(parts[:end]) for end in range(1, len(parts) + 1)}
    named = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            named.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = own_package.split(".")
                base = ".".join(base[: len(base) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module
            for alias in node.names:
                submodule = "%s.%s" % (base, alias.name)
                named.add(submodule if submodule in modules else base)
    imported = {module for module in named if module in modules and module != name}
    for module in named:
        parts = module.split(".")
        imported.update(
            above
            for above in (".".join(parts[:end]) for end in range(1, len(parts)))
            if above in modules and above not in within
        )
    return imported


def import_graph(package_dir):
    modules = package_modules(package_dir)
    return {name: imports_of(name, path, package, modules) for name, (path, package) in modules.items()}


def upward_imports(graph, layers):
    layer_of = {module: number for number, layer in enumerate(layers) for module in layer}
    return [
        "%s imports %s, a layer above it" % (module, imported)
        for module, imports in sorted(graph.items())
        for imported in sorted(imports)
        if layer_of[imported] > layer_of[module]
    ]


def cycles(graph):
    """Each import cycle met, as 'a -> b -> a'."""
    done = set()
    found = []

    def visit(module, path):
        if module in path:
            found.append(" -> ".join(path[path.index(module):] + [module]))
            return
        if module in done:
            return
        for imported in sorted(graph[module]):
            visit(imported, path + [module])
        done.add(module)

    for module in sorted(graph):
        visit(module, [])
    return found


def test_every_module_has_its_layer():
    layered = [module for layer in LAYERS for module in layer]
    assert len(layered) == len(set(layered))
    assert sorted(layered) == sorted(package_modules(PACKAGE_DIR))


def test_no_module_imports_one_of_a_higher_layer():
    assert upward_imports(import_graph(PACKAGE_DIR), LAYERS) == []


def test_no_import_cycle():
    assert cycles(import_graph(PACKAGE_DIR)) == []


def test_the_checks_see_a_cycle_and_an_upward_import(tmp_path):
    package = tmp_path / "gpuleak"
    (package / "_why").mkdir(parents=True)
    (package / "__init__.py").write_text("from ._why import why\n")
    (package / "_native.py").write_text("def phase():\n    from . import _why\n")
    (package / "_why" / "__init__.py").write_text("from .. import _native\nfrom ._text import said\n")
    (package / "_why" / "_text.py").write_text("from . import why\n")
    graph = import_graph(package)
    assert graph == {
        "gpuleak": {"gpuleak._why"},
        "gpuleak._native": {"gpuleak._why"},
        "gpuleak._why": {"gpuleak._native", "gpuleak._why._text"},
        "gpuleak._why._text": {"gpuleak._why"},
    }
    layers = [["gpuleak._native"], ["gpuleak._why._text", "gpuleak._why"], ["gpuleak"]]
    assert upward_imports(graph, layers) == ["gpuleak._native imports gpuleak._why, a layer above it"]
    assert cycles(graph) == [
        "gpuleak._why -> gpuleak._native -> gpuleak._why",
        "gpuleak._why -> gpuleak._why._text -> gpuleak._why",
    ]
