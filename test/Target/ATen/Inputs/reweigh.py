"""Changes every byte of FILE, keeping its size (a weight file written again
with other weights after the model was imported): reweigh.py FILE"""
import sys

path = sys.argv[1]
with open(path, "r+b") as fh:
    data = fh.read()
    fh.seek(0)
    fh.write(bytes((b + 1) & 0xFF for b in data))
