"""The order-analysis MCP service of the case study (SEEDS S6), naive and tuned.

``orders.config`` holds the switches (one per S6.3 step) and the two presets, ``orders.schema``
the models, ``orders.seeding`` the seeding, ``orders.db`` the engines and the covering index,
``orders.recommender`` the external recommendation service, ``orders.auth`` the bearer
tokens, ``orders.server`` the MCP server. Run from ``examples/`` (or with it on
``PYTHONPATH``): ``python -m orders.server --preset tuned``.
"""
