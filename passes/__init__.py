"""Lowering passes. Each module holds one pass: a function from `ir.Kernel` to `ir.Kernel`."""
