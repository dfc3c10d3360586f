"""What an exported Space carries of convohub, which is on no package index.

Two ways, chosen from the Space's code (read with ``ast``, never from its requirements):

* **Inlined modules.** When every convohub import of the Space, and of the modules it reaches, is
  ``from convohub.a.b import ...`` of a module file (the metric implementations and their Gradio helper are
  like that), each such module is copied next to the app as ``convohub_a_b.py`` and the imports are
  rewritten to it. The Space
  then needs only its own requirements, and ``evaluate.load(folder_or_hub_id)`` works in any environment
  with those installed: ``evaluate`` copies a module's *relative* imports (``from .convohub_a_b import``)
  into its module cache, so files that import ``evaluate`` get the relative form and the app the plain one.
* **The whole package.** Otherwise the package's source goes next to the app (``convohub/``, importable
  from the Space root) and those of convohub's own dependencies that the Space can reach are appended to
  requirements.txt: :func:`reached_distributions` follows the Space's convohub imports (top-level, inside
  functions, relative, and module paths written as strings, as the registry's) through the package and
  keeps the distributions of the third-party modules those files import, so a demo does not install the
  training stack (trl, peft, bitsandbytes, ...) it never imports.

Either way a ``convohub`` requirement line, which no index could satisfy, is dropped, so the source folders
under ``spaces/`` and ``evaluation/`` never name convohub.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import shutil
from pathlib import Path

__all__ = ["export_convohub", "imports_convohub", "reached_distributions", "requirement_name"]

INLINED_NOTE = ("# convohub is on no package index: the convohub modules this Space uses are copied next to "
                "it on export\n# (convohub_*.py, see convohub.space_export); they need nothing beyond the "
                "lines below.")


def requirement_name(line: str) -> str:
    """The distribution a requirements line names, lower-cased ('datasets>=4,<6' -> 'datasets')."""
    return re.split(r"[\s=<>!~;\[@]", line.strip(), maxsplit=1)[0].lower()


def _is_convohub(name: str) -> bool:
    return name == "convohub" or name.startswith("convohub.")


def _convohub_imports(path: Path) -> list[ast.Import | ast.ImportFrom]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return [node for node in ast.walk(tree)
            if (isinstance(node, ast.Import) and any(_is_convohub(a.name) for a in node.names))
            or (isinstance(node, ast.ImportFrom) and not node.level and _is_convohub(node.module or ""))]


def imports_convohub(folder: Path) -> bool:
    """Whether any Python file of a Space folder imports convohub."""
    return any(_convohub_imports(path) for path in sorted(Path(folder).rglob("*.py")))


def _module_file(module: str) -> Path | None:
    """The source file of a convohub *module* (not a package: an ``__init__`` re-exports the package)."""
    import convohub

    path = Path(convohub.__file__).parent.joinpath(*module.split(".")[1:]).with_suffix(".py")
    return path if path.is_file() else None


def _has_relative_imports(path: Path) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return any(isinstance(node, ast.ImportFrom) and node.level for node in ast.walk(tree))


def _from_imports(path: Path) -> list[str] | None:
    """The convohub modules ``path`` imports, or None when one import is not ``from convohub.x.y import``
    of a module file (``import convohub``, or a package ``__init__``)."""
    modules = []
    for node in _convohub_imports(path):
        module = node.module if isinstance(node, ast.ImportFrom) else None
        if module is None or _module_file(module) is None:
            return None
        modules.append(module)
    return modules


def _inlinable(space: Path) -> dict[str, Path] | None:
    """convohub module -> its file for every module the Space's top-level files need, followed through the
    modules' own convohub imports; None when something cannot be copied as single files (see
    :func:`_from_imports`; a module with relative imports), or when a module that an ``evaluate`` module
    imports imports convohub itself (``evaluate`` copies only a module's direct relative imports)."""
    if any(path.parent != space and _convohub_imports(path) for path in space.rglob("*.py")):
        return None
    modules: dict[str, Path] = {}
    todo: list[str] = []
    for path in sorted(space.glob("*.py")):
        direct = _from_imports(path)
        if direct is None:
            return None
        if _uses_evaluate(path) and any(_convohub_imports(_module_file(m) or path) for m in direct):
            return None
        todo.extend(direct)
    while todo:
        module = todo.pop()
        if module in modules:
            continue
        file = _module_file(module)
        nested = None if file is None or _has_relative_imports(file) else _from_imports(file)
        if file is None or nested is None:
            return None
        modules[module] = file
        todo.extend(nested)
    return modules


def _local_name(module: str) -> str:
    return module.replace(".", "_")


def _rewrite_imports(path: Path, relative: bool) -> None:
    """Point every ``from convohub.x.y import ...`` of ``path`` at the copied ``convohub_x_y`` module."""
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    for node in sorted(_convohub_imports(path), key=lambda n: n.lineno, reverse=True):
        assert isinstance(node, ast.ImportFrom) and node.module  # guaranteed by _inlinable
        names = ", ".join(a.name + (f" as {a.asname}" if a.asname else "") for a in node.names)
        indent = lines[node.lineno - 1][: node.col_offset]
        new = f"{indent}from {'.' if relative else ''}{_local_name(node.module)} import {names}\n"
        lines[node.lineno - 1: node.end_lineno] = [new]
    path.write_text("".join(lines), encoding="utf-8")


def _uses_evaluate(path: Path) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return any(isinstance(node, ast.Import) and any(a.name == "evaluate" for a in node.names)
               for node in ast.walk(tree))


_MODULE_PATH = re.compile(r"^(convohub(?:\.[A-Za-z_]\w*)+)(?::\w+)?$")
#: Distributions a module needs at run time without importing them by name, keyed by the importing module
#: (a convohub module path or a third-party top-level name): transformers and sentence-transformers run
#: models on torch (an optional dependency of theirs), and transformers reads SmolLM2's GGUF through ``gguf``
#: when :mod:`convohub.models` converts it.
RUNTIME_COMPANIONS: dict[str, tuple[str, ...]] = {
    "convohub.models": ("gguf",),
    "transformers": ("torch",),
    "sentence_transformers": ("torch",),
}


def _package_file(module: str) -> Path | None:
    """The file of a convohub module or package (``__init__.py``), or None when there is none."""
    import convohub

    base = Path(convohub.__file__).parent.joinpath(*module.split(".")[1:])
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _file_module(path: Path) -> str:
    import convohub

    rel = path.resolve().relative_to(Path(convohub.__file__).parent.resolve()).with_suffix("")
    parts = [p for p in rel.parts if p != "__init__"]
    return ".".join(["convohub", *parts])


def _imports_of(path: Path, module: str | None) -> tuple[set[str], set[str]]:
    """(convohub modules, third-party top-level names) that ``path`` imports anywhere in its body.

    ``module`` is the file's own module path inside convohub (None for a Space file), used to resolve
    relative imports; ``from convohub.a import b`` counts ``convohub.a.b`` too when that is a module.
    """
    import sys

    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = None
    if module is not None:
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    ours: set[str] = set()
    theirs: set[str] = set()

    def add(name: str) -> None:
        if _is_convohub(name):
            ours.add(name)
        else:
            top = name.split(".")[0]
            if top and top not in sys.stdlib_module_names and top != "__future__":
                theirs.add(top)

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                if package is None:
                    continue
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                name = ".".join([*base, node.module] if node.module else base)
            else:
                name = node.module or ""
            add(name)
            if _is_convohub(name):
                ours.update(f"{name}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            match = _MODULE_PATH.match(node.value)
            if match:
                ours.add(match.group(1))
    return ours, theirs


def reached_distributions(space: Path) -> set[str]:
    """Normalised names of the distributions whose modules the Space's files, and every convohub module
    they reach, import (see the module docstring); modules of no installed distribution are left out."""
    seen: set[str] = set()
    todo: list[str] = []
    third: set[str] = set()
    for path in sorted(Path(space).glob("*.py")):
        ours, theirs = _imports_of(path, None)
        todo.extend(ours)
        third |= theirs
    companions: set[str] = set()
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        file = _package_file(module)
        if file is None:
            continue
        parent = module.rpartition(".")[0]
        if parent and parent != "convohub":
            todo.append(parent)  # a package's __init__ runs before its modules
        ours, theirs = _imports_of(file, _file_module(file))
        todo.extend(ours)
        third |= theirs
        companions.update(RUNTIME_COMPANIONS.get(module, ()))
    for top in third:
        companions.update(RUNTIME_COMPANIONS.get(top, ()))
    names = importlib.metadata.packages_distributions()
    found = {_normalise(dist) for top in third for dist in names.get(top, [])}
    return found | {_normalise(dist) for dist in companions}


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def export_convohub(space: Path, app_file: str) -> str:
    """Make an exported Space folder self-sufficient; returns ``"none"``, ``"inlined"`` or ``"package"``."""
    import convohub

    space = Path(space)
    requirements = space / "requirements.txt"
    lines = requirements.read_text(encoding="utf-8").splitlines()
    if not imports_convohub(space):
        return "none"
    own = [line for line in lines if line.strip() and requirement_name(line) != "convohub"]
    modules = _inlinable(space)
    if modules is not None:
        for path in sorted(space.glob("*.py")):
            _rewrite_imports(path, relative=path.name != app_file and _uses_evaluate(path))
        for module, file in modules.items():
            shutil.copy2(file, space / f"{_local_name(module)}.py")
            _rewrite_imports(space / f"{_local_name(module)}.py", relative=False)
        kept = [line for line in own if not line.lstrip().startswith("#")]  # the source's notes are about export
        requirements.write_text("\n".join([INLINED_NOTE, *kept]) + "\n", encoding="utf-8")
        return "inlined"
    shutil.copytree(Path(convohub.__file__).parent, space / "convohub",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    named = {requirement_name(line) for line in own}
    reached = reached_distributions(space)
    deps = [d for d in importlib.metadata.requires("convohub") or []
            if "extra ==" not in d and requirement_name(d) not in named
            and _normalise(requirement_name(d)) in reached]
    requirements.write_text("\n".join([*own, *deps]) + "\n", encoding="utf-8")
    return "package"
