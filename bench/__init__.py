"""Benchmarks, each measured against a baseline in the same run: ``python -m bench`` runs them all.

A benchmark is a module ``bench/bench_<name>.py`` with a ``main()`` that prints its figures; the
runner (:mod:`bench.__main__`) finds every such module, in name order.
"""
