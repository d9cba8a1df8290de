"""The IR levels (kernel program, forward program, plans), the op registry with its type
rules, and the IR verifier."""
