"""The machinery every other room runs on: errors a call raises, logging, the
event loop's selection, the buffer and connection budgets, who hears of task
changes, group commit, and how a metric family is built.

It imports no other room of the server, and never knows a request, a call
name or a connection.

- `changes.py`: Who in this process hears of task changes, and the queue they hear them
  from
- `commit.py`: Group commit
- `durability.py`: What a reply waits for before it goes out, and who hears of each write
- `errors.py`: Errors a server-side function raises to answer a call with an IPROTO
  error
- `families.py`: Prometheus metric families, built one way for every room that shows numbers
  on /metrics
- `limits.py`: Limits that keep a few hostile sockets from costing everyone else
- `logs.py`: Logging setup, and the one rate limiter for log lines that can repeat
- `loop.py`: Event-loop selection, in one place, and ending a task for sure
- `slots.py`: Connection slots
- `syncs.py`: fsync mode's sync workers, and how their finished jobs get back to the loop
- `tls.py`: TLS: the certificate every listening port presents, and the ones this server
  dials with
"""
