"""Placement of a model's embedding clusters on the cores of a multi-core DAE target
(``configs/tmu8.toml``): shares of a cluster's batch, the program variants, the analytic cost
model, the mappers and plans (docs/PLACEMENT.md, "DAE cores")."""
