"""Multi-core placement of embedding tables on an NPU-like target: index statistics,
an analytic cost model per (table, strategy, share, core), the skew-aware asymmetric mapper,
the symmetric / greedy baselines and the exact MILP optimum, plans as JSON, and the entry
points ``place`` / ``emulate_plan`` (``api.py``). docs/PLACEMENT.md."""
