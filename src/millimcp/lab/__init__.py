"""The latency lab: bench, profile, compare, scenarios and reports, against any MCP server.

``millimcp bench TARGET --tool NAME --args JSON`` and its siblings (see ``millimcp.lab.cli``).
TARGET is a Streamable HTTP URL (either protocol era) or a stdio command
(:mod:`millimcp.lab.target`); every command can write a Run file
(:mod:`millimcp.lab.results`) that the others read. Needs the ``lab`` extra
(``pip install 'millimcp[lab]'``); rich and hdrhistogram are imported only when used.
"""
