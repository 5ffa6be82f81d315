"""`queuebox bench`: a load generator for queuebox or any Tarantool + queue server.

Built on `protocol/` only (never on the bundled client, whose conveniences
cost CPU per call). Modules, in the order a run uses them:

    cli.py        arguments, outputs, exit status
    scenarios.py  what each scenario puts and takes, split into phases
    bench.py      one scenario against one server (or two, --compare)
    runner.py     one phase over several processes; merging their results
    worker.py     one process's share of a phase
    roles.py      producer and consumer request loops
    api.py        modern / legacy queue calls, tube setup and statistics
    conn.py       the pipelined IPROTO connection
    frames.py     pre-encoded requests with patched SYNC / id / timestamp
    histogram.py  mergeable latency histograms, per-second counters
    cpu.py        server and client CPU time, server resident memory
    report.py     JSON shape, tables, progress bar
    plot.py       the optional PNG (matplotlib)
"""
