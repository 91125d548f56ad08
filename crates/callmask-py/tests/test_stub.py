"""The hand-written type stub ``_callmask.pyi`` against the native module it describes: every
class, function and constant the module exports is declared, every declared one exists, each
class's public methods and properties match both ways, and each exception derives from the
class the stub says (a method added to the Rust binding and not to the stub, or left in the
stub after a rename, fails here)."""

import ast
from pathlib import Path

import callmask._callmask as native

STUB = Path(__file__).resolve().parent.parent / "python" / "callmask" / "_callmask.pyi"


def classes_and_names() -> tuple:
    """The stub's public classes (name -> (base names, public member names)) and its other
    public top-level names."""
    classes: dict = {}
    names: set = set()
    for node in ast.parse(STUB.read_text()).body:
        if isinstance(node, ast.ClassDef):
            members = set()
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    members.add(item.name)
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    members.add(item.target.id)
            bases = [b.id for b in node.bases if isinstance(b, ast.Name)]
            classes[node.name] = (bases, {m for m in members if not m.startswith("_")})
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {k: v for k, v in classes.items() if not k.startswith("_")}, {
        n for n in names if not n.startswith("_")
    }


def test_the_stub_declares_what_the_module_exports():
    classes, names = classes_and_names()
    stub = set(classes) | names
    exported = {n for n in dir(native) if not n.startswith("_")}
    assert not exported - stub, f"not declared in {STUB.name}: {sorted(exported - stub)}"
    assert not stub - exported, f"declared in {STUB.name}, not native: {sorted(stub - exported)}"


def test_each_class_matches_the_stub():
    classes, _ = classes_and_names()
    for name, (bases, members) in classes.items():
        cls = getattr(native, name)
        if issubclass(cls, BaseException):
            # An exception's fields are set on each instance; its place in the hierarchy is
            # what the stub can be held to.
            assert [b.__name__ for b in cls.__bases__] == bases, (name, cls.__bases__, bases)
            continue
        public = {m for m in dir(cls) if not m.startswith("_")}
        assert members <= public, f"{name}: declared, not native: {sorted(members - public)}"
        assert public <= members, f"{name}: native, not declared: {sorted(public - members)}"
