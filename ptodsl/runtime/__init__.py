"""The runtime: settings, files and scratch folders, worker processes and the zygote, the
simulator and the interpreter."""
