"""Start-up and the whole: `queuebox serve` (flags, config, logging,
signals), the server's parts built in order over a data directory
(`build.py`), and `queuebox wal cat`.

The one room that imports all the others; nothing imports it.

- `build.py`: The server's parts, built in order by plain code, in one place, and built
  again over a data directory loaded anew (a replica's in-process re-bootstrap)
- `serve.py`: `queuebox serve`
- `walcli.py`: `queuebox wal cat PATH...`
"""
