"""Varuna Python helpers: export PyTorch models for the Varuna compiler."""

from .export import export

__all__ = ["export"]
