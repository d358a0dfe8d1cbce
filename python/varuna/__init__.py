"""Varuna Python helpers: export PyTorch models for the Varuna compiler, and
read the weights a run trained back into them (varuna.checkpoint)."""

import sys as _sys

__all__ = ["checkpoint", "export"]

# varuna.checkpoint is imported on first use (PEP 562): `python -m
# varuna.checkpoint` imports this package first, and a submodule already
# imported here makes runpy warn (RuntimeWarning: found in sys.modules).
# varuna.export, the function, is bound here, since importing the submodule
# varuna.export first would bind the name to the module; only while `python
# -m` locates its module (sys.argv[0] is "-m" then) is it left to
# __getattr__ too.
if _sys.argv[:1] != ["-m"]:
    from .export import export


def __getattr__(name):
    # importlib, not `from . import`: that asks this function again.
    import importlib
    if name == "checkpoint":
        return importlib.import_module(".checkpoint", __name__)
    if name == "export":
        export = importlib.import_module(".export", __name__).export
        globals()["export"] = export
        return export
    raise AttributeError(f"module 'varuna' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
