"""Every setting of a server: what it means, where its value comes from (the
TOML file, the environment, flags) and what `serve --help` says of it.

Pure reading and checking of values: nothing here opens a socket or a file
of the data directory.

- `config.py`: Every setting of a queuebox server, and the rules a set of them must keep
- `config_load.py`: Where a server's settings come from, and how the layers combine
- `config_values.py`: One setting's value read from what the user wrote
- `settings_help.py`: What `queuebox serve --help` says about each setting
"""
