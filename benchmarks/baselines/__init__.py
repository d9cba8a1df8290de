"""Hand-written PyPTO baselines, one module per `examples/*.pto`: what an engineer writes by
following the rule book (pypto-basics.md) literally. Each exposes `ModelNew` with the same
constructor and forward as ptodsl's generated module. Check them with
`ptodsl bench baselines.verify`."""
