"""Fakes for tests and scale benchmarks only; nothing in `kctl daemon` or the CLI imports them.

`fake_kubelet.FakeKubelet` stands in for node agents: it registers Node objects and moves
pods bound to them to Running/Ready (or Failed/Succeeded) without any container runtime,
so controller tests and benchmarks can drive thousands of pods on one machine.
"""
