"""The latency lab: bench, profile, compare, scenarios and reports, against any MCP server.

``millimcp bench TARGET --tool NAME --args JSON`` and its siblings (see ``millimcp.lab.cli``).
TARGET is a Streamable HTTP URL (either protocol era) or a stdio command
(:mod:`millimcp.lab.target`); every command can write a Run file
(:mod:`millimcp.lab.results`) that the others read. Needs the ``lab`` extra
(``pip install 'millimcp[lab]'``); rich and hdrhistogram are imported only when used.

Where things are:

- the commands: ``bench``, ``profile/``, ``compare``, ``report/``, ``scenario``;
- the wire: ``http1`` (the one HTTP/1.1 response reader, sans I/O), ``timed_http`` and
  ``timed_stdio`` (the profiler's instrumented connections), ``loadgen/`` (bench's load
  generators: the loops, the lean HTTP path, the full Client path, the child processes);
- the numbers: ``recording`` (histograms that merge exactly), ``stats`` (bootstrap, U test),
  ``stages`` (a profiled call's stages), ``results`` (the Run file and the error kinds);
- scenarios: ``scenario_format`` (the file), ``scenario_runner`` (agents, schedules, the
  recording window and its cooldown).
"""
