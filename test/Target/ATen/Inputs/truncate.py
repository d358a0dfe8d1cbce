"""Truncate FILE to half its size (a torn weight file): truncate.py FILE"""
import os
import sys

path = sys.argv[1]
size = os.path.getsize(path)
with open(path, "r+b") as fh:
    fh.truncate(size // 2)
