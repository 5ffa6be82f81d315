"""The client-side command lines: `queuebox ping|tubes|stats|put|take|peek|...`,
the operator's task commands and `queuebox status`, and what they share (where
to connect, help and errors, text or JSON output and exit codes).

- `commands.py`: ping, tubes, stats, put, take, peek, create-tube, drop-tube
- `tasks.py`: tasks, ack, release, bury, kick, delete, truncate
- `options.py`: tube-options (retries, rate limit, buried retention)
- `schedules.py`: schedule add, list, pause, resume, delete
- `status.py`: the cluster as its instances see it
- `connect.py`: the one connection a command (or the pipeline's target) opens
- `args.py`: connection flags and argument types every command line shares
  (also the worker's, the bench's and the pipeline's)
- `output.py`: tables that fit the terminal, JSON, and exit codes

Built on the blocking client; nothing here imports the server.
"""
