"""Varuna Python helpers: export PyTorch models for the Varuna compiler, and
read the weights a run trained back into them (varuna.checkpoint)."""

from . import checkpoint
from .export import export

__all__ = ["checkpoint", "export"]
