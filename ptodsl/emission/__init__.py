"""Emission: Python syntax trees printed as the PyPTO module and the torch reference, and
the pictures of a plan."""
